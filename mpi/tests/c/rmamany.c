/* Many operations in one fence epoch: every rank gets 2,500 blocks of 64 KiB (160 MB in all,
   past the 64 MiB a fence epoch queues for one target before sending it on at once) from the
   next rank's window into 8 rotating origin buffers, and accumulates into one counter of that
   window before, between and after the gets. The gets bring the right bytes, the counter
   holds every addition, and no reply of the whole epoch is held at once (MPICH's manyget:
   100,000 gets of 128 KiB). */
#include "common.h"

#define BLOCK (64 * 1024)
#define GETS 2500
#define SLOTS 8

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* The window: SLOTS blocks of a pattern naming the rank and the block, then a counter (in
       a whole page: MPICH 4.0.2 gives odd ranks' windows of SLOTS * BLOCK + 8 bytes wrongly
       to the ranks below them). */
    unsigned char *mem = NULL;
    MPI_Win win;
    CHECK(MPI_Win_allocate(SLOTS * BLOCK + 4096, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win) == MPI_SUCCESS);
    for (int b = 0; b < SLOTS; b++)
        for (int i = 0; i < BLOCK; i++) mem[b * BLOCK + i] = (unsigned char)(rank * 31 + b * 7 + i);
    long zero = 0;
    memcpy(mem + SLOTS * BLOCK, &zero, sizeof zero);
    unsigned char *got = malloc((size_t)SLOTS * BLOCK);
    CHECK(got != NULL);
    int to = (rank + 1) % size;
    long one = 1;
    /* A fence that ends no epoch need not be a barrier (MPICH's is not): the windows are
       filled on every rank before any operation reaches them. */
    CHECK(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    for (int k = 0; k < GETS; k++) {
        if (k % 500 == 0)
            CHECK(MPI_Accumulate(&one, 1, MPI_LONG, to, SLOTS * BLOCK, 1, MPI_LONG, MPI_SUM, win) == MPI_SUCCESS);
        int slot = k % SLOTS;
        CHECK(MPI_Get(got + (size_t)slot * BLOCK, BLOCK, MPI_BYTE, to, (MPI_Aint)slot * BLOCK, BLOCK, MPI_BYTE, win) == MPI_SUCCESS);
    }
    CHECK(MPI_Accumulate(&one, 1, MPI_LONG, to, SLOTS * BLOCK, 1, MPI_LONG, MPI_SUM, win) == MPI_SUCCESS);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    int bad = 0;
    for (int b = 0; b < SLOTS; b++)
        for (int i = 0; i < BLOCK; i++) bad += got[b * BLOCK + i] != (unsigned char)(to * 31 + b * 7 + i);
    long count;
    memcpy(&count, mem + SLOTS * BLOCK, sizeof count);
    OK(rank, "%d gets of %d bytes: %d bytes wrong; counter %ld", GETS, BLOCK, bad, count);
    CHECK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win) == MPI_SUCCESS);
    free(got);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
