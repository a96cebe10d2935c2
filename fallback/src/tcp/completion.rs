//! Completions of the TCP method (the status vocabulary is shared with the shared-memory method).

use super::error::Error;
pub use crate::shm::{Op, Posted};

/// The one completion of a posted descriptor.
#[derive(Debug)]
pub struct Completion {
    /// The id given when the descriptor was posted.
    pub id: u64,
    /// What the descriptor asked for.
    pub op: Op,
    /// Bytes moved, or why the descriptor failed.
    pub result: Result<usize, Error>,
    /// The buffer handed over at post time (for reads, filled with the bytes read), if any.
    pub buffer: Option<Vec<u8>>,
}
