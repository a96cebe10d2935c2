//! Messages over one reliable-connected queue pair: the verbs method's endpoint.
//!
//! An [`Endpoint`] carries tagged messages of any length (up to [`Config::max_message`]) to
//! one peer, with the same shape as the other methods' endpoints: `post_send` /
//! `post_send_buf` are *accepted* (exactly one [`Completion`] with the id follows, success or
//! error) or refused for want of resources ([`Posted::NoResources`], nothing happened);
//! [`Endpoint::poll`] hands out completions; [`Endpoint::next`] shows the current inbound
//! message in place and [`Endpoint::consume`] gives its bytes back; [`Endpoint::wait`] sleeps
//! on the completion channel.
//!
//! # Wire protocol
//!
//! Each side posts a ring of registered receive buffers ([`Config::recv_buffers`] of
//! [`Config::buffer_bytes`] each). Every SEND carries a 16-byte header (tag, total message
//! length, returned credits, kind, fragment flags) followed by at most one buffer's worth of
//! payload, copied into a registered send slot. A message longer than one buffer goes as
//! several fragments, sent in order. A whole message (one fragment) whose tag went to the peer
//! recently goes with a *compact* header instead: 4 bytes of immediate data (returned credits
//! and the slot of its tag in a table of recent tags each side keeps alike) beside the payload,
//! so the payload alone is on the wire and a message of up to the path MTU is one packet
//! ([`Config::compact_headers`], on by default; a receiver takes both forms).
//!
//! **Flow control is credit based**: a side never posts more SENDs than the peer has receive
//! buffers posted for it. It starts with as many credits as the peer's ring has buffers; the
//! receiver returns a credit for each buffer it re-posts, piggybacked on its next SEND or, when
//! it has nothing to send and enough credits are due (or the peer is nearly out), in an
//! explicit credit message. One credit is kept back from data so a credit message can always
//! go; since a credit message always returns at least one credit, two sides can never both be
//! left without one.
//!
//! # Where the bytes are
//!
//! A message that fits in one buffer is shown by `next` *in place*, in the registered receive
//! buffer it landed in; that buffer is re-posted once the message is consumed whole. A message
//! spanning several buffers is copied fragment by fragment into the endpoint's reassembly
//! buffer as it arrives (each receive buffer is re-posted at once): that copy is the method's
//! one copy, and `next` shows the reassembly buffer.
//!
//! [`Endpoint::lease`] lends the current message out of the endpoint instead: a [`Lease`]
//! owns the registered receive buffer (no copy), the endpoint moves on to the next message,
//! and the buffer is re-posted, and its credit returned to the peer, only when the lease comes
//! back (dropped or [`Endpoint::give_back`], in any order). The peer's credit stays held
//! meanwhile, so the flow-control rule holds with leases out: never more SENDs in flight than
//! receives posted. With a shared pool running low a lease is a copy instead (see
//! [`ReceivePool`]). A lease outlives its endpoint: it owns its buffer.
//!
//! # One-sided operations
//!
//! [`Endpoint::post_read`] and [`Endpoint::post_write`] move bytes between a buffer of the
//! endpoint's registration cache ([`Endpoint::cache`], see [`crate::regcache`]) and a region
//! of the peer ([`RemoteRegion`](crate::RemoteRegion)), in pieces bounded by the port's
//! largest message, completing through [`Endpoint::poll`] like sends (once, also on failure).
//! The queue pair accepts remote reads and writes; the endpoint's cache registers its buffers
//! for local writes and remote reads only, and a buffer's remote key is meant for this
//! endpoint's peer alone (the cache is the endpoint's own, so its buffers serve no other
//! peer).
//!
//! # Failure
//!
//! When the connection is idle, the endpoint writes an 8-byte keepalive into a region of the
//! peer (an RDMA WRITE, which needs no receive buffer or credit), so a dead or vanished peer
//! shows up as a transport-retry-exceeded completion within about [`Config::peer_timeout`].
//! As a backstop (soft-RoCE never completes a WRITE to a queue pair that is gone or in the
//! error state), sends outstanding for the peer timeout with none completing fail the
//! connection too: a peer that stopped answering is noticed within about the keepalive
//! interval plus the peer timeout.
//! A peer that drops its endpoint sends a close message first. On any failure the queue pair is
//! moved to the error state and every accepted descriptor not yet completed completes with
//! [`Error::PeerFailed`], exactly once; messages that had arrived still come out of `next`,
//! then `next` reports the failure.

mod card;
mod completion;
mod config;
mod endpoint;
mod error;
mod header;
mod lease;
mod method;
mod pool;
mod setup;
mod sleeper;

pub use card::Card;
pub use completion::{Completion, Message, Op, Posted};
pub use config::Config;
pub use endpoint::Endpoint;
pub use error::Error;
pub use lease::Lease;
pub use pool::ReceivePool;
pub use setup::{Prepared, pair, pair_shared};
pub use sleeper::Sleeper;
