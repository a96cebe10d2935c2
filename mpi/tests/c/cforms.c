/* Large-count forms: MPI_Op_create_c (a non-commutative operation on 2x2 integer matrices,
   combined in rank order, and a commutative one, both given MPI_Count lengths), and the
   persistent v/w collectives' _c forms (MPI_Gatherv_init_c, MPI_Scatterv_init_c,
   MPI_Allgatherv_init_c, MPI_Alltoallv_init_c, MPI_Alltoallw_init_c,
   MPI_Reduce_scatter_init_c, MPI_Neighbor_allgatherv_init_c, MPI_Neighbor_alltoallv_init_c,
   MPI_Neighbor_alltoallw_init_c), each started twice with new data. */
#include "common.h"

static long calls;

/* inout = in x inout (2x2 matrices of ints, row major): not commutative. */
static void matmul(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (MPI_Count i = 0; i < *len; i++, a += 4, b += 4) {
        int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
                    a[2] * b[1] + a[3] * b[3]};
        memcpy(b, c, sizeof c);
    }
    calls++;
}

static void sum(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
    CHECK(*dt == MPI_LONG);
    long *a = in, *b = inout;
    for (MPI_Count i = 0; i < *len; i++) b[i] += a[i];
}

static void mat_of(int r, int m[4]) {
    m[0] = 1;
    m[1] = r + 1;
    m[2] = 0;
    m[3] = 1 + (r % 2);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Status st;

    /* MPI_Op_create_c. */
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_INT, &mat);
    MPI_Type_commit(&mat);
    MPI_Op op;
    CHECK(MPI_Op_create_c(matmul, 0, &op) == MPI_SUCCESS);
    int commute = -1;
    CHECK(MPI_Op_commutative(op, &commute) == MPI_SUCCESS && commute == 0);
    int mine[8], got[8], want[4] = {1, 0, 0, 1};
    mat_of(rank, mine);
    mat_of(rank + 7, mine + 4);
    for (int r = 0; r < size; r++) {
        int m[4], c[4];
        mat_of(r, m);
        c[0] = want[0] * m[0] + want[1] * m[2];
        c[1] = want[0] * m[1] + want[1] * m[3];
        c[2] = want[2] * m[0] + want[3] * m[2];
        c[3] = want[2] * m[1] + want[3] * m[3];
        memcpy(want, c, sizeof c);
    }
    CHECK(MPI_Allreduce(mine, got, 2, mat, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(memcmp(got, want, sizeof want) == 0);
    memset(got, 0, sizeof got);
    CHECK(MPI_Reduce(mine, got, 2, mat, op, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (rank == 0) CHECK(memcmp(got, want, sizeof want) == 0);
    CHECK(size == 1 || calls > 0 || rank != 0);
    CHECK(MPI_Op_free(&op) == MPI_SUCCESS && op == MPI_OP_NULL);
    MPI_Op add;
    CHECK(MPI_Op_create_c(sum, 1, &add) == MPI_SUCCESS);
    long lv[3] = {rank, 2 * rank, 1}, ls[3];
    CHECK(MPI_Allreduce(lv, ls, 3, MPI_LONG, add, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(ls[0] == (long)size * (size - 1) / 2 && ls[1] == 2 * ls[0] && ls[2] == size);
    MPI_Op_free(&add);
    OK(rank, "MPI_Op_create_c: rank-order matrix product and a sum");

    /* Persistent v collectives, _c forms: rank r contributes r + 1 ints. */
    MPI_Count *counts = malloc(size * sizeof(MPI_Count));
    MPI_Aint *displs = malloc(size * sizeof(MPI_Aint));
    int total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r + 1;
        displs[r] = total;
        total += r + 1;
    }
    int send[64], *recv = malloc(total * sizeof(int) * (size_t)size + 64);
    MPI_Request rq[4];
    CHECK(MPI_Gatherv_init_c(send, rank + 1, MPI_INT, recv, counts, displs, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Allgatherv_init_c(send, rank + 1, MPI_INT, recv + total, counts, displs, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]) == MPI_SUCCESS);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i <= rank; i++) send[i] = 1000 * round + 10 * rank + i;
        memset(recv, 0, 2 * total * sizeof(int));
        CHECK(MPI_Startall(2, rq) == MPI_SUCCESS);
        CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        for (int r = 0; r < size; r++)
            for (int i = 0; i <= r; i++) {
                if (rank == 0) CHECK(recv[displs[r] + i] == 1000 * round + 10 * r + i);
                CHECK(recv[total + displs[r] + i] == 1000 * round + 10 * r + i);
            }
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);
    /* Scatterv: the root sends rank r its r + 1 ints. */
    int *all = malloc(total * sizeof(int)), part[64];
    CHECK(MPI_Scatterv_init_c(all, counts, displs, MPI_INT, part, rank + 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]) == MPI_SUCCESS);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < total; i++) all[i] = 500 * round + i;
        CHECK(MPI_Start(&rq[0]) == MPI_SUCCESS);
        CHECK(MPI_Wait(&rq[0], &st) == MPI_SUCCESS);
        for (int i = 0; i <= rank; i++) CHECK(part[i] == 500 * round + displs[rank] + i);
    }
    MPI_Request_free(&rq[0]);
    OK(rank, "persistent gatherv, allgatherv, scatterv _c");

    /* Alltoallv and alltoallw: rank r sends rank q the two ints {r, q}. */
    MPI_Count *two = malloc(size * sizeof(MPI_Count));
    MPI_Aint *d2 = malloc(size * sizeof(MPI_Aint)), *b2 = malloc(size * sizeof(MPI_Aint));
    MPI_Datatype *types = malloc(size * sizeof(MPI_Datatype));
    int *sv = malloc(2 * size * sizeof(int)), *rv = malloc(2 * size * sizeof(int)), *rw = malloc(2 * size * sizeof(int));
    for (int q = 0; q < size; q++) {
        two[q] = 2;
        d2[q] = 2 * q;
        b2[q] = 2 * q * sizeof(int);
        types[q] = MPI_INT;
    }
    CHECK(MPI_Alltoallv_init_c(sv, two, d2, MPI_INT, rv, two, d2, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Alltoallw_init_c(sv, two, b2, types, rw, two, b2, types, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[1]) == MPI_SUCCESS);
    for (int round = 0; round < 2; round++) {
        for (int q = 0; q < size; q++) {
            sv[2 * q] = rank + 100 * round;
            sv[2 * q + 1] = q;
        }
        CHECK(MPI_Startall(2, rq) == MPI_SUCCESS);
        CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        for (int q = 0; q < size; q++) {
            CHECK(rv[2 * q] == q + 100 * round && rv[2 * q + 1] == rank);
            CHECK(rw[2 * q] == q + 100 * round && rw[2 * q + 1] == rank);
        }
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);
    OK(rank, "persistent alltoallv, alltoallw _c");

    /* Reduce_scatter: rank r gets the sums of block r (r + 1 ints). */
    int *contrib = malloc(total * sizeof(int)), mysum[64];
    CHECK(MPI_Reduce_scatter_init_c(contrib, mysum, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &rq[0]) == MPI_SUCCESS);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < total; i++) contrib[i] = i + round * rank;
        CHECK(MPI_Start(&rq[0]) == MPI_SUCCESS);
        CHECK(MPI_Wait(&rq[0], &st) == MPI_SUCCESS);
        for (int i = 0; i <= rank; i++)
            CHECK(mysum[i] == size * (int)(displs[rank] + i) + round * size * (size - 1) / 2);
    }
    MPI_Request_free(&rq[0]);
    OK(rank, "persistent reduce_scatter _c");

    /* Neighbourhood: a periodic ring; each rank sends left and right neighbours (at 3 ranks
       or more, where the two neighbours differ). */
    if (size < 3) {
        OK(rank, "persistent neighbourhood _c: not run below 3 ranks");
        goto done;
    }
    MPI_Comm ring;
    int dims[1] = {size}, periods[1] = {1};
    CHECK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring) == MPI_SUCCESS);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Count nc[2] = {1, 1};
    MPI_Aint nd[2] = {0, 1}, nb[2] = {0, sizeof(int)};
    MPI_Datatype nt[2] = {MPI_INT, MPI_INT};
    int one, ns[2], ag[2], av[2], aw[2];
    CHECK(MPI_Neighbor_allgatherv_init_c(&one, 1, MPI_INT, ag, nc, nd, MPI_INT, ring, MPI_INFO_NULL, &rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Neighbor_alltoallv_init_c(ns, nc, nd, MPI_INT, av, nc, nd, MPI_INT, ring, MPI_INFO_NULL, &rq[1]) == MPI_SUCCESS);
    CHECK(MPI_Neighbor_alltoallw_init_c(ns, nc, nb, nt, aw, nc, nb, nt, ring, MPI_INFO_NULL, &rq[2]) == MPI_SUCCESS);
    for (int round = 0; round < 2; round++) {
        one = rank + 50 * round;
        ns[0] = -(rank + 1) - 50 * round; /* to the left neighbour */
        ns[1] = rank + 1 + 50 * round;    /* to the right neighbour */
        CHECK(MPI_Startall(3, rq) == MPI_SUCCESS);
        CHECK(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(ag[0] == left + 50 * round && ag[1] == right + 50 * round);
        /* From the left neighbour what it sent right, from the right what it sent left. */
        CHECK(av[0] == left + 1 + 50 * round && av[1] == -(right + 1) - 50 * round);
        CHECK(aw[0] == av[0] && aw[1] == av[1]);
    }
    for (int i = 0; i < 3; i++) MPI_Request_free(&rq[i]);
    MPI_Comm_free(&ring);
    OK(rank, "persistent neighbourhood allgatherv, alltoallv, alltoallw _c");
done:

    MPI_Type_free(&mat);
    free(counts);
    free(displs);
    free(recv);
    free(all);
    free(two);
    free(d2);
    free(b2);
    free(types);
    free(sv);
    free(rv);
    free(rw);
    free(contrib);
    MPI_Finalize();
    return 0;
}
