/* MPI-4 large-count functions (the `_c` forms, MPI_Count counts and MPI_Aint displacements):
   point to point (blocking, nonblocking, persistent, sendrecv, matched receive, isendrecv), Get_count_c/Get_elements_c on a
   64-bit count, datatypes, packing, collectives (blocking, nonblocking, persistent, v forms),
   and, on viaduct only, a count past 32 bits giving MPI_ERR_COUNT where viaduct keeps 32-bit
   counts. */
#include "common.h"

#include <stdint.h>

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm comm = MPI_COMM_WORLD;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    CHECK(MPI_Get_library_version(lib, &liblen) == MPI_SUCCESS);
    int on_viaduct = strstr(lib, "viaduct") != NULL;
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    MPI_Status st;
    MPI_Count cnt = -1;

    /* Point to point around the ring. */
    int out[5], in[5];
    for (int k = 0; k < 5; k++) out[k] = rank * 10 + k;
    if (rank % 2 == 0) {
        CHECK(MPI_Send_c(out, 5, MPI_INT, right, 1, comm) == MPI_SUCCESS);
        CHECK(MPI_Recv_c(in, 5, MPI_INT, left, 1, comm, &st) == MPI_SUCCESS);
    } else {
        CHECK(MPI_Recv_c(in, 5, MPI_INT, left, 1, comm, &st) == MPI_SUCCESS);
        CHECK(MPI_Ssend_c(out, 5, MPI_INT, right, 1, comm) == MPI_SUCCESS);
    }
    CHECK(MPI_Get_count_c(&st, MPI_INT, &cnt) == MPI_SUCCESS);
    CHECK(cnt == 5);
    CHECK(MPI_Get_elements_c(&st, MPI_INT, &cnt) == MPI_SUCCESS);
    CHECK(cnt == 5);
    for (int k = 0; k < 5; k++) CHECK(in[k] == left * 10 + k);
    OK(rank, "send_c/recv_c got %d..%d, count %ld", in[0], in[4], (long)cnt);

    MPI_Request rq[2];
    CHECK(MPI_Irecv_c(in, 5, MPI_INT, left, 2, comm, &rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Isend_c(out, 3, MPI_INT, right, 2, comm, &rq[1]) == MPI_SUCCESS);
    MPI_Status sts[2];
    CHECK(MPI_Waitall(2, rq, sts) == MPI_SUCCESS);
    CHECK(MPI_Get_count_c(&sts[0], MPI_INT, &cnt) == MPI_SUCCESS);
    OK(rank, "isend_c/irecv_c count %ld first %d", (long)cnt, in[0]);

    CHECK(MPI_Recv_init_c(in, 5, MPI_INT, left, 3, comm, &rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Send_init_c(out, 4, MPI_INT, right, 3, comm, &rq[1]) == MPI_SUCCESS);
    for (int round = 0; round < 2; round++) {
        CHECK(MPI_Startall(2, rq) == MPI_SUCCESS);
        CHECK(MPI_Waitall(2, rq, sts) == MPI_SUCCESS);
    }
    CHECK(MPI_Get_count_c(&sts[0], MPI_INT, &cnt) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&rq[1]) == MPI_SUCCESS);
    OK(rank, "send_init_c/recv_init_c count %ld", (long)cnt);

    /* Matched probe and receive, and MPI_Isendrecv(_replace), with 64-bit counts. */
    {
        MPI_Message msg;
        int got[5] = {0};
        CHECK(MPI_Isend_c(out, 5, MPI_INT, right, 5, comm, &rq[1]) == MPI_SUCCESS);
        CHECK(MPI_Mprobe(left, 5, comm, &msg, &st) == MPI_SUCCESS);
        CHECK(MPI_Mrecv_c(got, 5, MPI_INT, &msg, &st) == MPI_SUCCESS);
        CHECK(MPI_Get_count_c(&st, MPI_INT, &cnt) == MPI_SUCCESS);
        CHECK(MPI_Wait(&rq[1], MPI_STATUS_IGNORE) == MPI_SUCCESS);
        OK(rank, "mrecv_c count %ld got %d..%d", (long)cnt, got[0], got[4]);
        CHECK(MPI_Isend_c(out, 2, MPI_INT, right, 6, comm, &rq[1]) == MPI_SUCCESS);
        CHECK(MPI_Mprobe(left, 6, comm, &msg, &st) == MPI_SUCCESS);
        CHECK(MPI_Imrecv_c(got, 5, MPI_INT, &msg, &rq[0]) == MPI_SUCCESS);
        CHECK(MPI_Waitall(2, rq, sts) == MPI_SUCCESS);
        CHECK(MPI_Get_count_c(&sts[0], MPI_INT, &cnt) == MPI_SUCCESS);
        OK(rank, "imrecv_c count %ld got %d", (long)cnt, got[1]);
        int a = -1, b = rank * 7;
        CHECK(MPI_Isendrecv_c(&b, 1, MPI_INT, right, 7, &a, 1, MPI_INT, left, 7, comm, &rq[0]) == MPI_SUCCESS);
        CHECK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE) == MPI_SUCCESS);
        int c = rank * 11;
        CHECK(MPI_Isendrecv_replace_c(&c, 1, MPI_INT, right, 8, left, 8, comm, &rq[0]) == MPI_SUCCESS);
        CHECK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE) == MPI_SUCCESS);
        OK(rank, "isendrecv_c got %d, isendrecv_replace_c got %d", a, c);
        MPI_Datatype hb;
        MPI_Count hd[2] = {0, 2 * (MPI_Count)sizeof(int)};
        CHECK(MPI_Type_create_hindexed_block_c(2, 1, hd, MPI_INT, &hb) == MPI_SUCCESS);
        CHECK(MPI_Type_commit(&hb) == MPI_SUCCESS);
        CHECK(MPI_Type_size_c(hb, &cnt) == MPI_SUCCESS);
        OK(rank, "hindexed_block_c size %ld", (long)cnt);
        CHECK(MPI_Type_free(&hb) == MPI_SUCCESS);
    }

    int sr = rank;
    CHECK(MPI_Sendrecv_c(&rank, 1, MPI_INT, right, 4, &sr, 1, MPI_INT, left, 4, comm, &st) == MPI_SUCCESS);
    int rep = rank * 3;
    CHECK(MPI_Sendrecv_replace_c(&rep, 1, MPI_INT, right, 5, left, 5, comm, &st) == MPI_SUCCESS);
    OK(rank, "sendrecv_c %d sendrecv_replace_c %d", sr, rep);

    /* A 64-bit count in a status: the `_c` forms give it, the int form MPI_UNDEFINED. */
    MPI_Status big;
    MPI_Count huge = ((MPI_Count)1 << 32) + 8;
    CHECK(MPI_Status_set_elements_x(&big, MPI_BYTE, huge) == MPI_SUCCESS);
    CHECK(MPI_Get_count_c(&big, MPI_BYTE, &cnt) == MPI_SUCCESS);
    int small = 0;
    CHECK(MPI_Get_count(&big, MPI_BYTE, &small) == MPI_SUCCESS);
    MPI_Count halves = -1;
    CHECK(MPI_Get_count_c(&big, MPI_SHORT, &halves) == MPI_SUCCESS);
    OK(rank, "get_count_c %ld (int form undefined: %d) in shorts %ld", (long)cnt,
       small == MPI_UNDEFINED, (long)halves);

    /* Datatypes. */
    MPI_Datatype vec, con, idx, st2;
    CHECK(MPI_Type_vector_c(3, 2, 4, MPI_INT, &vec) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&vec) == MPI_SUCCESS);
    MPI_Count size = 0, lb = -1, extent = -1;
    CHECK(MPI_Type_size_c(vec, &size) == MPI_SUCCESS);
    CHECK(MPI_Type_get_extent_c(vec, &lb, &extent) == MPI_SUCCESS);
    OK(rank, "vector_c size %ld lb %ld extent %ld", (long)size, (long)lb, (long)extent);
    CHECK(MPI_Type_contiguous_c(3, MPI_DOUBLE, &con) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&con) == MPI_SUCCESS);
    MPI_Count bl[2] = {1, 2}, dis[2] = {4, 0};
    CHECK(MPI_Type_indexed_c(2, bl, dis, MPI_INT, &idx) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&idx) == MPI_SUCCESS);
    MPI_Count sbl[2] = {1, 1}, sdis[2] = {0, 8};
    MPI_Datatype sty[2] = {MPI_INT, MPI_DOUBLE};
    CHECK(MPI_Type_create_struct_c(2, sbl, sdis, sty, &st2) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&st2) == MPI_SUCCESS);
    MPI_Count s1, s2, s3, tlb, text;
    CHECK(MPI_Type_size_c(con, &s1) == MPI_SUCCESS);
    CHECK(MPI_Type_size_c(idx, &s2) == MPI_SUCCESS);
    CHECK(MPI_Type_size_c(st2, &s3) == MPI_SUCCESS);
    CHECK(MPI_Type_get_true_extent_c(idx, &tlb, &text) == MPI_SUCCESS);
    OK(rank, "contiguous_c %ld indexed_c %ld (true lb %ld extent %ld) struct_c %ld", (long)s1,
       (long)s2, (long)tlb, (long)text, (long)s3);

    /* Vector through the ring: the elements land with the stride. */
    int vs[12], vr[12];
    for (int k = 0; k < 12; k++) { vs[k] = rank * 100 + k; vr[k] = -1; }
    CHECK(MPI_Sendrecv_c(vs, 1, vec, right, 6, vr, 1, vec, left, 6, comm, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_elements_c(&st, vec, &cnt) == MPI_SUCCESS);
    OK(rank, "vector sendrecv %d %d %d %d elements %ld", vr[0], vr[1], vr[4], vr[9], (long)cnt);

    /* Packing. */
    char packed[64];
    MPI_Count pos = 0, psize = 0;
    double dv[3] = {1.5, 2.5, 3.5}, du[3] = {0, 0, 0};
    CHECK(MPI_Pack_size_c(3, MPI_DOUBLE, comm, &psize) == MPI_SUCCESS);
    CHECK(MPI_Pack_c(dv, 3, MPI_DOUBLE, packed, sizeof packed, &pos, comm) == MPI_SUCCESS);
    CHECK(MPI_Pack_c(&rank, 1, MPI_INT, packed, sizeof packed, &pos, comm) == MPI_SUCCESS);
    MPI_Count upos = 0;
    int urank = -1;
    CHECK(MPI_Unpack_c(packed, pos, &upos, du, 3, MPI_DOUBLE, comm) == MPI_SUCCESS);
    CHECK(MPI_Unpack_c(packed, pos, &upos, &urank, 1, MPI_INT, comm) == MPI_SUCCESS);
    CHECK(du[2] == 3.5 && urank == rank && upos == pos);
    MPI_Count bigpack = 0;
    CHECK(MPI_Pack_size_c((MPI_Count)1 << 30, MPI_DOUBLE, comm, &bigpack) == MPI_SUCCESS);
    OK(rank, "pack_c position %ld pack_size_c %ld, of 2^30 doubles %ld", (long)pos, (long)psize,
       (long)bigpack);

    /* Collectives. */
    int b[3] = {0, 0, 0};
    if (rank == 0) { b[0] = 7; b[1] = 8; b[2] = 9; }
    CHECK(MPI_Bcast_c(b, 3, MPI_INT, 0, comm) == MPI_SUCCESS);
    int one = rank + 1, sum = 0, mx = 0, scan = 0;
    CHECK(MPI_Allreduce_c(&one, &sum, 1, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS);
    CHECK(MPI_Reduce_c(&one, &mx, 1, MPI_INT, MPI_MAX, 0, comm) == MPI_SUCCESS);
    CHECK(MPI_Scan_c(&one, &scan, 1, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS);
    OK(rank, "bcast_c %d %d %d allreduce_c %d reduce_c %d scan_c %d", b[0], b[1], b[2], sum,
       rank == 0 ? mx : 0, scan);

    int all[4] = {-1, -1, -1, -1}, g[4] = {-1, -1, -1, -1}, a2a_s[4], a2a_r[4];
    CHECK(MPI_Allgather_c(&rank, 1, MPI_INT, all, 1, MPI_INT, comm) == MPI_SUCCESS);
    CHECK(MPI_Gather_c(&rank, 1, MPI_INT, g, 1, MPI_INT, n - 1, comm) == MPI_SUCCESS);
    for (int k = 0; k < n; k++) a2a_s[k] = rank * 10 + k;
    CHECK(MPI_Alltoall_c(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, comm) == MPI_SUCCESS);
    int sc = -1;
    CHECK(MPI_Scatter_c(a2a_s, 1, MPI_INT, &sc, 1, MPI_INT, 0, comm) == MPI_SUCCESS);
    OK(rank, "allgather_c last %d gather_c %d alltoall_c %d %d scatter_c %d", all[n - 1],
       rank == n - 1 ? g[n - 1] : -1, a2a_r[0], a2a_r[n - 1], sc);

    MPI_Request r1;
    int isum = 0;
    CHECK(MPI_Iallreduce_c(&one, &isum, 1, MPI_INT, MPI_SUM, comm, &r1) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r1, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    int pb = 0;
    CHECK(MPI_Bcast_init_c(&pb, 1, MPI_INT, 0, comm, MPI_INFO_NULL, &r1) == MPI_SUCCESS);
    int pbs = 0;
    for (int round = 1; round <= 2; round++) {
        if (rank == 0) pb = round * 11;
        CHECK(MPI_Start(&r1) == MPI_SUCCESS);
        CHECK(MPI_Wait(&r1, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        pbs += pb;
    }
    CHECK(MPI_Request_free(&r1) == MPI_SUCCESS);
    OK(rank, "iallreduce_c %d bcast_init_c %d", isum, pbs);

    /* v forms: rank k contributes k+1 ints. */
    MPI_Count rc[4], ds[4];
    MPI_Count tot = 0;
    for (int k = 0; k < n; k++) { rc[k] = k + 1; ds[k] = tot; tot += k + 1; }
    int mine[4], gv[10], agv[10];
    for (int k = 0; k <= rank; k++) mine[k] = rank * 10 + k;
    CHECK(MPI_Allgatherv_c(mine, rank + 1, MPI_INT, agv, rc, ds, MPI_INT, comm) == MPI_SUCCESS);
    for (int k = 0; k < 10; k++) gv[k] = -1;
    CHECK(MPI_Gatherv_c(mine, rank + 1, MPI_INT, gv, rank == 0 ? rc : NULL,
                        rank == 0 ? ds : NULL, MPI_INT, 0, comm) == MPI_SUCCESS);
    int scv[4] = {-1, -1, -1, -1};
    CHECK(MPI_Scatterv_c(agv, rc, ds, MPI_INT, scv, rank + 1, MPI_INT, 0, comm) == MPI_SUCCESS);
    OK(rank, "allgatherv_c %d %d gatherv_c %d scatterv_c %d %d", agv[0], agv[tot - 1],
       rank == 0 ? gv[tot - 1] : -1, scv[0], scv[rank]);

    MPI_Count ac[4], ad[4];
    int as[4], ar[4];
    for (int k = 0; k < n; k++) { ac[k] = 1; ad[k] = k; as[k] = rank * 100 + k; ar[k] = -1; }
    CHECK(MPI_Alltoallv_c(as, ac, ad, MPI_INT, ar, ac, ad, MPI_INT, comm) == MPI_SUCCESS);
    int rsv[10], rsr[4] = {-1, -1, -1, -1};
    for (int k = 0; k < tot; k++) rsv[k] = k;
    CHECK(MPI_Reduce_scatter_c(rsv, rsr, rc, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS);
    MPI_Request r2;
    int iagv[10];
    CHECK(MPI_Iallgatherv_c(mine, rank + 1, MPI_INT, iagv, rc, ds, MPI_INT, comm, &r2) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r2, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    OK(rank, "alltoallv_c %d %d reduce_scatter_c %d iallgatherv_c %d", ar[0], ar[n - 1], rsr[0],
       iagv[tot - 1]);

    /* Viaduct-specific: the calls whose internals carry 32-bit counts refuse a count past
       them with MPI_ERR_COUNT and send nothing (MPICH takes such counts, so this runs on
       viaduct only and prints nothing). */
    if (on_viaduct) {
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        MPI_Count past = ((MPI_Count)1 << 31);
        /* (Point-to-point calls, persistent ones included, broadcasts, gathers, scatters,
           allgathers and all-to-alls take such counts: see lcount.c.) */
        CHECK_RC(MPI_Reduce_c(out, packed, past, MPI_BYTE, MPI_BOR, 0, comm), MPI_ERR_COUNT);
        CHECK_RC(MPI_Allreduce_c(out, packed, past, MPI_BYTE, MPI_BOR, comm), MPI_ERR_COUNT);
        MPI_Count badc[4] = {1, 1, 1, 1};
        badc[n - 1] = past;
        CHECK_RC(MPI_Allgatherv_c(mine, 1, MPI_INT, agv, badc, ds, MPI_INT, comm), MPI_ERR_COUNT);
        MPI_Datatype t;
        MPI_Count sizes = past, sub = 1, start = 0;
        CHECK_RC(MPI_Type_create_subarray_c(1, &sizes, &sub, &start, MPI_ORDER_C, MPI_INT, &t), MPI_ERR_COUNT);
        MPI_Count p2 = past;
        CHECK_RC(MPI_Pack_c(out, 1, MPI_INT, packed, sizeof packed, &p2, comm), MPI_ERR_COUNT);
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
        /* The ring is still in step: nothing of the refused sends arrived. */
        int flag = 1;
        CHECK(MPI_Iprobe(left, 9, comm, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(flag == 0);
    }
    CHECK(MPI_Barrier(comm) == MPI_SUCCESS);

    MPI_Type_free(&vec);
    MPI_Type_free(&con);
    MPI_Type_free(&idx);
    MPI_Type_free(&st2);
    OK(rank, "done");
    MPI_Finalize();
    return 0;
}
