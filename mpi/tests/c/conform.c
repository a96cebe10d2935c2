/* Points of the standard that programs written for other MPI libraries rely on:
   - a call that completes one request (MPI_Recv, MPI_Wait, MPI_Test, MPI_Mprobe, MPI_Mrecv,
     MPI_Sendrecv) leaves the MPI_ERROR field of its status as it was (the error is the
     return value), as MPICH does;
   - MPI_Get_elements_x and MPI_Get_count_c read the whole 63-bit count of a status;
   - MPI_BOTTOM with a datatype of absolute addresses (MPI_Get_address) sends and receives;
   - a persistent request keeps its datatype after MPI_Type_free, also a datatype with holes;
   - broadcast, gather, scatter, allgather and alltoall (and their nonblocking forms) take
     datatypes with holes on either side, and so do the v and w forms (a resized column
     scattered to and gathered from every rank);
   - on an intercommunicator, allgather and alltoall take different counts in the two groups
     (one group sending only, the other receiving only), and MPI_Comm_split and
     MPI_Comm_create give intercommunicators; their nonblocking collectives (barrier,
     broadcast, reduce, allreduce, gather, scatter, allgather, alltoall) complete;
   - MPI_Comm_create takes different, disjoint groups from different processes (MPI-2.2);
   - MPI_SUM and MPI_PROD reduce the C and Fortran complex types;
   - long double reduces in extended precision (sum, product, min, max, maxloc and minloc
     on MPI_LONG_DOUBLE_INT, the complex long double sum and product);
   - MPI_Finalize deletes MPI_COMM_SELF's attributes in the reverse order of their setting
     (MPI-2.2), and freeing a keyval again while an attribute still holds it does nothing;
   - user error classes lie above MPI_ERR_LASTCODE, and MPI_LASTUSEDCODE is the last one;
   - MPI_Dims_create gives MPICH's factorization where several are equally balanced;
   - MPI_Comm_idup returns without waiting for the other members (one may be waiting for
     another's message first), also on duplicates in different orders and on an
     intercommunicator;
   - datatypes: a struct's extent is rounded up to its largest alignment (so count > 1 steps
     by sizeof), explicit bounds (resized, MPI_LB) win and may give negative extents,
     MPI_Get_elements counts a pair type as two elements and counts into a partial element,
     a new datatype takes the last freed handle, and MPI_C_COMPLEX is named so;
   - one-sided: MPI_BOTTOM with absolute addresses as the origin of MPI_Put and MPI_Get and as
     the result of MPI_Get_accumulate; post/start/complete/wait with every rank in its own
     groups; a target waiting in MPI_Recv between MPI_Win_post and MPI_Win_wait while the
     origin completes first; MPI_MAXLOC accumulates of MPI_DOUBLE_INT through a vector
     type; accumulates of zero-size derived types; an access across two adjacent regions of a
     dynamic window; a part of size 0 of MPI_Win_allocate_shared has base NULL.
   Runs on any number of ranks; ranks 0 and 1 exchange, the others only check local calls. */
#include "common.h"
#include <complex.h>
#include <stddef.h>

#define KEEP 12345

static int rank, n;

static void error_field_kept(void) {
    int v = rank, got = -1, flag = 0;
    MPI_Status st;
    MPI_Request r;
    MPI_Message m;
    if (rank > 1 || n < 2) return;
    int peer = 1 - rank;
    /* Blocking receive and probe. */
    CHECK(MPI_Send(&v, 1, MPI_INT, peer, 1, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Probe(peer, 1, MPI_COMM_WORLD, &st) == MPI_SUCCESS && st.MPI_TAG == 1);
    st.MPI_ERROR = KEEP;
    CHECK(MPI_Recv(&got, 1, MPI_INT, peer, 1, MPI_COMM_WORLD, &st) == MPI_SUCCESS);
    CHECK(got == peer && st.MPI_SOURCE == peer && st.MPI_TAG == 1 && st.MPI_ERROR == KEEP);
    /* Nonblocking, completed by MPI_Wait and by MPI_Test. */
    CHECK(MPI_Isend(&v, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    st.MPI_ERROR = KEEP;
    CHECK(MPI_Wait(&r, &st) == MPI_SUCCESS && st.MPI_ERROR == KEEP);
    CHECK(MPI_Irecv(&got, 1, MPI_INT, peer, 2, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
    while (!flag) {
        st.MPI_ERROR = KEEP;
        CHECK(MPI_Test(&r, &flag, &st) == MPI_SUCCESS && st.MPI_ERROR == KEEP);
    }
    /* Matched probe and receive. */
    CHECK(MPI_Send(&v, 1, MPI_INT, peer, 3, MPI_COMM_WORLD) == MPI_SUCCESS);
    st.MPI_ERROR = KEEP;
    CHECK(MPI_Mprobe(peer, 3, MPI_COMM_WORLD, &m, &st) == MPI_SUCCESS && st.MPI_ERROR == KEEP);
    st.MPI_ERROR = KEEP;
    CHECK(MPI_Mrecv(&got, 1, MPI_INT, &m, &st) == MPI_SUCCESS && st.MPI_ERROR == KEEP);
    /* Send-receive. */
    st.MPI_ERROR = KEEP;
    CHECK(MPI_Sendrecv(&v, 1, MPI_INT, peer, 4, &got, 1, MPI_INT, peer, 4, MPI_COMM_WORLD, &st) ==
          MPI_SUCCESS);
    CHECK(got == peer && st.MPI_ERROR == KEEP);
    OK(rank, "MPI_ERROR of single-request statuses kept");
}

static void big_counts(void) {
    const MPI_Count counts[] = {60, 0x3654321f71234567LL, 0x7654321ff1234567LL};
    for (int i = 0; i < 3; i++) {
        MPI_Status st;
        MPI_Count got = -1;
        int cancelled = 1;
        CHECK(MPI_Status_set_cancelled(&st, 0) == MPI_SUCCESS);
        CHECK(MPI_Status_set_elements_x(&st, MPI_BYTE, counts[i]) == MPI_SUCCESS);
        CHECK(MPI_Get_elements_x(&st, MPI_BYTE, &got) == MPI_SUCCESS && got == counts[i]);
        got = -1;
        CHECK(MPI_Get_count_c(&st, MPI_BYTE, &got) == MPI_SUCCESS && got == counts[i]);
        CHECK(MPI_Test_cancelled(&st, &cancelled) == MPI_SUCCESS && cancelled == 0);
    }
    OK(rank, "63-bit status counts read back whole");
}

static void bottom(void) {
    int a = -1, b = -1;
    MPI_Aint disp[2];
    int lens[2] = {1, 1};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT}, t;
    if (rank > 1 || n < 2) return;
    CHECK(MPI_Get_address(&a, &disp[0]) == MPI_SUCCESS);
    CHECK(MPI_Get_address(&b, &disp[1]) == MPI_SUCCESS);
    CHECK(MPI_Type_create_struct(2, lens, disp, types, &t) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&t) == MPI_SUCCESS);
    if (rank == 0) {
        a = 7;
        b = 11;
        CHECK(MPI_Send(MPI_BOTTOM, 1, t, 1, 5, MPI_COMM_WORLD) == MPI_SUCCESS);
        CHECK(MPI_Recv(MPI_BOTTOM, 1, t, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
              MPI_SUCCESS);
        CHECK(a == 8 && b == 12);
    } else {
        MPI_Request r;
        CHECK(MPI_Irecv(MPI_BOTTOM, 1, t, 0, 5, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
        CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(a == 7 && b == 11);
        a++;
        b++;
        CHECK(MPI_Send(MPI_BOTTOM, 1, t, 0, 6, MPI_COMM_WORLD) == MPI_SUCCESS);
    }
    CHECK(MPI_Type_free(&t) == MPI_SUCCESS);
    OK(rank, "MPI_BOTTOM with absolute addresses");
}

static void persistent_after_free(void) {
    int buf[6] = {0, 0, 0, 0, 0, 0};
    MPI_Datatype every_other, dup;
    MPI_Request r[2];
    MPI_Status sts[2];
    if (rank > 1 || n < 2) return;
    CHECK(MPI_Type_vector(3, 1, 2, MPI_INT, &every_other) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&every_other) == MPI_SUCCESS);
    CHECK(MPI_Type_dup(MPI_INT, &dup) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&dup) == MPI_SUCCESS);
    if (rank == 0) {
        CHECK(MPI_Send_init(buf, 1, every_other, 1, 7, MPI_COMM_WORLD, &r[0]) == MPI_SUCCESS);
        CHECK(MPI_Send_init(&buf[5], 1, dup, 1, 8, MPI_COMM_WORLD, &r[1]) == MPI_SUCCESS);
    } else {
        CHECK(MPI_Recv_init(buf, 1, every_other, 0, 7, MPI_COMM_WORLD, &r[0]) == MPI_SUCCESS);
        CHECK(MPI_Recv_init(&buf[5], 1, dup, 0, 8, MPI_COMM_WORLD, &r[1]) == MPI_SUCCESS);
    }
    CHECK(MPI_Type_free(&every_other) == MPI_SUCCESS && every_other == MPI_DATATYPE_NULL);
    CHECK(MPI_Type_free(&dup) == MPI_SUCCESS);
    for (int round = 1; round <= 3; round++) {
        if (rank == 0)
            for (int i = 0; i < 6; i++) buf[i] = round * 10 + i;
        CHECK(MPI_Startall(2, r) == MPI_SUCCESS);
        CHECK(MPI_Waitall(2, r, sts) == MPI_SUCCESS);
        if (rank == 1) {
            CHECK(buf[0] == round * 10 && buf[2] == round * 10 + 2 && buf[4] == round * 10 + 4);
            CHECK(buf[1] == 0 && buf[3] == 0 && buf[5] == round * 10 + 5);
        }
    }
    CHECK(MPI_Request_free(&r[0]) == MPI_SUCCESS && MPI_Request_free(&r[1]) == MPI_SUCCESS);
    OK(rank, "persistent requests keep freed datatypes");
}

/* Element i of a vector of 3 ints at stride 2 (extent 5 ints) holds base + i*3 + j in its
   j-th int; the ints between stay as they were. */
static void fill_vec(int *b, int elems, int base) {
    for (int i = 0; i < elems; i++)
        for (int j = 0; j < 3; j++) b[i * 5 + j * 2] = base + i * 3 + j;
}

static int vec_ok(const int *b, int elems, int base, int hole) {
    for (int i = 0; i < elems; i++)
        for (int k = 0; k < 5; k++) {
            int want = k % 2 == 0 ? base + i * 3 + k / 2 : hole;
            if (b[i * 5 + k] != want) return 0;
        }
    return 1;
}

static void holey_collectives(void) {
    MPI_Datatype v;
    MPI_Request r;
    /* Room for n elements, and for the two of the broadcast. */
    int *a = malloc(5 * (n + 2) * sizeof(int)), *b = malloc(5 * (n + 2) * sizeof(int));
    int *flat = malloc(3 * n * sizeof(int));
    CHECK(MPI_Type_vector(3, 1, 2, MPI_INT, &v) == MPI_SUCCESS && MPI_Type_commit(&v) == MPI_SUCCESS);
    for (int nb = 0; nb < 2; nb++) {
        /* Broadcast of two elements from rank 1 % n. */
        int root = 1 % n;
        for (int i = 0; i < 10; i++) a[i] = -1;
        if (rank == root) fill_vec(a, 2, 100);
        if (nb) {
            CHECK(MPI_Ibcast(a, 2, v, root, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Bcast(a, 2, v, root, MPI_COMM_WORLD) == MPI_SUCCESS);
        }
        CHECK(vec_ok(a, 2, 100, -1));
        /* Gather: one element from each rank, into elements at the root. */
        for (int i = 0; i < 5 * n; i++) a[i] = b[i] = -2;
        fill_vec(a, 1, rank * 3);
        if (nb) {
            CHECK(MPI_Igather(a, 1, v, b, 1, v, 0, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Gather(a, 1, v, b, 1, v, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
        }
        if (rank == 0) CHECK(vec_ok(b, n, 0, -2));
        /* Scatter: elements at the root, three plain ints at each rank. */
        for (int i = 0; i < 5 * n; i++) a[i] = -3;
        if (rank == 0) fill_vec(a, n, 0);
        for (int i = 0; i < 3; i++) flat[i] = -3;
        if (nb) {
            CHECK(MPI_Iscatter(a, 1, v, flat, 3, MPI_INT, 0, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Scatter(a, 1, v, flat, 3, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
        }
        CHECK(flat[0] == rank * 3 && flat[1] == rank * 3 + 1 && flat[2] == rank * 3 + 2);
        /* Allgather: three plain ints from each rank, into elements everywhere. */
        for (int i = 0; i < 5 * n; i++) b[i] = -4;
        if (nb) {
            CHECK(MPI_Iallgather(flat, 3, MPI_INT, b, 1, v, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Allgather(flat, 3, MPI_INT, b, 1, v, MPI_COMM_WORLD) == MPI_SUCCESS);
        }
        CHECK(vec_ok(b, n, 0, -4));
        /* Alltoall: element k of each rank goes to rank k, elements on both sides. */
        for (int i = 0; i < 5 * n; i++) a[i] = b[i] = -5;
        for (int k = 0; k < n; k++)
            for (int j = 0; j < 3; j++) a[k * 5 + j * 2] = rank * 1000 + k * 3 + j;
        if (nb) {
            CHECK(MPI_Ialltoall(a, 1, v, b, 1, v, MPI_COMM_WORLD, &r) == MPI_SUCCESS);
            CHECK(MPI_Wait(&r, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Alltoall(a, 1, v, b, 1, v, MPI_COMM_WORLD) == MPI_SUCCESS);
        }
        for (int k = 0; k < n; k++)
            for (int kk = 0; kk < 5; kk++)
                CHECK(b[k * 5 + kk] == (kk % 2 ? -5 : k * 1000 + rank * 3 + kk / 2));
    }
    /* Allgather in place on elements. */
    for (int i = 0; i < 5 * n; i++) b[i] = -6;
    fill_vec(b + 5 * rank, 1, rank * 3);
    CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 1, v, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(vec_ok(b, n, 0, -6));
    CHECK(MPI_Type_free(&v) == MPI_SUCCESS);
    free(a);
    free(b);
    free(flat);
    OK(rank, "collectives on a datatype with holes");
}

static void inter_one_way(void) {
    MPI_Comm half, ic;
    if (n < 2) return;
    int left = rank % 2 == 0, rsize;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, left, rank, &half) == MPI_SUCCESS);
    CHECK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, left ? 1 : 0, 9, &ic) == MPI_SUCCESS);
    CHECK(MPI_Comm_remote_size(ic, &rsize) == MPI_SUCCESS);
    int hrank;
    CHECK(MPI_Comm_rank(half, &hrank) == MPI_SUCCESS);
    int *send = malloc(2 * rsize * sizeof(int)), *recv = malloc(2 * rsize * sizeof(int));
    for (int i = 0; i < 2 * rsize; i++) {
        send[i] = hrank * 100 + i;
        recv[i] = -1;
    }
    /* Alltoall: the left group sends two ints to each remote rank and receives nothing. */
    if (left)
        CHECK(MPI_Alltoall(send, 2, MPI_INT, recv, 0, MPI_INT, ic) == MPI_SUCCESS);
    else
        CHECK(MPI_Alltoall(send, 0, MPI_INT, recv, 2, MPI_INT, ic) == MPI_SUCCESS);
    if (!left)
        for (int j = 0; j < rsize; j++)
            CHECK(recv[2 * j] == j * 100 + 2 * hrank && recv[2 * j + 1] == j * 100 + 2 * hrank + 1);
    /* Allgather: the right group gives one int each, the left group gathers them. */
    for (int i = 0; i < 2 * rsize; i++) recv[i] = -1;
    if (left)
        CHECK(MPI_Allgather(send, 0, MPI_INT, recv, 1, MPI_INT, ic) == MPI_SUCCESS);
    else
        CHECK(MPI_Allgather(send, 1, MPI_INT, recv, 0, MPI_INT, ic) == MPI_SUCCESS);
    if (left)
        for (int j = 0; j < rsize; j++) CHECK(recv[j] == j * 100);
    free(send);
    free(recv);
    /* Split by color: rank 0 of each group alone (color 0), the others together (color 1). */
    MPI_Comm sub;
    int color = hrank == 0 ? 0 : 1, subremote = -1, v = -1;
    CHECK(MPI_Comm_split(ic, color, -hrank, &sub) == MPI_SUCCESS);
    int lsize;
    CHECK(MPI_Comm_size(half, &lsize) == MPI_SUCCESS);
    int others = color == 0 ? 1 : rsize - 1;
    if ((color == 1 && (lsize < 2 || rsize < 2))) {
        CHECK(sub == MPI_COMM_NULL);
    } else {
        CHECK(sub != MPI_COMM_NULL);
        int srank;
        CHECK(MPI_Comm_remote_size(sub, &subremote) == MPI_SUCCESS && subremote == others);
        CHECK(MPI_Comm_rank(sub, &srank) == MPI_SUCCESS);
        /* Ordered by key (-hrank): the highest rank of the color first. */
        if (color == 0) CHECK(srank == 0);
        else CHECK(srank == lsize - 1 - hrank);
        /* Rank 0 of each side sends its group rank to rank 0 of the other. */
        if (srank == 0) {
            CHECK(MPI_Sendrecv(&hrank, 1, MPI_INT, 0, 3, &v, 1, MPI_INT, 0, 3, sub, MPI_STATUS_IGNORE) ==
                  MPI_SUCCESS);
            CHECK(v == (color == 0 ? 0 : rsize - 1));
        }
        CHECK(MPI_Comm_free(&sub) == MPI_SUCCESS);
    }
    /* MPI_Comm_create from each side's group rank 0 alone. */
    MPI_Group g, g0;
    int zero = 0;
    CHECK(MPI_Comm_group(half, &g) == MPI_SUCCESS && MPI_Group_incl(g, 1, &zero, &g0) == MPI_SUCCESS);
    CHECK(MPI_Comm_create(ic, g0, &sub) == MPI_SUCCESS);
    CHECK((sub != MPI_COMM_NULL) == (hrank == 0));
    if (sub != MPI_COMM_NULL) {
        CHECK(MPI_Comm_remote_size(sub, &subremote) == MPI_SUCCESS && subremote == 1);
        CHECK(MPI_Comm_free(&sub) == MPI_SUCCESS);
    }
    CHECK(MPI_Group_free(&g0) == MPI_SUCCESS && MPI_Group_free(&g) == MPI_SUCCESS);
    CHECK(MPI_Comm_free(&ic) == MPI_SUCCESS && MPI_Comm_free(&half) == MPI_SUCCESS);
    OK(rank, "intercommunicator alltoall and allgather one way, split and create");
}

static void create_disjoint(void) {
    MPI_Group world, mine;
    MPI_Comm c;
    int first = rank % 2, count = (n - first + 1) / 2, size = -1, crank = -1;
    int *ranks = malloc((n + 1) * sizeof(int));
    for (int i = 0; i < count; i++) ranks[i] = first + 2 * i;
    CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS);
    CHECK(MPI_Group_incl(world, count, ranks, &mine) == MPI_SUCCESS);
    CHECK(MPI_Comm_create(MPI_COMM_WORLD, mine, &c) == MPI_SUCCESS && c != MPI_COMM_NULL);
    CHECK(MPI_Comm_size(c, &size) == MPI_SUCCESS && size == count);
    CHECK(MPI_Comm_rank(c, &crank) == MPI_SUCCESS && crank == rank / 2);
    int sum = 0;
    CHECK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c) == MPI_SUCCESS);
    int want = 0;
    for (int i = 0; i < count; i++) want += ranks[i];
    CHECK(sum == want);
    CHECK(MPI_Comm_free(&c) == MPI_SUCCESS);
    CHECK(MPI_Group_free(&mine) == MPI_SUCCESS && MPI_Group_free(&world) == MPI_SUCCESS);
    free(ranks);
    OK(rank, "MPI_Comm_create with disjoint groups");
}

static void complex_sums(void) {
    double _Complex d[2] = {(rank + 1) + 1.0 * I, 1.0 + (rank % 2) * I}, dsum[2];
    float _Complex f = (float)(rank + 1) - 2.0f * I, fsum;
    CHECK(MPI_Allreduce(d, dsum, 1, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Allreduce(&d[1], &dsum[1], 1, MPI_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    CHECK(MPI_Reduce(&f, &fsum, 1, MPI_C_FLOAT_COMPLEX, MPI_SUM, 0, MPI_COMM_WORLD) == MPI_SUCCESS);
    double _Complex want = 1.0;
    for (int r = 0; r < n; r++) want *= 1.0 + (r % 2) * I;
    CHECK(creal(dsum[0]) == n * (n + 1) / 2.0 && cimag(dsum[0]) == n);
    CHECK(creal(dsum[1]) == creal(want) && cimag(dsum[1]) == cimag(want));
    if (rank == 0) CHECK(crealf(fsum) == n * (n + 1) / 2.0f && cimagf(fsum) == -2.0f * n);
    OK(rank, "complex sums and products: (%g, %g)", creal(dsum[1]), cimag(dsum[1]));
}

/* Keyvals deleted from MPI_COMM_SELF, in the order MPI_Finalize deleted them. */
static int self_keys[4], deleted[4], ndeleted;

static int note_delete(MPI_Comm comm, int keyval, void *value, void *extra) {
    (void)comm, (void)value, (void)extra;
    if (ndeleted < 4) deleted[ndeleted++] = keyval;
    /* Frees the keyval again (the program freed it already, the attribute holds it). */
    MPI_Comm_free_keyval(&keyval);
    return MPI_SUCCESS;
}

static void self_attributes(void) {
    static int values[4];
    for (int i = 0; i < 4; i++)
        CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, note_delete, &self_keys[i], NULL) ==
              MPI_SUCCESS);
    const int order[4] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++)
        CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, self_keys[order[i]], &values[i]) == MPI_SUCCESS);
    /* Setting one again keeps its place. */
    CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, self_keys[0], &values[1]) == MPI_SUCCESS);
    for (int i = 0; i < 4; i++) {
        int k = self_keys[i];
        CHECK(MPI_Comm_free_keyval(&k) == MPI_SUCCESS && k == MPI_KEYVAL_INVALID);
    }
}

/* After MPI_Finalize: which keys were deleted, in which order. */
static void self_attributes_deleted(void) {
    char line[64] = "";
    for (int i = 0; i < ndeleted; i++) {
        int which = -1;
        for (int j = 0; j < 4; j++)
            if (deleted[i] == self_keys[j]) which = j;
        snprintf(line + strlen(line), sizeof line - strlen(line), " %d", which);
    }
    OK(rank, "MPI_COMM_SELF attributes deleted in order%s", line);
}

static void user_codes(void) {
    int cls = -1, code = -1, flag = 0, *last = NULL;
    CHECK(MPI_Add_error_class(&cls) == MPI_SUCCESS && cls > MPI_ERR_LASTCODE);
    CHECK(MPI_Add_error_code(cls, &code) == MPI_SUCCESS && code > MPI_ERR_LASTCODE);
    CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag) == MPI_SUCCESS);
    CHECK(flag && *last >= cls);
    int got = -1;
    CHECK(MPI_Error_class(code, &got) == MPI_SUCCESS && got == cls);
    OK(rank, "user error class and code above MPI_ERR_LASTCODE");
}

static void dims(void) {
    int d[4] = {0, 0, 0, 0}, e[3] = {0, 4, 0};
    CHECK(MPI_Dims_create(5616, 4, d) == MPI_SUCCESS);
    CHECK(MPI_Dims_create(720, 3, e) == MPI_SUCCESS);
    OK(rank, "dims of 5616: %d x %d x %d x %d; of 720 with 4 fixed: %d x %d x %d", d[0], d[1],
       d[2], d[3], e[0], e[1], e[2]);
}

static void type_bounds(void) {
    struct ic { int i; char c; };
    struct di { double d; int i; };
    MPI_Datatype t_ic, t_di, t_ld, four, neg, evil, lbonly, tmp;
    int one[2] = {1, 1};
    MPI_Aint d_ic[2] = {0, offsetof(struct ic, c)};
    MPI_Datatype ty_ic[2] = {MPI_INT, MPI_CHAR}, ty_di[2] = {MPI_DOUBLE, MPI_INT};
    MPI_Datatype ty_ld[2] = {MPI_CHAR, MPI_LONG_DOUBLE};
    MPI_Aint d_di[2] = {0, offsetof(struct di, i)}, d_ld[2] = {0, 16};
    CHECK(MPI_Type_create_struct(2, one, d_ic, ty_ic, &t_ic) == MPI_SUCCESS);
    CHECK(MPI_Type_create_struct(2, one, d_di, ty_di, &t_di) == MPI_SUCCESS);
    CHECK(MPI_Type_create_struct(2, one, d_ld, ty_ld, &t_ld) == MPI_SUCCESS);
    MPI_Aint lb, ext[3];
    CHECK(MPI_Type_get_extent(t_ic, &lb, &ext[0]) == MPI_SUCCESS);
    CHECK(MPI_Type_get_extent(t_di, &lb, &ext[1]) == MPI_SUCCESS);
    CHECK(MPI_Type_get_extent(t_ld, &lb, &ext[2]) == MPI_SUCCESS);
    CHECK(ext[0] == sizeof(struct ic) && ext[1] == sizeof(struct di));
    /* Three structs in a row, sent to self as three elements of the type. */
    struct ic in[3] = {{1, 'a'}, {2, 'b'}, {3, 'c'}}, out[3];
    memset(out, 0, sizeof out);
    CHECK(MPI_Type_commit(&t_ic) == MPI_SUCCESS);
    CHECK(MPI_Sendrecv(in, 3, t_ic, 0, 9, out, 3, t_ic, 0, 9, MPI_COMM_SELF, MPI_STATUS_IGNORE) ==
          MPI_SUCCESS);
    CHECK(out[2].i == 3 && out[2].c == 'c');
    /* Explicit bounds with a negative extent: { (LB,6), 4 bytes at 0, (UB,-3) } three times. */
    MPI_Aint nlb, next;
    CHECK(MPI_Type_contiguous(4, MPI_BYTE, &four) == MPI_SUCCESS);
    CHECK(MPI_Type_create_resized(four, 6, -9, &neg) == MPI_SUCCESS);
    CHECK(MPI_Type_contiguous(3, neg, &evil) == MPI_SUCCESS);
    CHECK(MPI_Type_get_extent(evil, &nlb, &next) == MPI_SUCCESS);
    /* A struct of only a lower bound marker. */
    MPI_Aint ten = 10, llb, lext;
    MPI_Datatype lbt = MPI_LB;
    CHECK(MPI_Type_create_struct(1, one, &ten, &lbt, &lbonly) == MPI_SUCCESS);
    CHECK(MPI_Type_get_extent(lbonly, &llb, &lext) == MPI_SUCCESS);
    OK(rank, "struct extents %ld %ld %ld; negative extent: lb %ld extent %ld; LB only: lb %ld "
       "extent %ld", (long)ext[0], (long)ext[1], (long)ext[2], (long)nlb, (long)next, (long)llb,
       (long)lext);
    /* A new type takes the handle freed last. */
    MPI_Datatype freed = evil;
    CHECK(MPI_Type_free(&lbonly) == MPI_SUCCESS && MPI_Type_free(&evil) == MPI_SUCCESS);
    CHECK(MPI_Type_contiguous(2, MPI_INT, &tmp) == MPI_SUCCESS);
    OK(rank, "a new datatype takes the handle freed last: %s", tmp == freed ? "yes" : "no");
    CHECK(MPI_Type_free(&tmp) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&neg) == MPI_SUCCESS && MPI_Type_free(&four) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&t_ic) == MPI_SUCCESS && MPI_Type_free(&t_di) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&t_ld) == MPI_SUCCESS);
}

static void type_elements(void) {
    struct { double a; int b; double c; int d; } foo = {1.0, 2, 3.0, 4}, bar[2];
    int blocks[4] = {1, 1, 1, 1}, count = -1, elems = -1;
    MPI_Aint d[4] = {0, offsetof(__typeof__(foo), b), offsetof(__typeof__(foo), c),
                     offsetof(__typeof__(foo), d)};
    MPI_Datatype types[4] = {MPI_DOUBLE, MPI_INT, MPI_DOUBLE, MPI_INT}, s, part;
    MPI_Status st;
    CHECK(MPI_Type_create_struct(4, blocks, d, types, &s) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&s) == MPI_SUCCESS);
    CHECK(MPI_Sendrecv(&foo, 1, s, 0, 3, bar, 2, MPI_DOUBLE_INT, 0, 3, MPI_COMM_SELF, &st) ==
          MPI_SUCCESS);
    CHECK(MPI_Get_elements(&st, MPI_DOUBLE_INT, &elems) == MPI_SUCCESS);
    CHECK(MPI_Get_count(&st, MPI_DOUBLE_INT, &count) == MPI_SUCCESS);
    CHECK(bar[0].c == 3.0 && bar[0].d == 4); /* the second pair lands at offset 16 */
    /* An int and 5 chars sent, received as up to 2 elements of { int, 9 chars }. */
    int b2[2] = {1, 9}, b3[2] = {1, 5};
    MPI_Aint d2[2] = {0, 4};
    MPI_Datatype t2[2] = {MPI_INT, MPI_CHAR}, sent;
    char sbuf[16] = {0}, rbuf[64];
    CHECK(MPI_Type_create_struct(2, b2, d2, t2, &part) == MPI_SUCCESS);
    CHECK(MPI_Type_create_struct(2, b3, d2, t2, &sent) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&part) == MPI_SUCCESS && MPI_Type_commit(&sent) == MPI_SUCCESS);
    CHECK(MPI_Sendrecv(sbuf, 1, sent, 0, 4, rbuf, 2, part, 0, 4, MPI_COMM_SELF, &st) ==
          MPI_SUCCESS);
    int pcount = -2, pelems = -2;
    CHECK(MPI_Get_count(&st, part, &pcount) == MPI_SUCCESS);
    CHECK(MPI_Get_elements(&st, part, &pelems) == MPI_SUCCESS);
    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    CHECK(MPI_Type_get_name(MPI_C_COMPLEX, name, &len) == MPI_SUCCESS);
    OK(rank, "MPI_C_COMPLEX is named %s", name);
    OK(rank, "MPI_DOUBLE_INT: count %d elements %d; a partial struct: count %s elements %d",
       count, elems, pcount == MPI_UNDEFINED ? "MPI_UNDEFINED" : "defined", pelems);
    CHECK(MPI_Type_free(&s) == MPI_SUCCESS && MPI_Type_free(&part) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&sent) == MPI_SUCCESS);
}

static int comm_sum(MPI_Comm c) {
    int one = 1, sum = 0;
    CHECK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c) == MPI_SUCCESS);
    return sum;
}

static void idup_nonblocking(void) {
    MPI_Comm a, b, c1, c2;
    MPI_Request r[2];
    int v = rank;
    /* MPI_Comm_dup does not use up the duplicates MPI_Comm_idup makes without messages. */
    for (int i = 0; i < 40; i++) {
        MPI_Comm d;
        CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d) == MPI_SUCCESS && MPI_Comm_free(&d) == MPI_SUCCESS);
    }
    /* Rank 0 receives from every other rank before its MPI_Comm_idup; the others call it
       first, then send synchronously: an agreement inside the call would hang. */
    if (rank == 0) {
        for (int i = 1; i < n; i++)
            CHECK(MPI_Recv(&v, 1, MPI_INT, i, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
                  MPI_SUCCESS);
        CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &a, &r[0]) == MPI_SUCCESS);
    } else {
        CHECK(MPI_Comm_idup(MPI_COMM_WORLD, &a, &r[0]) == MPI_SUCCESS);
        CHECK(MPI_Ssend(&v, 1, MPI_INT, 0, 21, MPI_COMM_WORLD) == MPI_SUCCESS);
    }
    CHECK(MPI_Wait(&r[0], MPI_STATUS_IGNORE) == MPI_SUCCESS);
    CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &b) == MPI_SUCCESS);
    /* Duplicates of a duplicate and of another communicator, in opposite orders. */
    if (rank % 2 == 0) {
        CHECK(MPI_Comm_idup(a, &c1, &r[0]) == MPI_SUCCESS);
        CHECK(MPI_Comm_idup(b, &c2, &r[1]) == MPI_SUCCESS);
    } else {
        CHECK(MPI_Comm_idup(b, &c2, &r[0]) == MPI_SUCCESS);
        CHECK(MPI_Comm_idup(a, &c1, &r[1]) == MPI_SUCCESS);
    }
    CHECK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    CHECK(comm_sum(c1) == n && comm_sum(c2) == n && comm_sum(a) == n);
    CHECK(MPI_Comm_free(&c1) == MPI_SUCCESS && MPI_Comm_free(&c2) == MPI_SUCCESS);
    CHECK(MPI_Comm_free(&a) == MPI_SUCCESS && MPI_Comm_free(&b) == MPI_SUCCESS);
    if (n >= 2) {
        MPI_Comm half, inter, copy;
        CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half) == MPI_SUCCESS);
        CHECK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - rank % 2, 22, &inter) ==
              MPI_SUCCESS);
        CHECK(MPI_Comm_idup(inter, &copy, &r[0]) == MPI_SUCCESS);
        CHECK(MPI_Wait(&r[0], MPI_STATUS_IGNORE) == MPI_SUCCESS);
        int hr = -1, got = -1;
        CHECK(MPI_Comm_rank(half, &hr) == MPI_SUCCESS);
        if (hr == 0) {
            CHECK(MPI_Sendrecv(&rank, 1, MPI_INT, 0, 23, &got, 1, MPI_INT, 0, 23, copy,
                               MPI_STATUS_IGNORE) == MPI_SUCCESS);
            CHECK(got == 1 - rank % 2);
        }
        CHECK(MPI_Comm_free(&copy) == MPI_SUCCESS && MPI_Comm_free(&inter) == MPI_SUCCESS);
        CHECK(MPI_Comm_free(&half) == MPI_SUCCESS);
    }
    OK(rank, "MPI_Comm_idup without waiting for other members, in different orders");
}

/* Columns of matrices of ints (row-major) as a vector type resized to one int, so that
   column i is one element at displacement i: scattered from, gathered to and gathered
   everywhere, and received from every rank by alltoallw. */
static void holey_v_collectives(void) {
    int rows = n, *m = malloc(rows * 3 * sizeof(int)), *back = malloc(rows * 3 * sizeof(int));
    MPI_Datatype col, col1;
    CHECK(MPI_Type_vector(rows, 1, 3, MPI_INT, &col) == MPI_SUCCESS);
    CHECK(MPI_Type_create_resized(col, 0, sizeof(int), &col1) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&col1) == MPI_SUCCESS);
    for (int i = 0; i < rows * 3; i++) m[i] = 100 + i, back[i] = -1;
    /* Rank i gets column i % 3 (as rows ints). */
    int *counts = malloc(n * sizeof(int)), *displs = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) counts[i] = 1, displs[i] = i % 3;
    int *mine = malloc(rows * sizeof(int));
    CHECK(MPI_Scatterv(m, counts, displs, col1, mine, rows, MPI_INT, 0, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    for (int r = 0; r < rows; r++) CHECK(mine[r] == 100 + r * 3 + rank % 3);
    /* Back into the root's copy: only ranks 0..2 give theirs (columns 0..2). */
    for (int i = 0; i < n; i++) counts[i] = i < 3 ? 1 : 0;
    MPI_Request req;
    CHECK(MPI_Igatherv(mine, rank < 3 ? rows : 0, MPI_INT, back, counts, displs, col1, 0,
                       MPI_COMM_WORLD, &req) == MPI_SUCCESS);
    CHECK(MPI_Wait(&req, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    long sum = 0;
    if (rank == 0)
        for (int i = 0; i < rows * 3; i++) {
            int c = i % 3;
            CHECK(back[i] == (c < n ? m[i] : -1));
            sum += back[i];
        }
    /* Every rank's column of an n-column matrix, gathered everywhere. */
    MPI_Datatype colN, colN1;
    int *all = malloc(n * n * sizeof(int));
    CHECK(MPI_Type_vector(n, 1, n, MPI_INT, &colN) == MPI_SUCCESS);
    CHECK(MPI_Type_create_resized(colN, 0, sizeof(int), &colN1) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&colN1) == MPI_SUCCESS);
    int *col_of_me = malloc(n * sizeof(int));
    for (int r = 0; r < n; r++) col_of_me[r] = rank * 10 + r;
    for (int i = 0; i < n; i++) counts[i] = 1, displs[i] = i;
    CHECK(MPI_Allgatherv(col_of_me, n, MPI_INT, all, counts, displs, colN1, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    for (int r = 0; r < n; r++)
        for (int c = 0; c < n; c++) CHECK(all[r * n + c] == c * 10 + r);
    /* Element i of each rank's row goes to rank i. */
    int *row = malloc(n * sizeof(int)), *got = malloc(n * n * sizeof(int));
    for (int i = 0; i < n; i++) row[i] = rank * 100 + i;
    int *ones = malloc(n * sizeof(int)), *zeros = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) ones[i] = 1, zeros[i] = 0;
    for (int i = 0; i < n; i++) displs[i] = i;
    /* Sent from every other int of a doubled row (a type of one int and a gap). */
    MPI_Datatype gap, gap1;
    int *row2 = malloc(2 * n * sizeof(int));
    for (int i = 0; i < n; i++) row2[2 * i] = row[i], row2[2 * i + 1] = -7;
    CHECK(MPI_Type_contiguous(1, MPI_INT, &gap) == MPI_SUCCESS);
    CHECK(MPI_Type_create_resized(gap, 0, 2 * sizeof(int), &gap1) == MPI_SUCCESS);
    CHECK(MPI_Type_commit(&gap1) == MPI_SUCCESS);
    CHECK(MPI_Alltoallv(row2, ones, displs, gap1, got, ones, displs, MPI_INT,
                        MPI_COMM_WORLD) == MPI_SUCCESS);
    for (int i = 0; i < n; i++) CHECK(got[i] == i * 100 + rank);
    CHECK(MPI_Type_free(&gap) == MPI_SUCCESS && MPI_Type_free(&gap1) == MPI_SUCCESS);
    free(row2);
    MPI_Datatype *itypes = malloc(n * sizeof(MPI_Datatype));
    int *bdispls = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) itypes[i] = MPI_INT, bdispls[i] = i * sizeof(int);
    int *mat = malloc(n * n * sizeof(int));
    for (int i = 0; i < n * n; i++) mat[i] = -1;
    /* Every rank sends its row (n ints) to rank 0 only; rank 0 takes rank i's row as column i
       of its matrix (byte displacement i ints, the resized column type). */
    int *sc = malloc(n * sizeof(int)), *rc = malloc(n * sizeof(int));
    for (int i = 0; i < n; i++) sc[i] = i == 0 ? n : 0, rc[i] = rank == 0 ? 1 : 0;
    MPI_Datatype *rtypes = malloc(n * sizeof(MPI_Datatype));
    for (int i = 0; i < n; i++) rtypes[i] = colN1;
    CHECK(MPI_Alltoallw(row, sc, zeros, itypes, mat, rc, bdispls, rtypes, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    if (rank == 0)
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++) CHECK(mat[r * n + c] == c * 100 + r);
    OK(rank, "v and w collectives on a resized column: gathered sum %ld", sum);
    CHECK(MPI_Type_free(&col) == MPI_SUCCESS && MPI_Type_free(&col1) == MPI_SUCCESS);
    CHECK(MPI_Type_free(&colN) == MPI_SUCCESS && MPI_Type_free(&colN1) == MPI_SUCCESS);
    free(m), free(back), free(counts), free(displs), free(mine), free(all), free(col_of_me);
    free(row), free(got), free(ones), free(zeros), free(itypes), free(bdispls);
    free(mat), free(sc), free(rc), free(rtypes);
}

static void long_doubles(void) {
    long double x = (rank + 1) + 0x1p-60L, sum = 0, prod = 0, mn = 0, mx = 0;
    CHECK(MPI_Allreduce(&x, &sum, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Allreduce(&x, &prod, 1, MPI_LONG_DOUBLE, MPI_PROD, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Allreduce(&x, &mn, 1, MPI_LONG_DOUBLE, MPI_MIN, MPI_COMM_WORLD) == MPI_SUCCESS);
    CHECK(MPI_Allreduce(&x, &mx, 1, MPI_LONG_DOUBLE, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS);
    /* The 2^-60 parts survive the sum: an f64 would drop them. */
    CHECK(sum == n * (n + 1) / 2 + n * 0x1p-60L && mn == 1 + 0x1p-60L);
    struct { long double v; int i; } in = {(long double)(rank % 2), rank}, loc_max, loc_min;
    CHECK(MPI_Allreduce(&in, &loc_max, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    CHECK(MPI_Allreduce(&in, &loc_min, 1, MPI_LONG_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    long double _Complex z = (rank + 1) + 1.0L * I, zp = 0, zs = 0;
    CHECK(MPI_Allreduce(&z, &zp, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    CHECK(MPI_Allreduce(&z, &zs, 1, MPI_C_LONG_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD) ==
          MPI_SUCCESS);
    OK(rank, "long double: sum %La prod %La min %La max %La; maxloc (%Lg, %d) minloc (%Lg, %d); "
       "complex product (%Lg, %Lg) sum (%Lg, %Lg)", sum, prod, mn, mx, loc_max.v, loc_max.i,
       loc_min.v, loc_min.i, creall(zp), cimagl(zp), creall(zs), cimagl(zs));
}

static void inter_nonblocking(void) {
    if (n < 2) return;
    MPI_Comm half, ic;
    int side = rank % 2, hr = -1, hn = 0, rn = 0;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, side, rank, &half) == MPI_SUCCESS);
    CHECK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - side, 31, &ic) == MPI_SUCCESS);
    CHECK(MPI_Comm_rank(half, &hr) == MPI_SUCCESS && MPI_Comm_size(half, &hn) == MPI_SUCCESS);
    CHECK(MPI_Comm_remote_size(ic, &rn) == MPI_SUCCESS);
    MPI_Request r[8];
    int root = side == 0 ? (hr == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    int b = side == 0 ? 77 : -1, mine = rank + 1, all = 0, red = -1;
    int *gat = calloc(rn + 1, sizeof(int)), *ag = calloc(rn + 1, sizeof(int));
    int *sc = malloc((rn + 1) * sizeof(int)), *a2a = calloc(rn + 1, sizeof(int));
    int *out = malloc((rn + 1) * sizeof(int));
    int got_sc = -1;
    for (int i = 0; i < rn; i++) sc[i] = 1000 + i, out[i] = rank * 10 + i;
    CHECK(MPI_Ibarrier(ic, &r[0]) == MPI_SUCCESS);
    CHECK(MPI_Ibcast(&b, 1, MPI_INT, root, ic, &r[1]) == MPI_SUCCESS);
    CHECK(MPI_Iallreduce(&mine, &all, 1, MPI_INT, MPI_SUM, ic, &r[2]) == MPI_SUCCESS);
    CHECK(MPI_Ireduce(&mine, &red, 1, MPI_INT, MPI_MAX, root, ic, &r[3]) == MPI_SUCCESS);
    CHECK(MPI_Igather(&mine, 1, MPI_INT, gat, 1, MPI_INT, root, ic, &r[4]) == MPI_SUCCESS);
    CHECK(MPI_Iscatter(sc, 1, MPI_INT, &got_sc, 1, MPI_INT, root, ic, &r[5]) == MPI_SUCCESS);
    CHECK(MPI_Iallgather(&mine, 1, MPI_INT, ag, 1, MPI_INT, ic, &r[6]) == MPI_SUCCESS);
    CHECK(MPI_Ialltoall(out, 1, MPI_INT, a2a, 1, MPI_INT, ic, &r[7]) == MPI_SUCCESS);
    CHECK(MPI_Waitall(8, r, MPI_STATUSES_IGNORE) == MPI_SUCCESS);
    /* The other group's world ranks are 1 - side, 3 - side, ...: remote rank i is world
       rank 2 * i + 1 - side. */
    int want_all = 0, want_max = 0;
    for (int i = 0; i < rn; i++) want_all += 2 * i + 1 - side + 1;
    want_max = 2 * (rn - 1) + 1 - side + 1;
    CHECK(all == want_all);
    if (side == 1) CHECK(b == 77 && got_sc == 1000 + hr);
    if (root == MPI_ROOT) {
        CHECK(red == want_max);
        for (int i = 0; i < rn; i++) CHECK(gat[i] == 2 * i + 1 - side + 1);
    }
    for (int i = 0; i < rn; i++) {
        CHECK(ag[i] == 2 * i + 1 - side + 1);
        CHECK(a2a[i] == (2 * i + 1 - side) * 10 + hr);
    }
    /* The v and w forms and the reduce-scatters, blocking and not. */
    int *cnt = malloc((rn + 1) * sizeof(int)), *dsp = malloc((rn + 1) * sizeof(int));
    int *bd = malloc((rn + 1) * sizeof(int)), *vout = calloc(2 * rn + 2, sizeof(int));
    MPI_Datatype *ty = malloc((rn + 1) * sizeof(MPI_Datatype));
    for (int i = 0; i < rn; i++) cnt[i] = 1, dsp[i] = 2 * i, bd[i] = 2 * i * sizeof(int), ty[i] = MPI_INT;
    CHECK(MPI_Allgatherv(&mine, 1, MPI_INT, vout, cnt, dsp, MPI_INT, ic) == MPI_SUCCESS);
    for (int i = 0; i < rn; i++) CHECK(vout[2 * i] == 2 * i + 1 - side + 1);
    memset(vout, 0, (2 * rn + 2) * sizeof(int));
    int *sw = malloc(2 * rn * sizeof(int));
    for (int i = 0; i < rn; i++) sw[2 * i] = rank * 10 + i, sw[2 * i + 1] = -1;
    CHECK(MPI_Ialltoallw(sw, cnt, bd, ty, vout, cnt, bd, ty, ic, &r[0]) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r[0], MPI_STATUS_IGNORE) == MPI_SUCCESS);
    for (int i = 0; i < rn; i++) CHECK(vout[2 * i] == (2 * i + 1 - side) * 10 + hr);
    free(sw);
    int vsc = -1, *sc2 = malloc(2 * rn * sizeof(int));
    for (int i = 0; i < 2 * rn; i++) sc2[i] = 1000 + i;
    CHECK(MPI_Scatterv(sc2, cnt, dsp, MPI_INT, &vsc, 1, MPI_INT, root, ic) == MPI_SUCCESS);
    free(sc2);
    if (side == 1) CHECK(vsc == 1000 + 2 * hr);
    /* A vector of one int per member of the own group: rank i of a group gets the sum of
       entry i over the other group. */
    int *vec = malloc((hn + 1) * sizeof(int)), blk = -1, blk2 = -1;
    for (int i = 0; i < hn; i++) vec[i] = rank * 100 + i;
    CHECK(MPI_Reduce_scatter_block(vec, &blk, 1, MPI_INT, MPI_SUM, ic) == MPI_SUCCESS);
    int *ones = malloc((hn + 1) * sizeof(int));
    for (int i = 0; i < hn; i++) ones[i] = 1;
    CHECK(MPI_Ireduce_scatter(vec, &blk2, ones, MPI_INT, MPI_SUM, ic, &r[0]) == MPI_SUCCESS);
    CHECK(MPI_Wait(&r[0], MPI_STATUS_IGNORE) == MPI_SUCCESS);
    int want_blk = 0;
    for (int i = 0; i < rn; i++) want_blk += (2 * i + 1 - side) * 100 + hr;
    CHECK(blk == want_blk && blk2 == want_blk);
    OK(rank, "intercommunicator v, w and reduce-scatter collectives: block %d", blk);
    free(cnt), free(dsp), free(bd), free(vout), free(ty), free(vec), free(ones);
    /* The persistent form, started twice. */
    MPI_Request p;
    CHECK(MPI_Allreduce_init(&mine, &all, 1, MPI_INT, MPI_SUM, ic, MPI_INFO_NULL, &p) ==
          MPI_SUCCESS);
    for (int k = 0; k < 2; k++) {
        all = 0;
        CHECK(MPI_Start(&p) == MPI_SUCCESS && MPI_Wait(&p, MPI_STATUS_IGNORE) == MPI_SUCCESS);
        CHECK(all == want_all);
    }
    CHECK(MPI_Request_free(&p) == MPI_SUCCESS);
    OK(rank, "intercommunicator nonblocking collectives: allreduce %d", all);
    free(gat), free(ag), free(sc), free(a2a), free(out);
    CHECK(MPI_Comm_free(&ic) == MPI_SUCCESS && MPI_Comm_free(&half) == MPI_SUCCESS);
}

/* One-sided communication (see the header). */
static void rma_cases(void) {
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    int buf[8], src[8], res[8];
    MPI_Win win;
    for (int i = 0; i < 8; i++) buf[i] = -1;
    CHECK(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win) ==
          MPI_SUCCESS);
    /* MPI_BOTTOM origins: src[1] and src[3] by absolute address. */
    for (int i = 0; i < 8; i++) src[i] = 100 * rank + i;
    MPI_Aint at[2];
    int lens[2] = {1, 1};
    MPI_Get_address(&src[1], &at[0]);
    MPI_Get_address(&src[3], &at[1]);
    MPI_Datatype abs_t;
    MPI_Type_create_hindexed(2, lens, at, MPI_INT, &abs_t);
    MPI_Type_commit(&abs_t);
    MPI_Win_fence(0, win);
    CHECK(MPI_Put(MPI_BOTTOM, 1, abs_t, right, 0, 2, MPI_INT, win) == MPI_SUCCESS);
    MPI_Win_fence(0, win);
    CHECK(buf[0] == 100 * left + 1 && buf[1] == 100 * left + 3);
    src[1] = src[3] = 0;
    CHECK(MPI_Get(MPI_BOTTOM, 1, abs_t, right, 0, 2, MPI_INT, win) == MPI_SUCCESS);
    MPI_Win_fence(0, win);
    CHECK(src[1] == 100 * rank + 1 && src[3] == 100 * rank + 3);
    src[1] = src[3] = 0;
    CHECK(MPI_Get_accumulate(NULL, 0, MPI_INT, MPI_BOTTOM, 1, abs_t, right, 0, 2, MPI_INT,
                             MPI_NO_OP, win) == MPI_SUCCESS);
    MPI_Win_fence(0, win);
    CHECK(src[1] == 100 * rank + 1 && src[3] == 100 * rank + 3);
    MPI_Type_free(&abs_t);
    /* Post/start/complete/wait with every rank in both groups, itself included. */
    MPI_Group all;
    MPI_Win_get_group(win, &all);
    CHECK(MPI_Win_post(all, 0, win) == MPI_SUCCESS);
    CHECK(MPI_Win_start(all, 0, win) == MPI_SUCCESS);
    int v = 10 + rank;
    CHECK(MPI_Put(&v, 1, MPI_INT, rank, 2, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Put(&v, 1, MPI_INT, right, 3, 1, MPI_INT, win) == MPI_SUCCESS);
    CHECK(MPI_Win_complete(win) == MPI_SUCCESS);
    CHECK(MPI_Win_wait(win) == MPI_SUCCESS);
    CHECK(buf[2] == 10 + rank && buf[3] == 10 + left);
    MPI_Group_free(&all);
    /* The target waits in MPI_Recv for a message the origin sends after MPI_Win_complete. */
    if (n >= 2 && rank < 2) {
        MPI_Group g, other;
        int peer = 1 - rank, got = 0;
        MPI_Win_get_group(win, &g);
        MPI_Group_incl(g, 1, &peer, &other);
        if (rank == 0) {
            v = 77;
            CHECK(MPI_Win_start(other, 0, win) == MPI_SUCCESS);
            CHECK(MPI_Put(&v, 1, MPI_INT, 1, 4, 1, MPI_INT, win) == MPI_SUCCESS);
            CHECK(MPI_Win_complete(win) == MPI_SUCCESS);
            CHECK(MPI_Send(&v, 1, MPI_INT, 1, 9, MPI_COMM_WORLD) == MPI_SUCCESS);
        } else {
            CHECK(MPI_Win_post(other, 0, win) == MPI_SUCCESS);
            CHECK(MPI_Recv(&got, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE) ==
                  MPI_SUCCESS);
            CHECK(MPI_Win_wait(win) == MPI_SUCCESS);
            CHECK(got == 77 && buf[4] == 77);
        }
        MPI_Group_free(&other);
        MPI_Group_free(&g);
    }
    /* Accumulates moving no data: a zero-size derived type, with any predefined operation. */
    MPI_Datatype empty;
    MPI_Type_contiguous(0, MPI_INT, &empty);
    MPI_Type_commit(&empty);
    MPI_Win_fence(0, win);
    CHECK(MPI_Accumulate(src, 1, empty, right, 0, 1, empty, MPI_SUM, win) == MPI_SUCCESS);
    CHECK(MPI_Get_accumulate(src, 0, MPI_INT, res, 2, empty, right, 0, 1, empty, MPI_MAX,
                             win) == MPI_SUCCESS);
    MPI_Win_fence(0, win);
    MPI_Type_free(&empty);
    MPI_Win_free(&win);
    /* MPI_MAXLOC on MPI_DOUBLE_INT through a vector type (a hole between value and index). */
    struct { double v; int i; } t[6], o[6];
    for (int k = 0; k < 6; k++) {
        t[k].v = 5.0; t[k].i = 50;
        o[k].v = k % 2 ? 1.0 : 9.0; o[k].i = rank;
    }
    MPI_Datatype vec;
    MPI_Type_vector(3, 1, 2, MPI_DOUBLE_INT, &vec);
    MPI_Type_commit(&vec);
    CHECK(MPI_Win_create(t, sizeof t, sizeof t[0], MPI_INFO_NULL, MPI_COMM_WORLD, &win) ==
          MPI_SUCCESS);
    MPI_Win_fence(0, win);
    CHECK(MPI_Accumulate(o, 1, vec, right, 0, 1, vec, MPI_MAXLOC, win) == MPI_SUCCESS);
    MPI_Win_fence(0, win);
    for (int k = 0; k < 6; k++)
        CHECK(k % 2 ? t[k].v == 5.0 && t[k].i == 50 : t[k].v == 9.0 && t[k].i == left);
    MPI_Win_free(&win);
    MPI_Type_free(&vec);
    /* A dynamic window: one access across two adjacent attached regions. */
    int region[8];
    MPI_Aint base;
    for (int k = 0; k < 8; k++) region[k] = 0;
    CHECK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win) == MPI_SUCCESS);
    CHECK(MPI_Win_attach(win, &region[0], 4 * sizeof(int)) == MPI_SUCCESS);
    CHECK(MPI_Win_attach(win, &region[4], 4 * sizeof(int)) == MPI_SUCCESS);
    MPI_Get_address(&region[2], &base);
    MPI_Aint their;
    CHECK(MPI_Sendrecv(&base, 1, MPI_AINT, left, 11, &their, 1, MPI_AINT, right, 11,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS);
    for (int k = 0; k < 4; k++) src[k] = 1000 * rank + k;
    MPI_Win_fence(0, win);
    CHECK(MPI_Put(src, 4, MPI_INT, right, their, 4, MPI_INT, win) == MPI_SUCCESS);
    MPI_Win_fence(0, win);
    CHECK(region[1] == 0 && region[6] == 0);
    for (int k = 0; k < 4; k++) CHECK(region[2 + k] == 1000 * left + k);
    CHECK(MPI_Win_detach(win, &region[0]) == MPI_SUCCESS);
    CHECK(MPI_Win_detach(win, &region[4]) == MPI_SUCCESS);
    MPI_Win_free(&win);
    /* MPI_Win_allocate_shared: odd ranks give size 0, their base is NULL. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int nrank;
    MPI_Comm_rank(node, &nrank);
    int *mine = NULL;
    CHECK(MPI_Win_allocate_shared(nrank % 2 ? 0 : 4 * sizeof(int), sizeof(int), MPI_INFO_NULL,
                                  node, &mine, &win) == MPI_SUCCESS);
    CHECK((mine == NULL) == (nrank % 2 == 1));
    MPI_Aint qsize = -1;
    int qunit = -1;
    int *qbase = mine;
    if (n >= 2) {
        CHECK(MPI_Win_shared_query(win, 1, &qsize, &qunit, &qbase) == MPI_SUCCESS);
        CHECK(qsize == 0 && qbase == NULL);
    }
    MPI_Win_free(&win);
    MPI_Comm_free(&node);
    OK(rank, "one-sided: MPI_BOTTOM origins, own post/start groups, progress in MPI_Recv, "
             "MAXLOC on MPI_DOUBLE_INT, empty accumulates, dynamic regions, empty shared parts");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    error_field_kept();
    big_counts();
    bottom();
    persistent_after_free();
    holey_collectives();
    inter_one_way();
    create_disjoint();
    complex_sums();
    long_doubles();
    user_codes();
    dims();
    idup_nonblocking();
    inter_nonblocking();
    holey_v_collectives();
    type_bounds();
    type_elements();
    self_attributes();
    rma_cases();
    MPI_Barrier(MPI_COMM_WORLD);
    OK(rank, "done");
    MPI_Finalize();
    self_attributes_deleted();
    return 0;
}
