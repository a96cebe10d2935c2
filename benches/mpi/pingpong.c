/* MPICH peer of `viaduct bench latency` / `viaduct bench bandwidth`: the same two loops as
 * src/bench/agent.rs, on 2 ranks.
 *
 * latency: blocking MPI_Send/MPI_Recv ping-pong, timed with MPI_Wtime over batches of BATCH
 * round trips; prints the median over the batches and the mean half round trip. bandwidth: rank 0 streams windows of WINDOW MPI_Isends to
 * rank 1 (which keeps as many MPI_Irecvs posted), then a 1-byte acknowledgement; MB/s.
 *
 * Usage: mpiexec -n 2 -bind-to core ./pingpong latency|bandwidth SIZE[,SIZE...] [ITERS] [WINDOW]
 * Output (rank 0), one line per size:
 *   mpich latency size=8 iters=20000 median=0.321 mean=0.334 unit=us */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 200
/* Round trips per clock read: the median is taken over batches, as `viaduct bench` takes it
 * (src/bench/clock.rs), and a batch reads the clock once instead of twice per round trip. */
#define BATCH 16

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void round_trip(int rank, long size, char *buf)
{
    int peer = 1 - rank;
    if (rank == 0) {
        MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, (int)size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    }
}

static void latency(int rank, long size, long iters, char *buf)
{
    long per = iters < BATCH ? (iters > 0 ? iters : 1) : BATCH;
    long batches = iters / per > 0 ? iters / per : 1;
    double *t = malloc(sizeof(double) * (size_t)batches);
    for (long i = 0; i < WARMUP; i++)
        round_trip(rank, size, buf);
    for (long b = 0; b < batches; b++) {
        double t0 = MPI_Wtime();
        for (long k = 0; k < per; k++)
            round_trip(rank, size, buf);
        t[b] = (MPI_Wtime() - t0) * 1e6 / (2.0 * (double)per);
    }
    if (rank == 0) {
        double sum = 0;
        for (long b = 0; b < batches; b++)
            sum += t[b];
        qsort(t, (size_t)batches, sizeof t[0], cmp);
        printf("mpich latency size=%ld iters=%ld median=%.4f mean=%.4f unit=us\n", size,
               batches * per, t[(batches - 1) / 2], sum / (double)batches);
        fflush(stdout);
    }
    free(t);
}

static void bandwidth(int rank, long size, long iters, int window, char *buf)
{
    int peer = 1 - rank;
    long rounds = (iters + window - 1) / window;
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)window);
    MPI_Status *stats = malloc(sizeof(MPI_Status) * (size_t)window);
    char ack = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long r = 0; r < rounds; r++) {
        for (int w = 0; w < window; w++) {
            if (rank == 0)
                MPI_Isend(buf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
            else
                MPI_Irecv(buf, (int)size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &reqs[w]);
        }
        MPI_Waitall(window, reqs, stats);
    }
    if (rank == 0) {
        MPI_Recv(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double secs = MPI_Wtime() - t0;
        double mbs = (double)rounds * window * (double)size / secs / 1e6;
        printf("mpich bandwidth size=%ld iters=%ld median=%.3f mean=%.3f unit=MB/s\n", size,
               rounds * window, mbs, mbs);
        fflush(stdout);
    } else {
        MPI_Send(&ack, 1, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
    }
    free(reqs);
    free(stats);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks != 2 || argc < 3 || (strcmp(argv[1], "latency") && strcmp(argv[1], "bandwidth"))) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 pingpong latency|bandwidth SIZE[,SIZE...] "
                            "[ITERS] [WINDOW]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long iters = argc > 3 ? atol(argv[3]) : 20000;
    int window = argc > 4 ? atoi(argv[4]) : 16;
    if (iters < 1)
        iters = 1;
    if (window < 1)
        window = 1;
    char *sizes = strdup(argv[2]);
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        long size = atol(tok);
        char *buf = calloc(1, size > 0 ? (size_t)size : 1);
        if (strcmp(argv[1], "latency") == 0)
            latency(rank, size, iters, buf);
        else
            bandwidth(rank, size, iters, window, buf);
        free(buf);
    }
    free(sizes);
    MPI_Finalize();
    return 0;
}
