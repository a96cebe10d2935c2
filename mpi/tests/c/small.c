/* Small operations: generalized request callbacks in the standard's order, many generalized
   requests started, completed and waited from two threads at once, MPI_ERR_IN_STATUS of a
   failing query, and small MPI_Allgather (MPI_IN_PLACE too) and MPI_Allgatherv (unequal
   counts, MPI_IN_PLACE) checked against the expected values at any number of ranks. */
#include "common.h"
#include <pthread.h>

static char events[64];
static int nevents;

static void event(char c) {
    if (nevents < (int)sizeof events - 1) events[nevents++] = c;
    events[nevents] = 0;
}

static int q_fn(void *e, MPI_Status *s) {
    (void)e;
    event('q');
    MPI_Status_set_elements(s, MPI_INT, 3);
    MPI_Status_set_cancelled(s, 0);
    s->MPI_SOURCE = 7;
    s->MPI_TAG = 9;
    return MPI_SUCCESS;
}
static int f_fn(void *e) { (void)e; event('f'); return MPI_SUCCESS; }
static int c_fn(void *e, int done) { (void)e; event(done ? 'C' : 'c'); return MPI_SUCCESS; }
static int bad_q(void *e, MPI_Status *s) { (void)e; (void)s; return MPI_ERR_OTHER; }

/* Per-thread counts of the callbacks. */
struct counts { int q, f; };
static int tq(void *e, MPI_Status *s) { ((struct counts *)e)->q++; (void)s; return MPI_SUCCESS; }
static int tf(void *e) { ((struct counts *)e)->f++; return MPI_SUCCESS; }
static int tc(void *e, int d) { (void)e; (void)d; return MPI_SUCCESS; }

enum { PER_THREAD = 20000, BATCH = 50 };

static void *many(void *arg) {
    struct counts *k = arg;
    MPI_Request r[BATCH];
    for (int i = 0; i < PER_THREAD / BATCH; i++) {
        for (int j = 0; j < BATCH; j++) CHECK(MPI_Grequest_start(tq, tf, tc, k, &r[j]) == MPI_SUCCESS);
        for (int j = 0; j < BATCH; j++)
            for (int m = j + 1; m < BATCH; m++) CHECK(r[j] != r[m]);
        for (int j = BATCH - 1; j >= 0; j--) CHECK(MPI_Grequest_complete(r[j]) == MPI_SUCCESS);
        if (i % 2) {
            CHECK(MPI_Waitall(BATCH, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        } else {
            for (int j = 0; j < BATCH; j++) CHECK(MPI_Wait(&r[j], MPI_STATUS_IGNORE) == MPI_SUCCESS);
        }
        for (int j = 0; j < BATCH; j++) CHECK(r[j] == MPI_REQUEST_NULL);
    }
    return NULL;
}

static int value(int rank, int i) { return rank * 1000 + i; }

int main(int argc, char **argv) {
    int rank, size, provided, count;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Status st;

    /* Complete, then wait: query before free, both once; the status is the query's. */
    MPI_Request r;
    nevents = 0;
    CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &r) == MPI_SUCCESS);
    CHECK(MPI_Grequest_complete(r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS && r == MPI_REQUEST_NULL);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == 3);
    CHECK(st.MPI_SOURCE == 7 && st.MPI_TAG == 9);
    OK(rank, "complete then wait: %s", events);

    /* Cancel before completion (complete flag 0), cancel after (flag 1), then the wait. */
    nevents = 0;
    CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &r) == MPI_SUCCESS);
    MPI_Request h = r;
    CHECK(MPI_Cancel(&r) == MPI_SUCCESS);
    CHECK(MPI_Grequest_complete(h) == MPI_SUCCESS);
    CHECK(MPI_Cancel(&r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS);
    OK(rank, "cancel, complete, cancel, wait: %s", events);

    /* Test before completion runs no callback; Request_get_status queries and keeps it. */
    nevents = 0;
    int flag;
    CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &r) == MPI_SUCCESS);
    CHECK(MPI_Test(&r, &flag, &st) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_Grequest_complete(r) == MPI_SUCCESS);
    CHECK(MPI_Request_get_status(r, &flag, &st) == MPI_SUCCESS && flag == 1);
    CHECK(MPI_Test(&r, &flag, &st) == MPI_SUCCESS && flag == 1 && r == MPI_REQUEST_NULL);
    OK(rank, "test, complete, get_status, test: %s", events);

    /* A second complete of the same handle is an error, not a crash. */
    CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &r) == MPI_SUCCESS);
    h = r;
    CHECK(MPI_Grequest_complete(h) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Grequest_complete(h) != MPI_SUCCESS);

    /* A failing query: MPI_ERR_IN_STATUS from Waitall, the error in that status only. */
    MPI_Request two[2];
    MPI_Status sts[2];
    CHECK(MPI_Grequest_start(bad_q, f_fn, c_fn, NULL, &two[0]) == MPI_SUCCESS);
    CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &two[1]) == MPI_SUCCESS);
    CHECK(MPI_Grequest_complete(two[0]) == MPI_SUCCESS);
    CHECK(MPI_Grequest_complete(two[1]) == MPI_SUCCESS);
    CHECK_RC(MPI_Waitall(2, two, sts), MPI_ERR_IN_STATUS);
    int c0, c1;
    MPI_Error_class(sts[0].MPI_ERROR, &c0);
    MPI_Error_class(sts[1].MPI_ERROR, &c1);
    /* The other request completed (MPI_SUCCESS) or, as MPICH reports it, is pending. */
    CHECK(c0 == MPI_ERR_OTHER && (c1 == MPI_SUCCESS || c1 == MPI_ERR_PENDING));
    OK(rank, "failing query gives MPI_ERR_IN_STATUS");

    /* Many generalized requests from two threads at once. */
    struct counts k[2] = {{0, 0}, {0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, many, &k[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(k[0].q == PER_THREAD && k[0].f == PER_THREAD);
    CHECK(k[1].q == PER_THREAD && k[1].f == PER_THREAD);
    OK(rank, "two threads: %d requests each, each queried and freed once", PER_THREAD);

    /* Allgather of 1, 2 and 256 ints, from a send buffer and in place. */
    int sizes[] = {1, 2, 256};
    for (unsigned z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        int n = sizes[z];
        int *send = malloc(n * sizeof(int)), *all = malloc((size_t)n * size * sizeof(int));
        for (int i = 0; i < n; i++) send[i] = value(rank, i);
        for (int i = 0; i < n * size; i++) all[i] = -1;
        CHECK(MPI_Allgather(send, n, MPI_INT, all, n, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
        for (int p = 0; p < size; p++)
            for (int i = 0; i < n; i++) CHECK(all[p * n + i] == value(p, i));
        for (int i = 0; i < n * size; i++) all[i] = -1;
        for (int i = 0; i < n; i++) all[rank * n + i] = value(rank, i);
        CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, n, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
        for (int p = 0; p < size; p++)
            for (int i = 0; i < n; i++) CHECK(all[p * n + i] == value(p, i));
        free(send);
        free(all);
    }
    OK(rank, "allgather of 1, 2, 256 ints, in place too");

    /* Allgatherv: rank p gives p + 1 ints (rank 1 none when there are 3 ranks or more), at
       displacements in reverse rank order with a gap of one int. */
    int *counts = malloc(size * sizeof(int)), *displs = malloc(size * sizeof(int));
    int total = 0;
    for (int p = 0; p < size; p++) {
        counts[p] = (p == 1 && size >= 3) ? 0 : p + 1;
        total += counts[p] + 1;
    }
    int at = 0;
    for (int p = size - 1; p >= 0; p--) {
        displs[p] = at;
        at += counts[p] + 1;
    }
    int *sendv = malloc((counts[rank] + 1) * sizeof(int)), *recvv = malloc(total * sizeof(int));
    for (int i = 0; i < counts[rank]; i++) sendv[i] = value(rank, i);
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < total; i++) recvv[i] = -1;
        if (in_place) {
            for (int i = 0; i < counts[rank]; i++) recvv[displs[rank] + i] = value(rank, i);
            CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvv, counts, displs, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Allgatherv(sendv, counts[rank], MPI_INT, recvv, counts, displs, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
        }
        for (int p = 0; p < size; p++) {
            for (int i = 0; i < counts[p]; i++) CHECK(recvv[displs[p] + i] == value(p, i));
            CHECK(recvv[displs[p] + counts[p]] == -1); /* the gap is untouched */
        }
    }
    free(counts);
    free(displs);
    free(sendv);
    free(recvv);
    OK(rank, "allgatherv with unequal counts and gaps, in place too");

    MPI_Finalize();
    return 0;
}
