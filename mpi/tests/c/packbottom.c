/* MPI_Pack and MPI_Unpack with MPI_BOTTOM and a datatype of absolute addresses (MPI_BOTTOM
   may be the buffer of any call taking a datatype). MPICH 4.0.2
   refuses it (later MPICH takes it, as its struct_pack_mpi_bottom test expects), so this
   program is not compared with MPICH. */
#include "common.h"

static int rank;

static void pack_bottom(void) {
    int a = 5, b = 7, pos = 0, rpos = 0;
    int lens[2] = {1, 1};
    MPI_Aint disp[2];
    MPI_Datatype types[2] = {MPI_INT, MPI_INT}, t;
    char packed[16];
    CHECK(MPI_Get_address(&a, &disp[0]) == MPI_SUCCESS);
    CHECK(MPI_Get_address(&b, &disp[1]) == MPI_SUCCESS);
    CHECK(MPI_Type_create_struct(2, lens, disp, types, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS);
    CHECK(MPI_Pack(MPI_BOTTOM, 1, t, packed, sizeof packed, &pos, MPI_COMM_SELF) == MPI_SUCCESS);
    a = b = 0;
    CHECK(MPI_Unpack(packed, pos, &rpos, MPI_BOTTOM, 1, t, MPI_COMM_SELF) == MPI_SUCCESS);
    CHECK(a == 5 && b == 7 && rpos == 8);
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS);
    OK(rank, "MPI_Pack and MPI_Unpack with MPI_BOTTOM");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    pack_bottom();
    MPI_Finalize();
    return 0;
}
