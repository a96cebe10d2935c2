/* Shared checks of the MPI test programs: CHECK prints the failed condition with its line and
   aborts the job, so a failure is never silent; OK prints a result line that the tests compare
   between viaduct and MPICH. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            fflush(stderr);                                                        \
            MPI_Abort(MPI_COMM_WORLD, 3);                                          \
        }                                                                          \
    } while (0)

#define CHECK_RC(call, want)                                                       \
    do {                                                                           \
        int rc_ = (call);                                                          \
        int class_ = -1;                                                           \
        if (rc_ != MPI_SUCCESS) MPI_Error_class(rc_, &class_); else class_ = 0;    \
        if (class_ != (want)) {                                                    \
            fprintf(stderr, "CHECK FAILED %s:%d: %s gave class %d, want %d (%s)\n", \
                    __FILE__, __LINE__, #call, class_, (want), #want);             \
            fflush(stderr);                                                        \
            MPI_Abort(MPI_COMM_WORLD, 3);                                          \
        }                                                                          \
    } while (0)

/* The class of an error code (a code may name more than its class, as MPICH's do). */
static inline int err_class(int code) {
    int c = -1;
    MPI_Error_class(code, &c);
    return c;
}

/* One write per line, so lines of different ranks never interleave. */
#define OK(rank, ...)                                              \
    do {                                                           \
        char ok_[512];                                             \
        int n_ = snprintf(ok_, sizeof ok_, "rank %d: ", (rank));   \
        snprintf(ok_ + n_, sizeof ok_ - n_, __VA_ARGS__);          \
        printf("%s\n", ok_);                                       \
        fflush(stdout);                                            \
    } while (0)
