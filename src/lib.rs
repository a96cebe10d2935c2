//! viaduct: a communication library and toolkit for cluster runs.
//!
//! This facade re-exports the three crates:
//!
//! - [`agent`] (`viaduct-agent`): the communication agent of one rank (VCs to every peer over
//!   the best method, tagged point-to-point, requests, progress), generalized requests and
//!   request classes, request handlers, nonblocking file I/O, the PMI bootstrap.
//! - [`fallback`] (`viaduct-fallback`): the io_uring engine, the TCP and shared-memory methods,
//!   file operations.
//! - `verbs` (`viaduct-verbs`, with the default `rdma` feature): a safe owned-buffer API over
//!   libibverbs.
//!
//! # Quick start
//!
//! A program started by `viaduct launch -n 2 -- PROG`, `mpiexec -n 2 PROG` or
//! `srun --mpi=pmi2 -n 2 PROG`:
//!
//! ```no_run
//! use viaduct::agent::agent::Agent;
//! use viaduct::agent::matching::{Source, TagMatch};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = Agent::init()?; // reads the launcher's PMI environment and VIADUCT_* settings
//! let peer = 1 - agent.rank();
//! let mut buf = [0u8; 5];
//! if agent.rank() == 0 {
//!     agent.send(peer, 7, b"hello")?;
//! } else {
//!     let status = agent.recv(&mut buf, Source::Rank(peer), TagMatch::Tag(7))?;
//!     assert_eq!(status.count(), 5);
//! }
//! agent.finalize()?;
//! # Ok(())
//! # }
//! ```
//!
//! The `viaduct` command (`viaduct info`, `viaduct launch`, `viaduct demo`, `viaduct bench`)
//! is built from this package; see the README.
#![deny(missing_docs)]
pub use viaduct_agent as agent;
pub use viaduct_fallback as fallback;
#[cfg(feature = "rdma")]
pub use viaduct_verbs as verbs;
