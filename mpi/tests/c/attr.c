/* Attribute caching: keyvals, set/get/delete, copy callbacks on MPI_Comm_dup, delete callbacks
   on delete, overwrite, MPI_Comm_free and MPI_Finalize (MPI_COMM_SELF), the predefined copy
   functions, the MPI-1 names, and datatype attributes. */
#include "common.h"

static int deleted[8], copied[8];
static int wrank;

static int copy_fn(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)key;
    copied[*(int *)extra]++;
    *(void **)out = (void *)((char *)in + 1); /* a visibly different value */
    *flag = 1;
    return MPI_SUCCESS;
}

static int del_fn(MPI_Comm c, int key, void *val, void *extra) {
    (void)c; (void)key; (void)val;
    deleted[*(int *)extra]++;
    return MPI_SUCCESS;
}

static int failing_copy(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)key; (void)extra; (void)in; (void)out; (void)flag;
    return MPI_ERR_OTHER;
}

static int failing_del(MPI_Comm c, int key, void *val, void *extra) {
    (void)c; (void)key; (void)val; (void)extra;
    return MPI_ERR_OTHER;
}

static int self_del(MPI_Comm c, int key, void *val, void *extra) {
    (void)key; (void)val; (void)extra;
    /* Called by MPI_Finalize on MPI_COMM_SELF before anything is torn down. */
    int flag = 0;
    CHECK(c == MPI_COMM_SELF);
    MPI_Finalized(&flag);
    CHECK(!flag);
    OK(wrank, "self attribute deleted by MPI_Finalize");
    return MPI_SUCCESS;
}

static int type_copy(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag) {
    (void)t; (void)key; (void)extra;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int type_del(MPI_Datatype t, int key, void *val, void *extra) {
    (void)t; (void)key; (void)val;
    deleted[*(int *)extra]++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    static int ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int k0, k1, k2, k3;
    void *v;
    int flag;
    CHECK(MPI_Comm_create_keyval(copy_fn, del_fn, &k0, &ids[0]) == MPI_SUCCESS);
    CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, del_fn, &k1, &ids[1]) == MPI_SUCCESS);
    CHECK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k2, &ids[2]) == MPI_SUCCESS);
    CHECK(MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &k3, NULL) == MPI_SUCCESS);
    CHECK(k0 != k1 && k1 != k2 && k2 != k3);

    static char a0[4], a1[4], a2[4];
    /* Not set yet. */
    flag = 1;
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, k0, &v, &flag) == MPI_SUCCESS && !flag);
    CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, k0, a0) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, k1, a1) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, k2, a2) == MPI_SUCCESS);
    CHECK(MPI_Attr_put(MPI_COMM_WORLD, k3, (void *)42) == MPI_SUCCESS);
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, k0, &v, &flag) == MPI_SUCCESS && flag && v == a0);
    CHECK(MPI_Attr_get(MPI_COMM_WORLD, k3, &v, &flag) == MPI_SUCCESS && flag && v == (void *)42);
    /* Predefined attributes still answer. */
    int *tag_ub;
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag) == MPI_SUCCESS && flag);
    CHECK(*tag_ub >= 32767);
    int *appnum;
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag) == MPI_SUCCESS && flag && *appnum == 0);

    /* Overwrite runs the delete callback on the old value. */
    CHECK(MPI_Comm_set_attr(MPI_COMM_WORLD, k1, a2) == MPI_SUCCESS);
    CHECK(deleted[1] == 1);

    /* Dup: k0 copied by its callback, k1 not (NULL_COPY_FN), k2 copied as is (DUP_FN), k3 not. */
    MPI_Comm d;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d) == MPI_SUCCESS);
    CHECK(copied[0] == 1);
    CHECK(MPI_Comm_get_attr(d, k0, &v, &flag) == MPI_SUCCESS && flag && v == a0 + 1);
    CHECK(MPI_Comm_get_attr(d, k1, &v, &flag) == MPI_SUCCESS && !flag);
    CHECK(MPI_Comm_get_attr(d, k2, &v, &flag) == MPI_SUCCESS && flag && v == a2);
    CHECK(MPI_Comm_get_attr(d, k3, &v, &flag) == MPI_SUCCESS && !flag);
    /* Attributes of one communicator are its own. */
    CHECK(MPI_Comm_set_attr(d, k2, a0) == MPI_SUCCESS);
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, k2, &v, &flag) == MPI_SUCCESS && flag && v == a2);

    /* Free runs the delete callbacks of what is set (k0 on d). */
    CHECK(MPI_Comm_free(&d) == MPI_SUCCESS && d == MPI_COMM_NULL);
    CHECK(deleted[0] == 1);

    /* Delete. */
    CHECK(MPI_Comm_delete_attr(MPI_COMM_WORLD, k1) == MPI_SUCCESS);
    CHECK(deleted[1] == 2);
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, k1, &v, &flag) == MPI_SUCCESS && !flag);
    CHECK(MPI_Attr_delete(MPI_COMM_WORLD, k3) == MPI_SUCCESS);

    /* Freeing a keyval: the handle becomes invalid, attributes set stay until deleted. */
    int k0copy = k0;
    CHECK(MPI_Comm_free_keyval(&k0) == MPI_SUCCESS && k0 == MPI_KEYVAL_INVALID);
    CHECK(MPI_Comm_delete_attr(MPI_COMM_WORLD, k0copy) == MPI_SUCCESS && deleted[0] == 2);
    CHECK(MPI_Keyval_free(&k3) == MPI_SUCCESS && k3 == MPI_KEYVAL_INVALID);

    /* Errors. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_RC(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, a0), MPI_ERR_KEYVAL);
    CHECK_RC(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, a0), MPI_ERR_KEYVAL);
    CHECK_RC(MPI_Comm_free_keyval(&k0), MPI_ERR_KEYVAL);
    CHECK_RC(MPI_Comm_get_attr(MPI_COMM_NULL, k2, &v, &flag), MPI_ERR_COMM);
    int kf;
    CHECK(MPI_Comm_create_keyval(failing_copy, failing_del, &kf, NULL) == MPI_SUCCESS);
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_attr(d, kf, a0) == MPI_SUCCESS);
    MPI_Comm d2 = MPI_COMM_NULL;
    CHECK(MPI_Comm_dup(d, &d2) != MPI_SUCCESS);
    CHECK(MPI_Comm_delete_attr(d, kf) != MPI_SUCCESS);
    CHECK(MPI_Comm_get_attr(d, kf, &v, &flag) == MPI_SUCCESS && flag);
    MPI_Comm_free_keyval(&kf);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    /* Datatype attributes. */
    int tk;
    MPI_Datatype t, t2;
    CHECK(MPI_Type_create_keyval(type_copy, type_del, &tk, &ids[5]) == MPI_SUCCESS);
    MPI_Type_contiguous(2, MPI_INT, &t);
    MPI_Type_commit(&t);
    CHECK(MPI_Type_set_attr(t, tk, a1) == MPI_SUCCESS);
    CHECK(MPI_Type_get_attr(t, tk, &v, &flag) == MPI_SUCCESS && flag && v == a1);
    CHECK(MPI_Type_dup(t, &t2) == MPI_SUCCESS);
    CHECK(MPI_Type_get_attr(t2, tk, &v, &flag) == MPI_SUCCESS && flag && v == a1);
    CHECK(MPI_Type_delete_attr(t2, tk) == MPI_SUCCESS && deleted[5] == 1);
    CHECK(MPI_Type_get_attr(t2, tk, &v, &flag) == MPI_SUCCESS && !flag);
    /* (MPICH runs the delete callback once no duplicate refers to the type: free t2 first.) */
    CHECK(MPI_Type_free(&t2) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS && deleted[5] == 2);
    CHECK(MPI_Type_free_keyval(&tk) == MPI_SUCCESS && tk == MPI_KEYVAL_INVALID);

    /* MPI_Finalize deletes MPI_COMM_SELF's attributes first. */
    int ks;
    CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_del, &ks, NULL) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, ks, a0) == MPI_SUCCESS);
    OK(wrank, "attributes ok: copied %d deleted %d %d %d", copied[0], deleted[0], deleted[1], deleted[5]);
    MPI_Finalize();
    return 0;
}
