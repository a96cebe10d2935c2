//! Completions of the TCP method (the status vocabulary is shared by every method, see
//! `viaduct-method`).

use super::error::Error;
pub use viaduct_method::{Op, Posted};

/// The one completion of a posted descriptor: its id, what it asked for, bytes moved or why it
/// failed, and the buffer handed over at post time (for reads, filled with the bytes read), if
/// any.
pub type Completion = viaduct_method::Completion<Error>;
