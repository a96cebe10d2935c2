//! The heartbeat thread: proof of life that runs independently of the user's calls.
//!
//! A rank may compute outside the library for far longer than the peer timeout while a peer
//! waits on it; its methods' own heartbeats (bumped by polls and waits) then stop, yet the
//! rank is alive. So each agent runs one thread, `viaduct-heartbeat`, which every heartbeat
//! interval ([`crate::method::heartbeat_interval`]: a quarter of `VIADUCT_PEER_TIMEOUT`)
//! proves to each connected peer that this process runs:
//!
//! - **shared memory**: it bumps this side's background heartbeat counter in the segment of
//!   each shm VC ([`shm::Heartbeat`]: one relaxed atomic add; the handle keeps the mapping
//!   alive), which the peer's `peer_heard` reads;
//! - **TCP**: it sends a datagram to each TCP peer's *liveness socket*, a UDP socket every
//!   rank with TCP peers binds to the address of its TCP listener (port chosen by the kernel)
//!   and publishes with its business cards (`vd-live`: `ip:port`). The same thread receives
//!   the peers' datagrams and notes, per rank, when it last heard one ([`Heard`]); the
//!   agent's silence check combines that with the method's own `peer_heard`.
//!
//! A datagram is `"VDLIVE01"`, the sender's rank, the receiver's rank, a sequence number and
//! the first 16 bytes of HMAC-SHA256 under the job key of those fields: a process without the
//! key cannot forge one, a datagram meant for another rank or job does not count, and a
//! replayed one (a sequence number not above the last accepted from that rank) is ignored.
//! Datagrams may be lost: a peer is judged only after the whole peer timeout, four intervals.
//!
//! A stopped process (`SIGSTOP`) stops this thread too, and a dead one sends nothing, so
//! both still fall silent; a process that only computes does not. The thread stops, and is
//! joined, at finalize or when the agent is dropped.
//!
//! The thread works in a descriptor table of its own that holds only its liveness socket and
//! the segments it keeps mapped ([`viaduct_fallback::fd::own_table_keeping`]), so that the
//! rank's table has one user and the rank's socket calls skip the file reference counting of
//! shared tables; descriptors the rank closes are closed for good (the thread holds no copy).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use viaduct_fallback::shm;

use crate::bootstrap::Bootstrap;
use crate::config::{Config, MethodKind};
use crate::error::AgentError;
use crate::method::Method;
use crate::vc::{Link, Vc};

/// The business card of a rank's liveness socket: `ip:port`.
const LIVE_CARD: &str = "vd-live";
const MAGIC: &[u8; 8] = b"VDLIVE01";
const TAG_LEN: usize = 16;
/// Magic, sender, receiver, sequence number, tag.
const DATAGRAM_LEN: usize = 8 + 4 + 4 + 8 + TAG_LEN;
/// Domain separation of the tag from the other uses of the job key.
const LABEL: &[u8] = b"viaduct liveness";

type Keyed = Hmac<Sha256>;

/// Binds this rank's liveness socket when some peer may be served over TCP, on the address
/// its TCP listener binds to ([`crate::connect::tcp_address`]), and publishes
/// its card. Call before the set-up fence (in [`crate::connect::connect_all`]), which makes
/// the card visible to every rank.
pub(crate) fn open(boot: &mut Bootstrap, config: &Config) -> Result<Option<UdpSocket>, AgentError> {
    let (me, size) = (boot.rank(), boot.size());
    let tcp_peers: Vec<u32> = (0..size)
        .filter(|p| {
            *p != me && crate::connect::plan(config, boot, *p).fallback == Some(MethodKind::Tcp)
        })
        .collect();
    if tcp_peers.is_empty() {
        return Ok(None);
    }
    let all_local = tcp_peers.iter().all(|p| boot.is_local(*p));
    let ip = crate::connect::tcp_address(config, all_local)?;
    let bind = SocketAddr::new(ip, 0);
    let failed = |source| AgentError::LivenessSocket {
        addr: bind.to_string(),
        source,
    };
    let socket = UdpSocket::bind(bind).map_err(failed)?;
    let port = socket.local_addr().map_err(failed)?.port();
    boot.publish(LIVE_CARD, &SocketAddr::new(ip, port).to_string())?;
    Ok(Some(socket))
}

/// When this rank last heard each peer's liveness datagram (written by the heartbeat thread,
/// read by the silence check).
#[derive(Debug)]
pub(crate) struct Heard {
    base: Instant,
    /// Per rank: nanoseconds after `base` plus one; 0 for never.
    at: Vec<AtomicU64>,
}

impl Heard {
    fn new(size: usize) -> Heard {
        Heard {
            base: Instant::now(),
            at: (0..size).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn note(&self, peer: u32) {
        let nanos = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        if let Some(a) = self.at.get(peer as usize) {
            a.store(nanos + 1, Ordering::Relaxed);
        }
    }

    /// The last time a valid liveness datagram of `peer` arrived, if one did.
    pub(crate) fn last(&self, peer: u32) -> Option<Instant> {
        match self.at.get(peer as usize)?.load(Ordering::Relaxed) {
            0 => None,
            n => Some(self.base + Duration::from_nanos(n - 1)),
        }
    }
}

fn tag(mac: &Keyed, sender: u32, receiver: u32, seq: u64) -> [u8; TAG_LEN] {
    let mut mac = mac.clone();
    mac.update(LABEL);
    mac.update(&sender.to_be_bytes());
    mac.update(&receiver.to_be_bytes());
    mac.update(&seq.to_be_bytes());
    let full: [u8; 32] = mac.finalize().into_bytes().into();
    let mut t = [0u8; TAG_LEN];
    t.copy_from_slice(&full[..TAG_LEN]);
    t
}

fn datagram(mac: &Keyed, sender: u32, receiver: u32, seq: u64) -> [u8; DATAGRAM_LEN] {
    let mut d = [0u8; DATAGRAM_LEN];
    d[..8].copy_from_slice(MAGIC);
    d[8..12].copy_from_slice(&sender.to_be_bytes());
    d[12..16].copy_from_slice(&receiver.to_be_bytes());
    d[16..24].copy_from_slice(&seq.to_be_bytes());
    d[24..].copy_from_slice(&tag(mac, sender, receiver, seq));
    d
}

/// The sender of a valid datagram addressed to `me` and its sequence number; `None` for
/// anything else.
fn parse(mac: &Keyed, me: u32, d: &[u8]) -> Option<(u32, u64)> {
    if d.len() != DATAGRAM_LEN || &d[..8] != MAGIC {
        return None;
    }
    let word = |at: usize| u32::from_be_bytes(d[at..at + 4].try_into().unwrap_or([0; 4]));
    let (sender, receiver) = (word(8), word(12));
    let seq = u64::from_be_bytes(d[16..24].try_into().unwrap_or([0; 8]));
    let want = tag(mac, sender, receiver, seq);
    // Compared without stopping at the first difference.
    let diff = want
        .iter()
        .zip(&d[24..])
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    (diff == 0 && receiver == me && sender != me).then_some((sender, seq))
}

/// What the heartbeat thread works with.
struct Beats {
    me: u32,
    interval: Duration,
    shm: Vec<shm::Heartbeat>,
    socket: Option<UdpSocket>,
    /// TCP peers and their liveness sockets.
    peers: Vec<(u32, SocketAddr)>,
    mac: Keyed,
    heard: Arc<Heard>,
    stop: Arc<AtomicBool>,
}

impl Beats {
    /// Gives this thread a descriptor table of its own holding only what it uses (its
    /// liveness socket, the shared-memory segments it keeps mapped): while it shares the
    /// rank's table, every system call of the rank's threads on a socket or file takes and
    /// drops a reference on it (4-5 % of a 64-byte TCP ping-pong, measured), which the kernel
    /// skips for a table with one user. Where that fails the table stays shared: slower only.
    fn own_descriptors(&self) {
        use std::os::fd::{AsFd, AsRawFd};
        let keep: Vec<_> = self
            .shm
            .iter()
            .map(|h| h.fd().as_raw_fd())
            .chain(self.socket.as_ref().map(|s| s.as_fd().as_raw_fd()))
            .collect();
        if let Err(e) = viaduct_fallback::fd::own_table_keeping(&keep) {
            tracing::debug!("viaduct: the heartbeat thread shares the rank's descriptors: {e}");
        }
    }

    fn run(self) {
        self.own_descriptors();
        let mut seq: u64 = 0;
        // The highest sequence number accepted from each rank.
        let mut accepted = vec![0u64; self.heard.at.len()];
        let mut buf = [0u8; DATAGRAM_LEN + 1];
        let mut due = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            let now = Instant::now();
            if now >= due {
                for h in &self.shm {
                    h.beat();
                }
                if let Some(s) = &self.socket {
                    for &(peer, addr) in &self.peers {
                        seq += 1;
                        // A lost datagram is one heartbeat missed; the timeout allows for that.
                        let _ = s.send_to(&datagram(&self.mac, self.me, peer, seq), addr);
                    }
                }
                // From now, not from the missed time: a thread held up beats once, not in a
                // burst.
                due = now + self.interval;
            }
            let left = due
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            let Some(s) = &self.socket else {
                std::thread::park_timeout(left);
                continue;
            };
            let got = s
                .set_read_timeout(Some(left))
                .and_then(|()| s.recv(&mut buf));
            match got {
                Ok(len) => {
                    if let Some((sender, n)) = parse(&self.mac, self.me, &buf[..len])
                        && let Some(last) = accepted.get_mut(sender as usize)
                        && n > *last
                    {
                        *last = n;
                        self.heard.note(sender);
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                // Anything else (an error queued by an unreachable peer's ICMP reply): no
                // busy loop on a socket that keeps failing; the next beat comes on time.
                Err(_) => std::thread::park_timeout(left),
            }
        }
    }
}

/// Who runs a heartbeat thread: its rank, the job size and the job key.
struct Rank<'a> {
    me: u32,
    size: usize,
    key: &'a [u8],
}

/// The agent's heartbeat thread (see the module documentation); stopped and joined by
/// [`Heart::stop`] or on drop.
pub(crate) struct Heart {
    heard: Arc<Heard>,
    stop: Arc<AtomicBool>,
    /// A handle on the liveness socket and its own address, to wake the thread from its
    /// receive when it must stop.
    wake: Option<(UdpSocket, SocketAddr)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Heart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heart")
            .field("running", &self.running())
            .finish()
    }
}

impl Heart {
    /// Starts the thread for the connected `vcs`: shm VCs get their segment's heartbeat, TCP
    /// peers their liveness card looked up (published by [`open`] before the set-up fence).
    /// No thread when there is nothing to beat for.
    pub(crate) fn start(
        boot: &mut Bootstrap,
        socket: Option<UdpSocket>,
        vcs: &[Vc],
        config: &Config,
    ) -> Result<Heart, AgentError> {
        let mut shm_beats = Vec::new();
        let mut peers = Vec::new();
        for vc in vcs {
            match &vc.link {
                Link::Remote(Method::Shm(ep)) => shm_beats.push(ep.heartbeat()),
                Link::Remote(Method::Tcp(_)) if socket.is_some() => {
                    let card = boot.lookup(LIVE_CARD, vc.peer)?;
                    let addr: SocketAddr = card.parse().map_err(|_| AgentError::BadCard {
                        peer: vc.peer,
                        method: "liveness",
                        card: card.clone(),
                    })?;
                    peers.push((vc.peer, addr));
                }
                _ => {}
            }
        }
        Heart::spawn(
            Rank {
                me: boot.rank(),
                size: vcs.len(),
                key: boot.job_key().as_bytes(),
            },
            crate::method::heartbeat_interval(config),
            shm_beats,
            socket,
            peers,
        )
    }

    /// Starts the thread of rank `who.me` that beats every `interval` on `shm` and sends to
    /// `peers` over `socket` (and receives on it); no thread when there is nothing to do.
    fn spawn(
        who: Rank<'_>,
        interval: Duration,
        shm: Vec<shm::Heartbeat>,
        socket: Option<UdpSocket>,
        peers: Vec<(u32, SocketAddr)>,
    ) -> Result<Heart, AgentError> {
        let heard = Arc::new(Heard::new(who.size));
        let stop = Arc::new(AtomicBool::new(false));
        if shm.is_empty() && peers.is_empty() {
            return Ok(Heart {
                heard,
                stop,
                wake: None,
                thread: Mutex::new(None),
            });
        }
        let socket = if peers.is_empty() { None } else { socket };
        let wake = match &socket {
            Some(s) => {
                let failed = |source| AgentError::LivenessSocket {
                    addr: "its own address".into(),
                    source,
                };
                let mut own = s.local_addr().map_err(failed)?;
                if own.ip().is_unspecified() {
                    own.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
                }
                Some((s.try_clone().map_err(failed)?, own))
            }
            None => None,
        };
        let mac = <Keyed as Mac>::new_from_slice(who.key).expect("HMAC accepts any key length");
        let beats = Beats {
            me: who.me,
            interval,
            shm,
            socket,
            peers,
            mac,
            heard: Arc::clone(&heard),
            stop: Arc::clone(&stop),
        };
        let thread = std::thread::Builder::new()
            .name("viaduct-heartbeat".into())
            .spawn(move || beats.run())
            .map_err(AgentError::Thread)?;
        Ok(Heart {
            heard,
            stop,
            wake,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// When each peer's liveness datagrams last arrived.
    pub(crate) fn heard(&self) -> Arc<Heard> {
        Arc::clone(&self.heard)
    }

    /// Whether the thread runs.
    pub(crate) fn running(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Stops the thread and waits for it to end (at once: it is woken from its sleep).
    /// Idempotent.
    pub(crate) fn stop(&self) {
        let Some(thread) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        self.stop.store(true, Ordering::Release);
        thread.thread().unpark();
        if let Some((s, own)) = &self.wake {
            // Any datagram wakes the receive; if this one is lost, the read timeout (one
            // heartbeat interval) ends it.
            let _ = s.send_to(&[0], own);
        }
        let _ = thread.join();
    }
}

impl Drop for Heart {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(k: u8) -> Keyed {
        <Keyed as Mac>::new_from_slice(&[k; 32]).unwrap()
    }

    #[test]
    fn datagrams_count_only_with_the_key_for_the_named_receiver() {
        let m = mac(1);
        let d = datagram(&m, 3, 5, 42);
        assert_eq!(parse(&m, 5, &d), Some((3, 42)));
        // Another receiver, another job, a changed byte, a short datagram.
        assert_eq!(parse(&m, 4, &d), None);
        assert_eq!(parse(&mac(2), 5, &d), None);
        for i in 0..DATAGRAM_LEN {
            let mut bad = d;
            bad[i] ^= 1;
            assert_eq!(parse(&m, 5, &bad), None, "byte {i} changed");
        }
        assert_eq!(parse(&m, 5, &d[..DATAGRAM_LEN - 1]), None);
        // A rank's own datagram does not make it alive to itself.
        assert_eq!(parse(&m, 3, &datagram(&m, 3, 3, 1)), None);
    }

    #[test]
    fn heard_reports_the_last_note() {
        let h = Heard::new(3);
        assert!(h.last(1).is_none());
        let before = Instant::now();
        h.note(1);
        let at = h.last(1).unwrap();
        assert!(at >= before - Duration::from_millis(1) && at <= Instant::now());
        assert!(h.last(2).is_none());
        assert!(h.last(7).is_none());
        h.note(7);
    }

    /// A real shared-memory pair: the thread's beats reach the peer end without a single poll
    /// on this end; stopping wakes the thread at once, not after its interval.
    #[test]
    fn thread_beats_shm_and_stops_promptly() {
        let (a, mut b) = shm::pair(shm::Config::default()).unwrap();
        let _ = b.peer_heard();
        let before = Instant::now();
        let interval = Duration::from_secs(30);
        let heart = Heart::spawn(
            Rank {
                me: 0,
                size: 2,
                key: &[7; 32],
            },
            interval,
            vec![a.heartbeat()],
            None,
            Vec::new(),
        )
        .unwrap();
        assert!(heart.running());
        let deadline = Instant::now() + Duration::from_secs(20);
        while b.peer_heard() < before {
            assert!(Instant::now() < deadline, "no beat reached the peer end");
            std::thread::sleep(Duration::from_millis(5));
        }
        // The handle keeps the segment mapped after its endpoint is gone.
        drop(a);
        let asked = Instant::now();
        heart.stop();
        assert!(!heart.running());
        assert!(
            asked.elapsed() < interval / 2,
            "stopping took {:?}",
            asked.elapsed()
        );
        heart.stop();
    }

    /// Two threads over real UDP sockets hear each other; a third without the job key, sending
    /// to the same socket, is never heard. Stopping wakes a thread blocked in its receive.
    #[test]
    fn threads_hear_each_other_over_udp_and_ignore_strangers() {
        let bind = || UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let (s0, s1, s2) = (bind(), bind(), bind());
        let (a0, a1) = (s0.local_addr().unwrap(), s1.local_addr().unwrap());
        let interval = Duration::from_millis(20);
        let run = |me, key: &[u8], s, peers| {
            Heart::spawn(
                Rank { me, size: 3, key },
                interval,
                Vec::new(),
                Some(s),
                peers,
            )
            .unwrap()
        };
        let h0 = run(0, &[1; 32], s0, vec![(1, a1)]);
        let h1 = run(1, &[1; 32], s1, vec![(0, a0)]);
        let stranger = run(2, &[2; 32], s2, vec![(0, a0), (1, a1)]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while h0.heard().last(1).is_none() || h1.heard().last(0).is_none() {
            assert!(
                Instant::now() < deadline,
                "the ranks never heard each other"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // Some of the stranger's datagrams have arrived by now (it sends as often).
        std::thread::sleep(interval * 10);
        assert!(h0.heard().last(2).is_none() && h1.heard().last(2).is_none());
        let slow = Heart::spawn(
            Rank {
                me: 0,
                size: 2,
                key: &[1; 32],
            },
            Duration::from_secs(30),
            Vec::new(),
            Some(bind()),
            vec![(1, a1)],
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let asked = Instant::now();
        drop(slow);
        assert!(
            asked.elapsed() < Duration::from_secs(15),
            "stopping took {:?}",
            asked.elapsed()
        );
        drop((h0, h1, stranger));
    }
}
