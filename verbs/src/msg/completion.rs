//! What posting answers and what completes.

use super::error::Error;

/// The answer to a post.
#[derive(Debug)]
#[must_use]
pub enum Posted<B = ()> {
    /// Accepted; exactly one [`Completion`] with its id follows.
    InProgress,
    /// Not accepted: the peer has no receive buffer free for it, or every send slot is in use.
    /// The buffer handed over, if any, comes back.
    NoResources(B),
}

impl<B> Posted<B> {
    /// Whether the descriptor was accepted.
    pub fn is_posted(&self) -> bool {
        matches!(self, Posted::InProgress)
    }
}

/// The one completion of an accepted descriptor.
#[derive(Debug)]
pub struct Completion {
    /// The id given when the descriptor was posted.
    pub id: u64,
    /// Bytes sent, or why the message could not be delivered.
    pub result: Result<usize, Error>,
}

/// A message shown by [`Endpoint::next`](super::Endpoint::next): its tag and the bytes not
/// consumed yet, borrowed from a registered receive buffer (or from the reassembly buffer for
/// a message that spanned several receive buffers).
#[derive(Debug)]
pub struct Message<'a> {
    /// The sender's tag.
    pub tag: u64,
    /// Bytes of the message not consumed yet.
    pub data: &'a [u8],
}
