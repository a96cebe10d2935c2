//! The hints of communicators (`MPI_Comm_set_info`, `MPI_Comm_get_info`, and the info
//! argument of `MPI_Comm_dup_with_info`/`MPI_Comm_idup_with_info`).
//!
//! The standard names five communicator hints, assertions the program makes, each `false`
//! unless set (MPI 4.1, section 7.4.4). `MPI_Comm_get_info` gives all five: the value the
//! program set last, else `false`. Other keys are ignored and not given back, as the standard
//! says of hints an implementation does not support (MPICH's `comm_info` test checks it). No
//! assertion changes how a communicator works here: each is honoured by working as without it.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::abi::{Handle, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::misc::{Pairs, info_of, merge_hints, only_known, with_defaults, with_info};
use crate::state::rt;

/// The communicator hints and their defaults.
const KEYS: [(&str, &str); 5] = [
    ("mpi_assert_no_any_tag", "false"),
    ("mpi_assert_no_any_source", "false"),
    ("mpi_assert_exact_length", "false"),
    ("mpi_assert_allow_overtaking", "false"),
    ("mpi_assert_strict_persistent_collective_ordering", "false"),
];

/// The hints set on each communicator (the known keys only).
fn table() -> &'static Mutex<HashMap<Handle, Pairs>> {
    static T: OnceLock<Mutex<HashMap<Handle, Pairs>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The known hints of `info` (none for `MPI_INFO_NULL`; `MPI_ERR_INFO` when it is no info
/// object), read before a communicator is made so that a bad handle fails the call with
/// nothing made.
pub(crate) fn known(info: Handle) -> Result<Pairs, MpiError> {
    Ok(only_known(crate::misc::hints_of(info)?, &KEYS))
}

mpi_fn! {
    /// `MPI_Comm_set_info`: the known hints are kept (a key set again takes the new value) and
    /// given back by `MPI_Comm_get_info`; other keys are ignored.
    MPI_Comm_set_info / PMPI_Comm_set_info(comm: Handle, info: Handle) on comm => {
        rt()?.comm_local(comm)?;
        let pairs = only_known(with_info(info, |v| v.clone())?, &KEYS);
        let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
        merge_hints(t.entry(comm).or_default(), pairs);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_get_info`: a new info object with every communicator hint, as set or its
    /// default.
    MPI_Comm_get_info / PMPI_Comm_get_info(comm: Handle, info_used: *mut Handle) on comm => {
        rt()?.comm_local(comm)?;
        if info_used.is_null() {
            return Err(MpiError::new(err::ARG, "info_used is NULL"));
        }
        let pairs = {
            let t = table().lock().unwrap_or_else(|e| e.into_inner());
            with_defaults(t.get(&comm), &KEYS)
        };
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(info_used, info_of(pairs), "info_used") }
    }
}

/// Gives communicator `to` the hints of `from` (`MPI_Comm_dup`).
pub(crate) fn copy(from: Handle, to: Handle) {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = t.get(&from).cloned() {
        t.insert(to, p);
    }
}

/// Replaces the hints of communicator `comm` by `pairs`, known hints (`MPI_Comm_dup_with_info`).
pub(crate) fn replace(comm: Handle, pairs: Pairs) {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(comm, pairs);
}

/// Forgets the hints of freed communicator `comm`.
pub(crate) fn forget(comm: Handle) {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&comm);
}
