/* Fortran helpers: a received message's status through MPI_Status_c2f/f2c, c2f08/f082c and
   f2f08/f082f (MPICH's layout of MPI_F_STATUS_SIZE integers: MPI_F_SOURCE, MPI_F_TAG,
   MPI_F_ERROR), and the types of MPI_Type_create_f90_integer/real/complex for several ranges
   and precisions (their sizes, and one used in a message). On viaduct, wrong use and its
   error class. */
#include "common.h"
#include <dlfcn.h>

/* The MPI_F08_status conversions exist only in a library built with Fortran 2008 bindings
   (Debian's MPICH has none): looked up at run time, and left out where missing. */
typedef int (*c2f08_fn)(const MPI_Status *, MPI_F08_status *);
typedef int (*f082c_fn)(const MPI_F08_status *, MPI_Status *);
typedef int (*f2f08_fn)(const MPI_Fint *, MPI_F08_status *);
typedef int (*f082f_fn)(const MPI_F08_status *, MPI_Fint *);

static int type_size(MPI_Datatype t) {
    int s = -1;
    CHECK(MPI_Type_size(t, &s) == MPI_SUCCESS);
    return s;
}

/* Whether t is a type of MPI_Type_create_f90_* with this combiner and size in bytes. */
static int f90_is(MPI_Datatype t, int combiner, int size)
{
    int ni, na, nd, c, sz;
    if (MPI_Type_get_envelope(t, &ni, &na, &nd, &c) != MPI_SUCCESS || MPI_Type_size(t, &sz) != MPI_SUCCESS)
        return 0;
    return c == combiner && sz == size && na == 0 && nd == 0
        && ni == (combiner == MPI_COMBINER_F90_INTEGER ? 1 : 2);
}

int main(int argc, char **argv) {
    int rank, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    CHECK(MPI_Get_library_version(lib, &liblen) == MPI_SUCCESS);
    int on_viaduct = strstr(lib, "viaduct") != NULL;
    int to = (rank + 1) % n, from = (rank + n - 1) % n;

    int data[5] = {1, 2, 3, 4, 5}, got[5];
    MPI_Status st, back;
    MPI_Sendrecv(data, 5 - rank % 2, MPI_INT, to, 40 + rank, got, 5, MPI_INT, from, MPI_ANY_TAG,
                 MPI_COMM_WORLD, &st);
    MPI_Fint f[MPI_F_STATUS_SIZE], f2[MPI_F_STATUS_SIZE];
    CHECK(MPI_Status_c2f(&st, f) == MPI_SUCCESS);
    CHECK(f[MPI_F_SOURCE] == from && f[MPI_F_TAG] == 40 + from);
    memset(&back, 0xff, sizeof back);
    CHECK(MPI_Status_f2c(f, &back) == MPI_SUCCESS);
    int c1 = -1, c2 = -1, canc = -1;
    CHECK(MPI_Get_count(&st, MPI_INT, &c1) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&back, MPI_INT, &c2) == MPI_SUCCESS);
    CHECK(MPI_Test_cancelled(&back, &canc) == MPI_SUCCESS);
    CHECK(c1 == c2 && canc == 0 && back.MPI_SOURCE == from && back.MPI_TAG == 40 + from);
    c2f08_fn c2f08 = (c2f08_fn)dlsym(RTLD_DEFAULT, "MPI_Status_c2f08");
    f082c_fn f082c = (f082c_fn)dlsym(RTLD_DEFAULT, "MPI_Status_f082c");
    f2f08_fn f2f08 = (f2f08_fn)dlsym(RTLD_DEFAULT, "MPI_Status_f2f08");
    f082f_fn f082f = (f082f_fn)dlsym(RTLD_DEFAULT, "MPI_Status_f082f");
    MPI_F08_status f08, f08b;
    if (on_viaduct) CHECK(c2f08 && f082c && f2f08 && f082f);
    if (c2f08 && f082c && f2f08 && f082f) {
        CHECK(c2f08(&st, &f08) == MPI_SUCCESS);
        CHECK(f08.MPI_SOURCE == from && f08.MPI_TAG == 40 + from);
        CHECK(f082f(&f08, f2) == MPI_SUCCESS);
        CHECK(memcmp(f, f2, sizeof f) == 0);
        CHECK(f2f08(f2, &f08b) == MPI_SUCCESS);
        CHECK(memcmp(&f08, &f08b, sizeof f08) == 0);
        memset(&back, 0, sizeof back);
        CHECK(f082c(&f08b, &back) == MPI_SUCCESS);
        CHECK(MPI_Get_count(&back, MPI_INT, &c2) == MPI_SUCCESS);
        CHECK(c2 == c1 && back.MPI_SOURCE == from);
    }
    OK(rank, "status count %d source %d tag %d through every form", c2, back.MPI_SOURCE,
       back.MPI_TAG);

    int ranges[] = {1, 2, 3, 4, 5, 9, 10, 18};
    char line[256];
    int off = 0;
    for (int i = 0; i < 8; i++) {
        MPI_Datatype t;
        CHECK(MPI_Type_create_f90_integer(ranges[i], &t) == MPI_SUCCESS);
        off += snprintf(line + off, sizeof line - off, " %d:%d", ranges[i], type_size(t));
    }
    OK(rank, "f90 integer sizes%s", line);
    int pr[][2] = {{6, MPI_UNDEFINED}, {7, MPI_UNDEFINED}, {15, 307}, {MPI_UNDEFINED, 37},
                   {MPI_UNDEFINED, 38}, {3, 300}};
    off = 0;
    for (int i = 0; i < 6; i++) {
        MPI_Datatype r, c;
        CHECK(MPI_Type_create_f90_real(pr[i][0], pr[i][1], &r) == MPI_SUCCESS);
        CHECK(MPI_Type_create_f90_complex(pr[i][0], pr[i][1], &c) == MPI_SUCCESS);
        off += snprintf(line + off, sizeof line - off, " %d/%d", type_size(r), type_size(c));
    }
    OK(rank, "f90 real/complex sizes%s", line);
    MPI_Datatype r8;
    CHECK(MPI_Type_create_f90_real(15, MPI_UNDEFINED, &r8) == MPI_SUCCESS);
    double dv[3] = {rank + 0.5, rank + 1.5, rank + 2.5}, dg[3];
    MPI_Sendrecv(dv, 3, r8, to, 9, dg, 3, r8, from, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(dg[0] == from + 0.5 && dg[2] == from + 2.5);
    OK(rank, "f90 real in a message ok");

    if (on_viaduct) {
        CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) == MPI_SUCCESS);
        MPI_Datatype t;
        /* gfortran's real(16) on x86-64 (MPI_REAL16 is a type of this ABI; Debian's MPICH
           leaves it out of its table). */
        CHECK(MPI_Type_create_f90_real(MPI_UNDEFINED, 308, &t) == MPI_SUCCESS && f90_is(t, MPI_COMBINER_F90_REAL, 16));
        CHECK(MPI_Type_create_f90_complex(16, MPI_UNDEFINED, &t) == MPI_SUCCESS && f90_is(t, MPI_COMBINER_F90_COMPLEX, 32));
        CHECK(MPI_Type_create_f90_real(6, 37, &t) == MPI_SUCCESS && f90_is(t, MPI_COMBINER_F90_REAL, 4));
        CHECK(MPI_Type_create_f90_integer(9, &t) == MPI_SUCCESS && f90_is(t, MPI_COMBINER_F90_INTEGER, 4));
        /* The same arguments give the same handle; different ones a distinct one. */
        MPI_Datatype t2, t3;
        CHECK(MPI_Type_create_f90_integer(9, &t2) == MPI_SUCCESS && t2 == t);
        CHECK(MPI_Type_create_f90_integer(8, &t3) == MPI_SUCCESS && t3 != t && f90_is(t3, MPI_COMBINER_F90_INTEGER, 4));
        CHECK_RC(MPI_Type_create_f90_integer(19, &t), MPI_ERR_ARG);
        CHECK_RC(MPI_Type_create_f90_real(34, MPI_UNDEFINED, &t), MPI_ERR_ARG);
        CHECK_RC(MPI_Type_create_f90_real(MPI_UNDEFINED, 4932, &t), MPI_ERR_ARG);
        CHECK_RC(MPI_Type_create_f90_complex(MPI_UNDEFINED, MPI_UNDEFINED, &t), MPI_ERR_ARG);
        CHECK_RC(MPI_Type_create_f90_integer(4, NULL), MPI_ERR_ARG);
        CHECK_RC(MPI_Status_c2f(MPI_STATUS_IGNORE, f), MPI_ERR_OTHER);
        CHECK_RC(MPI_Status_f2c(MPI_F_STATUS_IGNORE, &back), MPI_ERR_OTHER);
        CHECK_RC(f082c(MPI_F08_STATUS_IGNORE, &back), MPI_ERR_OTHER);
        CHECK_RC(MPI_Status_c2f(&st, NULL), MPI_ERR_ARG);
        CHECK_RC(f2f08(NULL, &f08), MPI_ERR_ARG);
    }
    OK(rank, "wrong use checked");
    MPI_Finalize();
    return 0;
}
