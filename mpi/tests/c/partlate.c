/* A partitioned receive started before its sender's init, whose process then blocks in a
   plain MPI_Recv: the sender (0.3 s later) marks every partition of 1 MiB (a rendezvous
   message), waits for its partitioned send, and only then sends the message the receiver's
   MPI_Recv waits for. The receive must be posted while the receiver blocks in MPI_Recv, or
   both wait for ever (bounded by the test's time limit). */
#include "common.h"
#include <unistd.h>

#define N (1 << 20)

int main(int argc, char **argv) {
    int me, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    char *b = malloc(N);
    CHECK(b != NULL);
    MPI_Request r = MPI_REQUEST_NULL;
    if (me == 1) {
        CHECK(MPI_Precv_init(b, 4, N / 4, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &r) == MPI_SUCCESS);
        CHECK(MPI_Start(&r) == MPI_SUCCESS);
        CHECK(MPI_Recv(&x, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        long bad = 0;
        for (int i = 0; i < N; i++) bad += b[i] != (char)(i % 101);
        OK(me, "got %d after the partitioned receive, %ld bytes wrong", x, bad);
    } else if (me == 0) {
        usleep(300000);
        for (int i = 0; i < N; i++) b[i] = (char)(i % 101);
        CHECK(MPI_Psend_init(b, 4, N / 4, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &r) == MPI_SUCCESS);
        CHECK(MPI_Start(&r) == MPI_SUCCESS);
        CHECK(MPI_Pready_range(0, 3, r) == MPI_SUCCESS);
        CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        x = 42;
        CHECK(MPI_Send(&x, 1, MPI_INT, 1, 5, MPI_COMM_WORLD) == MPI_SUCCESS);
        OK(me, "partitioned send complete, then sent %d", x);
    } else {
        OK(me, "idle");
    }
    if (r != MPI_REQUEST_NULL) CHECK(MPI_Request_free(&r) == MPI_SUCCESS);
    free(b);
    MPI_Finalize();
    return 0;
}
