/* Parallel HDF5 (Debian's libhdf5-mpich, compiled by h5pcc.mpich) through the MPI face's
   MPI-IO: collective writes of a contiguous dataset (a block of rows per rank) and of a chunked
   one (every n-th row per rank: HDF5's linked-chunk collective I/O, one file view over all the
   chunks), independent writes of an extendible chunked dataset, an attribute, collective
   metadata operations; then the file is opened again and every rank reads and checks every
   element. The file goes to $TMPDIR (or /tmp) and is deleted at the end. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ROWS 16
#define COLS 1000
#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); MPI_Abort(MPI_COMM_WORLD, 3); } while (0)
#define H(x) do { if ((x) < 0) FAIL("%s failed at line %d", #x, __LINE__); } while (0)

static double val(int ds, long r, long c) { return ds * 1e7 + r * COLS + c; }

int main(int argc, char **argv) {
    int me, n;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    char path[4096];
    if (argc > 1) {
        snprintf(path, sizeof path, "%s", argv[1]);
    } else {
        const char *dir = getenv("TMPDIR");
        long id = (long)getpid();
        MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        snprintf(path, sizeof path, "%s/viaduct-ph5-%ld.h5", dir && *dir ? dir : "/tmp", id);
    }
    hsize_t dims[2] = {(hsize_t)ROWS * n, COLS};
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    H(H5Pset_all_coll_metadata_ops(fapl, 1));
    H(H5Pset_coll_metadata_write(fapl, 1));
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H(f);
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[2] = {ROWS / 2, 128};
    H(H5Pset_chunk(dcpl, 2, chunk));
    hid_t dsets[3];
    dsets[0] = H5Dcreate2(f, "contig", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    dsets[1] = H5Dcreate2(f, "chunked", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hsize_t maxd[2] = {H5S_UNLIMITED, COLS}, d0[2] = {0, COLS};
    hid_t espace = H5Screate_simple(2, d0, maxd);
    dsets[2] = H5Dcreate2(f, "extendible", H5T_NATIVE_DOUBLE, espace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    for (int i = 0; i < 3; i++) H(dsets[i]);
    H(H5Dset_extent(dsets[2], dims));
    double *buf = malloc(sizeof(double) * ROWS * COLS);
    /* Each rank's block of rows; in "chunked" a strided pattern: rank r owns rows r, r+n, ... */
    for (int ds = 0; ds < 3; ds++) {
        hid_t fs = H5Dget_space(dsets[ds]);
        if (ds == 1) {
            hsize_t start[2] = {(hsize_t)me, 0}, stride[2] = {(hsize_t)n, 1}, count[2] = {ROWS, 1}, block[2] = {1, COLS};
            H(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, stride, count, block));
            for (long i = 0; i < ROWS; i++)
                for (long c = 0; c < COLS; c++) buf[i * COLS + c] = val(ds, me + i * n, c);
        } else {
            hsize_t start[2] = {(hsize_t)me * ROWS, 0}, count[2] = {ROWS, COLS};
            H(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
            for (long i = 0; i < ROWS; i++)
                for (long c = 0; c < COLS; c++) buf[i * COLS + c] = val(ds, me * ROWS + i, c);
        }
        hsize_t mdims[2] = {ROWS, COLS};
        hid_t ms = H5Screate_simple(2, mdims, NULL);
        hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
        H(H5Pset_dxpl_mpio(dxpl, ds == 2 ? H5FD_MPIO_INDEPENDENT : H5FD_MPIO_COLLECTIVE));
        H(H5Dwrite(dsets[ds], H5T_NATIVE_DOUBLE, ms, fs, dxpl, buf));
        H5Pclose(dxpl); H5Sclose(ms); H5Sclose(fs);
    }
    hid_t as = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(dsets[0], "ranks", H5T_NATIVE_INT, as, H5P_DEFAULT, H5P_DEFAULT);
    H(H5Awrite(a, H5T_NATIVE_INT, &n));
    H5Aclose(a); H5Sclose(as);
    for (int i = 0; i < 3; i++) H5Dclose(dsets[i]);
    H5Pclose(dcpl); H5Sclose(space); H5Sclose(espace);
    H(H5Fclose(f));

    /* Reopen read-only; every rank reads the whole of each dataset collectively (ds 0, 1) or
       independently (ds 2), and checks it. */
    f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H(f);
    double *all = malloc(sizeof(double) * ROWS * n * COLS);
    const char *names[3] = {"contig", "chunked", "extendible"};
    long bad = 0;
    for (int ds = 0; ds < 3; ds++) {
        hid_t d = H5Dopen2(f, names[ds], H5P_DEFAULT);
        H(d);
        hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
        H(H5Pset_dxpl_mpio(dxpl, ds == 2 ? H5FD_MPIO_INDEPENDENT : H5FD_MPIO_COLLECTIVE));
        H(H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, dxpl, all));
        for (long r = 0; r < (long)ROWS * n; r++)
            for (long c = 0; c < COLS; c++)
                if (all[r * COLS + c] != val(ds, r, c)) {
                    if (bad++ < 5) fprintf(stderr, "rank %d: %s[%ld][%ld] = %g, want %g\n", me, names[ds], r, c, all[r * COLS + c], val(ds, r, c));
                }
        if (ds == 0) {
            int got = 0;
            hid_t at = H5Aopen(d, "ranks", H5P_DEFAULT);
            H(H5Aread(at, H5T_NATIVE_INT, &got));
            H5Aclose(at);
            if (got != n) FAIL("attribute ranks = %d, want %d", got, n);
        }
        H5Pclose(dxpl); H5Dclose(d);
    }
    H(H5Fclose(f));
    H5Pclose(fapl);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0 && argc < 2) unlink(path);
    if (bad) FAIL("rank %d: %ld wrong elements", me, bad);
    printf("rank %d: ok, %d datasets of %d x %d\n", me, 3, ROWS * n, COLS);
    free(buf); free(all);
    MPI_Finalize();
    return 0;
}
