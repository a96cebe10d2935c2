/* MPICH peer of `viaduct bench greq`: MPI_Grequest_start + MPI_Grequest_complete + MPI_Wait,
 * timed with MPI_Wtime, and with the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID,
 * which leaves out time spent waiting for a CPU). Prints the median over 7 trials of ns per
 * request, for both clocks.
 * Usage: mpiexec -n 1 ./greq [iters] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int query_fn(void *extra_state, MPI_Status *status)
{
    (void)extra_state;
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    MPI_Status_set_cancelled(status, 0);
    MPI_Status_set_elements(status, MPI_BYTE, 0);
    return MPI_SUCCESS;
}

static int free_fn(void *extra_state)
{
    (void)extra_state;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra_state, int complete)
{
    (void)extra_state;
    (void)complete;
    return MPI_SUCCESS;
}

static double thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Wall-clock ns per request; the thread CPU ns per request go to *cpu. */
static double trial(long iters, double *cpu)
{
    MPI_Request request;
    MPI_Status status;
    double c0 = thread_cpu_ns();
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        MPI_Grequest_start(query_fn, free_fn, cancel_fn, NULL, &request);
        MPI_Grequest_complete(request);
        MPI_Wait(&request, &status);
    }
    double wall = (MPI_Wtime() - t0) * 1e9 / (double)iters;
    *cpu = (thread_cpu_ns() - c0) / (double)iters;
    return wall;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long iters = argc > 1 ? atol(argv[1]) : 1000000;
    if (iters < 1)
        iters = 1;
    double t[7], c[7], unused;
    trial(iters < 100000 ? iters : 100000, &unused); /* warm-up */
    for (int i = 0; i < 7; i++)
        t[i] = trial(iters, &c[i]);
    qsort(t, 7, sizeof t[0], cmp);
    qsort(c, 7, sizeof c[0], cmp);
    printf("mpich start+complete+wait iters %ld ns_per_request %.1f best %.1f "
           "cpu_ns_per_request %.1f cpu_best %.1f\n",
           iters, t[3], t[0], c[3], c[0]);
    MPI_Finalize();
    return 0;
}
