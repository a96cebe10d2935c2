/* MPI_Win_shared_query on windows of every flavor (MPI 4.1): on a window of MPI_Win_create or
   MPI_Win_allocate a rank's own memory comes back (base, size, unit) and every other rank's as
   size 0, unit 0 and NULL (memory not shared with the caller), MPI_PROC_NULL too on more than
   one rank; on a dynamic window size 0 and NULL. MPICH 4.0.2 refuses the call on these windows
   (MPI_ERR_RMA_FLAVOR, the MPI 4.0 rule), so this program is not compared with MPICH. */
#include "common.h"

static int rank, n;

static void query_all(MPI_Win win, void *own, MPI_Aint own_size, int own_unit, const char *what) {
    for (int r = -1; r < n; r++) {
        MPI_Aint size = -1;
        int unit = -1;
        void *base = &size;
        int q = r < 0 ? MPI_PROC_NULL : r;
        CHECK(MPI_Win_shared_query(win, q, &size, &unit, &base) == MPI_SUCCESS);
        if (q == rank || (q == MPI_PROC_NULL && n == 1)) {
            CHECK(size == own_size && unit == own_unit && base == own);
        } else {
            CHECK(size == 0 && unit == 0 && base == NULL);
        }
    }
    OK(rank, "%s: own memory only", what);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int buf[4];
    MPI_Win win;
    CHECK(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win) ==
          MPI_SUCCESS);
    query_all(win, buf, sizeof buf, sizeof(int), "MPI_Win_create");
    MPI_Win_free(&win);
    double *mem = NULL;
    CHECK(MPI_Win_allocate(3 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD,
                           &mem, &win) == MPI_SUCCESS);
    query_all(win, mem, 3 * sizeof(double), sizeof(double), "MPI_Win_allocate");
    MPI_Win_free(&win);
    CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS);
    query_all(win, NULL, 0, 1, "MPI_Win_create_dynamic");
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
