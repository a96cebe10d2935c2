/* Generalized requests: start, complete from another thread, query/free/cancel callbacks,
   Status_set_elements/Status_set_cancelled, mixed with message requests in Waitall. */
#include "common.h"
#include <pthread.h>
#include <unistd.h>

struct state {
    int queries, frees, cancels;
    int elements;
    MPI_Request req;
};

static int query_fn(void *extra, MPI_Status *status) {
    struct state *s = extra;
    s->queries++;
    MPI_Status_set_elements(status, MPI_DOUBLE, s->elements);
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int free_fn(void *extra) {
    ((struct state *)extra)->frees++;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete) {
    (void)complete;
    ((struct state *)extra)->cancels++;
    return MPI_SUCCESS;
}

static int failing_query(void *extra, MPI_Status *status) {
    (void)extra;
    (void)status;
    return MPI_ERR_OTHER;
}

static void *completer(void *arg) {
    struct state *s = arg;
    usleep(20000);
    CHECK(MPI_Grequest_complete(s->req) == MPI_SUCCESS);
    return NULL;
}

int main(int argc, char **argv) {
    int rank, size, provided, flag, count;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Status st;

    /* Completed by another thread while this one waits. */
    struct state s = {0, 0, 0, 6, MPI_REQUEST_NULL};
    CHECK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &s, &s.req) == MPI_SUCCESS);
    MPI_Request mine = s.req;
    CHECK(MPI_Test(&mine, &flag, &st) == MPI_SUCCESS && flag == 0 && s.queries == 0);
    pthread_t t;
    pthread_create(&t, NULL, completer, &s);
    CHECK(MPI_Wait(&mine, &st) == MPI_SUCCESS && mine == MPI_REQUEST_NULL);
    pthread_join(t, NULL);
    CHECK(s.queries == 1 && s.frees == 1 && s.cancels == 0);
    CHECK(MPI_Get_count(&st, MPI_DOUBLE, &count) == MPI_SUCCESS && count == 6);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == 12);
    CHECK(st.MPI_SOURCE == MPI_UNDEFINED && st.MPI_TAG == MPI_UNDEFINED);
    CHECK(MPI_Test_cancelled(&st, &flag) == MPI_SUCCESS && flag == 0);

    /* Cancel before completion; the status comes from the query. */
    struct state c = {0, 0, 0, 0, MPI_REQUEST_NULL};
    CHECK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &c, &c.req) == MPI_SUCCESS);
    MPI_Request cr = c.req;
    CHECK(MPI_Cancel(&cr) == MPI_SUCCESS && c.cancels == 1);
    CHECK(MPI_Grequest_complete(c.req) == MPI_SUCCESS);
    CHECK(MPI_Wait(&cr, &st) == MPI_SUCCESS && c.frees == 1);

    /* A generalized request and message requests in one Waitall. */
    struct state m = {0, 0, 0, 1, MPI_REQUEST_NULL};
    MPI_Request reqs[3];
    int out = rank, in = -1;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    /* The three functions are required (MPI names no null function for them). */
    CHECK_RC(MPI_Grequest_start(query_fn, free_fn, NULL, &m, &m.req), MPI_ERR_ARG);
    CHECK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, &m, &m.req) == MPI_SUCCESS);
    reqs[0] = m.req;
    CHECK(MPI_Irecv(&in, 1, MPI_INT, left, 3, MPI_COMM_WORLD, &reqs[1]) == MPI_SUCCESS);
    CHECK(MPI_Isend(&out, 1, MPI_INT, right, 3, MPI_COMM_WORLD, &reqs[2]) == MPI_SUCCESS);
    pthread_create(&t, NULL, completer, &m);
    MPI_Status sts[3];
    CHECK(MPI_Waitall(3, reqs, sts) == MPI_SUCCESS);
    pthread_join(t, NULL);
    CHECK(in == left && sts[1].MPI_SOURCE == left && m.frees == 1);
    CHECK(MPI_Get_count(&sts[0], MPI_DOUBLE, &count) == MPI_SUCCESS && count == 1);

    /* A query function's error is the error of the wait. */
    MPI_Request fr;
    struct state f = {0, 0, 0, 0, MPI_REQUEST_NULL};
    CHECK(MPI_Grequest_start(failing_query, free_fn, cancel_fn, &f, &fr) == MPI_SUCCESS);
    CHECK(MPI_Grequest_complete(fr) == MPI_SUCCESS);
    CHECK_RC(MPI_Wait(&fr, &st), MPI_ERR_OTHER);
    CHECK(f.frees == 1);

    OK(rank, "generalized requests ok");
    MPI_Finalize();
    return 0;
}
