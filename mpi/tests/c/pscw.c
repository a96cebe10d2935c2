/* One-sided communication with post/start/complete/wait: a ring where every rank is origin
   of its right neighbour and target of its left one (put, get, accumulate), then every other
   rank accessing rank 0, which ends its exposure epoch by MPI_Win_test. */
#include "common.h"

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    int buf[4] = {-1, 100 + rank, 5, -1};
    MPI_Win win;
    CHECK(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win) ==
          MPI_SUCCESS);
    MPI_Group world, gl, gr, others, zero;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &gl);
    MPI_Group_incl(world, 1, &right, &gr);

    /* The ring. */
    CHECK(MPI_Win_post(gl, 0, win) == MPI_SUCCESS);
    CHECK(MPI_Win_start(gr, 0, win) == MPI_SUCCESS);
    int got = -7, v = 10 * (rank + 1);
    CHECK(MPI_Put(&rank, 1, MPI_INT, right, 0, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Get(&got, 1, MPI_INT, right, 1, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Accumulate(&v, 1, MPI_INT, right, 2, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS);
    CHECK(MPI_Win_complete(win) == MPI_SUCCESS);
    CHECK(MPI_Win_wait(win) == MPI_SUCCESS);
    OK(rank, "ring: slot0 %d got %d sum %d", buf[0], got, buf[2]);

    /* Every other rank adds its rank + 1 into slot 3 of rank 0 and fetches slot 0. */
    int z = 0;
    MPI_Group_excl(world, 1, &z, &others);
    MPI_Group_incl(world, 1, &z, &zero);
    if (rank == 0) {
        buf[3] = 0;
        CHECK(MPI_Win_post(others, 0, win) == MPI_SUCCESS);
        int flag = 0;
        while (!flag) {
            CHECK(MPI_Win_test(win, &flag) == MPI_SUCCESS);
        }
        OK(rank, "star: sum %d", buf[3]);
    } else {
        int one = rank + 1, seen = -1;
        CHECK(MPI_Win_start(zero, 0, win) == MPI_SUCCESS);
        CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, 3, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS);
        CHECK(MPI_Get(&seen, 1, MPI_INT, 0, 0, 1, MPI_INT, win) == MPI_SUCCESS);
        CHECK(MPI_Win_complete(win) == MPI_SUCCESS);
        OK(rank, "star: seen %d", seen);
    }
    MPI_Group_free(&gl);
    MPI_Group_free(&gr);
    MPI_Group_free(&others);
    MPI_Group_free(&zero);
    MPI_Group_free(&world);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
