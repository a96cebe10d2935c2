/* Generalized request handles: a handle waited for, freed or never issued is reported as
   MPI_ERR_REQUEST (never a crash), also once its slot serves a newer request, which the stale
   handle does not touch; MPI_Request_free before MPI_Grequest_complete runs the free function
   at the completion, after it at once; requests completed by another thread while this one
   waits, tests or frees them, each queried once and freed once (at MPI_THREAD_MULTIPLE; with
   GREQH_SINGLE set, the rest at MPI_THREAD_SINGLE). */
#include "common.h"
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static int queries, frees, cancels;

static int q_fn(void *e, MPI_Status *s) {
    (void)e;
    queries++;
    MPI_Status_set_elements(s, MPI_BYTE, 5);
    return MPI_SUCCESS;
}
static int f_fn(void *e) { (void)e; frees++; return MPI_SUCCESS; }
static int c_fn(void *e, int done) { (void)e; (void)done; cancels++; return MPI_SUCCESS; }

/* Completed by another thread: the handles of the requests to complete, published one by one. */
enum { RACE = 20000 };
static MPI_Request race[RACE];
static atomic_int published;
static atomic_int race_queries, race_frees;

static int rq(void *e, MPI_Status *s) { (void)e; (void)s; atomic_fetch_add(&race_queries, 1); return MPI_SUCCESS; }
static int rf(void *e) { (void)e; atomic_fetch_add(&race_frees, 1); return MPI_SUCCESS; }

static void *completer(void *arg) {
    (void)arg;
    for (int i = 0; i < RACE; i++) {
        while (atomic_load(&published) <= i) sched_yield();
        CHECK(MPI_Grequest_complete(race[i]) == MPI_SUCCESS);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int rank, provided, flag, count;
    /* GREQH_SINGLE=1: MPI_Init (MPI_THREAD_SINGLE) and no second thread. */
    int single = getenv("GREQH_SINGLE") != NULL;
    if (single)
        MPI_Init(&argc, &argv);
    else
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Status st;

    /* A handle already waited for. */
    MPI_Request r, old;
    CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &r) == MPI_SUCCESS);
    old = r;
    CHECK(MPI_Grequest_complete(r) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS && r == MPI_REQUEST_NULL);
    CHECK(queries == 1 && frees == 1);
    r = old;
    CHECK_RC(MPI_Wait(&r, &st), MPI_ERR_REQUEST);
    r = old;
    CHECK_RC(MPI_Test(&r, &flag, &st), MPI_ERR_REQUEST);
    CHECK_RC(MPI_Grequest_complete(old), MPI_ERR_REQUEST);
    CHECK_RC(MPI_Request_get_status(old, &flag, &st), MPI_ERR_REQUEST);
    r = old;
    CHECK_RC(MPI_Cancel(&r), MPI_ERR_REQUEST);
    r = old;
    CHECK_RC(MPI_Request_free(&r), MPI_ERR_REQUEST);
    OK(rank, "a waited handle gives MPI_ERR_REQUEST");

    /* Newer requests (which may take the old one's place) are left alone by the stale handle. */
    MPI_Request fresh[4];
    for (int i = 0; i < 4; i++) {
        CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &fresh[i]) == MPI_SUCCESS);
        CHECK(fresh[i] != old);
    }
    CHECK_RC(MPI_Grequest_complete(old), MPI_ERR_REQUEST);
    r = old;
    CHECK_RC(MPI_Wait(&r, &st), MPI_ERR_REQUEST);
    r = old;
    CHECK_RC(MPI_Waitall(1, &r, &st), MPI_ERR_REQUEST);
    for (int i = 0; i < 4; i++) {
        CHECK(MPI_Test(&fresh[i], &flag, &st) == MPI_SUCCESS && flag == 0);
        CHECK(MPI_Grequest_complete(fresh[i]) == MPI_SUCCESS);
    }
    CHECK(MPI_Waitall(4, fresh, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    CHECK(queries == 5 && frees == 5 && cancels == 0);
    OK(rank, "a stale handle leaves newer requests alone");

    /* Freed before completion: free runs at MPI_Grequest_complete; the handle is gone. */
    CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &r) == MPI_SUCCESS);
    old = r;
    CHECK(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL);
    CHECK(frees == 5);
    r = old;
    CHECK_RC(MPI_Wait(&r, &st), MPI_ERR_REQUEST);
    CHECK(MPI_Grequest_complete(old) == MPI_SUCCESS);
    CHECK(frees == 6 && queries == 5);
    CHECK_RC(MPI_Grequest_complete(old), MPI_ERR_REQUEST);

    /* Freed after completion: free runs at once. */
    CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &r) == MPI_SUCCESS);
    CHECK(MPI_Grequest_complete(r) == MPI_SUCCESS);
    CHECK(MPI_Request_free(&r) == MPI_SUCCESS && r == MPI_REQUEST_NULL);
    CHECK(frees == 7 && queries == 5);
    OK(rank, "free before and after completion");

    /* Handles never issued. */
    MPI_Request junk[] = {0x12345, 0x40000000, 0x4fffffff, 0x7fffffff, -5};
    for (unsigned i = 0; i < sizeof junk / sizeof *junk; i++) {
        r = junk[i];
        CHECK_RC(MPI_Wait(&r, &st), MPI_ERR_REQUEST);
        CHECK_RC(MPI_Grequest_complete(junk[i]), MPI_ERR_REQUEST);
    }
    OK(rank, "handles never issued give MPI_ERR_REQUEST");

    /* Test and get_status of a complete request, many times over the same slots. */
    for (int i = 0; i < 1000; i++) {
        CHECK(MPI_Grequest_start(q_fn, f_fn, c_fn, NULL, &r) == MPI_SUCCESS);
        CHECK(MPI_Grequest_complete(r) == MPI_SUCCESS);
        CHECK(MPI_Request_get_status(r, &flag, &st) == MPI_SUCCESS && flag == 1);
        CHECK(MPI_Get_count(&st, MPI_BYTE, &count) == MPI_SUCCESS && count == 5);
        CHECK(MPI_Test(&r, &flag, &st) == MPI_SUCCESS && flag == 1 && r == MPI_REQUEST_NULL);
    }
    CHECK(queries == 2005 && frees == 1007);
    OK(rank, "reused slots");

    /* Another thread completes each request while this one waits for it (blocking or not),
       tests it until complete, frees it, or waits for it with a message request. */
    if (single) {
        MPI_Finalize();
        return 0;
    }
    pthread_t t;
    pthread_create(&t, NULL, completer, NULL);
    for (int i = 0; i < RACE; i++) {
        MPI_Request mine;
        CHECK(MPI_Grequest_start(rq, rf, c_fn, NULL, &mine) == MPI_SUCCESS);
        race[i] = mine;
        atomic_store(&published, i + 1);
        switch (i % 4) {
        case 0:
            CHECK(MPI_Wait(&mine, &st) == MPI_SUCCESS && mine == MPI_REQUEST_NULL);
            break;
        case 1:
            do CHECK(MPI_Test(&mine, &flag, &st) == MPI_SUCCESS); while (!flag);
            CHECK(mine == MPI_REQUEST_NULL);
            break;
        case 2:
            CHECK(MPI_Request_free(&mine) == MPI_SUCCESS && mine == MPI_REQUEST_NULL);
            break;
        default: {
            MPI_Request two[2];
            int x = 0;
            two[0] = mine;
            CHECK(MPI_Isend(&x, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &two[1]) == MPI_SUCCESS);
            CHECK(MPI_Waitall(2, two, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
            CHECK(two[0] == MPI_REQUEST_NULL);
        }
        }
    }
    pthread_join(t, NULL);
    /* The freed ones run free at their completion, which the join waited for; they run no
       query. */
    CHECK(atomic_load(&race_frees) == RACE && atomic_load(&race_queries) == RACE - RACE / 4);
    OK(rank, "completed by another thread: each freed once");
    MPI_Finalize();
    return 0;
}
