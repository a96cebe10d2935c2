/* MPI-4 partitioned requests of one (peer, tag, communicator) match in the order of their
   init calls (MPI-4.0 section 4.2), not in the order they are started: around a ring (rank r
   sends to r+1, receives from r-1), two and three sends with the same tag created in one
   order and started in others, several rounds, each receive getting the data of the send
   made by the init call of the same rank; requests freed (one pair never started) and made
   again; partitioned messages between ordinary ones of the same tag; messages past the eager
   limit started in reverse order; a receive started before its sender's init call. */
#include "common.h"

#define N 64
#define ROUNDS 4

static void fill(int *b, int n, int base) {
    for (int i = 0; i < n; i++) b[i] = base + i;
}

/* Whether b holds the data fill(b, n, base) wrote. */
static int same(const int *b, int n, int base) {
    for (int i = 0; i < n; i++)
        if (b[i] != base + i) return 0;
    return 1;
}

/* The data of the send made `which`-th (of those compared) by `rank` in round `round`. */
static int base_of(int rank, int round, int which) { return rank * 100000 + round * 1000 + which * 100; }

static void check_status(const MPI_Status *st, int from, int tag) {
    CHECK(st->MPI_SOURCE == from);
    CHECK(st->MPI_TAG == tag);
    int count = -1;
    CHECK(MPI_Get_count(st, MPI_INT, &count) == MPI_SUCCESS);
    CHECK(count == N);
}

/* Starts send `s` and marks its partitions (so its message goes at once). */
static void start_send(MPI_Request *s, int *buf, int base) {
    CHECK(MPI_Start(s) == MPI_SUCCESS);
    fill(buf, N, base);
    CHECK(MPI_Pready_range(0, 3, *s) == MPI_SUCCESS);
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm comm = MPI_COMM_WORLD;
    int to = (rank + 1) % n, from = (rank + n - 1) % n;
    MPI_Status st[8];

    /* Two sends with tag 5, made a then b; the receives made ra then rb. The starts go in
       other orders each round; ra must get a's data, rb b's. */
    int a[N], b[N], ra[N], rb[N];
    MPI_Request sa, sb, rra, rrb;
    CHECK(MPI_Psend_init(a, 4, N / 4, MPI_INT, to, 5, comm, MPI_INFO_NULL, &sa) == MPI_SUCCESS);
    CHECK(MPI_Psend_init(b, 4, N / 4, MPI_INT, to, 5, comm, MPI_INFO_NULL, &sb) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(ra, 4, N / 4, MPI_INT, from, 5, comm, MPI_INFO_NULL, &rra) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(rb, 4, N / 4, MPI_INT, from, 5, comm, MPI_INFO_NULL, &rrb) == MPI_SUCCESS);
    int good = 0;
    for (int round = 0; round < ROUNDS; round++) {
        fill(ra, N, -N);
        fill(rb, N, -N);
        if (round % 2 == 0) {
            CHECK(MPI_Start(&rra) == MPI_SUCCESS);
            CHECK(MPI_Start(&rrb) == MPI_SUCCESS);
            start_send(&sb, b, base_of(rank, round, 1));
            start_send(&sa, a, base_of(rank, round, 0));
        } else {
            CHECK(MPI_Start(&rrb) == MPI_SUCCESS);
            start_send(&sa, a, base_of(rank, round, 0));
            start_send(&sb, b, base_of(rank, round, 1));
            CHECK(MPI_Start(&rra) == MPI_SUCCESS);
        }
        MPI_Request all[4] = {sa, sb, rra, rrb};
        CHECK(MPI_Waitall(4, all, st) == MPI_SUCCESS);
        check_status(&st[2], from, 5);
        check_status(&st[3], from, 5);
        CHECK(same(ra, N, base_of(from, round, 0)));
        CHECK(same(rb, N, base_of(from, round, 1)));
        good++;
    }
    OK(rank, "two sends started out of init order: %d rounds matched by init order", good);

    /* Three sends with tag 6: each round starts the sends in one permutation and the
       receives (by MPI_Startall) in another. */
    static const int perm[6][3] = {{2, 1, 0}, {0, 2, 1}, {1, 0, 2}, {2, 0, 1}, {1, 2, 0}, {0, 1, 2}};
    int s3[3][N], r3[3][N];
    MPI_Request q3[3], p3[3];
    for (int i = 0; i < 3; i++)
        CHECK(MPI_Psend_init(s3[i], 4, N / 4, MPI_INT, to, 6, comm, MPI_INFO_NULL, &q3[i]) == MPI_SUCCESS);
    for (int i = 0; i < 3; i++)
        CHECK(MPI_Precv_init(r3[i], 4, N / 4, MPI_INT, from, 6, comm, MPI_INFO_NULL, &p3[i]) == MPI_SUCCESS);
    good = 0;
    for (int round = 0; round < 6; round++) {
        MPI_Request rs[3];
        const int *rp = perm[(round + 3) % 6];
        for (int i = 0; i < 3; i++) {
            fill(r3[i], N, -N);
            rs[i] = p3[rp[i]];
        }
        CHECK(MPI_Startall(3, rs) == MPI_SUCCESS);
        for (int i = 0; i < 3; i++) {
            int k = perm[round][i];
            start_send(&q3[k], s3[k], base_of(rank, round, k));
        }
        CHECK(MPI_Waitall(3, rs, st) == MPI_SUCCESS);
        CHECK(MPI_Waitall(3, q3, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        for (int i = 0; i < 3; i++) {
            check_status(&st[i], from, 6);
            CHECK(same(r3[i], N, base_of(from, round, i)));
        }
        good++;
    }
    OK(rank, "three sends in permuted orders: %d rounds matched by init order", good);
    for (int i = 0; i < 3; i++) {
        CHECK(MPI_Request_free(&q3[i]) == MPI_SUCCESS);
        CHECK(MPI_Request_free(&p3[i]) == MPI_SUCCESS);
    }

    /* Freed and made again: the a pair goes; c is made (the third send with tag 5, after a
       and b), then a pair made and freed without a start, then d. b, c and d are started in
       reverse order; their receives in init order. */
    CHECK(MPI_Request_free(&sa) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&rra) == MPI_SUCCESS);
    int c[N], d[N], x[N], rc[N], rd[N], rx[N];
    MPI_Request sc, sd, sx, rrc, rrd, rrx;
    CHECK(MPI_Psend_init(c, 4, N / 4, MPI_INT, to, 5, comm, MPI_INFO_NULL, &sc) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(rc, 4, N / 4, MPI_INT, from, 5, comm, MPI_INFO_NULL, &rrc) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(rx, 4, N / 4, MPI_INT, from, 5, comm, MPI_INFO_NULL, &rrx) == MPI_SUCCESS);
    CHECK(MPI_Psend_init(x, 4, N / 4, MPI_INT, to, 5, comm, MPI_INFO_NULL, &sx) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&sx) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&rrx) == MPI_SUCCESS);
    CHECK(MPI_Psend_init(d, 4, N / 4, MPI_INT, to, 5, comm, MPI_INFO_NULL, &sd) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(rd, 4, N / 4, MPI_INT, from, 5, comm, MPI_INFO_NULL, &rrd) == MPI_SUCCESS);
    good = 0;
    for (int round = 0; round < 2; round++) {
        fill(rb, N, -N);
        fill(rc, N, -N);
        fill(rd, N, -N);
        MPI_Request rs[3] = {rrb, rrc, rrd};
        CHECK(MPI_Startall(3, rs) == MPI_SUCCESS);
        start_send(&sd, d, base_of(rank, round, 3));
        start_send(&sc, c, base_of(rank, round, 2));
        start_send(&sb, b, base_of(rank, round, 1));
        MPI_Request ss[3] = {sb, sc, sd};
        CHECK(MPI_Waitall(3, ss, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(MPI_Waitall(3, rs, st) == MPI_SUCCESS);
        for (int i = 0; i < 3; i++) check_status(&st[i], from, 5);
        CHECK(same(rb, N, base_of(from, round, 1)));
        CHECK(same(rc, N, base_of(from, round, 2)));
        CHECK(same(rd, N, base_of(from, round, 3)));
        good++;
    }
    OK(rank, "freed and made again: %d rounds matched by init order", good);

    /* Ordinary messages of tag 5 before and after a partitioned one: the ordinary receives
       (one of tag 5, one of MPI_ANY_TAG) take the ordinary messages, the partitioned receive
       the partitioned one. */
    int o1 = -1, o2 = -1, v1 = rank * 10 + 1, v2 = rank * 10 + 2;
    MPI_Request or1, or2, os1, os2;
    fill(rb, N, -N);
    CHECK(MPI_Irecv(&o1, 1, MPI_INT, from, 5, comm, &or1) == MPI_SUCCESS);
    CHECK(MPI_Irecv(&o2, 1, MPI_INT, from, MPI_ANY_TAG, comm, &or2) == MPI_SUCCESS);
    CHECK(MPI_Start(&rrb) == MPI_SUCCESS);
    CHECK(MPI_Isend(&v1, 1, MPI_INT, to, 5, comm, &os1) == MPI_SUCCESS);
    start_send(&sb, b, base_of(rank, 9, 1));
    CHECK(MPI_Isend(&v2, 1, MPI_INT, to, 5, comm, &os2) == MPI_SUCCESS);
    MPI_Request mix[5] = {or1, or2, rrb, os1, os2};
    CHECK(MPI_Waitall(5, mix, st) == MPI_SUCCESS);
    CHECK(MPI_Wait(&sb, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(o1 == from * 10 + 1 && o2 == from * 10 + 2);
    CHECK(st[1].MPI_TAG == 5);
    check_status(&st[2], from, 5);
    CHECK(same(rb, N, base_of(from, 9, 1)));
    OK(rank, "beside ordinary messages: ordinary %d %d, partitioned data right", o1 - from * 10,
       o2 - from * 10);
    CHECK(MPI_Request_free(&sb) == MPI_SUCCESS && MPI_Request_free(&rrb) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&sc) == MPI_SUCCESS && MPI_Request_free(&rrc) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&sd) == MPI_SUCCESS && MPI_Request_free(&rrd) == MPI_SUCCESS);

    /* Past the eager limit (256 KiB each): two sends with tag 7 started in reverse order,
       the receives in init order; the sends waited for first. */
    int big = 65536;
    int *bs[2], *br[2];
    MPI_Request bq[2], bp[2];
    for (int i = 0; i < 2; i++) {
        bs[i] = malloc(sizeof(int) * big);
        br[i] = malloc(sizeof(int) * big);
        CHECK(bs[i] && br[i]);
        CHECK(MPI_Psend_init(bs[i], 8, big / 8, MPI_INT, to, 7, comm, MPI_INFO_NULL, &bq[i]) == MPI_SUCCESS);
    }
    for (int i = 0; i < 2; i++)
        CHECK(MPI_Precv_init(br[i], 8, big / 8, MPI_INT, from, 7, comm, MPI_INFO_NULL, &bp[i]) == MPI_SUCCESS);
    good = 0;
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 2; i++) fill(br[i], big, -1);
        CHECK(MPI_Startall(2, bp) == MPI_SUCCESS);
        for (int i = 1; i >= 0; i--) {
            CHECK(MPI_Start(&bq[i]) == MPI_SUCCESS);
            fill(bs[i], big, base_of(rank, round, i));
            for (int p = 7; p >= 0; p--) CHECK(MPI_Pready(p, bq[i]) == MPI_SUCCESS);
        }
        CHECK(MPI_Waitall(2, bq, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(MPI_Waitall(2, bp, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(same(br[0], big, base_of(from, round, 0)));
        CHECK(same(br[1], big, base_of(from, round, 1)));
        good++;
    }
    OK(rank, "large sends started in reverse order: %d rounds matched by init order", good);
    for (int i = 0; i < 2; i++) {
        CHECK(MPI_Request_free(&bq[i]) == MPI_SUCCESS && MPI_Request_free(&bp[i]) == MPI_SUCCESS);
        free(bs[i]);
        free(br[i]);
    }

    /* A receive started before its sender's init call (the barrier orders them): small,
       completed by MPI_Parrived polling; large, with the send waited for first. */
    int sm[N], rsm[N];
    MPI_Request ssm, rsmq, lq, lp;
    int *ls = malloc(sizeof(int) * big), *lr = malloc(sizeof(int) * big);
    CHECK(ls && lr);
    fill(rsm, N, -N);
    fill(lr, big, -1);
    CHECK(MPI_Precv_init(rsm, 4, N / 4, MPI_INT, from, 8, comm, MPI_INFO_NULL, &rsmq) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(lr, 2, big / 2, MPI_INT, from, 8, comm, MPI_INFO_NULL, &lp) == MPI_SUCCESS);
    CHECK(MPI_Start(&rsmq) == MPI_SUCCESS);
    CHECK(MPI_Start(&lp) == MPI_SUCCESS);
    CHECK(MPI_Barrier(comm) == MPI_SUCCESS);
    CHECK(MPI_Psend_init(sm, 4, N / 4, MPI_INT, to, 8, comm, MPI_INFO_NULL, &ssm) == MPI_SUCCESS);
    CHECK(MPI_Psend_init(ls, 2, big / 2, MPI_INT, to, 8, comm, MPI_INFO_NULL, &lq) == MPI_SUCCESS);
    CHECK(MPI_Start(&lq) == MPI_SUCCESS);
    fill(ls, big, base_of(rank, 0, 5));
    CHECK(MPI_Pready_range(0, 1, lq) == MPI_SUCCESS);
    start_send(&ssm, sm, base_of(rank, 0, 4));
    double t0 = MPI_Wtime();
    for (int p = 0; p < 4; p++) {
        int flag = 0;
        while (!flag) {
            CHECK(MPI_Parrived(rsmq, p, &flag) == MPI_SUCCESS);
            CHECK(MPI_Wtime() - t0 < 60.0);
        }
    }
    CHECK(same(rsm, N, base_of(from, 0, 4)));
    CHECK(MPI_Wait(&ssm, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Wait(&lq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Wait(&rsmq, &st[0]) == MPI_SUCCESS);
    check_status(&st[0], from, 8);
    CHECK(MPI_Wait(&lp, &st[1]) == MPI_SUCCESS);
    CHECK(st[1].MPI_SOURCE == from && st[1].MPI_TAG == 8);
    CHECK(same(lr, big, base_of(from, 0, 5)));
    OK(rank, "receives started before the sender's init: small and large right");
    CHECK(MPI_Request_free(&ssm) == MPI_SUCCESS && MPI_Request_free(&rsmq) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&lq) == MPI_SUCCESS && MPI_Request_free(&lp) == MPI_SUCCESS);
    free(ls);
    free(lr);

    MPI_Finalize();
    return 0;
}
