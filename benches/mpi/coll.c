/* MPICH peer of `viaduct bench collective`: the time of one collective call on N ranks.
 *
 * For each size it runs TRIALS trials of ITERS calls (after a warm-up), each trial between two
 * barriers; a trial's figure is the slowest rank's mean time per call (MPI_Reduce with MPI_MAX),
 * and the line reports the median over the trials in microseconds, like viaduct's benchmark.
 * Sizes are bytes: the whole buffer for bcast and allreduce (MPI_DOUBLE, MPI_SUM), each rank's
 * part for allgather.
 *
 * Usage: mpiexec -n 4 ./coll OP SIZE[,SIZE...] [ITERS]      OP = bcast | allreduce | allgather
 * Output (rank 0): one line per size:
 *   mpich collective op=allreduce ranks=4 size=8 iters=1000 median_us=1.234 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRIALS 7

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void call(const char *op, char *buf, char *out, long size, int nranks)
{
    if (strcmp(op, "bcast") == 0)
        MPI_Bcast(buf, (int)size, MPI_BYTE, 0, MPI_COMM_WORLD);
    else if (strcmp(op, "allreduce") == 0)
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)(size / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    else
        MPI_Allgather(buf, (int)size, MPI_BYTE, out, (int)size, MPI_BYTE, MPI_COMM_WORLD);
    (void)nranks;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 3 || (strcmp(argv[1], "bcast") && strcmp(argv[1], "allreduce") &&
                     strcmp(argv[1], "allgather"))) {
        if (rank == 0)
            fprintf(stderr, "usage: coll bcast|allreduce|allgather SIZE[,SIZE...] [ITERS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *op = argv[1];
    long fixed_iters = argc > 3 ? atol(argv[3]) : 0;
    char *sizes = strdup(argv[2]);
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        long size = atol(tok);
        if (size < 0 || (strcmp(op, "allreduce") == 0 && size % 8)) {
            if (rank == 0)
                fprintf(stderr, "coll: size %ld: allreduce sizes are multiples of 8\n", size);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        long iters = fixed_iters > 0 ? fixed_iters : (size >= (1 << 20) ? 50 : 1000);
        char *buf = malloc(size ? size : 1);
        char *out = malloc(size > 0 ? (size_t)size * (size_t)nranks : 1);
        for (long i = 0; i + 8 <= size; i += 8) {
            double v = rank + 1;
            memcpy(buf + i, &v, 8);
        }
        for (long i = 0; i < iters / 10 + 1; i++)
            call(op, buf, out, size, nranks);
        double t[TRIALS];
        for (int k = 0; k < TRIALS; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (long i = 0; i < iters; i++)
                call(op, buf, out, size, nranks);
            double mine = (MPI_Wtime() - t0) * 1e6 / (double)iters, slowest;
            MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            t[k] = slowest;
        }
        if (rank == 0) {
            qsort(t, TRIALS, sizeof t[0], cmp);
            printf("mpich collective op=%s ranks=%d size=%ld iters=%ld median_us=%.3f\n", op,
                   nranks, size, iters, t[TRIALS / 2]);
            fflush(stdout);
        }
        free(buf);
        free(out);
    }
    free(sizes);
    MPI_Finalize();
    return 0;
}
