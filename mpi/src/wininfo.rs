//! The hints of windows (`MPI_Win_get_info`, `MPI_Win_set_info`, the info argument of the
//! window constructors).
//!
//! The standard names six window hints and the defaults of four (MPI 4.1, section 12.2.7).
//! `MPI_Win_get_info` gives all six: the value the program set last (at creation or by
//! `MPI_Win_set_info`), else the default (`false` for the two without one, as MPICH). Other
//! keys are ignored and not given back, as the standard says of hints an implementation does
//! not support (MPICH's `win_info` test checks both). The hints are assertions the program
//! makes; none changes how a window works here.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::abi::Handle;
use crate::error::MpiError;

/// The window hints and their defaults.
const KEYS: [(&str, &str); 6] = [
    ("no_locks", "false"),
    ("accumulate_ordering", "rar,raw,war,waw"),
    ("accumulate_ops", "same_op_no_op"),
    ("same_size", "false"),
    ("same_disp_unit", "false"),
    ("alloc_shared_noncontig", "false"),
];

/// Hints as (key, value) pairs.
type Hints = crate::misc::Pairs;

/// The hints set on each window (the known keys only).
fn table() -> &'static Mutex<HashMap<Handle, Hints>> {
    static T: OnceLock<Mutex<HashMap<Handle, Hints>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The known hints of `info` (`MPI_ERR_INFO` when it is no info object), read before a window
/// is made so that a bad handle fails the call with nothing made.
pub(crate) fn known(info: Handle) -> Result<Hints, MpiError> {
    Ok(crate::misc::only_known(crate::misc::hints_of(info)?, &KEYS))
}

/// Sets `hints` on window `win` (a key set again takes the new value).
pub(crate) fn set(win: Handle, hints: Hints) {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    crate::misc::merge_hints(t.entry(win).or_default(), hints);
}

/// Every window hint of `win`: the value set, else the default.
pub(crate) fn get(win: Handle) -> Hints {
    let t = table().lock().unwrap_or_else(|e| e.into_inner());
    crate::misc::with_defaults(t.get(&win), &KEYS)
}

/// Forgets the hints of freed window `win`.
pub(crate) fn forget(win: Handle) {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&win);
}
