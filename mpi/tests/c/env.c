/* Environment: Init_thread, thread levels, Initialized/Finalized, Wtime/Wtick, names,
   versions, error strings and classes, error handlers. */
#include "common.h"
#include <unistd.h>

int main(int argc, char **argv) {
    int flag = -1, provided = -1, rank, size;
    const char *lvl = getenv("TEST_THREAD_LEVEL");
    int want = lvl ? atoi(lvl) : MPI_THREAD_MULTIPLE;

    CHECK(MPI_Initialized(&flag) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_Finalized(&flag) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_Init_thread(&argc, &argv, want, &provided) == MPI_SUCCESS);
    CHECK(provided == want);
    CHECK(MPI_Query_thread(&flag) == MPI_SUCCESS && flag == provided);
    CHECK(MPI_Is_thread_main(&flag) == MPI_SUCCESS && flag == 1);
    CHECK(MPI_Initialized(&flag) == MPI_SUCCESS && flag == 1);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    double t0 = MPI_Wtime();
    usleep(2000);
    double t1 = MPI_Wtime();
    CHECK(t1 - t0 >= 0.0015 && t1 - t0 < 10.0);
    CHECK(MPI_Wtick() > 0.0 && MPI_Wtick() < 0.01);

    char name[MPI_MAX_PROCESSOR_NAME];
    int len = -1;
    CHECK(MPI_Get_processor_name(name, &len) == MPI_SUCCESS);
    CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME && (int)strlen(name) == len);

    int v = 0, sv = -1;
    CHECK(MPI_Get_version(&v, &sv) == MPI_SUCCESS);
    CHECK(v == MPI_VERSION && sv == MPI_SUBVERSION);

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    CHECK(MPI_Get_library_version(lib, &len) == MPI_SUCCESS && len > 0 && (int)strlen(lib) == len);
    if (rank == 0 && getenv("TEST_SHOW_LIBRARY")) fprintf(stderr, "library: %s\n", lib);

    char msg[MPI_MAX_ERROR_STRING];
    CHECK(MPI_Error_string(MPI_ERR_TRUNCATE, msg, &len) == MPI_SUCCESS && len > 0);
    CHECK(MPI_Error_string(MPI_SUCCESS, msg, &len) == MPI_SUCCESS && len > 0);
    int cls = -1;
    CHECK(MPI_Error_class(MPI_ERR_RANK, &cls) == MPI_SUCCESS && cls == MPI_ERR_RANK);
    CHECK(MPI_Error_class(MPI_SUCCESS, &cls) == MPI_SUCCESS && cls == MPI_SUCCESS);

    MPI_Errhandler eh;
    CHECK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh) == MPI_SUCCESS);
    CHECK(eh == MPI_ERRORS_ARE_FATAL);
    CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    CHECK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh) == MPI_SUCCESS);
    CHECK(eh == MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);

    int *tag_ub = NULL;
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag) == MPI_SUCCESS);
    CHECK(flag == 1 && tag_ub && *tag_ub >= 32767);

    void *mem = NULL;
    CHECK(MPI_Alloc_mem(4096, MPI_INFO_NULL, &mem) == MPI_SUCCESS && mem != NULL);
    memset(mem, 7, 4096);
    CHECK(MPI_Free_mem(mem) == MPI_SUCCESS);

    OK(rank, "env size %d version %d.%d thread level %d", size, v, sv, provided);
    CHECK(MPI_Finalize() == MPI_SUCCESS);
    CHECK(MPI_Finalized(&flag) == MPI_SUCCESS && flag == 1);
    return 0;
}
