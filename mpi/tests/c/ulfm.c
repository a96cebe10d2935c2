/* User-level failure mitigation (MPICH's MPIX_ names), on viaduct: the last rank kills itself
   (SIGKILL) mid-job; rank 0's receive from it gives MPIX_ERR_PROC_FAILED, rank 0 revokes the
   communicator and the other survivors' calls on it then fail with MPIX_ERR_REVOKED; every
   survivor shrinks it, sums over the shrunk communicator, agrees (MPIX_ERR_PROC_FAILED
   before the failure is acknowledged, then the AND of the flags) and reads the acknowledged
   group. Run with VIADUCT_LAUNCH_KEEP_GOING=1 so that the launcher keeps the survivors. */
#include "common.h"
#include <signal.h>
#include <time.h>
#include <unistd.h> /* usleep */

static int class_of(int rc) {
    int c = -1;
    if (rc == MPI_SUCCESS) return 0;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 3);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm comm;
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm) == MPI_SUCCESS);
    int victim = size - 1;
    CHECK(MPI_Barrier(comm) == MPI_SUCCESS);
    if (rank == victim) raise(SIGKILL);

    if (rank == 0) {
        int x = 0;
        int k = class_of(MPI_Recv(&x, 1, MPI_INT, victim, 1, comm, MPI_STATUS_IGNORE));
        OK(rank, "receive from the dead rank: %s", k == MPIX_ERR_PROC_FAILED ? "MPIX_ERR_PROC_FAILED" : "wrong");
        CHECK(MPIX_Comm_revoke(comm) == MPI_SUCCESS);
        k = class_of(MPI_Send(&x, 1, MPI_INT, 1, 1, comm));
        OK(rank, "send on the revoked communicator: %s", k == MPIX_ERR_REVOKED ? "MPIX_ERR_REVOKED" : "wrong");
    } else {
        /* Probe until the revoke notice arrives (bounded); no ULFM call was made here. */
        time_t end = time(NULL) + 30;
        int k = 0, flag = 0;
        while (k == 0 && time(NULL) < end) {
            k = class_of(MPI_Iprobe(0, 9, comm, &flag, MPI_STATUS_IGNORE));
            usleep(1000);
        }
        OK(rank, "a call after the revoke: %s", k == MPIX_ERR_REVOKED ? "MPIX_ERR_REVOKED" : "wrong");
    }

    /* Nothing acknowledged yet (the revoked communicator still takes the ULFM calls). */
    MPI_Group none;
    CHECK(MPIX_Comm_failure_get_acked(comm, &none) == MPI_SUCCESS);
    CHECK(none == MPI_GROUP_EMPTY);

    MPI_Comm shrunk;
    CHECK(MPIX_Comm_shrink(comm, &shrunk) == MPI_SUCCESS);
    int ssize = 0, srank = -1, sum = -1;
    CHECK(MPI_Comm_size(shrunk, &ssize) == MPI_SUCCESS);
    CHECK(MPI_Comm_rank(shrunk, &srank) == MPI_SUCCESS);
    CHECK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, shrunk) == MPI_SUCCESS);
    OK(rank, "shrunk: size %d, rank %d, sum of world ranks %d (want %d)", ssize, srank, sum,
       (size - 1) * (size - 2) / 2);

    /* MPI_COMM_WORLD shrinks too (it was never revoked); the shrunk one shrinks to itself. */
    MPI_Comm w2, s2;
    int w2size = 0, s2size = 0;
    CHECK(MPIX_Comm_shrink(MPI_COMM_WORLD, &w2) == MPI_SUCCESS);
    CHECK(MPIX_Comm_shrink(shrunk, &s2) == MPI_SUCCESS);
    CHECK(MPI_Comm_size(w2, &w2size) == MPI_SUCCESS && MPI_Comm_size(s2, &s2size) == MPI_SUCCESS);
    OK(rank, "world shrunk to %d, shrunk again to %d", w2size, s2size);
    CHECK(MPI_Comm_free(&w2) == MPI_SUCCESS && MPI_Comm_free(&s2) == MPI_SUCCESS);

    int flag = rank == 1 ? 6 : 7;
    int rc = MPIX_Comm_agree(shrunk, &flag);
    OK(rank, "agree on the shrunk communicator: class %d, flag %d", class_of(rc), flag);

    flag = 1;
    rc = MPIX_Comm_agree(comm, &flag);
    OK(rank, "agree before the acknowledgement: %s, flag %d",
       class_of(rc) == MPIX_ERR_PROC_FAILED ? "MPIX_ERR_PROC_FAILED" : "wrong", flag);
    CHECK(MPIX_Comm_failure_ack(comm) == MPI_SUCCESS);
    MPI_Group acked, wg;
    CHECK(MPIX_Comm_failure_get_acked(comm, &acked) == MPI_SUCCESS);
    int n = -1, r0 = 0, w0 = -1;
    CHECK(MPI_Group_size(acked, &n) == MPI_SUCCESS);
    CHECK(MPI_Comm_group(comm, &wg) == MPI_SUCCESS);
    CHECK(MPI_Group_translate_ranks(acked, 1, &r0, wg, &w0) == MPI_SUCCESS);
    OK(rank, "acknowledged: %d process(es), rank %d", n, w0);
    flag = 1;
    rc = MPIX_Comm_agree(comm, &flag);
    OK(rank, "agree after the acknowledgement: class %d, flag %d", class_of(rc), flag);

    /* Wrong use: NULL arguments, MPI_COMM_NULL. */
    OK(rank, "wrong use: %d %d %d", class_of(MPIX_Comm_shrink(comm, NULL)),
       class_of(MPIX_Comm_agree(comm, NULL)), class_of(MPIX_Comm_revoke(MPI_COMM_NULL)));

    CHECK(MPI_Group_free(&acked) == MPI_SUCCESS && MPI_Group_free(&wg) == MPI_SUCCESS);
    CHECK(MPI_Comm_free(&shrunk) == MPI_SUCCESS);
    CHECK(MPI_Comm_free(&comm) == MPI_SUCCESS);
    /* The launcher's barriers (MPI_Finalize's) complete without the dead rank. */
    MPI_Finalize();
    return 0;
}
