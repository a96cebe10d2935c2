/* MPI_THREAD_MULTIPLE: several threads of each rank exchange messages at once, each thread on
   its own tag, and one thread per rank runs collectives on its own communicator. */
#include "common.h"
#include <pthread.h>

enum { THREADS = 4, ROUNDS = 200 };
static int rank, size;
static MPI_Comm comms[THREADS];

static void *worker(void *arg) {
    int t = (int)(long)arg;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < ROUNDS; i++) {
        int out = rank * 100000 + t * 1000 + i, in = -1;
        MPI_Status st;
        CHECK(MPI_Sendrecv(&out, 1, MPI_INT, right, t, &in, 1, MPI_INT, left, t, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
        CHECK(in == left * 100000 + t * 1000 + i && st.MPI_TAG == t);
        int sum = 0;
        CHECK(MPI_Allreduce(&out, &sum, 1, MPI_INT, MPI_SUM, comms[t]) == MPI_SUCCESS);
        long want = 0;
        for (int r = 0; r < size; r++) want += r * 100000 + t * 1000 + i;
        CHECK(sum == want);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int t = 0; t < THREADS; t++) CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]) == MPI_SUCCESS);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(long)t);
    int flag = 1;
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    CHECK(MPI_Is_thread_main(&flag) == MPI_SUCCESS && flag == 1);
    for (int t = 0; t < THREADS; t++) MPI_Comm_free(&comms[t]);
    OK(rank, "%d threads x %d rounds ok", THREADS, ROUNDS);
    MPI_Finalize();
    return 0;
}
