/* Collective latency by the procedure of the standard MPI micro-benchmarks (OSU's
   osu_bcast, osu_allreduce, ...), the same binary for MPICH and viaduct (the library path
   picks which runs it): per operation and size, a warm-up, then `iters` timed calls, each
   preceded by an MPI_Barrier and timed on its own; each rank's mean time per call is
   averaged over the ranks (MPI_Reduce of the sum, divided by the size), as OSU prints
   "Avg Latency". Operations: bcast (root 0), allreduce and reduce (float sum, root 0),
   allgather and alltoall (`bytes` per rank), barrier (once, as size 0: osu_barrier's
   figure; the barrier before each timed call also sets how far apart the ranks enter it).
   Prints one line per figure: "<op> <bytes> <avg_us> <min_us> <max_us>". BENCH_SCALE (default 1) multiplies the
   iterations; BENCH_OPS (default all) and BENCH_MAX (default 1048576) narrow the run. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static int iters_for(int bytes, double scale) {
    int n = bytes <= 8192 ? 1000 : bytes <= 131072 ? 200 : 50;
    n = (int)(n * scale);
    return n < 3 ? 3 : n;
}

/* Whether `name` is one of the comma-separated names of `list` (whole names: "reduce" is not
   in "allreduce"). */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

static void call(const char *op, void *s, void *r, int bytes) {
    int floats = bytes / (int)sizeof(float);
    if (!strcmp(op, "bcast"))
        MPI_Bcast(s, bytes, MPI_CHAR, 0, MPI_COMM_WORLD);
    else if (!strcmp(op, "allreduce"))
        MPI_Allreduce(s, r, floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (!strcmp(op, "reduce"))
        MPI_Reduce(s, r, floats, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    else if (!strcmp(op, "allgather"))
        MPI_Allgather(s, bytes, MPI_CHAR, r, bytes, MPI_CHAR, MPI_COMM_WORLD);
    else if (!strcmp(op, "barrier"))
        MPI_Barrier(MPI_COMM_WORLD);
    else if (!strcmp(op, "alltoall"))
        MPI_Alltoall(s, bytes, MPI_CHAR, r, bytes, MPI_CHAR, MPI_COMM_WORLD);
}

static void measure(const char *op, char *s, char *r, int b, double scale) {
    int n = iters_for(b, scale), warm = n / 10 + 1;
    double total = 0;
    for (int i = -warm; i < n; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        call(op, s, r, b);
        double t = MPI_Wtime() - t0;
        if (i >= 0) total += t;
    }
    double mean = total / n * 1e6, sum, mn, mx;
    MPI_Reduce(&mean, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mean, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mean, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%s %d %.3f %.3f %.3f\n", op, b, sum / size, mn, mx);
    fflush(stdout);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *sc = getenv("BENCH_SCALE");
    double scale = sc ? atof(sc) : 1.0;
    const char *ops_env = getenv("BENCH_OPS");
    const char *mx = getenv("BENCH_MAX");
    long max = mx ? atol(mx) : 1048576;
    const char *ops[] = {"bcast", "allreduce", "reduce", "allgather", "alltoall", "barrier"};
    const int sizes[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
    size_t cap = (size_t)max * (size_t)size;
    char *s = malloc(cap), *r = malloc(cap);
    if (!s || !r) {
        fprintf(stderr, "osucoll: cannot allocate %zu bytes\n", cap);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < cap; i++) s[i] = (char)(i * 7 + rank), r[i] = 0;
    for (int o = 0; o < 6; o++) {
        if (ops_env && !listed(ops_env, ops[o])) continue;
        if (!strcmp(ops[o], "barrier")) {
            measure(ops[o], s, r, 0, scale);
            continue;
        }
        for (int k = 0; k < 7 && sizes[k] <= max; k++) measure(ops[o], s, r, sizes[k], scale);
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
