/* The v collectives, scans and reduce-scatters, with their MPI_IN_PLACE forms, on
   MPI_COMM_WORLD and MPI_COMM_SELF; MPI_Alltoallw with overlapping receive parts; where an
   in-place MPI_Reduce_scatter_block leaves its result. */
#include "common.h"

static void run(MPI_Comm comm, const char *name, int wrank) {
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    int *counts = malloc(n * sizeof(int)), *displs = malloc(n * sizeof(int));
    int total = 0;
    for (int i = 0; i < n; i++) {
        counts[i] = i + 1;
        displs[i] = total + i; /* a gap of i elements before each part */
        total += counts[i] + i;
    }
    int *buf = malloc((total + 1) * sizeof(int)), *mine = malloc((n + 1) * sizeof(int));
    for (int k = 0; k < rank + 1; k++) mine[k] = rank * 100 + k;

    /* Gatherv to the last rank; gaps stay untouched. */
    int root = n - 1;
    for (int k = 0; k < total; k++) buf[k] = -7;
    CHECK(MPI_Gatherv(mine, rank + 1, MPI_INT, buf, counts, displs, MPI_INT, root, comm) == MPI_SUCCESS);
    if (rank == root)
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < counts[i]; k++) CHECK(buf[displs[i] + k] == i * 100 + k);
            if (i > 0) CHECK(buf[displs[i] - 1] == -7);
        }
    /* In place at the root. */
    if (rank == root) {
        for (int k = 0; k < total; k++) buf[k] = -7;
        for (int k = 0; k < counts[root]; k++) buf[displs[root] + k] = root * 100 + k;
        CHECK(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INT, buf, counts, displs, MPI_INT, root, comm) == MPI_SUCCESS);
        for (int i = 0; i < n; i++)
            for (int k = 0; k < counts[i]; k++) CHECK(buf[displs[i] + k] == i * 100 + k);
    } else {
        CHECK(MPI_Gatherv(mine, rank + 1, MPI_INT, NULL, NULL, NULL, MPI_INT, root, comm) == MPI_SUCCESS);
    }

    /* Scatterv from rank 0. */
    if (rank == 0)
        for (int i = 0; i < n; i++)
            for (int k = 0; k < counts[i]; k++) buf[displs[i] + k] = 1000 + i * 10 + k;
    int got[64];
    CHECK(MPI_Scatterv(buf, counts, displs, MPI_INT, got, rank + 1, MPI_INT, 0, comm) == MPI_SUCCESS);
    for (int k = 0; k < rank + 1; k++) CHECK(got[k] == 1000 + rank * 10 + k);

    /* Allgatherv, then in place. */
    for (int k = 0; k < total; k++) buf[k] = -7;
    CHECK(MPI_Allgatherv(mine, rank + 1, MPI_INT, buf, counts, displs, MPI_INT, comm) == MPI_SUCCESS);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < counts[i]; k++) CHECK(buf[displs[i] + k] == i * 100 + k);
    for (int k = 0; k < total; k++) buf[k] = -7;
    for (int k = 0; k < counts[rank]; k++) buf[displs[rank] + k] = rank * 100 + k;
    CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_INT, buf, counts, displs, MPI_INT, comm) == MPI_SUCCESS);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < counts[i]; k++) CHECK(buf[displs[i] + k] == i * 100 + k);

    /* Alltoallv: rank r sends r+1 ints to everyone; receives i+1 from rank i. */
    int *sc = malloc(n * sizeof(int)), *sd = malloc(n * sizeof(int));
    int *sb = malloc(n * (rank + 1) * sizeof(int));
    for (int i = 0; i < n; i++) {
        sc[i] = rank + 1;
        sd[i] = i * (rank + 1);
        for (int k = 0; k < rank + 1; k++) sb[sd[i] + k] = rank * 1000 + i * 10 + k;
    }
    for (int k = 0; k < total; k++) buf[k] = -7;
    CHECK(MPI_Alltoallv(sb, sc, sd, MPI_INT, buf, counts, displs, MPI_INT, comm) == MPI_SUCCESS);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < counts[i]; k++) CHECK(buf[displs[i] + k] == i * 1000 + rank * 10 + k);
    free(sc);
    free(sd);
    free(sb);

    /* Scan and Exscan. */
    long v = rank + 1, s = -1, e = -1;
    CHECK(MPI_Scan(&v, &s, 1, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS);
    CHECK(s == (long)(rank + 1) * (rank + 2) / 2);
    CHECK(MPI_Exscan(&v, &e, 1, MPI_LONG, MPI_SUM, comm) == MPI_SUCCESS);
    if (rank > 0) CHECK(e == (long)rank * (rank + 1) / 2);
    double dv[2] = {rank + 1.0, 2.0};
    CHECK(MPI_Scan(MPI_IN_PLACE, dv, 2, MPI_DOUBLE, MPI_PROD, comm) == MPI_SUCCESS);
    double f = 1;
    for (int i = 1; i <= rank + 1; i++) f *= i;
    CHECK(dv[0] == f && dv[1] == (double)(1L << (rank + 1)));
    int mx = rank % 3;
    CHECK(MPI_Exscan(MPI_IN_PLACE, &mx, 1, MPI_INT, MPI_MAX, comm) == MPI_SUCCESS);
    if (rank > 0) CHECK(mx == (rank >= 3 ? 2 : rank - 1));

    /* Reduce_scatter_block and Reduce_scatter. */
    int *in = malloc(2 * n * sizeof(int)), rb[2];
    for (int k = 0; k < 2 * n; k++) in[k] = k + rank;
    CHECK(MPI_Reduce_scatter_block(in, rb, 2, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS);
    for (int k = 0; k < 2; k++) CHECK(rb[k] == n * (2 * rank + k) + n * (n - 1) / 2);
    int *rc = malloc(n * sizeof(int)), tot = 0;
    for (int i = 0; i < n; i++) { rc[i] = i % 2 + 1; tot += rc[i]; }
    int *in2 = malloc(tot * sizeof(int)), first = 0;
    for (int i = 0; i < rank; i++) first += rc[i];
    for (int k = 0; k < tot; k++) in2[k] = k * (rank + 1);
    CHECK(MPI_Reduce_scatter(MPI_IN_PLACE, in2, rc, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS);
    for (int k = 0; k < rc[rank]; k++) CHECK(in2[k] == (first + k) * n * (n + 1) / 2);
    free(in);
    free(in2);
    free(rc);
    free(buf);
    free(mine);
    free(counts);
    free(displs);
    OK(wrank, "%s: v collectives and scans ok on %d ranks", name, n);
}

/* MPI_Alltoallw and MPI_Ialltoallw with displacements given in elements where the standard
   takes bytes, so that the received parts overlap (an erroneous program, which MPICH runs):
   both complete; the bytes no part touches stay, and the first int holds what some rank sent. */
static void overlapping(int rank, int n) {
    int *sb = malloc(4 * n * sizeof(int)), *rb = malloc((4 * n + 8) * sizeof(int));
    int *cnt = malloc(n * sizeof(int)), *dis = malloc(n * sizeof(int));
    MPI_Datatype *ty = malloc(n * sizeof(MPI_Datatype));
    for (int i = 0; i < n; i++) { cnt[i] = 4; dis[i] = i * 4; ty[i] = MPI_INT; }
    for (int k = 0; k < 4 * n; k++) sb[k] = rank;
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 4 * n + 8; k++) rb[k] = -1;
        if (round == 0) {
            CHECK(MPI_Alltoallw(sb, cnt, dis, ty, rb, cnt, dis, ty, MPI_COMM_WORLD) == MPI_SUCCESS);
        } else {
            MPI_Request r;
            CHECK(MPI_Ialltoallw(sb, cnt, dis, ty, rb, cnt, dis, ty, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        }
        CHECK(rb[0] >= 0 && rb[0] < n);
        int touched = (4 * (n - 1) + 16 + 3) / 4; /* ints reached by the last part */
        for (int k = touched; k < 4 * n + 8; k++) CHECK(rb[k] == -1);
    }
    free(sb);
    free(rb);
    free(cnt);
    free(dis);
    free(ty);
    OK(rank, "alltoallw with overlapping receive parts completes");
}

/* Displacements below the buffer argument (the standard counts them from it either way;
   ROMIO gathers host names so): rank i's part at displacement -2 * (i + 1) from a buffer
   pointer in the middle of the array, in gatherv, allgatherv, scatterv and alltoallv. */
static void negative_displs(int rank, int n) {
    int *arr = malloc((4 * n + 8) * sizeof(int));
    int *mid = arr + 2 * n + 4;
    int *cnt = malloc(n * sizeof(int)), *dis = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) { cnt[i] = 2; dis[i] = -2 * (i + 1); }
    int sb[2] = {10 * rank, 10 * rank + 1}, good = 1;
    for (int k = 0; k < 4 * n + 8; k++) arr[k] = -1;
    CHECK(MPI_Allgatherv(sb, 2, MPI_INT, mid, cnt, dis, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int i = 0; i < n; i++) good &= mid[-2 * (i + 1)] == 10 * i && mid[-2 * (i + 1) + 1] == 10 * i + 1;
    for (int k = 0; k < 4 * n + 8; k++) arr[k] = -1;
    CHECK(MPI_Gatherv(sb, 2, MPI_INT, mid, cnt, dis, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (rank == 0)
        for (int i = 0; i < n; i++) good &= mid[-2 * (i + 1)] == 10 * i;
    /* Scatterv from the root's parts below its pointer. */
    for (int k = 0; k < 4 * n + 8; k++) arr[k] = k;
    int got[2] = {-1, -1};
    CHECK(MPI_Scatterv(mid, cnt, dis, MPI_INT, got, 2, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
    good &= got[0] == 2 * n + 4 - 2 * (rank + 1) && got[1] == got[0] + 1;
    /* Alltoallv: each rank sends 1 int to every rank from parts below its pointer. */
    int *src = malloc((2 * n + 2) * sizeof(int)), *dst = malloc((2 * n + 2) * sizeof(int));
    int *c1 = malloc(n * sizeof(int)), *d1 = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) { c1[i] = 1; d1[i] = -(i + 1); }
    for (int k = 0; k < 2 * n + 2; k++) { src[k] = 100 * rank + k; dst[k] = -1; }
    CHECK(MPI_Alltoallv(src + n + 1, c1, d1, MPI_INT, dst + n + 1, c1, d1, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int i = 0; i < n; i++) good &= dst[n + 1 - (i + 1)] == 100 * i + n + 1 - (rank + 1);
    OK(rank, "negative displacements: %s", good ? "right" : "wrong");
    free(src); free(dst); free(c1); free(d1);
    free(arr); free(cnt); free(dis);
}

/* Allgatherv and Gatherv whose receive parts all start at 0 (MPICH's allgatherv4 does so; an
   erroneous program that MPICH runs): the call completes, the first int holds one rank's
   value, and nothing past the longest part is written. */
static void overlapping_v(int rank, int n) {
    int *rb = malloc((n + 8) * sizeof(int));
    int *cnt = malloc(n * sizeof(int)), *dis = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) { cnt[i] = 1 + i % 2; dis[i] = 0; }
    int sb[2] = {rank, rank};
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < n + 8; k++) rb[k] = -1;
        if (round == 0) {
            CHECK(MPI_Allgatherv(sb, cnt[rank], MPI_INT, rb, cnt, dis, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
        } else if (round == 1) {
            MPI_Request r;
            CHECK(MPI_Iallgatherv(sb, cnt[rank], MPI_INT, rb, cnt, dis, MPI_INT, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Gatherv(sb, cnt[rank], MPI_INT, rb, cnt, dis, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
        }
        if (round < 2 || rank == 0) {
            CHECK(rb[0] >= 0 && rb[0] < n);
            int longest = n > 1 ? 2 : 1;
            for (int k = longest; k < n + 8; k++) CHECK(rb[k] == -1);
        } else {
            for (int k = 0; k < n + 8; k++) CHECK(rb[k] == -1);
        }
    }
    free(rb);
    free(cnt);
    free(dis);
    OK(rank, "allgatherv and gatherv with overlapping receive parts complete");
}

/* MPI_Reduce_scatter_block in place: the result at the start of the buffer, the rest of the
   buffer as it was (as MPICH leaves it for buffers of this size; mpi4py checks it). */
static void scatter_block_in_place(int rank, int n) {
    int m = 100, *b = malloc(sizeof(int) * m * n);
    for (int i = 0; i < m * n; i++) b[i] = rank + i / m;
    CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, b, m, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    int want = n * rank + n * (n - 1) / 2, start = 1, rest = 1;
    for (int i = 0; i < m; i++) start &= b[i] == want;
    for (int i = m; i < m * n; i++) rest &= b[i] == rank + i / m;
    OK(rank, "reduce_scatter_block in place: result at the start %d, rest unchanged %d", start, rest);
    free(b);
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    run(MPI_COMM_WORLD, "world", rank);
    run(MPI_COMM_SELF, "self", rank);
    overlapping(rank, n);
    overlapping_v(rank, n);
    negative_displs(rank, n);
    scatter_block_in_place(rank, n);
    MPI_Finalize();
    return 0;
}
