/* Partitioned communication with MPI_THREAD_MULTIPLE: the main thread starts the requests and
   waits on the send while four threads fill and mark two partitions each (1 MiB in all, past
   the eager limit), around a ring, three rounds. */
#include "common.h"
#include <pthread.h>

#define PARTS 8
#define THREADS 4
#define PER (32768)

static double *sbuf;
static MPI_Request sreq;
static int round_no, me;

static void *marker(void *arg) {
    int t = (int)(long)arg;
    for (int p = t * (PARTS / THREADS); p < (t + 1) * (PARTS / THREADS); p++) {
        for (int k = 0; k < PER; k++) sbuf[p * PER + k] = me * 1e6 + round_no * 1e4 + p * 0.25 + k;
        CHECK(MPI_Pready(p, sreq) == MPI_SUCCESS);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided, n;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int to = (me + 1) % n, from = (me + n - 1) % n;
    sbuf = malloc(sizeof(double) * PARTS * PER);
    double *rbuf = malloc(sizeof(double) * PARTS * PER);
    CHECK(sbuf && rbuf);
    MPI_Request rreq;
    CHECK(MPI_Psend_init(sbuf, PARTS, PER, MPI_DOUBLE, to, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &sreq) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(rbuf, PARTS, PER, MPI_DOUBLE, from, 1, MPI_COMM_WORLD, MPI_INFO_NULL, &rreq) == MPI_SUCCESS);
    for (round_no = 0; round_no < 3; round_no++) {
        CHECK(MPI_Start(&rreq) == MPI_SUCCESS);
        CHECK(MPI_Start(&sreq) == MPI_SUCCESS);
        pthread_t th[THREADS];
        for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, marker, (void *)(long)t) == 0);
        CHECK(MPI_Wait(&sreq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
        CHECK(MPI_Wait(&rreq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        int good = 1;
        for (int p = 0; p < PARTS; p++)
            for (int k = 0; k < PER; k++)
                if (rbuf[p * PER + k] != from * 1e6 + round_no * 1e4 + p * 0.25 + k) good = 0;
        CHECK(good);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    OK(me, "three rounds marked by %d threads ok", THREADS);
    CHECK(MPI_Request_free(&sreq) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&rreq) == MPI_SUCCESS);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
