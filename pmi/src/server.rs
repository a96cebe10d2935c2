//! A PMI-1 server for one machine: what `viaduct launch` serves its ranks.
//!
//! It listens on `127.0.0.1` (ranks get `PMI_PORT=127.0.0.1:PORT` and `PMI_ID=RANK`, the mode
//! hydra uses with a port) and speaks the same PMI-1 lines as hydra: `initack`, `init`,
//! `get_maxes`, `get_my_kvsname`, `get_universe_size`, `get_appnum`, `put`, `barrier_in`, `get`,
//! `finalize`, `abort`. Puts become visible to `get` when the barrier that follows them completes,
//! as with hydra. `PMI_process_mapping` is pre-set to "all ranks on one node".
//!
//! # Who may connect
//!
//! Any local process can reach a TCP port on `127.0.0.1`. The server therefore takes each
//! `PMI_ID` exactly once, and the first line of a connection must be a valid `initack` within
//! [`ServerConfig::hello_timeout`] of its arrival (a deadline for the whole line, however slowly
//! its bytes come); anything else is refused and reported as [`ServerEvent::Refused`]. A local stranger that races a rank to its id makes that rank's
//! connection fail (the job then ends with an error); it cannot take part unnoticed. The job key
//! is handed to ranks in their environment and never passes through this server.
//!
//! # Boundedness
//!
//! What others can make the server hold is bounded: at most [`ServerConfig::max_pending`]
//! connections (and their threads) may wait to identify themselves at once, each for at most the
//! hello deadline; more are closed at once and counted in [`ServerEvent::Overloaded`]. Identified
//! connections are at most one per rank. Each rank may put at most [`ServerConfig::max_keys`]
//! keys holding [`ServerConfig::max_bytes`] bytes (keys and values) in all; a put past either is
//! answered `rc=-1` (`too_many_keys`, `too_many_bytes`) and reported once per rank as
//! [`ServerEvent::LimitReached`]. [`ServerConfig::from_env`] reads the bounds from
//! `VIADUCT_PMI_MAX_PENDING`, `VIADUCT_PMI_MAX_KEYS` and `VIADUCT_PMI_MAX_BYTES`.
//!
//! The server never waits on a rank forever: the launcher reports exits with
//! [`Pmi1Server::rank_exited`], and when a barrier can no longer complete (a rank that has exited,
//! closed its connection or finalized is not in it) the server raises
//! [`ServerEvent::BarrierBroken`] for the launcher to end the job. Nothing polls while ranks run:
//! a connection thread sleeps in `read` (with a timeout only until its `initack`), a barrier
//! waits on a condition variable, and the acceptor sleeps in `accept`. Shutting down wakes them
//! all: every connection is shut down (its reader sees the end of the stream), the condition
//! variable is notified with the stop flag set under its lock, and a connection of the server's
//! own wakes the acceptor, so [`Pmi1Server::shutdown`] returns promptly.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::wire::Message;
use super::wire1::{self, LineRead};

/// Limits the server announces in `maxes`.
const KVSNAME_MAX: usize = 256;
const KEYLEN_MAX: usize = 64;
const VALLEN_MAX: usize = 1024;

/// Pause of the acceptor after a failed `accept` (out of file descriptors, say).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Environment variable bounding the connections that may wait to identify themselves at once.
pub const MAX_PENDING_VAR: &str = "VIADUCT_PMI_MAX_PENDING";
/// Environment variable bounding the keys each rank may put.
pub const MAX_KEYS_VAR: &str = "VIADUCT_PMI_MAX_KEYS";
/// Environment variable bounding the bytes (keys and values) each rank may put.
pub const MAX_BYTES_VAR: &str = "VIADUCT_PMI_MAX_BYTES";

/// Default of [`ServerConfig::max_pending`] beyond the job's size.
pub const DEFAULT_EXTRA_PENDING: usize = 64;
/// Default of [`ServerConfig::max_keys`].
pub const DEFAULT_MAX_KEYS: usize = 1024;
/// Default of [`ServerConfig::max_bytes`] (1 MiB).
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

/// Settings of a [`Pmi1Server`].
///
/// ```
/// use std::time::Duration;
/// use viaduct_pmi::server::ServerConfig;
///
/// let config = ServerConfig { hello_timeout: Duration::from_secs(2), ..ServerConfig::new(4) };
/// assert_eq!(config.size, 4);
/// ```
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Number of ranks in the job.
    pub size: u32,
    /// Time a new connection has to send its whole `initack` line, from its arrival.
    pub hello_timeout: Duration,
    /// Most connections (each with its thread) that may wait to identify themselves at once;
    /// more are closed at once. Default: the job's size plus [`DEFAULT_EXTRA_PENDING`], so
    /// every rank can connect at the same moment.
    pub max_pending: usize,
    /// Most keys one rank may put. Default [`DEFAULT_MAX_KEYS`].
    pub max_keys: usize,
    /// Most bytes (keys plus values) one rank may put. Default [`DEFAULT_MAX_BYTES`].
    pub max_bytes: usize,
}

impl ServerConfig {
    /// Defaults for a job of `size` ranks.
    ///
    /// ```
    /// use viaduct_pmi::server::ServerConfig;
    ///
    /// assert!(ServerConfig::new(8).max_pending >= 8); // every rank may connect at once
    /// ```
    pub fn new(size: u32) -> Self {
        Self {
            size,
            hello_timeout: Duration::from_secs(10),
            max_pending: size as usize + DEFAULT_EXTRA_PENDING,
            max_keys: DEFAULT_MAX_KEYS,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// Defaults for a job of `size` ranks, with the bounds [`MAX_PENDING_VAR`],
    /// [`MAX_KEYS_VAR`] and [`MAX_BYTES_VAR`] set in this process's environment; a value that
    /// is not a positive integer is an error naming the variable.
    ///
    /// ```
    /// use viaduct_pmi::server::ServerConfig;
    ///
    /// let config = ServerConfig::from_env(2).unwrap(); // VIADUCT_PMI_MAX_* if set
    /// assert_eq!(config.size, 2);
    /// ```
    pub fn from_env(size: u32) -> Result<Self, String> {
        Self::from_vars(size, |var| std::env::var(var).ok())
    }

    /// Like [`ServerConfig::from_env`], with the variables looked up by `lookup`.
    ///
    /// ```
    /// use viaduct_pmi::server::{MAX_KEYS_VAR, ServerConfig};
    ///
    /// let config = ServerConfig::from_vars(2, |v| (v == MAX_KEYS_VAR).then(|| "10".to_owned())).unwrap();
    /// assert_eq!(config.max_keys, 10);
    /// assert!(ServerConfig::from_vars(2, |_| Some("0".to_owned())).is_err());
    /// ```
    pub fn from_vars(size: u32, lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut config = Self::new(size);
        for (var, field) in [
            (MAX_PENDING_VAR, &mut config.max_pending),
            (MAX_KEYS_VAR, &mut config.max_keys),
            (MAX_BYTES_VAR, &mut config.max_bytes),
        ] {
            if let Some(raw) = lookup(var) {
                *field = raw
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{var}={raw:?}: expected a positive integer"))?;
            }
        }
        Ok(config)
    }
}

/// Something the launcher must act on.
///
/// ```
/// # use viaduct_pmi::Bootstrap;
/// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = Pmi1Server::start(ServerConfig::new(1))?;
/// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
/// # let mut boot = Bootstrap::from_vars(vars)?;
/// boot.fence()?;
/// for event in server.take_events() {
///     println!("launcher: {event:?}"); // an abort, a broken barrier, a refusal ...
/// }
/// # boot.finalize()?;
/// # server.shutdown();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A rank asked to end the job.
    Abort {
        /// The rank.
        rank: u32,
        /// The exit code it asked for.
        exit_code: i32,
        /// Its message, if any.
        message: Option<String>,
    },
    /// Some ranks wait in a barrier that can no longer complete.
    BarrierBroken {
        /// Ranks waiting in the barrier.
        waiting: Vec<u32>,
        /// Ranks that have left the job (exited, closed their connection or finalized) outside
        /// the barrier.
        gone: Vec<u32>,
    },
    /// A rank broke the protocol; its connection was closed.
    ProtocolError {
        /// The rank.
        rank: u32,
        /// What it sent.
        detail: String,
    },
    /// A connection was refused before it identified itself as a rank.
    Refused {
        /// The peer's address.
        peer: String,
        /// Why.
        reason: String,
    },
    /// Connections were closed on arrival because [`ServerConfig::max_pending`] others were
    /// already waiting to identify themselves (reported once per look at the events).
    Overloaded {
        /// Connections closed since the last report.
        refused: u64,
        /// The bound.
        limit: usize,
    },
    /// A rank reached a bound on what it may put; it got an error answer (reported once per
    /// rank).
    LimitReached {
        /// The rank.
        rank: u32,
        /// Which bound, and its setting.
        detail: String,
    },
}

#[derive(Debug, Default)]
struct State {
    committed: HashMap<String, String>,
    pending: HashMap<String, String>,
    epoch: u64,
    waiting: BTreeSet<u32>,
    claimed: Vec<bool>,
    gone: Vec<bool>,
    /// Ranks that failed in a job that goes on ([`Pmi1Server::rank_failed`]): barriers
    /// complete without them.
    failed: Vec<bool>,
    events: Vec<ServerEvent>,
    broken_reported_epoch: Option<u64>,
    /// A handle on every open connection, by number, for shutdown to wake its reader.
    conns: HashMap<u64, TcpStream>,
    next_conn: u64,
    /// Keys and bytes each rank has put.
    put_keys: Vec<usize>,
    put_bytes: Vec<usize>,
    /// Ranks already reported as past a put bound.
    limit_reported: Vec<bool>,
    /// Connections closed on arrival since the last [`Pmi1Server::take_events`].
    overloaded: u64,
}

#[derive(Debug)]
struct Shared {
    size: u32,
    kvsname: String,
    hello_timeout: Duration,
    max_pending: usize,
    max_keys: usize,
    max_bytes: usize,
    /// Connections accepted that have not identified themselves yet (or ended).
    pending: AtomicUsize,
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking connection thread must not take the whole job's bootstrap down with it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Raises BarrierBroken once per barrier when a rank outside it has left.
    fn check_barrier(&self, st: &mut State) {
        if st.waiting.is_empty() || st.broken_reported_epoch == Some(st.epoch) {
            return;
        }
        let gone: Vec<u32> = (0..self.size)
            .filter(|r| st.gone[*r as usize] && !st.failed[*r as usize] && !st.waiting.contains(r))
            .collect();
        if !gone.is_empty() {
            st.broken_reported_epoch = Some(st.epoch);
            let waiting = st.waiting.iter().copied().collect();
            st.events.push(ServerEvent::BarrierBroken { waiting, gone });
        }
    }

    /// Registers an open connection for shutdown to wake; `None` once the server stops.
    fn register(&self, conn: TcpStream) -> Option<u64> {
        let mut st = self.lock();
        if self.stop.load(Ordering::SeqCst) {
            let _ = conn.shutdown(Shutdown::Both);
            return None;
        }
        let id = st.next_conn;
        st.next_conn += 1;
        st.conns.insert(id, conn);
        Some(id)
    }

    /// Completes the barrier when every rank that did not fail waits in it; true if it did.
    fn complete_barrier(&self, st: &mut State) -> bool {
        let all = (0..self.size).all(|r| st.waiting.contains(&r) || st.failed[r as usize]);
        if st.waiting.is_empty() || !all {
            return false;
        }
        let pending = std::mem::take(&mut st.pending);
        st.committed.extend(pending);
        st.waiting.clear();
        st.epoch += 1;
        self.changed.notify_all();
        true
    }

    fn mark_failed(&self, rank: u32) {
        let mut st = self.lock();
        if (rank as usize) < st.gone.len() {
            st.gone[rank as usize] = true;
            st.failed[rank as usize] = true;
        }
        st.waiting.remove(&rank);
        if !self.complete_barrier(&mut st) {
            self.check_barrier(&mut st);
        }
    }

    fn mark_gone(&self, rank: u32) {
        let mut st = self.lock();
        if let Some(g) = st.gone.get_mut(rank as usize) {
            *g = true;
        }
        self.check_barrier(&mut st);
    }
}

/// A running PMI-1 server.
///
/// ```
/// # use viaduct_pmi::Bootstrap;
/// # use viaduct_pmi::server::{Pmi1Server, ServerConfig};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = Pmi1Server::start(ServerConfig::new(1))?;
/// # let vars = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
/// # let mut boot = Bootstrap::from_vars(vars)?;
/// // `server` serves the job; `boot` is its rank 0.
/// assert_eq!(boot.size(), 1);
/// # boot.finalize()?;
/// # server.shutdown();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Pmi1Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl Pmi1Server {
    /// Binds `127.0.0.1` on a free port and starts serving a job of `config.size` ranks.
    ///
    /// ```
    /// use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    ///
    /// let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    /// println!("ranks connect to {}", server.addr());
    /// server.shutdown();
    /// ```
    pub fn start(config: ServerConfig) -> io::Result<Self> {
        if config.size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a job has at least one rank",
            ));
        }
        // Blocking: the acceptor sleeps in `accept` until a rank connects, and `stop` wakes
        // it with a connection of its own.
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let size = config.size;
        let mut state = State {
            claimed: vec![false; size as usize],
            gone: vec![false; size as usize],
            failed: vec![false; size as usize],
            put_keys: vec![0; size as usize],
            put_bytes: vec![0; size as usize],
            limit_reported: vec![false; size as usize],
            ..State::default()
        };
        state.committed.insert(
            "PMI_process_mapping".into(),
            format!("(vector,(0,1,{size}))"),
        );
        let shared = Arc::new(Shared {
            size,
            kvsname: format!("viaduct_{}_{}", std::process::id(), addr.port()),
            hello_timeout: config.hello_timeout,
            max_pending: config.max_pending.max(1),
            max_keys: config.max_keys,
            max_bytes: config.max_bytes,
            pending: AtomicUsize::new(0),
            state: Mutex::new(state),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("pmi-accept".into())
                .spawn(move || accept_loop(&listener, &shared))?
        };
        Ok(Self {
            addr,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// The address ranks connect to.
    ///
    /// ```
    /// use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    ///
    /// let server = Pmi1Server::start(ServerConfig::new(1)).unwrap();
    /// assert!(server.addr().ip().is_loopback());
    /// server.shutdown();
    /// ```
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The value for ranks' `PMI_PORT`.
    ///
    /// ```
    /// use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    ///
    /// let server = Pmi1Server::start(ServerConfig::new(1)).unwrap();
    /// let env = [("PMI_PORT", server.port_env()), ("PMI_ID", "0".to_owned())];
    /// server.shutdown();
    /// ```
    pub fn port_env(&self) -> String {
        self.addr.to_string()
    }

    /// The key-value space name handed to ranks.
    ///
    /// ```
    /// use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    ///
    /// let server = Pmi1Server::start(ServerConfig::new(1)).unwrap();
    /// assert!(!server.kvsname().is_empty());
    /// server.shutdown();
    /// ```
    pub fn kvsname(&self) -> &str {
        &self.shared.kvsname
    }

    /// Tells the server that `rank`'s process has exited, so barriers stop waiting for it.
    ///
    /// ```
    /// use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    ///
    /// let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    /// // Rank 1's process ended before the job did: barriers stop waiting for it.
    /// server.rank_exited(1);
    /// server.shutdown();
    /// ```
    pub fn rank_exited(&self, rank: u32) {
        self.shared.mark_gone(rank);
        self.shared.changed.notify_all();
    }

    /// Tells the server that `rank`'s process failed (exited non-zero or was killed) in a job
    /// that goes on without it: barriers complete without it, now and later, and its absence
    /// from a barrier is no longer reported as [`ServerEvent::BarrierBroken`].
    ///
    /// ```
    /// use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    ///
    /// let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    /// // Rank 1 died; rank 0's barriers (its finalize, say) complete without it.
    /// server.rank_failed(1);
    /// server.shutdown();
    /// ```
    pub fn rank_failed(&self, rank: u32) {
        self.shared.mark_failed(rank);
        self.shared.changed.notify_all();
    }

    /// Takes the events raised since the last call.
    ///
    /// ```
    /// use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    ///
    /// let server = Pmi1Server::start(ServerConfig::new(1)).unwrap();
    /// assert!(server.take_events().is_empty());
    /// server.shutdown();
    /// ```
    pub fn take_events(&self) -> Vec<ServerEvent> {
        let mut st = self.shared.lock();
        let mut events = std::mem::take(&mut st.events);
        let refused = std::mem::take(&mut st.overloaded);
        if refused > 0 {
            events.push(ServerEvent::Overloaded {
                refused,
                limit: self.shared.max_pending,
            });
        }
        events
    }

    /// Stops accepting, ends every connection thread and waits for the acceptor.
    ///
    /// ```
    /// use viaduct_pmi::server::{Pmi1Server, ServerConfig};
    ///
    /// let server = Pmi1Server::start(ServerConfig::new(1)).unwrap();
    /// server.shutdown(); // no thread of it is left
    /// ```
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        {
            // Under the lock: a barrier that looked at the flag is asleep on `changed` by now
            // and gets the notification; a connection registered later sees the flag.
            let st = self.shared.lock();
            self.shared.stop.store(true, Ordering::SeqCst);
            for conn in st.conns.values() {
                let _ = conn.shutdown(Shutdown::Both);
            }
        }
        self.shared.changed.notify_all();
        if let Some(acceptor) = self.acceptor.take() {
            // The acceptor sleeps in `accept`: a connection of our own wakes it, and it sees
            // the flag. Should that connection fail (it goes to our own loopback port), the
            // acceptor is left blocked rather than waited for, so stopping never hangs; it
            // holds nothing but the listener. A panic in it is already reported.
            if TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)).is_ok() {
                let _ = acceptor.join();
            }
        }
    }
}

impl Drop for Pmi1Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    let mut workers: Vec<JoinHandle<()>> = Vec::new();
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok(_) if shared.stop.load(Ordering::SeqCst) => break, // the wake-up from `stop`
            Ok((stream, peer)) => {
                workers.retain(|w| !w.is_finished());
                // Only the acceptor adds to `pending`, so the look and the add cannot race.
                if shared.pending.load(Ordering::SeqCst) >= shared.max_pending {
                    // Closed without a thread; counted, and reported in one event per look.
                    drop(stream);
                    shared.lock().overloaded += 1;
                    continue;
                }
                shared.pending.fetch_add(1, Ordering::SeqCst);
                let conn_shared = Arc::clone(shared);
                let spawned = thread::Builder::new()
                    .name("pmi-conn".into())
                    .spawn(move || serve_connection(stream, peer, &conn_shared));
                match spawned {
                    Ok(handle) => workers.push(handle),
                    // The stream went with the failed closure and is closed: the rank sees its
                    // connection end, and the launcher sees why.
                    Err(e) => {
                        shared.pending.fetch_sub(1, Ordering::SeqCst);
                        refuse(shared, peer, &format!("cannot start a thread: {e}"));
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => thread::sleep(ACCEPT_BACKOFF),
        }
    }
    for worker in workers {
        // `stop` shut their connections down; a panic in one is already on stderr.
        let _ = worker.join();
    }
}

/// A connection's place among those waiting to identify themselves; given back when dropped.
struct PendingSlot<'a>(&'a AtomicUsize);

impl Drop for PendingSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A socket whose reads end with `TimedOut` at an absolute deadline (while one is set), however
/// the bytes trickle in: each read waits at most the time left.
struct DeadlineReader {
    stream: TcpStream,
    deadline: Option<Instant>,
}

impl DeadlineReader {
    /// Drops the deadline: reads block until data, the end of the stream or a shutdown.
    fn clear_deadline(&mut self) -> io::Result<()> {
        self.deadline = None;
        self.stream.set_read_timeout(None)
    }
}

impl Read for DeadlineReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(deadline) = self.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the deadline has passed",
                ));
            }
            self.stream.set_read_timeout(Some(left))?;
        }
        self.stream.read(buf)
    }
}

/// Per-connection state.
struct Session<'a> {
    shared: &'a Shared,
    writer: TcpStream,
    rank: Option<u32>,
}

fn serve_connection(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    // Until its `initack` a connection has until `hello_deadline` to send the whole line; after
    // it, reads block until the rank sends or the server shuts the connection down.
    let mut pending = Some(PendingSlot(&shared.pending));
    let hello_deadline = Instant::now() + shared.hello_timeout.max(Duration::from_millis(1));
    let setup = stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .and_then(|()| stream.set_nodelay(true))
        .and_then(|()| Ok((stream.try_clone()?, stream.try_clone()?)));
    let (writer, closer) = match setup {
        Ok(w) => w,
        Err(e) => {
            refuse(shared, peer, &format!("socket setup failed: {e}"));
            return;
        }
    };
    let Some(conn) = shared.register(closer) else {
        return; // the server is stopping
    };
    let mut session = Session {
        shared,
        writer,
        rank: None,
    };
    let mut reader = BufReader::new(DeadlineReader {
        stream,
        deadline: Some(hello_deadline),
    });
    let mut partial = Vec::new();
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let line = match wire1::read_line(&mut reader, &mut partial) {
            Ok(LineRead::Line(line)) => line,
            Ok(LineRead::Eof) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if session.rank.is_none() && Instant::now() >= hello_deadline {
                    refuse(
                        shared,
                        peer,
                        &format!(
                            "no complete initack line within {:.1} s of connecting",
                            shared.hello_timeout.as_secs_f64()
                        ),
                    );
                    break;
                }
                continue;
            }
            Err(e) => {
                session.fail(peer, &format!("read error: {e}"));
                break;
            }
        };
        let msg = match wire1::parse_line(&line) {
            Ok(msg) => msg,
            Err(e) => {
                session.fail(peer, &e.to_string());
                break;
            }
        };
        let anonymous = session.rank.is_none();
        match session.handle(&msg, peer) {
            Ok(Flow::Continue) if anonymous && session.rank.is_some() => {
                // Identified: from now on the connection may stay quiet for the whole job, and
                // it no longer counts among those waiting to identify themselves.
                pending = None;
                if let Err(e) = reader.get_mut().clear_deadline() {
                    session.fail(peer, &format!("socket setup failed: {e}"));
                    break;
                }
            }
            Ok(Flow::Continue) => {}
            Ok(Flow::Close) => break,
            Err(e) => {
                session.fail(peer, &format!("cannot answer: {e}"));
                break;
            }
        }
    }
    if let Some(rank) = session.rank {
        shared.mark_gone(rank);
        shared.changed.notify_all();
    }
    shared.lock().conns.remove(&conn);
    let _ = session.writer.shutdown(Shutdown::Both);
    drop(pending);
}

fn refuse(shared: &Shared, peer: SocketAddr, reason: &str) {
    shared.lock().events.push(ServerEvent::Refused {
        peer: peer.to_string(),
        reason: reason.to_owned(),
    });
}

enum Flow {
    Continue,
    /// The rank finalized, aborted or misbehaved: stop serving it.
    Close,
}

impl Session<'_> {
    fn send(&mut self, msg: &Message) -> io::Result<()> {
        let line =
            wire1::encode_line(msg).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        self.writer.write_all(&line)
    }

    fn fail(&self, peer: SocketAddr, detail: &str) {
        match self.rank {
            Some(rank) => self.shared.lock().events.push(ServerEvent::ProtocolError {
                rank,
                detail: detail.to_owned(),
            }),
            None => refuse(self.shared, peer, detail),
        }
    }

    fn handle(&mut self, msg: &Message, peer: SocketAddr) -> io::Result<Flow> {
        let Some(rank) = self.rank else {
            return self.handle_initack(msg, peer);
        };
        let shared = self.shared;
        match msg.cmd.as_str() {
            "init" => {
                let version = msg.get("pmi_version").unwrap_or("1");
                let (rc, sub) = if version == "1" { (0, "1") } else { (-1, "1") };
                self.send(
                    &Message::new("response_to_init")
                        .with("pmi_version", 1)
                        .with("pmi_subversion", sub)
                        .with("rc", rc),
                )?;
            }
            "get_maxes" => self.send(
                &Message::new("maxes")
                    .with("kvsname_max", KVSNAME_MAX)
                    .with("keylen_max", KEYLEN_MAX)
                    .with("vallen_max", VALLEN_MAX),
            )?,
            "get_my_kvsname" => {
                self.send(&Message::new("my_kvsname").with("kvsname", &shared.kvsname))?;
            }
            "get_universe_size" => {
                self.send(&Message::new("universe_size").with("size", shared.size))?;
            }
            "get_appnum" => self.send(&Message::new("appnum").with("appnum", 0))?,
            "put" => {
                let answer = self.put(msg);
                self.send(&answer)?;
            }
            "get" => {
                let answer = self.get(msg);
                self.send(&answer)?;
            }
            "barrier_in" => {
                if !self.barrier(rank) {
                    return Ok(Flow::Close);
                }
                self.send(&Message::new("barrier_out"))?;
            }
            "finalize" => {
                self.send(&Message::new("finalize_ack"))?;
                return Ok(Flow::Close);
            }
            "abort" => {
                let exit_code = msg
                    .get_int("exitcode")
                    .and_then(Result::ok)
                    .and_then(|c| i32::try_from(c).ok())
                    .unwrap_or(1);
                let message = msg
                    .get("message")
                    .or_else(|| msg.get("msg"))
                    .map(str::to_owned);
                shared.lock().events.push(ServerEvent::Abort {
                    rank,
                    exit_code,
                    message,
                });
                return Ok(Flow::Close);
            }
            other => {
                let answer = Message::new(&format!("{other}_result"))
                    .with("rc", -1)
                    .with("msg", "unsupported_command");
                self.send(&answer)?;
            }
        }
        Ok(Flow::Continue)
    }

    fn handle_initack(&mut self, msg: &Message, peer: SocketAddr) -> io::Result<Flow> {
        let shared = self.shared;
        if msg.cmd != "initack" {
            refuse(
                shared,
                peer,
                &format!("first command is cmd={}, not initack", msg.cmd),
            );
            return Ok(Flow::Close);
        }
        let id = msg
            .get_int("pmiid")
            .and_then(Result::ok)
            .and_then(|id| u32::try_from(id).ok())
            .filter(|id| *id < shared.size);
        let Some(id) = id else {
            refuse(shared, peer, "initack without a valid pmiid");
            return Ok(Flow::Close);
        };
        {
            let mut st = shared.lock();
            if st.claimed[id as usize] {
                drop(st);
                refuse(
                    shared,
                    peer,
                    &format!(
                        "pmiid {id} is already connected: another process took rank {id}'s id \
                         (a stranger, or the rank connecting twice)"
                    ),
                );
                return Ok(Flow::Close);
            }
            st.claimed[id as usize] = true;
        }
        self.rank = Some(id);
        self.send(&Message::new("initack"))?;
        self.send(&Message::new("set").with("size", shared.size))?;
        self.send(&Message::new("set").with("rank", id))?;
        self.send(&Message::new("set").with("debug", 0))?;
        Ok(Flow::Continue)
    }

    fn check_kvsname(&self, msg: &Message) -> Option<Message> {
        match msg.get("kvsname") {
            Some(name) if name != self.shared.kvsname => Some(
                Message::new(&format!("{}_result", msg.cmd))
                    .with("rc", -1)
                    .with("msg", "unknown_kvsname"),
            ),
            _ => None,
        }
    }

    fn put(&self, msg: &Message) -> Message {
        if let Some(err) = self.check_kvsname(msg) {
            return err;
        }
        let refuse = |why: &str| Message::new("put_result").with("rc", -1).with("msg", why);
        let (Some(key), Some(value)) = (msg.get("key"), msg.get("value")) else {
            return refuse("put_needs_key_and_value");
        };
        if key.is_empty() || key.len() > KEYLEN_MAX {
            return refuse("bad_key_length");
        }
        if value.len() > VALLEN_MAX {
            return refuse("value_too_long");
        }
        // A PMI-1 line cannot carry an empty value: `get` could never answer with it.
        if value.is_empty() {
            return refuse("empty_value");
        }
        let Some(rank) = self.rank else {
            return refuse("not_identified");
        };
        let shared = self.shared;
        let r = rank as usize;
        let mut st = shared.lock();
        if st.committed.contains_key(key) || st.pending.contains_key(key) {
            return refuse("duplicate_key");
        }
        let bytes = key.len() + value.len();
        let over = if st.put_keys[r] >= shared.max_keys {
            Some((
                "too_many_keys",
                format!(
                    "put refused: more than {} keys ({MAX_KEYS_VAR})",
                    shared.max_keys
                ),
            ))
        } else if st.put_bytes[r] + bytes > shared.max_bytes {
            Some((
                "too_many_bytes",
                format!(
                    "put refused: more than {} bytes of keys and values ({MAX_BYTES_VAR})",
                    shared.max_bytes
                ),
            ))
        } else {
            None
        };
        if let Some((why, detail)) = over {
            if !std::mem::replace(&mut st.limit_reported[r], true) {
                st.events.push(ServerEvent::LimitReached { rank, detail });
            }
            return refuse(why);
        }
        st.put_keys[r] += 1;
        st.put_bytes[r] += bytes;
        st.pending.insert(key.to_owned(), value.to_owned());
        Message::new("put_result")
            .with("rc", 0)
            .with("msg", "success")
    }

    fn get(&self, msg: &Message) -> Message {
        if let Some(err) = self.check_kvsname(msg) {
            return err;
        }
        let Some(key) = msg.get("key") else {
            return Message::new("get_result")
                .with("rc", -1)
                .with("msg", "get_needs_a_key");
        };
        match self.shared.lock().committed.get(key) {
            Some(value) => Message::new("get_result")
                .with("rc", 0)
                .with("msg", "success")
                .with("value", value),
            None => Message::new("get_result")
                .with("rc", -1)
                .with("msg", "key_not_found"),
        }
    }

    /// Enters the barrier and waits for it to complete; false when the server stops first.
    fn barrier(&self, rank: u32) -> bool {
        let shared = self.shared;
        let mut st = shared.lock();
        let my_epoch = st.epoch;
        st.waiting.insert(rank);
        if shared.complete_barrier(&mut st) {
            return true;
        }
        shared.check_barrier(&mut st);
        // The flag is looked at under the lock that `stop` sets it under, so the notification
        // that follows cannot come between the look and the wait.
        while st.epoch == my_epoch {
            if shared.stop.load(Ordering::SeqCst) {
                return false;
            }
            st = shared.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        true
    }
}
