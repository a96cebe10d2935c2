/* The MPI_Count forms of external32 packing (MPI_Pack_external_c, MPI_Unpack_external_c,
   MPI_Pack_external_size_c), of MPI_Type_create_subarray_c/_darray_c and of
   MPI_Type_get_envelope_c/_contents_c, each against its int form. On viaduct, a count past
   32 bits is MPI_ERR_COUNT. */
#include "common.h"

static void same_type(MPI_Datatype a, MPI_Datatype b) {
    int sa, sb;
    MPI_Aint la, ea, lb, eb;
    CHECK(MPI_Type_size(a, &sa) == MPI_SUCCESS && MPI_Type_size(b, &sb) == MPI_SUCCESS);
    CHECK(MPI_Type_get_extent(a, &la, &ea) == MPI_SUCCESS);
    CHECK(MPI_Type_get_extent(b, &lb, &eb) == MPI_SUCCESS);
    CHECK(sa == sb && la == lb && ea == eb);
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    CHECK(MPI_Get_library_version(lib, &liblen) == MPI_SUCCESS);
    int on_viaduct = strstr(lib, "viaduct") != NULL;

    /* external32 */
    int in[3] = {1 + rank, -2, 0x01020304}, out[3] = {0, 0, 0};
    char p1[64], p2[64];
    MPI_Aint size_i = 0, pos_i = 0;
    MPI_Count size_c = 0, pos_c = 0, upos = 0;
    CHECK(MPI_Pack_external_size("external32", 3, MPI_INT, &size_i) == MPI_SUCCESS);
    CHECK(MPI_Pack_external_size_c("external32", 3, MPI_INT, &size_c) == MPI_SUCCESS);
    CHECK(size_i == 12 && size_c == 12);
    CHECK(MPI_Pack_external("external32", in, 3, MPI_INT, p1, sizeof p1, &pos_i) == MPI_SUCCESS);
    CHECK(MPI_Pack_external_c("external32", in, 3, MPI_INT, p2, sizeof p2, &pos_c) == MPI_SUCCESS);
    CHECK(pos_i == 12 && pos_c == 12 && memcmp(p1, p2, 12) == 0);
    CHECK((unsigned char)p2[8] == 1 && (unsigned char)p2[11] == 4); /* big-endian */
    CHECK(MPI_Unpack_external_c("external32", p2, pos_c, &upos, out, 3, MPI_INT) == MPI_SUCCESS);
    CHECK(upos == 12 && out[0] == 1 + rank && out[1] == -2 && out[2] == 0x01020304);
    OK(rank, "external32 _c forms: %lld bytes", (long long)pos_c);

    /* subarray and darray */
    MPI_Datatype a, b;
    int sz[2] = {4, 6}, sub[2] = {2, 3}, st[2] = {1, 2};
    MPI_Count szc[2] = {4, 6}, subc[2] = {2, 3}, stc[2] = {1, 2};
    CHECK(MPI_Type_create_subarray(2, sz, sub, st, MPI_ORDER_C, MPI_INT, &a) == MPI_SUCCESS);
    CHECK(MPI_Type_create_subarray_c(2, szc, subc, stc, MPI_ORDER_C, MPI_INT, &b) == MPI_SUCCESS);
    same_type(a, b);
    MPI_Type_free(&a);
    MPI_Type_free(&b);
    int gs[1] = {12 * n}, dist[1] = {MPI_DISTRIBUTE_BLOCK}, darg[1] = {MPI_DISTRIBUTE_DFLT_DARG}, ps[1] = {n};
    MPI_Count gsc[1] = {12 * n};
    CHECK(MPI_Type_create_darray(n, rank, 1, gs, dist, darg, ps, MPI_ORDER_C, MPI_DOUBLE, &a) == MPI_SUCCESS);
    CHECK(MPI_Type_create_darray_c(n, rank, 1, gsc, dist, darg, ps, MPI_ORDER_C, MPI_DOUBLE, &b) == MPI_SUCCESS);
    same_type(a, b);
    int dsize;
    MPI_Type_size(b, &dsize);
    MPI_Type_free(&a);
    MPI_Type_free(&b);
    OK(rank, "subarray and darray _c forms: darray of %d bytes", dsize);

    /* envelope and contents */
    MPI_Datatype v;
    CHECK(MPI_Type_vector(3, 2, 5, MPI_INT, &v) == MPI_SUCCESS);
    MPI_Count ni = -1, na = -1, nl = -1, nd = -1;
    int comb = -1;
    CHECK(MPI_Type_get_envelope_c(v, &ni, &na, &nl, &nd, &comb) == MPI_SUCCESS);
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nl == 0 && nd == 1);
    int ints[3] = {0, 0, 0};
    MPI_Aint addrs[1];
    MPI_Count larges[1];
    MPI_Datatype types[1] = {MPI_DATATYPE_NULL};
    CHECK(MPI_Type_get_contents_c(v, 3, 0, 0, 1, ints, addrs, larges, types) == MPI_SUCCESS);
    CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == 5 && types[0] == MPI_INT);
    CHECK(MPI_Type_get_envelope_c(MPI_INT, &ni, &na, &nl, &nd, &comb) == MPI_SUCCESS);
    CHECK(comb == MPI_COMBINER_NAMED && ni == 0 && nd == 0);
    MPI_Type_free(&v);
    OK(rank, "envelope and contents _c forms ok");

    if (on_viaduct) {
        CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
        MPI_Count big = (MPI_Count)1 << 33, pos = 0;
        MPI_Count bigs[2] = {big, 6};
        CHECK_RC(MPI_Pack_external_size_c("external32", big, MPI_INT, &size_c), MPI_ERR_COUNT);
        CHECK_RC(MPI_Pack_external_c("external32", in, big, MPI_INT, p2, sizeof p2, &pos), MPI_ERR_COUNT);
        CHECK_RC(MPI_Unpack_external_c("external32", p2, 12, &pos, out, big, MPI_INT), MPI_ERR_COUNT);
        CHECK_RC(MPI_Type_create_subarray_c(2, bigs, subc, stc, MPI_ORDER_C, MPI_INT, &a), MPI_ERR_COUNT);
        CHECK_RC(MPI_Type_create_darray_c(n, rank, 1, bigs, dist, darg, ps, MPI_ORDER_C, MPI_INT, &a), MPI_ERR_COUNT);
        CHECK_RC(MPI_Type_get_envelope_c(MPI_INT, NULL, &na, &nl, &nd, &comb), MPI_ERR_ARG);
        CHECK_RC(MPI_Pack_external_c("external64", in, 3, MPI_INT, p2, sizeof p2, &pos), MPI_ERR_UNSUPPORTED_DATAREP);
    }
    OK(rank, "wrong use checked");
    MPI_Finalize();
    return 0;
}
