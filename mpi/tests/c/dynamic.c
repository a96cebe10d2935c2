/* A process not started by MPI_Comm_spawn: MPI_Comm_get_parent gives MPI_COMM_NULL.
   MPI_Comm_disconnect of duplicates and splits of MPI_COMM_WORLD with messages still pending
   on them (past the eager limit): the call waits for them, frees the communicator and sets the
   handle to MPI_COMM_NULL; the requests then complete with their data. The GPU queries of
   MPICH's extensions answer "not supported". On viaduct, wrong use and its error class. */
#include "common.h"

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    CHECK(MPI_Get_library_version(lib, &liblen) == MPI_SUCCESS);
    int on_viaduct = strstr(lib, "viaduct") != NULL;

    MPI_Comm parent = MPI_COMM_WORLD;
    CHECK(MPI_Comm_get_parent(&parent) == MPI_SUCCESS);
    CHECK(parent == MPI_COMM_NULL);
    OK(rank, "parent is MPI_COMM_NULL");

    int to = (rank + 1) % n, from = (rank + n - 1) % n;
    int len = 1 << 18;
    int *sb = malloc(sizeof(int) * len), *rb = malloc(sizeof(int) * len);
    CHECK(sb && rb);
    for (int round = 0; round < 2; round++) {
        MPI_Comm d;
        if (round == 0)
            CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d) == MPI_SUCCESS);
        else
            CHECK(MPI_Comm_split(MPI_COMM_WORLD, 0, n - rank, &d) == MPI_SUCCESS);
        int dr, dto, dfrom;
        MPI_Comm_rank(d, &dr);
        dto = (dr + 1) % n;
        dfrom = (dr + n - 1) % n;
        (void)to;
        (void)from;
        for (int i = 0; i < len; i++) {
            sb[i] = dr * 7 + i + round;
            rb[i] = -1;
        }
        MPI_Request r[2];
        CHECK(MPI_Irecv(rb, len, MPI_INT, dfrom, 3, d, &r[0]) == MPI_SUCCESS);
        CHECK(MPI_Isend(sb, len, MPI_INT, dto, 3, d, &r[1]) == MPI_SUCCESS);
        CHECK(MPI_Comm_disconnect(&d) == MPI_SUCCESS);
        CHECK(d == MPI_COMM_NULL);
        CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        int good = 1;
        for (int i = 0; i < len; i++)
            if (rb[i] != dfrom * 7 + i + round) good = 0;
        CHECK(good);
    }
    OK(rank, "disconnect waited for pending messages");
    free(sb);
    free(rb);

    int s = -1;
    CHECK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &s) == MPI_SUCCESS);
    int cuda = s;
    CHECK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_ZE, &s) == MPI_SUCCESS);
    int ze = s;
    CHECK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_HIP, &s) == MPI_SUCCESS);
    int hip = s;
    OK(rank, "gpu support %d %d %d, queries %d %d %d", cuda, ze, hip, MPIX_Query_cuda_support(),
       MPIX_Query_ze_support(), MPIX_Query_hip_support());

    if (on_viaduct) {
        CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
        MPI_Comm w = MPI_COMM_WORLD, nul = MPI_COMM_NULL;
        CHECK_RC(MPI_Comm_disconnect(&w), MPI_ERR_COMM);
        CHECK(w == MPI_COMM_WORLD);
        CHECK_RC(MPI_Comm_disconnect(&nul), MPI_ERR_COMM);
        CHECK_RC(MPI_Comm_disconnect(NULL), MPI_ERR_COMM);
        CHECK_RC(MPI_Comm_get_parent(NULL), MPI_ERR_ARG);
        CHECK_RC(MPIX_GPU_query_support(7, &s), MPI_ERR_ARG);
        CHECK_RC(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, NULL), MPI_ERR_ARG);
    }
    OK(rank, "wrong use checked");
    MPI_Finalize();
    return 0;
}
