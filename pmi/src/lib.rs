//! PMI bootstrap: finding the other ranks of a job through the launcher that started them.
//!
//! viaduct does not run its own cluster manager. Ranks are started by an existing launcher and
//! learn about each other through its key-value space (KVS) with the PMI protocols:
//!
//! - MPICH's hydra `mpiexec`: PMI-1 over an inherited socket (`PMI_FD`) or TCP (`PMI_PORT`),
//!   [`pmi1`];
//! - Slurm's `srun --mpi=pmi2`: PMI-2 over an inherited socket, [`pmi2`];
//! - `viaduct launch` (one machine): PMI-1 over TCP, served by [`server`];
//! - no launcher at all: a single rank (a "singleton").
//!
//! This crate stands alone: it knows nothing of the viaduct agent, which builds on it (and
//! re-exports it as `viaduct_agent::bootstrap`). Any program started by one of these launchers
//! can use it to exchange addresses with its peers.
//!
//! [`Bootstrap::from_env`] reads the environment ([`mod@env`] tells the rules), connects, and does one
//! start-up exchange (one fence) that gives every rank the job key and the node of every rank.
//! Afterwards a rank exchanges its business cards with [`Bootstrap::publish`],
//! [`Bootstrap::fence`] and [`Bootstrap::lookup`]; connections between ranks authenticate with
//! the job key through [`auth`]. Process mappings are read by [`mapping`], job keys made and
//! parsed by [`jobkey`], and the PMI-1 lines and PMI-2 records by [`wire1`] and [`wire2`].
//!
//! # A client
//!
//! A rank started by a launcher (with no launcher it is a single rank of its own):
//!
//! ```no_run
//! # fn main() -> Result<(), viaduct_pmi::BootstrapError> {
//! use viaduct_pmi::Bootstrap;
//!
//! let mut boot = Bootstrap::from_env()?;
//! boot.publish("card", "tcp:10.0.0.5:41000")?;
//! boot.fence()?;
//! for peer in 0..boot.size() {
//!     let card = boot.lookup("card", peer)?;
//!     println!("rank {peer}: {card} (same node: {})", boot.is_local(peer));
//! }
//! boot.finalize()?;
//! # Ok(()) }
//! ```
//!
//! # The server
//!
//! A launcher on one machine serves its ranks PMI-1 over TCP with [`server::Pmi1Server`]: each
//! rank gets `PMI_PORT`, `PMI_ID`, `PMI_RANK` and `PMI_SIZE` (and the job key in
//! [`JOB_KEY_VAR`]). Here the two ranks are threads that read these variables through
//! [`Bootstrap::from_vars`]; a launcher puts them in the environment of the processes it starts.
//!
//! ```
//! use std::thread;
//! use viaduct_pmi::server::{Pmi1Server, ServerConfig};
//! use viaduct_pmi::{Bootstrap, JOB_KEY_VAR, JobKey};
//!
//! let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
//! let key = JobKey::generate().unwrap();
//! let ranks: Vec<_> = (0..2u32)
//!     .map(|rank| {
//!         let vars = [
//!             ("PMI_PORT".to_owned(), server.port_env()),
//!             ("PMI_ID".to_owned(), rank.to_string()),
//!             ("PMI_RANK".to_owned(), rank.to_string()),
//!             ("PMI_SIZE".to_owned(), "2".to_owned()),
//!             (JOB_KEY_VAR.to_owned(), key.to_hex()),
//!         ];
//!         thread::spawn(move || {
//!             let mut boot = Bootstrap::from_vars(vars).unwrap();
//!             boot.publish("card", &format!("rank{rank}")).unwrap();
//!             boot.fence().unwrap();
//!             let other = boot.lookup("card", 1 - rank).unwrap();
//!             boot.finalize().unwrap();
//!             other
//!         })
//!     })
//!     .collect();
//! let seen: Vec<String> = ranks.into_iter().map(|r| r.join().unwrap()).collect();
//! assert_eq!(seen, ["rank1", "rank0"]);
//! assert!(server.take_events().is_empty()); // no refusal, no broken barrier
//! server.shutdown();
//! ```
//!
//! # Waits
//!
//! Every answer from the launcher is awaited at most `VIADUCT_PMI_TIMEOUT` seconds (default
//! [`DEFAULT_TIMEOUT`]); a fence waits for the slowest rank, so the limit must cover the job's
//! start-up skew. A dead launcher or rank gives [`BootstrapError::Timeout`] or
//! [`BootstrapError::Closed`], never a hang.
//!
//! # Keys and values
//!
//! Keys are `[A-Za-z0-9_-]`, values printable ASCII without space, `=`, `;` or `\` (see
//! [`wire`]); hex-encode binary data. Keys starting with `viaduct-` are used by this crate.
//!
//! # Diagnostics
//!
//! The crate writes no diagnostics to stderr itself (except the last words of
//! [`Bootstrap::abort`]): a failed finalize on drop and a refused connection in
//! [`auth::accept`] are [`tracing`] warnings, shown by whatever subscriber the program installs.
//!
//! # Unsafe code
//!
//! This crate is `#![deny(unsafe_code)]`. Taking over the socket the launcher passed as
//! `PMI_FD` ([`fd::adopt_inherited_fd`]) needs std's `unsafe` `FromRawFd`; it is done by
//! `viaduct_fallback::fd::adopt_inherited_socket`, which holds the checks and the `// SAFETY:`
//! argument.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod auth;
mod conn;
pub mod env;
mod error;
pub use error::{Chain, chain};
pub mod fd;
pub mod jobkey;
pub mod mapping;
pub mod pmi1;
pub mod pmi2;
pub mod server;
pub mod wire;
pub mod wire1;
pub mod wire2;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

pub use env::PmiEnv;
pub use error::BootstrapError;
pub use jobkey::{JOB_KEY_VAR, JobKey};

use pmi1::Pmi1Client;
use pmi2::Pmi2Client;
use wire::{check_key, shorten};

/// Environment variable with the limit, in seconds, on each wait for the launcher.
pub const TIMEOUT_VAR: &str = "VIADUCT_PMI_TIMEOUT";

/// Default limit on each wait for the launcher.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// KVS key under which rank 0 publishes the job key when the launcher did not provide one.
const JOB_KEY_KVS: &str = "viaduct-jobkey";
/// KVS key prefix under which ranks publish their host name when no process mapping exists.
const HOST_KVS: &str = "viaduct-host";

/// Which launcher protocol a [`Bootstrap`] speaks.
///
/// ```
/// use viaduct_pmi::{Bootstrap, Protocol};
///
/// let boot = Bootstrap::from_vars(std::iter::empty::<(String, String)>()).unwrap();
/// assert_eq!(boot.protocol(), Protocol::Singleton);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// No launcher: a single rank.
    Singleton,
    /// PMI-1 (hydra, `viaduct launch`).
    Pmi1,
    /// PMI-2 (Slurm).
    Pmi2,
}

#[derive(Debug)]
enum Backend {
    Singleton {
        committed: HashMap<String, String>,
        pending: HashMap<String, String>,
    },
    Pmi1(Pmi1Client),
    Pmi2(Pmi2Client),
}

/// A rank's handle on its job: rank, size, KVS, job key, node layout.
///
/// ```
/// # use viaduct_pmi::Bootstrap;
/// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = Pmi1Server::start(ServerConfig::new(1))?;
/// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
/// # let mut boot = Bootstrap::from_vars(vars)?;
/// boot.put("greeting", "hello")?;
/// boot.fence()?;
/// assert_eq!(boot.get("greeting")?, "hello");
/// assert_eq!((boot.rank(), boot.size()), (0, 1));
/// # boot.finalize()?;
/// # server.shutdown();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Bootstrap {
    backend: Backend,
    rank: u32,
    size: u32,
    job_key: JobKey,
    node_ids: Vec<u32>,
    finalized: bool,
}

impl Bootstrap {
    /// Connects to the launcher named by this process's environment (see [`mod@env`]) and does the
    /// start-up exchange. Every rank of the job must call it.
    ///
    /// ```no_run
    /// use viaduct_pmi::Bootstrap;
    ///
    /// fn main() -> Result<(), viaduct_pmi::BootstrapError> {
    ///     let mut boot = Bootstrap::from_env()?; // under a launcher
    ///     println!("rank {} of {}", boot.rank(), boot.size());
    ///     boot.fence()?;
    ///     boot.finalize()
    /// }
    /// ```
    pub fn from_env() -> Result<Self, BootstrapError> {
        Self::from_vars(std::env::vars())
    }

    /// [`Bootstrap::from_env`] with the environment given as (name, value) pairs.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// // `vars` as a launcher would set them: PMI_PORT and PMI_ID.
    /// assert_eq!(boot.protocol(), viaduct_pmi::Protocol::Pmi1);
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_vars<I, K, V>(vars: I) -> Result<Self, BootstrapError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let vars: BTreeMap<String, String> = vars
            .into_iter()
            .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned()))
            .collect();
        let timeout = match vars.get(TIMEOUT_VAR) {
            None => DEFAULT_TIMEOUT,
            Some(raw) => raw
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| BootstrapError::BadEnv {
                    var: TIMEOUT_VAR,
                    value: raw.clone(),
                    reason: "expected a positive number of seconds".into(),
                })?,
        };
        let env_key = vars
            .get(JOB_KEY_VAR)
            .map(|raw| {
                JobKey::from_hex(raw).map_err(|reason| BootstrapError::BadEnv {
                    var: JOB_KEY_VAR,
                    value: shorten(raw),
                    reason,
                })
            })
            .transpose()?;
        let backend = match env::detect(&vars)? {
            PmiEnv::Singleton => Backend::Singleton {
                committed: HashMap::new(),
                pending: HashMap::new(),
            },
            PmiEnv::Pmi1Fd { fd, rank, size } => {
                Backend::Pmi1(Pmi1Client::from_fd(fd, rank, size, timeout)?)
            }
            PmiEnv::Pmi1Port {
                addr,
                id,
                rank,
                size,
            } => Backend::Pmi1(Pmi1Client::connect(&addr, id, rank, size, timeout)?),
            PmiEnv::Pmi2Fd {
                fd,
                rank,
                size,
                jobid,
            } => Backend::Pmi2(Pmi2Client::from_fd(
                fd,
                rank,
                size,
                jobid.as_deref(),
                timeout,
            )?),
        };
        Self::start(backend, env_key)
    }

    fn start(backend: Backend, env_key: Option<JobKey>) -> Result<Self, BootstrapError> {
        let (rank, size) = match &backend {
            Backend::Singleton { .. } => (0, 1),
            Backend::Pmi1(c) => (c.rank(), c.size()),
            Backend::Pmi2(c) => (c.rank(), c.size()),
        };
        let mut boot = Self {
            backend,
            rank,
            size,
            job_key: JobKey::from_bytes([0; jobkey::JOB_KEY_LEN]),
            node_ids: vec![0; size as usize],
            finalized: false,
        };
        if size == 1 {
            boot.job_key = match env_key {
                Some(key) => key,
                None => JobKey::generate().map_err(|e| BootstrapError::JobKey {
                    reason: format!("cannot read random bytes: {e}"),
                })?,
            };
            return Ok(boot);
        }

        // The mapping is pre-set by the launcher, readable before any fence.
        let mapping = match &mut boot.backend {
            Backend::Singleton { .. } => None,
            Backend::Pmi1(c) => c.get("PMI_process_mapping")?,
            Backend::Pmi2(c) => c.job_attr("PMI_process_mapping")?,
        };
        let node_ids =
            match &mapping {
                Some(value) => Some(mapping::node_ids(value, size).map_err(|reason| {
                    BootstrapError::Mapping {
                        value: value.clone(),
                        reason,
                    }
                })?),
                None => None,
            };
        let generated = match (&env_key, rank) {
            (None, 0) => Some(JobKey::generate().map_err(|e| BootstrapError::JobKey {
                reason: format!("cannot read random bytes: {e}"),
            })?),
            _ => None,
        };
        if let Some(key) = &generated {
            boot.put(JOB_KEY_KVS, &key.to_hex())?;
        }
        if node_ids.is_none() {
            boot.publish(HOST_KVS, &host_name()?)?;
        }
        // One fence, taken by every rank whatever it put, so the count always matches.
        boot.fence()?;

        boot.job_key = match (env_key, generated) {
            (Some(key), _) | (None, Some(key)) => key,
            (None, None) => {
                let hex = boot.get(JOB_KEY_KVS)?;
                JobKey::from_hex(&hex).map_err(|reason| BootstrapError::JobKey {
                    reason: format!("rank 0 published a bad key: {reason}"),
                })?
            }
        };
        boot.node_ids = match node_ids {
            Some(ids) => ids,
            None => {
                let mut hosts: Vec<String> = Vec::new();
                let mut ids = Vec::with_capacity(size as usize);
                for peer in 0..size {
                    let host = boot.lookup(HOST_KVS, peer)?;
                    let id = hosts.iter().position(|h| *h == host).unwrap_or_else(|| {
                        hosts.push(host);
                        hosts.len() - 1
                    });
                    ids.push(u32::try_from(id).unwrap_or(u32::MAX));
                }
                ids
            }
        };
        Ok(boot)
    }

    /// This process's rank, `0..size()`.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// assert_eq!(boot.rank(), 0);
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks in the job.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// assert_eq!(boot.size(), 1);
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The protocol spoken with the launcher.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// assert_eq!(boot.protocol(), viaduct_pmi::Protocol::Pmi1);
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn protocol(&self) -> Protocol {
        match self.backend {
            Backend::Singleton { .. } => Protocol::Singleton,
            Backend::Pmi1(_) => Protocol::Pmi1,
            Backend::Pmi2(_) => Protocol::Pmi2,
        }
    }

    /// The job's shared secret, the same on every rank: from `VIADUCT_JOB_KEY` when the launcher
    /// set it, else generated by rank 0 and passed through the KVS at start-up.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// // Rank 0 made it (no VIADUCT_JOB_KEY given); every rank sees the same.
    /// let key = boot.job_key().to_hex();
    /// assert_eq!(key.len(), 64);
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn job_key(&self) -> &JobKey {
        &self.job_key
    }

    /// The node (0-based, dense only within one mapping) that `rank` runs on.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// assert_eq!(boot.node_of(0), Some(0));
    /// assert_eq!(boot.node_of(1), None); // no such rank
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn node_of(&self, rank: u32) -> Option<u32> {
        self.node_ids.get(rank as usize).copied()
    }

    /// Whether `rank` runs on this process's node.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// assert!(boot.is_local(0));
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_local(&self, rank: u32) -> bool {
        self.node_of(rank) == self.node_of(self.rank)
    }

    /// The ranks on this process's node, this one included, in increasing order.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// assert_eq!(boot.local_ranks(), [0]);
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn local_ranks(&self) -> Vec<u32> {
        (0..self.size).filter(|r| self.is_local(*r)).collect()
    }

    /// Stores `value` under `key` in the job's KVS; other ranks see it after the next
    /// [`Bootstrap::fence`]. A key can be put once per job.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// boot.put("answer", "42")?;
    /// boot.fence()?; // now every rank can get it
    /// assert_eq!(boot.get("answer")?, "42");
    /// assert!(boot.put("bad key", "x").is_err()); // keys are [A-Za-z0-9_-]
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        match &mut self.backend {
            Backend::Singleton { committed, pending } => {
                check_key(key).map_err(|e| invalid("put", "key", key, e))?;
                wire::check_value(value).map_err(|e| invalid("put", "value", value, e))?;
                if committed.contains_key(key) || pending.contains_key(key) {
                    return Err(BootstrapError::Refused {
                        op: "put",
                        rc: -1,
                        msg: format!("duplicate key {key}"),
                    });
                }
                pending.insert(key.to_owned(), value.to_owned());
                Ok(())
            }
            Backend::Pmi1(c) => c.put(key, value),
            Backend::Pmi2(c) => c.put(key, value),
        }
    }

    /// Waits until every rank has fenced, making all earlier puts visible.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// boot.put("k", "v")?;
    /// boot.fence()?;
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn fence(&mut self) -> Result<(), BootstrapError> {
        match &mut self.backend {
            Backend::Singleton { committed, pending } => {
                committed.extend(pending.drain());
                Ok(())
            }
            Backend::Pmi1(c) => c.barrier(),
            Backend::Pmi2(c) => c.fence(),
        }
    }

    /// The value under `key`; [`BootstrapError::KeyNotFound`] when no rank put it before a fence.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// boot.put("k", "v")?;
    /// boot.fence()?;
    /// assert_eq!(boot.get("k")?, "v");
    /// assert!(boot.get("never-put").is_err());
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(&mut self, key: &str) -> Result<String, BootstrapError> {
        let found = match &mut self.backend {
            Backend::Singleton { committed, .. } => {
                check_key(key).map_err(|e| invalid("get", "key", key, e))?;
                committed.get(key).cloned()
            }
            Backend::Pmi1(c) => c.get(key)?,
            Backend::Pmi2(c) => c.get(key)?,
        };
        found.ok_or_else(|| BootstrapError::KeyNotFound {
            key: key.to_owned(),
        })
    }

    /// Puts `value` under this rank's copy of `name` (key `name-RANK`), e.g. a business card.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// boot.publish("card", "tcp:10.0.0.1:4000")?;
    /// boot.fence()?;
    /// assert_eq!(boot.lookup("card", 0)?, "tcp:10.0.0.1:4000");
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn publish(&mut self, name: &str, value: &str) -> Result<(), BootstrapError> {
        let key = format!("{name}-{}", self.rank);
        self.put(&key, value)
    }

    /// Gets `rank`'s copy of `name` (key `name-RANK`), published before a fence.
    ///
    /// ```
    /// # use viaduct_pmi::Bootstrap;
    /// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let server = Pmi1Server::start(ServerConfig::new(1))?;
    /// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// # let mut boot = Bootstrap::from_vars(vars)?;
    /// boot.publish("card", "shm:seg0")?;
    /// boot.fence()?;
    /// assert_eq!(boot.lookup("card", boot.rank())?, "shm:seg0");
    /// # boot.finalize()?;
    /// # server.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    pub fn lookup(&mut self, name: &str, rank: u32) -> Result<String, BootstrapError> {
        self.get(&format!("{name}-{rank}"))
    }

    /// Tells the launcher this rank is done with the KVS. Called on drop when not called.
    ///
    /// ```
    /// use viaduct_pmi::Bootstrap;
    ///
    /// let boot = Bootstrap::from_vars(std::iter::empty::<(String, String)>()).unwrap();
    /// boot.finalize().unwrap();
    /// ```
    pub fn finalize(mut self) -> Result<(), BootstrapError> {
        self.finalize_inner()
    }

    fn finalize_inner(&mut self) -> Result<(), BootstrapError> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        match &mut self.backend {
            Backend::Singleton { .. } => Ok(()),
            Backend::Pmi1(c) => c.finalize(),
            Backend::Pmi2(c) => c.finalize(),
        }
    }

    /// Asks the launcher to end the whole job, prints `message`, and exits with `exit_code`.
    /// (Its lines are the process's last words: written to stderr whatever `VIADUCT_LOG` says.)
    ///
    /// ```no_run
    /// use viaduct_pmi::Bootstrap;
    ///
    /// fn main() -> Result<(), viaduct_pmi::BootstrapError> {
    ///     let boot = Bootstrap::from_env()?;
    ///     if std::env::args().count() < 2 {
    ///         boot.abort(2, "usage: prog INPUT"); // ends every rank of the job
    ///     }
    ///     boot.finalize()
    /// }
    /// ```
    pub fn abort(mut self, exit_code: i32, message: &str) -> ! {
        eprintln!("viaduct: rank {} aborts the job: {message}", self.rank);
        self.finalized = true;
        let sent = match &mut self.backend {
            Backend::Singleton { .. } => Ok(()),
            Backend::Pmi1(c) => c.abort(exit_code, message),
            Backend::Pmi2(c) => c.abort(exit_code, message),
        };
        if let Err(e) = sent {
            eprintln!(
                "viaduct: rank {}: the abort did not reach the launcher: {e}",
                self.rank
            );
        }
        std::process::exit(exit_code)
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        if let Err(e) = self.finalize_inner() {
            tracing::warn!("viaduct: rank {}: PMI finalize failed: {e}", self.rank);
        }
    }
}

fn invalid(op: &'static str, what: &'static str, text: &str, e: wire::WireError) -> BootstrapError {
    BootstrapError::Invalid {
        op,
        what,
        text: shorten(text),
        reason: e.to_string(),
    }
}

/// This machine's host name, as the kernel reports it.
fn host_name() -> Result<String, BootstrapError> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_err(|source| BootstrapError::Io {
            op: "host name",
            source,
        })?
        .trim()
        .to_owned();
    if name.is_empty() || !name.bytes().all(wire::is_value_char) {
        return Err(BootstrapError::Invalid {
            op: "host name",
            what: "value",
            text: shorten(&name),
            reason: "cannot be published".into(),
        });
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn singleton_has_one_rank_and_a_working_kvs() {
        let mut boot = Bootstrap::from_vars([("HOME", "/")]).unwrap();
        assert_eq!((boot.rank(), boot.size()), (0, 1));
        assert_eq!(boot.protocol(), Protocol::Singleton);
        assert_eq!(boot.local_ranks(), vec![0]);
        boot.publish("card", "x").unwrap();
        assert!(matches!(
            boot.lookup("card", 0),
            Err(BootstrapError::KeyNotFound { .. })
        ));
        boot.fence().unwrap();
        assert_eq!(boot.lookup("card", 0).unwrap(), "x");
        assert!(boot.put("card-0", "y").is_err());
        assert!(boot.put("bad key", "y").is_err());
        assert!(boot.put("k", "bad value").is_err());
        boot.finalize().unwrap();
    }

    #[test]
    fn singleton_takes_the_job_key_from_the_environment() {
        let key = JobKey::generate().unwrap();
        let boot = Bootstrap::from_vars([(JOB_KEY_VAR, key.to_hex())]).unwrap();
        assert_eq!(boot.job_key(), &key);
        let err = Bootstrap::from_vars([(JOB_KEY_VAR, "short")]).unwrap_err();
        assert!(err.to_string().contains(JOB_KEY_VAR), "{err}");
    }

    #[test]
    fn bad_timeouts_are_refused() {
        for bad in ["0", "-1", "soon", "inf"] {
            let err = Bootstrap::from_vars([(TIMEOUT_VAR, bad)]).unwrap_err();
            assert!(err.to_string().contains(TIMEOUT_VAR), "{err}");
        }
    }

    #[test]
    fn half_present_environment_is_an_error_not_a_singleton() {
        let err = Bootstrap::from_vars([("PMI_RANK", "0"), ("PMI_SIZE", "2")]).unwrap_err();
        assert!(matches!(err, BootstrapError::MissingEnv { .. }), "{err}");
    }
}
