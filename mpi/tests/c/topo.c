/* Topologies: MPI_Dims_create, Cartesian communicators (get, rank, coords, shift, sub),
   graphs, distributed graphs (adjacent), MPI_Topo_test, neighbourhood collectives (allgather,
   alltoall, allgatherv, alltoallv, blocking and nonblocking; a periodic ring of one or two
   ranks, whose two neighbours are the same rank), and their errors. */
#include "common.h"

int main(int argc, char **argv) {
    int wrank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    /* Dims_create: fixed values kept, the rest balanced and non-increasing. */
    int d2[2] = {0, 0}, d3[3] = {0, 0, 0}, dfix[3] = {0, 3, 0};
    CHECK(MPI_Dims_create(6, 2, d2) == MPI_SUCCESS && d2[0] == 3 && d2[1] == 2);
    CHECK(MPI_Dims_create(24, 3, d3) == MPI_SUCCESS && d3[0] == 4 && d3[1] == 3 && d3[2] == 2);
    CHECK(MPI_Dims_create(12, 3, dfix) == MPI_SUCCESS && dfix[0] == 2 && dfix[1] == 3 && dfix[2] == 2);
    int d1[3] = {0, 0, 0};
    CHECK(MPI_Dims_create(16, 3, d1) == MPI_SUCCESS && d1[0] == 4 && d1[1] == 2 && d1[2] == 2);
    int d7[2] = {0, 0};
    CHECK(MPI_Dims_create(7, 2, d7) == MPI_SUCCESS && d7[0] == 7 && d7[1] == 1);

    int topo;
    CHECK(MPI_Topo_test(MPI_COMM_WORLD, &topo) == MPI_SUCCESS && topo == MPI_UNDEFINED);

    /* A 1-D ring over every rank, and a 2-D grid (n x 1 or 2 x n/2), non-periodic in dim 1. */
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    MPI_Dims_create(n, 2, dims);
    MPI_Comm cart;
    CHECK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &cart) == MPI_SUCCESS);
    CHECK(MPI_Topo_test(cart, &topo) == MPI_SUCCESS && topo == MPI_CART);
    int nd, gd[2], gp[2], gc[2], r;
    CHECK(MPI_Cartdim_get(cart, &nd) == MPI_SUCCESS && nd == 2);
    CHECK(MPI_Cart_get(cart, 2, gd, gp, gc) == MPI_SUCCESS);
    CHECK(gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 1 && gp[1] == 0);
    MPI_Comm_rank(cart, &r);
    CHECK(gc[0] == r / dims[1] && gc[1] == r % dims[1]);
    int back;
    CHECK(MPI_Cart_rank(cart, gc, &back) == MPI_SUCCESS && back == r);
    int wrapped[2] = {gc[0] + dims[0], gc[1]};
    CHECK(MPI_Cart_rank(cart, wrapped, &back) == MPI_SUCCESS && back == r);
    int cc[2];
    CHECK(MPI_Cart_coords(cart, n - 1, 2, cc) == MPI_SUCCESS && cc[0] == dims[0] - 1 && cc[1] == dims[1] - 1);
    int src, dst;
    CHECK(MPI_Cart_shift(cart, 0, 1, &src, &dst) == MPI_SUCCESS);
    CHECK(src == ((gc[0] - 1 + dims[0]) % dims[0]) * dims[1] + gc[1]);
    CHECK(dst == ((gc[0] + 1) % dims[0]) * dims[1] + gc[1]);
    CHECK(MPI_Cart_shift(cart, 1, 1, &src, &dst) == MPI_SUCCESS);
    CHECK(src == (gc[1] == 0 ? MPI_PROC_NULL : r - 1));
    CHECK(dst == (gc[1] == dims[1] - 1 ? MPI_PROC_NULL : r + 1));

    /* Neighbor_allgather on the grid: the ranks of the 4 neighbours (PROC_NULL blocks kept). */
    int nb[4] = {-5, -5, -5, -5};
    CHECK(MPI_Neighbor_allgather(&r, 1, MPI_INT, nb, 1, MPI_INT, cart) == MPI_SUCCESS);
    int s0, d0, s1, d1n;
    MPI_Cart_shift(cart, 0, 1, &s0, &d0);
    MPI_Cart_shift(cart, 1, 1, &s1, &d1n);
    CHECK(nb[0] == s0 && nb[1] == d0);
    CHECK(nb[2] == (s1 == MPI_PROC_NULL ? -5 : s1) && nb[3] == (d1n == MPI_PROC_NULL ? -5 : d1n));

    /* Neighbor_alltoall: block j carries (r, j); what comes from the negative neighbour is its
       block for the positive one and the other way round. */
    int sb[8], rb[8];
    for (int j = 0; j < 4; j++) { sb[2 * j] = r; sb[2 * j + 1] = j; rb[2 * j] = rb[2 * j + 1] = -5; }
    CHECK(MPI_Neighbor_alltoall(sb, 2, MPI_INT, rb, 2, MPI_INT, cart) == MPI_SUCCESS);
    if (dims[0] > 2) {
        CHECK(rb[0] == s0 && rb[1] == 1);
        CHECK(rb[2] == d0 && rb[3] == 0);
    }
    if (s1 != MPI_PROC_NULL) CHECK(rb[4] == s1 && rb[5] == 3);
    if (d1n != MPI_PROC_NULL) CHECK(rb[6] == d1n && rb[7] == 2);

    /* Cart_sub: rows (dim 1 kept). */
    int keep[2] = {0, 1};
    MPI_Comm row;
    CHECK(MPI_Cart_sub(cart, keep, &row) == MPI_SUCCESS);
    int rs, rr;
    MPI_Comm_size(row, &rs);
    MPI_Comm_rank(row, &rr);
    CHECK(rs == dims[1] && rr == gc[1]);
    CHECK(MPI_Cartdim_get(row, &nd) == MPI_SUCCESS && nd == 1);
    int rowsum = 0;
    MPI_Allreduce(&r, &rowsum, 1, MPI_INT, MPI_SUM, row);
    CHECK(rowsum == gc[0] * dims[1] * dims[1] + dims[1] * (dims[1] - 1) / 2);

    /* A dup keeps the topology. */
    MPI_Comm cd;
    CHECK(MPI_Comm_dup(cart, &cd) == MPI_SUCCESS);
    CHECK(MPI_Topo_test(cd, &topo) == MPI_SUCCESS && topo == MPI_CART);
    CHECK(MPI_Cart_get(cd, 2, gd, gp, gc) == MPI_SUCCESS && gd[0] == dims[0]);
    MPI_Comm_free(&cd);

    /* A grid smaller than the communicator: the rank left out gets MPI_COMM_NULL. */
    MPI_Comm small;
    int one[1] = {n - 1}, per1[1] = {0};
    if (n > 1) {
        CHECK(MPI_Cart_create(MPI_COMM_WORLD, 1, one, per1, 0, &small) == MPI_SUCCESS);
        CHECK((wrank == n - 1) == (small == MPI_COMM_NULL));
        if (small != MPI_COMM_NULL) MPI_Comm_free(&small);
    }

    /* A distributed graph: each rank hears from its left neighbour and rank 0 (once), and
       speaks to its right neighbour and rank 0, weighted. */
    int left = (wrank - 1 + n) % n, right = (wrank + 1) % n;
    int srcs[2] = {left, 0}, sw[2] = {1, 2}, dsts[2] = {right, 0}, dw[2] = {3, 4};
    MPI_Comm g;
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, sw, 2, dsts, dw, MPI_INFO_NULL, 0, &g) == MPI_SUCCESS);
    CHECK(MPI_Topo_test(g, &topo) == MPI_SUCCESS && topo == MPI_DIST_GRAPH);
    int indeg, outdeg, weighted;
    CHECK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted) == MPI_SUCCESS);
    CHECK(indeg == 2 && outdeg == 2 && weighted);
    int gs[2], gsw[2], gdst[2], gdw[2];
    CHECK(MPI_Dist_graph_neighbors(g, 2, gs, gsw, 2, gdst, gdw) == MPI_SUCCESS);
    CHECK(gs[0] == left && gs[1] == 0 && gsw[1] == 2 && gdst[0] == right && gdw[1] == 4);
    /* Every rank sends to rank 0, so rank 0 hears from everyone: the graph must be consistent.
       Build it so: rank 0's sources are every rank (each twice where the lists repeat). */
    MPI_Comm_free(&g);
    int *allsrc = malloc(2 * n * sizeof(int)), ns = 0;
    if (wrank == 0) {
        for (int i = 0; i < n; i++) allsrc[ns++] = i;     /* from each rank's "to 0" */
        allsrc[ns++] = left;                                /* from the left's "to right" */
    } else {
        allsrc[ns++] = left;
    }
    int ndst = 0, mydst[2];
    mydst[ndst++] = right;
    mydst[ndst++] = 0;
    CHECK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, ns, allsrc, MPI_UNWEIGHTED, ndst, mydst, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g) == MPI_SUCCESS);
    CHECK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted) == MPI_SUCCESS && !weighted);
    /* Alltoall on it: block 0 to the right neighbour, block 1 to rank 0. Rank 0 sends to itself
       twice when n == 1 or right == 0; the k-th message between two ranks fills the k-th
       appearance of the sender in the receiver's sources. */
    int out2[2] = {wrank * 10 + 1, wrank * 10 + 2};
    int *in2 = malloc(ns * sizeof(int));
    CHECK(MPI_Neighbor_alltoall(out2, 1, MPI_INT, in2, 1, MPI_INT, g) == MPI_SUCCESS);
    long sum = 0;
    for (int i = 0; i < ns; i++) sum += in2[i];
    if (wrank != 0) CHECK(in2[0] == left * 10 + 1);
    else {
        long want = 0;
        for (int i = 0; i < n; i++) want += i * 10 + 2;
        want += left * 10 + 1;
        CHECK(sum == want);
    }
    MPI_Comm_free(&g);
    free(allsrc);
    free(in2);

    /* Dist_graph_create: rank 0 gives every edge of a ring i -> i+1 (weight i). */
    int *dsrc = malloc(n * sizeof(int)), *ddeg = malloc(n * sizeof(int));
    int *ddst = malloc(n * sizeof(int)), *dwt = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) { dsrc[i] = i; ddeg[i] = 1; ddst[i] = (i + 1) % n; dwt[i] = i; }
    CHECK(MPI_Dist_graph_create(MPI_COMM_WORLD, wrank == 0 ? n : 0, dsrc, ddeg, ddst, dwt, MPI_INFO_NULL, 0, &g) == MPI_SUCCESS);
    CHECK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted) == MPI_SUCCESS);
    CHECK(indeg == 1 && outdeg == 1 && weighted);
    CHECK(MPI_Dist_graph_neighbors(g, 1, gs, gsw, 1, gdst, gdw) == MPI_SUCCESS);
    CHECK(gs[0] == left && gsw[0] == left && gdst[0] == right && gdw[0] == wrank);
    int from = -5;
    CHECK(MPI_Neighbor_allgather(&wrank, 1, MPI_INT, &from, 1, MPI_INT, g) == MPI_SUCCESS && from == left);
    MPI_Comm_free(&g);
    free(dsrc);
    free(ddeg);
    free(ddst);
    free(dwt);

    /* A graph (MPI-1): a ring, each node linked to its left and right neighbours. */
    int *gidx = malloc(n * sizeof(int)), *gedg = malloc(2 * n * sizeof(int));
    for (int i = 0; i < n; i++) {
        gidx[i] = 2 * (i + 1);
        gedg[2 * i] = (i - 1 + n) % n;
        gedg[2 * i + 1] = (i + 1) % n;
    }
    MPI_Comm gr;
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, n, gidx, gedg, 0, &gr) == MPI_SUCCESS);
    CHECK(MPI_Topo_test(gr, &topo) == MPI_SUCCESS && topo == MPI_GRAPH);
    int gnn, gne, gcount, gnb[2], gi2[64], ge2[128];
    CHECK(MPI_Graphdims_get(gr, &gnn, &gne) == MPI_SUCCESS && gnn == n && gne == 2 * n);
    CHECK(MPI_Graph_get(gr, n, 2 * n, gi2, ge2) == MPI_SUCCESS && gi2[n - 1] == 2 * n && ge2[1] == 1 % n);
    CHECK(MPI_Graph_neighbors_count(gr, wrank, &gcount) == MPI_SUCCESS && gcount == 2);
    CHECK(MPI_Graph_neighbors(gr, wrank, 2, gnb) == MPI_SUCCESS && gnb[0] == left && gnb[1] == right);
    int gmap;
    CHECK(MPI_Graph_map(MPI_COMM_WORLD, n, gidx, gedg, &gmap) == MPI_SUCCESS && gmap == wrank);
    int gv[2] = {-5, -5};
    CHECK(MPI_Neighbor_allgather(&wrank, 1, MPI_INT, gv, 1, MPI_INT, gr) == MPI_SUCCESS);
    CHECK(gv[0] == left && gv[1] == right);
    /* Neighbor_allgatherv: the left's one int lands at 3, the right's at 0. */
    int vc[2] = {1, 1}, vd[2] = {3, 0}, vb[4] = {-5, -5, -5, -5};
    CHECK(MPI_Neighbor_allgatherv(&wrank, 1, MPI_INT, vb, vc, vd, MPI_INT, gr) == MPI_SUCCESS);
    CHECK(vb[3] == left && vb[0] == right && vb[1] == -5 && vb[2] == -5);
    /* Neighbor_alltoallv: 1 int to the left, 2 to the right. */
    int asc[2] = {1, 2}, asd[2] = {0, 1}, asb[3] = {wrank * 10, wrank * 10 + 1, wrank * 10 + 2};
    int arc[2] = {2, 1}, ard[2] = {0, 2}, arb[3] = {-5, -5, -5};
    if (n > 2) {
        CHECK(MPI_Neighbor_alltoallv(asb, asc, asd, MPI_INT, arb, arc, ard, MPI_INT, gr) == MPI_SUCCESS);
        /* From the left: what it sent to its right (2 ints); from the right: 1 int. */
        CHECK(arb[0] == left * 10 + 1 && arb[1] == left * 10 + 2 && arb[2] == right * 10);
    }
    /* The same through a pointer past the buffer: displacements -1 and -4 (below it). */
    int negd[2] = {-1, -4};
    for (int k = 0; k < 4; k++) vb[k] = -5;
    CHECK(MPI_Neighbor_allgatherv(&wrank, 1, MPI_INT, vb + 4, vc, negd, MPI_INT, gr) == MPI_SUCCESS);
    CHECK(vb[3] == left && vb[0] == right && vb[1] == -5 && vb[2] == -5);
    if (n > 2) {
        /* Neighbor_alltoallv from and into pointers past the buffers (negative displacements). */
        int sd2[2] = {-3, -2}, rd2[2] = {-3, -1}, rb2[3] = {-5, -5, -5};
        CHECK(MPI_Neighbor_alltoallv(asb + 3, asc, sd2, MPI_INT, rb2 + 3, arc, rd2, MPI_INT, gr) == MPI_SUCCESS);
        CHECK(rb2[0] == left * 10 + 1 && rb2[1] == left * 10 + 2 && rb2[2] == right * 10);
    }
    OK(wrank, "neighbour v collectives with negative displacements");
    /* The nonblocking forms, all outstanding at once, then tested until done. */
    {
        int ga[2] = {-5, -5}, gv2[4] = {-5, -5, -5, -5}, gt[2] = {-5, -5};
        int ts[2] = {wrank * 10, wrank * 10 + 1};
        int ar2[3] = {-5, -5, -5};
        MPI_Request nr[4];
        CHECK(MPI_Ineighbor_allgather(&wrank, 1, MPI_INT, ga, 1, MPI_INT, gr, &nr[0]) == MPI_SUCCESS);
        CHECK(MPI_Ineighbor_allgatherv(&wrank, 1, MPI_INT, gv2, vc, vd, MPI_INT, gr, &nr[1]) == MPI_SUCCESS);
        CHECK(MPI_Ineighbor_alltoall(ts, 1, MPI_INT, gt, 1, MPI_INT, gr, &nr[2]) == MPI_SUCCESS);
        int nreq = 3;
        if (n > 2) {
            CHECK(MPI_Ineighbor_alltoallv(asb, asc, asd, MPI_INT, ar2, arc, ard, MPI_INT, gr, &nr[3]) == MPI_SUCCESS);
            nreq = 4;
        }
        int alldone = 0;
        while (!alldone) CHECK(MPI_Testall(nreq, nr, &alldone, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(ga[0] == left && ga[1] == right);
        CHECK(gv2[3] == left && gv2[0] == right && gv2[1] == -5);
        if (n > 2) {
            /* From the left its block for the right, from the right its block for the left. */
            CHECK(gt[0] == left * 10 + 1 && gt[1] == right * 10);
            CHECK(ar2[0] == left * 10 + 1 && ar2[1] == left * 10 + 2 && ar2[2] == right * 10);
        }
    }
    MPI_Comm_free(&gr);
    free(gidx);
    free(gedg);

    /* Errors. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN);
    int big[1] = {n + 1}, bad[2] = {-1, 0}, dz[2] = {0, 0};
    MPI_Comm x;
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, big, per1, 0, &x), MPI_ERR_ARG);
    CHECK_RC(MPI_Cartdim_get(MPI_COMM_WORLD, &nd), MPI_ERR_TOPOLOGY);
    CHECK_RC(MPI_Cart_coords(cart, n, 2, cc), MPI_ERR_RANK);
    CHECK_RC(MPI_Dims_create(5, 2, (int[]){2, 0}), MPI_ERR_DIMS);
    CHECK_RC(MPI_Dims_create(4, 2, bad), MPI_ERR_DIMS);
    CHECK_RC(MPI_Dims_create(4, -1, dz), MPI_ERR_ARG);
    CHECK_RC(MPI_Dist_graph_neighbors_count(cart, &indeg, &outdeg, &weighted), MPI_ERR_TOPOLOGY);
    CHECK_RC(MPI_Graphdims_get(cart, &gnn, &gne), MPI_ERR_TOPOLOGY);
    int far[2] = {0, dims[1]};
    CHECK_RC(MPI_Cart_rank(cart, far, &back), MPI_ERR_ARG);
    MPI_Comm_free(&row);
    MPI_Comm_free(&cart);
    OK(wrank, "topologies ok, grid %d x %d", dims[0], dims[1]);
    /* A periodic ring of all ranks: the block sent to the rank below arrives in that rank's
       slot for the rank above, and the other way round, also at 1 and 2 ranks, where both
       neighbours are the same rank. */
    {
        MPI_Comm ring;
        int periodic = 1, me, sb[2], rb[2] = {-1, -1};
        CHECK(MPI_Cart_create(MPI_COMM_WORLD, 1, &n, &periodic, 0, &ring) == MPI_SUCCESS);
        CHECK(MPI_Comm_rank(ring, &me) == MPI_SUCCESS);
        sb[0] = 100 + me;  /* to the rank below */
        sb[1] = 200 + me;  /* to the rank above */
        CHECK(MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, ring) == MPI_SUCCESS);
        CHECK(rb[0] == 200 + (me + n - 1) % n && rb[1] == 100 + (me + 1) % n);
        OK(wrank, "ring neighbour alltoall: from below %d, from above %d", rb[0], rb[1]);
        CHECK(MPI_Comm_free(&ring) == MPI_SUCCESS);
    }
    MPI_Finalize();
    return 0;
}
