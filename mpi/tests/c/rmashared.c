/* Shared-memory windows: MPI_Win_allocate_shared over the ranks of one node (sizes differ by
   rank), MPI_Win_shared_query of every rank (contiguous parts: rank r's follows rank r-1's,
   MPI_PROC_NULL gives the first part), direct stores into the own part and loads from the right
   neighbour's after MPI_Win_sync and a barrier, and MPI_Put/MPI_Accumulate on the same window
   under a fence. */
#include "common.h"

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n;

    MPI_Comm node;
    CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
          MPI_SUCCESS);
    int nsize;
    MPI_Comm_size(node, &nsize);
    CHECK(nsize == n);

    /* Rank r holds 2 * (r + 1) ints. */
    int count = 2 * (rank + 1);
    int *mine = NULL;
    MPI_Win win;
    CHECK(MPI_Win_allocate_shared(count * sizeof(int), sizeof(int), MPI_INFO_NULL, node, &mine,
                                  &win) == MPI_SUCCESS);
    int *flavor, flag;
    CHECK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag) == MPI_SUCCESS && flag);

    /* Every part, as this rank sees it. */
    int contiguous = 1, sizes_ok = 1;
    char *prev_end = NULL;
    for (int r = 0; r < n; r++) {
        MPI_Aint sz;
        int du;
        void *base;
        CHECK(MPI_Win_shared_query(win, r, &sz, &du, &base) == MPI_SUCCESS);
        sizes_ok &= sz == (MPI_Aint)(2 * (r + 1) * sizeof(int)) && du == (int)sizeof(int);
        if (r > 0) contiguous &= (char *)base == prev_end;
        if (r == rank) contiguous &= base == (void *)mine;
        prev_end = (char *)base + sz;
    }
    MPI_Aint sz0;
    int du0;
    void *base0, *first;
    CHECK(MPI_Win_shared_query(win, 0, &sz0, &du0, &first) == MPI_SUCCESS);
    CHECK(MPI_Win_shared_query(win, MPI_PROC_NULL, &sz0, &du0, &base0) == MPI_SUCCESS);
    OK(rank, "shared flavor %d sizes %d contiguous %d proc_null first %d",
       *flavor == MPI_WIN_FLAVOR_SHARED, sizes_ok, contiguous, base0 == first);

    /* Direct stores into the own part, loads from the right neighbour's. */
    MPI_Aint rsz;
    int rdu;
    int *theirs;
    CHECK(MPI_Win_shared_query(win, right, &rsz, &rdu, &theirs) == MPI_SUCCESS);
    CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win) == MPI_SUCCESS);
    for (int i = 0; i < count; i++) mine[i] = 100 * rank + i;
    CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
    MPI_Barrier(node);
    CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
    int loads = 1;
    for (int i = 0; i < 2 * (right + 1); i++) loads &= theirs[i] == 100 * right + i;
    CHECK(MPI_Win_unlock_all(win) == MPI_SUCCESS);
    OK(rank, "loads from the right neighbour %d (first %d)", loads, theirs[0]);

    /* One-sided operations on the shared window. */
    MPI_Barrier(node);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    int v = 7000 + rank, one = 1;
    CHECK(MPI_Put(&v, 1, MPI_INT, right, 1, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS);
    int left = (rank + n - 1) % n;
    OK(rank, "put from the left %d accumulated at 0: %d", mine[1] - 7000 == left,
       rank == 0 ? mine[0] : -1);

    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
