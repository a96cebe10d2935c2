//! Completions and post statuses of the shared-memory method.

use super::error::Error;

/// What a descriptor asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A two-sided message.
    Send,
    /// An emulated RDMA write.
    Write,
    /// An emulated RDMA read.
    Read,
}

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

/// The status of a post: accepted (its completion comes later through `poll`), or no resources
/// now (try again after progress). Neither is an error.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Posted<B = ()> {
    /// Accepted; exactly one [`Completion`] with its id follows.
    InProgress,
    /// Not accepted: the ring or the table of outstanding operations is full. The buffer handed
    /// over, if any, comes back.
    NoResources(B),
}

impl<B> Posted<B> {
    /// Whether the descriptor was accepted.
    pub fn is_posted(&self) -> bool {
        matches!(self, Posted::InProgress)
    }
}
