/* Groups and MPI_Comm_create, persistent requests, nonblocking collectives, user operations,
   predefined datatype sizes, and MPI_PROC_NULL requests mixed with others. */
#include "common.h"

static void absmax(void *in, void *inout, int *len, MPI_Datatype *dt) {
    CHECK(*dt == MPI_INT);
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        int x = abs(a[i]), y = abs(b[i]);
        b[i] = x > y ? x : y;
    }
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;

    /* Groups: the world group reversed, then a communicator of its even members. */
    MPI_Group world, rev, evens;
    CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS);
    int gs, gr;
    CHECK(MPI_Group_size(world, &gs) == MPI_SUCCESS && gs == size);
    CHECK(MPI_Group_rank(world, &gr) == MPI_SUCCESS && gr == rank);
    int *ranks = malloc(size * sizeof(int)), *out = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++) ranks[i] = size - 1 - i;
    CHECK(MPI_Group_incl(world, size, ranks, &rev) == MPI_SUCCESS);
    CHECK(MPI_Group_rank(rev, &gr) == MPI_SUCCESS && gr == size - 1 - rank);
    CHECK(MPI_Group_translate_ranks(rev, size, ranks, world, out) == MPI_SUCCESS);
    for (int i = 0; i < size; i++) CHECK(out[i] == i);
    int ne = 0;
    for (int i = 0; i < size; i += 2) ranks[ne++] = i;
    CHECK(MPI_Group_incl(world, ne, ranks, &evens) == MPI_SUCCESS);
    MPI_Comm ec;
    CHECK(MPI_Comm_create(MPI_COMM_WORLD, evens, &ec) == MPI_SUCCESS);
    if (rank % 2 == 0) {
        int er, es, sum = 0, one = 1;
        MPI_Comm_rank(ec, &er);
        MPI_Comm_size(ec, &es);
        CHECK(er == rank / 2 && es == ne);
        CHECK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, ec) == MPI_SUCCESS && sum == ne);
        MPI_Comm_free(&ec);
    } else {
        CHECK(ec == MPI_COMM_NULL);
        CHECK(MPI_Group_rank(evens, &gr) == MPI_SUCCESS && gr == MPI_UNDEFINED);
    }
    MPI_Group_free(&evens);
    MPI_Group_free(&rev);
    CHECK(MPI_Group_free(&world) == MPI_SUCCESS && world == MPI_GROUP_NULL);
    OK(rank, "groups ok");

    /* Persistent requests: one exchange started five times. */
    int sv = 0, rv = -1;
    MPI_Request pr[2];
    CHECK(MPI_Recv_init(&rv, 1, MPI_INT, left, 4, MPI_COMM_WORLD, &pr[0]) == MPI_SUCCESS);
    CHECK(MPI_Send_init(&sv, 1, MPI_INT, right, 4, MPI_COMM_WORLD, &pr[1]) == MPI_SUCCESS);
    MPI_Status st;
    int flag;
    CHECK(MPI_Wait(&pr[0], &st) == MPI_SUCCESS && pr[0] != MPI_REQUEST_NULL);
    for (int round = 0; round < 5; round++) {
        sv = rank * 10 + round;
        CHECK(MPI_Startall(2, pr) == MPI_SUCCESS);
        CHECK(MPI_Waitall(2, pr, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(pr[0] != MPI_REQUEST_NULL && pr[1] != MPI_REQUEST_NULL);
        CHECK(rv == left * 10 + round);
    }
    /* No active request (inactive persistent and null ones only): Testany says flag = true,
       index = MPI_UNDEFINED; Waitany returns at once with MPI_UNDEFINED. */
    {
        MPI_Request idle[3] = {pr[0], MPI_REQUEST_NULL, pr[1]};
        int ix = 0;
        flag = 0;
        CHECK(MPI_Testany(3, idle, &ix, &flag, &st) == MPI_SUCCESS);
        CHECK(flag == 1 && ix == MPI_UNDEFINED);
        CHECK(idle[0] == pr[0] && idle[1] == MPI_REQUEST_NULL && idle[2] == pr[1]);
        ix = 0;
        CHECK(MPI_Waitany(3, idle, &ix, &st) == MPI_SUCCESS && ix == MPI_UNDEFINED);
        MPI_Request none[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        flag = 0;
        CHECK(MPI_Testany(2, none, &ix, &flag, &st) == MPI_SUCCESS && flag == 1 && ix == MPI_UNDEFINED);
    }
    CHECK(MPI_Start(&pr[0]) == MPI_SUCCESS);
    sv = -9;
    CHECK(MPI_Start(&pr[1]) == MPI_SUCCESS);
    CHECK(MPI_Wait(&pr[1], MPI_STATUS_IGNORE) == MPI_SUCCESS);
    flag = 0;
    while (!flag) CHECK(MPI_Test(&pr[0], &flag, &st) == MPI_SUCCESS);
    CHECK(rv == -9 && st.MPI_SOURCE == left && pr[0] != MPI_REQUEST_NULL);
    CHECK(MPI_Request_free(&pr[0]) == MPI_SUCCESS && pr[0] == MPI_REQUEST_NULL);
    CHECK(MPI_Request_free(&pr[1]) == MPI_SUCCESS);
    OK(rank, "persistent requests ok");

    /* Nonblocking collectives, all in flight at once. */
    MPI_Request cr[8];
    int b = rank == 0 ? 123 : 0, red = rank + 1, rsum = -1, ar = rank, armax = -1;
    int *g = malloc(size * sizeof(int)), *sc = malloc(size * sizeof(int)), one = -1;
    int *ag = malloc(size * sizeof(int)), *a2s = malloc(size * sizeof(int)), *a2r = malloc(size * sizeof(int));
    for (int i = 0; i < size; i++) { sc[i] = 50 + i; a2s[i] = rank * 100 + i; }
    CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &cr[0]) == MPI_SUCCESS);
    CHECK(MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &cr[1]) == MPI_SUCCESS);
    CHECK(MPI_Ireduce(&red, &rsum, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, &cr[2]) == MPI_SUCCESS);
    CHECK(MPI_Iallreduce(&ar, &armax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &cr[3]) == MPI_SUCCESS);
    CHECK(MPI_Igather(&rank, 1, MPI_INT, g, 1, MPI_INT, 0, MPI_COMM_WORLD, &cr[4]) == MPI_SUCCESS);
    CHECK(MPI_Iscatter(sc, 1, MPI_INT, &one, 1, MPI_INT, 0, MPI_COMM_WORLD, &cr[5]) == MPI_SUCCESS);
    CHECK(MPI_Iallgather(&rank, 1, MPI_INT, ag, 1, MPI_INT, MPI_COMM_WORLD, &cr[6]) == MPI_SUCCESS);
    CHECK(MPI_Ialltoall(a2s, 1, MPI_INT, a2r, 1, MPI_INT, MPI_COMM_WORLD, &cr[7]) == MPI_SUCCESS);
    CHECK(MPI_Waitall(8, cr, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    CHECK(b == 123 && armax == size - 1 && one == 50 + rank);
    if (rank == 0) CHECK(rsum == size * (size + 1) / 2);
    for (int i = 0; i < size; i++) {
        if (rank == 0) CHECK(g[i] == i);
        CHECK(ag[i] == i && a2r[i] == i * 100 + rank);
    }
    OK(rank, "nonblocking collectives ok");

    /* A user operation. */
    MPI_Op op;
    CHECK(MPI_Op_create(absmax, 1, &op) == MPI_SUCCESS);
    int mine[2] = {rank % 2 ? -rank : rank, 1}, res[2];
    CHECK(MPI_Allreduce(mine, res, 2, MPI_INT, op, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(res[0] == size - 1 && res[1] == 1);
    CHECK(MPI_Op_free(&op) == MPI_SUCCESS && op == MPI_OP_NULL);
    OK(rank, "user operation ok");

    /* Sizes of predefined datatypes. */
    int ts;
    MPI_Aint lb, ext;
    CHECK(MPI_Type_size(MPI_DOUBLE, &ts) == MPI_SUCCESS && ts == sizeof(double));
    CHECK(MPI_Type_size(MPI_LONG_LONG, &ts) == MPI_SUCCESS && ts == sizeof(long long));
    CHECK(MPI_Type_size(MPI_SHORT_INT, &ts) == MPI_SUCCESS && ts == sizeof(short) + sizeof(int));
    CHECK(MPI_Type_get_extent(MPI_INT, &lb, &ext) == MPI_SUCCESS && lb == 0 && ext == sizeof(int));

    /* A request with MPI_PROC_NULL completes first in Waitany, at once in Waitsome. */
    MPI_Request mix[2];
    int x = 0, y = 0;
    CHECK(MPI_Irecv(&x, 1, MPI_INT, left, 77, MPI_COMM_WORLD, &mix[0]) == MPI_SUCCESS);
    CHECK(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 77, MPI_COMM_WORLD, &mix[1]) == MPI_SUCCESS);
    int idx, outc, inds[2];
    /* The standard gives the status source MPI_PROC_NULL; MPICH 4.0.2 reports 0 here, so
       only the index and the count are compared. */
    int cnt = -1;
    CHECK(MPI_Waitany(2, mix, &idx, &st) == MPI_SUCCESS && idx == 1);
    CHECK(MPI_Get_count(&st, MPI_INT, &cnt) == MPI_SUCCESS && cnt == 0);
    CHECK(MPI_Testsome(2, mix, &outc, inds, MPI_STATUSES_IGNORE) == MPI_SUCCESS && outc == 0);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_Send(&rank, 1, MPI_INT, right, 77, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Waitsome(2, mix, &outc, inds, MPI_STATUSES_IGNORE) == MPI_SUCCESS && outc == 1 && inds[0] == 0);
    CHECK(x == left);
    OK(rank, "more ok");
    free(ranks); free(out); free(g); free(sc); free(ag); free(a2s); free(a2r);
    MPI_Finalize();
    return 0;
}
