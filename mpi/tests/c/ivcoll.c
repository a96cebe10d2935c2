/* The nonblocking v collectives, scans and reduce-scatters, several outstanding at once and
   completed in one MPI_Waitall, and MPI_Alltoallw/MPI_Ialltoallw with per-rank datatypes. */
#include "common.h"

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm comm = MPI_COMM_WORLD;
    int *counts = malloc(n * sizeof(int)), *displs = malloc(n * sizeof(int)), total = 0;
    for (int i = 0; i < n; i++) {
        counts[i] = i + 1;
        displs[i] = total + i; /* a gap of i elements before each part */
        total += counts[i] + i;
    }
    int *gbuf = malloc(total * sizeof(int)), *abuf = malloc(total * sizeof(int));
    int *tbuf = malloc(total * sizeof(int)), *sbuf = malloc(total * sizeof(int));
    int mine[64], got[64];
    for (int k = 0; k < rank + 1; k++) mine[k] = rank * 100 + k;
    for (int k = 0; k < total; k++) gbuf[k] = abuf[k] = tbuf[k] = -7;
    int root = n - 1;
    if (rank == 0)
        for (int i = 0; i < n; i++)
            for (int k = 0; k < counts[i]; k++) sbuf[displs[i] + k] = 1000 + i * 10 + k;
    int *sc = malloc(n * sizeof(int)), *sd = malloc(n * sizeof(int));
    int *sb = malloc(n * (rank + 1) * sizeof(int));
    for (int i = 0; i < n; i++) {
        sc[i] = rank + 1;
        sd[i] = i * (rank + 1);
        for (int k = 0; k < rank + 1; k++) sb[sd[i] + k] = rank * 1000 + i * 10 + k;
    }
    long v = rank + 1, s = -1, e = -1;
    int *in = malloc(2 * n * sizeof(int)), rb[2], *rc = malloc(n * sizeof(int)), tot = 0;
    for (int k = 0; k < 2 * n; k++) in[k] = k + rank;
    for (int i = 0; i < n; i++) { rc[i] = i % 2 + 1; tot += rc[i]; }
    int *in2 = malloc(tot * sizeof(int)), rs[2], first = 0;
    for (int i = 0; i < rank; i++) first += rc[i];
    for (int k = 0; k < tot; k++) in2[k] = k * (rank + 1);

    MPI_Request r[9];
    CHECK(MPI_Igatherv(mine, rank + 1, MPI_INT, gbuf, counts, displs, MPI_INT, root, comm, &r[0]) == MPI_SUCCESS);
    CHECK(MPI_Iscatterv(sbuf, counts, displs, MPI_INT, got, rank + 1, MPI_INT, 0, comm, &r[1]) == MPI_SUCCESS);
    CHECK(MPI_Iallgatherv(mine, rank + 1, MPI_INT, abuf, counts, displs, MPI_INT, comm, &r[2]) == MPI_SUCCESS);
    CHECK(MPI_Ialltoallv(sb, sc, sd, MPI_INT, tbuf, counts, displs, MPI_INT, comm, &r[3]) == MPI_SUCCESS);
    CHECK(MPI_Iscan(&v, &s, 1, MPI_LONG, MPI_SUM, comm, &r[4]) == MPI_SUCCESS);
    CHECK(MPI_Iexscan(&v, &e, 1, MPI_LONG, MPI_SUM, comm, &r[5]) == MPI_SUCCESS);
    CHECK(MPI_Ireduce_scatter_block(in, rb, 2, MPI_INT, MPI_SUM, comm, &r[6]) == MPI_SUCCESS);
    CHECK(MPI_Ireduce_scatter(in2, rs, rc, MPI_INT, MPI_SUM, comm, &r[7]) == MPI_SUCCESS);
    CHECK(MPI_Ibarrier(comm, &r[8]) == MPI_SUCCESS);
    CHECK(MPI_Waitall(9, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < 9; i++) CHECK(r[i] == MPI_REQUEST_NULL);

    if (rank == root)
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < counts[i]; k++) CHECK(gbuf[displs[i] + k] == i * 100 + k);
            if (i > 0) CHECK(gbuf[displs[i] - 1] == -7);
        }
    for (int k = 0; k < rank + 1; k++) CHECK(got[k] == 1000 + rank * 10 + k);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < counts[i]; k++) CHECK(abuf[displs[i] + k] == i * 100 + k);
        for (int k = 0; k < counts[i]; k++) CHECK(tbuf[displs[i] + k] == i * 1000 + rank * 10 + k);
        if (i > 0) CHECK(abuf[displs[i] - 1] == -7 && tbuf[displs[i] - 1] == -7);
    }
    CHECK(s == (long)(rank + 1) * (rank + 2) / 2);
    if (rank > 0) CHECK(e == (long)rank * (rank + 1) / 2);
    for (int k = 0; k < 2; k++) CHECK(rb[k] == n * (2 * rank + k) + n * (n - 1) / 2);
    for (int k = 0; k < rc[rank]; k++) CHECK(rs[k] == (first + k) * n * (n + 1) / 2);

    /* In place, tested with MPI_Test until done. */
    for (int k = 0; k < total; k++) abuf[k] = -7;
    for (int k = 0; k < counts[rank]; k++) abuf[displs[rank] + k] = rank * 100 + k;
    MPI_Request q;
    CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_INT, abuf, counts, displs, MPI_INT, comm, &q) == MPI_SUCCESS);
    int done = 0;
    while (!done) CHECK(MPI_Test(&q, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < counts[i]; k++) CHECK(abuf[displs[i] + k] == i * 100 + k);

    /* Alltoallw: to even ranks an int (rank*10+i), to odd ranks a double (rank+i/10.). */
    int *wsc = malloc(n * sizeof(int)), *wsd = malloc(n * sizeof(int));
    MPI_Datatype *wst = malloc(n * sizeof(MPI_Datatype)), *wrt = malloc(n * sizeof(MPI_Datatype));
    int *wrc = malloc(n * sizeof(int)), *wrd = malloc(n * sizeof(int));
    char *wsend = malloc(8 * n), *wrecv = malloc(8 * n), *wrecv2 = malloc(8 * n);
    for (int i = 0; i < n; i++) {
        wsc[i] = 1;
        wsd[i] = 8 * i;
        if (i % 2 == 0) { wst[i] = MPI_INT; *(int *)(wsend + 8 * i) = rank * 10 + i; }
        else { wst[i] = MPI_DOUBLE; *(double *)(wsend + 8 * i) = rank + i / 10.0; }
        wrc[i] = 1;
        wrd[i] = 8 * (n - 1 - i); /* reversed */
        wrt[i] = rank % 2 == 0 ? MPI_INT : MPI_DOUBLE;
    }
    CHECK(MPI_Alltoallw(wsend, wsc, wsd, wst, wrecv, wrc, wrd, wrt, comm) == MPI_SUCCESS);
    CHECK(MPI_Ialltoallw(wsend, wsc, wsd, wst, wrecv2, wrc, wrd, wrt, comm, &q) == MPI_SUCCESS);
    CHECK(MPI_Wait(&q, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < n; i++) {
        char *p = wrecv + 8 * (n - 1 - i), *p2 = wrecv2 + 8 * (n - 1 - i);
        if (rank % 2 == 0) CHECK(*(int *)p == i * 10 + rank && *(int *)p2 == i * 10 + rank);
        else CHECK(*(double *)p == i + rank / 10.0 && *(double *)p2 == i + rank / 10.0);
    }
    OK(rank, "nonblocking v collectives ok on %d ranks", n);
    MPI_Finalize();
    return 0;
}
