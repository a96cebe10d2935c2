/* Counts past 32 bits (MPI 4.1's large-count functions): a contiguous datatype of 2^31 + 5
   bytes (its size and extent, MPI_Type_size's MPI_UNDEFINED, its envelope and contents with
   the count as a large count), a vector with a stride past 2^31, and a message of 2^31 + 8
   bytes by MPI_Send_c / MPI_Recv_c and again by persistent requests, checked byte for byte
   (against a pattern with memcmp) with MPI_Get_count_c, then scattered and gathered back by MPI_Scatter_c and
   MPI_Gather_c (2^31 + 8 bytes per rank); an hindexed
   type with a block past 2^31 bytes (its large counts) and an indexed-block one of ints. */
#include "common.h"
#include <stdint.h>

/* The large data: byte `at` is pat[(at + seed) % PERIOD], a pseudo-random pattern whose
   period is no power of two, so a piece that lands shifted by any amount differs. It is
   written and checked a period at a time with memcpy and memcmp, which keeps the 2^31-byte
   checks quick in unoptimised builds. */
#define PERIOD 1000003
static unsigned char pat[2 * PERIOD];

static void make_pattern(void) {
    unsigned x = 12345;
    for (int i = 0; i < PERIOD; i++) {
        x = x * 1103515245u + 12345u;
        pat[i] = pat[i + PERIOD] = (unsigned char)(x >> 16);
    }
}

/* Writes the `n` bytes of the data from offset `from` (with `seed`) to `p`. */
static void fill(unsigned char *p, MPI_Count n, MPI_Count from, int seed) {
    for (MPI_Count i = 0; i < n;) {
        MPI_Count piece = n - i < PERIOD ? n - i : PERIOD;
        memcpy(p + i, pat + (from + i + seed) % PERIOD, (size_t)piece);
        i += piece;
    }
}

/* The pieces (of a period each) of `p`'s `n` bytes that differ from the data from `from`. */
static MPI_Count wrong(const unsigned char *p, MPI_Count n, MPI_Count from, int seed) {
    MPI_Count bad = 0;
    for (MPI_Count i = 0; i < n;) {
        MPI_Count piece = n - i < PERIOD ? n - i : PERIOD;
        if (memcmp(p + i, pat + (from + i + seed) % PERIOD, (size_t)piece) != 0) bad++;
        i += piece;
    }
    return bad;
}

int main(int argc, char **argv) {
    int me, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const MPI_Count big = ((MPI_Count)1 << 31) + 5;
    MPI_Datatype t, v, got;
    MPI_Count size, lb, extent;
    CHECK(MPI_Type_contiguous_c(big, MPI_BYTE, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS);
    CHECK(MPI_Type_size_c(t, &size) == MPI_SUCCESS && MPI_Type_get_extent_c(t, &lb, &extent) == MPI_SUCCESS);
    int isize = 0;
    CHECK(MPI_Type_size(t, &isize) == MPI_SUCCESS);
    OK(me, "contiguous_c: size %lld lb %lld extent %lld, MPI_Type_size %s", (long long)size,
       (long long)lb, (long long)extent, isize == MPI_UNDEFINED ? "MPI_UNDEFINED" : "a number");
    MPI_Count ni, na, nc, nd, counts[1];
    int comb;
    CHECK(MPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &comb) == MPI_SUCCESS);
    CHECK(MPI_Type_get_contents_c(t, ni, na, nc, nd, NULL, NULL, counts, &got) == MPI_SUCCESS);
    OK(me, "envelope_c: %lld ints, %lld addresses, %lld large counts, %lld types, contiguous %d, count %lld, type MPI_BYTE %d",
       (long long)ni, (long long)na, (long long)nc, (long long)nd, comb == MPI_COMBINER_CONTIGUOUS,
       (long long)counts[0], got == MPI_BYTE);
    CHECK(MPI_Type_vector_c(2, 3, big + 6, MPI_BYTE, &v) == MPI_SUCCESS);
    CHECK(MPI_Type_size_c(v, &size) == MPI_SUCCESS && MPI_Type_get_extent_c(v, &lb, &extent) == MPI_SUCCESS);
    OK(me, "vector_c: size %lld extent %lld", (long long)size, (long long)extent);
    CHECK(MPI_Type_free(&v) == MPI_SUCCESS && MPI_Type_free(&t) == MPI_SUCCESS);
    /* hindexed_c: a block of 2^31 + 5 bytes and one of 3 bytes past it; its large counts are
       [count, blocklengths.., displacements..]. */
    MPI_Count bl[2] = {big, 3}, ds[2] = {0, big + 10}, hc[5];
    CHECK(MPI_Type_create_hindexed_c(2, bl, ds, MPI_BYTE, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_size_c(t, &size) == MPI_SUCCESS && MPI_Type_get_extent_c(t, &lb, &extent) == MPI_SUCCESS);
    CHECK(MPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &comb) == MPI_SUCCESS);
    CHECK(nc == 5 && nd == 1);
    CHECK(MPI_Type_get_contents_c(t, ni, na, nc, nd, NULL, NULL, hc, &got) == MPI_SUCCESS);
    OK(me, "hindexed_c: size %lld extent %lld, %lld ints %lld addresses, counts %lld %lld %lld %lld %lld, hindexed %d",
       (long long)size, (long long)extent, (long long)ni, (long long)na, (long long)hc[0],
       (long long)hc[1], (long long)hc[2], (long long)hc[3], (long long)hc[4],
       comb == MPI_COMBINER_HINDEXED);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS);
    /* indexed_block_c of ints with a block length past 2^31 ints. */
    MPI_Count ib = ((MPI_Count)1 << 31) + 1, idisp[2] = {0, ib + 4};
    CHECK(MPI_Type_create_indexed_block_c(2, ib, idisp, MPI_INT, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_size_c(t, &size) == MPI_SUCCESS && MPI_Type_get_extent_c(t, &lb, &extent) == MPI_SUCCESS);
    OK(me, "indexed_block_c: size %lld extent %lld", (long long)size, (long long)extent);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS);

    /* The large messages and collectives run between ranks 0 and 1. */
    MPI_Comm comm2;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, me < 2 ? 0 : MPI_UNDEFINED, me, &comm2) == MPI_SUCCESS);
    if (n >= 2 && me < 2) {
        const MPI_Count len = ((MPI_Count)1 << 31) + 8;
        make_pattern();
        unsigned char *b = malloc(len);
        CHECK(b != NULL);
        /* Round 0: MPI_Send_c to MPI_Recv_c; round 1: persistent MPI_Send_init_c to
           MPI_Recv_init_c, the data shifted by one. */
        for (int round = 0; round < 2; round++) {
            if (me == 0) {
                fill(b, len, 0, round);
                if (round == 0) {
                    CHECK(MPI_Send_c(b, len, MPI_BYTE, 1, 7, MPI_COMM_WORLD) == MPI_SUCCESS);
                } else {
                    MPI_Request r;
                    CHECK(MPI_Send_init_c(b, len, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
                    CHECK(MPI_Start(&r) == MPI_SUCCESS && MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
                    CHECK(MPI_Request_free(&r) == MPI_SUCCESS);
                }
                OK(me, "round %d: sent %lld bytes", round, (long long)len);
            } else {
                MPI_Status st;
                MPI_Count c = 0;
                memset(b, 0, len);
                if (round == 0) {
                    CHECK(MPI_Recv_c(b, len + 100, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
                } else {
                    MPI_Request r;
                    CHECK(MPI_Recv_init_c(b, len + 100, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
                    CHECK(MPI_Start(&r) == MPI_SUCCESS && MPI_Wait(&r, &st) == MPI_SUCCESS);
                    CHECK(MPI_Request_free(&r) == MPI_SUCCESS);
                }
                CHECK(MPI_Get_count_c(&st, MPI_BYTE, &c) == MPI_SUCCESS);
                OK(me, "round %d: received %lld bytes, %lld pieces wrong", round, (long long)c,
                   (long long)wrong(b, len, 0, round));
            }
        }
        /* Collectives with a count past 2^31 - 1: MPI_Scatter_c of 2^31 + 8 bytes per rank
           from rank 0 (in place at the root), then MPI_Gather_c brings rank 1's part back
           into the root's second half, cleared meanwhile (in place at the root). */
        if (me == 0) {
            unsigned char *all = realloc(b, 2 * len);
            CHECK(all != NULL);
            b = all;
            fill(b, 2 * len, 0, 2);
            CHECK(MPI_Scatter_c(b, len, MPI_BYTE, MPI_IN_PLACE, len, MPI_BYTE, 0, comm2) == MPI_SUCCESS);
            memset(b + len, 0, len);
        } else {
            memset(b, 0, len);
            CHECK(MPI_Scatter_c(NULL, 0, MPI_BYTE, b, len, MPI_BYTE, 0, comm2) == MPI_SUCCESS);
            OK(me, "scatter_c: received %lld bytes, %lld pieces wrong", (long long)len,
               (long long)wrong(b, len, len, 2));
        }
        if (me == 0)
            CHECK(MPI_Gather_c(MPI_IN_PLACE, len, MPI_BYTE, b, len, MPI_BYTE, 0, comm2) == MPI_SUCCESS);
        else
            CHECK(MPI_Gather_c(b, len, MPI_BYTE, NULL, 0, MPI_BYTE, 0, comm2) == MPI_SUCCESS);
        if (me == 0)
            OK(me, "gather_c: %lld bytes back, %lld pieces wrong", (long long)(2 * len),
               (long long)wrong(b, 2 * len, 0, 2));
        free(b);
        CHECK(MPI_Comm_free(&comm2) == MPI_SUCCESS);
    }
    MPI_Finalize();
    return 0;
}
