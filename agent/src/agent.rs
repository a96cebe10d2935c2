//! [`Agent`]: the communication agent of one rank.
//!
//! One agent per rank (`Init`/the agent operation `Finalize`): [`Agent::init`] reads the launcher's
//! environment ([`Bootstrap::from_env`]) and the settings ([`Config::from_env`]), picks a method
//! per peer, and connects and authenticates a VC with every other rank. [`Agent::finalize`]
//! lets outstanding sends finish, waits for every rank at a fence, and closes the VCs.
//!
//! # Threads
//!
//! An `Agent` is a cheap handle (`Clone`, `Send`, `Sync`): any number of threads may post
//! sends and receives and wait on their requests at once. All state lives behind one mutex,
//! which is the agent design's read/write lock of a VC: each post, and each progress pass, takes it
//! once. See [`crate::progress`] for who runs progress and what a wait blocks on.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::bootstrap::Bootstrap;
use crate::config::{Config, ProgressMode};
use crate::engine::{Completions, State};
use crate::error::AgentError;
use crate::matching::Source;
use crate::request::ProgressDriver;
use crate::vc::Link;

/// State shared by every handle of one agent.
pub(crate) struct Shared {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) config: Config,
    pub(crate) state: Mutex<State>,
    /// The driver handed to every request of this agent (one `Arc`, so one wait serves all).
    pub(crate) driver: Arc<dyn ProgressDriver>,
    /// The current spin count of blocking progress (adaptive polling).
    pub(crate) spin_now: AtomicU32,
    /// Requests this agent completed (the one count its state bumps; see [`Completions`]).
    pub(crate) completions: Completions,
    /// How blocking progress waits (`auto` resolved at start: never [`ProgressMode::Auto`]).
    pub(crate) progress: ProgressMode,
    /// The lowest context id no communicator of this rank uses yet (see [`crate::comm`]).
    pub(crate) next_context: AtomicU32,
    /// The communicator creations in progress on this rank and who may offer
    /// `next_context` (see [`crate::creation`]).
    pub(crate) creations: crate::creation::Creations,
    /// The communicators of this rank on contexts of their own (all but the world's handles)
    /// still alive (see [`crate::comm::MAX_LIVE_COMMS`]).
    pub(crate) live_comms: AtomicU32,
    /// The world communicator's contexts reserved for duplicates without messages, shared by
    /// every [`crate::comm::Comm::world`] handle (see [`crate::comm`]).
    pub(crate) world_dups: crate::reserve::Reserve,
    /// The launcher connection, until finalize or abort takes it.
    pub(crate) boot: Mutex<Option<Bootstrap>>,
    /// The heartbeat thread (see [`crate::liveness`]); stopped at finalize, or when the last
    /// handle drops.
    pub(crate) heart: crate::liveness::Heart,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent between steps; a panic in one
        // (a bug) must not turn every later call into a second panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The agent's state if no other thread holds it now (`None`: another thread is inside
    /// the agent).
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, State>> {
        match self.state.try_lock() {
            Ok(st) => Some(st),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

/// The communication agent of one rank: VCs to every peer, tagged messaging, progress.
///
/// Handles are cheap to clone; each carries a context (communication space, see
/// [`Agent::with_context`]) that its sends and receives match in.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// // `Agent::init()` under a launcher; one rank on its own here.
/// assert_eq!((agent.rank(), agent.size()), (0, 1));
/// agent.send(0, 1, b"to myself")?;
/// let mut buf = [0u8; 9];
/// agent.recv(&mut buf, Source::Rank(0), TagMatch::Tag(1))?;
/// agent.finalize()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    pub(crate) shared: Arc<Shared>,
    pub(crate) context: u32,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("rank", &self.shared.rank)
            .field("size", &self.shared.size)
            .field("context", &self.context)
            .finish()
    }
}

impl Agent {
    /// This rank.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let next = (agent.rank() + 1) % agent.size();
    /// agent.send(next, 0, b"token")?;
    /// # agent.recv(&mut [0u8; 5], Source::Any, TagMatch::Tag(0))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank(&self) -> u32 {
        self.shared.rank
    }

    /// Number of ranks in the job.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// for peer in 0..agent.size() {
    ///     println!("rank {peer} over {:?}", agent.method_of(peer));
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn size(&self) -> u32 {
        self.shared.size
    }

    /// The settings in use.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// println!("eager up to {} bytes", agent.config().eager_limit);
    /// # Ok(())
    /// # }
    /// ```
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The context this handle's sends and receives match in (0 for the handle from
    /// [`Agent::init`]).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// assert_eq!(agent.context(), 0);
    /// assert_eq!(agent.with_context(7).context(), 7);
    /// # Ok(())
    /// # }
    /// ```
    pub fn context(&self) -> u32 {
        self.context
    }

    /// Another handle on the same agent whose messages match only in `context` (messages of
    /// different contexts never match each other, like MPI communicators).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// // Messages of context 5 never match receives of context 0, and back.
    /// let library = agent.with_context(5);
    /// library.send(0, 1, b"lib")?;
    /// agent.send(0, 1, b"app")?;
    /// let mut buf = [0u8; 3];
    /// agent.recv(&mut buf, Source::Rank(0), TagMatch::Tag(1))?;
    /// assert_eq!(&buf, b"app");
    /// library.recv(&mut buf, Source::Rank(0), TagMatch::Tag(1))?;
    /// assert_eq!(&buf, b"lib");
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_context(&self, context: u32) -> Agent {
        Agent {
            shared: Arc::clone(&self.shared),
            context,
        }
    }

    /// The method serving `peer` (`"self"`, `"shm"`, `"tcp"`, `"verbs"`), or `None` for a rank outside
    /// the job.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// assert_eq!(agent.method_of(0), Some("self"));
    /// assert_eq!(agent.method_of(agent.size()), None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn method_of(&self, peer: u32) -> Option<&'static str> {
        let st = self.shared.lock();
        st.vcs.get(peer as usize).map(|vc| match &vc.link {
            Link::SelfLoop => "self",
            Link::Remote(m) => m.kind().name(),
            Link::Closed => "closed",
        })
    }

    /// Receive memory of the verbs method: queue pairs (one per verbs peer) and the bytes
    /// registered for their receives (their rings, or the shared pool counted once).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// assert_eq!(agent.verbs_receive_memory(), (0, 0)); // a job of one has no verbs peer
    /// # Ok(())
    /// # }
    /// ```
    pub fn verbs_receive_memory(&self) -> (usize, usize) {
        #[cfg(feature = "rdma")]
        {
            let st = self.shared.lock();
            let mut pools: Vec<viaduct_verbs::msg::ReceivePool> = Vec::new();
            let (mut qps, mut bytes) = (0, 0);
            for vc in &st.vcs {
                let Link::Remote(m) = &vc.link else { continue };
                let Some((own, pool)) = m.verbs_receive() else {
                    continue;
                };
                qps += 1;
                bytes += own;
                if let Some(pool) = pool {
                    if !pools.iter().any(|p| p.same(&pool)) {
                        bytes += pool.registered_bytes();
                        pools.push(pool);
                    }
                }
            }
            (qps, bytes)
        }
        #[cfg(not(feature = "rdma"))]
        (0, 0)
    }

    /// the agent operation `Connect`: VCs are connected at [`Agent::init`], so this only reports whether
    /// the VC to `peer` is usable (`Err` with the reason when it failed).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.connect(0)?; // this rank's own VC: always up
    /// assert!(agent.connect(agent.size()).is_err()); // no such rank
    /// # Ok(())
    /// # }
    /// ```
    pub fn connect(&self, peer: u32) -> Result<(), AgentError> {
        self.check_rank(peer)?;
        let st = self.shared.lock();
        match st.vcs[peer as usize].failure() {
            Some(f) => Err(f.error(peer)),
            None if st.finalized => Err(AgentError::Finalized),
            None => Ok(()),
        }
    }

    /// Number of unexpected messages held and the payload bytes they hold (messages that
    /// arrived before their receive; rendezvous announcements hold no payload).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 3, b"early")?; // no receive posted yet
    /// assert_eq!(agent.unexpected(), (1, 5));
    /// agent.recv(&mut [0u8; 5], Source::Rank(0), TagMatch::Tag(3))?;
    /// assert_eq!(agent.unexpected(), (0, 0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn unexpected(&self) -> (usize, usize) {
        let st = self.shared.lock();
        (st.book.queues.unexpected_len(), st.book.unexpected_bytes)
    }

    pub(crate) fn check_rank(&self, rank: u32) -> Result<(), AgentError> {
        if rank >= self.shared.size {
            return Err(AgentError::BadRank {
                rank,
                size: self.shared.size,
            });
        }
        Ok(())
    }

    pub(crate) fn check_source(&self, source: Source) -> Result<(), AgentError> {
        match source {
            Source::Any => Ok(()),
            Source::Rank(r) => self.check_rank(r),
        }
    }
}

#[cfg(feature = "rdma")]
impl Agent {
    /// The counters of the registration cache of the verbs connection to `peer` (registered
    /// buffers for rendezvous by RDMA READ or WRITE); `None` when `peer` is not reached over
    /// verbs.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let agent = Agent::singleton()?;
    /// // A rank reaches itself by the self loop, not over verbs.
    /// assert!(agent.verbs_cache_stats(0).is_none());
    /// # agent.finalize()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn verbs_cache_stats(&self, peer: u32) -> Option<viaduct_verbs::CacheStats> {
        let st = self.shared.lock();
        match &st.vcs.get(peer as usize)?.link {
            Link::Remote(crate::method::Method::Verbs(ep)) => Some(ep.cache_stats()),
            _ => None,
        }
    }

    /// How many rendezvous messages this rank received over verbs since it started, by the
    /// direction their data moved: read by this rank (RDMA READ) or written by the sender
    /// (RDMA WRITE); see `VIADUCT_VERBS_WRITE_MIN` in [`crate::config`].
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let agent = Agent::singleton()?;
    /// let counts = agent.verbs_rendezvous_counts();
    /// assert_eq!((counts.read, counts.written), (0, 0));
    /// # agent.finalize()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn verbs_rendezvous_counts(&self) -> RendezvousCounts {
        self.shared.lock().book.rdma.counts()
    }
}

#[cfg(feature = "rdma")]
pub use crate::engine::read_rndv::RendezvousCounts;
