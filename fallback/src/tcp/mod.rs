//! The TCP method: one connection per peer pair carrying [frames](crate::frame), driven by an
//! io_uring ring of the [engine](crate::uring).
//!
//! # Shape
//!
//! The same shape as the shared-memory method and a verbs queue pair: descriptors are posted
//! (`post_send`, `post_send_buf`, `post_write`, `post_read`), each gets exactly one
//! [`Completion`] carrying its id through [`Endpoint::poll`]; [`Posted::NoResources`] (the
//! peer's window is full) is a status, not an error; errors carry an errno
//! ([`Error::errno`]) and a readable message.
//!
//! # Sending
//!
//! A send is a frame: a 32-byte header and the payload. The frame of an owned buffer
//! ([`Endpoint::post_send_buf`]) is gathered by `sendmsg` as two iovecs, so the buffer is not
//! copied. Frames queued while a send is in flight go together in the next `sendmsg` (up to
//! `max_batch`). Only one send
//! operation is in flight per connection, with `MSG_WAITALL`, so the byte stream keeps frame
//! order. Batches carrying a payload of at least [`Config::zero_copy_threshold`] bytes use
//! `IORING_OP_SENDMSG_ZC`; their buffers come back after the kernel's notification.
//!
//! A copying post ([`Endpoint::post_send`], [`Endpoint::post_send_parts`]) copies the data once,
//! behind room for the header, into a buffer the endpoint recycles: the frame's bytes are
//! contiguous, and a batch of that frame alone goes out with a plain `IORING_OP_SEND`, which
//! has no message header or iovec array for the kernel to import (measured: 2-3 % of a 64-byte
//! TCP ping-pong, see `docs/perf/methods.md`). Batch and payload buffers are reused, so a small
//! send allocates nothing, and the socket is registered with the ring as a fixed file where the
//! kernel allows it. [`Config::single_issuer`] sets the ring up for one thread (deferred task
//! work, cheaper receive completions); calls from other threads are then refused.
//!
//! With [`Config::immediate_io`] (the default) a batch that is not zero-copy and at most 64 KiB
//! first goes to the socket with one non-blocking `send`/`sendmsg` when no send is in flight:
//! taken whole, its descriptors complete at once without the ring; taken in part or refused
//! (`EAGAIN`), the rest goes on through the ring as above, the frames queued behind it after
//! it. [`Endpoint::send_paths`] counts which way batches left.
//!
//! # Progress
//!
//! Nothing runs in the background: `next`, `poll` and `wait` reap the ring's completions, re-arm
//! the receive, send queued frames and serve the peer's requests; only `wait` blocks. A post
//! sends at once when no send is in flight; otherwise its frame joins the next batch, which
//! leaves at the next `poll`, `next` or `wait`. Call one of them regularly, also after the last
//! post.
//!
//! # Receiving
//!
//! A multishot receive fills buffers of a provided-buffer ring registered with the engine.
//! [`Endpoint::next`] returns a slice into the receive buffer holding the message when it lies
//! whole in one buffer; a message that spans buffers is copied into the endpoint's reassembly
//! buffer and delivered whole from there (the one copy on the receive side, stated here).
//! [`Endpoint::consume`] gives the bytes back; a receive buffer is recycled into the ring once
//! nothing in it is needed. The multishot receive ends when the ring runs out of buffers and is
//! re-armed when buffers come back.
//!
//! With [`Config::immediate_io`] (the default) there is no multishot receive: `next`, `wait`
//! and `poll` (except the call right after `poll` returned a completion, when nothing of this
//! end waits on the connection) take what the socket holds with non-blocking `recv` calls into
//! the endpoint's own receive buffers (as many as the ring would have, allocated as needed and
//! reused), and `wait` arms a one-shot readiness poll in the ring before it sleeps, so a
//! blocking wait still sleeps in the kernel and wakes for data, the end of the stream or an
//! error. The data stays in the socket until the endpoint is called.
//!
//! [`Endpoint::sleeper`] prepares a sleep for a thread that does not hold the endpoint: a
//! [`Sleeper`] on duplicates of the socket and ring descriptors, which `poll` together with
//! those of other connections ([`crate::fd::wait_readable`]).
//!
//! # Flow control
//!
//! A sender may start a frame while less than the receiver's window (three quarters of its
//! receive buffers) is unacknowledged, so at most the window plus one frame is in flight. The receiver returns
//! credit as it consumes: in the `offset` of the frames it sends anyway (messages, replies), in
//! a credit frame once an eighth of the window is freed, and in a credit frame when it has
//! consumed everything received and nothing else is going out and it is about to sleep. A
//! receiver that polls holds the rest (less than an eighth of the window, which the sender
//! never waits for) back, so that it does not wake a sleeping peer thread with credit frames
//! of their own. A receiver that does not consume stops the sender with
//! [`Posted::NoResources`]: memory stays bounded on both sides.
//!
//! # Emulated one-sided operations
//!
//! `post_write`/`post_read` send a request naming a region key and offset; the target checks
//! key and bounds against the regions it registered ([`Endpoint::register`]) and replies with a
//! status (and the data, for reads). A bad key or range completes the initiator's descriptor
//! with [`Error::RemoteAccess`] and never touches memory outside the region. The target serves
//! requests while it runs `next`, `poll` or `wait`.
//!
//! # Failure
//!
//! End of stream or a socket error fails the connection: the socket is shut down (so the
//! operations in flight end at once), and every accepted descriptor not yet completed completes
//! exactly once with [`Error::PeerFailed`]: frames still queued, frames inside the send in
//! flight that did not leave whole, and writes and reads waiting for their reply. From then on
//! every post fails at once with the same error, also one whose own progress (a post that finds
//! the window full drives the endpoint) is what finds the failure; `next` returns it once the
//! messages received before are read. A
//! peer that stops acknowledging data is cut off by `TCP_USER_TIMEOUT` after
//! [`Config::peer_timeout`]. A malformed frame fails the connection with [`Error::Frame`];
//! nothing panics and a claimed length is checked before any allocation.

mod completion;
mod config;
mod endpoint;
mod error;
mod method;
mod send;
mod setup;
mod sleeper;

pub use crate::shm::{AccessError, RegionKey};
pub use completion::{Completion, Op, Posted};
pub use config::Config;
pub use endpoint::{Endpoint, Lease, Message, SendPaths};
pub use error::Error;
pub use setup::{Listener, accept_on, connect, pair};
pub use sleeper::Sleeper;
