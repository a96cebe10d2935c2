//! Fortran helpers of the C interface: `MPI_Status_c2f`, `MPI_Status_f2c`,
//! `MPI_Status_c2f08`, `MPI_Status_f082c`, `MPI_Status_f2f08`, `MPI_Status_f082f` (MPICH's
//! layouts: `MPI_Status`, the `mpif.h`/`mpi` module status of `MPI_F_STATUS_SIZE` (5)
//! `MPI_Fint`s and `MPI_F08_status` are the same five integers: count low, count high and
//! cancelled bit, source (`MPI_F_SOURCE` 2), tag (`MPI_F_TAG` 3), error (`MPI_F_ERROR` 4)),
//! and `MPI_Type_create_f90_integer`/`_real`/`_complex`, which give the predefined type
//! (`MPI_INTEGER1` .. `MPI_INTEGER8`, `MPI_REAL4` .. `MPI_REAL16`, `MPI_COMPLEX8` ..
//! `MPI_COMPLEX32`) of the kind Fortran's `SELECTED_INT_KIND(r)`/`SELECTED_REAL_KIND(p, r)`
//! selects with gfortran on x86-64, `MPI_ERR_ARG` when none fits. As the standard asks, the type
//! they give is a named copy of that predefined type whose envelope is
//! `MPI_COMBINER_F90_INTEGER`/`_REAL`/`_COMPLEX` with the `r` (or `p` and `r`) asked for: one
//! per combination (the same handle again for the same arguments, a distinct one for
//! different arguments, as MPICH). `MPI_Type_free` on one clears the program's handle and keeps
//! the type.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, OnceLock};

use crate::abi::{self, Handle, dt, err};
use crate::comm::put;
use crate::error::MpiError;

/// `MPI_F_STATUS_SIZE`: integers of a Fortran status.
const F_STATUS_SIZE: usize = 5;

/// Whether `p` is one of the addresses `MPI_STATUS_IGNORE`, `MPI_STATUSES_IGNORE` (C: the
/// address 1), `MPI_F_STATUS(ES)_IGNORE`, `MPI_F08_STATUS(ES)_IGNORE`.
fn ignored(p: *const c_void) -> bool {
    let addr = p as usize;
    let set_by_fortran = |v: &std::sync::atomic::AtomicPtr<c_void>| {
        std::ptr::eq(p, v.load(std::sync::atomic::Ordering::Relaxed))
    };
    addr == 1
        || set_by_fortran(&crate::symbols::MPI_F_STATUS_IGNORE)
        || set_by_fortran(&crate::symbols::MPI_F_STATUSES_IGNORE)
        || std::ptr::eq(
            p,
            (&raw const crate::symbols::MPIR_F08_MPI_STATUS_IGNORE_OBJ).cast(),
        )
        || std::ptr::eq(
            p,
            (&raw const crate::symbols::MPIR_F08_MPI_STATUSES_IGNORE_OBJ).cast(),
        )
}

/// Copies the five integers of one status layout into another.
///
/// # Safety
///
/// `from` is NULL, an ignore constant, or 5 readable `c_int`s; `to` likewise writable.
unsafe fn copy(from: *const c_int, to: *mut c_int) -> Result<(), MpiError> {
    if from.is_null() || to.is_null() {
        return Err(MpiError::new(err::ARG, "a status is NULL"));
    }
    if ignored(from.cast()) || ignored(to.cast_const().cast()) {
        // MPICH's class for converting an ignored status.
        return Err(MpiError::new(
            err::OTHER,
            "MPI_STATUS_IGNORE (or a Fortran ignore constant) cannot be converted",
        ));
    }
    // SAFETY: the caller's statuses of `F_STATUS_SIZE` integers each, checked above; they
    // may be the same memory (a copy onto itself), so a copy that allows overlap.
    unsafe { std::ptr::copy(from, to, F_STATUS_SIZE) };
    Ok(())
}

/// Defines one status conversion `MPI_X(from, to)`.
macro_rules! status_conv {
    ($mpi:ident / $pmpi:ident(), $doc:literal) => {
        mpi_fn! {
            #[doc = $doc]
            $mpi / $pmpi(from: *const c_int, to: *mut c_int) on abi::COMM_WORLD => {
                // SAFETY: the caller's statuses (NULL and the ignore constants refused).
                unsafe { copy(from, to) }
            }
        }
    };
}

status_conv!(
    MPI_Status_c2f / PMPI_Status_c2f(),
    "`MPI_Status_c2f`: a C status to a Fortran one."
);
status_conv!(
    MPI_Status_f2c / PMPI_Status_f2c(),
    "`MPI_Status_f2c`: a Fortran status to a C one."
);
status_conv!(
    MPI_Status_c2f08 / PMPI_Status_c2f08(),
    "`MPI_Status_c2f08`: a C status to an `MPI_F08_status`."
);
status_conv!(
    MPI_Status_f082c / PMPI_Status_f082c(),
    "`MPI_Status_f082c`: an `MPI_F08_status` to a C status."
);
status_conv!(
    MPI_Status_f2f08 / PMPI_Status_f2f08(),
    "`MPI_Status_f2f08`: a Fortran status to an `MPI_F08_status`."
);
status_conv!(
    MPI_Status_f082f / PMPI_Status_f082f(),
    "`MPI_Status_f082f`: an `MPI_F08_status` to a Fortran status."
);

/// Decimal exponent range and precision of gfortran's real kinds 4, 8 and 16, with the
/// predefined real and complex types of each.
const REALS: [(c_int, c_int, Handle, Handle); 3] = [
    (6, 37, dt::REAL4, dt::COMPLEX8),
    (15, 307, dt::REAL8, dt::COMPLEX16),
    (33, 4931, dt::REAL16, dt::COMPLEX32),
];

/// The real kind of `SELECTED_REAL_KIND(p, r)` (either may be `MPI_UNDEFINED`, not both).
fn real_kind(p: c_int, r: c_int) -> Result<(Handle, Handle), MpiError> {
    if p == abi::UNDEFINED && r == abi::UNDEFINED {
        return Err(MpiError::new(err::ARG, "p and r are both MPI_UNDEFINED"));
    }
    let p2 = if p == abi::UNDEFINED { 0 } else { p };
    let r2 = if r == abi::UNDEFINED { 0 } else { r };
    REALS
        .iter()
        .find(|k| p2 <= k.0 && r2 <= k.1)
        .map(|k| (k.2, k.3))
        .ok_or_else(|| {
            MpiError::new(
                err::ARG,
                format!("no real type has precision {p} and exponent range {r}"),
            )
        })
}

mpi_fn! {
    /// `MPI_Type_create_f90_integer`: the predefined integer of `SELECTED_INT_KIND(r)`
    /// (`MPI_INTEGER1` up to 2 digits, `MPI_INTEGER2` 4, `MPI_INTEGER4` 9, `MPI_INTEGER8` 18).
    MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer(r: c_int, newtype: *mut Handle) on abi::COMM_WORLD => {
        let t = match r {
            i32::MIN..=2 => dt::INTEGER1,
            3..=4 => dt::INTEGER2,
            5..=9 => dt::INTEGER4,
            10..=18 => dt::INTEGER8,
            _ => {
                return Err(MpiError::new(
                    err::ARG,
                    format!("no integer type has a range of {r} decimal digits"),
                ))
            }
        };
        let t = f90_type(abi::COMBINER_F90_INTEGER, vec![r], t)?;
        // SAFETY: the caller's handle.
        unsafe { put(newtype, t, "newtype") }
    }
}

mpi_fn! {
    /// `MPI_Type_create_f90_real`: the predefined real of `SELECTED_REAL_KIND(p, r)`.
    MPI_Type_create_f90_real / PMPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut Handle) on abi::COMM_WORLD => {
        let (t, _) = real_kind(p, r)?;
        let t = f90_type(abi::COMBINER_F90_REAL, vec![p, r], t)?;
        // SAFETY: the caller's handle.
        unsafe { put(newtype, t, "newtype") }
    }
}

mpi_fn! {
    /// `MPI_Type_create_f90_complex`: the predefined complex of `SELECTED_REAL_KIND(p, r)`.
    MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut Handle) on abi::COMM_WORLD => {
        let (_, t) = real_kind(p, r)?;
        let t = f90_type(abi::COMBINER_F90_COMPLEX, vec![p, r], t)?;
        // SAFETY: the caller's handle.
        unsafe { put(newtype, t, "newtype") }
    }
}

/// The types made by `MPI_Type_create_f90_*`: by combiner and arguments, the handle and the
/// predefined type it copies.
type F90Types = HashMap<(c_int, Vec<c_int>), (Handle, Handle)>;

/// The table of [`F90Types`].
fn f90_types() -> &'static Mutex<F90Types> {
    static TYPES: OnceLock<Mutex<F90Types>> = OnceLock::new();
    TYPES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The type of combiner `combiner` with arguments `args`, a copy of predefined type `base`:
/// made at the first call for these arguments, the same handle afterwards.
fn f90_type(combiner: c_int, args: Vec<c_int>, base: Handle) -> Result<Handle, MpiError> {
    let mut types = f90_types().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(h, _)) = types.get(&(combiner, args.clone())) {
        return Ok(h);
    }
    let l = (*crate::types::layout(base)?).clone();
    let mut h: Handle = abi::DATATYPE_NULL;
    let recipe = crate::types2::Recipe::new(combiner, args.clone(), vec![], &[]);
    crate::types::give(l, &mut h, recipe)?;
    types.insert((combiner, args), (h, base));
    Ok(h)
}

/// The predefined type that `t` copies, if `t` was made by `MPI_Type_create_f90_*` (such a
/// type is never freed, and the predefined operations work on it as on its base).
pub fn f90_base(t: Handle) -> Option<Handle> {
    f90_types()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .find(|&&(h, _)| h == t)
        .map(|&(_, base)| base)
}
