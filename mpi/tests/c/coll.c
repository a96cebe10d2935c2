/* Collectives with every MPI_IN_PLACE form, predefined operations (MAXLOC/MINLOC on pair
   types included), on MPI_COMM_WORLD, a split communicator and MPI_COMM_SELF. */
#include "common.h"

static void run(MPI_Comm comm, const char *name, int world_rank) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    CHECK(MPI_Barrier(comm) == MPI_SUCCESS);

    int b[4] = {0};
    if (rank == size - 1) for (int i = 0; i < 4; i++) b[i] = 40 + i;
    CHECK(MPI_Bcast(b, 4, MPI_INT, size - 1, comm) == MPI_SUCCESS);
    for (int i = 0; i < 4; i++) CHECK(b[i] == 40 + i);

    /* A bcast large enough to leave the small-message path. */
    enum { N = 100000 };
    double *big = malloc(N * sizeof(double));
    for (int i = 0; i < N; i++) big[i] = rank == 0 ? i * 0.5 : -1;
    CHECK(MPI_Bcast(big, N, MPI_DOUBLE, 0, comm) == MPI_SUCCESS);
    for (int i = 0; i < N; i++) CHECK(big[i] == i * 0.5);
    free(big);

    int v = rank + 1, sum = -1;
    CHECK(MPI_Reduce(&v, &sum, 1, MPI_INT, MPI_SUM, 0, comm) == MPI_SUCCESS);
    if (rank == 0) CHECK(sum == size * (size + 1) / 2);
    long lv = rank + 1;
    if (rank == 0) {
        CHECK(MPI_Reduce(MPI_IN_PLACE, &lv, 1, MPI_LONG, MPI_PROD, 0, comm) == MPI_SUCCESS);
        long f = 1;
        for (int i = 1; i <= size; i++) f *= i;
        CHECK(lv == f);
    } else {
        CHECK(MPI_Reduce(&lv, NULL, 1, MPI_LONG, MPI_PROD, 0, comm) == MPI_SUCCESS);
    }

    double dv[2] = {rank * 1.5, -rank * 1.0}, dmax[2];
    CHECK(MPI_Allreduce(dv, dmax, 2, MPI_DOUBLE, MPI_MAX, comm) == MPI_SUCCESS);
    CHECK(dmax[0] == (size - 1) * 1.5 && dmax[1] == 0.0);
    unsigned char uc = (unsigned char)(1u << (rank % 8)), ubor = 0;
    CHECK(MPI_Allreduce(&uc, &ubor, 1, MPI_UNSIGNED_CHAR, MPI_BOR, comm) == MPI_SUCCESS);
    unsigned char want = 0;
    for (int i = 0; i < size; i++) want |= (unsigned char)(1u << (i % 8));
    CHECK(ubor == want);
    short sh = (short)(rank == 0 ? 0 : 5);
    CHECK(MPI_Allreduce(MPI_IN_PLACE, &sh, 1, MPI_SHORT, MPI_LAND, comm) == MPI_SUCCESS);
    CHECK(sh == (size == 1 ? 0 : 0));
    int mn = 100 - rank;
    CHECK(MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_INT, MPI_MIN, comm) == MPI_SUCCESS);
    CHECK(mn == 100 - (size - 1));
    struct { double v; int i; } loc = {rank % 2 ? 9.0 : 1.0 * rank, rank}, out;
    CHECK(MPI_Allreduce(&loc, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm) == MPI_SUCCESS);
    double best = -1;
    int at = -1;
    for (int i = 0; i < size; i++) {
        double x = i % 2 ? 9.0 : 1.0 * i;
        if (x > best) { best = x; at = i; }
    }
    CHECK(out.v == best && out.i == at);
    int pair[2] = {rank % 3, rank}, pmin[2];
    CHECK(MPI_Allreduce(pair, pmin, 1, MPI_2INT, MPI_MINLOC, comm) == MPI_SUCCESS);
    CHECK(pmin[0] == 0 && pmin[1] == 0);

    int *all = malloc(size * sizeof(int) * 2);
    int mine = rank * 3;
    CHECK(MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, 0, comm) == MPI_SUCCESS);
    if (rank == 0) for (int i = 0; i < size; i++) CHECK(all[i] == i * 3);
    if (rank == 0) {
        for (int i = 0; i < size; i++) all[i] = -1;
        all[0] = 0;
        CHECK(MPI_Gather(MPI_IN_PLACE, 1, MPI_INT, all, 1, MPI_INT, 0, comm) == MPI_SUCCESS);
        for (int i = 0; i < size; i++) CHECK(all[i] == i * 3);
    } else {
        CHECK(MPI_Gather(&mine, 1, MPI_INT, NULL, 0, MPI_INT, 0, comm) == MPI_SUCCESS);
    }

    int got = -1;
    if (rank == 0) for (int i = 0; i < size; i++) all[i] = 7 * i;
    CHECK(MPI_Scatter(all, 1, MPI_INT, &got, 1, MPI_INT, 0, comm) == MPI_SUCCESS);
    CHECK(got == 7 * rank);
    if (rank == 0) CHECK(MPI_Scatter(all, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, 0, comm) == MPI_SUCCESS);
    else CHECK(MPI_Scatter(NULL, 0, MPI_INT, &got, 1, MPI_INT, 0, comm) == MPI_SUCCESS);
    CHECK(got == 7 * rank);

    CHECK(MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, comm) == MPI_SUCCESS);
    for (int i = 0; i < size; i++) CHECK(all[i] == i * 3);
    for (int i = 0; i < size; i++) all[i] = i == rank ? -5 * i : 0;
    CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 1, MPI_INT, comm) == MPI_SUCCESS);
    for (int i = 0; i < size; i++) CHECK(all[i] == -5 * i);

    int *sendv = malloc(size * sizeof(int) * 2), *recvv = malloc(size * sizeof(int) * 2);
    for (int i = 0; i < size; i++) {
        sendv[2 * i] = rank * 1000 + i;
        sendv[2 * i + 1] = -(rank * 1000 + i);
    }
    CHECK(MPI_Alltoall(sendv, 2, MPI_INT, recvv, 2, MPI_INT, comm) == MPI_SUCCESS);
    for (int i = 0; i < size; i++) CHECK(recvv[2 * i] == i * 1000 + rank && recvv[2 * i + 1] == -(i * 1000 + rank));
    CHECK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, sendv, 2, MPI_INT, comm) == MPI_SUCCESS);
    for (int i = 0; i < size; i++) CHECK(sendv[2 * i] == i * 1000 + rank);
    free(sendv);
    free(recvv);
    free(all);
    OK(world_rank, "%s: collectives ok on %d ranks (sum %d)", name, size, rank == 0 ? sum : -1);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    run(MPI_COMM_WORLD, "world", rank);
    run(MPI_COMM_SELF, "self", rank);

    /* Split by parity, keys reversing the order; then dup, compare, free. */
    MPI_Comm half, dup;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half) == MPI_SUCCESS);
    int hr, hs;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    CHECK(hs == (size + 1 - rank % 2) / 2);
    CHECK(hr == hs - 1 - rank / 2);
    run(half, rank % 2 ? "odd" : "even", rank);
    /* Large nonblocking receives from any source on the split communicator (whose ranks differ
       from the world's), twice, so the second reuses the first's buffer: the status names the
       rank in the split communicator and the data is the new message's. */
    if (hs >= 2) {
        enum { BIG = 100000 };
        int *big = malloc(BIG * sizeof(int));
        for (int round = 0; round < 2; round++) {
            if (hr == 0) {
                MPI_Request rq;
                MPI_Status st;
                for (int i = 0; i < BIG; i++) big[i] = -1;
                CHECK(MPI_Irecv(big, BIG, MPI_INT, MPI_ANY_SOURCE, 20 + round, half, &rq) == MPI_SUCCESS);
                CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
                CHECK(st.MPI_SOURCE == hs - 1 && st.MPI_TAG == 20 + round);
                for (int i = 0; i < BIG; i += 997) CHECK(big[i] == round * 1000000 + i);
            } else if (hr == hs - 1) {
                for (int i = 0; i < BIG; i++) big[i] = round * 1000000 + i;
                CHECK(MPI_Send(big, BIG, MPI_INT, 0, 20 + round, half) == MPI_SUCCESS);
            }
        }
        free(big);
    }
    CHECK(MPI_Comm_dup(half, &dup) == MPI_SUCCESS);
    int cmp = -1;
    CHECK(MPI_Comm_compare(half, dup, &cmp) == MPI_SUCCESS && cmp == MPI_CONGRUENT);
    CHECK(MPI_Comm_compare(half, half, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
    CHECK(MPI_Comm_compare(MPI_COMM_WORLD, half, &cmp) == MPI_SUCCESS && cmp == (size == 1 ? MPI_CONGRUENT : MPI_UNEQUAL));
    /* Messages on the duplicate never match those on its parent. */
    int a = 1, b = 2, r1 = 0, r2 = 0;
    MPI_Request rq[4];
    MPI_Irecv(&r1, 1, MPI_INT, MPI_ANY_SOURCE, 0, dup, &rq[0]);
    MPI_Irecv(&r2, 1, MPI_INT, MPI_ANY_SOURCE, 0, half, &rq[1]);
    /* Only the last rank of the half sends, so rank 0 receives exactly one message on each. */
    rq[2] = rq[3] = MPI_REQUEST_NULL;
    if (hr == hs - 1) {
        MPI_Isend(&b, 1, MPI_INT, 0, 0, half, &rq[2]);
        MPI_Isend(&a, 1, MPI_INT, 0, 0, dup, &rq[3]);
    }
    if (hr == 0) {
        CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(r1 == 1 && r2 == 2);
    }
    CHECK(MPI_Waitall(2, rq + 2, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    if (hr != 0) {
        MPI_Cancel(&rq[0]);
        MPI_Cancel(&rq[1]);
        MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* MPI_UNDEFINED gives MPI_COMM_NULL. */
    MPI_Comm none;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &none) == MPI_SUCCESS);
    CHECK((rank == 0) == (none == MPI_COMM_NULL));
    if (none != MPI_COMM_NULL) CHECK(MPI_Comm_free(&none) == MPI_SUCCESS && none == MPI_COMM_NULL);
    CHECK(MPI_Comm_free(&dup) == MPI_SUCCESS && dup == MPI_COMM_NULL);
    CHECK(MPI_Comm_free(&half) == MPI_SUCCESS);
    OK(rank, "communicators ok");
    MPI_Finalize();
    return 0;
}
