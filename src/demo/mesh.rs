//! [`Mesh`]: a connection from every rank to every other rank over one method, with blocking
//! send and receive on top of the methods' descriptors.
//!
//! Set-up goes through the launcher's key-value space: every rank listens (a unix socket for
//! shared memory, a loopback TCP port for TCP), publishes where, and after one fence accepts a
//! connection from every lower rank, then connects to every higher one. The first message on
//! each connection names the connecting rank. Connections only ever go from lower to higher
//! ranks, and each rank accepts all of its lower peers before it connects upwards, so set-up
//! cannot deadlock.
//!
//! Messages on one connection arrive in the order they were sent; every stage of the demo
//! follows a fixed schedule, so a receive names the exact tag it expects and anything else is a
//! protocol error.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use viaduct_agent::bootstrap::Bootstrap;
use viaduct_fallback::{shm, tcp};

use super::error::DemoError;
use super::link::Link;

/// The longest any one blocking step (a connect, a receive, a flush) may take.
pub const STEP_LIMIT: Duration = Duration::from_secs(20);

/// Tag of the first message on a new connection: the connecting rank's number.
const HELLO: u64 = u64::MAX - 7;

/// The methods the mesh can run over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Shared-memory rings (this machine only).
    Shm,
    /// TCP through io_uring (over the loopback address here).
    Tcp,
}

impl Method {
    /// The method's short name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Shm => "shm",
            Method::Tcp => "tcp",
        }
    }

    /// The method by its short name.
    pub fn parse(name: &str) -> Option<Method> {
        match name {
            "shm" => Some(Method::Shm),
            "tcp" => Some(Method::Tcp),
            _ => None,
        }
    }
}

/// How a rank waits while nothing has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Poll without sleeping (latency and bandwidth runs between two ranks).
    Busy,
    /// Sleep in the method's wait (collectives, where more ranks than cores may run).
    Sleep,
}

/// Listeners of one method, alive until the mesh is connected.
enum Listener {
    Shm(shm::Listener, PathBuf),
    Tcp(tcp::Listener),
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Shm(_, path) = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Connections from this rank to every other rank over one method.
pub struct Mesh {
    rank: u32,
    size: u32,
    method: Method,
    links: Vec<Option<Link>>,
    /// How receives and flushes wait.
    pub waiting: Waiting,
}

fn shm_config() -> shm::Config {
    shm::Config {
        // Several ranks share two cores: spin a little, then sleep on the futex.
        spin: 2_000,
        ..shm::Config::default()
    }
}

fn tcp_config() -> tcp::Config {
    tcp::Config {
        spin: 2_000,
        ..tcp::Config::default()
    }
}

impl Mesh {
    /// Connects this rank to every other rank of the job over `method`. `scratch` is a folder
    /// for the shared-memory method's rendezvous sockets.
    pub fn connect(
        boot: &mut Bootstrap,
        method: Method,
        scratch: &Path,
    ) -> Result<Mesh, DemoError> {
        let (rank, size) = (boot.rank(), boot.size());
        let mut links: Vec<Option<Link>> = (0..size).map(|_| None).collect();
        let listener = match method {
            Method::Shm => {
                let path = scratch.join(format!("shm-{rank}.sock"));
                let _ = std::fs::remove_file(&path);
                let l = shm::Listener::bind(&path)
                    .map_err(|source| DemoError::Shm { peer: rank, source })?;
                Listener::Shm(l, path)
            }
            Method::Tcp => {
                let any: SocketAddr = ([127, 0, 0, 1], 0).into();
                let l = tcp::Listener::bind(any)
                    .map_err(|source| DemoError::Tcp { peer: rank, source })?;
                Listener::Tcp(l)
            }
        };
        let card = match &listener {
            Listener::Shm(_, path) => path.display().to_string(),
            Listener::Tcp(l) => l
                .local_addr()
                .map_err(|source| DemoError::Tcp { peer: rank, source })?
                .to_string(),
        };
        let key = format!("demo-{}", method.name());
        boot.publish(&key, &card)?;
        boot.fence()?;

        // Accept every lower rank; each names itself in its first message.
        for _ in 0..rank {
            let mut link = match &listener {
                Listener::Shm(l, _) => Link::shm(
                    u32::MAX,
                    l.accept(shm_config()).map_err(|source| DemoError::Shm {
                        peer: u32::MAX,
                        source,
                    })?,
                ),
                Listener::Tcp(l) => Link::tcp(
                    u32::MAX,
                    l.accept(tcp_config()).map_err(|source| DemoError::Tcp {
                        peer: u32::MAX,
                        source,
                    })?,
                ),
            };
            let peer = recv_hello(&mut link)?;
            if peer >= rank || links[peer as usize].is_some() {
                return Err(DemoError::Protocol(format!(
                    "rank {rank} accepted a connection claiming to be rank {peer}"
                )));
            }
            link.set_peer(peer);
            links[peer as usize] = Some(link);
        }
        drop(listener);
        // Connect to every higher rank.
        for peer in rank + 1..size {
            let card = boot.lookup(&key, peer)?;
            let mut link = match method {
                Method::Shm => Link::shm(
                    peer,
                    shm::connect(&card, shm_config())
                        .map_err(|source| DemoError::Shm { peer, source })?,
                ),
                Method::Tcp => {
                    let addr: SocketAddr = card.parse().map_err(|_| {
                        DemoError::Protocol(format!("rank {peer} published address {card:?}"))
                    })?;
                    Link::tcp(
                        peer,
                        tcp::connect(addr, tcp_config())
                            .map_err(|source| DemoError::Tcp { peer, source })?,
                    )
                }
            };
            send_on(&mut link, HELLO, &rank.to_le_bytes())?;
            links[peer as usize] = Some(link);
        }
        Ok(Mesh {
            rank,
            size,
            method,
            links,
            waiting: Waiting::Sleep,
        })
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the mesh.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The method under the mesh.
    pub fn method(&self) -> Method {
        self.method
    }

    /// How messages to `peer` travel, for the report.
    pub fn note(&self, peer: u32) -> String {
        self.links
            .get(peer as usize)
            .and_then(Option::as_ref)
            .map(Link::note)
            .unwrap_or_default()
    }

    fn link(&mut self, peer: u32) -> Result<&mut Link, DemoError> {
        let me = self.rank;
        self.links
            .get_mut(peer as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| DemoError::Protocol(format!("rank {me} has no link to rank {peer}")))
    }

    /// Reaps completions on every link (so no link's sends stall while this rank waits on
    /// another one).
    fn progress_all(&mut self) -> Result<(), DemoError> {
        for link in self.links.iter_mut().flatten() {
            link.reap()?;
        }
        Ok(())
    }

    /// Sends a copy of `data` to `peer` with `tag`, waiting for resources if needed.
    pub fn send(&mut self, peer: u32, tag: u64, data: &[u8]) -> Result<(), DemoError> {
        let started = Instant::now();
        loop {
            if self.link(peer)?.try_send(tag, data)? {
                return Ok(());
            }
            self.progress_all()?;
            self.idle(peer)?;
            if started.elapsed() > STEP_LIMIT {
                return Err(DemoError::Timeout {
                    what: format!("rank {peer} taking a message from rank {}", self.rank),
                    limit: STEP_LIMIT,
                });
            }
        }
    }

    /// Receives the next message from `peer`, which must carry `tag`, handing its bytes to `f`.
    pub fn recv<R>(
        &mut self,
        peer: u32,
        tag: u64,
        mut f: impl FnMut(&[u8]) -> R,
    ) -> Result<R, DemoError> {
        let me = self.rank;
        self.recv_with(peer, |t, d| {
            if t == tag {
                Ok(f(d))
            } else {
                Err(DemoError::Protocol(format!(
                    "rank {me} expected tag {tag:#x} from rank {peer}, got {t:#x}"
                )))
            }
        })
    }

    /// Receives the next message from `peer` whatever its tag, handing tag and bytes to `f`.
    pub fn recv_with<R>(
        &mut self,
        peer: u32,
        mut f: impl FnMut(u64, &[u8]) -> Result<R, DemoError>,
    ) -> Result<R, DemoError> {
        let started = Instant::now();
        let me = self.rank;
        let mut spins = 0u32;
        loop {
            if let Some(r) = self.link(peer)?.try_recv(&mut f)? {
                return r;
            }
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 {
                self.progress_all()?;
                if started.elapsed() > STEP_LIMIT {
                    return Err(DemoError::Timeout {
                        what: format!("a message from rank {peer} to rank {me}"),
                        limit: STEP_LIMIT,
                    });
                }
            }
            self.idle(peer)?;
        }
    }

    /// Receives a message from `peer` with `tag` into `buf`, which it must fill exactly.
    pub fn recv_into(&mut self, peer: u32, tag: u64, buf: &mut [u8]) -> Result<(), DemoError> {
        let want = buf.len();
        let got = self.recv(peer, tag, |d| {
            if d.len() == want {
                buf.copy_from_slice(d);
            }
            d.len()
        })?;
        if got != want {
            return Err(DemoError::Protocol(format!(
                "rank {} expected {want} bytes from rank {peer}, got {got}",
                self.rank
            )));
        }
        Ok(())
    }

    /// Waits until every send of this rank has completed.
    pub fn flush(&mut self) -> Result<(), DemoError> {
        let started = Instant::now();
        loop {
            self.progress_all()?;
            let busy = self
                .links
                .iter()
                .enumerate()
                .find(|(_, l)| l.as_ref().is_some_and(|l| l.outstanding() > 0))
                .map(|(p, _)| p as u32);
            let Some(peer) = busy else {
                return Ok(());
            };
            if started.elapsed() > STEP_LIMIT {
                return Err(DemoError::Timeout {
                    what: format!("completion of rank {}'s sends to rank {peer}", self.rank),
                    limit: STEP_LIMIT,
                });
            }
            self.idle(peer)?;
        }
    }

    fn idle(&mut self, peer: u32) -> Result<(), DemoError> {
        match self.waiting {
            Waiting::Busy => {
                std::hint::spin_loop();
                Ok(())
            }
            Waiting::Sleep => self.link(peer)?.wait(Duration::from_millis(1)),
        }
    }
}

fn send_on(link: &mut Link, tag: u64, data: &[u8]) -> Result<(), DemoError> {
    let started = Instant::now();
    while !link.try_send(tag, data)? {
        link.reap()?;
        link.wait(Duration::from_millis(1))?;
        if started.elapsed() > STEP_LIMIT {
            return Err(DemoError::Timeout {
                what: "the first message on a new connection".into(),
                limit: STEP_LIMIT,
            });
        }
    }
    Ok(())
}

fn recv_hello(link: &mut Link) -> Result<u32, DemoError> {
    let started = Instant::now();
    loop {
        let got = link.try_recv(&mut |tag, data| match (tag, <[u8; 4]>::try_from(data)) {
            (HELLO, Ok(b)) => Some(u32::from_le_bytes(b)),
            _ => None,
        })?;
        match got {
            Some(Some(peer)) => return Ok(peer),
            Some(None) => {
                return Err(DemoError::Protocol(
                    "the first message on a new connection was not a hello".into(),
                ));
            }
            None => {}
        }
        link.wait(Duration::from_millis(1))?;
        if started.elapsed() > STEP_LIMIT {
            return Err(DemoError::Timeout {
                what: "the hello of a connecting rank".into(),
                limit: STEP_LIMIT,
            });
        }
    }
}
