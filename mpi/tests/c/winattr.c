/* Window keyvals and attributes: MPI_Win_create_keyval/free_keyval, MPI_Win_set_attr/get_attr/
   delete_attr beside the predefined window attributes; the delete callback runs on
   MPI_Win_delete_attr, on overwriting and on MPI_Win_free, with the window, the keyval, the
   value and the extra state. */
#include "common.h"

static int deleted[8], ndeleted;
static MPI_Win last_win;
static int last_keyval;
static void *last_extra;

static int on_delete(MPI_Win win, int keyval, void *value, void *extra) {
    if (ndeleted < 8) deleted[ndeleted] = (int)(long)value;
    ndeleted++;
    last_win = win;
    last_keyval = keyval;
    last_extra = extra;
    return MPI_SUCCESS;
}

static int failing_delete(MPI_Win win, int keyval, void *value, void *extra) {
    (void)win;
    (void)keyval;
    (void)value;
    (void)extra;
    return MPI_ERR_OTHER;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int mem[4];
    MPI_Win win;
    CHECK(MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    static int extra_a, extra_b;
    int ka, kb;
    CHECK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, on_delete, &ka, &extra_a) == MPI_SUCCESS);
    CHECK(MPI_Win_create_keyval(MPI_WIN_DUP_FN, MPI_WIN_NULL_DELETE_FN, &kb, &extra_b) == MPI_SUCCESS);
    CHECK(ka != kb && ka != MPI_KEYVAL_INVALID);

    void *v;
    int flag = -1;
    CHECK(MPI_Win_get_attr(win, ka, &v, &flag) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_Win_set_attr(win, ka, (void *)(long)(100 + rank)) == MPI_SUCCESS);
    CHECK(MPI_Win_set_attr(win, kb, (void *)(long)7) == MPI_SUCCESS);
    CHECK(MPI_Win_get_attr(win, ka, &v, &flag) == MPI_SUCCESS && flag == 1 && (long)v == 100 + rank);
    CHECK(MPI_Win_get_attr(win, kb, &v, &flag) == MPI_SUCCESS && flag == 1 && (long)v == 7);
    /* The predefined attributes are still there. */
    void *base;
    MPI_Aint *wsize;
    CHECK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag) == MPI_SUCCESS && flag == 1 && base == mem);
    CHECK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &wsize, &flag) == MPI_SUCCESS && flag == 1 && *wsize == sizeof mem);
    CHECK(ndeleted == 0);
    OK(rank, "window attributes set and read");

    /* Overwriting runs the delete callback with the old value; deleting with the current. */
    CHECK(MPI_Win_set_attr(win, ka, (void *)(long)(200 + rank)) == MPI_SUCCESS);
    CHECK(ndeleted == 1 && deleted[0] == 100 + rank);
    CHECK(last_win == win && last_keyval == ka && last_extra == &extra_a);
    CHECK(MPI_Win_delete_attr(win, ka) == MPI_SUCCESS);
    CHECK(ndeleted == 2 && deleted[1] == 200 + rank);
    CHECK(MPI_Win_get_attr(win, ka, &v, &flag) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_Win_delete_attr(win, kb) == MPI_SUCCESS);
    CHECK(MPI_Win_get_attr(win, kb, &v, &flag) == MPI_SUCCESS && flag == 0);
    CHECK(ndeleted == 2);
    OK(rank, "delete callback on overwrite and delete");

    /* Keyvals of another kind and predefined keyvals are refused. */
    int kc;
    CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &kc, NULL) == MPI_SUCCESS);
    CHECK_RC(MPI_Win_set_attr(win, kc, (void *)1), MPI_ERR_KEYVAL);
    CHECK_RC(MPI_Comm_set_attr(MPI_COMM_WORLD, ka, (void *)1), MPI_ERR_KEYVAL);
    CHECK(MPI_Comm_free_keyval(&kc) == MPI_SUCCESS);
    OK(rank, "keyvals of another kind refused");

    /* A failing delete callback fails the delete; the attribute stays. */
    int kf;
    CHECK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, failing_delete, &kf, NULL) == MPI_SUCCESS);
    CHECK(MPI_Win_set_attr(win, kf, (void *)5) == MPI_SUCCESS);
    CHECK(MPI_Win_delete_attr(win, kf) != MPI_SUCCESS);
    CHECK(MPI_Win_get_attr(win, kf, &v, &flag) == MPI_SUCCESS && flag == 1 && (long)v == 5);
    OK(rank, "failing delete callback fails the delete");

    /* MPI_Win_free runs the delete callback of the attributes left; a freed keyval is
       MPI_KEYVAL_INVALID and the attribute set with it is still deleted at the free. */
    MPI_Win win2;
    CHECK(MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win2) == MPI_SUCCESS);
    CHECK(MPI_Win_set_attr(win2, ka, (void *)(long)(300 + rank)) == MPI_SUCCESS);
    CHECK(MPI_Win_free_keyval(&ka) == MPI_SUCCESS && ka == MPI_KEYVAL_INVALID);
    CHECK(ndeleted == 2);
    MPI_Win keep = win2;
    CHECK(MPI_Win_free(&win2) == MPI_SUCCESS && win2 == MPI_WIN_NULL);
    CHECK(ndeleted == 3 && deleted[2] == 300 + rank && last_win == keep);
    CHECK(MPI_Win_free_keyval(&kb) == MPI_SUCCESS);
    OK(rank, "delete callback on MPI_Win_free");

    /* The window with the failing attribute: MPI_Win_free reports the callback's failure and
       leaves the window. */
    int rc = MPI_Win_free(&win);
    CHECK(rc != MPI_SUCCESS);
    /* The attribute is gone with the failed free; a second free frees the window. */
    CHECK(MPI_Win_free(&win) == MPI_SUCCESS && win == MPI_WIN_NULL);
    CHECK(MPI_Win_free_keyval(&kf) == MPI_SUCCESS);
    OK(rank, "failing delete callback fails MPI_Win_free");
    MPI_Finalize();
    return 0;
}
