/* MPICH's generalized request extensions: MPIX_Grequest_start with a poll function,
   MPIX_Grequest_class_create/allocate with a wait function that gets the whole batch, and a
   failing poll function (the cancel function runs, the wait reports the error). */
#include "common.h"

struct op {
    MPI_Request req;
    int polls_left;
    int polls, cancels, frees, completed;
};

static int max_batch = 0, wait_calls = 0;

static int query_fn(void *extra, MPI_Status *status) {
    (void)extra;
    MPI_Status_set_elements(status, MPI_BYTE, 3);
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int free_fn(void *extra) {
    ((struct op *)extra)->frees++;
    return MPI_SUCCESS;
}

static int cancel_fn(void *extra, int complete) {
    (void)complete;
    ((struct op *)extra)->cancels++;
    return MPI_SUCCESS;
}

/* Completes the request on its third poll. */
static int poll_fn(void *extra, MPI_Status *status) {
    (void)status;
    struct op *o = extra;
    o->polls++;
    if (!o->completed && --o->polls_left <= 0) {
        o->completed = 1;
        return MPI_Grequest_complete(o->req);
    }
    return MPI_SUCCESS;
}

static int failing_poll(void *extra, MPI_Status *status) {
    (void)status;
    ((struct op *)extra)->polls++;
    return MPI_ERR_OTHER;
}

/* Completes every request of the batch at once. */
static int wait_fn(int count, void **states, double timeout, MPI_Status *status) {
    (void)timeout;
    (void)status;
    wait_calls++;
    if (count > max_batch) max_batch = count;
    for (int i = 0; i < count; i++) {
        struct op *o = states[i];
        if (!o->completed) {
            o->completed = 1;
            int rc = MPI_Grequest_complete(o->req);
            if (rc != MPI_SUCCESS) return rc;
        }
    }
    return MPI_SUCCESS;
}

static int no_wait(int count, void **states, double timeout, MPI_Status *status) {
    (void)count;
    (void)states;
    (void)timeout;
    (void)status;
    return MPI_SUCCESS;
}

static int no_poll(void *extra, MPI_Status *status) {
    (void)extra;
    (void)status;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    int rank, count;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Status st;

    struct op a = {MPI_REQUEST_NULL, 3, 0, 0, 0, 0};
    CHECK(MPIX_Grequest_start(query_fn, free_fn, cancel_fn, poll_fn, no_wait, &a, &a.req) == MPI_SUCCESS);
    MPI_Request r = a.req;
    CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS && r == MPI_REQUEST_NULL);
    CHECK(a.completed && a.polls >= 3 && a.frees == 1 && a.cancels == 0);
    CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS && count == 3);
    OK(rank, "poll function ok");

    MPIX_Grequest_class cls;
    CHECK(MPIX_Grequest_class_create(query_fn, free_fn, cancel_fn, no_poll, wait_fn, &cls) == MPI_SUCCESS);
    struct op b[3];
    MPI_Request rs[3];
    for (int i = 0; i < 3; i++) {
        b[i] = (struct op){MPI_REQUEST_NULL, 0, 0, 0, 0, 0};
        CHECK(MPIX_Grequest_class_allocate(cls, &b[i], &b[i].req) == MPI_SUCCESS);
        rs[i] = b[i].req;
    }
    CHECK(MPI_Waitall(3, rs, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < 3; i++) CHECK(b[i].completed && b[i].frees == 1 && rs[i] == MPI_REQUEST_NULL);
    CHECK(wait_calls >= 1 && max_batch == 3);
    OK(rank, "wait function got the batch of 3");

    struct op c = {MPI_REQUEST_NULL, 0, 0, 0, 0, 0};
    CHECK(MPIX_Grequest_start(query_fn, free_fn, cancel_fn, failing_poll, no_wait, &c, &c.req) == MPI_SUCCESS);
    r = c.req;
    CHECK_RC(MPI_Wait(&r, &st), MPI_ERR_OTHER);
    CHECK(c.polls >= 1 && c.cancels == 1 && c.frees == 1);
    OK(rank, "failing poll cancels");
    MPI_Finalize();
    return 0;
}
