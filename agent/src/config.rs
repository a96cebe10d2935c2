//! Settings of the agent: which methods it may use, in which order, and its protocol and
//! progress limits.
//!
//! [`Config::from_env`] reads the defaults from the environment, like UCX's `UCX_TLS`:
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `VIADUCT_TRANSPORT` | comma-separated methods in order of preference (`shm`, `tcp`, `verbs`; `self` is always used for the own rank) | `shm,tcp` |
//! | `VIADUCT_EAGER_LIMIT` | messages up to this many bytes go eagerly, longer ones by rendezvous (the default: a 32 KiB and a 64 KiB ping-pong over shared memory took 3.9 and 6.7 us eagerly, 5.4 and 9.4 us by rendezvous with its handshake, `docs/perf/shm-sweep.md`) | 65472 |
//! | `VIADUCT_PEER_TIMEOUT` | seconds after which a peer whose process shows no sign of life (stopped, dead, unreachable; never one that only computes) fails every request waiting on it; heartbeats go every quarter of it | 5 |
//! | `VIADUCT_CONNECT_TIMEOUT` | seconds allowed for connection set-up at start | 30 |
//! | `VIADUCT_XFER_CHUNK` | bytes of each piece of an xfer block's message (4096 to 4 MiB) | 16360 |
//! | `VIADUCT_TCP_IFACE` | the network interface (e.g. `eth0`, `ib0`) whose IPv4 address the TCP listener and the liveness socket bind and publish; an unknown interface or one without an IPv4 address is an error naming it | the interface of the route to other nodes (the default route; with none, the only non-loopback interface with an IPv4 address); loopback when every TCP peer is on this node |
//! | `VIADUCT_MAX_UNEXPECTED_BYTES` | once unexpected eager messages and pieces of collectives this rank has not started hold this many bytes, the agent stops reading from remote VCs until receives take some (back-pressure on the senders; 64 KiB to 1 TiB) | 268435456 (256 MiB) |
//! | `VIADUCT_RDMA_DEVICE` | the RDMA device the verbs method uses (e.g. `mlx5_0`, `rxe0`) | the first device with an active port |
//! | `VIADUCT_VERBS_WRITE_MIN` | verbs: a rendezvous message from this many bytes is written by the sender (RDMA WRITE into the buffer the receiver names) instead of read by the receiver (RDMA READ); 0 reads every one. Chosen by the receiver, so it need not agree across ranks (see `crate::engine::read_rndv`, measurement in `docs/perf/cluster.md`: between two soft-RoCE devices reads stream at a third of the writes' rate from 1 MiB, as fast at 256 KiB, and save a round trip) | 524288 |
//! | `VIADUCT_SPIN_MIN`, `VIADUCT_SPIN_MAX` | fewest and most progress polls a blocking call spins before it sleeps | 16, 4096 |
//! | `VIADUCT_PROGRESS` | how a blocking call waits for work: `spin` (poll adaptively between the spin counts, then sleep in the methods' waits), `yield` (at most `VIADUCT_YIELD_POLLS` polls, giving the CPU away with `sched_yield` between them, then sleep), `block` (sleep in the methods' waits at once), `auto` (`yield` when this node's ranks outnumber the CPUs they may run on, else `spin`; see [`crate::progress`], "Oversubscription") | `auto` |
//! | `VIADUCT_YIELD_POLLS` | progress mode `yield`: most polls, with `sched_yield` between them, before a blocking call sleeps in the methods' waits (0 sleeps at once, as `block`). Measured with 4 ranks on this 2-CPU machine: 64 against the earlier 4 takes the OSU-procedure 8 B bcast from 3.49 to 2.68 us, allreduce from 13.5 to 7.7, reduce from 7.4 to 5.4, allgather from 10.0 to 7.4 (`-bind-to core`, medians of 5 rounds; see `docs/perf/collectives-osu.md`); `viaduct launch --bind-to core` back-to-back 8 B allreduces from 7.1 to 5.7 us; unbound ranks (`mpiexec` without binding) bcast 18.1 to 8.7, allreduce 27.2 to 14.7, reduce 12.4 to 8.4, but allgather 10.1 to 12.8 and `viaduct bench collective --ranks 4` (unbound, back-to-back) 8.1 to 11.2 | 64 |
//! | `VIADUCT_SHM_RING_COPY_MAX` | shared memory: long messages up to this many bytes are copied through the ring in pipelined chunks (sender and receiver copying at once), longer ones are read by the receiver straight out of the sender's memory into the receive's (`RTS_READ`, one `process_vm_readv`, no step by the sender; the agent's `engine::read_rndv` module) where one process may read another's (elsewhere ring pieces at every length); 0 turns the ring copy off (measurements: `docs/perf/shm-sweep.md`, and for the default `docs/perf/agent.md`, "Past the ring-copy limit") | 65536 |
//! | `VIADUCT_SHM_RING_COPY_CHUNK` | shared memory: chunk size of that ring copy (4 KiB to 256 KiB) | 16384 |
//! | `VIADUCT_MALLOC_KEEP` | glibc's allocator serves blocks up to this many bytes from the heap and keeps freed ones (`mallopt` `M_MMAP_THRESHOLD`, `M_TRIM_THRESHOLD` at twice it), instead of a fresh `mmap` per large block, whose pages every message would fault in again (`viaduct_fallback::memory`); process-wide, set by the first agent; 0, or glibc's own `MALLOC_MMAP_THRESHOLD_`/`MALLOC_TRIM_THRESHOLD_` in the environment, leaves the allocator alone | 33554432 |
//! | `VIADUCT_COLL_SMALL_MAX`, `VIADUCT_COLL_BCAST_CHAIN_MIN`, `VIADUCT_COLL_ALLREDUCE_RSAG_MIN`, `VIADUCT_COLL_ALLGATHER_RING_MIN` | switch points of the collectives (see [`crate::coll`]) | 4096, 8 MiB, 512 KiB, 16 KiB |
//! | `VIADUCT_COLL_BCAST_P2P_MAX` | on more than two ranks, bytes up to which `MPI_Bcast` (`Comm::bcast_in_place`) goes whole along its binomial tree as point-to-point messages, longer ones as pipelined xfer pieces (two ranks: every length of `bcast` and `bcast_in_place` as one point-to-point message; 0: never past `VIADUCT_COLL_SMALL_MAX`, two ranks included; see [`crate::coll`]) | 262144 (256 KiB) |
//! | `VIADUCT_COLL_ALLTOALL_P2P_MIN` | bytes of each rank's part from which the blocking alltoall exchanges each part as one point-to-point message instead of xfer blocks (see [`crate::coll`]) | 0 (every size) |
//!
//! A value that does not parse, or lies outside its bounds, is an error naming the variable
//! and the value. Timeouts are seconds (a decimal number) from 1 ms to 10^7 s.
//!
//! # Settings that must agree across ranks
//!
//! The settings that decide what goes on the wire or which algorithm a collective runs must be
//! the same on every rank: `VIADUCT_TRANSPORT`, `VIADUCT_EAGER_LIMIT`, `VIADUCT_XFER_CHUNK`,
//! the rendezvous piece size, and the six collective switch points. [`Agent::init`](crate::agent::Agent::init)
//! checks them ([`publish_agreement`], [`compare_agreement`]): every rank puts its values into the
//! bootstrap key-value space, and after the set-up fence rank 0 compares every rank's with its own and every other rank
//! compares its own with rank 0's; a difference is an [`AgentError::Config`] naming the
//! variable, the ranks and their values, on every rank that sees it, instead of a hang in the
//! first collective. The timeouts, spin counts, progress mode, RDMA device and TCP interface are local to each rank.
//!
//! # Peer liveness
//!
//! A rank is *alive* while its process runs, whether it is inside a call of the agent or
//! computing outside the library for any length of time. Each agent runs one heartbeat thread
//! (`viaduct-heartbeat`) that, every heartbeat interval (`VIADUCT_PEER_TIMEOUT / 4`, at least
//! 10 ms), proves this process alive to each connected peer, independently of the user's
//! calls: on shared memory it bumps a counter in the VC's segment; to TCP peers it sends an
//! authenticated UDP datagram (sender rank, receiver rank, sequence number, HMAC-SHA256 tag
//! under the job key) to the peer's *liveness socket*, a UDP socket each rank with TCP peers
//! binds to the address of its TCP listener (kernel-chosen port) and publishes with its
//! business cards (`vd-live`), and on which the same thread receives its peers' datagrams.
//! The methods' own heartbeats count too (shared memory: a counter bumped by each poll and by
//! the sleeping wait every 20 ms at most; TCP: a keepalive frame after
//! `VIADUCT_PEER_TIMEOUT / 4` without a frame sent, from polls and waits; verbs: its keepalive
//! RDMA write). A peer from which nothing arrived (no heartbeat, no datagram, no message) for
//! `VIADUCT_PEER_TIMEOUT` *while this rank waits on it* fails every request on its VC with
//! [`AgentError::PeerFailed`] naming it: a rank waits on a peer while it has a send to it in
//! flight, a receive naming it posted, a rendezvous with it, a stream read from it or an xfer
//! block or collective running (a receive from any source waits on no peer in particular).
//! Only a process that does not run can be silent that long: one stopped (`SIGSTOP`), dead,
//! hung so that its heartbeat thread cannot run, or cut off from this rank (over TCP, the
//! liveness port must be reachable by UDP wherever the TCP port is). A busy or slow rank is
//! never declared failed. Verbs keeps its own detection (acknowledgements of the RC queue
//! pair).
//!
//! For each peer the agent takes the first listed method that can reach it: `shm` only on the
//! same node, `tcp` always, `verbs` where both sides have an active RDMA device (a rank learns
//! whether its peer has one from the peer's business card, so that choice is made after the
//! card exchange). A list that leaves some peer unreachable is an error
//! ([`AgentError::NoMethod`]) naming the peer and why each listed method cannot serve it, e.g.
//! `verbs` alone on a node without an RDMA device.

pub(crate) mod coll_switch;

use std::time::Duration;

use crate::bootstrap::Bootstrap;
use crate::error::AgentError;
use coll_switch::{
    ALLGATHER_RING_MIN_VAR, ALLREDUCE_RSAG_MIN_VAR, ALLTOALL_P2P_MIN_VAR, BCAST_CHAIN_MIN_VAR,
    BCAST_P2P_MAX_VAR, SMALL_MAX_VAR, SwitchPoints,
};

/// Environment variable listing the methods the agent may use.
pub const TRANSPORT_VAR: &str = "VIADUCT_TRANSPORT";
/// Environment variable with the eager limit in bytes.
pub const EAGER_LIMIT_VAR: &str = "VIADUCT_EAGER_LIMIT";
/// Environment variable with the peer timeout in seconds.
pub const PEER_TIMEOUT_VAR: &str = "VIADUCT_PEER_TIMEOUT";
/// Environment variable with the connection set-up limit in seconds.
pub const CONNECT_TIMEOUT_VAR: &str = "VIADUCT_CONNECT_TIMEOUT";
/// Environment variable with the piece size of xfer messages in bytes.
pub const XFER_CHUNK_VAR: &str = "VIADUCT_XFER_CHUNK";
/// Environment variable bounding the bytes held for receives not posted yet.
pub const MAX_UNEXPECTED_VAR: &str = "VIADUCT_MAX_UNEXPECTED_BYTES";
/// Environment variable naming the RDMA device of the verbs method.
pub const RDMA_DEVICE_VAR: &str = "VIADUCT_RDMA_DEVICE";
/// Environment variable with the buffers of the verbs method's shared receive pool (0: a
/// receive ring per peer instead).
pub const VERBS_RECV_POOL_VAR: &str = "VIADUCT_VERBS_RECV_POOL";
/// Environment variable with the length from which a verbs rendezvous message is written by
/// its sender instead of read by its receiver (0: always read).
pub const VERBS_WRITE_MIN_VAR: &str = "VIADUCT_VERBS_WRITE_MIN";
/// Environment variable naming the network interface whose address TCP listens on.
pub const TCP_IFACE_VAR: &str = "VIADUCT_TCP_IFACE";
/// Environment variable with the fewest progress polls a blocking call spins before it sleeps.
pub const SPIN_MIN_VAR: &str = "VIADUCT_SPIN_MIN";
/// Environment variable with the most progress polls a blocking call spins before it sleeps.
pub const SPIN_MAX_VAR: &str = "VIADUCT_SPIN_MAX";
/// Environment variable with the most progress polls a blocking call makes in `yield` mode,
/// with `sched_yield` between them, before it sleeps.
pub const YIELD_POLLS_VAR: &str = "VIADUCT_YIELD_POLLS";

/// Environment variable choosing how blocking progress waits (`spin`, `yield`, `block`, `auto`).
pub const PROGRESS_VAR: &str = "VIADUCT_PROGRESS";
/// Long shared-memory messages up to this many bytes go through the ring in pipelined chunks
/// even where single copy is permitted (`shm::Config::ring_copy_max`).
pub const SHM_RING_COPY_MAX_VAR: &str = "VIADUCT_SHM_RING_COPY_MAX";
/// Chunk size of that ring copy (`shm::Config::ring_copy_chunk`).
pub const SHM_RING_COPY_CHUNK_VAR: &str = "VIADUCT_SHM_RING_COPY_CHUNK";
/// Allocations up to this many bytes come from the heap and freed ones are kept
/// (`viaduct_fallback::memory::keep_large_blocks`); 0 leaves the C allocator alone.
pub const MALLOC_KEEP_VAR: &str = "VIADUCT_MALLOC_KEEP";

/// How a blocking progress call waits for work (`VIADUCT_PROGRESS`).
///
/// ```
/// use viaduct_agent::config::{Config, ProgressMode};
///
/// let config = Config { progress: ProgressMode::Block, ..Config::default() };
/// assert_eq!(config.progress.name(), "block");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// `yield` when the ranks of this node outnumber the CPUs they may run on together, else
    /// `spin` (decided once, at start).
    #[default]
    Auto,
    /// Poll adaptively (between `spin_min` and `spin_max` polls), then sleep in the methods'
    /// waits: the lowest latency while each rank has a CPU of its own.
    Spin,
    /// Poll a few times, giving the CPU away (`sched_yield`) between polls, then sleep in the
    /// methods' waits: ranks that share a CPU let the peer they wait for run.
    Yield,
    /// Sleep in the methods' waits at once, without polling first.
    Block,
}

impl ProgressMode {
    /// The mode's name as written in `VIADUCT_PROGRESS`.
    ///
    /// ```
    /// use viaduct_agent::config::ProgressMode;
    ///
    /// assert_eq!(ProgressMode::Yield.name(), "yield");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ProgressMode::Auto => "auto",
            ProgressMode::Spin => "spin",
            ProgressMode::Yield => "yield",
            ProgressMode::Block => "block",
        }
    }

    /// Parses a `VIADUCT_PROGRESS` value; anything else is an error naming the variable.
    ///
    /// ```
    /// use viaduct_agent::config::ProgressMode;
    ///
    /// assert_eq!(ProgressMode::parse("spin").unwrap(), ProgressMode::Spin);
    /// let e = ProgressMode::parse("fast").unwrap_err();
    /// assert!(e.to_string().contains("VIADUCT_PROGRESS"), "{e}");
    /// ```
    pub fn parse(raw: &str) -> Result<ProgressMode, AgentError> {
        match raw.trim() {
            "auto" => Ok(ProgressMode::Auto),
            "spin" => Ok(ProgressMode::Spin),
            "yield" => Ok(ProgressMode::Yield),
            "block" => Ok(ProgressMode::Block),
            other => Err(bad(
                PROGRESS_VAR,
                format!("unknown mode {other:?} (known: spin, yield, block, auto)"),
            )),
        }
    }
}

/// A method a peer can be reached over (the own rank always uses the self loop).
///
/// ```
/// use viaduct_agent::config::{Config, MethodKind};
///
/// // Shared memory where it reaches, TCP elsewhere.
/// let config = Config { transports: vec![MethodKind::Shm, MethodKind::Tcp], ..Config::default() };
/// assert_eq!(config.transports[0].name(), "shm");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MethodKind {
    /// Shared memory between processes of one node.
    Shm,
    /// TCP over io_uring.
    Tcp,
    /// RDMA verbs (InfiniBand, RoCE, soft-RoCE).
    Verbs,
}

impl MethodKind {
    /// The method's name as written in `VIADUCT_TRANSPORT`.
    ///
    /// ```
    /// use viaduct_agent::config::MethodKind;
    ///
    /// assert_eq!(MethodKind::Verbs.name(), "verbs");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            MethodKind::Shm => "shm",
            MethodKind::Tcp => "tcp",
            MethodKind::Verbs => "verbs",
        }
    }
}

/// Settings of an [`Agent`](crate::agent::Agent).
///
/// ```
/// use std::time::Duration;
/// use viaduct_agent::config::Config;
///
/// let config = Config {
///     eager_limit: 8 << 10,
///     peer_timeout: Duration::from_secs(10),
///     ..Config::default()
/// };
/// config.validate().unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// Methods in order of preference.
    pub transports: Vec<MethodKind>,
    /// Largest payload sent eagerly (copied at once, buffered by the receiver if unexpected);
    /// longer messages wait for a matching receive (rendezvous).
    pub eager_limit: usize,
    /// Bytes of each piece of a rendezvous transfer (pieces are pipelined). Over shared
    /// memory a message up to `shm_ring_copy_max` bytes goes in pieces of one ring record
    /// (16 KiB) instead, read straight from the ring into the receive buffer.
    pub rendezvous_chunk: usize,
    /// A dead or silent peer fails every request on its VC within about this long.
    pub peer_timeout: Duration,
    /// Limit on connection set-up at start.
    pub connect_timeout: Duration,
    /// Once unexpected eager messages from remote peers hold this many bytes, the agent stops
    /// reading from remote VCs until receives take some: senders then see back-pressure from
    /// their method instead of this rank's memory growing.
    pub max_unexpected_bytes: usize,
    /// Fewest progress polls a blocking progress call spins before it sleeps.
    pub spin_min: u32,
    /// Most progress polls a blocking progress call spins before it sleeps.
    pub spin_max: u32,
    /// Most progress polls a blocking call makes in [`ProgressMode::Yield`], with
    /// `sched_yield` between them, before it sleeps in the methods' waits (0: at once).
    pub yield_polls: u32,
    /// How a blocking progress call waits for work; [`ProgressMode::Auto`] is resolved at start
    /// (see [`Agent::progress_mode`](crate::agent::Agent::progress_mode)).
    pub progress: ProgressMode,
    /// How much the spin count grows after a spin that found work (and shrinks after one that
    /// did not).
    pub spin_increment: u32,
    /// The RDMA device of the verbs method; `None` takes the first device with an active port.
    pub rdma_device: Option<String>,
    /// Receive buffers of the verbs method, shared by all of the rank's peers through one shared
    /// receive queue (`VIADUCT_VERBS_RECV_POOL`), made only where the peers' windows of 32
    /// together are more (with the default 64: from 3 peers; fewer peers get a ring each,
    /// which holds no more and is faster); 0 gives every peer a ring of 32 buffers of its own
    /// always. See `viaduct_verbs::msg::ReceivePool`.
    pub verbs_recv_pool: u32,
    /// Verbs: rendezvous messages from this many bytes are written by the sender (RDMA WRITE)
    /// rather than read by the receiver (RDMA READ); 0: always read
    /// (`VIADUCT_VERBS_WRITE_MIN`). The receiver's setting decides.
    pub verbs_write_min: usize,
    /// The network interface whose IPv4 address the TCP listener and the liveness socket bind
    /// (`VIADUCT_TCP_IFACE`); `None` takes the interface of the route to other nodes.
    pub tcp_iface: Option<String>,
    /// Bytes of each piece of an xfer block's message: a forward passes piece k on as soon as it
    /// arrived, so smaller pieces pipeline sooner and larger ones cost less per byte.
    pub xfer_chunk: usize,
    /// The switch points of the collectives (`VIADUCT_COLL_*`); the same on every rank.
    pub switch_points: SwitchPoints,
    /// Shared memory: long messages up to this many bytes are copied through the ring in
    /// pipelined chunks, longer ones read by the receiver straight from the sender's memory
    /// where one process may read another's (`RTS_READ`), else by the method's single copy
    /// (`VIADUCT_SHM_RING_COPY_MAX`; 0: no ring copy for any long message).
    pub shm_ring_copy_max: usize,
    /// Shared memory: chunk size of that ring copy (`VIADUCT_SHM_RING_COPY_CHUNK`).
    pub shm_ring_copy_chunk: usize,
    /// Blocks up to this many bytes are served from the heap and kept when freed, instead of
    /// a fresh `mmap` each (`VIADUCT_MALLOC_KEEP`, glibc only, process-wide, set by the first
    /// agent; 0 leaves the C allocator alone). See `viaduct_fallback::memory`.
    pub malloc_keep: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            transports: vec![MethodKind::Shm, MethodKind::Tcp],
            // 64 KiB less room for a header: past 16 KiB the shared-memory method carries the
            // message through its ring in pipelined chunks (`shm::Config::ring_copy_max`), which
            // beats the rendezvous handshake up to here (docs/perf/shm-sweep.md).
            eager_limit: (64 << 10) - 64,
            rendezvous_chunk: 4 << 20,
            peer_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(30),
            max_unexpected_bytes: 256 << 20,
            spin_min: 16,
            spin_max: 4096,
            spin_increment: 64,
            // See `YIELD_POLLS_VAR`'s row in the module doc for the measurement.
            yield_polls: 64,
            progress: ProgressMode::Auto,
            rdma_device: None,
            verbs_recv_pool: 64,
            // From 512 KiB: see `VERBS_WRITE_MIN_VAR`'s row in the module doc.
            verbs_write_min: 512 << 10,
            tcp_iface: None,
            // 16 KiB less the 24-byte piece header: a piece then fits the shared-memory
            // method's eager limit and goes through its ring in one copy. Measured against
            // 64 KiB and 256 KiB with `viaduct bench collective` (4 ranks, 1 MiB): the best
            // of the three for bcast and allreduce over both shm and tcp.
            xfer_chunk: (16 << 10) - 24,
            switch_points: SwitchPoints::default(),
            // Past 64 KiB (every rendezvous message) the receiver reads the sender's memory
            // (`RTS_READ`): one copy instead of two, so streams and exchanges both ways move
            // up to twice the bytes, and no receive waits for a sender that computes; ring
            // pieces keep a one-way ping-pong faster (docs/perf/agent.md, "Past the ring-copy
            // limit"). At least an eager message with its header, which must stay in the ring.
            shm_ring_copy_max: 64 << 10,
            shm_ring_copy_chunk: viaduct_fallback::shm::Config::default().ring_copy_chunk,
            malloc_keep: 32 << 20,
        }
    }
}

fn bad(setting: &'static str, reason: impl Into<String>) -> AgentError {
    AgentError::Config {
        setting,
        reason: reason.into(),
    }
}

/// Shortest timeout accepted: below it a timeout would expire before a single round trip.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(1);
/// Longest timeout accepted (about 115 days).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(10_000_000);

fn seconds(setting: &'static str, raw: &str) -> Result<Duration, AgentError> {
    let s: f64 = raw
        .trim()
        .parse()
        .map_err(|_| bad(setting, format!("{raw:?} is not a number of seconds")))?;
    if !s.is_finite() || s <= 0.0 {
        return Err(bad(
            setting,
            format!("{raw:?} is not a positive, finite number of seconds"),
        ));
    }
    if s < MIN_TIMEOUT.as_secs_f64() || s > MAX_TIMEOUT.as_secs_f64() {
        return Err(bad(
            setting,
            format!("{raw:?} seconds lies outside 0.001 to 10000000 seconds"),
        ));
    }
    Ok(Duration::from_secs_f64(s))
}

fn bytes(var: &'static str, v: &str) -> Result<usize, AgentError> {
    v.trim()
        .parse()
        .map_err(|_| bad(var, format!("{v:?} is not a number of bytes")))
}

fn check_timeout(var: &'static str, t: Duration) -> Result<(), AgentError> {
    if t < MIN_TIMEOUT || t > MAX_TIMEOUT {
        return Err(bad(
            var,
            format!("{t:?} lies outside {MIN_TIMEOUT:?} to {MAX_TIMEOUT:?}"),
        ));
    }
    Ok(())
}

/// Parses a `VIADUCT_TRANSPORT` value: comma-separated method names, no duplicates.
///
/// ```
/// use viaduct_agent::config::{MethodKind, parse_transports};
///
/// assert_eq!(parse_transports("shm, tcp").unwrap(), [MethodKind::Shm, MethodKind::Tcp]);
/// assert!(parse_transports("shm,shm").is_err()); // listed twice
/// ```
pub fn parse_transports(raw: &str) -> Result<Vec<MethodKind>, AgentError> {
    let mut out = Vec::new();
    for name in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let kind = match name {
            "self" => continue,
            "shm" => MethodKind::Shm,
            "tcp" => MethodKind::Tcp,
            "verbs" | "rdma" | "rc" => MethodKind::Verbs,
            other => {
                return Err(bad(
                    TRANSPORT_VAR,
                    format!("unknown method {other:?} (known: self, shm, tcp, verbs)"),
                ));
            }
        };
        if out.contains(&kind) {
            return Err(bad(TRANSPORT_VAR, format!("method {name} is listed twice")));
        }
        out.push(kind);
    }
    if out.is_empty() && !raw.split(',').any(|n| n.trim() == "self") {
        return Err(bad(TRANSPORT_VAR, "no method listed"));
    }
    Ok(out)
}

fn polls(var: &'static str, v: &str) -> Result<u32, AgentError> {
    v.trim()
        .parse()
        .map_err(|_| bad(var, format!("{v:?} is not a number of polls")))
}

impl Config {
    /// The defaults, overridden by the `VIADUCT_*` variables of this process's environment.
    ///
    /// ```
    /// use viaduct_agent::config::Config;
    ///
    /// fn main() -> Result<(), viaduct_agent::AgentError> {
    ///     // The defaults, with whatever VIADUCT_* variables this process has.
    ///     let config = Config::from_env()?;
    ///     println!("peer timeout {:?}", config.peer_timeout);
    ///     Ok(())
    /// }
    /// ```
    pub fn from_env() -> Result<Config, AgentError> {
        Self::from_vars(std::env::vars())
    }

    /// [`Config::from_env`] with the environment given as (name, value) pairs.
    ///
    /// ```
    /// use std::time::Duration;
    /// use viaduct_agent::config::Config;
    ///
    /// let config = Config::from_vars([("VIADUCT_PEER_TIMEOUT", "7")]).unwrap();
    /// assert_eq!(config.peer_timeout, Duration::from_secs(7));
    /// let e = Config::from_vars([("VIADUCT_EAGER_LIMIT", "lots")]).unwrap_err();
    /// assert!(e.to_string().contains("VIADUCT_EAGER_LIMIT"), "{e}");
    /// ```
    pub fn from_vars<I, K, V>(vars: I) -> Result<Config, AgentError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut c = Config::default();
        for (k, v) in vars {
            let v = v.as_ref();
            match k.as_ref() {
                TRANSPORT_VAR => c.transports = parse_transports(v)?,
                EAGER_LIMIT_VAR => c.eager_limit = bytes(EAGER_LIMIT_VAR, v)?,
                PEER_TIMEOUT_VAR => c.peer_timeout = seconds(PEER_TIMEOUT_VAR, v)?,
                CONNECT_TIMEOUT_VAR => c.connect_timeout = seconds(CONNECT_TIMEOUT_VAR, v)?,
                XFER_CHUNK_VAR => c.xfer_chunk = bytes(XFER_CHUNK_VAR, v)?,
                MAX_UNEXPECTED_VAR => c.max_unexpected_bytes = bytes(MAX_UNEXPECTED_VAR, v)?,
                SMALL_MAX_VAR => c.switch_points.small_max = bytes(SMALL_MAX_VAR, v)?,
                BCAST_CHAIN_MIN_VAR => {
                    c.switch_points.bcast_chain_min = bytes(BCAST_CHAIN_MIN_VAR, v)?;
                }
                ALLREDUCE_RSAG_MIN_VAR => {
                    c.switch_points.allreduce_rsag_min = bytes(ALLREDUCE_RSAG_MIN_VAR, v)?;
                }
                ALLGATHER_RING_MIN_VAR => {
                    c.switch_points.allgather_ring_min = bytes(ALLGATHER_RING_MIN_VAR, v)?;
                }
                BCAST_P2P_MAX_VAR => {
                    c.switch_points.bcast_p2p_max = bytes(BCAST_P2P_MAX_VAR, v)?;
                }
                ALLTOALL_P2P_MIN_VAR => {
                    c.switch_points.alltoall_p2p_min = bytes(ALLTOALL_P2P_MIN_VAR, v)?;
                }
                RDMA_DEVICE_VAR => {
                    let name = v.trim();
                    c.rdma_device = (!name.is_empty()).then(|| name.to_owned());
                }
                VERBS_RECV_POOL_VAR => {
                    c.verbs_recv_pool = v.trim().parse().map_err(|_| {
                        bad(
                            VERBS_RECV_POOL_VAR,
                            format!("{v:?} is not a number of buffers"),
                        )
                    })?;
                }
                VERBS_WRITE_MIN_VAR => c.verbs_write_min = bytes(VERBS_WRITE_MIN_VAR, v)?,
                TCP_IFACE_VAR => {
                    let name = v.trim();
                    c.tcp_iface = (!name.is_empty()).then(|| name.to_owned());
                }
                SPIN_MIN_VAR => c.spin_min = polls(SPIN_MIN_VAR, v)?,
                SPIN_MAX_VAR => c.spin_max = polls(SPIN_MAX_VAR, v)?,
                YIELD_POLLS_VAR => c.yield_polls = polls(YIELD_POLLS_VAR, v)?,
                PROGRESS_VAR => c.progress = ProgressMode::parse(v)?,
                SHM_RING_COPY_MAX_VAR => {
                    c.shm_ring_copy_max = bytes(SHM_RING_COPY_MAX_VAR, v)?;
                }
                SHM_RING_COPY_CHUNK_VAR => {
                    c.shm_ring_copy_chunk = bytes(SHM_RING_COPY_CHUNK_VAR, v)?;
                }
                MALLOC_KEEP_VAR => c.malloc_keep = bytes(MALLOC_KEEP_VAR, v)?,
                _ => {}
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// Checks that the settings fit together.
    ///
    /// ```
    /// use viaduct_agent::config::Config;
    ///
    /// assert!(Config::default().validate().is_ok());
    /// let too_big = Config { eager_limit: 1 << 20, ..Config::default() };
    /// assert!(too_big.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), AgentError> {
        if self.eager_limit > 64 << 10 {
            return Err(bad(
                EAGER_LIMIT_VAR,
                format!(
                    "{} exceeds the largest eager message of 65536 bytes",
                    self.eager_limit
                ),
            ));
        }
        if self.rendezvous_chunk < 4096 || self.rendezvous_chunk > 32 << 20 {
            return Err(bad("rendezvous_chunk", "must lie between 4 KiB and 32 MiB"));
        }
        if self.verbs_recv_pool != 0 && !(4..=16384).contains(&self.verbs_recv_pool) {
            return Err(bad(
                VERBS_RECV_POOL_VAR,
                format!(
                    "{} must be 0 (a ring per peer) or lie in 4..=16384",
                    self.verbs_recv_pool
                ),
            ));
        }
        check_timeout(PEER_TIMEOUT_VAR, self.peer_timeout)?;
        check_timeout(CONNECT_TIMEOUT_VAR, self.connect_timeout)?;
        if !(4096..=4 << 20).contains(&self.xfer_chunk) {
            return Err(bad(
                XFER_CHUNK_VAR,
                format!("{} must lie between 4 KiB and 4 MiB", self.xfer_chunk),
            ));
        }
        if !(64 << 10..=1 << 40).contains(&self.max_unexpected_bytes) {
            return Err(bad(
                MAX_UNEXPECTED_VAR,
                format!(
                    "{} must lie between 64 KiB and 1 TiB",
                    self.max_unexpected_bytes
                ),
            ));
        }
        if self.shm_ring_copy_max > 64 << 20 {
            return Err(bad(
                SHM_RING_COPY_MAX_VAR,
                format!(
                    "{} exceeds the largest shared-memory message of 67108864 bytes",
                    self.shm_ring_copy_max
                ),
            ));
        }
        if !(4096..=256 << 10).contains(&self.shm_ring_copy_chunk) {
            return Err(bad(
                SHM_RING_COPY_CHUNK_VAR,
                format!(
                    "{} must lie between 4 KiB and 256 KiB",
                    self.shm_ring_copy_chunk
                ),
            ));
        }
        if self.malloc_keep > 32 << 20 {
            return Err(bad(
                MALLOC_KEEP_VAR,
                format!(
                    "{} exceeds 33554432 (32 MiB), glibc's largest mmap threshold",
                    self.malloc_keep
                ),
            ));
        }
        if self.spin_min > self.spin_max {
            return Err(bad(
                SPIN_MIN_VAR,
                format!(
                    "{} exceeds spin_max {} ({SPIN_MIN_VAR}, {SPIN_MAX_VAR})",
                    self.spin_min, self.spin_max
                ),
            ));
        }
        Ok(())
    }

    /// The settings that must be the same on every rank, as (variable, value) pairs.
    ///
    /// ```
    /// use viaduct_agent::config::Config;
    ///
    /// for (var, value) in Config::default().agreed_settings() {
    ///     println!("{var}={value}");
    /// }
    /// ```
    pub fn agreed_settings(&self) -> Vec<(&'static str, String)> {
        let t: Vec<&str> = self.transports.iter().map(|m| m.name()).collect();
        let p = &self.switch_points;
        vec![
            (TRANSPORT_VAR, t.join("/")),
            (EAGER_LIMIT_VAR, self.eager_limit.to_string()),
            ("rendezvous_chunk", self.rendezvous_chunk.to_string()),
            (XFER_CHUNK_VAR, self.xfer_chunk.to_string()),
            (SMALL_MAX_VAR, p.small_max.to_string()),
            (BCAST_CHAIN_MIN_VAR, p.bcast_chain_min.to_string()),
            (ALLREDUCE_RSAG_MIN_VAR, p.allreduce_rsag_min.to_string()),
            (ALLGATHER_RING_MIN_VAR, p.allgather_ring_min.to_string()),
            (BCAST_P2P_MAX_VAR, p.bcast_p2p_max.to_string()),
            (ALLTOALL_P2P_MIN_VAR, p.alltoall_p2p_min.to_string()),
        ]
    }
}

/// Key under which rank `r` puts its agreed settings.
fn agreement_key(r: u32) -> String {
    format!("viaduct-settings-{r}")
}

/// Encodes the agreed settings as one key-value-space value (values are numbers and method
/// names: no space, `=`, `;` or `,`).
fn encode_agreed(c: &Config) -> String {
    c.agreed_settings()
        .into_iter()
        .map(|(_, v)| v)
        .collect::<Vec<_>>()
        .join(",")
}

/// Compares `mine` (this rank's settings, rank `me`) with `theirs` (the encoded settings of
/// rank `other`); the first difference is an error naming the variable, both ranks and
/// their values.
fn compare_agreed(mine: &Config, me: u32, other: u32, theirs: &str) -> Result<(), AgentError> {
    let values: Vec<&str> = theirs.split(',').collect();
    let own = mine.agreed_settings();
    if values.len() != own.len() {
        return Err(bad(
            "settings",
            format!(
                "rank {other} published settings of another layout ({theirs:?}): \
                 the ranks run different builds"
            ),
        ));
    }
    for ((var, v), w) in own.iter().zip(values) {
        if v != w {
            return Err(bad(
                var,
                format!("must be the same on every rank: rank {me} has {v}, rank {other} has {w}"),
            ));
        }
    }
    Ok(())
}

/// Publishes this rank's values of the settings which must agree across ranks
/// ([`Config::agreed_settings`]) in the bootstrap key-value space. Every rank calls it before
/// the set-up fence (no fence of its own, so a rank listens for its peers before it waits for
/// them); [`compare_agreement`] reads them after that fence.
///
/// ```
/// use viaduct_agent::bootstrap::Bootstrap;
/// use viaduct_agent::config::{Config, compare_agreement, publish_agreement};
///
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let mut boot = Bootstrap::from_vars(std::iter::empty::<(String, String)>())?;
///     let config = Config::default();
///     publish_agreement(&mut boot, &config)?;
///     boot.fence()?;
///     compare_agreement(&mut boot, &config)?;
///     Ok(())
/// }
/// ```
pub fn publish_agreement(boot: &mut Bootstrap, config: &Config) -> Result<(), AgentError> {
    if boot.size() < 2 {
        return Ok(());
    }
    boot.put(&agreement_key(boot.rank()), &encode_agreed(config))
        .map_err(AgentError::Bootstrap)
}

/// After the set-up fence: rank 0 compares every rank's published values with its own, every
/// other rank its own with rank 0's. A difference is an [`AgentError::Config`] naming the
/// variable and the two ranks, before any connection is made.
///
/// ```
/// use viaduct_agent::bootstrap::Bootstrap;
/// use viaduct_agent::config::{Config, compare_agreement, publish_agreement};
///
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let mut boot = Bootstrap::from_vars(std::iter::empty::<(String, String)>())?;
///     publish_agreement(&mut boot, &Config::default())?;
///     boot.fence()?;
///     // Every rank: a setting that differs from rank 0's is an error naming it.
///     compare_agreement(&mut boot, &Config::default())?;
///     Ok(())
/// }
/// ```
pub fn compare_agreement(boot: &mut Bootstrap, config: &Config) -> Result<(), AgentError> {
    let (me, size) = (boot.rank(), boot.size());
    if size < 2 {
        return Ok(());
    }
    let others: Vec<u32> = if me == 0 {
        (1..size).collect()
    } else {
        vec![0]
    };
    for other in others {
        let theirs = boot
            .get(&agreement_key(other))
            .map_err(AgentError::Bootstrap)?;
        compare_agreed(config, me, other, &theirs)?;
    }
    Ok(())
}

/// Checks that the settings which must agree across ranks do, on its own fence: publishes this
/// rank's values, fences, compares ([`publish_agreement`], [`compare_agreement`]). The agent
/// does the two halves around its set-up fence instead. Every rank of the job must call it.
///
/// ```
/// use viaduct_agent::bootstrap::Bootstrap;
/// use viaduct_agent::config::{Config, check_agreement};
///
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let mut boot = Bootstrap::from_vars(std::iter::empty::<(String, String)>())?;
///     check_agreement(&mut boot, &Config::default())?;
///     Ok(())
/// }
/// ```
pub fn check_agreement(boot: &mut Bootstrap, config: &Config) -> Result<(), AgentError> {
    publish_agreement(boot, config)?;
    if boot.size() > 1 {
        boot.fence().map_err(AgentError::Bootstrap)?;
    }
    compare_agreement(boot, config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_lists() {
        assert_eq!(
            parse_transports("tcp, shm").unwrap(),
            vec![MethodKind::Tcp, MethodKind::Shm]
        );
        assert_eq!(parse_transports("self").unwrap(), vec![]);
        assert!(parse_transports("tcp,tcp").is_err());
        let e = parse_transports("udp").unwrap_err().to_string();
        assert!(e.contains("udp"), "{e}");
        assert!(parse_transports("").is_err());
    }

    #[test]
    fn env_overrides() {
        let c = Config::from_vars([
            (TRANSPORT_VAR, "tcp"),
            (PEER_TIMEOUT_VAR, "0.5"),
            (EAGER_LIMIT_VAR, "1024"),
        ])
        .unwrap();
        assert_eq!(c.transports, vec![MethodKind::Tcp]);
        assert_eq!(c.peer_timeout, Duration::from_millis(500));
        assert_eq!(c.eager_limit, 1024);
        assert!(Config::from_vars([(PEER_TIMEOUT_VAR, "-1")]).is_err());
        assert_eq!(c.rdma_device, None);
        let c =
            Config::from_vars([(TRANSPORT_VAR, "verbs,shm"), (RDMA_DEVICE_VAR, " rxe0 ")]).unwrap();
        assert_eq!(c.transports, vec![MethodKind::Verbs, MethodKind::Shm]);
        assert_eq!(c.rdma_device.as_deref(), Some("rxe0"));
        assert_eq!(c.tcp_iface, None);
        assert_eq!(c.verbs_recv_pool, 64);
        let c = Config::from_vars([(VERBS_RECV_POOL_VAR, " 0 ")]).unwrap();
        assert_eq!(c.verbs_recv_pool, 0);
        assert!(Config::from_vars([(VERBS_RECV_POOL_VAR, "2")]).is_err());
        assert!(Config::from_vars([(VERBS_RECV_POOL_VAR, "x")]).is_err());
        let c = Config::from_vars([(TCP_IFACE_VAR, " ib0 ")]).unwrap();
        assert_eq!(c.tcp_iface.as_deref(), Some("ib0"));
        let c = Config::from_vars([(TCP_IFACE_VAR, " ")]).unwrap();
        assert_eq!(c.tcp_iface, None);
        assert!(Config::from_vars([(EAGER_LIMIT_VAR, "1000000")]).is_err());
        assert_eq!(
            Config::from_vars([(XFER_CHUNK_VAR, "8192")])
                .unwrap()
                .xfer_chunk,
            8192
        );
        assert!(Config::from_vars([(XFER_CHUNK_VAR, "100")]).is_err());
        assert!(Config::from_vars([(XFER_CHUNK_VAR, "lots")]).is_err());
        let d = Config::default().switch_points;
        assert_eq!((d.bcast_p2p_max, d.alltoall_p2p_min), (256 << 10, 0));
        let c = Config::from_vars([(BCAST_P2P_MAX_VAR, "0"), (ALLTOALL_P2P_MIN_VAR, "1000")])
            .unwrap()
            .switch_points;
        assert_eq!((c.bcast_p2p_max, c.alltoall_p2p_min), (0, 1000));
        let e = Config::from_vars([(ALLTOALL_P2P_MIN_VAR, "big")]).unwrap_err();
        assert!(e.to_string().contains(ALLTOALL_P2P_MIN_VAR), "{e}");
        let e = Config::from_vars([(BCAST_P2P_MAX_VAR, "-1")]).unwrap_err();
        assert!(e.to_string().contains(BCAST_P2P_MAX_VAR), "{e}");
        let agreed = Config::default().agreed_settings();
        assert!(agreed.iter().any(|(k, _)| *k == BCAST_P2P_MAX_VAR));
        assert!(agreed.iter().any(|(k, _)| *k == ALLTOALL_P2P_MIN_VAR));
        let c = Config::from_vars([(SPIN_MIN_VAR, "100"), (SPIN_MAX_VAR, "200")]).unwrap();
        assert_eq!((c.spin_min, c.spin_max), (100, 200));
        let e = Config::from_vars([(SPIN_MIN_VAR, "5000")]).unwrap_err();
        assert!(e.to_string().contains("VIADUCT_SPIN_MIN"), "{e}");
        assert!(Config::from_vars([(SPIN_MAX_VAR, "many")]).is_err());
        assert_eq!(Config::default().yield_polls, 64);
        assert_eq!(
            Config::from_vars([(YIELD_POLLS_VAR, "0")])
                .unwrap()
                .yield_polls,
            0
        );
        let e = Config::from_vars([(YIELD_POLLS_VAR, "-4")]).unwrap_err();
        assert!(e.to_string().contains("VIADUCT_YIELD_POLLS"), "{e}");
        let c = Config::from_vars([
            (SHM_RING_COPY_MAX_VAR, "0"),
            (SHM_RING_COPY_CHUNK_VAR, "8192"),
        ])
        .unwrap();
        assert_eq!((c.shm_ring_copy_max, c.shm_ring_copy_chunk), (0, 8192));
        let shm = crate::method::shm_config(&c);
        assert_eq!((shm.ring_copy_max, shm.ring_copy_chunk), (0, 8192));
        assert_eq!(Config::default().verbs_write_min, 512 << 10);
        let c = Config::from_vars([(VERBS_WRITE_MIN_VAR, "0")]).unwrap();
        assert_eq!(c.verbs_write_min, 0);
        let e = Config::from_vars([(VERBS_WRITE_MIN_VAR, "1M")]).unwrap_err();
        assert!(e.to_string().contains(VERBS_WRITE_MIN_VAR), "{e}");
        assert_eq!(Config::default().malloc_keep, 32 << 20);
        assert_eq!(
            Config::from_vars([(MALLOC_KEEP_VAR, "0")])
                .unwrap()
                .malloc_keep,
            0
        );
        let e = Config::from_vars([(MALLOC_KEEP_VAR, "1000000000")]).unwrap_err();
        assert!(e.to_string().contains(MALLOC_KEEP_VAR), "{e}");
        let e = Config::from_vars([(SHM_RING_COPY_CHUNK_VAR, "100")]).unwrap_err();
        assert!(e.to_string().contains(SHM_RING_COPY_CHUNK_VAR), "{e}");
        let e = Config::from_vars([(SHM_RING_COPY_MAX_VAR, "1000000000")]).unwrap_err();
        assert!(e.to_string().contains(SHM_RING_COPY_MAX_VAR), "{e}");
        assert_eq!(Config::default().progress, ProgressMode::Auto);
        for (raw, mode) in [
            ("auto", ProgressMode::Auto),
            ("spin", ProgressMode::Spin),
            (" yield ", ProgressMode::Yield),
            ("block", ProgressMode::Block),
        ] {
            let c = Config::from_vars([(PROGRESS_VAR, raw)]).unwrap();
            assert_eq!(c.progress, mode, "{raw:?}");
            assert_eq!(ProgressMode::parse(mode.name()).unwrap(), mode);
        }
        for raw in ["", "busy", "Spin"] {
            let e = Config::from_vars([(PROGRESS_VAR, raw)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("VIADUCT_PROGRESS"), "{raw:?}: {e}");
        }
        let c = Config::from_vars([(MAX_UNEXPECTED_VAR, "1048576")]).unwrap();
        assert_eq!(c.max_unexpected_bytes, 1 << 20);
        let e = Config::from_vars([(MAX_UNEXPECTED_VAR, "100")]).unwrap_err();
        assert!(
            e.to_string().contains("VIADUCT_MAX_UNEXPECTED_BYTES"),
            "{e}"
        );
    }
}
