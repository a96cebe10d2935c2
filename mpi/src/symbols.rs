//! Data symbols and helper functions of MPICH's `mpi.h` that a program may reference:
//! `MPI_UNWEIGHTED`, `MPI_WEIGHTS_EMPTY`, the Fortran status-ignore objects, `MPIR_Dup_fn`
//! (`MPI_DUP_FN`). Their sizes are those of MPICH's, so copy relocations in a program built
//! against MPICH fit.

use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicPtr;

use crate::abi::{self, Handle, MpiStatus};

/// A pointer constant exported as data.
#[repr(transparent)]
pub struct Ptr(*const c_void);

// SAFETY: every `Ptr` is an immutable static holding the address of another immutable static
// (or a constant); sharing it between threads only copies the address.
unsafe impl Sync for Ptr {}

/// What `MPI_UNWEIGHTED` points to.
#[unsafe(no_mangle)]
pub static MPIR_C_MPI_UNWEIGHTED: c_int = 0;
/// What `MPI_WEIGHTS_EMPTY` points to.
#[unsafe(no_mangle)]
pub static MPIR_C_MPI_WEIGHTS_EMPTY: c_int = 0;
/// `MPI_UNWEIGHTED`.
#[unsafe(no_mangle)]
pub static MPI_UNWEIGHTED: Ptr = Ptr(&MPIR_C_MPI_UNWEIGHTED as *const c_int as *const c_void);
/// `MPI_WEIGHTS_EMPTY`.
#[unsafe(no_mangle)]
pub static MPI_WEIGHTS_EMPTY: Ptr = Ptr(&MPIR_C_MPI_WEIGHTS_EMPTY as *const c_int as *const c_void);

const EMPTY: MpiStatus = MpiStatus {
    count_lo: 0,
    count_hi_and_cancelled: 0,
    source: 0,
    tag: 0,
    error: 0,
};

/// `MPIR_F08_MPI_STATUS_IGNORE_OBJ`.
#[unsafe(no_mangle)]
pub static MPIR_F08_MPI_STATUS_IGNORE_OBJ: MpiStatus = EMPTY;
/// `MPIR_F08_MPI_STATUSES_IGNORE_OBJ`.
#[unsafe(no_mangle)]
pub static MPIR_F08_MPI_STATUSES_IGNORE_OBJ: [MpiStatus; 1] = [EMPTY];
/// `MPIR_F08_MPI_IN_PLACE`.
#[unsafe(no_mangle)]
pub static MPIR_F08_MPI_IN_PLACE: c_int = 0;
/// `MPIR_F08_MPI_BOTTOM`.
#[unsafe(no_mangle)]
pub static MPIR_F08_MPI_BOTTOM: c_int = 0;
/// `MPI_F08_STATUS_IGNORE`.
#[unsafe(no_mangle)]
pub static MPI_F08_STATUS_IGNORE: Ptr =
    Ptr(&MPIR_F08_MPI_STATUS_IGNORE_OBJ as *const MpiStatus as *const c_void);
/// `MPI_F08_STATUSES_IGNORE`.
#[unsafe(no_mangle)]
pub static MPI_F08_STATUSES_IGNORE: Ptr =
    Ptr(&MPIR_F08_MPI_STATUSES_IGNORE_OBJ as *const [MpiStatus; 1] as *const c_void);
/// `MPI_F_STATUS_IGNORE`: a pointer variable, as in MPICH. MPICH's Fortran library
/// (`libmpichfort.so.12`) stores the address of its `MPI_STATUS_IGNORE` common block here at
/// its first call (`mpirinitc_`), so it lives in writable memory.
#[unsafe(no_mangle)]
pub static MPI_F_STATUS_IGNORE: AtomicPtr<c_void> = AtomicPtr::new(
    (&raw const MPIR_F08_MPI_STATUS_IGNORE_OBJ)
        .cast::<c_void>()
        .cast_mut(),
);
/// `MPI_F_STATUSES_IGNORE`: writable as `MPI_F_STATUS_IGNORE`.
#[unsafe(no_mangle)]
pub static MPI_F_STATUSES_IGNORE: AtomicPtr<c_void> = AtomicPtr::new(
    (&raw const MPIR_F08_MPI_STATUSES_IGNORE_OBJ)
        .cast::<c_void>()
        .cast_mut(),
);
/// `MPI_T_PVAR_ALL_HANDLES`.
#[unsafe(no_mangle)]
pub static MPI_T_PVAR_ALL_HANDLES: Ptr = Ptr(&MPIR_F08_MPI_BOTTOM as *const c_int as *const c_void);

/// `MPIR_Dup_fn` (`MPI_DUP_FN`, `MPI_COMM_DUP_FN`): copies the attribute value.
///
/// # Safety
///
/// `attribute_val_out` is a writable `void *`, `flag` a writable int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPIR_Dup_fn(
    oldcomm: Handle,
    keyval: c_int,
    extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let _ = (oldcomm, keyval, extra_state);
    // SAFETY: the caller's `void **` and int, as MPI's copy callbacks receive them.
    unsafe {
        if let Some(out) = attribute_val_out.cast::<*mut c_void>().as_mut() {
            *out = attribute_val_in;
        }
        if let Some(f) = flag.as_mut() {
            *f = 1;
        }
    }
    abi::SUCCESS
}

mpi_raw! {
    /// `MPI_File_c2f`: the file's id (0 for `MPI_FILE_NULL`).
    MPI_File_c2f / PMPI_File_c2f(file: *mut c_void) -> c_int => { crate::file::id_of(file as usize) as c_int }
}

mpi_raw! {
    /// `MPI_File_f2c`: the file of an id (`MPI_FILE_NULL` for 0).
    MPI_File_f2c / PMPI_File_f2c(file: c_int) -> *mut c_void => {
        if file <= 0 {
            std::ptr::null_mut()
        } else {
            crate::file::handle_of(file as usize) as *mut c_void
        }
    }
}

mpi_raw! {
    /// `MPI_Info_c2f`: the handle itself (as MPICH's macro).
    MPI_Info_c2f / PMPI_Info_c2f(info: Handle) -> c_int => { info }
}

mpi_raw! {
    /// `MPI_Info_f2c`: the handle itself (as MPICH's macro).
    MPI_Info_f2c / PMPI_Info_f2c(info: c_int) -> Handle => { info }
}
