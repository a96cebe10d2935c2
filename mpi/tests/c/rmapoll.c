/* A rank that waits for other ranks' passive-target updates by polling its own window, as
   Fortran coarray runtimes wait for an event: rank 0 holds MPI_Win_lock_all(MPI_MODE_NOCHECK)
   on its window and loops over MPI_Win_sync, a look at its counter, a short sleep and
   MPI_Win_flush to itself, while every other rank takes MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0),
   adds 1 with MPI_Accumulate and unlocks, ROUNDS times. Those calls must let the other ranks'
   locks and operations in: a library that only serves them in other calls leaves rank 0
   polling forever (bounded here: the program fails after 20 s). With RMAPOLL_SYNC_ALONE=1, a
   second round polls with MPI_Win_sync alone (viaduct serves there too; MPICH 4.0.2 does
   not, so that round is not compared with it). */
#include "common.h"
#include <time.h>
#include <unistd.h>

#define ROUNDS 50

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Rank 0 polls counter `slot` until it reaches `want`; with `flush`, also flushes to itself. */
static void poll_until(MPI_Win win, int *base, int slot, int want, int flush) {
    double start = now();
    CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win) == MPI_SUCCESS);
    for (;;) {
        CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
        volatile int *c = base + slot;
        if (*c >= want) break;
        if (now() - start > 20.0) {
            fprintf(stderr, "rank 0: counter %d still %d of %d after 20 s\n", slot, *c, want);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        usleep(10);
        if (flush) CHECK(MPI_Win_flush(0, win) == MPI_SUCCESS);
    }
    CHECK(MPI_Win_unlock_all(win) == MPI_SUCCESS);
}

int main(int argc, char **argv) {
    int me, n, *base;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(MPI_Win_allocate(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                           &win) == MPI_SUCCESS);
    base[0] = base[1] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    const char *alone = getenv("RMAPOLL_SYNC_ALONE");
    int slots = alone && *alone == '1' ? 2 : 1;
    for (int slot = 0; slot < slots; slot++) {
        if (me == 0) {
            poll_until(win, base, slot, (n - 1) * ROUNDS, slot == 0);
            OK(me, "%s: counter %d", slot == 0 ? "sync and flush" : "sync alone", base[slot]);
        } else {
            int one = 1;
            for (int i = 0; i < ROUNDS; i++) {
                CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS);
                CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, slot, 1, MPI_INT, MPI_SUM, win) ==
                      MPI_SUCCESS);
                CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
            }
            OK(me, "%s: %d updates", slot == 0 ? "sync and flush" : "sync alone", ROUNDS);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
