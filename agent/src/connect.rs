//! Connection set-up at start: choose a method per peer, exchange business cards, connect and
//! authenticate every VC.
//!
//! Each rank listens on every method some peer needs and publishes the listener's address as
//! its business card (`vd-shm`: the hex-encoded unix socket path of the shared-memory
//! listener; `vd-tcp`: `ip:port`). When `verbs` is listed first for some peers, a rank with an
//! active RDMA device also prepares one queue pair per such peer and publishes its card
//! (`vd-vqPEER`: the hex [`viaduct_verbs::msg::Card`]), plus a mark saying whether it offers
//! verbs at all, or why not (`vd-verbs`). After one fence, each pair that offered verbs to each
//! other connects its queue pairs and authenticates over them; the others fall back to the
//! next listed method, or fail with every reason when none is left. Then a rank connects to
//! every lower rank and accepts every higher one over the socket methods; each new connection
//! first runs the job-key handshake ([`crate::handshake`]); a stranger is refused, logged, and
//! does not count. Listeners close when set-up ends (on every path: success, error or
//! unwinding), so no connection is accepted afterwards, and the shm socket file is removed.
//!
//! Inbound connections are set up concurrently, each on a thread of its own, and each must
//! finish the method's hello and prove the job key within the pre-authentication deadline
//! ([`PREAUTH_TIMEOUT_VAR`], 2 s by default): a local process that connects and stays silent,
//! or speaks another protocol, is dropped then and delays nobody. Over shm the peer must run
//! as the same user (its credentials, `SO_PEERCRED`), the key is proved on the set-up socket
//! before the segment exists, and the socket (mode 0600) has a random name that tells nothing
//! about the job key.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use viaduct_fallback::{shm, tcp};

use crate::bootstrap::{Bootstrap, JobKey};
use crate::config::{Config, MethodKind};
use crate::error::AgentError;
use crate::handshake;
use crate::method::{self, Method, MethodError};
use crate::vc::{Link, Vc};

const SHM_CARD: &str = "vd-shm";
const TCP_CARD: &str = "vd-tcp";
/// Where a rank that offers shm runs: host name, kernel boot id and the identity of its
/// temporary directory (see [`NodeMark`]).
const NODE_CARD: &str = "vd-node";
/// Whether a rank offers verbs: `1`, or `0` and the hex-encoded reason it cannot.
const VERBS_MARK: &str = "vd-verbs";

/// The name under which a rank publishes its verbs card for `peer` (the hex
/// [`viaduct_verbs::msg::Card`] of the queue pair it prepared for that peer).
#[cfg(feature = "rdma")]
fn verbs_card_name(peer: u32) -> String {
    format!("vd-vq{peer}")
}

/// How `config` may serve `peer`, before the business cards are known: whether `verbs` comes
/// before the first other method that reaches it, and that method.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// `verbs` is listed before `fallback`.
    pub(crate) verbs_first: bool,
    /// The first listed method other than `verbs` that reaches the peer.
    pub(crate) fallback: Option<MethodKind>,
    /// Why each method listed before `fallback` cannot serve the peer (`None`: the place of
    /// `verbs`, whose reason is known only after the card exchange).
    why: Vec<Option<String>>,
}

/// What `config` allows for `peer`, before the business cards are known.
pub(crate) fn plan(config: &Config, boot: &Bootstrap, peer: u32) -> Plan {
    let mut plan = Plan::default();
    for &kind in &config.transports {
        match kind {
            MethodKind::Shm if boot.is_local(peer) => {
                plan.fallback = Some(kind);
                break;
            }
            MethodKind::Shm => plan
                .why
                .push(Some("shm: the peer is on another node".to_owned())),
            MethodKind::Tcp => {
                plan.fallback = Some(kind);
                break;
            }
            MethodKind::Verbs => {
                plan.verbs_first = true;
                plan.why.push(None);
            }
        }
    }
    plan
}

/// The method for `peer` once the cards are known: `verbs` when it comes first and both ranks
/// offered it to each other (`verbs` is `Ok` then, else it says why not), else the plan's
/// fallback; an error naming the peer and every reason when no method can serve it.
pub(crate) fn choose(
    plan: &Plan,
    peer: u32,
    verbs: Result<(), String>,
) -> Result<MethodKind, AgentError> {
    let verbs = match verbs {
        Ok(()) if plan.verbs_first => return Ok(MethodKind::Verbs),
        Ok(()) => "verbs: listed after a method that serves the peer".to_owned(),
        Err(why) => format!("verbs: {why}"),
    };
    if let Some(kind) = plan.fallback {
        return Ok(kind);
    }
    let mut why: Vec<String> = plan
        .why
        .iter()
        .map(|w| w.clone().unwrap_or_else(|| verbs.clone()))
        .collect();
    if why.is_empty() {
        why.push("no method listed".into());
    }
    Err(AgentError::NoMethod {
        peer,
        reason: why.join("; "),
    })
}

fn hex(s: &str) -> String {
    hex::encode(s)
}

fn unhex(s: &str) -> Option<String> {
    String::from_utf8(hex::decode(s).ok()?).ok()
}

/// This node's host name, for messages (`?` when unreadable).
pub(crate) fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// The address the TCP listener and the liveness socket bind and publish: the IPv4 address of
/// [`Config::tcp_iface`] when set (whatever the peers); else loopback when every TCP peer is
/// on this node (`all_local`); else the address other nodes reach this one at: the source
/// address of the route out (the default route), or, with no such route, that of the only
/// interface that is up, not loopback and has an IPv4 address. Never the wildcard address.
pub(crate) fn tcp_address(config: &Config, all_local: bool) -> Result<IpAddr, AgentError> {
    let bad = |reason: String| AgentError::Config {
        setting: crate::config::TCP_IFACE_VAR,
        reason,
    };
    let list = || {
        viaduct_fallback::netif::interfaces().map_err(|e| {
            bad(format!(
                "cannot list the network interfaces of this node: {e}"
            ))
        })
    };
    let names = |all: &[viaduct_fallback::netif::Interface]| {
        all.iter()
            .map(|i| match i.ipv4.first() {
                Some(a) => format!("{} ({a})", i.name),
                None => format!("{} (no IPv4 address)", i.name),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(name) = &config.tcp_iface {
        let all = list()?;
        let Some(iface) = all.iter().find(|i| i.name == *name) else {
            return Err(bad(format!(
                "no network interface named {name:?} on host {} (its interfaces: {})",
                this_host(),
                names(&all)
            )));
        };
        return match iface.ipv4.first() {
            Some(a) => Ok(IpAddr::V4(*a)),
            None => Err(bad(format!(
                "network interface {name:?} on host {} has no IPv4 address",
                this_host()
            ))),
        };
    }
    if all_local {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let probe = || -> std::io::Result<IpAddr> {
        let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        // No packet is sent: connecting a UDP socket only picks the route and source address.
        s.connect((Ipv4Addr::new(192, 0, 2, 1), 9))?;
        Ok(s.local_addr()?.ip())
    };
    if let Ok(ip) = probe()
        && !ip.is_loopback()
        && !ip.is_unspecified()
    {
        return Ok(ip);
    }
    let all = list()?;
    let usable: Vec<&viaduct_fallback::netif::Interface> = all
        .iter()
        .filter(|i| i.up && !i.loopback && !i.ipv4.is_empty())
        .collect();
    match usable[..] {
        [one] => Ok(IpAddr::V4(one.ipv4[0])),
        [] => Err(bad(format!(
            "not set, and host {} has no route out and no interface that is up with an IPv4 address besides loopback (its interfaces: {}); some peers are on other nodes",
            this_host(),
            names(&all)
        ))),
        _ => Err(bad(format!(
            "not set, and host {} has no route out and several interfaces other nodes may reach it by ({}): name one",
            this_host(),
            names(&all)
        ))),
    }
}

/// Where a rank runs, as far as shared memory cares: peers that the launcher places on one
/// node must share a kernel (the segment is a memfd passed over a unix socket) and reach each
/// other's shm set-up socket (a file in the temporary directory; two nodes' private `/tmp` on
/// one kernel, as containers have, tell apart). So each rank publishes its kernel boot id and
/// the device and inode of its set-up socket, and a rank checks that its peer's boot id is its
/// own and that the peer's socket path leads, here, to that very file. The host name is
/// compared by neither: it makes the error readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeMark {
    host: String,
    boot_id: String,
    /// The shm set-up socket file: `dev:ino`.
    socket: String,
}

/// `dev:ino` of the file at `path`, or why it cannot be read.
fn file_id(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .map(|m| format!("{}:{}", m.dev(), m.ino()))
        .map_err(|e| e.to_string())
}

impl NodeMark {
    /// This process's mark, for its shm set-up socket at `socket`.
    pub(crate) fn here(socket: &std::path::Path) -> NodeMark {
        NodeMark {
            host: this_host(),
            boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .map(|b| b.trim().to_owned())
                .unwrap_or_default(),
            socket: file_id(socket).unwrap_or_default(),
        }
    }

    /// As published: the three fields, one a line.
    fn card(&self) -> String {
        format!("{}\n{}\n{}", self.host, self.boot_id, self.socket)
    }

    fn from_card(card: &str) -> Option<NodeMark> {
        let mut it = card.split('\n');
        let (host, boot_id, socket) = (it.next()?, it.next()?, it.next()?);
        it.next().is_none().then(|| NodeMark {
            host: host.to_owned(),
            boot_id: boot_id.to_owned(),
            socket: socket.to_owned(),
        })
    }

    /// Why ranks `me` (this mark) and `peer` (`other`, whose set-up socket is `path`), placed
    /// on one node by the launcher, cannot use shm with each other; `None` when they can.
    pub(crate) fn mismatch(
        &self,
        me: u32,
        other: &NodeMark,
        peer: u32,
        path: &std::path::Path,
    ) -> Option<String> {
        let why = if self.boot_id != other.boot_id {
            format!(
                "they run on different kernels (boot ids {} and {})",
                self.boot_id, other.boot_id
            )
        } else {
            match file_id(path) {
                Ok(id) if id == other.socket => return None,
                Ok(id) => format!(
                    "rank {peer}'s shm set-up socket {} is another file here ({id}, not {}): they do not share a temporary directory",
                    path.display(),
                    other.socket
                ),
                Err(e) => format!(
                    "rank {peer}'s shm set-up socket {} cannot be found from rank {me} ({e}): they do not share a temporary directory",
                    path.display()
                ),
            }
        };
        Some(format!(
            "shm: the launcher places ranks {me} (host {}) and {peer} (host {}) on one node, but {why}; the launcher's process mapping (PMI_process_mapping) is wrong for this job: fix the host list, or set VIADUCT_TRANSPORT=tcp",
            self.host, other.host
        ))
    }
}

/// Checks, after the set-up fence, that every peer planned for shm runs where this rank's shm
/// reaches it; an error naming both ranks and the reason otherwise, instead of a connection
/// attempt that fails or waits.
fn check_one_node(
    boot: &mut Bootstrap,
    plans: &[Plan],
    mine: Option<&NodeMark>,
) -> Result<(), AgentError> {
    let me = boot.rank();
    let Some(mine) = mine else {
        return Ok(());
    };
    for p in (0..plans.len() as u32)
        .filter(|p| *p != me && plans[*p as usize].fallback == Some(MethodKind::Shm))
    {
        let bad = |card: &String| AgentError::BadCard {
            peer: p,
            method: "shm",
            card: card.clone(),
        };
        let card = boot.lookup(NODE_CARD, p)?;
        let theirs = unhex(&card)
            .as_deref()
            .and_then(NodeMark::from_card)
            .ok_or_else(|| bad(&card))?;
        let shm = boot.lookup(SHM_CARD, p)?;
        let path = unhex(&shm).ok_or_else(|| bad(&shm))?;
        if let Some(reason) = mine.mismatch(me, &theirs, p, std::path::Path::new(&path)) {
            return Err(AgentError::NoMethod { peer: p, reason });
        }
    }
    Ok(())
}

/// Default of the pre-authentication deadline ([`PREAUTH_TIMEOUT_VAR`]).
const PREAUTH_DEFAULT: Duration = Duration::from_secs(2);
/// How long a fresh inbound connection may take, from its accept, to set up the method's
/// hello and prove it holds the job key (seconds; default 2, at most the connect timeout).
pub(crate) const PREAUTH_TIMEOUT_VAR: &str = "VIADUCT_PREAUTH_TIMEOUT";
/// Inbound connections authenticated at once per listener; more wait in the listen queue
/// until one of these is done (each within the pre-authentication deadline).
const MAX_PENDING: usize = 32;

/// The pre-authentication deadline: [`PREAUTH_TIMEOUT_VAR`], or its default.
fn preauth_timeout(connect_timeout: Duration) -> Result<Duration, AgentError> {
    match std::env::var(PREAUTH_TIMEOUT_VAR) {
        Err(std::env::VarError::NotPresent) => parse_preauth(None, connect_timeout),
        Err(std::env::VarError::NotUnicode(raw)) => Err(AgentError::Config {
            setting: PREAUTH_TIMEOUT_VAR,
            reason: format!("{raw:?} is not text"),
        }),
        Ok(raw) => parse_preauth(Some(&raw), connect_timeout),
    }
}

/// The pre-authentication deadline from the setting's value (`None`: not set, the default,
/// at most `connect_timeout`).
fn parse_preauth(raw: Option<&str>, connect_timeout: Duration) -> Result<Duration, AgentError> {
    let Some(raw) = raw else {
        return Ok(PREAUTH_DEFAULT.min(connect_timeout));
    };
    raw.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e7)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| AgentError::Config {
            setting: PREAUTH_TIMEOUT_VAR,
            reason: format!("{raw:?} is not a positive number of seconds"),
        })
}

/// A name for the shm set-up socket that tells nothing about the job key: the pid, the rank
/// and 64 random bits.
fn socket_path(me: u32) -> Result<std::path::PathBuf, AgentError> {
    let mut nonce = [0u8; 8];
    crate::bootstrap::jobkey::random_bytes(&mut nonce).map_err(|e| AgentError::Listen {
        method: "shm",
        source: MethodError::from(viaduct_fallback::shm::Error::Socket {
            step: "name (drawing random bits)",
            source: e,
        }),
    })?;
    Ok(std::env::temp_dir().join(format!(
        "viaduct-{}-{}-{:016x}.sock",
        std::process::id(),
        me,
        u64::from_le_bytes(nonce)
    )))
}

enum Listening {
    Shm(shm::Listener),
    Tcp(tcp::Listener),
}

/// An inbound connection, authenticated: its method, the rank it proved to be, the link.
type Accepted = (MethodKind, u32, Method);

/// What the accept threads share with set-up.
#[derive(Clone)]
struct AcceptCtx {
    key: JobKey,
    config: Config,
    preauth: Duration,
    tx: mpsc::Sender<Accepted>,
    stop: Arc<AtomicBool>,
}

/// Closes the set-up listeners when set-up ends, on every path (success, error, unwinding):
/// tells the accept threads to stop, wakes them with a connection of its own, and removes the
/// shm socket file.
struct ListenGuard {
    stop: Arc<AtomicBool>,
    shm_path: Option<std::path::PathBuf>,
    /// The TCP listener's address (bound to one interface's address, not loopback: the
    /// wake-up connection goes there).
    tcp_addr: Option<SocketAddr>,
}

impl Drop for ListenGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(path) = self.shm_path.take() {
            // An accept thread blocked in `accept` takes this, sees `stop` and ends.
            let _ = std::os::unix::net::UnixStream::connect(&path);
            let _ = std::fs::remove_file(&path);
        }
        if let Some(to) = self.tcp_addr.take() {
            let _ = std::net::TcpStream::connect_timeout(&to, Duration::from_millis(500));
        }
    }
}

/// One inbound connection, not authenticated yet.
enum Incoming {
    Shm(shm::Pending),
    Tcp(std::net::TcpStream),
}

/// Accepts connections until set-up ends and hands each to a thread of its own, which
/// authenticates it within the pre-authentication deadline; so a peer that stays silent or
/// speaks another protocol delays nobody else, and is dropped when its deadline passes.
fn accept_loop(listener: Listening, ctx: AcceptCtx) {
    let name = match &listener {
        Listening::Shm(_) => "shm",
        Listening::Tcp(_) => "tcp",
    };
    let busy = Arc::new(AtomicUsize::new(0));
    loop {
        while busy.load(Ordering::Acquire) >= MAX_PENDING && !ctx.stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let got = match &listener {
            Listening::Shm(l) => l
                .accept_pending()
                .map(Incoming::Shm)
                .map_err(MethodError::from),
            Listening::Tcp(l) => l
                .accept_socket()
                .map(Incoming::Tcp)
                .map_err(MethodError::from),
        };
        if ctx.stop.load(Ordering::Acquire) {
            return;
        }
        let incoming = match got {
            Ok(i) => i,
            Err(e) => {
                // A peer of another user (shm), or the accept itself failed (e.g. out of
                // descriptors: wait a little before the next try).
                tracing::warn!("viaduct: refused a {name} connection: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        busy.fetch_add(1, Ordering::AcqRel);
        let (ctx2, busy2) = (ctx.clone(), Arc::clone(&busy));
        let spawned = std::thread::Builder::new()
            .name("viaduct-preauth".into())
            .spawn(move || {
                authenticate(incoming, &ctx2);
                busy2.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            busy.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!("viaduct: dropped a {name} connection: no thread to set it up: {e}");
        }
    }
}

/// Sets up and authenticates one inbound connection within the pre-authentication deadline
/// and hands it to set-up; refusals are logged naming the peer (process or address).
fn authenticate(incoming: Incoming, ctx: &AcceptCtx) {
    let deadline = Instant::now() + ctx.preauth;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    let accepted = match incoming {
        Incoming::Shm(mut pending) => {
            if let Err(e) = pending.require_same_user() {
                tracing::warn!("viaduct: {e}");
                return;
            }
            let what = format!("a shm peer (process {})", pending.peer_pid());
            // Logged by the handshake on refusal; nothing was handed over.
            let Ok(rank) = handshake::acceptor_socket(pending.stream(), &ctx.key, &what, left())
            else {
                return;
            };
            match pending.establish(method::shm_config(&ctx.config)) {
                Ok(ep) => (MethodKind::Shm, rank, Method::Shm(Box::new(ep))),
                Err(e) => {
                    tracing::warn!("viaduct: shm connection set-up with rank {rank} failed: {e}");
                    return;
                }
            }
        }
        Incoming::Tcp(stream) => {
            let peer = stream
                .peer_addr()
                .map_or_else(|_| "an unknown address".to_owned(), |a| a.to_string());
            let mut cfg = method::tcp_config(&ctx.config);
            cfg.connect_timeout = left();
            let mut m = match tcp::accept_on(stream, cfg) {
                Ok(ep) => Method::Tcp(Box::new(ep)),
                Err(e) => {
                    tracing::warn!("viaduct: refused tcp connection from {peer}: {e}");
                    return;
                }
            };
            let what = format!("a tcp peer ({peer})");
            // Logged by the handshake on refusal; the connection drops here.
            let Ok(rank) = handshake::acceptor(&mut m, &ctx.key, &what, left()) else {
                return;
            };
            (MethodKind::Tcp, rank, m)
        }
    };
    let _ = ctx.tx.send(accepted);
}

/// The verbs side of set-up before the fence: the device, and one prepared endpoint per peer
/// that may be served over verbs.
struct VerbsOffer {
    /// Why this rank cannot offer verbs, if it cannot.
    local: Result<(), String>,
    #[cfg(feature = "rdma")]
    prepared: Vec<Option<viaduct_verbs::msg::Prepared>>,
}

impl VerbsOffer {
    /// Opens the device and prepares a queue pair for every peer in `peers`.
    fn new(config: &Config, size: u32, peers: &[u32]) -> VerbsOffer {
        if peers.is_empty() {
            // Nothing to open the device for (a job of one, or other methods first).
            return VerbsOffer {
                local: Err("another method comes first for every peer".to_owned()),
                #[cfg(feature = "rdma")]
                prepared: (0..size).map(|_| None).collect(),
            };
        }
        #[cfg(feature = "rdma")]
        {
            let mut prepared: Vec<Option<viaduct_verbs::msg::Prepared>> =
                (0..size).map(|_| None).collect();
            let local = method::verbs::open_device(config).and_then(|(ctx, port)| {
                let (msg_config, pool) =
                    method::verbs::receive_pool(&ctx, config, port, peers.len());
                for &p in peers {
                    let ep = match &pool {
                        Some(pool) => {
                            viaduct_verbs::msg::Prepared::with_pool(&ctx, msg_config.clone(), pool)
                        }
                        None => viaduct_verbs::msg::Prepared::new(&ctx, msg_config.clone()),
                    }
                    .map_err(|e| {
                        let mut why =
                            format!("preparing a queue pair on {} failed: {e}", ctx.name());
                        let mut src = std::error::Error::source(&e);
                        while let Some(s) = src {
                            why.push_str(&format!(": {s}"));
                            src = s.source();
                        }
                        why
                    })?;
                    prepared[p as usize] = Some(ep);
                }
                Ok(())
            });
            if local.is_err() {
                prepared.iter_mut().for_each(|p| *p = None);
            }
            VerbsOffer { local, prepared }
        }
        #[cfg(not(feature = "rdma"))]
        {
            let _ = (config, size, peers);
            VerbsOffer {
                local: Err("this build of viaduct has no verbs support (feature rdma)".to_owned()),
            }
        }
    }

    /// Publishes the mark and the cards.
    fn publish(&self, boot: &mut Bootstrap) -> Result<(), AgentError> {
        match &self.local {
            Ok(()) => boot.publish(VERBS_MARK, "1")?,
            Err(why) => boot.publish(VERBS_MARK, &format!("0{}", hex(why)))?,
        }
        #[cfg(feature = "rdma")]
        for (p, ep) in self.prepared.iter().enumerate() {
            if let Some(ep) = ep {
                boot.publish(&verbs_card_name(p as u32), &ep.card().to_hex())?;
            }
        }
        Ok(())
    }

    /// After the fence: `Ok` when this rank and `peer` both offered verbs to each other,
    /// else why not.
    fn both(
        &self,
        boot: &mut Bootstrap,
        me: u32,
        peer: u32,
    ) -> Result<Result<(), String>, AgentError> {
        if let Err(why) = &self.local {
            return Ok(Err(format!("not on this rank: {why}")));
        }
        #[cfg(feature = "rdma")]
        {
            if self.prepared[peer as usize].is_none() {
                return Ok(Err("not prepared for this peer".to_owned()));
            }
            match boot.lookup(VERBS_MARK, peer) {
                Ok(mark) if mark.starts_with('0') => {
                    return Ok(Err(format!(
                        "not on rank {peer}: {}",
                        mark.get(1..)
                            .and_then(unhex)
                            .unwrap_or_else(|| "no RDMA device".to_owned())
                    )));
                }
                Ok(_) => {}
                Err(crate::bootstrap::BootstrapError::KeyNotFound { .. }) => {
                    return Ok(Err(format!("rank {peer} does not list verbs")));
                }
                Err(e) => return Err(e.into()),
            }
            match boot.lookup(&verbs_card_name(me), peer) {
                Ok(_) => Ok(Ok(())),
                Err(crate::bootstrap::BootstrapError::KeyNotFound { .. }) => Ok(Err(format!(
                    "rank {peer} lists another method first for this rank"
                ))),
                Err(e) => Err(e.into()),
            }
        }
        #[cfg(not(feature = "rdma"))]
        {
            let _ = (boot, me, peer);
            Ok(Err("no verbs support".to_owned()))
        }
    }
}

/// Connects the queue pairs of every verbs peer, then authenticates each connection in
/// increasing peer order (the connector side towards lower ranks), so no two ranks wait on
/// each other. Every rank runs this right after the fence, before any other set-up, so the
/// two ends of each queue pair are ready within moments of each other.
#[cfg(feature = "rdma")]
fn connect_verbs(
    boot: &mut Bootstrap,
    config: &Config,
    offer: &mut VerbsOffer,
    kinds: &[Option<MethodKind>],
    links: &mut [Option<Method>],
) -> Result<(), AgentError> {
    let me = boot.rank();
    let key = boot.job_key().clone();
    let peers: Vec<u32> = (0..kinds.len() as u32)
        .filter(|p| kinds[*p as usize] == Some(MethodKind::Verbs))
        .collect();
    for &p in &peers {
        let card = boot.lookup(&verbs_card_name(me), p)?;
        let card = viaduct_verbs::msg::Card::from_hex(&card).map_err(|_| AgentError::BadCard {
            peer: p,
            method: "verbs",
            card: card.clone(),
        })?;
        let Some(prepared) = offer.prepared[p as usize].take() else {
            continue;
        };
        let ep = prepared.connect(&card).map_err(|e| AgentError::Connect {
            peer: p,
            method: "verbs",
            source: e.into(),
        })?;
        links[p as usize] = Some(Method::Verbs(Box::new(ep)));
    }
    for &p in &peers {
        let Some(m) = links[p as usize].as_mut() else {
            continue;
        };
        let auth = |source| AgentError::Auth {
            peer: p,
            method: "verbs",
            source,
        };
        if p < me {
            handshake::connector(m, &key, me, config.connect_timeout).map_err(auth)?;
        } else {
            let rank = handshake::acceptor(
                m,
                &key,
                &format!("rank {p} over verbs"),
                config.connect_timeout,
            )
            .map_err(auth)?;
            if rank != p {
                return Err(auth(crate::bootstrap::auth::AuthError::Io(
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("the queue pair of rank {p} proved to be rank {rank}"),
                    ),
                )));
            }
        }
    }
    Ok(())
}

/// Connects this rank with every other one; returns one VC per rank (the own rank's is the
/// self loop).
pub(crate) fn connect_all(boot: &mut Bootstrap, config: &Config) -> Result<Vec<Vc>, AgentError> {
    let me = boot.rank();
    let size = boot.size();
    let plans: Vec<Plan> = (0..size).map(|p| plan(config, boot, p)).collect();
    let verbs_peers: Vec<u32> = (0..size)
        .filter(|p| *p != me && plans[*p as usize].verbs_first)
        .collect();
    let listed_verbs = config.transports.contains(&MethodKind::Verbs);
    #[allow(unused_mut)]
    let mut offer = if listed_verbs {
        Some(VerbsOffer::new(config, size, &verbs_peers))
    } else {
        None
    };
    let fallback_used =
        |k: MethodKind| (0..size).any(|p| p != me && plans[p as usize].fallback == Some(k));
    let key = boot.job_key().clone();
    let preauth = preauth_timeout(config.connect_timeout)?;
    let (tx, rx) = mpsc::channel::<Accepted>();
    // Declared before the listeners, so dropped after them, on every path out of here.
    let mut guard = ListenGuard {
        stop: Arc::new(AtomicBool::new(false)),
        shm_path: None,
        tcp_addr: None,
    };
    let mut listeners = Vec::new();
    let mut node_mark = None;
    if fallback_used(MethodKind::Shm) {
        let path = socket_path(me)?;
        let l = shm::Listener::bind(&path).map_err(|e| AgentError::Listen {
            method: "shm",
            source: e.into(),
        })?;
        guard.shm_path = Some(path.clone());
        // Only this user may connect (a peer of another user that gets in before this is
        // refused by its credentials).
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(
                |e| AgentError::Listen {
                    method: "shm",
                    source: MethodError::from(shm::Error::Socket {
                        step: "set permissions",
                        source: e,
                    }),
                },
            )?;
        }
        boot.publish(SHM_CARD, &hex(&path.to_string_lossy()))?;
        let mark = NodeMark::here(&path);
        boot.publish(NODE_CARD, &hex(&mark.card()))?;
        node_mark = Some(mark);
        listeners.push((Listening::Shm(l), MethodKind::Shm));
    }
    if fallback_used(MethodKind::Tcp) {
        let all_local = (0..size)
            .all(|p| plans[p as usize].fallback != Some(MethodKind::Tcp) || boot.is_local(p));
        let ip = tcp_address(config, all_local)?;
        let l = tcp::Listener::bind(SocketAddr::new(ip, 0)).map_err(|e| AgentError::Listen {
            method: "tcp",
            source: e.into(),
        })?;
        let port = l
            .local_addr()
            .map_err(|e| AgentError::Listen {
                method: "tcp",
                source: e.into(),
            })?
            .port();
        guard.tcp_addr = Some(SocketAddr::new(ip, port));
        boot.publish(TCP_CARD, &SocketAddr::new(ip, port).to_string())?;
        listeners.push((Listening::Tcp(l), MethodKind::Tcp));
    }
    if let Some(offer) = &offer {
        offer.publish(boot)?;
    }
    boot.fence()?;
    // Settings that must agree (published by the agent before this fence): a mismatch is
    // named here rather than showing up as a connection that never comes.
    crate::config::compare_agreement(boot, config)?;
    // The launcher says which peers share this node; shm is used only where that is so.
    check_one_node(boot, &plans, node_mark.as_ref())?;

    // The choice per peer, now that both sides' offers are known (the same on both sides: a
    // pair uses verbs when each prepared a queue pair for the other).
    let mut kinds: Vec<Option<MethodKind>> = vec![None; size as usize];
    for p in (0..size).filter(|p| *p != me) {
        let plan = &plans[p as usize];
        let verbs = match &offer {
            Some(offer) if plan.verbs_first => offer.both(boot, me, p)?,
            Some(_) => Ok(()),
            None => Err("not listed".to_owned()),
        };
        kinds[p as usize] = Some(choose(plan, p, verbs)?);
    }
    let higher = |k: MethodKind| -> Vec<u32> {
        (me + 1..size)
            .filter(|p| kinds[*p as usize] == Some(k))
            .collect()
    };

    let mut links: Vec<Option<Method>> = (0..size).map(|_| None).collect();
    #[cfg(feature = "rdma")]
    if let Some(offer) = &mut offer {
        connect_verbs(boot, config, offer, &kinds, &mut links)?;
    }
    drop(offer);

    let mut expected: Vec<u32> = Vec::new();
    let mut idle = Vec::new();
    for (l, kind) in listeners {
        let expect = higher(kind);
        if expect.is_empty() {
            // Nobody may connect to it: no accept loop. Kept (not accepting) until set-up
            // ends, so that the shm socket file stays for the lower ranks' check of it
            // (check_one_node), which comes before they accept this rank's connection.
            idle.push(l);
            continue;
        }
        expected.extend(expect);
        let ctx = AcceptCtx {
            key: key.clone(),
            config: config.clone(),
            preauth,
            tx: tx.clone(),
            stop: Arc::clone(&guard.stop),
        };
        std::thread::Builder::new()
            .name("viaduct-accept".into())
            .spawn(move || accept_loop(l, ctx))
            .map_err(AgentError::Thread)?;
    }
    drop(tx);

    for p in 0..me {
        let kind = kinds[p as usize].unwrap_or(MethodKind::Tcp);
        let mut m = match kind {
            MethodKind::Verbs => continue,
            MethodKind::Shm => {
                let card = boot.lookup(SHM_CARD, p)?;
                let path = unhex(&card).ok_or_else(|| AgentError::BadCard {
                    peer: p,
                    method: "shm",
                    card: card.clone(),
                })?;
                let connect_err = |e: shm::Error| AgentError::Connect {
                    peer: p,
                    method: "shm",
                    source: e.into(),
                };
                // Authenticated on the set-up socket, before the segment is handed over.
                let mut pending = shm::connect_pending(&path).map_err(connect_err)?;
                pending.require_same_user().map_err(connect_err)?;
                handshake::connector_socket(pending.stream(), &key, me, config.connect_timeout)
                    .map_err(|e| AgentError::Auth {
                        peer: p,
                        method: "shm",
                        source: e,
                    })?;
                let ep = pending
                    .establish(method::shm_config(config))
                    .map_err(connect_err)?;
                links[p as usize] = Some(Method::Shm(Box::new(ep)));
                continue;
            }
            MethodKind::Tcp => {
                let card = boot.lookup(TCP_CARD, p)?;
                let addr: SocketAddr = card.parse().map_err(|_| AgentError::BadCard {
                    peer: p,
                    method: "tcp",
                    card: card.clone(),
                })?;
                tcp::connect(addr, method::tcp_config(config))
                    .map(|e| Method::Tcp(Box::new(e)))
                    .map_err(|e| AgentError::Connect {
                        peer: p,
                        method: "tcp",
                        source: e.into(),
                    })?
            }
        };
        handshake::connector(&mut m, &key, me, config.connect_timeout).map_err(|e| {
            AgentError::Auth {
                peer: p,
                method: kind.name(),
                source: e,
            }
        })?;
        links[p as usize] = Some(m);
    }

    let deadline = Instant::now() + config.connect_timeout;
    while !expected.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok((kind, rank, m)) => {
                if expected.contains(&rank) && kinds[rank as usize] == Some(kind) {
                    expected.retain(|r| *r != rank);
                    links[rank as usize] = Some(m);
                } else {
                    tracing::warn!(
                        "viaduct: refused {} connection from rank {rank}: not expected over {} here",
                        kind.name(),
                        kind.name()
                    );
                }
            }
            Err(_) => {
                let missing: Vec<String> = expected.iter().map(|p| p.to_string()).collect();
                return Err(AgentError::SetupTimeout {
                    seconds: config.connect_timeout.as_secs(),
                    what: format!("no connection from rank(s) {}", missing.join(", ")),
                });
            }
        }
    }
    drop(idle);
    drop(guard);
    Ok(links
        .into_iter()
        .enumerate()
        .map(|(p, m)| {
            let link = match m {
                Some(m) => Link::Remote(m),
                None => Link::SelfLoop,
            };
            Vc::new(p as u32, link)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(verbs_first: bool, fallback: Option<MethodKind>, why: Vec<Option<String>>) -> Plan {
        Plan {
            verbs_first,
            fallback,
            why,
        }
    }

    #[test]
    fn verbs_is_chosen_only_when_first_and_offered_by_both() {
        let first = plan_of(true, Some(MethodKind::Tcp), vec![None]);
        assert_eq!(choose(&first, 1, Ok(())).unwrap(), MethodKind::Verbs);
        let no_dev = Err("not on this rank: no RDMA device on this node".to_owned());
        assert_eq!(choose(&first, 1, no_dev.clone()).unwrap(), MethodKind::Tcp);
        let alone = plan_of(true, None, vec![None]);
        let e = choose(&alone, 3, no_dev).unwrap_err().to_string();
        assert!(e.contains("rank 3") && e.contains("no RDMA device"), "{e}");
        let remote = plan_of(
            true,
            None,
            vec![Some("shm: the peer is on another node".to_owned()), None],
        );
        let e = choose(&remote, 2, Err("rank 2 does not list verbs".to_owned()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("shm: the peer is on another node; verbs: rank 2 does not list verbs"),
            "{e}"
        );
    }

    #[test]
    fn preauth_deadline_setting() {
        let ct = Duration::from_secs(30);
        assert_eq!(parse_preauth(None, ct).unwrap(), Duration::from_secs(2));
        assert_eq!(
            parse_preauth(None, Duration::from_secs(1)).unwrap(),
            Duration::from_secs(1)
        );
        assert_eq!(
            parse_preauth(Some(" 0.5 "), ct).unwrap(),
            Duration::from_millis(500)
        );
        for bad in ["0", "-1", "soon", "", "inf", "NaN"] {
            let e = parse_preauth(Some(bad), ct).unwrap_err().to_string();
            assert!(
                e.contains(PREAUTH_TIMEOUT_VAR) && e.contains("positive number of seconds"),
                "{bad:?}: {e}"
            );
        }
    }

    #[test]
    fn node_marks_decide_shm() {
        let dir = std::env::temp_dir().join(format!("viaduct-mark-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (sock, other) = (dir.join("a.sock"), dir.join("b.sock"));
        std::fs::write(&sock, b"").unwrap();
        std::fs::write(&other, b"").unwrap();
        let a = NodeMark::here(&sock);
        assert_eq!(NodeMark::from_card(&a.card()), Some(a.clone()));
        assert_eq!(a.mismatch(1, &a, 0, &sock), None);
        // Only the host name differs: one kernel, the socket reachable, so shm works.
        let mut renamed = a.clone();
        renamed.host = "elsewhere".into();
        assert_eq!(a.mismatch(1, &renamed, 0, &sock), None);
        // The peer's path leads nowhere here (another /tmp).
        let mut away = a.clone();
        away.host = "node2".into();
        let gone = dir.join("gone.sock");
        let e = a.mismatch(3, &away, 0, &gone).unwrap();
        assert!(
            e.contains("ranks 3 (host")
                && e.contains("and 0 (host node2)")
                && e.contains("cannot be found from rank 3")
                && e.contains("gone.sock"),
            "{e}"
        );
        // The path leads to another file than the peer's socket.
        let e = a.mismatch(3, &away, 0, &other).unwrap();
        assert!(e.contains("is another file here"), "{e}");
        let mut other_kernel = a.clone();
        other_kernel.boot_id = "another".into();
        let e = a.mismatch(2, &other_kernel, 1, &sock).unwrap();
        assert!(
            e.contains("different kernels") && e.contains("another"),
            "{e}"
        );
        assert_eq!(NodeMark::from_card("a\nb"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tcp_address_names_a_bad_interface() {
        let mut c = Config {
            tcp_iface: Some("no-such-if0".into()),
            ..Config::default()
        };
        let e = tcp_address(&c, false).unwrap_err().to_string();
        assert!(
            e.contains("VIADUCT_TCP_IFACE")
                && e.contains("\"no-such-if0\"")
                && e.contains("lo (127.0.0.1)"),
            "{e}"
        );
        c.tcp_iface = Some("lo".into());
        assert_eq!(
            tcp_address(&c, false).unwrap(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        c.tcp_iface = None;
        assert_eq!(
            tcp_address(&c, true).unwrap(),
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        );
        assert!(
            !tcp_address(&c, false)
                .map(|a| a.is_unspecified())
                .unwrap_or(false)
        );
    }

    #[test]
    fn cards_round_trip() {
        let p = "/tmp/viaduct-1-2-abcd.sock";
        assert_eq!(unhex(&hex(p)).as_deref(), Some(p));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("abc"), None);
    }
}
