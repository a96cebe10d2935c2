/* Group operations (excl, range_incl/excl, union, intersection, difference, compare),
   MPI_Comm_create_group (collective over the group only) and MPI_Comm_idup. */
#include "common.h"

static int size_of(MPI_Group g) { int s; MPI_Group_size(g, &s); return s; }
static int rank_in(MPI_Group g) { int r; MPI_Group_rank(g, &r); return r; }

int main(int argc, char **argv) {
    int wrank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Group world, evens, odds, u, x, dfr, rev, re;
    MPI_Comm_group(MPI_COMM_WORLD, &world);

    /* evens by range (0..n-1 step 2), odds by excluding them. */
    int r1[1][3] = {{0, n - 1, 2}};
    CHECK(MPI_Group_range_incl(world, 1, r1, &evens) == MPI_SUCCESS);
    CHECK(size_of(evens) == (n + 1) / 2);
    CHECK(rank_in(evens) == (wrank % 2 == 0 ? wrank / 2 : MPI_UNDEFINED));
    CHECK(MPI_Group_range_excl(world, 1, r1, &odds) == MPI_SUCCESS);
    CHECK(size_of(odds) == n / 2);
    int *ev = malloc(n * sizeof(int)), ne = 0;
    for (int i = 0; i < n; i += 2) ev[ne++] = i;
    MPI_Group odds2;
    CHECK(MPI_Group_excl(world, ne, ev, &odds2) == MPI_SUCCESS);
    int cmp;
    CHECK(MPI_Group_compare(odds, odds2, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
    MPI_Group_free(&odds2);

    /* Union in order: odds then evens; similar to world (same members, other order). */
    CHECK(MPI_Group_union(odds, evens, &u) == MPI_SUCCESS && size_of(u) == n);
    CHECK(MPI_Group_compare(u, world, &cmp) == MPI_SUCCESS && cmp == (n > 1 ? MPI_SIMILAR : MPI_IDENT));
    int zero = 0, t;
    CHECK(MPI_Group_translate_ranks(world, 1, &zero, u, &t) == MPI_SUCCESS && t == n / 2);
    CHECK(MPI_Group_intersection(world, evens, &x) == MPI_SUCCESS);
    CHECK(MPI_Group_compare(x, evens, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
    CHECK(MPI_Group_difference(world, evens, &dfr) == MPI_SUCCESS);
    CHECK(MPI_Group_compare(dfr, odds, &cmp) == MPI_SUCCESS && cmp == MPI_IDENT);
    MPI_Group empty;
    CHECK(MPI_Group_difference(evens, world, &empty) == MPI_SUCCESS && empty == MPI_GROUP_EMPTY);
    CHECK(MPI_Group_compare(evens, odds, &cmp) == MPI_SUCCESS && cmp == MPI_UNEQUAL);

    /* A descending range: world reversed. */
    int r2[1][3] = {{n - 1, 0, -1}};
    CHECK(MPI_Group_range_incl(world, 1, r2, &rev) == MPI_SUCCESS);
    CHECK(rank_in(rev) == n - 1 - wrank);
    int r3[2][3] = {{0, 0, 1}, {n - 1, n - 1, 1}};
    if (n > 1) {
        CHECK(MPI_Group_range_incl(world, 2, r3, &re) == MPI_SUCCESS && size_of(re) == 2);
        MPI_Group_free(&re);
    }

    /* Comm_create_group over the evens only: the odds do not call it. */
    MPI_Comm ce = MPI_COMM_NULL;
    if (wrank % 2 == 0) {
        CHECK(MPI_Comm_create_group(MPI_COMM_WORLD, evens, 7, &ce) == MPI_SUCCESS);
        int cs, cr, sum = 0;
        MPI_Comm_size(ce, &cs);
        MPI_Comm_rank(ce, &cr);
        CHECK(cs == (n + 1) / 2 && cr == wrank / 2);
        MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, ce);
        CHECK(sum == 2 * ((cs - 1) * cs / 2));
        MPI_Comm_free(&ce);
    } else {
        /* The odds, meanwhile, build their own (reversed). */
        MPI_Group ro;
        int r4[1][3] = {{n / 2 - 1, 0, -1}};
        MPI_Group_range_incl(odds, 1, r4, &ro);
        CHECK(MPI_Comm_create_group(MPI_COMM_WORLD, ro, 8, &ce) == MPI_SUCCESS);
        int cr;
        MPI_Comm_rank(ce, &cr);
        CHECK(cr == n / 2 - 1 - wrank / 2);
        MPI_Barrier(ce);
        MPI_Comm_free(&ce);
        MPI_Group_free(&ro);
    }

    /* Comm_idup. */
    MPI_Comm dup;
    MPI_Request req;
    CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req) == MPI_SUCCESS);
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS && req == MPI_REQUEST_NULL);
    int ds, v = 1, all = 0;
    MPI_Comm_size(dup, &ds);
    CHECK(ds == n);
    MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_SUM, dup);
    CHECK(all == n);
    MPI_Comm_free(&dup);

    /* Errors. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Group bad;
    int oob = n;
    CHECK_RC(MPI_Group_excl(world, 1, &oob, &bad), MPI_ERR_RANK);
    int rbad[1][3] = {{0, n, 1}};
    CHECK_RC(MPI_Group_range_incl(world, 1, rbad, &bad), MPI_ERR_ARG);
    CHECK_RC(MPI_Group_union(MPI_GROUP_NULL, world, &bad), MPI_ERR_GROUP);
    CHECK_RC(MPI_Group_compare(world, MPI_GROUP_NULL, &cmp), MPI_ERR_GROUP);

    MPI_Group_free(&world);
    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&u);
    MPI_Group_free(&x);
    MPI_Group_free(&dfr);
    MPI_Group_free(&rev);
    free(ev);
    OK(wrank, "group operations ok");
    MPI_Finalize();
    return 0;
}
