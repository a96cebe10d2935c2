/* The shared file pointer: MPI_File_write_shared/read_shared/iwrite_shared/iread_shared from
   every rank at once (records never overlap and none is lost), MPI_File_write_ordered/
   read_ordered (rank order), MPI_File_seek_shared, MPI_File_get_position_shared, and
   MPI_File_set_view resetting the pointer. */
#include "common.h"
#include <unistd.h>

enum { ROUNDS = 40, MAXLEN = 64 };

/* A record: rank, round, length of the payload, then the payload. */
typedef struct {
    int rank, round, len;
    unsigned char data[MAXLEN];
} rec_t;

static int rec_len(int rank, int round) { return 1 + (rank * 7 + round * 13) % MAXLEN; }

static int fill(rec_t *r, int rank, int round) {
    r->rank = rank;
    r->round = round;
    r->len = rec_len(rank, round);
    for (int i = 0; i < r->len; i++) r->data[i] = (unsigned char)(rank * 31 + round * 7 + i);
    return 3 * (int)sizeof(int) + r->len;
}

/* Checks the records of [0, n) bytes of buf: each whole, each (rank, round) once; returns the
   number of records. */
static int parse(const unsigned char *buf, long n, int size, int rounds, char *seen) {
    long at = 0;
    int recs = 0;
    memset(seen, 0, (size_t)size * rounds);
    while (at < n) {
        rec_t r;
        CHECK(n - at >= 3 * (long)sizeof(int));
        memcpy(&r, buf + at, 3 * sizeof(int));
        CHECK(r.rank >= 0 && r.rank < size && r.round >= 0 && r.round < rounds);
        CHECK(r.len == rec_len(r.rank, r.round));
        CHECK(n - at >= 3 * (long)sizeof(int) + r.len);
        const unsigned char *d = buf + at + 3 * sizeof(int);
        for (int i = 0; i < r.len; i++) CHECK(d[i] == (unsigned char)(r.rank * 31 + r.round * 7 + i));
        CHECK(!seen[r.rank * rounds + r.round]);
        seen[r.rank * rounds + r.round] = 1;
        at += 3 * sizeof(int) + r.len;
        recs++;
    }
    return recs;
}

static void sync_all(MPI_File fh) {
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_sync(fh) == MPI_SUCCESS);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen;
    MPI_Get_library_version(lib, &liblen);
    int on_viaduct = strstr(lib, "viaduct") != NULL;
    char name[256];
    if (rank == 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(name, sizeof name, "%s/viaduct-mpi-fileshared-%d", dir ? dir : "/tmp", (int)getpid());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_File fh;
    CHECK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                        MPI_INFO_NULL, &fh) == MPI_SUCCESS);
    MPI_Status st;
    int count;
    MPI_Offset shared;
    CHECK(MPI_File_get_position_shared(fh, &shared) == MPI_SUCCESS && shared == 0);
    MPI_Barrier(MPI_COMM_WORLD); /* before any rank moves the pointer */

    /* Every rank appends its records at once with write_shared (odd rounds with
       iwrite_shared). */
    long expect = 0;
    for (int q = 0; q < size; q++)
        for (int k = 0; k < ROUNDS; k++) expect += 3 * sizeof(int) + rec_len(q, k);
    for (int k = 0; k < ROUNDS; k++) {
        rec_t r;
        int n = fill(&r, rank, k);
        if (k % 2 == 0) {
            CHECK(MPI_File_write_shared(fh, &r, n, MPI_BYTE, &st) == MPI_SUCCESS);
        } else {
            MPI_Request rq;
            CHECK(MPI_File_iwrite_shared(fh, &r, n, MPI_BYTE, &rq) == MPI_SUCCESS);
            CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
        }
        CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS && count == n);
    }
    sync_all(fh);
    CHECK(MPI_File_get_position_shared(fh, &shared) == MPI_SUCCESS && shared == expect);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset fsize;
    CHECK(MPI_File_get_size(fh, &fsize) == MPI_SUCCESS && fsize == expect);
    unsigned char *all = malloc(expect);
    char *seen = malloc((size_t)size * ROUNDS);
    CHECK(MPI_File_read_at(fh, 0, all, (int)expect, MPI_BYTE, &st) == MPI_SUCCESS);
    CHECK(parse(all, expect, size, ROUNDS, seen) == size * ROUNDS);
    OK(rank, "concurrent write_shared: %d records, none lost, none overlapping", size * ROUNDS);

    /* read_shared from every rank at once: each record is read by exactly one rank. */
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET) == MPI_SUCCESS);
    CHECK(MPI_File_get_position_shared(fh, &shared) == MPI_SUCCESS && shared == 0);
    MPI_Barrier(MPI_COMM_WORLD); /* before any rank moves the pointer */
    /* Records differ in length: read fixed chunks of 50 bytes and gather what each rank got. */
    enum { CHUNK = 50 };
    long chunks = (expect + CHUNK - 1) / CHUNK;
    unsigned char *mine = malloc(chunks * CHUNK);
    long *where = malloc(chunks * sizeof(long));
    int got = 0;
    for (;;) {
        MPI_Request rq;
        unsigned char c[CHUNK];
        if (got % 2 == 0) {
            CHECK(MPI_File_read_shared(fh, c, CHUNK, MPI_BYTE, &st) == MPI_SUCCESS);
        } else {
            CHECK(MPI_File_iread_shared(fh, c, CHUNK, MPI_BYTE, &rq) == MPI_SUCCESS);
            CHECK(MPI_Wait(&rq, &st) == MPI_SUCCESS);
        }
        CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS);
        if (count == 0) break;
        CHECK(got < chunks);
        memcpy(mine + (long)got * CHUNK, c, count);
        where[got] = count;
        got++;
    }
    /* Each chunk read matches the file somewhere; the chunks of all ranks cover it exactly:
       their total is the file's size. */
    long bytes = 0;
    for (int i = 0; i < got; i++) {
        bytes += where[i];
        int found = 0;
        for (long off = 0; off + where[i] <= expect && !found; off += CHUNK)
            found = memcmp(all + off, mine + (long)i * CHUNK, where[i]) == 0;
        CHECK(found);
    }
    long sum = 0;
    MPI_Allreduce(&bytes, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == expect);
    OK(rank, "concurrent read_shared: every chunk read once");

    /* write_ordered: rank r writes r + 1 ints of value r after the records, in rank order. */
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_seek_shared(fh, 0, MPI_SEEK_END) == MPI_SUCCESS);
    CHECK(MPI_File_get_position_shared(fh, &shared) == MPI_SUCCESS && shared == expect);
    MPI_Barrier(MPI_COMM_WORLD);
    int vals[16], back[16];
    for (int i = 0; i <= rank; i++) vals[i] = 500 + rank;
    CHECK(MPI_File_write_ordered(fh, vals, rank + 1, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == rank + 1);
    sync_all(fh);
    int total = size * (size + 1) / 2;
    CHECK(MPI_File_get_position_shared(fh, &shared) == MPI_SUCCESS && shared == expect + total * (long)sizeof(int));
    MPI_Barrier(MPI_COMM_WORLD);
    int before = rank * (rank + 1) / 2;
    CHECK(MPI_File_read_at(fh, expect + before * (long)sizeof(int), back, rank + 1, MPI_INT, &st) == MPI_SUCCESS);
    for (int i = 0; i <= rank; i++) CHECK(back[i] == 500 + rank);
    /* read_ordered reads them back the same way (seek_shared relative to the current one). */
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_seek_shared(fh, -total * (MPI_Offset)sizeof(int), MPI_SEEK_CUR) == MPI_SUCCESS);
    memset(back, 0, sizeof back);
    CHECK(MPI_File_read_ordered(fh, back, rank + 1, MPI_INT, &st) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_INT, &count) == MPI_SUCCESS && count == rank + 1);
    for (int i = 0; i <= rank; i++) CHECK(back[i] == 500 + rank);
    OK(rank, "write_ordered and read_ordered in rank order");

    /* A view with etype MPI_INT resets the shared pointer; it counts ints from then on. */
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(MPI_File_set_view(fh, expect, MPI_INT, MPI_INT, "native", MPI_INFO_NULL) == MPI_SUCCESS);
    CHECK(MPI_File_get_position_shared(fh, &shared) == MPI_SUCCESS && shared == 0);
    MPI_Barrier(MPI_COMM_WORLD); /* before any rank moves the pointer */
    memset(back, 0, sizeof back);
    CHECK(MPI_File_read_ordered(fh, back, rank + 1, MPI_INT, &st) == MPI_SUCCESS);
    for (int i = 0; i <= rank; i++) CHECK(back[i] == 500 + rank);
    CHECK(MPI_File_get_position_shared(fh, &shared) == MPI_SUCCESS && shared == total);
    MPI_Barrier(MPI_COMM_WORLD);
    /* A negative position: MPI_ERR_ARG on every rank. viaduct only: MPICH 4.0.2 refuses it on
       rank 0 alone and returns MPI_SUCCESS on the others. */
    if (on_viaduct) CHECK_RC(MPI_File_seek_shared(fh, -1, MPI_SEEK_SET), MPI_ERR_ARG);
    OK(rank, "set_view resets the shared pointer, which counts etypes");

    CHECK(MPI_File_close(&fh) == MPI_SUCCESS);
    free(all);
    free(seen);
    free(mine);
    free(where);
    MPI_Finalize();
    return 0;
}
