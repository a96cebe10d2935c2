/* File views: a vector filetype interleaving the ranks' blocks (rank r owns every size-th
   block), a view with a displacement and an MPI_INT etype (offsets in ints), a non-contiguous
   memory datatype, MPI_File_get_view and MPI_File_get_byte_offset, seek in etypes, the
   nonblocking forms through a view, the file's type extent, group, info, atomicity and
   preallocation, and the error classes of a bad datarep or filetype. Rank 0
   reads the whole file back through a byte view and prints a checksum. */
#include "common.h"
#include <unistd.h>

enum { B = 3, NB = 5 }; /* ints per block, blocks per rank */

static unsigned long sum_file(MPI_File fh, MPI_Offset len) {
    unsigned char *all = malloc(len ? len : 1);
    MPI_Status st;
    CHECK(MPI_File_read_at(fh, 0, all, (int)len, MPI_BYTE, &st) == MPI_SUCCESS);
    int n;
    CHECK(MPI_Get_count(&st, MPI_BYTE, &n) == MPI_SUCCESS && n == (int)len);
    unsigned long h = 5381;
    for (MPI_Offset i = 0; i < len; i++) h = (h * 33 + all[i]) % 4294967291ul;
    free(all);
    return h;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char name[256];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/viaduct-mpi-fileview-%d", dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                        MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    MPI_Status st;
    int count;

    /* Rank r owns blocks r, r + size, r + 2 size, ... of B ints each. */
    MPI_Datatype blocks, tiled;
    CHECK(MPI_Type_vector(1, B, size * B, MPI_INT, &blocks) == MPI_SUCCESS);
    CHECK(MPI_Type_create_resized(blocks, 0, (MPI_Aint)size * B * sizeof(int), &tiled) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&tiled) == MPI_SUCCESS);
    CHECK(MPI_File_set_view(fh, (MPI_Offset)rank * B * sizeof(int), MPI_INT, tiled, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    int mine[B * NB];
    for (int i = 0; i < B * NB; i++) mine[i] = rank * 1000 + i;
    CHECK(MPI_File_write_all(fh, mine, B * NB, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == B * NB);
    MPI_Offset pos, byte;
    CHECK(MPI_File_get_position(fh, &pos) == MPI_SUCCESS && pos == B * NB);
    CHECK(MPI_File_get_byte_offset(fh, B + 1, &byte) == MPI_SUCCESS);
    CHECK(byte == ((MPI_Offset)size * B + (MPI_Offset)rank * B + 1) * (MPI_Offset)sizeof(int));
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    int back[B * NB];
    memset(back, 0, sizeof back);
    /* read_at offsets are etypes within the view: ints 2.. of this rank's data. */
    CHECK(MPI_File_read_at(fh, 2, back, B * NB - 2, MPI_INT, &st) == MPI_SUCCESS);
    for (int i = 0; i < B * NB - 2; i++) CHECK(back[i] == rank * 1000 + i + 2);
    MPI_Offset fsize;
    CHECK(MPI_File_get_size(fh, &fsize) == MPI_SUCCESS && fsize == (MPI_Offset)size * B * NB * sizeof(int));
    OK(rank, "interleaved view ok, size %ld", (long)fsize);

    /* get_view gives the view back (a derived filetype as a new handle). */
    MPI_Offset disp;
    MPI_Datatype et, ft;
    char rep[MPI_MAX_DATAREP_STRING];
    CHECK(MPI_File_get_view(fh, &disp, &et, &ft, rep) == MPI_SUCCESS);
    CHECK(disp == (MPI_Offset)rank * B * sizeof(int) && et == MPI_INT && strcmp(rep, "native") == 0);
    MPI_Aint lb, ext;
    int tsize;
    CHECK(MPI_Type_get_extent(ft, &lb, &ext) == MPI_SUCCESS && lb == 0 && ext == (MPI_Aint)size * B * sizeof(int));
    CHECK(MPI_Type_size(ft, &tsize) == MPI_SUCCESS && tsize == B * (int)sizeof(int));
    CHECK(MPI_Type_free(&ft) == MPI_SUCCESS);

    /* Seek in etypes, then read through the individual pointer. */
    CHECK(MPI_File_seek(fh, B, MPI_SEEK_SET) == MPI_SUCCESS);
    CHECK(MPI_File_read(fh, back, 2, MPI_INT, &st) == MPI_SUCCESS && back[0] == rank * 1000 + B && back[1] == rank * 1000 + B + 1);
    CHECK(MPI_File_get_position(fh, &pos) == MPI_SUCCESS && pos == B + 2);
    OK(rank, "get_view and seek ok");
    MPI_Barrier(MPI_COMM_WORLD);

    /* A displacement past the interleaved part and an MPI_INT etype: offsets count ints. A
       non-contiguous memory type (every other int of a strided buffer) goes to the file
       packed. */
    MPI_Offset base = fsize + 16;
    CHECK(MPI_File_set_view(fh, base, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    CHECK(MPI_File_get_position(fh, &pos) == MPI_SUCCESS && pos == 0);
    MPI_Datatype every2;
    CHECK(MPI_Type_vector(4, 1, 2, MPI_INT, &every2) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&every2) == MPI_SUCCESS);
    int strided[8];
    for (int i = 0; i < 8; i++) strided[i] = rank * 100 + i;
    CHECK(MPI_File_write_at(fh, rank * 4, strided, 1, every2, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == 4);
    CHECK(MPI_File_get_byte_offset(fh, 3, &byte) == MPI_SUCCESS && byte == base + 3 * (MPI_Offset)sizeof(int));
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    int got[8];
    for (int i = 0; i < 8; i++) got[i] = -1;
    int left = (rank + size - 1) % size;
    CHECK(MPI_File_read_at(fh, left * 4, got, 1, every2, &st) == MPI_SUCCESS);
    for (int i = 0; i < 8; i++) CHECK(got[i] == (i % 2 ? -1 : left * 100 + i));
    /* Nonblocking through an interleaving view: every piece of the request completes. */
    CHECK(MPI_File_set_view(fh, (MPI_Offset)rank * B * sizeof(int), MPI_INT, tiled, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    MPI_Request rq;
    memset(back, 0, sizeof back);
    CHECK(MPI_File_iread_at(fh, 1, back, B * NB - 1, MPI_INT, &rq) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == B * NB - 1);
    for (int i = 0; i < B * NB - 1; i++) CHECK(back[i] == rank * 1000 + i + 1);
    OK(rank, "displaced int view, strided memory, nonblocking ok");

    /* The nonblocking forms at the individual file pointer (moved when the request starts) and
       the nonblocking collectives, through the interleaving view. */
    CHECK(MPI_File_seek(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
    CHECK(MPI_File_iwrite(fh, mine, B * NB, MPI_INT, &rq) == MPI_SUCCESS);
    CHECK(MPI_File_get_position(fh, &pos) == MPI_SUCCESS && pos == B * NB);
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == B * NB);
    CHECK(MPI_File_seek(fh, 1, MPI_SEEK_SET) == MPI_SUCCESS);
    memset(back, 0, sizeof back);
    CHECK(MPI_File_iread(fh, back, 2, MPI_INT, &rq) == MPI_SUCCESS);
    CHECK(MPI_File_get_position(fh, &pos) == MPI_SUCCESS && pos == 3);
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS && back[0] == rank * 1000 + 1 && back[1] == rank * 1000 + 2);
    CHECK(MPI_File_iwrite_at_all(fh, 0, mine, B * NB, MPI_INT, &rq) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
    memset(back, 0, sizeof back);
    CHECK(MPI_File_iread_at_all(fh, 0, back, B * NB, MPI_INT, &rq) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
    for (int i = 0; i < B * NB; i++) CHECK(back[i] == rank * 1000 + i);
    CHECK(MPI_File_seek(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
    CHECK(MPI_File_iwrite_all(fh, mine, B * NB, MPI_INT, &rq) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
    CHECK(MPI_File_seek(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
    memset(back, 0, sizeof back);
    CHECK(MPI_File_iread_all(fh, back, B * NB, MPI_INT, &rq) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
    for (int i = 0; i < B * NB; i++) CHECK(back[i] == rank * 1000 + i);
    OK(rank, "nonblocking pointer and collective forms ok");

    /* The file's type extent, group, info, atomicity. */
    CHECK(MPI_File_get_type_extent(fh, tiled, &ext) == MPI_SUCCESS && ext == (MPI_Aint)size * B * sizeof(int));
    MPI_Group fg, wg;
    int cmp;
    CHECK(MPI_File_get_group(fh, &fg) == MPI_SUCCESS);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    CHECK(MPI_Group_compare(fg, wg, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
    MPI_Group_free(&fg);
    MPI_Group_free(&wg);
    MPI_Info used;
    CHECK(MPI_File_get_info(fh, &used) == MPI_SUCCESS && used != MPI_INFO_NULL);
    CHECK(MPI_Info_free(&used) == MPI_SUCCESS);
    CHECK(MPI_File_set_info(fh, MPI_INFO_NULL) == MPI_SUCCESS);
    int flag = -1;
    CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_File_set_atomicity(fh, 1) == MPI_SUCCESS);
    CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 1);
    CHECK(MPI_File_set_atomicity(fh, 0) == MPI_SUCCESS);
    OK(rank, "type extent, group, info, atomicity ok");

    /* Wrong use. */
    CHECK_RC(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "no-such-rep", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_DATAREP);
    MPI_Datatype backwards;
    int bl[2] = {1, 1}, dsp[2] = {4, 0};
    CHECK(MPI_Type_indexed(2, bl, dsp, MPI_INT, &backwards) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&backwards) == MPI_SUCCESS);
    int rc = MPI_File_set_view(fh, 0, MPI_INT, backwards, "native", MPI_INFO_NULL);
    CHECK(rc != MPI_SUCCESS);
    CHECK(MPI_Type_free(&backwards) == MPI_SUCCESS);
    OK(rank, "view errors ok");
    MPI_Barrier(MPI_COMM_WORLD);

    /* Preallocation extends the file; the whole file's bytes are the same on every
       implementation. */
    CHECK(MPI_File_preallocate(fh, 400) == MPI_SUCCESS);
    CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    if (rank == 0) {
        MPI_File_get_size(fh, &fsize);
        unsigned long h = sum_file(fh, fsize);
        OK(rank, "file size %ld checksum %lu", (long)fsize, h);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Type_free(&tiled) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&blocks) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&every2) == MPI_SUCCESS);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
