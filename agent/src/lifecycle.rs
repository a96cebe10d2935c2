//! The start and end of an [`Agent`]: [`Agent::init`], [`Agent::with_bootstrap`],
//! [`Agent::singleton`], [`Agent::abort`] and [`Agent::finalize`].
//!
//! The top layer of the crate: starting an agent publishes its settings and cards, connects
//! the VCs ([`crate::connect`]), starts the heartbeat ([`crate::liveness`]), resolves the
//! progress mode ([`crate::progress`]) and builds the state every handle shares
//! ([`crate::agent`]); nothing below uses this module.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::agent::{Agent, Shared};
use crate::bootstrap::Bootstrap;
use crate::config::Config;
use crate::connect;
use crate::engine::{Book, Completions, State};
use crate::error::AgentError;
use crate::progress::Driver;
use crate::vc::{Link, Vc};

impl Agent {
    /// Starts the agent of this rank from the environment (launcher and `VIADUCT_*` settings).
    /// Every rank of the job must call it.
    ///
    /// ```no_run
    /// use viaduct_agent::prelude::*;
    ///
    /// fn main() -> Result<(), AgentError> {
    ///     // Started by `viaduct launch -n 2 -- PROG`, mpiexec or srun.
    ///     let agent = Agent::init()?;
    ///     println!("rank {} of {}", agent.rank(), agent.size());
    ///     agent.finalize()
    /// }
    /// ```
    pub fn init() -> Result<Agent, AgentError> {
        let config = Config::from_env()?;
        let report = crate::report::Report::from_env()?;
        let boot = Bootstrap::from_env()?;
        let agent = Agent::with_bootstrap(boot, config)?;
        report.print(&agent);
        Ok(agent)
    }

    /// Starts the agent over an existing bootstrap with explicit settings. Every rank of the
    /// job must call it.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use std::time::Duration;
    /// use viaduct_agent::bootstrap::Bootstrap;
    ///
    /// // A job of one rank, without a launcher; `Bootstrap::from_env()` under one.
    /// let boot = Bootstrap::from_vars(std::iter::empty::<(String, String)>())?;
    /// let config = Config { peer_timeout: Duration::from_secs(5), ..Config::default() };
    /// let agent = Agent::with_bootstrap(boot, config)?;
    /// assert_eq!(agent.size(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_bootstrap(mut boot: Bootstrap, config: Config) -> Result<Agent, AgentError> {
        crate::error::register_error_kinds();
        config.validate()?;
        // Message buffers allocated per message would otherwise come on fresh pages each time.
        viaduct_fallback::memory::keep_large_blocks(config.malloc_keep);
        let rank = boot.rank();
        let size = boot.size();
        // Compared after connect_all's fence, before any connection is made.
        crate::config::publish_agreement(&mut boot, &config)?;
        // Read after connect_all's fence by the ranks that choose their progress mode.
        crate::progress::publish_cpus(&mut boot)?;
        // The liveness card goes out with the business cards (connect_all's fence).
        let live = crate::liveness::open(&mut boot, &config)?;
        let vcs = if size == 1 {
            vec![Vc::new(0, Link::SelfLoop)]
        } else {
            connect::connect_all(&mut boot, &config)?
        };
        let progress = crate::progress::resolve_mode(&mut boot, config.progress)?;
        let heart = crate::liveness::Heart::start(&mut boot, live, &vcs, &config)?;
        let book = Book::new(
            rank,
            config.eager_limit,
            config.rendezvous_chunk,
            config.max_unexpected_bytes,
            config.xfer_chunk,
            config.verbs_write_min as u64,
            Completions::default(),
        );
        let world_dups = crate::reserve::Reserve::new(crate::comm::FIRST_CONTEXT, 2);
        let completions = book.done.clone();
        let spin = config.spin_min;
        let liveness = crate::engine::Liveness::new(vcs.len(), heart.heard());
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| Shared {
            rank,
            size,
            state: Mutex::new(State {
                vcs,
                book,
                finalized: false,
                liveness,
                last_reaped: 0,
            }),
            driver: Arc::new(Driver::new(weak.clone())),
            spin_now: AtomicU32::new(spin),
            completions,
            progress,
            next_context: AtomicU32::new(crate::comm::FIRST_CONTEXT + world_dups.span()),
            creations: crate::creation::Creations::default(),
            live_comms: AtomicU32::new(0),
            world_dups,
            boot: Mutex::new(Some(boot)),
            heart,
            config,
        });
        Ok(Agent { shared, context: 0 })
    }

    /// A single-rank agent with default settings, without a launcher (sends to rank 0 loop
    /// back).
    ///
    /// ```
    /// use viaduct_agent::Agent;
    ///
    /// fn main() -> Result<(), viaduct_agent::AgentError> {
    ///     let agent = Agent::singleton()?;
    ///     assert_eq!((agent.rank(), agent.size()), (0, 1));
    ///     agent.finalize()
    /// }
    /// ```
    pub fn singleton() -> Result<Agent, AgentError> {
        let boot = Bootstrap::from_vars(std::iter::empty::<(String, String)>())?;
        Agent::with_bootstrap(boot, Config::default())
    }

    /// Ends the whole job: asks the launcher through the PMI `abort` command (PMI-1 or PMI-2,
    /// whichever bootstrapped this rank) to end every rank with `exit_code`, prints
    /// `message`, and exits this process with `exit_code`. Without a launcher (a single rank),
    /// or once finalized, it only prints and exits.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let config_ok = std::path::Path::new("input.dat").exists();
    /// if !config_ok {
    ///     // Every rank of the job ends, with this exit code.
    ///     agent.abort(2, "input.dat is missing");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn abort(&self, exit_code: i32, message: &str) -> ! {
        let boot = self
            .shared
            .boot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match boot {
            Some(b) => b.abort(exit_code, message),
            None => {
                eprintln!(
                    "viaduct: rank {} aborts the job: {message}",
                    self.shared.rank
                );
                std::process::exit(exit_code)
            }
        }
    }

    /// Ends the agent: waits (at most the connect timeout) for this rank's sends to leave,
    /// meets every rank at a fence so no VC closes while a peer still needs it, then closes
    /// the VCs. Requests still open fail with [`AgentError::Finalized`]; later calls
    /// on any handle fail with [`AgentError::Finalized`].
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 1, b"last")?;
    /// agent.recv(&mut [0u8; 4], Source::Rank(0), TagMatch::Tag(1))?;
    /// agent.finalize()?; // every clone of the handle is then closed too
    /// # Ok(())
    /// # }
    /// ```
    pub fn finalize(self) -> Result<(), AgentError> {
        let deadline = Instant::now() + self.shared.config.connect_timeout;
        loop {
            {
                let mut st = self.shared.lock();
                if st.finalized {
                    return Err(AgentError::Finalized);
                }
                st.progress();
                let queued = st.vcs.iter().any(|v| v.has_queued() && v.failed.is_none());
                if !st.book.sends_pending() && !queued {
                    break;
                }
            }
            if Instant::now() >= deadline {
                break;
            }
            self.shared
                .progress_blocking(Duration::from_millis(1), None);
        }
        let boot = self
            .shared
            .boot
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let fenced = match boot {
            Some(mut b) if self.shared.size > 1 => b.fence().map(|()| Some(b)),
            other => Ok(other),
        };
        {
            let mut st = self.shared.lock();
            st.finalized = true;
            st.book.fail_all();
            for vc in st.vcs.iter_mut() {
                vc.readers.fail_all(|| AgentError::Finalized);
                vc.link = Link::Closed;
            }
        }
        // Every rank passed the fence: nobody waits on this one any more.
        self.shared.heart.stop();
        if let Some(b) = fenced? {
            b.finalize()?;
        }
        Ok(())
    }
}
