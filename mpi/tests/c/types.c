/* Derived datatypes in point-to-point messages, MPI_Pack/MPI_Unpack, sizes and extents, and
   contiguous derived types in collectives. Needs >= 2 ranks. */
#include "common.h"
#include <stddef.h>

struct particle {
    double pos[3];
    int id;
    char tag;
};

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2);
    MPI_Status st;
    int count;

    /* A column of a 6x5 row-major matrix: vector(6, 1, 5). */
    enum { R = 6, C = 5 };
    double m[R][C], col[R];
    MPI_Datatype column;
    CHECK(MPI_Type_vector(R, 1, C, MPI_DOUBLE, &column) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&column) == MPI_SUCCESS);
    int tsize;
    MPI_Aint lb, ext, tlb, text;
    CHECK(MPI_Type_size(column, &tsize) == MPI_SUCCESS && tsize == R * (int)sizeof(double));
    CHECK(MPI_Type_get_extent(column, &lb, &ext) == MPI_SUCCESS && lb == 0 && ext == ((R - 1) * C + 1) * (MPI_Aint)sizeof(double));
    CHECK(MPI_Type_get_true_extent(column, &tlb, &text) == MPI_SUCCESS && tlb == 0 && text == ext);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) m[i][j] = rank * 100 + i * 10 + j;
    if (rank == 0) {
        CHECK(MPI_Send(&m[0][2], 1, column, 1, 1, MPI_COMM_WORLD) == MPI_SUCCESS);
        CHECK(MPI_Recv(&m[0][3], 1, column, 1, 2, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
        for (int i = 0; i < R; i++) CHECK(m[i][3] == 100 + i * 10 + 4 && m[i][2] == i * 10 + 2);
        CHECK(MPI_Get_count(&st, column, &count) == MPI_SUCCESS && count == 1);
        CHECK(MPI_Get_elements(&st, column, &count) == MPI_SUCCESS && count == R);
    } else if (rank == 1) {
        CHECK(MPI_Recv(col, R, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
        for (int i = 0; i < R; i++) CHECK(col[i] == i * 10 + 2);
        MPI_Request rq;
        CHECK(MPI_Isend(&m[0][4], 1, column, 0, 2, MPI_COMM_WORLD, &rq) == MPI_SUCCESS);
        CHECK(MPI_Wait(&rq, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    }
    OK(rank, "vector ok");

    /* A struct type, resized to the C struct's extent, sent as an array. */
    MPI_Datatype ptype, tmp;
    int bl[3] = {3, 1, 1};
    MPI_Aint disp[3] = {offsetof(struct particle, pos), offsetof(struct particle, id), offsetof(struct particle, tag)};
    MPI_Datatype types[3] = {MPI_DOUBLE, MPI_INT, MPI_CHAR};
    CHECK(MPI_Type_create_struct(3, bl, disp, types, &tmp) == MPI_SUCCESS);
    CHECK(MPI_Type_create_resized(tmp, 0, sizeof(struct particle), &ptype) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&ptype) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&tmp) == MPI_SUCCESS && tmp == MPI_DATATYPE_NULL);
    CHECK(MPI_Type_size(ptype, &tsize) == MPI_SUCCESS && tsize == 3 * 8 + 4 + 1);
    CHECK(MPI_Type_get_extent(ptype, &lb, &ext) == MPI_SUCCESS && ext == sizeof(struct particle));
    struct particle ps[4], pr[4];
    memset(pr, 0, sizeof pr);
    for (int i = 0; i < 4; i++) {
        ps[i].pos[0] = rank + i;
        ps[i].pos[1] = -i;
        ps[i].pos[2] = 0.5 * i;
        ps[i].id = rank * 10 + i;
        ps[i].tag = (char)('a' + i);
    }
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    CHECK(MPI_Sendrecv(ps, 4, ptype, right, 3, pr, 4, ptype, left, 3, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    for (int i = 0; i < 4; i++)
        CHECK(pr[i].pos[0] == left + i && pr[i].pos[1] == -i && pr[i].pos[2] == 0.5 * i && pr[i].id == left * 10 + i && pr[i].tag == 'a' + i);
    CHECK(MPI_Get_count(&st, ptype, &count) == MPI_SUCCESS && count == 4);
    OK(rank, "struct ok");

    /* Indexed: pick elements 1, 4-5, 9 of an int array. */
    int ibl[3] = {1, 2, 1}, idisp[3] = {1, 4, 9}, src[10], dst[4] = {0};
    MPI_Datatype picks;
    CHECK(MPI_Type_indexed(3, ibl, idisp, MPI_INT, &picks) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&picks) == MPI_SUCCESS);
    for (int i = 0; i < 10; i++) src[i] = rank * 1000 + i;
    CHECK(MPI_Sendrecv(src, 1, picks, right, 4, dst, 4, MPI_INT, left, 4, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    CHECK(dst[0] == left * 1000 + 1 && dst[1] == left * 1000 + 4 && dst[2] == left * 1000 + 5 && dst[3] == left * 1000 + 9);

    /* Pack and unpack. */
    char packbuf[256];
    int pos = 0, psize;
    CHECK(MPI_Pack_size(1, picks, MPI_COMM_WORLD, &psize) == MPI_SUCCESS && psize >= 4 * (int)sizeof(int));
    CHECK(MPI_Pack(src, 1, picks, packbuf, sizeof packbuf, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Pack(&ps[0].id, 1, MPI_INT, packbuf, sizeof packbuf, &pos, MPI_COMM_WORLD) == MPI_SUCCESS);
    int unpacked[10] = {0}, id = -1, upos = 0;
    CHECK(MPI_Unpack(packbuf, pos, &upos, unpacked, 1, picks, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Unpack(packbuf, pos, &upos, &id, 1, MPI_INT, MPI_COMM_WORLD) == MPI_SUCCESS && upos == pos);
    CHECK(unpacked[1] == src[1] && unpacked[4] == src[4] && unpacked[5] == src[5] && unpacked[9] == src[9] && unpacked[0] == 0);
    CHECK(id == rank * 10);
    OK(rank, "indexed and pack ok");

    /* Pair types with padding between ranks. */
    struct { double v; int i; } di[2] = {{rank + 0.5, rank}, {rank + 1.5, -rank}}, dr[2];
    CHECK(MPI_Sendrecv(di, 2, MPI_DOUBLE_INT, right, 5, dr, 2, MPI_DOUBLE_INT, left, 5, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    CHECK(dr[0].v == left + 0.5 && dr[0].i == left && dr[1].v == left + 1.5 && dr[1].i == -left);
    CHECK(MPI_Get_count(&st, MPI_DOUBLE_INT, &count) == MPI_SUCCESS && count == 2);

    /* A contiguous derived type in collectives. */
    MPI_Datatype pair;
    CHECK(MPI_Type_contiguous(2, MPI_INT, &pair) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&pair) == MPI_SUCCESS);
    int two[2] = {rank, 1}, sum[2];
    /* Predefined operations apply to predefined datatypes only. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_RC(MPI_Allreduce(two, sum, 1, pair, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_OP);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    CHECK(MPI_Bcast(two, 1, pair, 0, MPI_COMM_WORLD) == MPI_SUCCESS && two[0] == 0 && two[1] == 1);
    two[0] = rank;
    (void)sum;
    int *all = malloc(2 * size * sizeof(int));
    CHECK(MPI_Allgather(two, 1, pair, all, 1, pair, MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int i = 0; i < size; i++) CHECK(all[2 * i] == i && all[2 * i + 1] == 1);
    free(all);
    OK(rank, "pair types and contiguous collectives ok");

    MPI_Type_free(&pair);
    MPI_Type_free(&picks);
    MPI_Type_free(&ptype);
    CHECK(MPI_Type_free(&column) == MPI_SUCCESS && column == MPI_DATATYPE_NULL);
    MPI_Finalize();
    return 0;
}
