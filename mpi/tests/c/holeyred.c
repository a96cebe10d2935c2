/* Reductions by a program's operation on datatypes with holes: a struct {double, int} (12
   bytes of data, extent 16) reduced by a MAXLOC-like function, declared commutative and not,
   through Reduce (to two roots, in place), Allreduce (in place, persistent), Ireduce,
   Iallreduce, Scan,
   Exscan, Iscan, Iexscan, Reduce_scatter_block (in place), Reduce_scatter, their nonblocking
   forms and Reduce_local; and a vector of every other int summed, whose gaps must stay as
   they were. Every value is checked; the result lines are compared with MPICH. */
#include "common.h"
#include <stddef.h>

typedef struct { double v; int i; } vi;

static int calls_with_holes_seen;

/* inout = the larger value; the smaller index among equal values. */
static void maxvi(void *in, void *inout, int *len, MPI_Datatype *t) {
    vi *a = in, *b = inout;
    MPI_Aint lb, extent;
    MPI_Type_get_extent(*t, &lb, &extent);
    if (extent == sizeof(vi)) calls_with_holes_seen = 1;
    for (int k = 0; k < *len; k++)
        if (a[k].v > b[k].v || (a[k].v == b[k].v && a[k].i < b[k].i)) b[k] = a[k];
}

/* Sums the ints of elements of MPI_Type_vector(2, 1, 2, MPI_INT) (extent 3 ints, data at
   ints 0 and 2); the gap at int 1 is left alone. */
static void vsum(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    int *a = in, *b = inout;
    for (int e = 0; e < *len; e++) {
        b[3 * e] += a[3 * e];
        b[3 * e + 2] += a[3 * e + 2];
    }
}

enum { N = 5 };

/* Element k of rank r's contribution: the largest value at rank (k + 1) % n (and a tie at
   the rank after it, which loses by its index). */
static vi item(int r, int k, int n) {
    vi x;
    int best = (k + 1) % n;
    x.v = (r == best || r == (best + 1) % n) ? 100.0 + k : (double)(r * 7 % 5);
    x.i = r * 10 + k;
    return x;
}

/* The element k expected of ranks 0..upto-1 reduced. */
static vi want(int upto, int k, int n) {
    vi w = item(0, k, n);
    for (int r = 1; r < upto; r++) {
        vi x = item(r, k, n);
        if (x.v > w.v || (x.v == w.v && x.i < w.i)) w = x;
    }
    return w;
}

static void same(const vi *got, int upto, int first, int count, int n, const char *what) {
    for (int k = 0; k < count; k++) {
        vi w = want(upto, first + k, n);
        if (got[k].v != w.v || got[k].i != w.i) {
            fprintf(stderr, "%s: element %d is (%g, %d), want (%g, %d)\n", what, k, got[k].v, got[k].i, w.v, w.i);
            CHECK(0);
        }
    }
}

static void run(MPI_Op op, int commute, MPI_Datatype t, int rank, int n) {
    vi in[64], out[64];
    MPI_Request r;
    for (int k = 0; k < 64; k++) in[k] = item(rank, k % N, n);

    for (int root = 0; root < n; root += n - 1 > 0 ? n - 1 : 1) {
        memset(out, 0, sizeof out);
        CHECK(MPI_Reduce(in, out, N, t, op, root, MPI_COMM_WORLD) == MPI_SUCCESS);
        if (rank == root) same(out, n, 0, N, n, "reduce");
        memcpy(out, in, sizeof in);
        CHECK(MPI_Reduce(rank == root ? MPI_IN_PLACE : out, out, N, t, op, root, MPI_COMM_WORLD) == MPI_SUCCESS);
        if (rank == root) same(out, n, 0, N, n, "reduce in place");
        if (n == 1) break;
    }
    memset(out, 0, sizeof out);
    CHECK(MPI_Allreduce(in, out, N, t, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    same(out, n, 0, N, n, "allreduce");
    memcpy(out, in, sizeof in);
    CHECK(MPI_Allreduce(MPI_IN_PLACE, out, N, t, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    same(out, n, 0, N, n, "allreduce in place");
    memset(out, 0, sizeof out);
    CHECK(MPI_Ireduce(in, out, N, t, op, 0, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    if (rank == 0) same(out, n, 0, N, n, "ireduce");
    memset(out, 0, sizeof out);
    CHECK(MPI_Iallreduce(in, out, N, t, op, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    same(out, n, 0, N, n, "iallreduce");

    CHECK(MPI_Allreduce_init(in, out, N, t, op, MPI_COMM_WORLD, MPI_INFO_NULL, &r) == MPI_SUCCESS);
    for (int round = 0; round < 2; round++) {
        memset(out, 0, sizeof out);
        CHECK(MPI_Start(&r) == MPI_SUCCESS);
        CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        same(out, n, 0, N, n, "persistent allreduce");
    }
    CHECK(MPI_Request_free(&r) == MPI_SUCCESS);

    memset(out, 0, sizeof out);
    CHECK(MPI_Scan(in, out, N, t, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    same(out, rank + 1, 0, N, n, "scan");
    memset(out, 0, sizeof out);
    CHECK(MPI_Iscan(in, out, N, t, op, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    same(out, rank + 1, 0, N, n, "iscan");
    for (int k = 0; k < N; k++) { out[k].v = -1; out[k].i = -1; }
    CHECK(MPI_Exscan(in, out, N, t, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    if (rank > 0) same(out, rank, 0, N, n, "exscan");
    CHECK(MPI_Iexscan(in, out, N, t, op, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    if (rank > 0) same(out, rank, 0, N, n, "iexscan");

    /* Reduce-scatters: one element per rank, the k-th of the input (commutative only: MPICH
       4.0.2 gets the non-commutative case wrong). */
    vi all[64];
    if (!commute || n > 64) goto local;
    for (int k = 0; k < n; k++) all[k] = item(rank, k, n);
    memset(out, 0, sizeof out);
    CHECK(MPI_Reduce_scatter_block(all, out, 1, t, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    same(out, n, rank, 1, n, "reduce_scatter_block");
    memcpy(out, all, n * sizeof(vi));
    CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, out, 1, t, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    same(out, n, rank, 1, n, "reduce_scatter_block in place");
    memset(out, 0, sizeof out);
    CHECK(MPI_Ireduce_scatter_block(all, out, 1, t, op, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    same(out, n, rank, 1, n, "ireduce_scatter_block");
    int counts[64];
    for (int k = 0; k < n; k++) counts[k] = 1;
    memset(out, 0, sizeof out);
    CHECK(MPI_Reduce_scatter(all, out, counts, t, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    same(out, n, rank, 1, n, "reduce_scatter");
    memset(out, 0, sizeof out);
    CHECK(MPI_Ireduce_scatter(all, out, counts, t, op, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    same(out, n, rank, 1, n, "ireduce_scatter");

local:
    memcpy(out, in, sizeof in);
    vi other[N];
    for (int k = 0; k < N; k++) other[k] = item((rank + 1) % n, k, n);
    CHECK(MPI_Reduce_local(other, out, N, t, op) == MPI_SUCCESS);
    for (int k = 0; k < N; k++) {
        vi a = item(rank, k, n), b = item((rank + 1) % n, k, n), w = a;
        if (b.v > a.v || (b.v == a.v && b.i < a.i)) w = b;
        CHECK(out[k].v == w.v && out[k].i == w.i);
    }
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    int blocks[2] = {1, 1};
    MPI_Aint disps[2] = {offsetof(vi, v), offsetof(vi, i)};
    MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT}, t;
    CHECK(MPI_Type_create_struct(2, blocks, disps, types, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS);
    int size;
    MPI_Aint lb, extent;
    MPI_Type_size(t, &size);
    MPI_Type_get_extent(t, &lb, &extent);
    CHECK(size == 12 && extent == 16);
    for (int commute = 1; commute >= 0; commute--) {
        MPI_Op op;
        CHECK(MPI_Op_create(maxvi, commute, &op) == MPI_SUCCESS);
        run(op, commute, t, rank, n);
        CHECK(MPI_Op_free(&op) == MPI_SUCCESS);
        OK(rank, "struct {double, int} by a program's operation (commute %d) ok; it saw the struct type %d",
           commute, calls_with_holes_seen);
    }

    /* A vector of every other int: the gaps stay. */
    MPI_Datatype v;
    MPI_Op sum;
    CHECK(MPI_Type_vector(2, 1, 2, MPI_INT, &v) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&v) == MPI_SUCCESS);
    CHECK(MPI_Op_create(vsum, 1, &sum) == MPI_SUCCESS);
    int a[12], b[12];
    for (int k = 0; k < 12; k++) { a[k] = rank + k; b[k] = -7; }
    /* Elements of extent 3 ints (lb 0, ub 3): 4 of them, data at ints 0, 2, 3, 5, 6, 8, 9, 11. */
    CHECK(MPI_Allreduce(a, b, 4, v, sum, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int k = 0; k < 12; k++) {
        int data = k % 3 != 1;
        CHECK(b[k] == (data ? n * (n - 1) / 2 + n * k : -7));
    }
    OK(rank, "vector of every other int summed; gaps left: %d %d", b[1], b[4]);
    MPI_Op_free(&sum);
    MPI_Type_free(&v);
    MPI_Type_free(&t);
    MPI_Finalize();
    return 0;
}
