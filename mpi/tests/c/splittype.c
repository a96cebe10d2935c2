/* MPI_Comm_split_type: MPI_COMM_TYPE_HW_GUIDED (info key mpi_hw_resource_type), 
   MPI_COMM_TYPE_HW_UNGUIDED (strict subsets, the level named in the info), on an
   intercommunicator; and MPI_Neighbor_alltoallw (blocking, nonblocking, persistent) with
   MPI_BOTTOM and absolute displacements; MPIX_COMM_TYPE_NEIGHBORHOOD. Every rank runs on one
   host. */
#include "common.h"

/* The value of mpi_hw_resource_type in `info`, or "" when it has none. */
static void restype(MPI_Info info, char *v) {
    int flag = 0;
    v[0] = 0;
    CHECK(MPI_Info_get(info, "mpi_hw_resource_type", 255, v, &flag) == MPI_SUCCESS);
    if (!flag) v[0] = 0;
}

int main(int argc, char **argv) {
    int wrank, n;
    char v[256];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* HW_GUIDED without the key, or with an unknown value: MPI_COMM_NULL everywhere. */
    MPI_Comm c = MPI_COMM_WORLD;
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, MPI_INFO_NULL, &c), 0);
    CHECK(c == MPI_COMM_NULL);
    MPI_Info info;
    MPI_Info_create(&info);
    c = MPI_COMM_WORLD;
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &c), 0);
    CHECK(c == MPI_COMM_NULL);
    MPI_Info_set(info, "foo", "bar");
    c = MPI_COMM_WORLD;
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &c), 0);
    CHECK(c == MPI_COMM_NULL);
    MPI_Info_set(info, "mpi_hw_resource_type", "@no-such-level@");
    c = MPI_COMM_WORLD;
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, 0, info, &c), 0);
    CHECK(c == MPI_COMM_NULL);

    /* mpi_shared_memory: the node (every rank here), ordered by key; the info is kept. */
    MPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory");
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, n - wrank, info, &c), 0);
    CHECK(c != MPI_COMM_NULL);
    int r, s;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &s);
    CHECK(s == n && r == n - 1 - wrank);
    restype(info, v);
    CHECK(strcmp(v, "mpi_shared_memory") == 0);
    MPI_Comm_free(&c);
    /* Ranks giving MPI_UNDEFINED get MPI_COMM_NULL, the root a communicator of itself. */
    for (int root = 0; root < n; root++) {
        int t = wrank == root ? MPI_COMM_TYPE_HW_GUIDED : MPI_UNDEFINED;
        c = MPI_COMM_WORLD;
        CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, t, 0, info, &c), 0);
        if (wrank == root) {
            CHECK(c != MPI_COMM_NULL);
            MPI_Comm_rank(c, &r);
            MPI_Comm_size(c, &s);
            CHECK(s == 1 && r == 0);
            MPI_Comm_free(&c);
        } else {
            CHECK(c == MPI_COMM_NULL);
        }
    }
    MPI_Info_free(&info);
    OK(wrank, "hw_guided: null without the key or with an unknown value, node of %d", n);

    /* HW_UNGUIDED: each level a strict subset of the one above, its name in the info, the same
       outcome on every rank; MPI_COMM_SELF has no smaller level. */
    MPI_Comm cur = MPI_COMM_WORLD;
    int levels = 0;
    for (;;) {
        int cs, cr;
        MPI_Comm_size(cur, &cs);
        MPI_Comm_rank(cur, &cr);
        MPI_Info_create(&info);
        c = MPI_COMM_WORLD;
        CHECK_RC(MPI_Comm_split_type(cur, MPI_COMM_TYPE_HW_UNGUIDED, cr, info, &c), 0);
        int null = c == MPI_COMM_NULL, lo, hi;
        MPI_Allreduce(&null, &lo, 1, MPI_INT, MPI_MIN, cur);
        MPI_Allreduce(&null, &hi, 1, MPI_INT, MPI_MAX, cur);
        CHECK(lo == hi);
        if (null) {
            MPI_Info_free(&info);
            break;
        }
        MPI_Comm_size(c, &s);
        CHECK(s < cs);
        restype(info, v);
        CHECK(v[0] != 0);
        MPI_Info_free(&info);
        if (cur != MPI_COMM_WORLD) MPI_Comm_free(&cur);
        cur = c;
        CHECK(++levels < 32);
    }
    if (cur != MPI_COMM_WORLD) MPI_Comm_free(&cur);
    MPI_Info_create(&info);
    c = MPI_COMM_WORLD;
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_SELF, MPI_COMM_TYPE_HW_UNGUIDED, 0, info, &c), 0);
    CHECK(c == MPI_COMM_NULL);
    MPI_Info_free(&info);
    OK(wrank, "hw_unguided: strict subsets, named, agreed");

    /* On an intercommunicator of the even and the odd ranks. */
    if (n >= 2) {
        MPI_Comm local, inter;
        int color = wrank % 2;
        MPI_Comm_split(MPI_COMM_WORLD, color, wrank, &local);
        MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 7, &inter);
        int lsize, rsize, flag;
        MPI_Comm_size(local, &lsize);
        MPI_Comm_remote_size(inter, &rsize);
        c = MPI_COMM_WORLD;
        CHECK_RC(MPI_Comm_split_type(inter, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c), 0);
        CHECK(c != MPI_COMM_NULL);
        MPI_Comm_test_inter(c, &flag);
        int ls, rs, lr, lrank;
        MPI_Comm_size(c, &ls);
        MPI_Comm_remote_size(c, &rs);
        MPI_Comm_rank(c, &lr);
        MPI_Comm_rank(local, &lrank);
        CHECK(ls == lsize && rs == rsize && lr == lrank);
        /* It carries messages between the groups. */
        if (lr < rs) {
            int a = wrank, b = -1;
            CHECK(MPI_Sendrecv(&a, 1, MPI_INT, lr, 5, &b, 1, MPI_INT, lr, 5, c,
                               MPI_STATUS_IGNORE) == MPI_SUCCESS);
            CHECK(b == 2 * lr + 1 - color);
        }
        MPI_Comm_free(&c);
        c = MPI_COMM_WORLD;
        CHECK_RC(MPI_Comm_split_type(inter, MPI_UNDEFINED, 0, MPI_INFO_NULL, &c), 0);
        CHECK(c == MPI_COMM_NULL);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&local);
        OK(wrank, "intercomm shared: inter %d, sizes %d/%d, undefined null", flag, ls, rs);
    }

    /* Neighbor_alltoallw on a line (no neighbour past the ends), MPI_BOTTOM and absolute
       addresses; the parts lie in the buffers in reverse order. */
    MPI_Comm ring;
    int dims[1] = {n}, per[1] = {0};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, per, 0, &ring);
    int left, right;
    MPI_Cart_shift(ring, 0, 1, &left, &right);
    int sbuf[6], rbuf[6], cnt[2] = {3, 3};
    MPI_Aint sd[2], rd[2];
    MPI_Datatype ty[2] = {MPI_INT, MPI_INT};
    MPI_Get_address(&sbuf[3], &sd[0]);
    MPI_Get_address(&sbuf[0], &sd[1]);
    MPI_Get_address(&rbuf[3], &rd[0]);
    MPI_Get_address(&rbuf[0], &rd[1]);
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 3; i++) {
            sbuf[3 + i] = 1000 * round + 100 * wrank + i;      /* to the left */
            sbuf[i] = 1000 * round + 100 * wrank + 10 + i;     /* to the right */
        }
        for (int i = 0; i < 6; i++) rbuf[i] = -1;
        MPI_Request req;
        if (round == 0) {
            CHECK_RC(MPI_Neighbor_alltoallw(MPI_BOTTOM, cnt, sd, ty, MPI_BOTTOM, cnt, rd, ty, ring), 0);
        } else if (round == 1) {
            CHECK_RC(MPI_Ineighbor_alltoallw(MPI_BOTTOM, cnt, sd, ty, MPI_BOTTOM, cnt, rd, ty, ring,
                                             &req), 0);
            CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE), 0);
        } else {
            CHECK_RC(MPI_Neighbor_alltoallw_init(MPI_BOTTOM, cnt, sd, ty, MPI_BOTTOM, cnt, rd, ty,
                                                 ring, MPI_INFO_NULL, &req), 0);
            CHECK_RC(MPI_Start(&req), 0);
            CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE), 0);
            MPI_Request_free(&req);
        }
        /* Part 0 from the left neighbour (its part to the right), part 1 from the right. */
        for (int i = 0; i < 3; i++) {
            CHECK(rbuf[3 + i] == (left == MPI_PROC_NULL ? -1 : 1000 * round + 100 * left + 10 + i));
            CHECK(rbuf[i] == (right == MPI_PROC_NULL ? -1 : 1000 * round + 100 * right + i));
        }
    }
    MPI_Comm_free(&ring);
    OK(wrank, "neighbor_alltoallw from MPI_BOTTOM: %d %d", rbuf[3], rbuf[0]);

    OK(wrank, "done");
    /* MPIX_COMM_TYPE_NEIGHBORHOOD (MPICH's extension): the ranks that see the directory
       named by nbhd_common_dirname; all of them here for the current directory (one file
       system), keys ordering the ranks backwards; MPI_COMM_NULL without the key and, on
       viaduct, for a directory that does not exist. */
    {
        MPI_Info info;
        MPI_Comm c;
        int r, size;
        CHECK(MPI_Info_create(&info) == MPI_SUCCESS);
        CHECK(MPI_Info_set(info, "nbhd_common_dirname", ".") == MPI_SUCCESS);
        CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_NEIGHBORHOOD, n - wrank, info, &c) == MPI_SUCCESS);
        CHECK(c != MPI_COMM_NULL);
        CHECK(MPI_Comm_size(c, &size) == MPI_SUCCESS && MPI_Comm_rank(c, &r) == MPI_SUCCESS);
        CHECK(size == n && r == n - 1 - wrank);
        CHECK(MPI_Comm_free(&c) == MPI_SUCCESS);
        /* (MPICH 4.0.2 gives rank 0 MPI_COMM_NULL and leaves the others waiting when every
           rank names the same missing directory, so that case runs on viaduct only.) */
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int liblen;
        CHECK(MPI_Get_library_version(lib, &liblen) == MPI_SUCCESS);
        if (strstr(lib, "viaduct") != NULL) {
            CHECK(MPI_Info_set(info, "nbhd_common_dirname", "./no-such-directory-here") == MPI_SUCCESS);
            CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_NEIGHBORHOOD, 0, info, &c) == MPI_SUCCESS);
            CHECK(c == MPI_COMM_NULL);
        }
        CHECK(MPI_Info_delete(info, "nbhd_common_dirname") == MPI_SUCCESS);
        CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPIX_COMM_TYPE_NEIGHBORHOOD, 0, info, &c) == MPI_SUCCESS);
        CHECK(c == MPI_COMM_NULL);
        CHECK(MPI_Info_free(&info) == MPI_SUCCESS);
        OK(wrank, "neighborhood: %d ranks see the directory", size);
    }
    MPI_Finalize();
    return 0;
}
