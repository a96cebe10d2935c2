/* Split-collective file I/O: MPI_File_{read,write}_all_begin/end, _at_all_begin/end and
   _ordered_begin/end. The data moves between begin and end (the buffer is the library's until
   end); one split collective at a time per file handle: a second begin, or an end without a
   begin, is an error of class MPI_ERR_IO (as MPICH's ROMIO gives). */
#include "common.h"
#include <unistd.h>

enum { N = 1000 };

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen;
    MPI_Get_library_version(lib, &liblen);
    int on_viaduct = strstr(lib, "viaduct") != NULL;
    char name[256];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/viaduct-mpi-filesplit-%d", dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                        MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    int *mine = malloc(N * sizeof(int)), *back = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++) mine[i] = rank * 100000 + i;
    MPI_Status st;
    int count;

    /* write_at_all_begin/end: each rank's block at rank * N ints. */
    CHECK(MPI_File_write_at_all_begin(fh, (MPI_Offset)rank * N * sizeof(int), mine, N, MPI_INT) == MPI_SUCCESS);
    /* A second split collective on the handle while one is outstanding. */
    CHECK_RC(MPI_File_write_at_all_begin(fh, 0, mine, 1, MPI_INT), MPI_ERR_IO);
    CHECK_RC(MPI_File_read_all_begin(fh, back, 1, MPI_INT), MPI_ERR_IO);
    CHECK(MPI_File_write_at_all_end(fh, mine, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == N);
    /* An end without a begin. */
    CHECK_RC(MPI_File_write_at_all_end(fh, mine, &st), MPI_ERR_IO);
    CHECK_RC(MPI_File_read_all_end(fh, back, &st), MPI_ERR_IO);
    /* MPICH 4.0.2 accepts an MPI_File_write_ordered_end without a begin: viaduct only. */
    if (on_viaduct) CHECK_RC(MPI_File_write_ordered_end(fh, mine, &st), MPI_ERR_IO);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    OK(rank, "write_at_all_begin/end ok");

    /* read_at_all_begin/end: the block of the next rank. */
    int next = (rank + 1) % size;
    memset(back, 0, N * sizeof(int));
    CHECK(MPI_File_read_at_all_begin(fh, (MPI_Offset)next * N * sizeof(int), back, N, MPI_INT) == MPI_SUCCESS);
    CHECK(MPI_File_read_at_all_end(fh, back, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == N);
    for (int i = 0; i < N; i++) CHECK(back[i] == next * 100000 + i);
    OK(rank, "read_at_all_begin/end ok");

    /* write_all_begin/end and read_all_begin/end at the individual file pointer, which moves. */
    MPI_Offset base = (MPI_Offset)size * N * sizeof(int), pos;
    CHECK(MPI_File_seek(fh, base + (MPI_Offset)rank * 8 * sizeof(int), MPI_SEEK_SET) == MPI_SUCCESS);
    int eight[8];
    for (int i = 0; i < 8; i++) eight[i] = -(rank * 10 + i);
    CHECK(MPI_File_write_all_begin(fh, eight, 8, MPI_INT) == MPI_SUCCESS);
    CHECK(MPI_File_write_all_end(fh, eight, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == 8);
    CHECK(MPI_File_get_position(fh, &pos) == MPI_SUCCESS && pos == base + (MPI_Offset)(rank + 1) * 8 * sizeof(int));
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    CHECK(MPI_File_seek(fh, base + (MPI_Offset)next * 8 * sizeof(int), MPI_SEEK_SET) == MPI_SUCCESS);
    int got[8];
    CHECK(MPI_File_read_all_begin(fh, got, 8, MPI_INT) == MPI_SUCCESS);
    CHECK(MPI_File_read_all_end(fh, got, &st) == MPI_SUCCESS);
    for (int i = 0; i < 8; i++) CHECK(got[i] == -(next * 10 + i));
    OK(rank, "write_all_begin/end and read_all_begin/end ok");

    /* Ordered: rank r writes r + 1 ints of value r, in rank order from the shared file pointer
       (0 after open), then every rank reads them back in the same order. */
    MPI_Barrier(MPI_COMM_WORLD);
    int vals[64];
    for (int i = 0; i < rank + 1; i++) vals[i] = 7000 + rank;
    CHECK(MPI_File_write_ordered_begin(fh, vals, rank + 1, MPI_INT) == MPI_SUCCESS);
    CHECK(MPI_File_write_ordered_end(fh, vals, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == rank + 1);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    /* Rank r's ints start after those of the ranks before it. */
    int at = 0;
    for (int q = 0; q < rank; q++) at += q + 1;
    CHECK(MPI_File_read_at(fh, (MPI_Offset)at * sizeof(int), got, 1, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(got[0] == 7000 + rank);
    /* The ordered writes overwrote the start of rank 0's block; rank 0's int at the end of
       them is still its own. */
    int total = size * (size + 1) / 2;
    if (rank == 0) {
        CHECK(MPI_File_read_at(fh, (MPI_Offset)total * sizeof(int), got, 1, MPI_INT, &st) == MPI_SUCCESS);
        CHECK(got[0] == total);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
    memset(vals, 0, sizeof vals);
    CHECK(MPI_File_read_ordered_begin(fh, vals, rank + 1, MPI_INT) == MPI_SUCCESS);
    CHECK_RC(MPI_File_read_ordered_begin(fh, vals, 1, MPI_INT), MPI_ERR_IO);
    CHECK(MPI_File_read_ordered_end(fh, vals, &st) == MPI_SUCCESS);
    for (int i = 0; i < rank + 1; i++) CHECK(vals[i] == 7000 + rank);
    MPI_Offset shared;
    CHECK(MPI_File_get_position_shared(fh, &shared) == MPI_SUCCESS && shared == total * (MPI_Offset)sizeof(int));
    OK(rank, "write_ordered_begin/end and read_ordered_begin/end ok");

    if (on_viaduct) {
        /* viaduct only: an end of another kind than the outstanding begin is refused (MPICH
           4.0.2's ROMIO checks only that some split collective is outstanding), and the one
           outstanding stays until its own end. */
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(MPI_File_read_at_all_begin(fh, 0, got, 1, MPI_INT) == MPI_SUCCESS);
        CHECK_RC(MPI_File_write_at_all_end(fh, got, &st), MPI_ERR_IO);
        CHECK_RC(MPI_File_read_all_end(fh, got, &st), MPI_ERR_IO);
        CHECK(MPI_File_read_at_all_end(fh, got, &st) == MPI_SUCCESS);
        CHECK(got[0] == 7000);
        MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    }

    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    free(mine);
    free(back);
    MPI_Finalize();
    return 0;
}
