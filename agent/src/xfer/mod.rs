//! Xfer blocks: the buffer-flow building block of collectives.
//!
//! A block is created on a communicator ([`Comm::xfer_scatter`](crate::comm::Comm::xfer_scatter),
//! [`Comm::xfer_gather`](crate::comm::Comm::xfer_gather)), given owned buffers
//! ([`ScatterBlock::buffer`]), described by ops naming byte ranges `first..last` of those
//! buffers, and started: `start` checks every op (an invalid block is an [`XferError`] inside
//! [`AgentError::Xfer`](crate::error::AgentError::Xfer), with nothing posted) and returns the
//! agent's [`Request`](crate::request::Request) and the [`XferBuffers`] the buffers come back
//! in.
//!
//! # Messages and matching
//!
//! A block exchanges at most one message with each peer in each direction: the message from a
//! source is the concatenation, in issue order, of the ranges of the ops that receive from it;
//! the message to a destination that of the ops that send to it. A send op sends its range as
//! it is when the block starts, except the bytes that earlier receive-type ops of the same
//! block write: those leave as they arrive (or are combined), so `recv_op` followed by
//! `send_op`s of the same range relays a message piece by piece to several destinations, and
//! `recv_mop_op`s followed by a `send_op` sends each piece once every contribution to it was
//! combined. Forwarded bytes leave when they arrive. Blocks match like point-to-point
//! messages, in start order per (communicator, peer pair, tag): each message carries the
//! sender's count of earlier blocks to that peer with that tag, so a later block's message
//! never matches an earlier block's receive, whatever order their pieces travel in. Blocks use
//! the communicator's collective context, so they never match point-to-point messages; tags
//! with the high bit set are reserved for the collectives.
//!
//! # Pieces, CARs and dependencies
//!
//! Every message moves in pieces of `Config::xfer_chunk` bytes (`VIADUCT_XFER_CHUNK`). The
//! request of a block is a counter of outstanding CARs: one per incoming message (completed when
//! its last piece was handled), one per piece sent (completed by the method), plus one for the
//! block itself. The dependencies are a table per incoming message, as the agent design puts it: each
//! byte range lists what depends on it (store into a buffer, combine into a buffer, forward to a
//! destination). When a piece arrives, its ranges are handled and their dependents go onto the
//! agent's ready queue, which every progress pass drains (posting the forwarded pieces through
//! the agent's own write path); nothing ever searches for ready work. So a forward sends piece
//! k as soon as piece k arrived (and, for a `mop` forward, was combined, after every earlier
//! op combining into the same bytes): a chain of forwards pipelines. A block progresses in
//! any progress pass of its agent (any post, test or wait), not only while its request is
//! waited on; blocks progress independently of each other.
//!
//! Ops of a block are served in issue order: a message's pieces leave in order, and the messages
//! to several destinations are queued in the order of the ops that feed them.
//!
//! # Errors
//!
//! A peer that fails fails every block that still needs it ([`AgentError::PeerFailed`]); a
//! message whose length differs from what the receiving ops add up to fails the receiving block
//! ([`XferError::LengthMismatch`]); the agent's finalize fails blocks still running. A failed
//! block's buffers come back too. A block that fails before its messages were whole (other
//! than at finalize) tells each of their receivers, whose blocks fail with
//! [`XferError::SenderFailed`] instead of waiting for pieces that never come.
//!
//! [`AgentError::PeerFailed`]: crate::error::AgentError::PeerFailed

mod block;
pub(crate) mod schedule;

pub use crate::engine::xfer_buffers::{XferBuffers, XferMonitor};
pub use crate::xfer_base::{BufId, COLL_TAG_BIT, Datatype, ReduceOp, Reduction, UserFn, XferError};
pub use block::{GatherBlock, ScatterBlock};
