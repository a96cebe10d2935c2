//! The io_uring engine: one ring owned by one thread, operations with owned payloads, exactly one
//! final completion per operation.
//!
//! - [`Ring`] takes submission entries built by the caller (with `io_uring::opcode`) together with
//!   a *payload*: whatever keeps the operation's memory alive (buffers, iovec arrays). The payload
//!   comes back with the operation's final [`Completion`]. Many entries go out per
//!   `io_uring_enter`; completions are reaped without blocking ([`Ring::reap`]) or waited for with
//!   a timeout ([`Ring::wait`]).
//! - `user_data` names a slot and its generation ([`OpId`]), so a late completion or cancel can
//!   never hit a slot that has been reused.
//! - [`Ring::cancel`] submits `IORING_OP_ASYNC_CANCEL`; the operation's own completion still
//!   arrives, and only then is its payload released.
//! - Completion-queue overflow loses nothing: the kernel keeps overflowed entries (`NODROP`) and
//!   reaping flushes them.
//! - An [`EventFd`] registered with the ring lets another loop block in `poll`/`epoll`.
//! - [`ProvidedBuffers`] is a provided-buffer ring for receives (multishot or not).
//! - [`Features`] reports what the kernel offers; [`UringError`] says why a ring cannot be had.

mod aligned;
pub(crate) mod buf_ring;
mod error;
mod eventfd;
mod features;
mod ring;
mod slot;

pub use aligned::AlignedAlloc;
pub use buf_ring::{ProvidedBuf, ProvidedBuffers};
pub use error::UringError;
pub use eventfd::EventFd;
pub use features::Features;
pub use ring::{Completion, PushError, Ring, RingConfig};
pub use slot::OpId;

/// The `io-uring` crate, re-exported so callers build entries with the same version.
pub use io_uring;
