/* Sessions started again (MPI-4): three rounds of MPI_Session_init, a communicator from the
   mpi://WORLD process set, an allreduce and MPI_Session_finalize, then the world model after
   the sessions ended; MPI_Comm_create_from_group of MPI_GROUP_EMPTY gives MPI_COMM_NULL. On
   viaduct only: MPICH 4.0.2 fails a second MPI_Session_init. */
#include "common.h"

static int round_trip(int round) {
    MPI_Session s;
    MPI_Group g;
    MPI_Comm c;
    CHECK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s) == MPI_SUCCESS);
    CHECK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g) == MPI_SUCCESS);
    CHECK(MPI_Comm_create_from_group(g, "org.viaduct.test.sessre", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                     &c) == MPI_SUCCESS);
    int rank, size, sum = 0;
    CHECK(MPI_Comm_rank(c, &rank) == MPI_SUCCESS && MPI_Comm_size(c, &size) == MPI_SUCCESS);
    int mine = rank + round;
    CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, c) == MPI_SUCCESS);
    CHECK(sum == size * (size - 1) / 2 + size * round);
    MPI_Comm empty = MPI_COMM_WORLD;
    CHECK(MPI_Comm_create_from_group(MPI_GROUP_EMPTY, "org.viaduct.test.empty", MPI_INFO_NULL,
                                     MPI_ERRORS_RETURN, &empty) == MPI_SUCCESS);
    CHECK(empty == MPI_COMM_NULL);
    OK(rank, "session round %d: sum %d", round, sum);
    CHECK(MPI_Comm_free(&c) == MPI_SUCCESS);
    CHECK(MPI_Group_free(&g) == MPI_SUCCESS);
    CHECK(MPI_Session_finalize(&s) == MPI_SUCCESS);
    CHECK(s == MPI_SESSION_NULL);
    return rank;
}

int main(void) {
    for (int round = 0; round < 3; round++) round_trip(round);
    int flag = 1;
    CHECK(MPI_Initialized(&flag) == MPI_SUCCESS && flag == 0);
    MPI_Init(NULL, NULL);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int one = 1, n = 0;
    CHECK(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    OK(rank, "world model after the sessions: %d ranks", n);
    MPI_Finalize();
    return 0;
}
