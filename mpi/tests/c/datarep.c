/* User data representations and MPI_DISPLACEMENT_CURRENT: MPI_Register_datarep of a
   representation without conversion functions, used by a view (data written and read back,
   MPI_File_get_view naming it), registering a name twice or a predefined one
   (MPI_ERR_DUP_DATAREP), an unknown name in MPI_File_set_view (MPI_ERR_UNSUPPORTED_DATAREP);
   a file opened with MPI_MODE_SEQUENTIAL, written by MPI_File_write_ordered, whose view then
   starts at MPI_DISPLACEMENT_CURRENT (the shared file pointer's byte). On viaduct, a
   representation with conversion functions (not run here), MPI_Register_datarep_c and
   MPI_DISPLACEMENT_CURRENT on a file that is not sequential. */
#include "common.h"
#include <unistd.h>

static int extent_fn(MPI_Datatype t, MPI_Aint *extent, void *extra) {
    (void)extra;
    MPI_Aint lb;
    return MPI_Type_get_extent(t, &lb, extent);
}

static int convert(void *userbuf, MPI_Datatype t, int count, void *filebuf, MPI_Offset pos, void *extra) {
    (void)userbuf, (void)t, (void)count, (void)filebuf, (void)pos, (void)extra;
    return MPI_SUCCESS;
}

static int convert_c(void *userbuf, MPI_Datatype t, MPI_Count count, void *filebuf, MPI_Offset pos, void *extra) {
    (void)userbuf, (void)t, (void)count, (void)filebuf, (void)pos, (void)extra;
    return MPI_SUCCESS;
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
    char name[256], name2[300];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/viaduct-mpi-datarep-%d", dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(name2, sizeof name2, "%s-seq", name);

    CHECK(MPI_Register_datarep("plain", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, extent_fn, NULL) == MPI_SUCCESS);
    CHECK_RC(MPI_Register_datarep("plain", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, extent_fn, NULL), MPI_ERR_DUP_DATAREP);
    OK(rank, "registered; a second registration refused");

    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_Offset disp;
    MPI_Datatype et, ft;
    /* MPICH 4.0.2 takes the registration but no view in it ("only native"). */
    if (on_viaduct) {
        CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "plain", MPI_INFO_NULL) == MPI_SUCCESS);
        CHECK(MPI_File_get_view(fh, &disp, &et, &ft, rep) == MPI_SUCCESS);
        CHECK(strcmp(rep, "plain") == 0 && disp == 0);
        int w[4] = {rank, rank + 10, rank + 20, rank + 30}, r[4] = {-1, -1, -1, -1};
        CHECK(MPI_File_write_at_all(fh, rank * 4, w, 4, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        /* MPI's consistency rule between ranks: sync, barrier, sync. */
        CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
        CHECK(MPI_File_read_at_all(fh, ((rank + 1) % n) * 4, r, 4, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(r[0] == (rank + 1) % n && r[3] == (rank + 1) % n + 30);
    }
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "no-such-representation", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_DATAREP);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    OK(rank, "a view in the registered representation ok");

    /* MPI_DISPLACEMENT_CURRENT on a sequential file. */
    CHECK(MPI_File_open(MPI_COMM_WORLD, name2, MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    int two[2] = {100 + rank, 200 + rank};
    CHECK(MPI_File_write_ordered(fh, two, 2, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    CHECK(MPI_File_get_view(fh, &disp, &et, &ft, rep) == MPI_SUCCESS);
    CHECK(disp == (MPI_Offset)(2 * n * sizeof(int)));
    int one = 300 + rank;
    CHECK(MPI_File_write_ordered(fh, &one, 1, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    CHECK(MPI_File_open(MPI_COMM_WORLD, name2, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    int all[64];
    CHECK(3 * n <= 64);
    CHECK(MPI_File_read_at(fh, 0, all, 3 * n, MPI_INT, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < n; i++) {
        CHECK(all[2 * i] == 100 + i && all[2 * i + 1] == 200 + i);
        CHECK(all[2 * n + i] == 300 + i);
    }
    OK(rank, "MPI_DISPLACEMENT_CURRENT at byte %lld", (long long)disp);
    if (on_viaduct) {
        /* A predefined name (MPICH 4.0.2 lets "native" be registered). */
        CHECK_RC(MPI_Register_datarep("native", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, extent_fn, NULL), MPI_ERR_DUP_DATAREP);
        CHECK_RC(MPI_Register_datarep("external32", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, extent_fn, NULL), MPI_ERR_DUP_DATAREP);
        CHECK_RC(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL), MPI_ERR_ARG);
        CHECK(MPI_Register_datarep("converting", convert, convert, extent_fn, NULL) == MPI_SUCCESS);
        CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "converting", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_DATAREP);
        CHECK(MPI_Register_datarep_c("plain_c", MPI_CONVERSION_FN_NULL_C, MPI_CONVERSION_FN_NULL_C, extent_fn, NULL) == MPI_SUCCESS);
        CHECK_RC(MPI_Register_datarep_c("plain_c", convert_c, convert_c, extent_fn, NULL), MPI_ERR_DUP_DATAREP);
        CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "plain_c", MPI_INFO_NULL) == MPI_SUCCESS);
        CHECK_RC(MPI_Register_datarep(NULL, MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, extent_fn, NULL), MPI_ERR_ARG);
        CHECK_RC(MPI_Register_datarep("", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, extent_fn, NULL), MPI_ERR_ARG);
    } else {
        (void)convert;
        (void)convert_c;
    }
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        unlink(name);
        unlink(name2);
    }
    OK(rank, "done");
    MPI_Finalize();
    return 0;
}
