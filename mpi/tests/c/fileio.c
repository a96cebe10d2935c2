/* File I/O: open/close/delete, sizes, positional blocking, collective and nonblocking reads and
   writes (file requests waited beside message requests), the individual file pointer, and the
   error classes of wrong use (files report through MPI_ERRORS_RETURN by default). */
#include "common.h"
#include <unistd.h>

enum { N = 4096 };

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char name[256];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/viaduct-mpi-fileio-%d", dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);

    MPI_Errhandler eh;
    CHECK(MPI_File_get_errhandler(MPI_FILE_NULL, &eh) == MPI_SUCCESS && eh == MPI_ERRORS_RETURN);
    MPI_File fh;
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), MPI_ERR_NO_SUCH_FILE);
    CHECK_RC(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh), MPI_ERR_AMODE);
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    int amode;
    CHECK(MPI_File_get_amode(fh, &amode) == MPI_SUCCESS && amode == (MPI_MODE_CREATE | MPI_MODE_RDWR));

    /* Each rank writes its block collectively; after a sync every rank reads every block. */
    int *mine = malloc(N * sizeof(int)), *back = malloc(N * sizeof(int));
    for (int i = 0; i < N; i++) mine[i] = rank * 1000000 + i;
    MPI_Status st;
    CHECK(MPI_File_write_at_all(fh, (MPI_Offset)rank * N * sizeof(int), mine, N, MPI_INT, &st) == MPI_SUCCESS);
    int count;
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == N);
    /* The standard's sync-barrier-sync makes every rank's writes visible to every rank. */
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Offset fsize;
    CHECK(MPI_File_get_size(fh, &fsize) == MPI_SUCCESS && fsize == (MPI_Offset)size * N * sizeof(int));
    for (int r = 0; r < size; r++) {
        CHECK(MPI_File_read_at(fh, (MPI_Offset)r * N * sizeof(int), back, N, MPI_INT, &st) == MPI_SUCCESS);
        for (int i = 0; i < N; i += 511) CHECK(back[i] == r * 1000000 + i);
    }
    /* A read past the end is short. */
    CHECK(MPI_File_read_at(fh, fsize - 2 * sizeof(int), back, 10, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == 2);
    OK(rank, "blocking file I/O ok, size %ld", (long)fsize);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Nonblocking file requests and a message request in one Waitall. */
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double tail[8], got[8], msg = -1;
    for (int i = 0; i < 8; i++) tail[i] = rank + i / 10.0;
    MPI_Offset at = fsize + (MPI_Offset)rank * sizeof tail;
    MPI_Request rq[3];
    CHECK(MPI_File_iwrite_at(fh, at, tail, 8, MPI_DOUBLE, &rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Irecv(&msg, 1, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, &rq[1]) == MPI_SUCCESS);
    double r = rank;
    CHECK(MPI_Isend(&r, 1, MPI_DOUBLE, right, 5, MPI_COMM_WORLD, &rq[2]) == MPI_SUCCESS);
    MPI_Status sts[3];
    CHECK(MPI_Waitall(3, rq, sts) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&sts[0], MPI_DOUBLE, &count) == MPI_SUCCESS && count == 8);
    CHECK(msg == left);
    CHECK(MPI_File_iread_at(fh, at, got, 8, MPI_DOUBLE, &rq[0]) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rq[0], &st) == MPI_SUCCESS);
    for (int i = 0; i < 8; i++) CHECK(got[i] == tail[i]);
    OK(rank, "nonblocking file I/O ok");
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);

    /* The individual file pointer. */
    MPI_Offset pos;
    CHECK(MPI_File_seek(fh, (MPI_Offset)left * N * sizeof(int), MPI_SEEK_SET) == MPI_SUCCESS);
    int rrc = MPI_File_read(fh, back, 3, MPI_INT, &st);
    CHECK(rrc == MPI_SUCCESS && back[2] == left * 1000000 + 2);
    CHECK(MPI_File_get_position(fh, &pos) == MPI_SUCCESS && pos == (MPI_Offset)left * N * sizeof(int) + 3 * sizeof(int));
    CHECK(MPI_File_seek(fh, -(MPI_Offset)sizeof(int), MPI_SEEK_CUR) == MPI_SUCCESS);
    CHECK(MPI_File_read_all(fh, back, 1, MPI_INT, &st) == MPI_SUCCESS && back[0] == left * 1000000 + 2);
    CHECK_RC(MPI_File_seek(fh, -1, MPI_SEEK_SET), MPI_ERR_ARG);

    /* Set the size (collective), then close with deletion. */
    CHECK(MPI_File_set_size(fh, 100) == MPI_SUCCESS);
    CHECK(MPI_File_get_size(fh, &fsize) == MPI_SUCCESS && fsize == 100);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS && fh == MPI_FILE_NULL);

    /* Read-only and write-only files refuse the other direction. */
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_WRONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    CHECK_RC(MPI_File_read_at(fh, 0, back, 1, MPI_INT, &st), MPI_ERR_ACCESS);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(access(name, F_OK) != 0);
    if (rank == 0) CHECK_RC(MPI_File_delete(name, MPI_INFO_NULL), MPI_ERR_NO_SUCH_FILE);
    OK(rank, "file errors ok");
    free(mine);
    free(back);
    MPI_Finalize();
    return 0;
}
