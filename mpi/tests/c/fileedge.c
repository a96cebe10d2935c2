/* File I/O edge cases, on viaduct only (MPICH 4.0.2 fills a collective or strided read past the
   end of the file with zeros, counting them, and fails on a filetype without data), each value
   checked here as the MPI standard gives it: a read past the end of the file leaves the rest of
   the buffer as it was and counts only what it read (independent, collective and nonblocking,
   through a contiguous and a non-contiguous view); a rank whose filetype holds no data takes
   part in collective writes with zero elements; the error classes of bad views (negative or
   decreasing displacements and, in a file open for writing, overlapping regions: MPI_ERR_IO;
   a filetype not made of whole etypes: MPI_ERR_ARG), overlapping regions accepted read-only;
   "external32" views (big-endian bytes in the file) and "internal" views; a file error handler
   freed while attached is still called; a handle from MPI_File_get_errhandler is freed like
   any other. */
#include "common.h"
#include <unistd.h>

static int handler_calls = 0;

static void on_error(MPI_File *fh, int *code, ...) {
    (void)fh;
    if (*code != MPI_SUCCESS) handler_calls++;
}

static void fill(unsigned char *b, int n, unsigned char v) {
    for (int i = 0; i < n; i++) b[i] = v;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char name[256];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/viaduct-mpi-fileedge-%d", dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_File fh;
    MPI_Status st;
    int count;
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) ==
          MPI_SUCCESS);
    CHECK(MPI_File_set_size(fh, 0) == MPI_SUCCESS);

    /* Ten bytes in the file; every read asks for sixteen. */
    unsigned char data[10], buf[16];
    for (int i = 0; i < 10; i++) data[i] = (unsigned char)(i + 1);
    if (rank == 0) CHECK(MPI_File_write_at(fh, 0, data, 10, MPI_BYTE, &st) == MPI_SUCCESS);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);

    fill(buf, 16, 99);
    CHECK(MPI_File_read_at(fh, 4, buf, 16, MPI_BYTE, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS);
    CHECK(count == 6 && buf[0] == 5 && buf[5] == 10 && buf[6] == 99 && buf[15] == 99);
    OK(rank, "read_at past the end: count %d, bytes %d %d %d (untouched %d)", count, buf[0], buf[5],
       buf[6], buf[15]);

    fill(buf, 16, 99);
    CHECK(MPI_File_read_at_all(fh, 0, buf, 16, MPI_BYTE, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS);
    CHECK(count == 10 && buf[0] == 1 && buf[9] == 10 && buf[10] == 99 && buf[15] == 99);
    OK(rank, "read_at_all past the end: count %d, bytes %d %d (untouched %d %d)", count, buf[0],
       buf[9], buf[10], buf[15]);

    MPI_Request req;
    fill(buf, 16, 99);
    CHECK(MPI_File_iread_at(fh, 8, buf, 16, MPI_BYTE, &req) == MPI_SUCCESS);
    CHECK(MPI_Wait(&req, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS);
    CHECK(count == 2 && buf[0] == 9 && buf[1] == 10 && buf[2] == 99);
    OK(rank, "iread_at past the end: count %d, bytes %d %d (untouched %d)", count, buf[0], buf[1],
       buf[2]);

    /* A view of every other pair of bytes: the data ends inside the third tile. */
    MPI_Datatype pairs, tiled;
    CHECK(MPI_Type_contiguous(2, MPI_BYTE, &pairs) == MPI_SUCCESS);
    CHECK(MPI_Type_create_resized(pairs, 0, 4, &tiled) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&tiled) == MPI_SUCCESS);
    CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, tiled, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    fill(buf, 16, 99);
    CHECK(MPI_File_read_at(fh, 0, buf, 8, MPI_BYTE, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS);
    CHECK(count == 6 && buf[4] == 9 && buf[5] == 10 && buf[6] == 99 && buf[7] == 99);
    OK(rank, "strided read past the end: count %d, bytes %d %d %d %d %d %d (untouched %d %d)", count,
       buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6], buf[7]);
    CHECK(MPI_Type_free(&tiled) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&pairs) == MPI_SUCCESS);

    /* The last rank's filetype holds no data; it writes zero elements with the others. */
    int mine = rank == size - 1 ? 0 : 2;
    int disps[2] = {2 * rank, 2 * rank + 1};
    MPI_Datatype picks, spaced;
    CHECK(MPI_Type_create_indexed_block(mine, 1, disps, MPI_INT, &picks) == MPI_SUCCESS);
    CHECK(MPI_Type_create_resized(picks, 0, (MPI_Aint)(2 * size * sizeof(int)), &spaced) ==
          MPI_SUCCESS);
    CHECK(MPI_Type_commit(&spaced) == MPI_SUCCESS);
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, spaced, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    int vals[2] = {10 * rank + 1, 10 * rank + 2};
    CHECK(MPI_File_write_all(fh, vals, mine, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS);
    MPI_Offset pos;
    CHECK(MPI_File_get_position(fh, &pos) == MPI_SUCCESS);
    CHECK(count == mine && pos == mine);
    OK(rank, "write_all through a view of %d ints: count %d, position %lld", mine, count,
       (long long)pos);
    if (mine == 0) {
        int one = 1;
        int rc = MPI_File_write(fh, &one, 1, MPI_INT, &st);
        CHECK(rc != MPI_SUCCESS);
        OK(rank, "a write of data through a view without data fails");
    }
    CHECK(MPI_Type_free(&spaced) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&picks) == MPI_SUCCESS);

    /* Bad views. */
    MPI_Datatype t;
    int bl[2] = {1, 1};
    int negative[2] = {-2, 2}, decreasing[2] = {3, 0};
    CHECK(MPI_Type_indexed(2, bl, negative, MPI_INT, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, t, "native", MPI_INFO_NULL), MPI_ERR_IO);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS);
    CHECK(MPI_Type_indexed(2, bl, decreasing, MPI_INT, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS);
    CHECK_RC(MPI_File_set_view(fh, 0, t, t, "native", MPI_INFO_NULL), MPI_ERR_IO);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS);
    int obl[2] = {3, 1}, odisp[2] = {0, 1};
    MPI_Datatype overlap;
    CHECK(MPI_Type_indexed(2, obl, odisp, MPI_INT, &overlap) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&overlap) == MPI_SUCCESS);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, overlap, "native", MPI_INFO_NULL), MPI_ERR_IO);
    CHECK(MPI_Type_contiguous(3, MPI_BYTE, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS);
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_INT, t, "native", MPI_INFO_NULL), MPI_ERR_ARG);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS);
    OK(rank, "bad views refused");

    /* external32: big-endian ints in the file. */
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL) == MPI_SUCCESS);
    int e[2] = {0x01020304 + rank, -2};
    CHECK(MPI_File_write_at_all(fh, 2 * rank, e, 2, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_Offset disp;
    MPI_Datatype et, ft;
    CHECK(MPI_File_get_view(fh, &disp, &et, &ft, rep) == MPI_SUCCESS);
    int back[2] = {0, 0};
    CHECK(MPI_File_read_at(fh, 2 * rank, back, 2, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "internal", MPI_INFO_NULL) == MPI_SUCCESS);
    unsigned char raw[8];
    CHECK(MPI_File_read_at(fh, 8 * rank, raw, 8, MPI_BYTE, &st) == MPI_SUCCESS);
    CHECK(strcmp(rep, "external32") == 0 && back[0] == e[0] && back[1] == -2);
    CHECK(raw[0] == 1 && raw[3] == 4 + rank && raw[4] == 0xff && raw[7] == 0xfe);
    if (et != MPI_INT) MPI_Type_free(&et);
    if (ft != MPI_INT) MPI_Type_free(&ft);
    OK(rank, "%s view: back %x %d, file bytes %02x%02x%02x%02x %02x%02x%02x%02x", rep, back[0],
       back[1], raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7]);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);

    /* Read-only: overlapping regions are allowed, and the handler freed while attached runs. */
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, overlap, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    int ov[4] = {0, 0, 0, 0};
    CHECK(MPI_File_read_at(fh, 0, ov, 4, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(ov[0] == ov[2] - 0x01000000 && ov[1] == ov[3]);
    OK(rank, "overlapping view read-only: %x %x %x %x", ov[0], ov[1], ov[2], ov[3]);
    CHECK(MPI_Type_free(&overlap) == MPI_SUCCESS);
    MPI_Errhandler eh, got;
    CHECK(MPI_File_create_errhandler(on_error, &eh) == MPI_SUCCESS);
    CHECK(MPI_File_set_errhandler(fh, eh) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&eh) == MPI_SUCCESS);
    CHECK(eh == MPI_ERRHANDLER_NULL);
    int rc = MPI_File_write_at(fh, 0, data, 1, MPI_BYTE, &st);
    int cls;
    MPI_Error_class(rc, &cls);
    CHECK(MPI_File_get_errhandler(fh, &got) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&got) == MPI_SUCCESS);
    CHECK(MPI_File_get_errhandler(fh, &got) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_free(&got) == MPI_SUCCESS);
    rc = MPI_File_write_at(fh, 0, data, 1, MPI_BYTE, &st);
    CHECK(handler_calls == 2 && rc != MPI_SUCCESS);
    OK(rank, "freed handler called %d times, class %s", handler_calls,
       cls == MPI_ERR_ACCESS ? "MPI_ERR_ACCESS" : cls == MPI_ERR_READ_ONLY ? "MPI_ERR_READ_ONLY" : "other");
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) CHECK(MPI_File_delete(name, MPI_INFO_NULL) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
