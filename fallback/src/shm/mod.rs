//! The shared-memory method: a connection between two processes (or threads) of one machine.
//!
//! # Shape
//!
//! The same shape as a verbs queue pair. Descriptors are posted (`post_send`, `post_send_buf`,
//! `post_write`, `post_read`) and each gets exactly one [`Completion`] carrying its id, through
//! [`Endpoint::poll`]. A post that cannot be accepted now answers [`Posted::NoResources`] (not
//! an error); errors carry an errno ([`Error::errno`]) and a readable message. Inbound messages
//! are read in place: [`Endpoint::next`] borrows the unconsumed bytes of the current message,
//! [`Endpoint::consume`] gives bytes back and releases the ring cell once the whole message is
//! consumed.
//!
//! # Transport
//!
//! A memfd segment (passed over a unix socket with `SCM_RIGHTS`) holds one single-producer /
//! single-consumer ring per direction: cache-line aligned records stamped with their position,
//! so the receiver polls one cache line per small message (see `ring`). Messages up to
//! [`Config::eager_limit`] are copied into the ring by the sender and read in place by the
//! receiver. Longer messages go by rendezvous: where a probe at set-up shows that
//! `process_vm_readv` is permitted, the receiver copies the message once, straight from the
//! sender's buffer into its reassembly buffer ([`LongMessages::SingleCopy`]); where it is not
//! (`EPERM` under Yama or across users), the sender copies it through the ring in chunks
//! ([`LongMessages::RingChunks`]). [`Endpoint::long_messages`] tells which is in use.
//!
//! Mid-size long messages, up to [`Config::ring_copy_max`], go through the ring in chunks of
//! [`Config::ring_copy_chunk`] even where single copy is permitted: the receiver copies chunk
//! k out while the sender copies chunk k+1 in, with no handshake and no page pinning first, which
//! beats single copy there (the measurement behind the default is in `docs/perf/shm-sweep.md`).
//! A borrowed message ([`Endpoint::post_send`], [`Endpoint::post_send_parts`]) goes from the
//! caller's memory straight into the ring as far as the ring has room; only the rest is copied
//! into a buffer of the endpoint first, while the receiver already drains the chunks in.
//!
//! A single copy by one core is bounded by that core; the sender's core meanwhile only waits.
//! So a long message of more than one chunk is split ([`Config::split_copy`], on by default):
//! the receiver publishes it in the segment, and both ends claim chunks of about a quarter of
//! the message (64 KiB to 1 MiB) from one shared word and copy them, the receiver with
//! `process_vm_readv`, the sender with `process_vm_writev` whenever it makes progress (`poll`,
//! `wait`). Each byte is still copied once; a sender that is busy elsewhere leaves every chunk
//! to the receiver. [`Endpoint::bytes_copied_for_peer`] counts the sender's share.
//!
//! Emulated RDMA write and read carry the region key, offset and data in ring records; the
//! target checks key and bounds against its registered regions ([`Endpoint::register`]) and
//! replies with a status. The target serves them while it runs `next`, `poll` or `wait`.
//!
//! # Progress and waiting
//!
//! Nothing runs in the background. `next`, `poll` and `wait` make progress; only `wait` blocks.
//! It spins adaptively, then sleeps on a futex word in the shared segment that the peer rings
//! after publishing a record, releasing space or publishing a long message to copy together
//! (only when this side announced it sleeps). A release wakes a peer it sees asleep at once;
//! otherwise the fenced look (a memory fence, which would sit between a received message and
//! the reply) waits for this side's next post, empty `next` or `poll`, or `wait`, so a peer
//! that fell asleep at that very moment is woken then, or by its own timed wait
//! (`liveness_interval`).
//!
//! [`Endpoint::sleeper`] prepares the same sleep for a thread that does not hold the endpoint
//! (a [`Sleeper`]: the segment and the bell's value); [`sleep_any`] sleeps on the bells of
//! several endpoints at once (one `futex_waitv`). The segment counts the threads of a side
//! asleep, so several may sleep at once.
//!
//! Dropping an endpoint waits up to four `liveness_interval`s for the peer to read the long
//! messages it still holds; a message the peer has not read by then is lost to it.
//!
//! # Failure
//!
//! An endpoint notices a peer that closed its endpoint or died (its end of the set-up socket
//! closes) within about [`Config::liveness_interval`] while it polls or waits; then every
//! outstanding descriptor completes with [`Error::PeerFailed`], later posts fail with it, and
//! `next` returns it once the messages that arrived before are read. A record that breaks the
//! protocol fails the connection with [`Error::Protocol`]; nothing panics.
//!
//! A process that is stopped keeps its end of the socket open: for it, each side bumps a
//! heartbeat counter in the segment at every `poll`, post and sleeping `wait` (every
//! `liveness_interval` while asleep), and a second one through [`Heartbeat`] handles
//! ([`Endpoint::heartbeat`]) from a thread of its own, so that a process computing without
//! polling still shows alive; [`Endpoint::peer_heard`] tells when the peer's counters (or its
//! records) last advanced. What silence means is the caller's rule (the agent's peer
//! timeout).

mod cma;
mod completion;
mod config;
mod endpoint;
mod error;
mod futex;
mod heartbeat;
mod method;
pub(crate) mod region;
mod ring;
mod segment;
mod setup;
mod sleeper;
mod spin;

pub use completion::{Completion, Op, Posted};
pub use config::Config;
pub use endpoint::{Endpoint, Lease, LongMessages, Message};
pub use error::{AccessError, Error};
pub use heartbeat::Heartbeat;
pub use region::RegionKey;
pub use setup::{Listener, Pending, connect, connect_pending, pair, pair_with};
pub use sleeper::{MAX_BELLS, Sleeper, sleep_any};

/// Entry point for the fuzz targets (feature `fuzzing`); not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzz;
