/* File error handlers: the default one (MPI_ERRORS_RETURN, of MPI_FILE_NULL), one of
   MPI_File_create_errhandler set on MPI_FILE_NULL (run by a failed MPI_File_open, with
   MPI_FILE_NULL) and on an open file (run by a failed access and by MPI_File_call_errhandler,
   with the file's handle and the code), MPI_File_get_errhandler, MPI_Errhandler_free. On
   viaduct, wrong use and its error class. */
#include "common.h"
#include <unistd.h>

static int calls = 0, last_code = -1;
static MPI_File last_file;

static void on_file_error(MPI_File *fh, int *code, ...) {
    calls++;
    last_code = *code;
    last_file = *fh;
}

static void on_comm_error(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    (void)code;
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    CHECK(MPI_Get_library_version(lib, &liblen) == MPI_SUCCESS);
    int on_viaduct = strstr(lib, "viaduct") != NULL;
    char name[256];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/viaduct-mpi-fileerr-%d", dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);

    MPI_Errhandler eh, got;
    CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &got) == MPI_SUCCESS);
    CHECK(got == MPI_ERRORS_RETURN);
    OK(rank, "default file handler is MPI_ERRORS_RETURN");

    CHECK(MPI_File_create_errhandler(on_file_error, &eh) == MPI_SUCCESS);
    CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, eh) == MPI_SUCCESS);
    CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &got) == MPI_SUCCESS);
    CHECK(got == eh);
    MPI_File fh;
    int rc = MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_NO_SUCH_FILE);
    CHECK(calls == 1 && last_file == MPI_FILE_NULL);
    MPI_Error_class(last_code, &cls);
    CHECK(cls == MPI_ERR_NO_SUCH_FILE);
    OK(rank, "failed open ran the handler of MPI_FILE_NULL");
    CHECK(MPI_File_call_errhandler(MPI_FILE_NULL, MPI_ERR_OTHER) == MPI_SUCCESS);
    CHECK(calls == 2 && last_code == MPI_ERR_OTHER && last_file == MPI_FILE_NULL);

    /* A file opened now takes the handler of MPI_FILE_NULL. */
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    CHECK(MPI_File_get_errhandler(fh, &got) == MPI_SUCCESS);
    CHECK(got == eh);
    CHECK(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    CHECK(MPI_File_call_errhandler(fh, MPI_ERR_IO) == MPI_SUCCESS);
    CHECK(calls == 3 && last_code == MPI_ERR_IO && last_file == fh);
    /* Reading a write-only file fails through the file's handler. */
    int buf[4];
    rc = MPI_File_read_at(fh, 0, buf, 4, MPI_INT, MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ACCESS);
    CHECK(calls == 4 && last_file == fh);
    MPI_Error_class(last_code, &cls);
    CHECK(cls == MPI_ERR_ACCESS);
    OK(rank, "file handler ran %d times", calls);

    if (on_viaduct) {
        MPI_Errhandler ceh;
        /* Errors of MPI_File_create_errhandler go to the handler of MPI_COMM_WORLD. */
        CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
        CHECK(MPI_Comm_create_errhandler(on_comm_error, &ceh) == MPI_SUCCESS);
        CHECK(MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN) == MPI_SUCCESS);
        CHECK_RC(MPI_File_set_errhandler(fh, ceh), MPI_ERR_ARG);
        CHECK_RC(MPI_File_create_errhandler(NULL, &got), MPI_ERR_ARG);
        CHECK_RC(MPI_File_create_errhandler(on_file_error, NULL), MPI_ERR_ARG);
        CHECK(MPI_Errhandler_free(&ceh) == MPI_SUCCESS);
    }
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&eh) == MPI_SUCCESS);
    CHECK(eh == MPI_ERRHANDLER_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) unlink(name);
    OK(rank, "done");
    MPI_Finalize();
    return 0;
}
