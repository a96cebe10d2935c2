/* Dynamic windows: MPI_Win_create_dynamic, MPI_Win_attach of a buffer, displacements as
   absolute addresses (MPI_Get_address) exchanged by an allgather, put and get under lock_all
   with a flush, MPI_Win_detach; MPI_Win_get_info/MPI_Win_set_info (hints as set, defaults, an unknown key ignored); an access to memory that is
   not attached giving MPI_ERR_RMA_RANGE (checked on viaduct only: MPICH 4.0.2 does not check
   the target's attached regions). */
#include "common.h"

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int right = (rank + 1) % n, left = (rank + n - 1) % n;

    MPI_Win win;
    CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS);
    CHECK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    int *flavor, flag;
    CHECK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag) == MPI_SUCCESS && flag);
    MPI_Info info;
    CHECK(MPI_Win_get_info(win, &info) == MPI_SUCCESS);
    CHECK(MPI_Info_free(&info) == MPI_SUCCESS);
    CHECK(MPI_Info_create(&info) == MPI_SUCCESS);
    CHECK(MPI_Info_set(info, "no_locks", "false") == MPI_SUCCESS);
    CHECK(MPI_Info_set(info, "accumulate_ops", "same_op") == MPI_SUCCESS);
    CHECK(MPI_Info_set(info, "invalid_test_key", "true") == MPI_SUCCESS);
    CHECK(MPI_Win_set_info(win, info) == MPI_SUCCESS);
    CHECK(MPI_Info_free(&info) == MPI_SUCCESS);
    /* The window hints as set, the others' defaults; an unknown key is ignored. */
    char hv[MPI_MAX_INFO_VAL + 1];
    int got;
    CHECK(MPI_Win_get_info(win, &info) == MPI_SUCCESS);
    CHECK(MPI_Info_get(info, "no_locks", MPI_MAX_INFO_VAL, hv, &got) == MPI_SUCCESS && got && strcmp(hv, "false") == 0);
    CHECK(MPI_Info_get(info, "accumulate_ops", MPI_MAX_INFO_VAL, hv, &got) == MPI_SUCCESS && got && strcmp(hv, "same_op") == 0);
    CHECK(MPI_Info_get(info, "accumulate_ordering", MPI_MAX_INFO_VAL, hv, &got) == MPI_SUCCESS && got && strcmp(hv, "rar,raw,war,waw") == 0);
    CHECK(MPI_Info_get(info, "same_size", MPI_MAX_INFO_VAL, hv, &got) == MPI_SUCCESS && got && strcmp(hv, "false") == 0);
    CHECK(MPI_Info_get(info, "invalid_test_key", MPI_MAX_INFO_VAL, hv, &got) == MPI_SUCCESS && !got);
    CHECK(MPI_Info_free(&info) == MPI_SUCCESS);
    OK(rank, "dynamic flavor %d, info calls ok", *flavor == MPI_WIN_FLAVOR_DYNAMIC);

    int buf[4] = {-1, -1, -1, -1};
    CHECK(MPI_Win_attach(win, buf, sizeof buf) == MPI_SUCCESS);
    MPI_Aint mine, addrs[4];
    CHECK(n <= 4);
    CHECK(MPI_Get_address(buf, &mine) == MPI_SUCCESS);
    CHECK(MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD) == MPI_SUCCESS);

    /* Put into the right neighbour's slot 2, get it back after a flush. */
    CHECK(MPI_Win_lock_all(0, win) == MPI_SUCCESS);
    int v = 300 + rank, back = -1;
    MPI_Aint at = MPI_Aint_add(addrs[right], 2 * sizeof(int));
    CHECK(MPI_Put(&v, 1, MPI_INT, right, at, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Win_flush(right, win) == MPI_SUCCESS);
    CHECK(MPI_Get(&back, 1, MPI_INT, right, at, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Win_unlock_all(win) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win) == MPI_SUCCESS);
    CHECK(MPI_Win_sync(win) == MPI_SUCCESS);
    OK(rank, "dynamic put read back %d, own slot 2 from the left %d", back == v,
       buf[2] == 300 + left);
    CHECK(MPI_Win_unlock(rank, win) == MPI_SUCCESS);

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen;
    MPI_Get_library_version(lib, &liblen);
    if (strstr(lib, "viaduct") != NULL) {
        /* One int past the attached buffer: MPI_ERR_RMA_RANGE at the unlock. */
        CHECK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win) == MPI_SUCCESS);
        CHECK(MPI_Put(&v, 1, MPI_INT, right, MPI_Aint_add(addrs[right], sizeof buf), 1, MPI_INT,
                      win) == MPI_SUCCESS);
        CHECK_RC(MPI_Win_unlock(right, win), MPI_ERR_RMA_RANGE);
        /* Attaching twice, detaching what is not attached. */
        CHECK_RC(MPI_Win_attach(win, buf, sizeof buf), MPI_ERR_RMA_ATTACH);
        CHECK_RC(MPI_Win_detach(win, &buf[1]), MPI_ERR_RMA_ATTACH);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Win_detach(win, buf) == MPI_SUCCESS);
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS);
    OK(rank, "detached and freed");
    MPI_Finalize();
    return 0;
}
