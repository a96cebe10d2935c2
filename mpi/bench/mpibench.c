/* The same MPI benchmark for MPICH and viaduct (the library path picks which runs it):
   ping-pong half round trip, streaming bandwidth (a window of 64 MPI_Isend of 4 MiB,
   "bandwidth-w64"), collectives with a barrier between timed
   calls, and generalized request start+complete+wait. Two ranks; on more ranks only the
   collectives (allreduce, bcast, allgather, alltoall). Prints one line per figure:
   "<name> <bytes> <value> <unit>" (for alltoall, <bytes> is each rank's part for each rank).
   BENCH_SCALE (default 1) multiplies the repetitions; BENCH_COLL="bcast,allreduce" runs only
   those collectives (no ping-pong, bandwidth or generalized requests), BENCH_COLL_SIZES="8,65536"
   at those sizes (default 8,1024,65536,1048576). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;
static double scale = 1.0;

static int reps(int n) {
    int r = (int)(n * scale);
    return r < 1 ? 1 : r;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of `trials` trial means. */
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2];
}

enum { TRIALS = 5 };

static void pingpong(int bytes) {
    char *buf = calloc(bytes + 1, 1);
    int n = reps(bytes <= 512 ? 5000 : bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 400 : 100);
    double t[TRIALS];
    for (int trial = -1; trial < TRIALS; trial++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            if (rank == 0) {
                MPI_Send(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        if (trial >= 0) t[trial] = (MPI_Wtime() - t0) / n / 2 * 1e6;
    }
    if (rank == 0) printf("pingpong %d %.3f us\n", bytes, median(t, TRIALS));
    free(buf);
}

static void bandwidth(int bytes, int window) {
    char *sbuf = calloc(bytes, 1), *rbuf = calloc((size_t)bytes * window, 1);
    MPI_Request *rq = malloc(window * sizeof *rq);
    int n = reps(4);
    double t[TRIALS];
    for (int trial = -1; trial < TRIALS; trial++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            for (int w = 0; w < window; w++) {
                if (rank == 0) MPI_Isend(sbuf, bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &rq[w]);
                else MPI_Irecv(rbuf + (size_t)w * bytes, bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &rq[w]);
            }
            MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
            int ack = 0;
            if (rank == 0) MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
        }
        if (trial >= 0) t[trial] = (double)bytes * window * n / (MPI_Wtime() - t0) / 1e9;
    }
    if (rank == 0) printf("bandwidth-w%d %d %.3f GB/s\n", window, bytes, median(t, TRIALS));
    free(sbuf);
    free(rbuf);
    free(rq);
}

static void collective(const char *name, int bytes) {
    char *a = calloc((size_t)(bytes + 8) * size, 1), *b = calloc((size_t)(bytes + 8) * size, 1);
    int n = reps(bytes >= 65536 ? 50 : 500);
    double t[TRIALS];
    for (int trial = -1; trial < TRIALS; trial++) {
        double sum = 0;
        for (int i = 0; i < n; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            if (!strcmp(name, "allreduce")) MPI_Allreduce(a, b, bytes / 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            else if (!strcmp(name, "bcast")) MPI_Bcast(a, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
            else if (!strcmp(name, "alltoall")) MPI_Alltoall(a, bytes, MPI_BYTE, b, bytes, MPI_BYTE, MPI_COMM_WORLD);
            else MPI_Allgather(a, bytes, MPI_BYTE, b, bytes, MPI_BYTE, MPI_COMM_WORLD);
            sum += MPI_Wtime() - t0;
        }
        double mine = sum / n, slowest;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (trial >= 0) t[trial] = slowest * 1e6;
    }
    if (rank == 0) printf("%s %d %.3f us\n", name, bytes, median(t, TRIALS));
    free(a);
    free(b);
}

static int q(void *e, MPI_Status *s) { (void)e; MPI_Status_set_elements(s, MPI_BYTE, 0); MPI_Status_set_cancelled(s, 0); s->MPI_SOURCE = MPI_UNDEFINED; s->MPI_TAG = MPI_UNDEFINED; return MPI_SUCCESS; }
static int f(void *e) { (void)e; return MPI_SUCCESS; }
static int c(void *e, int done) { (void)e; (void)done; return MPI_SUCCESS; }

static void greq(void) {
    int n = reps(200000);
    double t[TRIALS];
    for (int trial = -1; trial < TRIALS; trial++) {
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            MPI_Request r;
            MPI_Grequest_start(q, f, c, NULL, &r);
            MPI_Grequest_complete(r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        if (trial >= 0) t[trial] = (MPI_Wtime() - t0) / n * 1e9;
    }
    if (rank == 0) printf("greq 0 %.1f ns\n", median(t, TRIALS));
}

/* The last line before MPI_Finalize: a script that sees it has every figure, and can bound
   how long the library may then take to finalize (scripts/bench-cluster). */
static void done(void) {
    if (rank == 0) printf("mpibench: done\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *s = getenv("BENCH_SCALE");
    if (s) scale = atof(s);
    if (size < 2) {
        if (rank == 0) fprintf(stderr, "mpibench: needs at least 2 ranks, not %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* BENCH_PINGPONG="8,16,...": only the ping-pong, at those sizes (the shared-memory sweep,
       scripts/bench-shm-sweep). */
    const char *only = getenv("BENCH_PINGPONG");
    if (only) {
        for (const char *p = only; *p;) {
            char *end;
            long b = strtol(p, &end, 10);
            if (end == p || b < 0 || b > (1L << 30)) {
                if (rank == 0) fprintf(stderr, "mpibench: bad BENCH_PINGPONG %s\n", only);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            pingpong((int)b);
            p = *end == ',' ? end + 1 : end;
        }
        done();
        MPI_Finalize();
        return 0;
    }
    const char *sel = getenv("BENCH_COLL");
    if (size == 2 && !sel) {
        int pp[] = {0, 8, 64, 512, 4096};
        for (unsigned i = 0; i < sizeof pp / sizeof *pp; i++) pingpong(pp[i]);
        bandwidth(4 << 20, 64);
    }
    const char *colls[] = {"allreduce", "bcast", "allgather", "alltoall"};
    int cs[16] = {8, 1024, 65536, 1 << 20};
    unsigned ncs = 4;
    const char *sizes = getenv("BENCH_COLL_SIZES");
    if (sizes) {
        ncs = 0;
        for (const char *p = sizes; *p && ncs < 16;) {
            char *end;
            long b = strtol(p, &end, 10);
            if (end == p || b < 0 || b > (1L << 26)) {
                if (rank == 0) fprintf(stderr, "mpibench: bad BENCH_COLL_SIZES %s\n", sizes);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            cs[ncs++] = (int)b;
            p = *end == ',' ? end + 1 : end;
        }
    }
    for (int k = 0; k < 4; k++) {
        if (sel && !strstr(sel, colls[k])) continue;
        for (unsigned i = 0; i < ncs; i++) collective(colls[k], cs[i]);
    }
    if (size == 2 && !sel) greq();
    done();
    MPI_Finalize();
    return 0;
}
