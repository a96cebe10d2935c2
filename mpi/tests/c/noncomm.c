/* A non-commutative operation (2x2 matrix product) combined in rank order by every reduction:
   Reduce, Allreduce, Ireduce, Iallreduce, Scan, Exscan, Reduce_scatter_block, Reduce_scatter,
   Ireduce_scatter_block, Iscan, Reduce_local; MPI_Op_commutative. A program's operation on
   a long buffer is called with the whole count by Scan, Exscan and Iscan (as MPICH does). */
#include "common.h"

/* Sums ints; counts the calls whose length was not the whole buffer. */
static int whole_len, short_calls;
static void isum(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    if (*len != whole_len) short_calls++;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

/* Scan, Exscan and Iscan of 100000 ints by a program's sum. */
static void whole_scans(int rank) {
    enum { N = 100000 };
    int *in = malloc(N * sizeof(int)), *out = malloc(N * sizeof(int));
    MPI_Op op;
    CHECK(MPI_Op_create(isum, 1, &op) == MPI_SUCCESS);
    whole_len = N;
    short_calls = 0;
    for (int i = 0; i < N; i++) in[i] = i % 7 + rank;
    CHECK(MPI_Scan(in, out, N, MPI_INT, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int i = 0; i < N; i++) CHECK(out[i] == (i % 7) * (rank + 1) + rank * (rank + 1) / 2);
    for (int i = 0; i < N; i++) out[i] = -1;
    CHECK(MPI_Exscan(in, out, N, MPI_INT, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (rank > 0)
        for (int i = 0; i < N; i++) CHECK(out[i] == (i % 7) * rank + rank * (rank - 1) / 2);
    MPI_Request r;
    CHECK(MPI_Iscan(in, out, N, MPI_INT, op, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(out[N - 1] == ((N - 1) % 7) * (rank + 1) + rank * (rank + 1) / 2);
    CHECK(MPI_Op_free(&op) == MPI_SUCCESS);
    free(in);
    free(out);
    OK(rank, "scans by a program's operation: calls with part of the buffer %d", short_calls);
}

typedef struct { long a, b, c, d; } mat;

static void matmul(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        mat r = {x[i].a * y[i].a + x[i].b * y[i].c, x[i].a * y[i].b + x[i].b * y[i].d,
                 x[i].c * y[i].a + x[i].d * y[i].c, x[i].c * y[i].b + x[i].d * y[i].d};
        y[i] = r; /* inout = in * inout */
    }
}

static mat mine(int r, int k) { mat m = {r + 1 + k, 1, 1, 0}; return m; }

/* The product of ranks lo..hi-1's matrices (element k), in rank order. */
static mat prod(int lo, int hi, int k) {
    mat acc = {1, 0, 0, 1};
    for (int r = hi - 1; r >= lo; r--) {
        mat m = mine(r, k);
        int one = 1;
        matmul(&m, &acc, &one, NULL);
    }
    return acc;
}

static int eq(mat x, mat y) { return x.a == y.a && x.b == y.b && x.c == y.c && x.d == y.d; }

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Datatype tm;
    MPI_Type_contiguous(4, MPI_LONG, &tm);
    MPI_Type_commit(&tm);
    MPI_Op op;
    CHECK(MPI_Op_create(matmul, 0, &op) == MPI_SUCCESS);
    int commute = -1;
    CHECK(MPI_Op_commutative(op, &commute) == MPI_SUCCESS && commute == 0);
    CHECK(MPI_Op_commutative(MPI_SUM, &commute) == MPI_SUCCESS && commute == 1);

    enum { K = 3 };
    mat in[K], out[K];
    for (int k = 0; k < K; k++) in[k] = mine(rank, k);

    /* Reduce to the last rank, and in place at rank 0. */
    CHECK(MPI_Reduce(in, out, K, tm, op, n - 1, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (rank == n - 1)
        for (int k = 0; k < K; k++) CHECK(eq(out[k], prod(0, n, k)));
    mat io[K];
    for (int k = 0; k < K; k++) io[k] = in[k];
    CHECK(MPI_Reduce(rank == 0 ? MPI_IN_PLACE : (void *)io, rank == 0 ? (void *)io : NULL, K, tm, op, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (rank == 0)
        for (int k = 0; k < K; k++) CHECK(eq(io[k], prod(0, n, k)));

    /* Allreduce, and in place. */
    CHECK(MPI_Allreduce(in, out, K, tm, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int k = 0; k < K; k++) CHECK(eq(out[k], prod(0, n, k)));
    for (int k = 0; k < K; k++) io[k] = in[k];
    CHECK(MPI_Allreduce(MPI_IN_PLACE, io, K, tm, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int k = 0; k < K; k++) CHECK(eq(io[k], prod(0, n, k)));

    /* Nonblocking. */
    MPI_Request rq[2];
    mat o2[K];
    for (int k = 0; k < K; k++) out[k] = o2[k] = (mat){0, 0, 0, 0};
    CHECK(MPI_Ireduce(in, out, K, tm, op, 0, MPI_COMM_WORLD, &rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Iallreduce(in, o2, K, tm, op, MPI_COMM_WORLD, &rq[1]) == MPI_SUCCESS);
    CHECK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int k = 0; k < K; k++) {
        if (rank == 0) CHECK(eq(out[k], prod(0, n, k)));
        CHECK(eq(o2[k], prod(0, n, k)));
    }

    /* Scan and Exscan. */
    CHECK(MPI_Scan(in, out, K, tm, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int k = 0; k < K; k++) CHECK(eq(out[k], prod(0, rank + 1, k)));
    CHECK(MPI_Exscan(in, out, K, tm, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (rank > 0)
        for (int k = 0; k < K; k++) CHECK(eq(out[k], prod(0, rank, k)));

    /* Reduce_scatter_block: block i of every rank's input is mine(r, i). */
    mat *all = malloc(n * sizeof(mat));
    for (int i = 0; i < n; i++) all[i] = mine(rank, i);
    mat got;
    CHECK(MPI_Reduce_scatter_block(all, &got, 1, tm, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(eq(got, prod(0, n, rank)));
    int *counts = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) counts[i] = 1;
    CHECK(MPI_Reduce_scatter(all, &got, counts, tm, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(eq(got, prod(0, n, rank)));

    MPI_Request rr;
    got = (mat){0, 0, 0, 0};
    CHECK(MPI_Ireduce_scatter_block(all, &got, 1, tm, op, MPI_COMM_WORLD, &rr) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rr, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(eq(got, prod(0, n, rank)));
    mat sc[K];
    CHECK(MPI_Iscan(in, sc, K, tm, op, MPI_COMM_WORLD, &rr) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rr, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    for (int k = 0; k < K; k++) CHECK(eq(sc[k], prod(0, rank + 1, k)));

    /* Reduce_local: inout = in op inout. */
    mat a = mine(0, 0), b = mine(1, 0);
    CHECK(MPI_Reduce_local(&a, &b, 1, tm, op) == MPI_SUCCESS);
    CHECK(eq(b, prod(0, 2, 0)));

    mat p = prod(0, n, 0);
    OK(rank, "non-commutative reductions ok: product [%ld %ld; %ld %ld]", p.a, p.b, p.c, p.d);
    whole_scans(rank);
    free(all);
    free(counts);
    MPI_Op_free(&op);
    MPI_Type_free(&tm);
    MPI_Finalize();
    return 0;
}
