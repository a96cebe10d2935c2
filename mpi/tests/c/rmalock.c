/* One-sided communication with passive-target synchronisation: an exclusive-lock counter
   (MPI_Accumulate and MPI_Fetch_and_op from every rank into rank 0, and a get-then-put
   increment that only an exclusive lock keeps exact), shared-lock gets, MPI_Win_lock_all with
   the flushes, MPI_Rput/MPI_Rget/MPI_Raccumulate/MPI_Rget_accumulate completed by MPI_Wait,
   MPI_Win_unlock without a lock giving MPI_ERR_RMA_SYNC under MPI_ERRORS_RETURN, and a target
   that sits in MPI_Recv, then in MPI_Barrier, while the other ranks lock, update and unlock
   its window. */
#include "common.h"

#define SLOTS 24
#define ROUNDS 3

/* Slots of the window (ints). */
#define S_ACC 0      /* MPI_Accumulate counter at rank 0 */
#define S_FOP 1      /* MPI_Fetch_and_op counter at rank 0 */
#define S_RMW 2      /* get, flush, put counter at rank 0 */
#define S_ID 4       /* 1000 + rank, read by shared-lock gets */
#define S_ALL 8      /* 8 + origin: written under lock_all */
#define S_REQ 13     /* written by the left neighbour with MPI_Rput */
#define S_RACC 14    /* MPI_Raccumulate sum at rank 0 */
#define S_BUSY 15    /* sum written while rank 0 sits in MPI_Recv */
#define S_BUSY2 16   /* sum written while rank 0 sits in MPI_Barrier */
#define S_SPARE 20   /* written under a fence by the misuse checks */

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n;

    int *buf;
    MPI_Win win;
    CHECK(MPI_Win_allocate(SLOTS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &buf,
                           &win) == MPI_SUCCESS);
    for (int i = 0; i < SLOTS; i++) buf[i] = 0;
    buf[S_ID] = 1000 + rank;
    CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Misuse: an unlock without a lock. */
    CHECK_RC(MPI_Win_unlock(right, win), MPI_ERR_RMA_SYNC);
    OK(rank, "unlock without lock refused");

    /* More misuse, each MPI_ERR_RMA_SYNC: a request-based operation outside a passive-target
       epoch, a lock inside a fence epoch, a second lock of one target, a fence inside a lock
       epoch, a flush without an epoch; and a lock type that is not one. */
    MPI_Request rq;
    int one = 1, c = 0;
    CHECK_RC(MPI_Rput(&one, 1, MPI_INT, right, S_SPARE, 1, MPI_INT, win, &rq), MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    CHECK(MPI_Put(&one, 1, MPI_INT, right, S_SPARE, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK_RC(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win), MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win) == MPI_SUCCESS);
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win) == MPI_SUCCESS);
    CHECK_RC(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win), MPI_ERR_RMA_SYNC);
    CHECK_RC(MPI_Win_fence(0, win), MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_unlock(right, win) == MPI_SUCCESS);
    CHECK_RC(MPI_Win_flush(right, win), MPI_ERR_RMA_SYNC);
    /* MPI_ERR_LOCKTYPE is the standard's class; MPICH 4.0.2 gives MPI_ERR_ARG. */
    MPI_Error_class(MPI_Win_lock(7, right, 0, win), &c);
    OK(rank, "misuse refused, bad lock type refused %d", c == MPI_ERR_LOCKTYPE || c == MPI_ERR_ARG);
    MPI_Barrier(MPI_COMM_WORLD);

    /* The exclusive-lock counters at rank 0. */
    int olds[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS);
        CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, S_ACC, 1, MPI_INT, MPI_SUM, win) ==
              MPI_SUCCESS);
        CHECK(MPI_Fetch_and_op(&one, &olds[k], MPI_INT, 0, S_FOP, MPI_SUM, win) == MPI_SUCCESS);
        int v = -1;
        CHECK(MPI_Get(&v, 1, MPI_INT, 0, S_RMW, 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_flush(0, win) == MPI_SUCCESS);
        v += 1;
        CHECK(MPI_Put(&v, 1, MPI_INT, 0, S_RMW, 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
    }
    int all[ROUNDS * 4];
    CHECK(n <= 4);
    CHECK(MPI_Gather(olds, ROUNDS, MPI_INT, all, ROUNDS, MPI_INT, 0, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(all, ROUNDS * n, sizeof(int), cmp_int);
        int distinct = 1;
        for (int i = 0; i < ROUNDS * n; i++) distinct &= all[i] == i;
        CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS);
        CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
        OK(rank, "counters accumulate %d fetch_and_op %d get-put %d fetched values distinct %d",
           buf[S_ACC], buf[S_FOP], buf[S_RMW], distinct);
        CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
    } else {
        OK(rank, "counters done");
    }

    /* Shared-lock gets of every rank's identity slot. */
    int sum = 0;
    for (int t = 0; t < n; t++) {
        int v = -1;
        CHECK(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win) == MPI_SUCCESS);
        CHECK(MPI_Get(&v, 1, MPI_INT, t, S_ID, 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_unlock(t, win) == MPI_SUCCESS);
        CHECK(v == 1000 + t);
        sum += v;
    }
    OK(rank, "shared-lock gets sum %d", sum);

    /* lock_all, put then get back through a flush, every flush kind. */
    CHECK(MPI_Win_lock_all(0, win) == MPI_SUCCESS);
    int mark = 10 * (rank + 1), back[4];
    for (int t = 0; t < n; t++) {
        CHECK(MPI_Put(&mark, 1, MPI_INT, t, S_ALL + rank, 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_flush(t, win) == MPI_SUCCESS);
        back[t] = -1;
        CHECK(MPI_Get(&back[t], 1, MPI_INT, t, S_ALL + rank, 1, MPI_INT, win) == MPI_SUCCESS);
    }
    CHECK(MPI_Win_flush_local_all(win) == MPI_SUCCESS);
    CHECK(MPI_Win_flush_local(right, win) == MPI_SUCCESS);
    CHECK(MPI_Win_flush_all(win) == MPI_SUCCESS);
    int same = 1;
    for (int t = 0; t < n; t++) same &= back[t] == mark;
    CHECK(MPI_Win_unlock_all(win) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    /* MPI_MODE_NOCHECK on viaduct only: MPICH 4.0.2 never grants a later exclusive lock of a
       target that was locked by itself with MPI_MODE_NOCHECK (the job hangs further down). */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen;
    MPI_Get_library_version(lib, &liblen);
    int nocheck = strstr(lib, "viaduct") != NULL ? MPI_MODE_NOCHECK : 0;
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, rank, nocheck, win) == MPI_SUCCESS);
    CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
    int mine = 1;
    for (int o = 0; o < n; o++) mine &= buf[S_ALL + o] == 10 * (o + 1);
    CHECK(MPI_Win_unlock(rank, win) == MPI_SUCCESS);
    OK(rank, "lock_all read back %d own slots %d", same, mine);

    /* Request-based operations. */
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win) == MPI_SUCCESS);
    int rv = 500 + rank, rg = -1;
    CHECK(MPI_Rput(&rv, 1, MPI_INT, right, S_REQ, 1, MPI_INT, win, &rq) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Win_flush(right, win) == MPI_SUCCESS);
    CHECK(MPI_Rget(&rg, 1, MPI_INT, right, S_REQ, 1, MPI_INT, win, &rq) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Win_unlock(right, win) == MPI_SUCCESS);
    CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS);
    int add = rank + 1, seen = -1;
    CHECK(MPI_Raccumulate(&add, 1, MPI_INT, 0, S_RACC, 1, MPI_INT, MPI_SUM, win, &rq) ==
          MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS);
    CHECK(MPI_Rget_accumulate(NULL, 0, MPI_INT, &seen, 1, MPI_INT, 0, S_RACC, 1, MPI_INT,
                              MPI_NO_OP, win, &rq) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
    OK(rank, "rput/rget %d raccumulate sum %d", rg, seen);

    /* A target busy in MPI_Recv, then in MPI_Barrier: the origins' epochs still complete.
       Rank n-1 sends rank 0 the token once every other origin finished its first epoch, so
       those epochs all happen while rank 0 waits in MPI_Recv; the second epochs happen while
       it waits in the barrier. */
    if (rank == 0) {
        int token = -1;
        CHECK(MPI_Recv(&token, 1, MPI_INT, n - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
              MPI_SUCCESS);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win) == MPI_SUCCESS);
        CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
        OK(rank, "while busy: in recv %d in barrier %d (token %d)", buf[S_BUSY], buf[S_BUSY2],
           token);
        CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
    } else {
        CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS);
        CHECK(MPI_Accumulate(&rank, 1, MPI_INT, 0, S_BUSY, 1, MPI_INT, MPI_SUM, win) ==
              MPI_SUCCESS);
        CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
        if (rank == n - 1) {
            for (int o = 1; o < n - 1; o++)
                CHECK(MPI_Recv(NULL, 0, MPI_INT, o, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
                      MPI_SUCCESS);
            int token = 77;
            CHECK(MPI_Send(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Send(NULL, 0, MPI_INT, n - 1, 8, MPI_COMM_WORLD) == MPI_SUCCESS);
        }
        CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS);
        CHECK(MPI_Accumulate(&rank, 1, MPI_INT, 0, S_BUSY2, 1, MPI_INT, MPI_SUM, win) ==
              MPI_SUCCESS);
        CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
        MPI_Barrier(MPI_COMM_WORLD);
        OK(rank, "busy target updated");
    }

    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
