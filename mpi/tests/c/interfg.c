/* MPI_Intercomm_create_from_groups (MPI-4) with groups of a session's process set: the even
   and the odd world ranks, the remote leader the last of its group; sizes, the remote group,
   a message between the groups' first ranks, an MPI_Allreduce over the intercommunicator, and
   a second intercommunicator with another string tag from the groups of a communicator (and,
   on viaduct, a third whose leaders are the last ranks of their groups). Wrong
   use (overlapping groups, a leader out of range, this process outside local_group) is
   checked on viaduct. */
#include "common.h"

#define SCHECK(cond)                                                               \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            fflush(stderr);                                                        \
            exit(3);                                                               \
        }                                                                          \
    } while (0)

static int class_of(int rc) {
    int c = -1;
    if (rc == MPI_SUCCESS) return 0;
    MPI_Error_class(rc, &c);
    return c;
}

/* The group of the world ranks of `wg` with parity `odd`. */
static MPI_Group parity(MPI_Group wg, int n, int odd) {
    int ranks[64], k = 0;
    for (int r = odd; r < n; r += 2) ranks[k++] = r;
    MPI_Group g;
    SCHECK(MPI_Group_incl(wg, k, ranks, &g) == MPI_SUCCESS);
    return g;
}

/* Checks intercommunicator `ic` of this rank's group and the other; prints its results. */
static void use(MPI_Comm ic, MPI_Group remote, int wrank, const char *what) {
    int inter = 0, size = 0, rsize = 0, rank = -1, same = -1;
    SCHECK(MPI_Comm_test_inter(ic, &inter) == MPI_SUCCESS && inter);
    SCHECK(MPI_Comm_size(ic, &size) == MPI_SUCCESS);
    SCHECK(MPI_Comm_remote_size(ic, &rsize) == MPI_SUCCESS);
    SCHECK(MPI_Comm_rank(ic, &rank) == MPI_SUCCESS);
    MPI_Group rg;
    SCHECK(MPI_Comm_remote_group(ic, &rg) == MPI_SUCCESS);
    SCHECK(MPI_Group_compare(rg, remote, &same) == MPI_SUCCESS);
    SCHECK(MPI_Group_free(&rg) == MPI_SUCCESS);
    int got = -1;
    if (rank == 0)
        SCHECK(MPI_Sendrecv(&wrank, 1, MPI_INT, 0, 7, &got, 1, MPI_INT, 0, 7, ic,
                            MPI_STATUS_IGNORE) == MPI_SUCCESS);
    int sum = -1;
    SCHECK(MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, ic) == MPI_SUCCESS);
    OK(wrank, "%s: size %d, remote size %d, rank %d, remote group identical %d, first remote %d, "
       "remote sum %d", what, size, rsize, rank, same == MPI_IDENT, got, sum);
}

int main(int argc, char **argv) {
    /* MPI_Init beside the session: MPICH 4.0.2 needs MPI_COMM_WORLD for this call. */
    MPI_Init(&argc, &argv);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen = 0;
    SCHECK(MPI_Get_library_version(lib, &liblen) == MPI_SUCCESS);
    int on_viaduct = strstr(lib, "viaduct") != NULL;

    MPI_Session s;
    SCHECK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s) == MPI_SUCCESS);
    MPI_Group wg;
    SCHECK(MPI_Group_from_session_pset(s, "mpi://WORLD", &wg) == MPI_SUCCESS);
    int n = 0, wrank = -1;
    SCHECK(MPI_Group_size(wg, &n) == MPI_SUCCESS && n >= 2 && n <= 64);
    SCHECK(MPI_Group_rank(wg, &wrank) == MPI_SUCCESS);
    int odd = wrank % 2;
    MPI_Group mine = parity(wg, n, odd), other = parity(wg, n, !odd);
    int other_size = 0;
    SCHECK(MPI_Group_size(other, &other_size) == MPI_SUCCESS);

    MPI_Comm ic;
    SCHECK(MPI_Intercomm_create_from_groups(mine, 0, other, 0, "interfg", MPI_INFO_NULL,
                                            MPI_ERRORS_RETURN, &ic) == MPI_SUCCESS);
    use(ic, other, wrank, "from the session");
    MPI_Errhandler eh;
    SCHECK(MPI_Comm_get_errhandler(ic, &eh) == MPI_SUCCESS);
    OK(wrank, "error handler of the intercommunicator: errors return %d", eh == MPI_ERRORS_RETURN);

    /* Groups of a communicator of the session, another tag, the leaders the other way. */
    MPI_Comm wc;
    SCHECK(MPI_Comm_create_from_group(wg, "interfg-world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &wc) ==
           MPI_SUCCESS);
    MPI_Group cg;
    SCHECK(MPI_Comm_group(wc, &cg) == MPI_SUCCESS);
    MPI_Group mine2 = parity(cg, n, odd), other2 = parity(cg, n, !odd);
    int mine_size = 0;
    SCHECK(MPI_Group_size(mine2, &mine_size) == MPI_SUCCESS);
    MPI_Comm ic2;
    SCHECK(MPI_Intercomm_create_from_groups(mine2, 0, other2, 0, "interfg-2", MPI_INFO_NULL,
                                            MPI_ERRORS_RETURN, &ic2) == MPI_SUCCESS);
    use(ic2, other2, wrank, "from a communicator");
    if (on_viaduct) {
        /* Leaders other than the first (MPICH 4.0.2 hangs there). */
        int other2_size = 0;
        SCHECK(MPI_Group_size(other2, &other2_size) == MPI_SUCCESS);
        MPI_Comm ic3;
        SCHECK(MPI_Intercomm_create_from_groups(mine2, mine_size - 1, other2, other2_size - 1,
                                                "interfg-3", MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                                &ic3) == MPI_SUCCESS);
        int sum = -1;
        SCHECK(MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, ic3) == MPI_SUCCESS);
        int want = 0;
        for (int r = !odd; r < n; r += 2) want += r;
        SCHECK(sum == want);
        SCHECK(MPI_Comm_free(&ic3) == MPI_SUCCESS);
    }

    if (on_viaduct) {
        MPI_Comm bad = MPI_COMM_NULL;
        /* Overlapping groups, a leader out of range, this process outside local_group: each
           is refused before any message. */
        SCHECK(class_of(MPI_Intercomm_create_from_groups(wg, 0, other, 0, "bad", MPI_INFO_NULL,
                                                         MPI_ERRORS_RETURN, &bad)) == MPI_ERR_GROUP);
        SCHECK(class_of(MPI_Intercomm_create_from_groups(mine, 0, other, other_size, "bad",
                                                         MPI_INFO_NULL, MPI_ERRORS_RETURN,
                                                         &bad)) == MPI_ERR_RANK);
        SCHECK(class_of(MPI_Intercomm_create_from_groups(other, 0, mine, 0, "bad", MPI_INFO_NULL,
                                                         MPI_ERRORS_RETURN, &bad)) == MPI_ERR_GROUP);
        SCHECK(class_of(MPI_Intercomm_create_from_groups(mine, 0, other, 0, NULL, MPI_INFO_NULL,
                                                         MPI_ERRORS_RETURN, &bad)) == MPI_ERR_ARG);
        SCHECK(bad == MPI_COMM_NULL);
    }

    SCHECK(MPI_Comm_free(&ic2) == MPI_SUCCESS);
    SCHECK(MPI_Comm_free(&ic) == MPI_SUCCESS);
    SCHECK(MPI_Comm_free(&wc) == MPI_SUCCESS);
    MPI_Group gs[] = {wg, mine, other, cg, mine2, other2};
    for (int i = 0; i < 6; i++) SCHECK(MPI_Group_free(&gs[i]) == MPI_SUCCESS);
    SCHECK(MPI_Session_finalize(&s) == MPI_SUCCESS);
    MPI_Finalize();
    return 0;
}
