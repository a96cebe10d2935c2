/* MPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw and MPI_Neighbor_alltoallw_init on a ring
   graph (each rank's neighbours: left, then right), with a different datatype, count and byte
   displacement per neighbour: one int to the left, two doubles to the right. At 2 ranks the
   left and right neighbours are one rank, and the k-th message between two ranks fills the
   block of its k-th appearance: block 0 gets the other's block 0 (its int), block 1 its
   doubles; from 3 ranks on, block 0 (the left's) gets the left's doubles, block 1 the right's
   int. */
#include "common.h"

/* Checks the received blocks: the doubles at byte 8, the int at byte 40. */
static void got(const char *rb, int left, int right, int round, double *d, int *i) {
    memcpy(d, rb + 8, 2 * sizeof(double));
    memcpy(i, rb + 40, sizeof(int));
    CHECK(d[0] == left + 0.5 + round && d[1] == left + 0.25 + round);
    CHECK(*i == right * 100 + round);
    CHECK((unsigned char)rb[0] == 0xff && (unsigned char)rb[24] == 0xff);
}

static void fill(char *sb, int rank, int round) {
    int i = rank * 100 + round;
    double d[2] = {rank + 0.5 + round, rank + 0.25 + round};
    memset(sb, 0, 64);
    memcpy(sb + 4, &i, sizeof i);
    memcpy(sb + 16, d, sizeof d);
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int left = (rank + n - 1) % n, right = (rank + 1) % n;
    int *idx = malloc(n * sizeof(int)), *edges = malloc(2 * n * sizeof(int));
    for (int i = 0; i < n; i++) {
        idx[i] = 2 * (i + 1);
        edges[2 * i] = (i + n - 1) % n;
        edges[2 * i + 1] = (i + 1) % n;
    }
    MPI_Comm ring;
    CHECK(MPI_Graph_create(MPI_COMM_WORLD, n, idx, edges, 0, &ring) == MPI_SUCCESS);

    /* To the left: 1 int at byte 4; to the right: 2 doubles at byte 16. */
    int sc[2] = {1, 2}, rc[2] = {2, 1};
    MPI_Aint sd[2] = {4, 16}, rd[2] = {8, 40};
    MPI_Datatype st[2] = {MPI_INT, MPI_DOUBLE}, rt[2] = {MPI_DOUBLE, MPI_INT};
    if (n == 2) {
        rc[0] = 1; rc[1] = 2;
        rd[0] = 40; rd[1] = 8;
        rt[0] = MPI_INT; rt[1] = MPI_DOUBLE;
    }
    char sb[64], rb[64];
    for (int round = 0; round < 3; round++) {
        MPI_Request req = MPI_REQUEST_NULL;
        fill(sb, rank, round);
        memset(rb, 0xff, sizeof rb);
        if (round == 0) {
            CHECK(MPI_Neighbor_alltoallw(sb, sc, sd, st, rb, rc, rd, rt, ring) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Ineighbor_alltoallw(sb, sc, sd, st, rb, rc, rd, rt, ring, &req) == MPI_SUCCESS);
            CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        }
        /* The left's two doubles (sent to its right), the right's int (sent to its left). */
        double d[2];
        int i;
        got(rb, left, right, round, d, &i);
        OK(rank, "%s round %d: from left %.2f %.2f, from right %d",
           round == 0 ? "blocking" : "nonblocking", round, d[0], d[1], i);
    }

    /* The persistent form: started three times with new data. */
    MPI_Request p;
    CHECK(MPI_Neighbor_alltoallw_init(sb, sc, sd, st, rb, rc, rd, rt, ring, MPI_INFO_NULL, &p) == MPI_SUCCESS);
    for (int round = 10; round < 13; round++) {
        fill(sb, rank, round);
        memset(rb, 0xff, sizeof rb);
        CHECK(MPI_Start(&p) == MPI_SUCCESS);
        CHECK(MPI_Wait(&p, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(p != MPI_REQUEST_NULL);
        double d[2];
        int i;
        got(rb, left, right, round, d, &i);
        OK(rank, "persistent round %d: from left %.2f %.2f, from right %d", round, d[0], d[1], i);
    }
    CHECK(MPI_Request_free(&p) == MPI_SUCCESS && p == MPI_REQUEST_NULL);
    MPI_Comm_free(&ring);
    free(idx);
    free(edges);
    MPI_Finalize();
    return 0;
}
