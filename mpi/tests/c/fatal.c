/* MPI_ERRORS_ARE_FATAL (the default): a send to a rank outside the communicator ends the job
   with a message naming the call and the cause. With TEST_UNSUPPORTED=1, calls a function the
   library does not implement instead; with TEST_ABORT=N, every rank calls MPI_Abort with code
   N (only rank TEST_ABORT_RANK when that is set, the others waiting for a message). */
#include "common.h"

int main(int argc, char **argv) {
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    const char *ar = getenv("TEST_ABORT_RANK");
    if (getenv("TEST_ABORT") && *getenv("TEST_ABORT")) {
        if (!(ar && *ar) || atoi(ar) == rank) MPI_Abort(MPI_COMM_WORLD, atoi(getenv("TEST_ABORT")));
        MPI_Recv(&x, 1, MPI_INT, 0, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (rank == 0) {
        if (getenv("TEST_UNSUPPORTED") && *getenv("TEST_UNSUPPORTED")) {
            MPI_Close_port("viaduct-no-such-port");
        } else {
            MPI_Send(&x, 1, MPI_INT, size + 1, 0, MPI_COMM_WORLD);
        }
        printf("NOT REACHED\n");
        fflush(stdout);
    }
    /* The other ranks wait for a message that never comes; the launcher ends them. */
    MPI_Recv(&x, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
