/* Passive-target RMA with MPI_THREAD_MULTIPLE: in one MPI_Win_lock_all epoch, four threads per
   rank loop over put+flush, get+flush (reading back the value the thread just put: each flush
   must complete the operations its own thread queued) and accumulate+flush, against rank 0 and
   against the rank itself; then every accumulate sum and every last put is checked. The window
   is a whole number of 64-byte lines: on a window of other sizes, MPICH 4.0.2 misplaces the
   operations to rank 1 of a node. */
#include "common.h"
#include <pthread.h>

#define THREADS 4
#define ITER 600

static MPI_Win win;
static int me, n;
/* Window layout (ints): n * THREADS put slots written at rank 0 (one per rank and thread),
   THREADS put slots written at the rank itself, the sum at rank 0, the sum at the rank. */
#define SLOT0(r, t) ((r) * THREADS + (t))
#define SLOTSELF(t) (n * THREADS + (t))
#define SUM0 (n * THREADS + THREADS)
#define SUMSELF (SUM0 + 1)

static int value(int t, int i) { return me * 1000000 + t * 10000 + i; }

static void *worker(void *arg) {
    int t = (int)(long)arg;
    for (int i = 0; i < ITER; i++) {
        int v = value(t, i), got = -1, one = 1;
        CHECK(MPI_Put(&v, 1, MPI_INT, 0, SLOT0(me, t), 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_flush(0, win) == MPI_SUCCESS);
        CHECK(MPI_Get(&got, 1, MPI_INT, 0, SLOT0(me, t), 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_flush(0, win) == MPI_SUCCESS);
        if (got != v) {
            fprintf(stderr, "rank %d thread %d: got %d from rank 0, put %d\n", me, t, got, v);
            CHECK(got == v);
        }
        CHECK(MPI_Put(&v, 1, MPI_INT, me, SLOTSELF(t), 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_flush(me, win) == MPI_SUCCESS);
        got = -1;
        CHECK(MPI_Get(&got, 1, MPI_INT, me, SLOTSELF(t), 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_flush(me, win) == MPI_SUCCESS);
        CHECK(got == v);
        CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, SUM0, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS);
        CHECK(MPI_Win_flush(0, win) == MPI_SUCCESS);
        CHECK(MPI_Accumulate(&one, 1, MPI_INT, me, SUMSELF, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS);
        CHECK(MPI_Win_flush(me, win) == MPI_SUCCESS);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int len = (n * THREADS + THREADS + 2 + 15) / 16 * 16; /* whole cache lines */
    int *base;
    CHECK(MPI_Win_allocate(len * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win) == MPI_SUCCESS);
    CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win) == MPI_SUCCESS);
    for (int k = 0; k < len; k++) base[k] = 0;
    CHECK(MPI_Win_unlock(me, win) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);

    CHECK(MPI_Win_lock_all(0, win) == MPI_SUCCESS);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) CHECK(pthread_create(&th[t], NULL, worker, (void *)(long)t) == 0);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    CHECK(MPI_Win_unlock_all(win) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);

    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win) == MPI_SUCCESS);
    int bad = 0;
    if (base[SUMSELF] != THREADS * ITER) {
        fprintf(stderr, "rank %d: own sum %d, want %d\n", me, base[SUMSELF], THREADS * ITER);
        bad++;
    }
    for (int t = 0; t < THREADS; t++)
        if (base[SLOTSELF(t)] != value(t, ITER - 1)) bad++;
    if (me == 0) {
        if (base[SUM0] != n * THREADS * ITER) {
            fprintf(stderr, "rank 0: sum %d, want %d\n", base[SUM0], n * THREADS * ITER);
            bad++;
        }
        for (int r = 0; r < n; r++)
            for (int t = 0; t < THREADS; t++)
                if (base[SLOT0(r, t)] != r * 1000000 + t * 10000 + ITER - 1) bad++;
    }
    CHECK(MPI_Win_unlock(me, win) == MPI_SUCCESS);
    CHECK(bad == 0);
    OK(me, "%d threads x %d put/get/accumulate with flushes: sums and last puts exact", THREADS, ITER);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
