/* Datatypes, second part: MPI_Type_create_subarray (C and Fortran order),
   MPI_Type_create_hindexed_block, MPI_Type_get_envelope / MPI_Type_get_contents, type names,
   MPI_Type_match_size, the _x extent calls and MPI_Get_elements_x, the MPI-1 legacy calls
   (MPI_Address, MPI_Type_extent/lb/ub/hvector/hindexed/struct, MPI_Errhandler_*), and info on
   communicators (MPI_Comm_set_info/get_info, MPI_Info_get_string, MPI_Info_create_env). */
#include "common.h"

static int rank, n;

/* The process's peak resident memory in KiB (VmHWM), or 0 where /proc does not say. */
static long peak_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) v = atol(line + 6);
    fclose(f);
    return v;
}

static void envelope(const char *what, MPI_Datatype t) {
    int ni, na, nt, comb;
    CHECK(MPI_Type_get_envelope(t, &ni, &na, &nt, &comb) == MPI_SUCCESS);
    char line[400];
    int at = snprintf(line, sizeof line, "%s: combiner %d, %d ints, %d aints, %d types", what, comb, ni, na, nt);
    if (comb != MPI_COMBINER_NAMED) {
        int ints[64];
        MPI_Aint aints[64];
        MPI_Datatype types[16];
        CHECK(ni <= 64 && na <= 64 && nt <= 16);
        CHECK(MPI_Type_get_contents(t, ni, na, nt, ints, aints, types) == MPI_SUCCESS);
        at += snprintf(line + at, sizeof line - at, " [");
        for (int i = 0; i < ni; i++) at += snprintf(line + at, sizeof line - at, " %d", ints[i]);
        at += snprintf(line + at, sizeof line - at, " |");
        for (int i = 0; i < na; i++) at += snprintf(line + at, sizeof line - at, " %ld", (long)aints[i]);
        at += snprintf(line + at, sizeof line - at, " |");
        for (int i = 0; i < nt; i++) {
            int tni, tna, tnt, tc;
            MPI_Type_get_envelope(types[i], &tni, &tna, &tnt, &tc);
            if (tc == MPI_COMBINER_NAMED) {
                char name[MPI_MAX_OBJECT_NAME];
                int len;
                MPI_Type_get_name(types[i], name, &len);
                at += snprintf(line + at, sizeof line - at, " %s", name);
            } else {
                at += snprintf(line + at, sizeof line - at, " derived(%d)", tc);
                MPI_Type_free(&types[i]);
            }
        }
        snprintf(line + at, sizeof line - at, " ]");
    }
    OK(rank, "%s", line);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    MPI_Aint lb, ext;

    /* Subarray, C order: a 3x2 block at (1, 2) of a 4x5 int array. */
    int sizes[2] = {4, 5}, subs[2] = {3, 2}, starts[2] = {1, 2};
    MPI_Datatype sub, subf;
    CHECK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub) == MPI_SUCCESS);
    MPI_Type_commit(&sub);
    int a[20], b[20], sz;
    for (int i = 0; i < 20; i++) a[i] = 100 * rank + i;
    MPI_Type_size(sub, &sz);
    MPI_Type_get_extent(sub, &lb, &ext);
    OK(rank, "subarray C: size %d lb %ld extent %ld", sz, (long)lb, (long)ext);
    for (int i = 0; i < 20; i++) b[i] = -1;
    MPI_Sendrecv(a, 1, sub, next, 1, b, 1, sub, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    char line[300];
    int at = 0;
    for (int i = 0; i < 20; i++) at += snprintf(line + at, sizeof line - at, " %d", b[i]);
    OK(rank, "subarray C received:%s", line);
    /* Fortran order: the same numbers describe a 4x5 array whose first index runs fastest. */
    CHECK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_INT, &subf) == MPI_SUCCESS);
    MPI_Type_commit(&subf);
    for (int i = 0; i < 20; i++) b[i] = -1;
    MPI_Sendrecv(a, 1, subf, next, 2, b, 1, subf, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    at = 0;
    for (int i = 0; i < 20; i++) at += snprintf(line + at, sizeof line - at, " %d", b[i]);
    OK(rank, "subarray Fortran received:%s", line);
    envelope("subarray C", sub);
    envelope("subarray Fortran", subf);
    /* (A subarray outside its array is erroneous too, but MPICH does not check it.) */
    MPI_Datatype bad;
    CHECK_RC(MPI_Type_create_subarray(2, sizes, subs, starts, 99, MPI_INT, &bad), MPI_ERR_ARG);
    CHECK_RC(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_DATATYPE_NULL, &bad), MPI_ERR_TYPE);

    /* darray: a 5x7 int array over a 2x2 grid, block (default) by cyclic(2), C and Fortran
       order; every grid rank's part is built here (no communication). */
    int gsz[2] = {5, 7}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
        darg[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, psz[2] = {2, 2};
    int big[35];
    for (int i = 0; i < 35; i++) big[i] = i;
    for (int ord = 0; ord < 2; ord++)
        for (int g = 0; g < 4; g++) {
            MPI_Datatype da;
            CHECK(MPI_Type_create_darray(4, g, 2, gsz, dist, darg, psz, ord ? MPI_ORDER_FORTRAN : MPI_ORDER_C,
                                         MPI_INT, &da) == MPI_SUCCESS);
            MPI_Type_commit(&da);
            int packed[35], psize, ppos = 0;
            MPI_Type_size(da, &psize);
            MPI_Type_get_extent(da, &lb, &ext);
            MPI_Pack(big, 1, da, packed, sizeof packed, &ppos, MPI_COMM_WORLD);
            at = 0;
            for (int i = 0; i < psize / 4; i++) at += snprintf(line + at, sizeof line - at, " %d", packed[i]);
            OK(rank, "darray %s, grid process %d, extent %ld:%s", ord ? "F" : "C", g, (long)ext, line);
            if (g == 3 && ord == 0) envelope("darray", da);
            MPI_Type_free(&da);
        }
    /* (A grid that does not have `size` processes is erroneous; MPICH crashes on it.) */

    /* hindexed_block: two doubles at byte 0 and 32, twice. */
    MPI_Aint hd[2] = {0, 32};
    MPI_Datatype hb;
    CHECK(MPI_Type_create_hindexed_block(2, 2, hd, MPI_DOUBLE, &hb) == MPI_SUCCESS);
    MPI_Type_commit(&hb);
    MPI_Type_size(hb, &sz);
    MPI_Type_get_extent(hb, &lb, &ext);
    double d[6], e[6];
    for (int i = 0; i < 6; i++) { d[i] = rank + i / 10.0; e[i] = -1; }
    MPI_Sendrecv(d, 1, hb, next, 3, e, 1, hb, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    OK(rank, "hindexed_block: size %d extent %ld got %.1f %.1f %.1f %.1f %.1f %.1f", sz, (long)ext,
       e[0], e[1], e[2], e[3], e[4], e[5]);
    envelope("hindexed_block", hb);
    CHECK_RC(MPI_Type_create_hindexed_block(-1, 2, hd, MPI_DOUBLE, &bad), MPI_ERR_COUNT);

    /* Envelopes and contents of the other constructors. */
    MPI_Datatype v, hv, ix, hx, ib, st, rs, dp, ct;
    int bl[2] = {1, 2}, di[2] = {0, 3};
    MPI_Aint da[2] = {0, 16};
    MPI_Datatype ts[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Type_contiguous(3, MPI_INT, &ct);
    MPI_Type_vector(2, 3, 4, MPI_INT, &v);
    MPI_Type_create_hvector(2, 1, 24, MPI_SHORT, &hv);
    MPI_Type_indexed(2, bl, di, MPI_INT, &ix);
    MPI_Type_create_hindexed(2, bl, da, MPI_FLOAT, &hx);
    MPI_Type_create_indexed_block(2, 2, di, MPI_CHAR, &ib);
    MPI_Type_create_struct(2, bl, da, ts, &st);
    MPI_Type_create_resized(v, -4, 64, &rs);
    MPI_Type_dup(st, &dp);
    MPI_Type_commit(&v);
    envelope("named", MPI_INT);
    envelope("contiguous", ct);
    envelope("vector", v);
    envelope("hvector", hv);
    envelope("indexed", ix);
    envelope("hindexed", hx);
    envelope("indexed_block", ib);
    envelope("struct", st);
    envelope("resized", rs);
    envelope("dup", dp);
    int ints[4];
    CHECK_RC(MPI_Type_get_contents(MPI_INT, 0, 0, 0, ints, NULL, NULL), MPI_ERR_TYPE);
    /* Arrays too short: an error (its class differs: MPI_ERR_ARG here, MPI_ERR_OTHER on MPICH). */
    CHECK(MPI_Type_get_contents(v, 1, 0, 1, ints, NULL, ts) != MPI_SUCCESS);

    /* Names. */
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Datatype named[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR, MPI_BYTE, MPI_UNSIGNED_LONG, MPI_DOUBLE_INT,
                            MPI_INT64_T, MPI_C_DOUBLE_COMPLEX, MPI_LONG_LONG, MPI_PACKED};
    at = 0;
    for (int i = 0; i < (int)(sizeof named / sizeof named[0]); i++) {
        CHECK(MPI_Type_get_name(named[i], name, &len) == MPI_SUCCESS && len == (int)strlen(name));
        at += snprintf(line + at, sizeof line - at, " %s", name);
    }
    OK(rank, "names:%s", line);
    CHECK(MPI_Type_get_name(v, name, &len) == MPI_SUCCESS);
    OK(rank, "derived name before: '%s' (%d)", name, len);
    CHECK(MPI_Type_set_name(v, "my vector") == MPI_SUCCESS);
    CHECK(MPI_Type_get_name(v, name, &len) == MPI_SUCCESS);
    OK(rank, "derived name after: '%s' (%d)", name, len);
    CHECK_RC(MPI_Type_set_name(MPI_DATATYPE_NULL, "x"), MPI_ERR_TYPE);

    /* MPI_Type_match_size. */
    MPI_Datatype m;
    at = 0;
    int classes[3] = {MPI_TYPECLASS_INTEGER, MPI_TYPECLASS_REAL, MPI_TYPECLASS_COMPLEX};
    int sizes_i[3][3] = {{1, 4, 8}, {4, 8, 0}, {8, 16, 0}};
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 3 && sizes_i[c][k]; k++) {
            CHECK(MPI_Type_match_size(classes[c], sizes_i[c][k], &m) == MPI_SUCCESS);
            MPI_Type_size(m, &sz);
            CHECK(sz == sizes_i[c][k]);
            MPI_Type_get_name(m, name, &len);
            at += snprintf(line + at, sizeof line - at, " %s", name);
        }
    OK(rank, "match_size:%s", line);
    CHECK_RC(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 3, &m), MPI_ERR_ARG);
    CHECK_RC(MPI_Type_match_size(99, 4, &m), MPI_ERR_ARG);

    /* _x calls. */
    MPI_Count clb, cext, cel;
    CHECK(MPI_Type_get_extent_x(rs, &clb, &cext) == MPI_SUCCESS);
    MPI_Count tlb, text;
    CHECK(MPI_Type_get_true_extent_x(rs, &tlb, &text) == MPI_SUCCESS);
    MPI_Status s;
    int six[6] = {1, 2, 3, 4, 5, 6}, r6[6];
    MPI_Sendrecv(six, 5, MPI_INT, next, 4, r6, 6, MPI_INT, prev, 4, MPI_COMM_WORLD, &s);
    CHECK(MPI_Get_elements_x(&s, v, &cel) == MPI_SUCCESS);
    OK(rank, "extent_x %lld %lld true %lld %lld elements_x %lld", (long long)clb, (long long)cext,
       (long long)tlb, (long long)text, (long long)cel);

    /* MPI-1 legacy calls. */
    MPI_Aint a0, a1;
    CHECK(MPI_Address(&a[0], &a0) == MPI_SUCCESS && MPI_Address(&a[3], &a1) == MPI_SUCCESS);
    MPI_Aint le, ll, lu;
    CHECK(MPI_Type_extent(rs, &le) == MPI_SUCCESS && MPI_Type_lb(rs, &ll) == MPI_SUCCESS &&
          MPI_Type_ub(rs, &lu) == MPI_SUCCESS);
    MPI_Datatype lhv, lhx, lst;
    CHECK(MPI_Type_hvector(2, 1, 12, MPI_INT, &lhv) == MPI_SUCCESS);
    CHECK(MPI_Type_hindexed(2, bl, da, MPI_INT, &lhx) == MPI_SUCCESS);
    CHECK(MPI_Type_struct(2, bl, da, ts, &lst) == MPI_SUCCESS);
    int s1, s2, s3;
    MPI_Type_size(lhv, &s1);
    MPI_Type_size(lhx, &s2);
    MPI_Type_size(lst, &s3);
    OK(rank, "legacy: address diff %ld extent %ld lb %ld ub %ld sizes %d %d %d", (long)(a1 - a0),
       (long)le, (long)ll, (long)lu, s1, s2, s3);
    envelope("legacy hvector", lhv);
    envelope("legacy struct", lst);
    MPI_Errhandler eh, got;
    CHECK(MPI_Errhandler_get(MPI_COMM_WORLD, &got) == MPI_SUCCESS && got == MPI_ERRORS_RETURN);
    CHECK(MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_get(MPI_COMM_WORLD, &got) == MPI_SUCCESS && got == MPI_ERRORS_ARE_FATAL);
    CHECK(MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
    CHECK(MPI_Errhandler_create(NULL, &eh) != MPI_SUCCESS || eh != MPI_ERRHANDLER_NULL);
    OK(rank, "legacy errhandler calls");

    /* external32: big-endian, MPI_LONG in 4 bytes; a round trip through a vector of doubles. */
    unsigned char ext32[64];
    MPI_Aint pos = 0, esz;
    int iv[2] = {1, 0x01020304 + rank};
    long lv = -5;
    short sv[2] = {0x0102, -2};
    double dv = 1.5;
    CHECK(MPI_Pack_external("external32", iv, 2, MPI_INT, ext32, sizeof ext32, &pos) == MPI_SUCCESS);
    CHECK(MPI_Pack_external("external32", &lv, 1, MPI_LONG, ext32, sizeof ext32, &pos) == MPI_SUCCESS);
    CHECK(MPI_Pack_external("external32", sv, 2, MPI_SHORT, ext32, sizeof ext32, &pos) == MPI_SUCCESS);
    CHECK(MPI_Pack_external("external32", &dv, 1, MPI_DOUBLE, ext32, sizeof ext32, &pos) == MPI_SUCCESS);
    at = 0;
    for (int i = 0; i < pos; i++) at += snprintf(line + at, sizeof line - at, "%02x", ext32[i]);
    OK(rank, "external32: %ld bytes %s", (long)pos, line);
    MPI_Aint upos = 0;
    int iv2[2];
    long lv2;
    short sv2[2];
    double dv2;
    CHECK(MPI_Unpack_external("external32", ext32, pos, &upos, iv2, 2, MPI_INT) == MPI_SUCCESS);
    CHECK(MPI_Unpack_external("external32", ext32, pos, &upos, &lv2, 1, MPI_LONG) == MPI_SUCCESS);
    CHECK(MPI_Unpack_external("external32", ext32, pos, &upos, sv2, 2, MPI_SHORT) == MPI_SUCCESS);
    CHECK(MPI_Unpack_external("external32", ext32, pos, &upos, &dv2, 1, MPI_DOUBLE) == MPI_SUCCESS);
    CHECK(upos == pos && iv2[0] == iv[0] && iv2[1] == iv[1] && lv2 == lv && sv2[0] == sv[0] &&
          sv2[1] == sv[1] && dv2 == dv);
    MPI_Datatype dvec;
    MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &dvec);
    MPI_Type_commit(&dvec);
    double four[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
    CHECK(MPI_Pack_external_size("external32", 2, dvec, &esz) == MPI_SUCCESS);
    pos = 0;
    CHECK(MPI_Pack_external("external32", four, 1, dvec, ext32, sizeof ext32, &pos) == MPI_SUCCESS);
    upos = 0;
    CHECK(MPI_Unpack_external("external32", ext32, pos, &upos, back, 1, dvec) == MPI_SUCCESS);
    OK(rank, "external32 vector: size of 2 %ld, packed %ld, back %g %g %g %g", (long)esz, (long)pos,
       back[0], back[1], back[2], back[3]);
    MPI_Type_free(&dvec);

    /* Info on communicators. */
    MPI_Info info, out;
    MPI_Comm dup;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
    MPI_Info_set(info, "my_key", "my value");
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    CHECK(MPI_Comm_set_info(dup, info) == MPI_SUCCESS);
    CHECK(MPI_Comm_get_info(dup, &out) == MPI_SUCCESS && out != MPI_INFO_NULL);
    char val[64];
    int buflen = sizeof val, flag;
    CHECK(MPI_Info_get_string(out, "mpi_assert_no_any_tag", &buflen, val, &flag) == MPI_SUCCESS);
    OK(rank, "comm info: assert flag %d value '%s' length %d", flag, flag ? val : "", flag ? buflen : -1);
    /* A key the library does not know is ignored, not given back (MPICH's comm_info). */
    buflen = sizeof val;
    CHECK(MPI_Info_get_string(out, "my_key", &buflen, val, &flag) == MPI_SUCCESS);
    OK(rank, "comm info: unknown key given back %d", flag);
    buflen = 3;
    CHECK(MPI_Info_get_string(info, "my_key", &buflen, val, &flag) == MPI_SUCCESS);
    OK(rank, "get_string short buffer: flag %d length %d value '%s'", flag, buflen, val);
    buflen = sizeof val;
    CHECK(MPI_Info_get_string(info, "absent", &buflen, val, &flag) == MPI_SUCCESS && !flag);
    MPI_Info_free(&out);
    /* MPI_Comm_dup carries the hints over; MPI_Comm_dup_with_info takes the info given. */
    MPI_Comm dup2, dup3;
    MPI_Info other;
    MPI_Info_create(&other);
    MPI_Info_set(other, "mpi_assert_no_any_source", "true");
    MPI_Comm_dup(dup, &dup2);
    MPI_Comm_dup_with_info(dup, other, &dup3);
    int f2, f3, g3;
    MPI_Comm_get_info(dup2, &out);
    buflen = sizeof val;
    MPI_Info_get_string(out, "mpi_assert_no_any_tag", &buflen, val, &f2);
    MPI_Info_free(&out);
    MPI_Comm_get_info(dup3, &out);
    buflen = sizeof val;
    MPI_Info_get_string(out, "mpi_assert_no_any_tag", &buflen, val, &f3);
    buflen = sizeof val;
    MPI_Info_get_string(out, "mpi_assert_no_any_source", &buflen, val, &g3);
    MPI_Info_free(&out);
    /* (Whether dup_with_info keeps the old communicator's hints, f3, is not compared: the
       standard says it does not, MPICH 4.0 keeps them.) */
    (void)f3;
    OK(rank, "comm info: dup has the tag hint %d; dup_with_info has the source hint %d", f2, g3);
    MPI_Info_free(&other);
    MPI_Comm_free(&dup2);
    MPI_Comm_free(&dup3);
    CHECK_RC(MPI_Comm_set_info(MPI_COMM_NULL, info), MPI_ERR_COMM);
    CHECK_RC(MPI_Comm_get_info(dup, NULL), MPI_ERR_ARG);
    MPI_Info env;
    CHECK(MPI_Info_create_env(argc, argv, &env) == MPI_SUCCESS && env != MPI_INFO_NULL);
    /* Which keys it holds is the implementation's choice (none on MPICH). */
    int nkeys;
    CHECK(MPI_Info_get_nkeys(env, &nkeys) == MPI_SUCCESS && nkeys >= 0);
    buflen = sizeof val;
    CHECK(MPI_Info_get_string(env, "command", &buflen, val, &flag) == MPI_SUCCESS);
    CHECK(!flag || strstr(val, "types2") != NULL);
    OK(rank, "info_create_env");
    MPI_Info_free(&env);
    MPI_Info_free(&info);
    MPI_Comm_free(&dup);

    MPI_Type_free(&sub);
    MPI_Type_free(&subf);
    MPI_Type_free(&hb);

    /* A darray of a 256 x 1024 x 1024 int array (1 GiB) over the ranks: the type costs its
       rows, not its 2^28 elements (one block per element took 32 bytes each, 2 GiB per rank
       at 4 ranks; ROMIO's large_array has 4 times as many). Peak memory grows by less than
       64 MiB. */
    {
        int gs[3] = {256, 1024, 1024}, ps[3] = {0, 0, 1};
        int dist[3] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
        int darg[3] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG};
        CHECK(MPI_Dims_create(n, 2, ps) == MPI_SUCCESS);
        long before = peak_kb();
        MPI_Datatype big;
        CHECK(MPI_Type_create_darray(n, rank, 3, gs, dist, darg, ps, MPI_ORDER_C, MPI_INT, &big) == MPI_SUCCESS);
        CHECK(MPI_Type_commit(&big) == MPI_SUCCESS);
        MPI_Count bsize;
        CHECK(MPI_Type_size_x(big, &bsize) == MPI_SUCCESS);
        long grew = peak_kb() - before;
        CHECK(grew < 64 * 1024);
        OK(rank, "darray of 1 GiB over %d ranks: %lld bytes here", n, (long long)bsize);
        MPI_Type_free(&big);
    }
    MPI_Finalize();
    return 0;
}
