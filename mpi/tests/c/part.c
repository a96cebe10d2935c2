/* MPI-4 partitioned communication around a ring (rank r sends to r+1, receives from r-1):
   requests started several times, partitions marked by MPI_Pready, MPI_Pready_range and
   MPI_Pready_list in any order, MPI_Parrived polled until the data is there, a message past
   the eager limit, a derived datatype, partition counts that differ between the sides, a
   partitioned message next to an ordinary one with the same tag (an MPI_ANY_TAG receive takes
   the ordinary one), MPI_Request_free; on viaduct, wrong use and its error class. */
#include "common.h"

#define ROUNDS 3
#define PARTS 8
#define PER 4

static void wait_arrived(MPI_Request r, int partition) {
    double t0 = MPI_Wtime();
    int flag = 0;
    while (!flag) {
        CHECK(MPI_Parrived(r, partition, &flag) == MPI_SUCCESS);
        CHECK(MPI_Wtime() - t0 < 60.0);
    }
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm comm = MPI_COMM_WORLD;
    int to = (rank + 1) % n, from = (rank + n - 1) % n;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    CHECK(MPI_Get_library_version(lib, &liblen) == MPI_SUCCESS);
    int on_viaduct = strstr(lib, "viaduct") != NULL;
    MPI_Status st;

    /* Small: the same pair of requests started ROUNDS times. */
    int sbuf[PARTS * PER], rbuf[PARTS * PER];
    MPI_Request sreq, rreq;
    CHECK(MPI_Psend_init(sbuf, PARTS, PER, MPI_INT, to, 7, comm, MPI_INFO_NULL, &sreq) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(rbuf, PARTS, PER, MPI_INT, from, 7, comm, MPI_INFO_NULL, &rreq) == MPI_SUCCESS);
    long sum = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < PARTS * PER; i++) {
            sbuf[i] = -1;
            rbuf[i] = -1;
        }
        MPI_Request both[2] = {rreq, sreq};
        CHECK(MPI_Startall(2, both) == MPI_SUCCESS);
        /* Fill and mark the partitions from the last one down, by the three calls. */
        for (int p = PARTS - 1; p >= 0; p--)
            for (int k = 0; k < PER; k++) sbuf[p * PER + k] = rank * 1000 + round * 100 + p * PER + k;
        CHECK(MPI_Pready(PARTS - 1, sreq) == MPI_SUCCESS);
        CHECK(MPI_Pready_range(3, PARTS - 2, sreq) == MPI_SUCCESS);
        int list[3] = {2, 0, 1};
        CHECK(MPI_Pready_list(3, list, sreq) == MPI_SUCCESS);
        wait_arrived(rreq, PARTS / 2);
        for (int p = 0; p < PARTS; p++) wait_arrived(rreq, p);
        for (int i = 0; i < PARTS * PER; i++) CHECK(rbuf[i] == from * 1000 + round * 100 + i);
        CHECK(MPI_Wait(&sreq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(MPI_Wait(&rreq, &st) == MPI_SUCCESS);
        CHECK(sreq != MPI_REQUEST_NULL && rreq != MPI_REQUEST_NULL);
        for (int i = 0; i < PARTS * PER; i++) sum += rbuf[i];
    }
    OK(rank, "small rounds sum %ld", sum);

    /* Large (past the eager limit): 8 partitions of 32768 doubles, completed by MPI_Test. */
    int big = 32768;
    double *sb = malloc(sizeof(double) * big * PARTS), *rb = malloc(sizeof(double) * big * PARTS);
    CHECK(sb && rb);
    MPI_Request bs, br;
    CHECK(MPI_Precv_init(rb, PARTS, big, MPI_DOUBLE, from, 8, comm, MPI_INFO_NULL, &br) == MPI_SUCCESS);
    CHECK(MPI_Psend_init(sb, PARTS, big, MPI_DOUBLE, to, 8, comm, MPI_INFO_NULL, &bs) == MPI_SUCCESS);
    for (int round = 0; round < 2; round++) {
        CHECK(MPI_Start(&br) == MPI_SUCCESS);
        CHECK(MPI_Start(&bs) == MPI_SUCCESS);
        for (int p = 0; p < PARTS; p++) {
            for (int k = 0; k < big; k++) sb[p * big + k] = rank + round + p * 0.5 + k;
            CHECK(MPI_Pready(p, bs) == MPI_SUCCESS);
        }
        int done = 0;
        double t0 = MPI_Wtime();
        while (!done) {
            int f1 = 0, f2 = 0;
            CHECK(MPI_Test(&bs, &f1, MPI_STATUS_IGNORE) == MPI_SUCCESS);
            CHECK(MPI_Test(&br, &f2, MPI_STATUS_IGNORE) == MPI_SUCCESS);
            /* A completed request stays inactive; testing it again gives true at once. */
            done = f1 && f2;
            CHECK(MPI_Wtime() - t0 < 60.0);
        }
        int good = 1;
        for (int p = 0; p < PARTS; p++)
            for (int k = 0; k < big; k++)
                if (rb[p * big + k] != from + round + p * 0.5 + k) good = 0;
        CHECK(good);
    }
    OK(rank, "large ok");
    CHECK(MPI_Request_free(&bs) == MPI_SUCCESS && bs == MPI_REQUEST_NULL);
    CHECK(MPI_Request_free(&br) == MPI_SUCCESS && br == MPI_REQUEST_NULL);

    /* A derived datatype with holes, and partition counts that differ: the send has 2
       partitions of 3 vectors, the receive 6 partitions of 1. */
    MPI_Datatype vec;
    CHECK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&vec) == MPI_SUCCESS);
    int vs[24], vr[24];
    for (int i = 0; i < 24; i++) {
        vs[i] = rank * 100 + i;
        vr[i] = -1;
    }
    MPI_Request ds, dr;
    CHECK(MPI_Psend_init(vs, 2, 3, vec, to, 9, comm, MPI_INFO_NULL, &ds) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(vr, 6, 1, vec, from, 9, comm, MPI_INFO_NULL, &dr) == MPI_SUCCESS);
    CHECK(MPI_Start(&dr) == MPI_SUCCESS);
    CHECK(MPI_Start(&ds) == MPI_SUCCESS);
    CHECK(MPI_Pready_range(0, 1, ds) == MPI_SUCCESS);
    wait_arrived(dr, 5);
    MPI_Request dd[2] = {ds, dr};
    CHECK(MPI_Waitall(2, dd, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    /* A vector of 2 ints with stride 2 has extent 3 ints: 6 of them cover elements 0..17. */
    for (int e = 0; e < 6; e++) {
        CHECK(vr[e * 3] == from * 100 + e * 3);
        CHECK(vr[e * 3 + 1] == -1);
        CHECK(vr[e * 3 + 2] == from * 100 + e * 3 + 2);
    }
    OK(rank, "derived ok");
    CHECK(MPI_Request_free(&ds) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&dr) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&vec) == MPI_SUCCESS);

    /* A partitioned message and an ordinary one with the same tag: the ordinary MPI_ANY_TAG
       receive takes the ordinary message only. */
    int pv = rank, pr = -1, ov = 1000 + rank, orr = -1;
    MPI_Request ps, prq, oreq;
    CHECK(MPI_Irecv(&orr, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &oreq) == MPI_SUCCESS);
    CHECK(MPI_Psend_init(&pv, 1, 1, MPI_INT, to, 11, comm, MPI_INFO_NULL, &ps) == MPI_SUCCESS);
    CHECK(MPI_Precv_init(&pr, 1, 1, MPI_INT, from, 11, comm, MPI_INFO_NULL, &prq) == MPI_SUCCESS);
    CHECK(MPI_Start(&prq) == MPI_SUCCESS);
    CHECK(MPI_Start(&ps) == MPI_SUCCESS);
    CHECK(MPI_Pready(0, ps) == MPI_SUCCESS);
    CHECK(MPI_Wait(&ps, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Send(&ov, 1, MPI_INT, to, 11, comm) == MPI_SUCCESS);
    CHECK(MPI_Wait(&oreq, &st) == MPI_SUCCESS);
    CHECK(orr == 1000 + from && st.MPI_TAG == 11 && st.MPI_SOURCE == from);
    CHECK(MPI_Wait(&prq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(pr == from);
    OK(rank, "separate from ordinary messages ok");

    if (on_viaduct) {
        CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN) == MPI_SUCCESS);
        int f = -1, any = 0;
        MPI_Request x;
        /* Not started: inactive. */
        CHECK_RC(MPI_Pready(0, ps), MPI_ERR_REQUEST);
        /* The receive is complete and inactive: its partitions read as arrived. */
        CHECK_RC(MPI_Parrived(prq, 0, &f), MPI_SUCCESS);
        CHECK(f == 1);
        CHECK_RC(MPI_Parrived(prq, 1, &f), MPI_ERR_ARG);
        CHECK_RC(MPI_Parrived(ps, 0, &f), MPI_ERR_REQUEST);
        CHECK_RC(MPI_Pready(0, prq), MPI_ERR_REQUEST);
        CHECK_RC(MPI_Pready(0, MPI_REQUEST_NULL), MPI_ERR_REQUEST);
        CHECK_RC(MPI_Psend_init(sbuf, -1, 1, MPI_INT, to, 1, comm, MPI_INFO_NULL, &x), MPI_ERR_ARG);
        CHECK_RC(MPI_Psend_init(sbuf, 1, -1, MPI_INT, to, 1, comm, MPI_INFO_NULL, &x), MPI_ERR_COUNT);
        CHECK_RC(MPI_Psend_init(sbuf, 1, 1, MPI_INT, n, 1, comm, MPI_INFO_NULL, &x), MPI_ERR_RANK);
        CHECK_RC(MPI_Precv_init(rbuf, 1, 1, MPI_INT, MPI_ANY_SOURCE, 1, comm, MPI_INFO_NULL, &x), MPI_ERR_RANK);
        CHECK_RC(MPI_Precv_init(rbuf, 1, 1, MPI_INT, from, MPI_ANY_TAG, comm, MPI_INFO_NULL, &x), MPI_ERR_TAG);
        CHECK_RC(MPI_Psend_init(sbuf, 1, 1, MPI_INT, to, 1, MPI_COMM_NULL, MPI_INFO_NULL, &x), MPI_ERR_COMM);
        /* Started: a partition out of range, one marked twice, an empty range, then a
           request every partition of which is marked (inactive for MPI_Pready). */
        CHECK(MPI_Start(&sreq) == MPI_SUCCESS);
        CHECK(MPI_Start(&rreq) == MPI_SUCCESS);
        CHECK_RC(MPI_Start(&sreq), MPI_ERR_REQUEST);
        CHECK_RC(MPI_Pready(PARTS, sreq), MPI_ERR_ARG);
        CHECK_RC(MPI_Pready(-1, sreq), MPI_ERR_ARG);
        CHECK_RC(MPI_Pready_range(2, 1, sreq), MPI_ERR_ARG);
        CHECK_RC(MPI_Pready(1, sreq), MPI_SUCCESS);
        CHECK_RC(MPI_Pready(1, sreq), MPI_ERR_ARG);
        int dup[2] = {2, 2};
        CHECK_RC(MPI_Pready_list(2, dup, sreq), MPI_ERR_ARG);
        CHECK_RC(MPI_Pready_list(-1, dup, sreq), MPI_ERR_ARG);
        CHECK_RC(MPI_Parrived(rreq, PARTS, &f), MPI_ERR_ARG);
        CHECK_RC(MPI_Pready(0, sreq), MPI_SUCCESS);
        CHECK_RC(MPI_Pready_range(2, PARTS - 1, sreq), MPI_SUCCESS);
        CHECK_RC(MPI_Pready(0, sreq), MPI_ERR_REQUEST);
        MPI_Request both[2] = {sreq, rreq};
        CHECK(MPI_Waitall(2, both, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK_RC(MPI_Pready(0, sreq), MPI_ERR_REQUEST);
        /* A blocking wait on a send with a partition left unmarked, in a single-threaded
           process: nothing could mark it, so the wait fails instead of waiting for ever. */
        MPI_Request ws, wr;
        int two[2] = {1, 2}, got2[2] = {0, 0};
        CHECK(MPI_Psend_init(two, 2, 1, MPI_INT, to, 12, comm, MPI_INFO_NULL, &ws) == MPI_SUCCESS);
        CHECK(MPI_Precv_init(got2, 2, 1, MPI_INT, from, 12, comm, MPI_INFO_NULL, &wr) == MPI_SUCCESS);
        CHECK(MPI_Start(&wr) == MPI_SUCCESS);
        CHECK(MPI_Start(&ws) == MPI_SUCCESS);
        CHECK(MPI_Pready(0, ws) == MPI_SUCCESS);
        CHECK_RC(MPI_Wait(&ws, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
        CHECK_RC(MPI_Pready(1, ws), MPI_ERR_REQUEST);
        CHECK_RC(MPI_Parrived(wr, 0, &f), MPI_SUCCESS);
        CHECK(f == 0);
        CHECK(MPI_Cancel(&wr) == MPI_SUCCESS);
        CHECK(MPI_Wait(&wr, &st) == MPI_SUCCESS);
        int cancelled = 0;
        CHECK(MPI_Test_cancelled(&st, &cancelled) == MPI_SUCCESS && cancelled);
        CHECK(MPI_Request_free(&ws) == MPI_SUCCESS);
        CHECK(MPI_Request_free(&wr) == MPI_SUCCESS);
        any = 1;
        OK(rank, "error classes checked %d", any);
    } else {
        OK(rank, "error classes checked %d", 1);
    }

    CHECK(MPI_Request_free(&sreq) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&rreq) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&ps) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&prq) == MPI_SUCCESS);
    free(sb);
    free(rb);
    MPI_Finalize();
    return 0;
}
