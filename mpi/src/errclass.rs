//! User error classes and codes: `MPI_Add_error_class`, `MPI_Add_error_code`,
//! `MPI_Add_error_string`. A user class or code is a number above `MPI_ERR_LASTCODE` (from
//! [`FIRST_USER`] on, classes and codes from one counter, as MPICH's numbers); `MPI_Error_class` gives a code's
//! class and `MPI_Error_string` the string the program gave it (empty when none). The
//! `MPI_LASTUSEDCODE` attribute of `MPI_COMM_WORLD` is the last number given out.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::abi::{self, err};
use crate::comm::put;
use crate::error::MpiError;

/// `MPI_ERR_LASTCODE` of the MPICH ABI: the largest predefined code. `MPI_LASTUSEDCODE` is
/// never below it, as the standard asks.
pub const ERR_LASTCODE: c_int = 0x3fff_ffff;

/// The first user class or code: above `MPI_ERR_LASTCODE`, so that no user number can be
/// taken for a predefined one.
pub const FIRST_USER: c_int = ERR_LASTCODE + 1;

/// The last class or code given out: the value of `MPI_LASTUSEDCODE`.
static LAST_USED: AtomicI32 = AtomicI32::new(FIRST_USER - 1);

/// A user class or code: its class (itself for a class) and its string.
struct UserCode {
    class: c_int,
    text: Option<String>,
}

/// Serializes the additions, so that numbers are given out in order.
fn table() -> MutexGuard<'static, HashMap<c_int, UserCode>> {
    static T: OnceLock<Mutex<HashMap<c_int, UserCode>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The address of the `MPI_LASTUSEDCODE` value (an `int`, as `MPI_Comm_get_attr` gives it).
pub fn last_used_ptr() -> usize {
    LAST_USED.as_ptr() as usize
}

/// The class of user code `code` (`None`: not a user class or code).
pub fn class_of(code: c_int) -> Option<c_int> {
    table().get(&code).map(|u| u.class)
}

/// The string of user code `code` (empty when the program gave none; `None`: not a user
/// class or code).
pub fn text_of(code: c_int) -> Option<String> {
    table()
        .get(&code)
        .map(|u| u.text.clone().unwrap_or_default())
}

/// Gives out the next number for a class or code of class `class` (`None`: a new class).
fn add(class: Option<c_int>) -> Result<c_int, MpiError> {
    let mut t = table();
    let code = LAST_USED
        .load(Ordering::Relaxed)
        .checked_add(1)
        .ok_or_else(|| MpiError::new(err::OTHER, "every error class and code number is used"))?;
    t.insert(
        code,
        UserCode {
            class: class.unwrap_or(code),
            text: None,
        },
    );
    LAST_USED.store(code, Ordering::Relaxed);
    Ok(code)
}

mpi_fn! {
    /// `MPI_Add_error_class`: a new error class.
    MPI_Add_error_class / PMPI_Add_error_class(errorclass: *mut c_int) on abi::COMM_WORLD => {
        if errorclass.is_null() {
            return Err(MpiError::new(err::ARG, "errorclass is NULL"));
        }
        crate::state::rt()?;
        let c = add(None)?;
        // SAFETY: the caller's int, checked not NULL.
        unsafe { put(errorclass, c, "errorclass") }
    }
}

mpi_fn! {
    /// `MPI_Add_error_code`: a new error code of class `errorclass` (a predefined class or
    /// one of `MPI_Add_error_class`).
    MPI_Add_error_code / PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) on abi::COMM_WORLD => {
        if errorcode.is_null() {
            return Err(MpiError::new(err::ARG, "errorcode is NULL"));
        }
        crate::state::rt()?;
        let predefined = (0..=err::LAST_CLASS).contains(&errorclass);
        if !predefined && class_of(errorclass) != Some(errorclass) {
            return Err(MpiError::new(err::ARG, format!("{errorclass} is not an error class")));
        }
        let c = add(Some(errorclass))?;
        // SAFETY: the caller's int, checked not NULL.
        unsafe { put(errorcode, c, "errorcode") }
    }
}

mpi_fn! {
    /// `MPI_Add_error_string`: the string `MPI_Error_string` gives for a user class or code
    /// (replacing an earlier one); at most `MPI_MAX_ERROR_STRING - 1` characters.
    MPI_Add_error_string / PMPI_Add_error_string(errorcode: c_int, string: *const c_char) on abi::COMM_WORLD => {
        if string.is_null() {
            return Err(MpiError::new(err::ARG, "string is NULL"));
        }
        crate::state::rt()?;
        // SAFETY: the caller's NUL-terminated string, checked not NULL.
        let s = unsafe { CStr::from_ptr(string) }.to_string_lossy().into_owned();
        if s.len() >= abi::MAX_ERROR_STRING {
            return Err(MpiError::new(
                err::ARG,
                format!("the string has {} characters, more than MPI_MAX_ERROR_STRING - 1", s.len()),
            ));
        }
        let mut t = table();
        let u = t.get_mut(&errorcode).ok_or_else(|| {
            MpiError::new(
                err::ARG,
                format!("{errorcode} is not a user error class or code (only those take a string)"),
            )
        })?;
        u.text = Some(s);
        Ok(())
    }
}

/// Removes user class or code `code` from the table: `Err` with `MPI_ERR_OTHER` (as MPICH)
/// when it is predefined, unknown, or (`class` true) a code rather than a class, or (`class`
/// false) a class rather than a code.
fn delete(code: c_int, class: bool) -> Result<(), MpiError> {
    let what = if class { "class" } else { "code" };
    let mut t = table();
    let Some(u) = t.get(&code) else {
        return Err(MpiError::new(
            err::OTHER,
            format!("{code} is not a user error {what} (predefined or already deleted)"),
        ));
    };
    if (u.class == code) != class {
        let is = if class { "a code" } else { "a class" };
        return Err(MpiError::new(
            err::OTHER,
            format!("{code} is {is}, not an error {what}"),
        ));
    }
    t.remove(&code);
    Ok(())
}

mpi_fn! {
    /// `MPIX_Delete_error_class`: forgets a class of `MPI_Add_error_class` (a predefined or
    /// unknown class is `MPI_ERR_OTHER`, as MPICH). Its number is not given out again; codes
    /// of the class stay (MPICH keeps them too).
    MPIX_Delete_error_class / PMPIX_Delete_error_class(errorclass: c_int) on abi::COMM_WORLD => {
        crate::state::rt()?;
        delete(errorclass, true)
    }
}

mpi_fn! {
    /// `MPIX_Delete_error_code`: forgets a code of `MPI_Add_error_code` (a predefined or
    /// unknown code is `MPI_ERR_OTHER`, as MPICH). Its number is not given out again.
    MPIX_Delete_error_code / PMPIX_Delete_error_code(errorcode: c_int) on abi::COMM_WORLD => {
        crate::state::rt()?;
        delete(errorcode, false)
    }
}

mpi_fn! {
    /// `MPIX_Delete_error_string`: removes the string of a user class or code (then
    /// `MPI_Error_string` gives an empty one); a predefined or unknown one is `MPI_ERR_OTHER`,
    /// as MPICH.
    MPIX_Delete_error_string / PMPIX_Delete_error_string(errorcode: c_int) on abi::COMM_WORLD => {
        crate::state::rt()?;
        let mut t = table();
        let u = t.get_mut(&errorcode).ok_or_else(|| {
            MpiError::new(
                err::OTHER,
                format!("{errorcode} is not a user error class or code (only those have a string to delete)"),
            )
        })?;
        u.text = None;
        Ok(())
    }
}
