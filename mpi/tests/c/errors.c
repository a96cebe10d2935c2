/* Wrong use under MPI_ERRORS_RETURN gives the class the standard names. With
   TEST_UNSUPPORTED=1, also calls a function the library does not implement (viaduct:
   MPI_ERR_UNSUPPORTED_OPERATION). */
#include "common.h"

int main(int argc, char **argv) {
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
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
    for (int i = 0; i < 64; i++) CHECK(ab[i] == i);
    int sum = 0;
    CHECK(MPI_Allreduce(&ab[1], &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(sum == size);
    OK(rank, "aliased buffers refused");
    MPI_Finalize();
    return 0;
}
