/* Point-to-point and completion: blocking and nonblocking sends of every mode, wildcards,
   MPI_PROC_NULL, probes, counts, truncation, and the wait/test family. Needs >= 2 ranks. */
#include "common.h"

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Status st;
    int count;

    /* Ring with Sendrecv; the status names the left neighbour. */
    int out = rank * 10, in = -1;
    CHECK(MPI_Sendrecv(&out, 1, MPI_INT, right, 5, &in, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    CHECK(in == left * 10 && st.MPI_SOURCE == left && st.MPI_TAG == 5);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == 1);
    OK(rank, "sendrecv got %d from %d", in, st.MPI_SOURCE);

    /* Sendrecv_replace. */
    double d[3] = {rank, rank + 0.5, rank + 0.25};
    CHECK(MPI_Sendrecv_replace(d, 3, MPI_DOUBLE, right, 6, left, 6, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    CHECK(d[0] == left && d[1] == left + 0.5 && d[2] == left + 0.25);

    /* Blocking modes between 0 and 1; large messages take the rendezvous path. */
    enum { BIG = 1 << 20 };
    int *big = malloc(BIG * sizeof(int));
    CHECK(big != NULL);
    if (rank == 0) {
        for (int i = 0; i < BIG; i++) big[i] = i ^ 0x5a5a;
        CHECK(MPI_Send(big, BIG, MPI_INT, 1, 1, MPI_COMM_WORLD) == MPI_SUCCESS);
        CHECK(MPI_Ssend(big, 10, MPI_INT, 1, 2, MPI_COMM_WORLD) == MPI_SUCCESS);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(MPI_Rsend(big, 3, MPI_INT, 1, 3, MPI_COMM_WORLD) == MPI_SUCCESS);
        int bsize = 4 * sizeof(int) + MPI_BSEND_OVERHEAD;
        void *bbuf = malloc(bsize), *back;
        CHECK(MPI_Buffer_attach(bbuf, bsize) == MPI_SUCCESS);
        CHECK(MPI_Bsend(big, 4, MPI_INT, 1, 4, MPI_COMM_WORLD) == MPI_SUCCESS);
        CHECK(MPI_Buffer_detach(&back, &bsize) == MPI_SUCCESS && back == bbuf);
        free(bbuf);
    } else if (rank == 1) {
        memset(big, 0, BIG * sizeof(int));
        CHECK(MPI_Recv(big, BIG, MPI_INT, 0, 1, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
        for (int i = 0; i < BIG; i++) CHECK(big[i] == (i ^ 0x5a5a));
        CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == BIG);
        CHECK(MPI_Get_count(&st, MPI_DOUBLE, &count) == MPI_SUCCESS && count == BIG / 2);
        CHECK(MPI_Recv(big, 10, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 2);
        int r[3];
        MPI_Request rq;
        CHECK(MPI_Irecv(r, 3, MPI_INT, 0, 3, MPI_COMM_WORLD, &rq) == MPI_SUCCESS);
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS && rq == MPI_REQUEST_NULL);
        CHECK(r[0] == (0 ^ 0x5a5a) && r[2] == (2 ^ 0x5a5a));
        /* Probe, then receive exactly what is there. */
        CHECK(MPI_Probe(0, 4, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
        CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == 4);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 4);
        int f[4];
        CHECK(MPI_Recv(f, count, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(f[3] == (3 ^ 0x5a5a));
        OK(rank, "blocking modes ok");
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(big);

    /* MPI_PROC_NULL: completes at once with source MPI_PROC_NULL and no data. */
    CHECK(MPI_Send(&out, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
    in = 77;
    CHECK(MPI_Recv(&in, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    CHECK(in == 77 && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == 0);

    /* Iprobe finds nothing on an unused tag. */
    int flag = 1;
    CHECK(MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, &st) == MPI_SUCCESS && flag == 0);

    /* Nonblocking exchange with every rank: Waitall, statuses in order. */
    int *sbuf = malloc(size * sizeof(int)), *rbuf = malloc(size * sizeof(int));
    MPI_Request *reqs = malloc(2 * size * sizeof(MPI_Request));
    MPI_Status *sts = malloc(2 * size * sizeof(MPI_Status));
    for (int p = 0; p < size; p++) {
        sbuf[p] = rank * 100 + p;
        rbuf[p] = -1;
        CHECK(MPI_Irecv(&rbuf[p], 1, MPI_INT, p, 7, MPI_COMM_WORLD, &reqs[p]) == MPI_SUCCESS);
    }
    for (int p = 0; p < size; p++)
        CHECK(MPI_Isend(&sbuf[p], 1, MPI_INT, p, 7, MPI_COMM_WORLD, &reqs[size + p]) == MPI_SUCCESS);
    CHECK(MPI_Waitall(2 * size, reqs, sts) == MPI_SUCCESS);
    for (int p = 0; p < size; p++) {
        CHECK(rbuf[p] == p * 100 + rank);
        CHECK(sts[p].MPI_SOURCE == p && sts[p].MPI_TAG == 7);
        CHECK(reqs[p] == MPI_REQUEST_NULL);
    }
    OK(rank, "waitall ok");

    /* Waitany / Waitsome / Testall / Testany / Test on a mix of receives and sends. */
    for (int p = 0; p < size; p++)
        CHECK(MPI_Irecv(&rbuf[p], 1, MPI_INT, p, 8, MPI_COMM_WORLD, &reqs[p]) == MPI_SUCCESS);
    for (int p = 0; p < size; p++)
        CHECK(MPI_Issend(&sbuf[p], 1, MPI_INT, p, 8, MPI_COMM_WORLD, &reqs[size + p]) == MPI_SUCCESS);
    int done = 0, idx;
    int seen[64] = {0};
    while (done < size) {
        CHECK(MPI_Waitany(size, reqs, &idx, &st) == MPI_SUCCESS);
        CHECK(idx >= 0 && idx < size && !seen[idx] && reqs[idx] == MPI_REQUEST_NULL);
        CHECK(st.MPI_SOURCE == idx && rbuf[idx] == idx * 100 + rank);
        seen[idx] = 1;
        done++;
    }
    CHECK(MPI_Waitany(size, reqs, &idx, &st) == MPI_SUCCESS && idx == MPI_UNDEFINED);
    int outcount, indices[64];
    done = 0;
    while (done < size) {
        CHECK(MPI_Waitsome(size, reqs + size, &outcount, indices, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
        CHECK(outcount >= 1);
        done += outcount;
    }
    CHECK(MPI_Waitsome(size, reqs + size, &outcount, indices, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    CHECK(outcount == MPI_UNDEFINED);
    OK(rank, "waitany waitsome ok");

    /* Test: a receive whose message has not been sent yet is not complete. */
    MPI_Request rq;
    CHECK(MPI_Irecv(&in, 1, MPI_INT, left, 9, MPI_COMM_WORLD, &rq) == MPI_SUCCESS);
    flag = 1;
    CHECK(MPI_Test(&rq, &flag, &st) == MPI_SUCCESS);
    CHECK(flag == 0 && rq != MPI_REQUEST_NULL);
    CHECK(MPI_Testall(1, &rq, &flag, MPI_STATUSES_IGNORE) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_Testany(1, &rq, &idx, &flag, &st) == MPI_SUCCESS && flag == 0 && idx == MPI_UNDEFINED);
    MPI_Barrier(MPI_COMM_WORLD);
    out = 1000 + rank;
    MPI_Request sq;
    CHECK(MPI_Isend(&out, 1, MPI_INT, right, 9, MPI_COMM_WORLD, &sq) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&sq) == MPI_SUCCESS && sq == MPI_REQUEST_NULL);
    flag = 0;
    while (!flag) CHECK(MPI_Request_get_status(rq, &flag, &st) == MPI_SUCCESS);
    CHECK(rq != MPI_REQUEST_NULL && st.MPI_SOURCE == left && in == 1000 + left);
    CHECK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag == 1 && rq == MPI_REQUEST_NULL);
    CHECK(MPI_Test(&rq, &flag, &st) == MPI_SUCCESS && flag == 1);
    CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    OK(rank, "test family ok");

    /* Truncation: MPI_ERR_TRUNCATE from Recv; MPI_ERR_IN_STATUS from Waitall. */
    MPI_Barrier(MPI_COMM_WORLD);
    int two[2] = {1, 2}, one = 0;
    CHECK(MPI_Send(two, 2, MPI_INT, right, 10, MPI_COMM_WORLD) == MPI_SUCCESS);
    st.MPI_SOURCE = st.MPI_TAG = -1;
    CHECK_RC(MPI_Recv(&one, 1, MPI_INT, left, 10, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 10);
    CHECK(MPI_Send(two, 2, MPI_INT, right, 11, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK_RC(MPI_Recv(&one, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE);
    CHECK(MPI_Send(two, 2, MPI_INT, right, 12, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Send(two, 1, MPI_INT, right, 13, MPI_COMM_WORLD) == MPI_SUCCESS);
    MPI_Request tr[2];
    int got12 = 0, got13 = 0;
    CHECK(MPI_Irecv(&got12, 1, MPI_INT, left, 12, MPI_COMM_WORLD, &tr[0]) == MPI_SUCCESS);
    CHECK(MPI_Irecv(&got13, 1, MPI_INT, left, 13, MPI_COMM_WORLD, &tr[1]) == MPI_SUCCESS);
    MPI_Status ts[2];
    CHECK_RC(MPI_Waitall(2, tr, ts), MPI_ERR_IN_STATUS);
    int c0 = -1, c1 = -1;
    MPI_Error_class(ts[0].MPI_ERROR, &c0);
    MPI_Error_class(ts[1].MPI_ERROR, &c1);
    /* The standard allows MPI_ERR_PENDING for a request not completed after the failure
       (MPICH reports it; viaduct completes it and reports MPI_SUCCESS). */
    CHECK(c0 == MPI_ERR_TRUNCATE);
    CHECK(c1 == MPI_SUCCESS || c1 == MPI_ERR_PENDING);
    if (c1 == MPI_ERR_PENDING) CHECK(MPI_Wait(&tr[1], MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(got13 == 1);
    OK(rank, "truncation ok");

    /* Blocking sends and receives of predefined datatypes on a communicator other than the
       world (and of no data from a NULL buffer): values, statuses, counts. */
    MPI_Comm ring;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &ring) == MPI_SUCCESS);
    double dv[3] = {rank + 0.5, rank + 1.5, rank + 2.5}, dr[4] = {0, 0, 0, -1};
    CHECK(MPI_Send(dv, 3, MPI_DOUBLE, right, 31, ring) == MPI_SUCCESS);
    st.MPI_SOURCE = st.MPI_TAG = -1;
    CHECK(MPI_Recv(dr, 4, MPI_DOUBLE, left, 31, ring, &st) == MPI_SUCCESS);
    int dn = -1;
    CHECK(MPI_Get_count(&st, MPI_DOUBLE, &dn) == MPI_SUCCESS && dn == 3);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 31);
    CHECK(dr[0] == left + 0.5 && dr[2] == left + 2.5 && dr[3] == -1);
    CHECK(MPI_Send(NULL, 0, MPI_INT, right, 32, ring) == MPI_SUCCESS);
    CHECK(MPI_Recv(NULL, 0, MPI_INT, left, 32, ring, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &dn) == MPI_SUCCESS && dn == 0 && st.MPI_TAG == 32);
    CHECK(MPI_Send(dv, 1, MPI_DOUBLE, right, 33, ring) == MPI_SUCCESS);
    CHECK(MPI_Recv(dr, 1, MPI_DOUBLE, left, 33, ring, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(dr[0] == left + 0.5);
    CHECK(MPI_Comm_free(&ring) == MPI_SUCCESS);
    OK(rank, "predefined datatypes on a duplicate ok");

    /* Long messages (past the eager limit) from rank 0 to rank 1: a window of nonblocking
       sends from distinct buffers lands whole in distinct receive buffers and nowhere past
       them; a long receive cancelled before its message was sent takes nothing and writes
       nothing; long truncated receives (nonblocking and blocking) report MPI_ERR_TRUNCATE
       and write nothing past their buffer (what they hold is not specified). */
    enum { LONG = 300000, WIN = 4, GUARD = 64 };
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank < 2) {
        int peer = 1 - rank, go = 0;
        size_t stride = LONG + GUARD;
        unsigned char *lb = malloc(WIN * stride);
        MPI_Request lr[WIN];
        MPI_Status ls[WIN];
        CHECK(lb != NULL);
        if (rank == 0) {
            for (int w = 0; w < WIN; w++)
                for (int i = 0; i < LONG; i++) lb[w * stride + i] = (unsigned char)(i * 7 + w);
            for (int w = 0; w < WIN; w++)
                CHECK(MPI_Isend(lb + w * stride, LONG, MPI_BYTE, peer, 20, MPI_COMM_WORLD, &lr[w]) == MPI_SUCCESS);
            CHECK(MPI_Waitall(WIN, lr, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
            CHECK(MPI_Recv(&go, 1, MPI_INT, peer, 23, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
            CHECK(MPI_Send(lb, LONG, MPI_BYTE, peer, 21, MPI_COMM_WORLD) == MPI_SUCCESS);
            CHECK(MPI_Send(lb + stride, LONG, MPI_BYTE, peer, 22, MPI_COMM_WORLD) == MPI_SUCCESS);
            CHECK(MPI_Send(lb + stride, LONG, MPI_BYTE, peer, 22, MPI_COMM_WORLD) == MPI_SUCCESS);
        } else {
            memset(lb, 0xEE, WIN * stride);
            for (int w = 0; w < WIN; w++)
                CHECK(MPI_Irecv(lb + w * stride, LONG, MPI_BYTE, peer, 20, MPI_COMM_WORLD, &lr[w]) == MPI_SUCCESS);
            CHECK(MPI_Waitall(WIN, lr, ls) == MPI_SUCCESS);
            for (int w = 0; w < WIN; w++) {
                CHECK(MPI_Get_count(&ls[w], MPI_BYTE, &count) == MPI_SUCCESS && count == LONG);
                CHECK(ls[w].MPI_SOURCE == peer && ls[w].MPI_TAG == 20);
                for (int i = 0; i < LONG; i++) CHECK(lb[w * stride + i] == (unsigned char)(i * 7 + w));
                for (int i = 0; i < GUARD; i++) CHECK(lb[w * stride + LONG + i] == 0xEE);
            }
            memset(lb, 0xEE, WIN * stride);
            MPI_Request cq;
            CHECK(MPI_Irecv(lb, LONG, MPI_BYTE, peer, 21, MPI_COMM_WORLD, &cq) == MPI_SUCCESS);
            CHECK(MPI_Cancel(&cq) == MPI_SUCCESS);
            CHECK(MPI_Wait(&cq, &st) == MPI_SUCCESS);
            CHECK(MPI_Test_cancelled(&st, &flag) == MPI_SUCCESS && flag == 1);
            CHECK(MPI_Send(&go, 1, MPI_INT, peer, 23, MPI_COMM_WORLD) == MPI_SUCCESS);
            unsigned char *other = lb + stride;
            CHECK(MPI_Recv(other, LONG, MPI_BYTE, peer, 21, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
            for (int i = 0; i < LONG; i++) CHECK(other[i] == (unsigned char)(i * 7));
            for (int i = 0; i < LONG; i++) CHECK(lb[i] == 0xEE);
            memset(other, 0xEE, stride);
            MPI_Request tq;
            CHECK(MPI_Irecv(other, LONG / 2, MPI_BYTE, peer, 22, MPI_COMM_WORLD, &tq) == MPI_SUCCESS);
            CHECK_RC(MPI_Wait(&tq, &st), MPI_ERR_TRUNCATE);
            for (int i = LONG / 2; i < LONG; i++) CHECK(other[i] == 0xEE);
            memset(other, 0xEE, stride);
            CHECK_RC(MPI_Recv(other, LONG / 2, MPI_BYTE, peer, 22, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE);
            CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 22);
            for (int i = LONG / 2; i < LONG; i++) CHECK(other[i] == 0xEE);
        }
        free(lb);
    }
    OK(rank, "long messages ok");

    /* No elements of MPI_DATATYPE_NULL: an empty message. */
    if (size >= 2 && rank < 2) {
        MPI_Status st0;
        int n0 = -1;
        if (rank == 0) CHECK(MPI_Send(NULL, 0, MPI_DATATYPE_NULL, 1, 31, MPI_COMM_WORLD) == MPI_SUCCESS);
        else {
            CHECK(MPI_Recv(NULL, 0, MPI_DATATYPE_NULL, 0, 31, MPI_COMM_WORLD, &st0) == MPI_SUCCESS);
            CHECK(MPI_Get_count(&st0, MPI_BYTE, &n0) == MPI_SUCCESS && n0 == 0);
        }
        OK(rank, "empty message of MPI_DATATYPE_NULL ok");
    }

    free(sbuf);
    free(rbuf);
    free(reqs);
    free(sts);
    MPI_Finalize();
    return 0;
}
