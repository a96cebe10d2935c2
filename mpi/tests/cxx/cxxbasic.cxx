// MPICH's C++ binding (MPI::, libmpichcxx.so.12 over the swapped libmpich.so.12): point to
// point, collectives, an operation of MPI::Op::Init, MPI::ERRORS_THROW_EXCEPTIONS and
// communicator and window error handlers of Create_errhandler, attributes with C++ callbacks.
// Each rank prints "rank N: ..." result lines compared between viaduct and MPICH; a failed
// check prints CHECK FAILED and aborts.
#include <mpi.h>
#include <cstdio>
#include <cstdlib>

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            std::fprintf(stderr, "CHECK FAILED %s:%d: %s\n", __FILE__, __LINE__, #c); \
            MPI::COMM_WORLD.Abort(3);                                             \
        }                                                                         \
    } while (0)

static int handled_comm, handled_win, last_class;

static void maxabs(const void *in, void *inout, int len, const MPI::Datatype &t) {
    (void)t;
    const int *a = static_cast<const int *>(in);
    int *b = static_cast<int *>(inout);
    for (int i = 0; i < len; i++) {
        int x = std::abs(a[i]), y = std::abs(b[i]);
        b[i] = x > y ? x : y;
    }
}

static void on_comm(MPI::Comm &c, int *code, ...) {
    (void)c;
    handled_comm++;
    last_class = MPI::Get_error_class(*code);
}

static void on_win(MPI::Win &w, int *code, ...) {
    (void)w;
    handled_win++;
    last_class = MPI::Get_error_class(*code);
}

static int copies, deletes;

static int copy_attr(const MPI::Comm &, int, void *, void *in, void *out, bool &flag) {
    copies++;
    *static_cast<void **>(out) = in;
    flag = true;
    return MPI::SUCCESS;
}

static int delete_attr(MPI::Comm &, int, void *, void *) {
    deletes++;
    return MPI::SUCCESS;
}

int main(int argc, char **argv) {
    MPI::Init(argc, argv);
    MPI::Intracomm world = MPI::COMM_WORLD;
    int rank = world.Get_rank(), size = world.Get_size();

    // Point to point with a status.
    int out[4] = {rank, rank + 1, rank + 2, rank + 3}, in[4] = {0, 0, 0, 0};
    MPI::Status st;
    world.Sendrecv(out, 4, MPI::INT, (rank + 1) % size, 3, in, 4, MPI::INT, (rank + size - 1) % size,
                   3, st);
    std::printf("rank %d: got %d from %d tag %d count %d\n", rank, in[0], st.Get_source(), st.Get_tag(),
                st.Get_count(MPI::INT));

    // Collectives and an operation of MPI::Op::Init.
    int v[3] = {-rank - 1, rank * 2, -3}, r[3];
    MPI::Op op;
    op.Init(maxabs, true);
    world.Allreduce(v, r, 3, MPI::INT, op);
    op.Free();
    double d = rank, sum = 0;
    world.Allreduce(&d, &sum, 1, MPI::DOUBLE, MPI::SUM);
    std::printf("rank %d: maxabs %d %d %d sum %g\n", rank, r[0], r[1], r[2], sum);

    // MPI::ERRORS_THROW_EXCEPTIONS: a bad rank throws MPI::Exception with its class.
    MPI::Intracomm dup = world.Dup();
    dup.Set_errhandler(MPI::ERRORS_THROW_EXCEPTIONS);
    int cls = -1;
    try {
        dup.Send(out, 1, MPI::INT, size + 5, 0);
    } catch (MPI::Exception &e) {
        cls = e.Get_error_class();
    }
    std::printf("rank %d: exception class is MPI::ERR_RANK %d\n", rank, cls == MPI::ERR_RANK);

    // A communicator handler of Create_errhandler, and Call_errhandler.
    MPI::Errhandler eh = MPI::Comm::Create_errhandler(on_comm);
    dup.Set_errhandler(eh);
    dup.Send(out, 1, MPI::INT, size + 5, 0);
    dup.Call_errhandler(MPI::ERR_OTHER);
    std::printf("rank %d: comm handler ran %d times, last class MPI::ERR_OTHER %d\n", rank, handled_comm,
                last_class == MPI::ERR_OTHER);
    eh.Free();

    // A window handler.
    int buf[4] = {0, 0, 0, 0};
    MPI::Win win = MPI::Win::Create(buf, sizeof buf, sizeof(int), MPI::INFO_NULL, world);
    MPI::Errhandler weh = MPI::Win::Create_errhandler(on_win);
    win.Set_errhandler(weh);
    win.Call_errhandler(MPI::ERR_RMA_SYNC);
    std::printf("rank %d: window handler ran %d times, class MPI::ERR_RMA_SYNC %d\n", rank, handled_win,
                last_class == MPI::ERR_RMA_SYNC);
    weh.Free();
    win.Free();

    // Attributes with C++ copy and delete callbacks.
    int key = MPI::Comm::Create_keyval(copy_attr, delete_attr, 0);
    static int value = 42;
    dup.Set_attr(key, &value);
    MPI::Intracomm dup2 = dup.Dup();
    void *got = 0;
    bool found = dup2.Get_attr(key, &got);
    CHECK(found && got == &value);
    dup2.Free();
    dup.Free();
    MPI::Comm::Free_keyval(key);
    std::printf("rank %d: attribute copies %d deletes %d\n", rank, copies, deletes);

    MPI::Finalize();
    return 0;
}
