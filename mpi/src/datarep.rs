//! User data representations: `MPI_Register_datarep`, `MPI_Register_datarep_c`.
//!
//! A registered name keeps its functions for the life of the process. Besides the predefined
//! `"native"`, `"internal"` (native here) and `"external32"`, a file view
//! (`MPI_File_set_view`) takes a registered representation whose read and write conversion
//! functions are both `MPI_CONVERSION_FN_NULL`: the standard's representation without
//! conversion, the data as in `"native"`. A representation with conversion functions is
//! refused by `MPI_File_set_view` with `MPI_ERR_UNSUPPORTED_DATAREP` (conversion through user
//! functions is not implemented), as is a name never registered. Registering a name twice, or
//! one of the predefined `"native"`, `"internal"`, `"external32"`, is `MPI_ERR_DUP_DATAREP`; a
//! NULL or empty name, or one longer than `MPI_MAX_DATAREP_STRING - 1`, is `MPI_ERR_ARG`.
//! Errors go to the handler of `MPI_FILE_NULL`, as for other file calls without a file.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::{Mutex, OnceLock};

use crate::abi::{Handle, MpiAint, err};
use crate::error::MpiError;

/// `MPI_ERR_DUP_DATAREP`.
const ERR_DUP_DATAREP: c_int = 24;
/// `MPI_MAX_DATAREP_STRING`.
const MAX_DATAREP_STRING: usize = 128;

/// `MPI_Datarep_extent_function`.
type ExtentFn = unsafe extern "C" fn(Handle, *mut MpiAint, *mut c_void) -> c_int;

/// What is kept of one registered representation.
struct Datarep {
    /// Whether it has a read or write conversion function.
    converts: bool,
    /// Its file extent function, kept for the views that will use it.
    _extent: Option<ExtentFn>,
    /// Its `extra_state`, kept as an address.
    _extra: usize,
}

fn table() -> std::sync::MutexGuard<'static, HashMap<String, Datarep>> {
    static T: OnceLock<Mutex<HashMap<String, Datarep>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// How a view may use representation `name`: `Ok` for `"native"`, `"internal"`,
/// `"external32"` and a registered representation without conversion functions, `MPI_ERR_UNSUPPORTED_DATAREP` otherwise.
pub(crate) fn check_view(name: &str) -> Result<(), MpiError> {
    // "internal" is the implementation's choice: here the native representation; "external32"
    // views convert byte order (file.rs).
    if matches!(name, "native" | "internal" | "external32") {
        return Ok(());
    }
    match table().get(name) {
        Some(d) if !d.converts => Ok(()),
        Some(_) => Err(MpiError::new(
            crate::file::ferr::UNSUPPORTED_DATAREP,
            format!(
                "data representation \"{name}\" has conversion functions, which viaduct's MPI \
                 library does not run (only \"native\", \"internal\", \"external32\" and registered \
                 representations without conversion)"
            ),
        )),
        None => Err(MpiError::new(
            crate::file::ferr::UNSUPPORTED_DATAREP,
            format!("data representation \"{name}\" is neither predefined nor registered"),
        )),
    }
}

/// Registers `datarep` with its functions.
///
/// # Safety
///
/// `datarep` is NULL or a NUL-terminated string.
unsafe fn register(
    datarep: *const c_char,
    converts: bool,
    extent: Option<ExtentFn>,
    extra: *mut c_void,
) -> Result<(), MpiError> {
    if datarep.is_null() {
        return Err(MpiError::new(err::ARG, "datarep is NULL"));
    }
    // SAFETY: the caller's NUL-terminated string, checked not NULL.
    let name = unsafe { CStr::from_ptr(datarep) }
        .to_string_lossy()
        .into_owned();
    if name.is_empty() || name.len() >= MAX_DATAREP_STRING {
        return Err(MpiError::new(
            err::ARG,
            format!(
                "datarep \"{name}\" is empty or longer than {} characters",
                MAX_DATAREP_STRING - 1
            ),
        ));
    }
    let mut t = table();
    if matches!(name.as_str(), "native" | "internal" | "external32") || t.contains_key(&name) {
        return Err(MpiError::new(
            ERR_DUP_DATAREP,
            format!("data representation \"{name}\" is defined already"),
        ));
    }
    t.insert(
        name,
        Datarep {
            converts,
            _extent: extent,
            _extra: extra as usize,
        },
    );
    Ok(())
}

mpi_fn! {
    /// `MPI_Register_datarep`: registers a data representation (see the module's notes on
    /// what views do with it).
    MPI_Register_datarep / PMPI_Register_datarep(datarep: *const c_char, read_conversion_fn: *const c_void, write_conversion_fn: *const c_void, dtype_file_extent_fn: Option<ExtentFn>, extra_state: *mut c_void) on crate::file::FILE_ERR_KIND as Handle => {
        let converts = !read_conversion_fn.is_null() || !write_conversion_fn.is_null();
        // SAFETY: the caller's string.
        unsafe { register(datarep, converts, dtype_file_extent_fn, extra_state) }
    }
}

mpi_fn! {
    /// `MPI_Register_datarep_c`: as `MPI_Register_datarep`, with the conversion functions of
    /// `MPI_Count` counts.
    MPI_Register_datarep_c / PMPI_Register_datarep_c(datarep: *const c_char, read_conversion_fn: *const c_void, write_conversion_fn: *const c_void, dtype_file_extent_fn: Option<ExtentFn>, extra_state: *mut c_void) on crate::file::FILE_ERR_KIND as Handle => {
        let converts = !read_conversion_fn.is_null() || !write_conversion_fn.is_null();
        // SAFETY: the caller's string.
        unsafe { register(datarep, converts, dtype_file_extent_fn, extra_state) }
    }
}
