//! viaduct: a communication library and toolkit for cluster runs.
//!
//! This facade re-exports the five crates:
//!
//! - [`agent`] (`viaduct-agent`): the communication agent of one rank (VCs to every peer over
//!   the best method, tagged point-to-point, requests, progress), generalized requests and
//!   request classes, request handlers, nonblocking file I/O, communicators and collectives.
//! - [`request`] (`viaduct-request`): requests, CARs, statuses, generalized requests, request
//!   classes, handlers and the `wait_*`/`test_*` functions, usable without the agent; also
//!   `agent::request`.
//! - [`pmi`] (`viaduct-pmi`): the PMI bootstrap (PMI-1 and PMI-2 clients, the PMI-1 server of
//!   `viaduct launch`, job keys and connection authentication), also `agent::bootstrap`.
//! - [`fallback`] (`viaduct-fallback`): the io_uring engine, the TCP and shared-memory methods,
//!   file operations.
//! - `verbs` (`viaduct-verbs`, with the default `rdma` feature): a safe owned-buffer API over
//!   libibverbs.
//!
//! Most programs need only the prelude (`use viaduct::prelude::*;`, the same as
//! [`agent::prelude`]); the agent's main types are also at this crate's root
//! ([`Agent`], [`Comm`], [`Request`], [`Status`], [`AgentError`], ...).
//!
//! ```
//! use viaduct::agent::coll::{Datatype, ReduceOp};
//! use viaduct::{Agent, Comm, Source, TagMatch, wait_all};
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let agent = Agent::singleton()?;
//!     let (recv, buf) = agent.irecv(16, Source::Any, TagMatch::Tag(1))?;
//!     let send = agent.isend(0, 1, b"facade")?;
//!     wait_all(&mut [send, recv], None)?;
//!     assert_eq!(buf.take(), b"facade");
//!     let mut n = 1u32.to_le_bytes();
//!     Comm::world(&agent).allreduce(&mut n, Datatype::U32, ReduceOp::Sum)?;
//!     Ok(())
//! }
//! ```
//!
//! # Quick start
//!
//! A single-rank agent ([`Agent::singleton`], no launcher needed) sends to itself with a tag
//! and receives it:
//!
//! ```
//! use viaduct::prelude::*;
//!
//! fn main() -> Result<(), AgentError> {
//!     let agent = Agent::singleton()?;
//!     let me = agent.rank();
//!     agent.send(me, 7, b"hello")?;
//!     let mut buf = [0u8; 16];
//!     let status = agent.recv(&mut buf, Source::Rank(me), TagMatch::Tag(7))?;
//!     assert_eq!((status.tag(), status.count()), (Some(7), 5));
//!     assert_eq!(&buf[..5], b"hello");
//!     agent.finalize()
//! }
//! ```
//!
//! A program of several ranks, started by `viaduct launch -n 2 -- PROG`, `mpiexec -n 2 PROG`
//! or `srun --mpi=pmi2 -n 2 PROG`:
//!
//! ```no_run
//! use viaduct::prelude::*;
//!
//! fn main() -> Result<(), AgentError> {
//!     let agent = Agent::init()?; // reads the launcher's PMI environment and VIADUCT_* settings
//!     let peer = 1 - agent.rank();
//!     let mut buf = [0u8; 5];
//!     if agent.rank() == 0 {
//!         agent.send(peer, 7, b"hello")?;
//!     } else {
//!         let status = agent.recv(&mut buf, Source::Rank(peer), TagMatch::Tag(7))?;
//!         assert_eq!(status.count(), 5);
//!     }
//!     agent.finalize()
//! }
//! ```
//!
//! An error's text (`{e}`) holds its whole cause chain, and [`AgentError`] answers the usual
//! questions without matching on nested errors: [`AgentError::is_truncated`],
//! [`AgentError::is_peer_failed`], [`AgentError::failed_peer`], [`AgentError::errno`],
//! [`AgentError::is_timeout`], [`AgentError::is_cancelled`].
//!
//! # Diagnostics
//!
//! Warnings (a refused connection, a failed set-up) are [`tracing`](https://docs.rs/tracing)
//! events. The `viaduct` command and the MPI library write them to stderr, filtered by
//! `VIADUCT_LOG` (default `warn`; `debug` shows more, `off` nothing); a program of its own
//! calls [`agent::log::install_subscriber`] for the same, or installs any subscriber it likes.
//!
//! # Glossary
//!
//! | word | what it is |
//! | --- | --- |
//! | method | a transport: `verbs` (RDMA), `tcp`, `shm` (shared memory), `self` (the own rank) |
//! | VC (virtual connection) | the agent's connection to one peer rank over one method |
//! | business card | a rank's endpoint addresses, exchanged through the launcher at start-up |
//! | CAR (communication agent request) | one unit of work posted to a method; a request completes when its outstanding CARs reach 0 |
//! | next / consume | borrow the next inbound bytes of a VC in place, then hand them back ([`Agent::next`]) |
//! | reserve_write / set_marker | hold a place in a VC's outgoing order now, bind the data later |
//! | xfer block | recv/send/forward/mop ops started as one request: the building block of collectives |
//! | generalized request | a request the user completes (MPI's `MPI_Grequest_start`) |
//! | class | a request class: generalized requests with poll and wait hooks (file I/O is one) |
//! | handler | a function run on the handler thread when a request completes, within a deadline |
//!
//! The [`agent`] crate page says more of each, with links.
//!
//! # Progress and threads
//!
//! Nothing moves outside calls into the library, except on the agent's heartbeat thread
//! (which proves the rank alive to its peers and moves no message) and its handler thread
//! (which runs request handlers). Posts, blocking calls, the waits and tests of requests, the
//! stream calls and `Agent::make_progress*` make progress. [`Agent`] is `Clone + Send + Sync`:
//! threads share it freely. See the [`agent`] crate page, "Progress and threads".
//!
//! # Features
//!
//! `rdma` (default) builds the verbs method and this crate's `verbs` module; it needs
//! rdma-core (`libibverbs`) and libclang at build time. Depend with
//! `default-features = false` to build without them (TCP and shared memory remain).
//!
//! The `viaduct` command (`viaduct info`, `viaduct launch`, `viaduct demo`, `viaduct bench`)
//! is built from this package; see the README.
#![deny(missing_docs)]
#![deny(unsafe_code)]
pub use viaduct_agent as agent;
pub use viaduct_fallback as fallback;
pub use viaduct_pmi as pmi;
pub use viaduct_request as request;
#[cfg(feature = "rdma")]
pub use viaduct_verbs as verbs;

pub use viaduct_agent::prelude;
pub use viaduct_agent::{
    Agent, AgentError, AnyOutcome, Comm, Config, RecvBuffer, Request, RequestError, Source, Status,
    TagMatch, post_handler, test_all, test_any, test_some, wait_all, wait_any, wait_some,
};
