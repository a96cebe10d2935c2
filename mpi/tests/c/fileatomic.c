/* Atomic mode (MPI_File_set_atomicity): rank 0 keeps overwriting the same data, every element of
   a round equal to the round's number, while the other ranks read it at the same time; every
   read must see one round whole (all elements equal), never part of one write and part of
   another. Through a noncontiguous view (a vector of ints, stride 2: thousands of separate
   extents of the file) with the blocking and the nonblocking forms, and contiguously; the
   writer goes on until every reader has done its reads (MPI_Ibarrier), so reads and writes
   overlap. Also MPI_File_get_atomicity after each MPI_File_set_atomicity. */
#include "common.h"
#include <unistd.h>

enum { N = 4096, READS = 12 };

/* Checks that the N ints at buf are all equal; returns their value. */
static int whole(const int *buf, int rank, const char *what, int read) {
    for (int i = 1; i < N; i++) {
        if (buf[i] != buf[0]) {
            fprintf(stderr, "rank %d: %s read %d: element %d is %d, element 0 is %d: a partial write was seen\n",
                    rank, what, read, i, buf[i], buf[0]);
            fflush(stderr);
            CHECK(buf[i] == buf[0]);
        }
    }
    return buf[0];
}

/* One phase, at etype `at` of the view: rank 0 writes rounds 1, 2, ... until the readers are done; readers read READS
   times. `nb`: the nonblocking forms. Rounds count on from the last phase's, so that the data
   only grows. Returns (at rank 0) the rounds written in this phase. */
static int phase(MPI_File fh, MPI_Offset at, int rank, int size, const char *what, int nb) {
    static int buf[N];
    static int round = 0;
    MPI_Request done;
    MPI_Status st;
    int count;
    if (rank == 0) {
        int first = round, finished = 0;
        if (size == 1) finished = 1;
        CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &done) == MPI_SUCCESS);
        while (!finished || round == first) {
            round++;
            for (int i = 0; i < N; i++) buf[i] = round;
            if (nb) {
                MPI_Request r;
                CHECK(MPI_File_iwrite_at(fh, at, buf, N, MPI_INT, &r) == MPI_SUCCESS);
                CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS);
            } else {
                CHECK(MPI_File_write_at(fh, at, buf, N, MPI_INT, &st) == MPI_SUCCESS);
            }
            CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == N);
            CHECK(MPI_Test(&done, &finished, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        }
        if (size == 1) CHECK(MPI_Wait(&done, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        return round - first;
    }
    int last = 0;
    for (int k = 0; k < READS; k++) {
        for (int i = 0; i < N; i++) buf[i] = -1;
        if (nb) {
            MPI_Request r;
            CHECK(MPI_File_iread_at(fh, at, buf, N, MPI_INT, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS);
        } else {
            CHECK(MPI_File_read_at(fh, at, buf, N, MPI_INT, &st) == MPI_SUCCESS);
        }
        CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == N);
        int v = whole(buf, rank, what, k);
        /* Writes are serialized: a later read never sees an older round. */
        CHECK(v >= last);
        last = v;
    }
    CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &done) == MPI_SUCCESS);
    CHECK(MPI_Wait(&done, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    return 0;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char name[256];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/viaduct-mpi-fileatomic-%d", dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                        MPI_INFO_NULL, &fh) == MPI_SUCCESS);

    /* get_atomicity follows set_atomicity. */
    int flag = -1;
    CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_File_set_atomicity(fh, 1) == MPI_SUCCESS);
    CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 1);
    CHECK(MPI_File_set_atomicity(fh, 0) == MPI_SUCCESS);
    CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 0);
    CHECK(MPI_File_set_atomicity(fh, 1) == MPI_SUCCESS);
    CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 1);
    OK(rank, "get_atomicity follows set_atomicity");

    /* The file starts as 3 * N zero ints (round 0): the noncontiguous phases use every other
       one of the first 2 * N, the contiguous phase the last N. */
    if (rank == 0) {
        static int zero[3 * N];
        MPI_Status st;
        CHECK(MPI_File_write_at(fh, 0, zero, 3 * N, MPI_INT, &st) == MPI_SUCCESS);
    }
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);

    /* Noncontiguous: every other int of the file. */
    MPI_Datatype vec;
    CHECK(MPI_Type_vector(N, 1, 2, MPI_INT, &vec) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&vec) == MPI_SUCCESS);
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, vec, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    int rounds = phase(fh, 0, rank, size, "noncontiguous", 0);
    CHECK(rank != 0 || rounds >= 1);
    OK(rank, "noncontiguous view: every read whole");
    rounds = phase(fh, 0, rank, size, "noncontiguous nonblocking", 1);
    CHECK(rank != 0 || rounds >= 1);
    OK(rank, "noncontiguous view, nonblocking: every read whole");

    /* Contiguous: a view of ints, the last N of the file. */
    CHECK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    rounds = phase(fh, 2 * N, rank, size, "contiguous", 0);
    CHECK(rank != 0 || rounds >= 1);
    OK(rank, "contiguous: every read whole");

    CHECK(MPI_File_set_atomicity(fh, 0) == MPI_SUCCESS);
    CHECK(MPI_File_get_atomicity(fh, &flag) == MPI_SUCCESS && flag == 0);
    OK(rank, "atomic mode off again");
    CHECK(MPI_Type_free(&vec) == MPI_SUCCESS);
    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
