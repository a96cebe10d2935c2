/* MPI-4 sessions, without MPI_Init or (SESSIONS_WITH_INIT=1) beside it: MPI_Session_init,
   the process sets "mpi://WORLD" and "mpi://SELF" (MPI_Session_get_num_psets,
   MPI_Session_get_nth_pset, MPI_Session_get_pset_info), MPI_Group_from_session_pset,
   MPI_Comm_create_from_group, two sessions at once, MPI_Session_finalize. */
#include "common.h"
#include <strings.h>

/* As CHECK, for use where MPI_COMM_WORLD may not exist: exits. */
#define SCHECK(cond)                                                               \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            fflush(stderr);                                                        \
            exit(3);                                                               \
        }                                                                          \
    } while (0)

/* Whether process set `name` is among the session's. */
static int has_pset(MPI_Session s, const char *name) {
    int n = 0;
    SCHECK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n) == MPI_SUCCESS);
    for (int i = 0; i < n; i++) {
        int len = 0;
        SCHECK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL) == MPI_SUCCESS);
        SCHECK(len > 1 && len < 1000);
        char *buf = malloc(len);
        SCHECK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, buf) == MPI_SUCCESS);
        SCHECK(strlen(buf) == (size_t)len - 1);
        int same = strcasecmp(buf, name) == 0;
        free(buf);
        if (same) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int with_init = getenv("SESSIONS_WITH_INIT") != NULL;
    if (with_init) MPI_Init(&argc, &argv);
    MPI_Session s;
    SCHECK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s) == MPI_SUCCESS);
    SCHECK(s != MPI_SESSION_NULL);
    int flag = -1;
    SCHECK(MPI_Initialized(&flag) == MPI_SUCCESS && flag == with_init);
    int n = 0;
    SCHECK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n) == MPI_SUCCESS && n >= 2);
    SCHECK(has_pset(s, "mpi://WORLD") && has_pset(s, "mpi://SELF"));

    /* The world's process set: its size from the info, a communicator from its group. */
    MPI_Info info;
    SCHECK(MPI_Session_get_pset_info(s, "mpi://WORLD", &info) == MPI_SUCCESS);
    char val[64];
    SCHECK(MPI_Info_get(info, "mpi_size", sizeof val - 1, val, &flag) == MPI_SUCCESS && flag);
    int wsize = atoi(val);
    MPI_Info_free(&info);
    MPI_Group g;
    SCHECK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g) == MPI_SUCCESS);
    int gsize, grank;
    MPI_Group_size(g, &gsize);
    MPI_Group_rank(g, &grank);
    SCHECK(gsize == wsize && grank >= 0 && grank < gsize);
    MPI_Comm c;
    SCHECK(MPI_Comm_create_from_group(g, "org.viaduct.test.world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c) == MPI_SUCCESS);
    int rank, size;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    SCHECK(rank == grank && size == gsize);
    int sum = 0;
    SCHECK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c) == MPI_SUCCESS);
    SCHECK(sum == size * (size - 1) / 2);
    MPI_Errhandler eh;
    SCHECK(MPI_Comm_get_errhandler(c, &eh) == MPI_SUCCESS && eh == MPI_ERRORS_RETURN);
    OK(rank, "session world: %d ranks, allreduce ok", size);

    /* The process's own set. */
    MPI_Group gs;
    MPI_Comm cs;
    SCHECK(MPI_Group_from_session_pset(s, "mpi://SELF", &gs) == MPI_SUCCESS);
    MPI_Group_size(gs, &n);
    SCHECK(n == 1);
    SCHECK(MPI_Comm_create_from_group(gs, "org.viaduct.test.self", MPI_INFO_NULL, MPI_ERRORS_RETURN, &cs) == MPI_SUCCESS);
    MPI_Comm_size(cs, &n);
    SCHECK(n == 1);
    MPI_Group wg;
    MPI_Comm_group(c, &wg);
    int zero = 0, mine;
    MPI_Group_translate_ranks(gs, 1, &zero, wg, &mine);
    SCHECK(mine == rank);
    MPI_Group_free(&wg);
    /* A process set that does not exist: MPI_ERR_ARG through the session's handler
       (MPI_ERRORS_RETURN). viaduct only: MPICH 4.0.2 raises it as fatal, ignoring the
       session's handler. */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen;
    MPI_Get_library_version(lib, &liblen);
    if (strstr(lib, "viaduct")) {
        MPI_Group bad;
        int rc = MPI_Group_from_session_pset(s, "mpi://NOWHERE", &bad), cls = -1;
        MPI_Error_class(rc, &cls);
        SCHECK(cls == MPI_ERR_ARG);
    }
    OK(rank, "session self ok");

    /* A second session beside the first, with a communicator of its own. */
    MPI_Session s2;
    SCHECK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s2) == MPI_SUCCESS && s2 != s);
    MPI_Group g2;
    MPI_Comm c2;
    SCHECK(MPI_Group_from_session_pset(s2, "mpi://WORLD", &g2) == MPI_SUCCESS);
    SCHECK(MPI_Comm_create_from_group(g2, "org.viaduct.test.second", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c2) == MPI_SUCCESS);
    int back = -1, right = (rank + 1) % size, left = (rank + size - 1) % size;
    SCHECK(MPI_Sendrecv(&rank, 1, MPI_INT, right, 3, &back, 1, MPI_INT, left, 3, c2, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    SCHECK(back == left);
    MPI_Comm_free(&c2);
    MPI_Group_free(&g2);
    SCHECK(MPI_Session_finalize(&s2) == MPI_SUCCESS && s2 == MPI_SESSION_NULL);
    /* The first session still works after the second ended. */
    SCHECK(MPI_Barrier(c) == MPI_SUCCESS);
    OK(rank, "two sessions at once");

    MPI_Comm_free(&cs);
    MPI_Comm_free(&c);
    MPI_Group_free(&gs);
    MPI_Group_free(&g);
    SCHECK(MPI_Session_finalize(&s) == MPI_SUCCESS && s == MPI_SESSION_NULL);
    if (with_init) MPI_Finalize();
    return 0;
}
