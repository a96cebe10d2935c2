/* Intercommunicators: COMM_WORLD split into evens and odds, MPI_Intercomm_create over
   COMM_WORLD, local and remote size and group, point-to-point both ways (remote ranks,
   MPI_ANY_SOURCE, send modes, nonblocking, probe), MPI_Intercomm_merge and an allreduce on the
   merged communicator, the intercommunicator collectives (MPI_ROOT / MPI_PROC_NULL at the
   roots), the calls an intercommunicator may not take (MPI_ERR_COMM), dup and free.
   Needs at least 2 ranks. */
#include "common.h"

int main(int argc, char **argv) {
    int wrank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    CHECK(n >= 2);
    int color = wrank % 2;
    MPI_Comm local, inter;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, wrank, &local) == MPI_SUCCESS);
    CHECK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color == 0 ? 1 : 0, 99, &inter) ==
          MPI_SUCCESS);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);

    int flag, lsize, lrank, rsize;
    CHECK(MPI_Comm_test_inter(inter, &flag) == MPI_SUCCESS);
    CHECK(MPI_Comm_size(inter, &lsize) == MPI_SUCCESS);
    CHECK(MPI_Comm_rank(inter, &lrank) == MPI_SUCCESS);
    CHECK(MPI_Comm_remote_size(inter, &rsize) == MPI_SUCCESS);
    OK(wrank, "inter %d local %d of %d remote size %d", flag, lrank, lsize, rsize);
    CHECK(MPI_Comm_test_inter(local, &flag) == MPI_SUCCESS && !flag);

    /* The groups, as world ranks. */
    MPI_Group world, lg, rg;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    CHECK(MPI_Comm_group(inter, &lg) == MPI_SUCCESS);
    CHECK(MPI_Comm_remote_group(inter, &rg) == MPI_SUCCESS);
    int gs;
    MPI_Group_size(rg, &gs);
    CHECK(gs == rsize);
    MPI_Group_size(lg, &gs);
    CHECK(gs == lsize);
    char line[256] = "";
    for (int i = 0; i < rsize; i++) {
        int w;
        CHECK(MPI_Group_translate_ranks(rg, 1, &i, world, &w) == MPI_SUCCESS);
        snprintf(line + strlen(line), sizeof line - strlen(line), " %d", w);
    }
    OK(wrank, "remote group:%s", line);
    line[0] = 0;
    for (int i = 0; i < lsize; i++) {
        int w;
        CHECK(MPI_Group_translate_ranks(lg, 1, &i, world, &w) == MPI_SUCCESS);
        snprintf(line + strlen(line), sizeof line - strlen(line), " %d", w);
    }
    OK(wrank, "local group:%s", line);
    MPI_Group_free(&lg);
    MPI_Group_free(&rg);

    /* Everyone sends its world rank to remote rank 0, which takes them with MPI_ANY_SOURCE;
       the status names the remote rank. Both ways. */
    CHECK(MPI_Send(&wrank, 1, MPI_INT, 0, 5, inter) == MPI_SUCCESS);
    if (lrank == 0) {
        int sum = 0, seen = 0;
        for (int i = 0; i < rsize; i++) {
            int v;
            MPI_Status st;
            CHECK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 5, inter, &st) == MPI_SUCCESS);
            CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rsize && st.MPI_TAG == 5);
            /* remote rank r of the other parity is world rank 2r + (1 - color) */
            CHECK(v == 2 * st.MPI_SOURCE + (1 - color));
            sum += v;
            seen |= 1 << st.MPI_SOURCE;
        }
        OK(wrank, "any-source sum %d from %d", sum, seen);
    }

    /* Pairs: local rank r with remote rank r. Evens: Ssend, then Irecv; odds: Probe, Recv,
       then Issend back; then Isend / Irecv of the doubled value. */
    int pairs = lsize < rsize ? lsize : rsize;
    if (lrank < pairs) {
        int v = wrank * 10, got = -1;
        MPI_Status st;
        MPI_Request r;
        if (color == 0) {
            CHECK(MPI_Ssend(&v, 1, MPI_INT, lrank, 6, inter) == MPI_SUCCESS);
            CHECK(MPI_Irecv(&got, 1, MPI_INT, lrank, 7, inter, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS && st.MPI_SOURCE == lrank);
        } else {
            int count;
            CHECK(MPI_Probe(lrank, 6, inter, &st) == MPI_SUCCESS && st.MPI_SOURCE == lrank);
            MPI_Get_count(&st, MPI_INT, &count);
            CHECK(count == 1);
            CHECK(MPI_Recv(&got, 1, MPI_INT, lrank, 6, inter, &st) == MPI_SUCCESS);
            CHECK(MPI_Issend(&v, 1, MPI_INT, lrank, 7, inter, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        }
        OK(wrank, "pair got %d", got);
        int d = 2 * got, back = -1;
        MPI_Request rr[2];
        CHECK(MPI_Irecv(&back, 1, MPI_INT, lrank, 8, inter, &rr[0]) == MPI_SUCCESS);
        CHECK(MPI_Isend(&d, 1, MPI_INT, lrank, 8, inter, &rr[1]) == MPI_SUCCESS);
        CHECK(MPI_Waitall(2, rr, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(back == 20 * wrank);
    }
    /* Ranks outside the remote group are an error. */
    CHECK_RC(MPI_Send(&wrank, 1, MPI_INT, rsize, 9, inter), MPI_ERR_RANK);

    /* Merge: evens (high = 0) first, then odds. */
    MPI_Comm merged;
    CHECK(MPI_Intercomm_merge(inter, color, &merged) == MPI_SUCCESS);
    int mrank, msize, total;
    MPI_Comm_rank(merged, &mrank);
    MPI_Comm_size(merged, &msize);
    CHECK(MPI_Comm_test_inter(merged, &flag) == MPI_SUCCESS && !flag);
    CHECK(mrank == (color == 0 ? wrank / 2 : (n + 1) / 2 + wrank / 2));
    CHECK(MPI_Allreduce(&wrank, &total, 1, MPI_INT, MPI_SUM, merged) == MPI_SUCCESS);
    OK(wrank, "merged rank %d of %d, sum %d", mrank, msize, total);
    MPI_Comm_free(&merged);

    /* Collectives. */
    CHECK(MPI_Barrier(inter) == MPI_SUCCESS);
    for (int side = 0; side < 2; side++) {
        /* Bcast: root is local rank 0 of group `side`. */
        int v = color == side ? 1000 + wrank : -1;
        int root = color == side ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        CHECK(MPI_Bcast(&v, 1, MPI_INT, root, inter) == MPI_SUCCESS);
        OK(wrank, "bcast from side %d: %d", side, v);

        /* Reduce: the sum of the other group's world ranks arrives at the root. */
        int s = -1, mine = wrank + 1;
        CHECK(MPI_Reduce(&mine, &s, 1, MPI_INT, MPI_SUM, root, inter) == MPI_SUCCESS);
        OK(wrank, "reduce to side %d: %d", side, s);

        /* Gather: the other group's values, in remote rank order, at the root. */
        int *all = malloc(n * sizeof(int));
        for (int i = 0; i < n; i++) all[i] = -1;
        CHECK(MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, root, inter) == MPI_SUCCESS);
        if (root == MPI_ROOT) {
            line[0] = 0;
            for (int i = 0; i < rsize; i++)
                snprintf(line + strlen(line), sizeof line - strlen(line), " %d", all[i]);
            OK(wrank, "gather at side %d:%s", side, line);
        }

        /* Scatter: the root gives remote rank i the value 100 * i + side. */
        for (int i = 0; i < n; i++) all[i] = 100 * i + side;
        int one = -1;
        CHECK(MPI_Scatter(all, 1, MPI_INT, &one, 1, MPI_INT, root, inter) == MPI_SUCCESS);
        OK(wrank, "scatter from side %d: %d", side, one);
        free(all);
    }

    /* Allreduce: each group gets the other group's sum. */
    int s = -1;
    CHECK(MPI_Allreduce(&wrank, &s, 1, MPI_INT, MPI_SUM, inter) == MPI_SUCCESS);
    OK(wrank, "allreduce %d", s);
    int mx = -1;
    CHECK(MPI_Allreduce(&wrank, &mx, 1, MPI_INT, MPI_MAX, inter) == MPI_SUCCESS);
    OK(wrank, "allreduce max %d", mx);

    /* Allgather: the other group's values, in remote rank order. */
    int *all = malloc(n * sizeof(int)), *sb = malloc(n * sizeof(int));
    int v2[2] = {wrank, -wrank};
    int *ag = malloc(2 * n * sizeof(int));
    CHECK(MPI_Allgather(v2, 2, MPI_INT, ag, 2, MPI_INT, inter) == MPI_SUCCESS);
    line[0] = 0;
    for (int i = 0; i < 2 * rsize; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), " %d", ag[i]);
    OK(wrank, "allgather:%s", line);

    /* Alltoall: remote rank j gets 1000 * wrank + j. */
    for (int j = 0; j < rsize; j++) sb[j] = 1000 * wrank + j;
    CHECK(MPI_Alltoall(sb, 1, MPI_INT, all, 1, MPI_INT, inter) == MPI_SUCCESS);
    line[0] = 0;
    for (int i = 0; i < rsize; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), " %d", all[i]);
    OK(wrank, "alltoall:%s", line);

    /* The large-count v forms (mpi4py's object collectives use them): remote rank j sends
       j + 1 ints of 100 * its world rank. */
    {
        MPI_Count rc[64], ls = lrank + 1;
        MPI_Aint rd[64];
        MPI_Count total = 0;
        for (int j = 0; j < rsize && j < 64; j++) { rc[j] = j + 1; rd[j] = total; total += j + 1; }
        int *mine = malloc(ls * sizeof(int)), *got = malloc((total + 1) * sizeof(int));
        for (int k = 0; k < ls; k++) mine[k] = 100 * wrank;
        CHECK(MPI_Allgatherv_c(mine, ls, MPI_INT, got, rc, rd, MPI_INT, inter) == MPI_SUCCESS);
        line[0] = 0;
        for (int i = 0; i < total; i++)
            snprintf(line + strlen(line), sizeof line - strlen(line), " %d", got[i]);
        OK(wrank, "allgatherv_c:%s", line);
        /* Scatterv_c of one int each from local rank 0 of group 0 to group 1. */
        MPI_Count c1[64];
        MPI_Aint d1[64];
        for (int j = 0; j < rsize && j < 64; j++) { c1[j] = 1; d1[j] = 2 * j; }
        int root = color == 0 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        int one = -1, *src = malloc((2 * rsize + 1) * sizeof(int));
        for (int i = 0; i < 2 * rsize; i++) src[i] = 10 * i;
        CHECK(MPI_Scatterv_c(src, c1, d1, MPI_INT, &one, color == 1 ? 1 : 0, MPI_INT, root, inter) == MPI_SUCCESS);
        if (color == 1) OK(wrank, "scatterv_c got %d", one);
        free(mine);
        free(got);
        free(src);
    }
    free(all);
    free(sb);
    free(ag);

    /* Calls an intercommunicator may not take. */
    CHECK_RC(MPI_Scan(&wrank, &s, 1, MPI_INT, MPI_SUM, inter), MPI_ERR_COMM);
    CHECK_RC(MPI_Exscan(&wrank, &s, 1, MPI_INT, MPI_SUM, inter), MPI_ERR_COMM);
    int dims[1] = {lsize}, periods[1] = {0};
    MPI_Comm cart;
    CHECK_RC(MPI_Cart_create(inter, 1, dims, periods, 0, &cart), MPI_ERR_COMM);

    /* On viaduct only (MPI_Comm_split_type on an intercommunicator: splittype.c). */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen;
    MPI_Get_library_version(lib, &liblen);
    if (strstr(lib, "viaduct")) {
        /* A bad remote leader fails at the local leader, whose group is released with an
           error too (no hang); the two groups do it in turn, so the remote leader waits on
           nobody. */
        MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
        for (int g = 0; g < 2; g++) {
            if (color == g) {
                MPI_Comm bad;
                int rc = MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, n, 4, &bad);
                if (lrank == 0) {
                    int cls;
                    MPI_Error_class(rc, &cls);
                    CHECK(cls == MPI_ERR_RANK);
                } else {
                    CHECK(rc != MPI_SUCCESS);
                }
            }
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }

    /* Dup: another intercommunicator with the same groups, its own messages. */
    MPI_Comm d;
    CHECK(MPI_Comm_dup(inter, &d) == MPI_SUCCESS);
    int dflag, drs;
    CHECK(MPI_Comm_test_inter(d, &dflag) == MPI_SUCCESS && dflag);
    CHECK(MPI_Comm_remote_size(d, &drs) == MPI_SUCCESS && drs == rsize);
    int cmp_d, cmp_l, cmp_i;
    CHECK(MPI_Comm_compare(inter, d, &cmp_d) == MPI_SUCCESS);
    CHECK(MPI_Comm_compare(inter, local, &cmp_l) == MPI_SUCCESS);
    CHECK(MPI_Comm_compare(inter, inter, &cmp_i) == MPI_SUCCESS);
    OK(wrank, "compare dup %d local %d self %d", cmp_d == MPI_CONGRUENT, cmp_l == MPI_UNEQUAL,
       cmp_i == MPI_IDENT);
    int a = wrank, b = -1;
    if (lrank < pairs) {
        MPI_Request rr[2];
        MPI_Irecv(&b, 1, MPI_INT, lrank, 3, inter, &rr[0]);
        CHECK(MPI_Send(&a, 1, MPI_INT, lrank, 3, d) == MPI_SUCCESS);
        CHECK(MPI_Send(&a, 1, MPI_INT, lrank, 3, inter) == MPI_SUCCESS);
        int bd = -1;
        CHECK(MPI_Recv(&bd, 1, MPI_INT, lrank, 3, d, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(MPI_Wait(&rr[0], MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(b == bd && b == 2 * lrank + (1 - color));
    }
    CHECK_RC(MPI_Comm_free(&d), MPI_SUCCESS);
    CHECK(d == MPI_COMM_NULL);
    CHECK_RC(MPI_Comm_free(&inter), MPI_SUCCESS);
    CHECK(inter == MPI_COMM_NULL);
    MPI_Comm_free(&local);
    MPI_Group_free(&world);
    OK(wrank, "done");
    MPI_Finalize();
    return 0;
}
