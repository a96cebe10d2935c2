//! The viaduct communication agent of one rank: a connection (VC) to every peer over the
//! best method (verbs, TCP, shared memory), tagged point-to-point messaging with MPI matching,
//! a byte stream per VC read in place, requests and the `wait_*`/`test_*` functions,
//! generalized requests and request classes, request handlers (the `viaduct-request` crate,
//! re-exported as [`request`]), xfer blocks and collectives, nonblocking file I/O, and the PMI
//! bootstrap that starts it under a launcher (the `viaduct-pmi` crate, re-exported as
//! [`bootstrap`]).
//!
//! Most programs need only the [`prelude`]: `use viaduct_agent::prelude::*;`. The main types
//! are also at the crate root ([`Agent`], [`Comm`], [`Request`], [`Status`], [`AgentError`],
//! ...).
//!
//! # Quick start
//!
//! A single-rank agent ([`Agent::singleton`], no launcher needed) sends to itself with a tag
//! and receives the message, once blocking and once through requests:
//!
//! ```
//! use viaduct_agent::prelude::*;
//!
//! fn main() -> Result<(), AgentError> {
//!     let agent = Agent::singleton()?; // under a launcher: Agent::init()?
//!     let me = agent.rank();
//!
//!     // Blocking: MPI_Send / MPI_Recv.
//!     agent.send(me, 7, b"hello")?;
//!     let mut buf = [0u8; 16];
//!     let status = agent.recv(&mut buf, Source::Rank(me), TagMatch::Tag(7))?;
//!     assert_eq!((status.source(), status.tag(), status.count()), (Some(me), Some(7), 5));
//!     assert_eq!(&buf[..5], b"hello");
//!
//!     // Nonblocking: post both, then wait for all (MPI_Irecv / MPI_Isend / MPI_Waitall).
//!     let (recv, data) = agent.irecv(16, Source::Any, TagMatch::Any)?;
//!     let send = agent.isend(me, 8, b"world")?;
//!     let mut requests = [recv, send];
//!     let mut statuses = Vec::new();
//!     wait_all(&mut requests, Some(&mut statuses))?;
//!     assert_eq!(statuses[0].tag(), Some(8));
//!     assert_eq!(data.take(), b"world");
//!
//!     agent.finalize()
//! }
//! ```
//!
//! A program of several ranks is the same with [`Agent::init`] in place of
//! [`Agent::singleton`], started by a launcher: `viaduct launch -n 2 -- PROG`,
//! `mpiexec -n 2 PROG` (MPICH's hydra, PMI-1) or `srun --mpi=pmi2 -n 2 PROG`. Errors say why
//! (`{e}` shows the whole cause chain), and answer the usual questions without matching on
//! nested errors: see [`error`].
//!
//! # Glossary
//!
//! | word | what it is |
//! | --- | --- |
//! | method | a transport behind the agent: `verbs`, `tcp`, `shm`, and `self` for the own rank ([`method`]) |
//! | VC (virtual connection) | the agent's connection to one peer rank over one method; tagged messages and a byte stream share it, in order |
//! | business card | a rank's endpoint addresses for each method (queue pair number and GID, TCP address, shared-memory name), exchanged through the launcher at start-up ([`bootstrap`]) |
//! | CAR (communication agent request) | one unit of work posted to a method; a [`Request`] counts its outstanding CARs and completes when the count reaches 0 ([`request::CarCounter`]) |
//! | request | the one handle of every operation in progress: [`Request::wait`], [`Request::test`], and the arrays of [`wait_all`], [`wait_any`], [`wait_some`], [`test_all`], [`test_any`], [`test_some`] |
//! | status | what a completed request reports: source, tag, byte count, cancellation, error ([`Status`]) |
//! | next / consume | borrow the next inbound bytes of a VC's byte stream in place, in the method's own receive memory, then hand them back: [`Agent::stream_next`] shows them to a closure as a [`stream::StreamView`] on which it calls `consume`; [`Agent::stream_next_timeout`] waits for them (the older [`Agent::next`] takes the count consumed as the closure's return value) ([`stream`]). The tagged form: [`Agent::recv_in_place`] / [`Comm::recv_in_place`] return a [`Received`], the matched message shown in the method's memory without a copy or a closure; dropping it is the `consume` (the sender's VC waits until then) ([`in_place`]) |
//! | matched probe | [`Agent::mprobe`] / [`Agent::improbe`] take the oldest matching unexpected message out of matching and give it as a [`p2p::Message`], received only through it ([`p2p::Message::recv`], [`p2p::Message::irecv_into`]); a rendezvous message's data moves at that receive (MPI's `MPI_Mprobe`/`MPI_Mrecv`) |
//! | reserve_write / set_marker | hold a place in a VC's outgoing order now ([`Agent::reserve_write`]), bind the data later ([`Agent::set_marker`]): the message leaves in the reserved place |
//! | xfer block | scatter or gather block: created, given recv/send/forward/mop (reduce) ops, then started as one request; the building block of the collectives ([`xfer`], [`coll`]) |
//! | generalized request | a request the user completes ([`Request::generalized`], MPI's `MPI_Grequest_start`): query, free and cancel callbacks on the user's state, completed from any thread with a [`request::CompleteHandle`] |
//! | class | a request class ([`request::RequestClass`]): generalized requests with a `poll` hook (run by tests and waits) and a `wait` hook (one blocking call for every request of the class in a wait); nonblocking file I/O is one ([`fileio`]) |
//! | handler | a function run on the handler thread when a request completes or releases its resources, within a deadline, or a failure function instead ([`post_handler`], [`request::handler`]) |
//! | communicator | a group of ranks with its own matching space ([`Comm`]: world, `dup`, `split`); an agent handle's context does the same for plain sends ([`Agent::with_context`]) |
//!
//! # Progress and threads
//!
//! - **Nothing moves outside calls**, with two exceptions: the heartbeat thread
//!   (`viaduct-heartbeat`: proves to the peers that this rank is alive while it computes; it
//!   moves no message; see [`config`], "Peer liveness") and the handler thread (`viaduct-handlers`, started by the first
//!   [`post_handler`], runs handlers). [`Agent::init`] also uses short-lived threads to accept
//!   connections; they end before it returns.
//! - **Calls that make progress** (reap completions, match inbound messages, post queued
//!   ones, drive xfer blocks): posts (`send`, `isend`, `irecv`, `write`, ... try to hand over
//!   at once), blocking calls (`send`, `recv`, `probe`, collectives), the waits and tests of
//!   requests ([`Request::wait`], [`Request::test`], `wait_*`, `test_*`), the stream calls
//!   ([`Agent::next`], [`Agent::next_timeout`], reads), and [`Agent::make_progress`] /
//!   [`Agent::make_progress_blocking`]. A rank that posts receives and then computes for a
//!   long time without any of these moves no inbound message meanwhile. A request class's
//!   hooks run only inside tests and waits on its requests. See [`progress`] for the details.
//! - **Threads**: [`Agent`] is `Clone + Send + Sync`, a cheap handle: any number of threads
//!   may post, wait and make progress at once (one mutex serializes the passes). A
//!   [`Request`] is `Send`: it may be waited on by another thread than the one that posted it.
//! - **Failure**: a peer that dies or stops is noticed within `VIADUCT_PEER_TIMEOUT`; every
//!   request on its VC then fails ([`AgentError::is_peer_failed`]). No wait hangs.
//!
//! ```
//! fn shareable<T: Clone + Send + Sync>() {}
//! fn movable<T: Send>() {}
//! shareable::<viaduct_agent::Agent>();
//! movable::<viaduct_agent::Request>();
//! ```
//!
//! # Diagnostics (`VIADUCT_LOG`)
//!
//! The library writes no diagnostics to stderr itself: refused connections, failed set-ups
//! and the like are [`tracing`] warnings. A program shows them by installing a subscriber;
//! [`log::install_subscriber`] (called by the `viaduct` command and by `MPI_Init` of the MPI
//! library) writes to stderr what `VIADUCT_LOG` lets through: `warn` when unset (warnings a
//! user must see still show), `VIADUCT_LOG=debug` for more, `VIADUCT_LOG=off` for none, or
//! filter directives such as `viaduct_agent=debug`. A program with its own subscriber gets the
//! events there. See [`log`].
//!
//! # Features
//!
//! `rdma` (default) builds the verbs method, which needs rdma-core (`libibverbs`) and
//! libclang at build time. Without RDMA hardware or those packages, depend with
//! `default-features = false`: TCP and shared memory remain.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod agent;
mod borrowed;
/// The PMI bootstrap: the `viaduct-pmi` crate, which the agent starts on.
pub use viaduct_pmi as bootstrap;
pub mod coll;
pub mod comm;
pub mod config;
mod connect;
mod creation;
mod engine;
pub mod error;
mod fast;
pub mod fileio;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handshake;
pub mod in_place;
mod lifecycle;
mod limits;
mod liveness;
pub mod log;
pub mod matching;
pub mod method;
pub mod p2p;
pub mod progress;
mod proto;
pub mod recv_buffer;
pub mod report;
mod reserve;
/// Requests, generalized requests, request classes, handlers and CARs: the `viaduct-request`
/// crate, on which the agent's operations complete.
pub use viaduct_request as request;
mod spare;
pub mod stream;
mod vc;
mod wire;
pub mod xfer;
mod xfer_base;

pub use agent::Agent;
pub use comm::Comm;
pub use config::Config;
pub use error::AgentError;
pub use in_place::Received;
pub use matching::{Source, TagMatch};
pub use recv_buffer::RecvBuffer;
pub use request::{
    AnyOutcome, Request, RequestError, Status, post_handler, test_all, test_any, test_some,
    wait_all, wait_any, wait_some,
};

/// The names most programs use, for `use viaduct_agent::prelude::*;` (or
/// `use viaduct::prelude::*;` through the root crate).
///
/// ```
/// use viaduct_agent::prelude::*;
///
/// # fn main() -> Result<(), AgentError> {
/// let agent = Agent::singleton()?;
/// let world = Comm::world(&agent);
/// world.send(0, 3, b"hi")?;
/// let mut buf = [0u8; 2];
/// let status: Status = world.recv(&mut buf, Source::Rank(0), TagMatch::Tag(3))?;
/// assert_eq!(status.count(), 2);
/// # Ok(())
/// # }
/// ```
pub mod prelude {
    pub use crate::agent::Agent;
    pub use crate::comm::Comm;
    pub use crate::config::Config;
    pub use crate::error::AgentError;
    pub use crate::matching::{Source, TagMatch};
    pub use crate::recv_buffer::RecvBuffer;
    pub use crate::request::{
        AnyOutcome, Request, RequestError, Status, test_all, test_any, test_some, wait_all,
        wait_any, wait_some,
    };
}
