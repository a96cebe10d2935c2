/* MPI_Win_flush_local and MPI_Win_flush_local_all complete puts and accumulates locally: they
   return (the origin buffers reusable) while the target process is stopped (SIGSTOP, every
   thread frozen). Rank 0 is the target and stops itself; rank 1 waits until it is stopped,
   puts, accumulates and flushes locally, then continues it (SIGCONT). Should the flush wait
   for the target, an alarm after 30 s reports it, continues rank 0 and fails the job. The
   values are checked at the target once the origin unlocked. A get still waits for its data.
   Same host only (rank 1 reads rank 0's state from /proc). */
#include "common.h"
#include <signal.h>
#include <unistd.h>

enum { WAIT_S = 30 };

static pid_t target_pid;

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "rank 1: MPI_Win_flush_local waited for the stopped target\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    kill(target_pid, SIGCONT);
    _exit(4);
}

/* Whether process `pid` is stopped (state T in /proc/PID/stat). */
static int stopped(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'T';
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int pid0 = (int)getpid();
    MPI_Bcast(&pid0, 1, MPI_INT, 0, MPI_COMM_WORLD);
    target_pid = (pid_t)pid0;
    int *mem;
    MPI_Win win;
    CHECK(MPI_Win_allocate(2 * size * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win) == MPI_SUCCESS);
    for (int i = 0; i < 2 * size; i++) mem[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);

    for (int round = 0; round < 2 && size > 1; round++) {
        if (rank == 0) {
            raise(SIGSTOP); /* until rank 1 continues it */
        } else if (rank == 1) {
            double t0 = MPI_Wtime();
            while (!stopped(target_pid) && MPI_Wtime() - t0 < WAIT_S) usleep(1000);
            CHECK(stopped(target_pid));
            int v = 10 + round, one = 1;
            CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win) == MPI_SUCCESS);
            CHECK(MPI_Put(&v, 1, MPI_INT, 0, 2, 1, MPI_INT, win) == MPI_SUCCESS);
            CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, 3, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS);
            signal(SIGALRM, on_alarm);
            alarm(WAIT_S);
            if (round == 0) {
                CHECK(MPI_Win_flush_local(0, win) == MPI_SUCCESS);
            } else {
                CHECK(MPI_Win_flush_local_all(win) == MPI_SUCCESS);
            }
            alarm(0);
            /* Returned while the target was still stopped; the buffers are reusable. */
            CHECK(stopped(target_pid));
            v = -1;
            one = -1;
            kill(target_pid, SIGCONT);
            CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS);
            CHECK(mem[2] == 10 + round && mem[3] == round + 1);
            CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    OK(rank, "flush_local completes puts and accumulates with the target stopped");

    /* A get: flush_local waits for its data. */
    int got = -1;
    int from = (rank + 1) % size;
    CHECK(MPI_Win_lock_all(0, win) == MPI_SUCCESS);
    CHECK(MPI_Get(&got, 1, MPI_INT, 0, 2 * from, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Win_flush_local(0, win) == MPI_SUCCESS);
    CHECK(got == (from == 1 ? 11 : 0));
    CHECK(MPI_Win_unlock_all(win) == MPI_SUCCESS);
    OK(rank, "flush_local completes a get with its data");
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
