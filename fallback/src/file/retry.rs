//! Counts of the retries a file engine makes on its own.

/// How often a [`super::FileIo`] retried without the caller seeing it.
///
/// `EAGAIN` and `EINTR` are not failures of a file operation: the engine resubmits the operation
/// (after `EAGAIN`, once the descriptor is ready) and its completion reports the whole transfer.
/// A wait interrupted by a signal is made again with the time left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetryStats {
    /// Transfers the kernel answered with `EAGAIN` (a descriptor in `O_NONBLOCK` mode that was
    /// not ready), resubmitted after a readiness poll.
    pub eagain: u64,
    /// Operations the kernel answered with `EINTR`, resubmitted at once.
    pub eintr: u64,
    /// `io_uring_enter` calls a signal interrupted (`EINTR`), made again.
    pub interrupted_enters: u64,
}
