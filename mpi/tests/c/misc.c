/* User error handlers, MPI_Info, communicator names, MPI_Comm_split_type, MPI_Get_address,
   MPI_Comm_test_inter, MPI_Topo_test. */
#include "common.h"

static int calls = 0, last_class = -1;
static MPI_Comm last_comm = MPI_COMM_NULL;

static void handler(MPI_Comm *comm, int *code, ...) {
    calls++;
    last_comm = *comm;
    MPI_Error_class(*code, &last_class);
}

int main(int argc, char **argv) {
    int rank, size, x = 0, flag;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Errhandler eh, got;
    CHECK(MPI_Comm_create_errhandler(handler, &eh) == MPI_SUCCESS);
    CHECK(MPI_Comm_set_errhandler(dup, eh) == MPI_SUCCESS);
    CHECK(MPI_Comm_get_errhandler(dup, &got) == MPI_SUCCESS && got == eh);
    int rc = MPI_Send(&x, 1, MPI_INT, size + 2, 0, dup);
    int rclass = -1;
    MPI_Error_class(rc, &rclass);
    CHECK(calls == 1 && last_class == MPI_ERR_RANK && rclass == MPI_ERR_RANK && last_comm == dup);
    CHECK(MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER) == MPI_SUCCESS);
    CHECK(calls == 2 && last_class == MPI_ERR_OTHER);
    CHECK(MPI_Errhandler_free(&eh) == MPI_SUCCESS && eh == MPI_ERRHANDLER_NULL);
    OK(rank, "user error handler ok");

    MPI_Info info, copy;
    char val[64];
    int nkeys, vlen;
    CHECK(MPI_Info_create(&info) == MPI_SUCCESS);
    CHECK(MPI_Info_set(info, "color", "blue") == MPI_SUCCESS);
    CHECK(MPI_Info_set(info, "size", "large") == MPI_SUCCESS);
    CHECK(MPI_Info_set(info, "color", "red") == MPI_SUCCESS);
    CHECK(MPI_Info_get_nkeys(info, &nkeys) == MPI_SUCCESS && nkeys == 2);
    CHECK(MPI_Info_get(info, "color", sizeof val - 1, val, &flag) == MPI_SUCCESS && flag && strcmp(val, "red") == 0);
    CHECK(MPI_Info_get_valuelen(info, "size", &vlen, &flag) == MPI_SUCCESS && flag && vlen == 5);
    CHECK(MPI_Info_get(info, "none", sizeof val - 1, val, &flag) == MPI_SUCCESS && !flag);
    char key[MPI_MAX_INFO_KEY + 1];
    CHECK(MPI_Info_get_nthkey(info, 1, key) == MPI_SUCCESS && strcmp(key, "size") == 0);
    CHECK(MPI_Info_dup(info, &copy) == MPI_SUCCESS);
    CHECK(MPI_Info_delete(info, "color") == MPI_SUCCESS);
    CHECK(MPI_Info_get_nkeys(info, &nkeys) == MPI_SUCCESS && nkeys == 1);
    CHECK(MPI_Info_get_nkeys(copy, &nkeys) == MPI_SUCCESS && nkeys == 2);
    CHECK(MPI_Info_free(&info) == MPI_SUCCESS && info == MPI_INFO_NULL);
    CHECK(MPI_Info_free(&copy) == MPI_SUCCESS);
    OK(rank, "info ok");

    char name[MPI_MAX_OBJECT_NAME];
    int len;
    CHECK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len) == MPI_SUCCESS && strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14);
    CHECK(MPI_Comm_set_name(dup, "my dup") == MPI_SUCCESS);
    CHECK(MPI_Comm_get_name(dup, name, &len) == MPI_SUCCESS && strcmp(name, "my dup") == 0 && len == 6);

    MPI_Comm node;
    CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node) == MPI_SUCCESS);
    int nsize, nrank;
    MPI_Comm_size(node, &nsize);
    MPI_Comm_rank(node, &nrank);
    CHECK(nsize == size && nrank == rank);
    MPI_Comm none;
    CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &none) == MPI_SUCCESS && none == MPI_COMM_NULL);
    MPI_Comm_free(&node);

    int arr[4];
    MPI_Aint a0, a3;
    CHECK(MPI_Get_address(&arr[0], &a0) == MPI_SUCCESS && MPI_Get_address(&arr[3], &a3) == MPI_SUCCESS);
    CHECK(a3 - a0 == 3 * (MPI_Aint)sizeof(int) && MPI_Aint_diff(a3, a0) == 3 * (MPI_Aint)sizeof(int));
    CHECK(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag) == MPI_SUCCESS && flag == 0);
    int topo;
    CHECK(MPI_Topo_test(MPI_COMM_WORLD, &topo) == MPI_SUCCESS && topo == MPI_UNDEFINED);
    MPI_Comm_free(&dup);
    OK(rank, "misc ok");
    MPI_Finalize();
    return 0;
}
