/* Error behaviour on viaduct only, where MPICH 4.0.2 differs: MPI_Session_init refuses an
   info whose "thread_level" names no thread level (MPI_ERR_ARG; MPICH 4.0.2 accepts it), a
   session's handler that clears the code makes the call succeed (MPICH 4.0.2 does not run
   it), and a call that makes a communicator leaves MPI_COMM_NULL also when an argument is
   wrong (MPICH 4.0.2 only once its checks passed). */
#include "common.h"

static int session_calls = 0;

static void forgive_session(MPI_Session *s, int *code, ...) {
    (void)s;
    session_calls++;
    *code = MPI_SUCCESS;
}

static void session_info(int rank) {
    MPI_Info info;
    MPI_Session s = MPI_SESSION_NULL;
    CHECK(MPI_Info_create(&info) == MPI_SUCCESS);
    CHECK(MPI_Info_set(info, "thread_level", "THIS_IS_NOT_VALID") == MPI_SUCCESS);
    CHECK_RC(MPI_Session_init(info, MPI_ERRORS_RETURN, &s), MPI_ERR_ARG);
    CHECK(s == MPI_SESSION_NULL);
    CHECK(MPI_Info_set(info, "thread_level", "MPI_THREAD_SERIALIZED") == MPI_SUCCESS);
    CHECK(MPI_Session_init(info, MPI_ERRORS_RETURN, &s) == MPI_SUCCESS);
    CHECK(MPI_Info_free(&info) == MPI_SUCCESS);
    MPI_Errhandler eh;
    CHECK(MPI_Session_create_errhandler(forgive_session, &eh) == MPI_SUCCESS);
    CHECK(MPI_Session_set_errhandler(s, eh) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&eh) == MPI_SUCCESS);
    MPI_Group g;
    CHECK(MPI_Group_from_session_pset(s, "mpi://no-such-set", &g) == MPI_SUCCESS);
    CHECK(session_calls == 1);
    CHECK(MPI_Session_finalize(&s) == MPI_SUCCESS);
    OK(rank, "bad thread_level refused; session handler cleared the code");
}

static void null_outputs(int rank) {
    MPI_Comm c = MPI_COMM_SELF;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_NULL, &c), MPI_ERR_COMM);
    CHECK(c == MPI_COMM_NULL);
    c = MPI_COMM_SELF;
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, -5, 0, &c), MPI_ERR_ARG);
    CHECK(c == MPI_COMM_NULL);
    c = MPI_COMM_SELF;
    CHECK_RC(MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_NULL, &c), MPI_ERR_GROUP);
    CHECK(c == MPI_COMM_NULL);
    c = MPI_COMM_SELF;
    CHECK_RC(MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &c), MPI_ERR_COMM);
    CHECK(c == MPI_COMM_NULL);
    OK(rank, "failed creations leave MPI_COMM_NULL");
}

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    null_outputs(rank);
    session_info(rank);
    MPI_Finalize();
    return 0;
}
