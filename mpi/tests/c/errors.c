/* Wrong use under MPI_ERRORS_RETURN gives the class the standard names. With
   TEST_UNSUPPORTED=1, also calls a function the library does not implement (viaduct:
   MPI_ERR_UNSUPPORTED_OPERATION). Also as MPICH 4.0.2: a communicator or window whose handler
   was never set raises errors through MPI_COMM_WORLD's; a user handler's change of the code
   is the code returned; a failed MPI_Cart_create leaves MPI_COMM_NULL; a receive into a
   datatype with holes of a message ending inside an element is MPI_ERR_TRUNCATE; wrong
   one-sided synchronisation is MPI_ERR_RMA_SYNC and the window can be freed after it;
   creating communicators without freeing them ends in MPI_ERR_OTHER. */
#include "common.h"
#include <unistd.h>

static int comm_calls = 0;
static MPI_Comm comm_seen = MPI_COMM_NULL;

/* Counts its calls, keeps the communicator it got and clears the error. */
static void forgive_comm(MPI_Comm *comm, int *code, ...) {
    comm_calls++;
    comm_seen = *comm;
    *code = MPI_SUCCESS;
}

static int win_calls = 0;

static void forgive_win(MPI_Win *win, int *code, ...) {
    (void)win;
    win_calls++;
    *code = MPI_SUCCESS;
}

static int file_calls = 0;

static void forgive_file(MPI_File *fh, int *code, ...) {
    (void)fh;
    file_calls++;
    *code = MPI_SUCCESS;
}

/* Handlers never set: errors of a communicator and a window go to MPI_COMM_WORLD's handler
   (made before MPI_COMM_WORLD's was set, and after), which MPI_Comm_get_errhandler and
   MPI_Win_get_errhandler do not show. */
static void default_handlers(int rank, int size, MPI_Comm pre) {
    int x = 0;
    MPI_Errhandler eh;
    CHECK(MPI_Comm_get_errhandler(pre, &eh) == MPI_SUCCESS && eh == MPI_ERRORS_ARE_FATAL);
    CHECK_RC(MPI_Send(&x, 1, MPI_INT, size, 0, pre), MPI_ERR_RANK);
    MPI_Win win;
    CHECK(MPI_Win_create(&x, sizeof x, sizeof x, MPI_INFO_NULL, pre, &win) == MPI_SUCCESS);
    CHECK(MPI_Win_get_errhandler(win, &eh) == MPI_SUCCESS && eh == MPI_ERRORS_ARE_FATAL);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    CHECK_RC(MPI_Put(&x, 1, MPI_INT, size, 0, 1, MPI_INT, win), MPI_ERR_RANK);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    /* A user handler on MPI_COMM_WORLD gets MPI_COMM_WORLD for an error of `pre`. */
    CHECK(MPI_Comm_create_errhandler(forgive_comm, &eh) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&eh) == MPI_SUCCESS);
    CHECK(MPI_Send(&x, 1, MPI_INT, size, 0, pre) == MPI_SUCCESS);
    CHECK(comm_calls == 1 && comm_seen == MPI_COMM_WORLD);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    OK(rank, "never-set handlers use MPI_COMM_WORLD's");
}

/* A communicator, window or file handler that clears the code makes the call succeed. */
static void handlers_clear_code(int rank, int size) {
    int x = 0;
    MPI_Comm dup;
    MPI_Errhandler eh;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
    CHECK(MPI_Comm_create_errhandler(forgive_comm, &eh) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_errhandler(dup, eh) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&eh) == MPI_SUCCESS);
    comm_calls = 0;
    CHECK(MPI_Send(&x, -1, MPI_INT, 0, 0, dup) == MPI_SUCCESS && comm_calls == 1);
    CHECK(comm_seen == dup);
    MPI_Comm_free(&dup);
    MPI_Win win;
    CHECK(MPI_Win_create(&x, sizeof x, sizeof x, MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS);
    CHECK(MPI_Win_create_errhandler(forgive_win, &eh) == MPI_SUCCESS);
    CHECK(MPI_Win_set_errhandler(win, eh) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&eh) == MPI_SUCCESS);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    CHECK(MPI_Put(&x, 1, MPI_INT, size, 0, 1, MPI_INT, win) == MPI_SUCCESS && win_calls == 1);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    char name[256];
    const char *dir = getenv("TMPDIR");
    snprintf(name, sizeof name, "%s/viaduct-mpi-errors-none-%d", dir ? dir : "/tmp", (int)getpid());
    CHECK(MPI_File_create_errhandler(forgive_file, &eh) == MPI_SUCCESS);
    CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, eh) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&eh) == MPI_SUCCESS);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_SELF, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    CHECK(file_calls == 1);
    CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    OK(rank, "handlers that clear the code make the call succeed");
}

/* A failed MPI_Cart_create gives MPI_COMM_NULL; a receive into a datatype with holes of a
   message that ends inside one of its ints is MPI_ERR_TRUNCATE. */
static void failed_outputs(int rank, int size) {
    int dims[2] = {size, size}, periods[2] = {0, 0};
    MPI_Comm cart = MPI_COMM_SELF;
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart), MPI_ERR_ARG);
    CHECK(cart == MPI_COMM_NULL);
    int blocks[3] = {1, 2, 1}, at[3] = {4, 8, 16};
    MPI_Datatype holes;
    CHECK(MPI_Type_indexed(3, blocks, at, MPI_INT, &holes) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&holes) == MPI_SUCCESS);
    char three[3] = {1, 2, 3};
    int into[24];
    MPI_Request rq;
    CHECK(MPI_Isend(three, 3, MPI_CHAR, rank, 7, MPI_COMM_WORLD, &rq) == MPI_SUCCESS);
    CHECK_RC(MPI_Recv(into, 1, holes, rank, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE), MPI_ERR_TRUNCATE);
    CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&holes) == MPI_SUCCESS);
    OK(rank, "failed calls leave MPI_COMM_NULL; a partial element is truncation");
}

/* Wrong one-sided synchronisation: MPI_ERR_RMA_SYNC, and the window is freed afterwards. */
static void rma_sync(int rank) {
    int x = 0, y = 0;
    long long cmp = 0, res = 0;
    float f = 0, fr = 0;
    MPI_Win win;
    CHECK(MPI_Win_create(&x, sizeof x, sizeof x, MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS);
    CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    CHECK_RC(MPI_Get(&y, 1, MPI_INT, 0, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win) == MPI_SUCCESS);
    CHECK_RC(MPI_Win_free(&win), MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win) == MPI_SUCCESS);
    CHECK(MPI_Get(&y, 1, MPI_INT, 0, 0, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS);
    CHECK_RC(MPI_Get(&y, 1, MPI_INT, 0, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    CHECK_RC(MPI_Compare_and_swap(&f, &f, &fr, MPI_FLOAT, 0, 0, win), MPI_ERR_TYPE);
    (void)cmp;
    (void)res;
    CHECK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win) == MPI_SUCCESS);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    OK(rank, "wrong one-sided synchronisation refused");
}

/* Duplicates of MPI_COMM_WORLD kept until there is no room for more: MPI_ERR_OTHER on every
   rank and MPI_COMM_NULL; room again once they are freed. */
static void too_many_comms(int rank) {
    int max = 100000, n = 0, rc = MPI_SUCCESS, cls = -1;
    MPI_Comm *comms = malloc(sizeof(MPI_Comm) * max);
    CHECK(comms != NULL);
    while (n < max && (rc = MPI_Comm_dup(MPI_COMM_WORLD, &comms[n])) == MPI_SUCCESS) n++;
    CHECK(n < max && comms[n] == MPI_COMM_NULL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_OTHER);
    MPI_Comm extra;
    for (int i = 0; i < n; i++) CHECK(MPI_Comm_free(&comms[i]) == MPI_SUCCESS);
    free(comms);
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &extra) == MPI_SUCCESS);
    CHECK(MPI_Comm_free(&extra) == MPI_SUCCESS);
    OK(rank, "too many communicators refused");
}

int main(int argc, char **argv) {
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm pre;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &pre) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    MPI_Status st;
    MPI_Request rq;

    CHECK_RC(MPI_Send(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    CHECK_RC(MPI_Send(&x, 1, MPI_INT, -5, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
    CHECK_RC(MPI_Recv(&x, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD, &st), MPI_ERR_RANK);
    CHECK_RC(MPI_Isend(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD, &rq), MPI_ERR_RANK);
    CHECK_RC(MPI_Send(&x, 1, MPI_INT, 0, -3, MPI_COMM_WORLD), MPI_ERR_TAG);
    CHECK_RC(MPI_Send(&x, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD), MPI_ERR_TAG);
    CHECK_RC(MPI_Irecv(&x, 1, MPI_INT, 0, -7, MPI_COMM_WORLD, &rq), MPI_ERR_TAG);
    CHECK_RC(MPI_Send(&x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    CHECK_RC(MPI_Recv(&x, -2, MPI_INT, 0, 0, MPI_COMM_WORLD, &st), MPI_ERR_COUNT);
    CHECK_RC(MPI_Send(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    CHECK_RC(MPI_Recv(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD, &st), MPI_ERR_TYPE);
    CHECK_RC(MPI_Send(NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    CHECK_RC(MPI_Recv(NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &st), MPI_ERR_BUFFER);
    CHECK_RC(MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_NULL, &st), MPI_ERR_COMM);
    CHECK_RC(MPI_Bcast(&x, 1, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT);
    CHECK_RC(MPI_Reduce(&x, &x, 1, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD), MPI_ERR_ROOT);
    double d = 1.0, e;
    CHECK_RC(MPI_Allreduce(&d, &e, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD), MPI_ERR_OP);
    CHECK_RC(MPI_Allreduce(&d, &e, 1, MPI_DOUBLE, MPI_OP_NULL, MPI_COMM_WORLD), MPI_ERR_OP);
    /* The null communicator: reported through MPI_COMM_WORLD's handler. */
    CHECK_RC(MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_NULL), MPI_ERR_COMM);
    CHECK_RC(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM);
    CHECK_RC(MPI_Comm_rank(MPI_COMM_NULL, &x), MPI_ERR_COMM);
    MPI_Comm w = MPI_COMM_WORLD;
    CHECK_RC(MPI_Comm_free(&w), MPI_ERR_COMM);
    /* A freed request. */
    int y = 0;
    CHECK(MPI_Isend(&y, 1, MPI_INT, rank, 1, MPI_COMM_WORLD, &rq) == MPI_SUCCESS);
    MPI_Request copy = rq;
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS && rq == MPI_REQUEST_NULL);
    CHECK(MPI_Recv(&y, 1, MPI_INT, rank, 1, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    (void)copy;
    MPI_Request null = MPI_REQUEST_NULL;
    CHECK_RC(MPI_Request_free(&null), MPI_ERR_REQUEST);
    /* Errors of a communicator with MPI_ERRORS_RETURN while the world is fatal. */
    MPI_Comm dup;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup) == MPI_SUCCESS);
    MPI_Errhandler eh;
    CHECK(MPI_Comm_get_errhandler(dup, &eh) == MPI_SUCCESS && eh == MPI_ERRORS_RETURN);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL) == MPI_SUCCESS);
    CHECK_RC(MPI_Send(&x, 1, MPI_INT, size, 0, dup), MPI_ERR_RANK);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    MPI_Comm_free(&dup);
    if (getenv("TEST_UNSUPPORTED") && *getenv("TEST_UNSUPPORTED")) {
        CHECK_RC(MPI_Close_port("viaduct-no-such-port"), MPI_ERR_UNSUPPORTED_OPERATION);
        OK(rank, "unsupported function reported");
    }
    OK(rank, "error classes ok");
    /* The code returned names its class, and its string the cause (the bad tag's value). */
    {
        char es[MPI_MAX_ERROR_STRING];
        int elen = 0, v = 0;
        int rc = MPI_Send(&v, 1, MPI_INT, rank, -5, MPI_COMM_WORLD);
        CHECK(err_class(rc) == MPI_ERR_TAG);
        CHECK(MPI_Error_string(rc, es, &elen) == MPI_SUCCESS && elen > 0);
        CHECK(strstr(es, "-5") != NULL);
        OK(rank, "error string names the cause");
    }

    /* Aliased send and receive buffers (MPI_IN_PLACE is the way to share one), found by every
       rank before anything moves; MPI_IN_PLACE where a real buffer is needed. */
    int ab[64];
    for (int i = 0; i < 64; i++) ab[i] = i;
    CHECK_RC(MPI_Allreduce(ab, ab, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    CHECK_RC(MPI_Allgather(&ab[rank], 1, MPI_INT, ab, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    CHECK_RC(MPI_Alltoall(ab, 1, MPI_INT, ab, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    CHECK_RC(MPI_Scan(ab, ab, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER);
    if (rank == 0) {
        CHECK_RC(MPI_Reduce(ab, ab, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Reduce_local(ab, ab, 2, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Reduce_local(MPI_IN_PLACE, ab, 2, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Reduce_local(ab, MPI_IN_PLACE, 2, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
    }
    /* The v and w forms and MPI_Reduce_scatter, blocking and nonblocking: a receive part
       that overlaps the send buffer is found; parts that only sit around it are not. */
    {
        int cnt[64], dsp[64], bdsp[64];
        MPI_Datatype ty[64];
        MPI_Request rq2;
        CHECK(size <= 16);
        for (int i = 0; i < size; i++) {
            cnt[i] = 1;
            dsp[i] = i;
            bdsp[i] = i * (int)sizeof(int);
            ty[i] = MPI_INT;
        }
        CHECK_RC(MPI_Allgatherv(&ab[rank], 1, MPI_INT, ab, cnt, dsp, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Iallgatherv(&ab[rank], 1, MPI_INT, ab, cnt, dsp, MPI_INT, MPI_COMM_WORLD, &rq2), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Alltoallv(ab, cnt, dsp, MPI_INT, ab, cnt, dsp, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Ialltoallv(ab, cnt, dsp, MPI_INT, ab, cnt, dsp, MPI_INT, MPI_COMM_WORLD, &rq2), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Alltoallw(ab, cnt, bdsp, ty, ab, cnt, bdsp, ty, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Ialltoallw(ab, cnt, bdsp, ty, ab, cnt, bdsp, ty, MPI_COMM_WORLD, &rq2), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Reduce_scatter(ab, ab, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER);
        CHECK_RC(MPI_Ireduce_scatter(ab, ab, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq2), MPI_ERR_BUFFER);
        if (rank == 0) {
            CHECK_RC(MPI_Gatherv(ab, 1, MPI_INT, ab, cnt, dsp, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
            CHECK_RC(MPI_Igatherv(ab, 1, MPI_INT, ab, cnt, dsp, MPI_INT, 0, MPI_COMM_WORLD, &rq2), MPI_ERR_BUFFER);
            CHECK_RC(MPI_Scatterv(ab, cnt, dsp, MPI_INT, ab, 1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
            CHECK_RC(MPI_Iscatterv(ab, cnt, dsp, MPI_INT, ab, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq2), MPI_ERR_BUFFER);
        }
        /* Receive parts every other int of ab[32..], the send part in a gap between them. */
        int got[64];
        for (int i = 0; i < size; i++) dsp[i] = 32 + 2 * i;
        ab[33] = 100 + rank;
        CHECK(MPI_Allgatherv(&ab[33], 1, MPI_INT, ab, cnt, dsp, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS);
        for (int i = 0; i < size; i++) got[i] = ab[32 + 2 * i];
        for (int i = 0; i < size; i++) CHECK(got[i] == 100 + i);
        for (int i = 32; i < 64; i++) ab[i] = i;
    }
    for (int i = 0; i < 64; i++) CHECK(ab[i] == i);
    int sum = 0;
    CHECK(MPI_Allreduce(&ab[1], &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(sum == size);
    OK(rank, "aliased buffers refused");

    /* Calls on MPI_SESSION_NULL raise through MPI_COMM_WORLD's handler (MPI_ERRORS_RETURN). */
    MPI_Group sg;
    int npsets;
    CHECK_RC(MPI_Group_from_session_pset(MPI_SESSION_NULL, "mpi://WORLD", &sg), MPI_ERR_SESSION);
    CHECK_RC(MPI_Session_get_num_psets(MPI_SESSION_NULL, MPI_INFO_NULL, &npsets), MPI_ERR_SESSION);
    OK(rank, "MPI_SESSION_NULL refused through the world's handler");

    default_handlers(rank, size, pre);
    MPI_Comm_free(&pre);
    handlers_clear_code(rank, size);
    failed_outputs(rank, size);
    rma_sync(rank);
    too_many_comms(rank);
    MPI_Finalize();
    return 0;
}
