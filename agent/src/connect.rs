//! Connection set-up at start: choose a method per peer, exchange business cards, connect and
//! authenticate every VC.
//!
//! Each rank listens on every method some peer needs and publishes the listener's address as
//! its business card (`vd-shm`: the hex-encoded unix socket path of the shared-memory
//! listener; `vd-tcp`: `ip:port`). After one fence, a rank connects to every lower rank and
//! accepts every higher one; each new connection first runs the job-key handshake
//! ([`crate::handshake`]); a stranger is refused, logged, and does not count. Listeners close
//! when set-up ends, so no connection is accepted afterwards.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::mpsc;
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

/// The method `config` picks for `peer`, or why none can serve it.
pub(crate) fn choose(
    config: &Config,
    boot: &Bootstrap,
    peer: u32,
) -> Result<MethodKind, AgentError> {
    let mut why = Vec::new();
    for &kind in &config.transports {
        match kind {
            MethodKind::Shm if boot.is_local(peer) => return Ok(kind),
            MethodKind::Shm => why.push("shm: the peer is on another node".to_owned()),
            MethodKind::Tcp => return Ok(kind),
            MethodKind::Verbs => {
                why.push("verbs: the agent has no verbs method yet (list shm or tcp)".to_owned())
            }
        }
    }
    if why.is_empty() {
        why.push("no method listed".into());
    }
    Err(AgentError::NoMethod {
        peer,
        reason: why.join("; "),
    })
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if s.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The address other nodes can reach this one at (the interface of the default route).
fn node_ip() -> IpAddr {
    let probe = || -> std::io::Result<IpAddr> {
        let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        // No packet is sent: connecting a UDP socket only picks the route and source address.
        s.connect((Ipv4Addr::new(192, 0, 2, 1), 9))?;
        Ok(s.local_addr()?.ip())
    };
    probe().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

enum Listening {
    Shm(shm::Listener),
    Tcp(tcp::Listener),
}

type Accepted = Result<(u32, Method), AgentError>;

fn accept_loop(
    listener: Listening,
    expect: Vec<u32>,
    key: JobKey,
    config: Config,
    tx: mpsc::Sender<Accepted>,
) {
    let mut left = expect;
    let (kind, name) = match &listener {
        Listening::Shm(_) => (MethodKind::Shm, "shm"),
        Listening::Tcp(_) => (MethodKind::Tcp, "tcp"),
    };
    while !left.is_empty() {
        let got: Result<Method, MethodError> = match &listener {
            Listening::Shm(l) => l
                .accept(method::shm_config(&config))
                .map(|e| Method::Shm(Box::new(e)))
                .map_err(MethodError::from),
            Listening::Tcp(l) => l
                .accept(method::tcp_config(&config))
                .map(|e| Method::Tcp(Box::new(e)))
                .map_err(MethodError::from),
        };
        let mut m = match got {
            Ok(m) => m,
            Err(e) => {
                // A peer that broke off its set-up (or a stranger speaking another protocol).
                eprintln!("viaduct: {name} connection set-up failed: {e}");
                continue;
            }
        };
        match handshake::acceptor(
            &mut m,
            &key,
            &format!("a {name} peer"),
            config.connect_timeout,
        ) {
            Ok(rank) if left.contains(&rank) => {
                left.retain(|r| *r != rank);
                if tx.send(Ok((rank, m))).is_err() {
                    return;
                }
            }
            Ok(rank) => {
                eprintln!(
                    "viaduct: refused {name} connection from rank {rank}: not expected over {} here",
                    kind.name()
                );
            }
            // Logged by the handshake; the connection drops here.
            Err(_) => {}
        }
    }
}

/// Connects this rank with every other one; returns one VC per rank (the own rank's is the
/// self loop).
pub(crate) fn connect_all(boot: &mut Bootstrap, config: &Config) -> Result<Vec<Vc>, AgentError> {
    let me = boot.rank();
    let size = boot.size();
    let mut kinds = Vec::with_capacity(size as usize);
    for p in 0..size {
        kinds.push(if p == me {
            None
        } else {
            Some(choose(config, boot, p)?)
        });
    }
    let uses = |k: MethodKind| kinds.contains(&Some(k));
    let higher = |k: MethodKind| -> Vec<u32> {
        (me + 1..size)
            .filter(|p| kinds[*p as usize] == Some(k))
            .collect()
    };
    let key = boot.job_key().clone();
    let (tx, rx) = mpsc::channel::<Accepted>();
    let mut listeners = Vec::new();
    if uses(MethodKind::Shm) {
        let path = std::env::temp_dir().join(format!(
            "viaduct-{}-{}-{}.sock",
            std::process::id(),
            me,
            &key.to_hex()[..8]
        ));
        let _ = std::fs::remove_file(&path);
        let l = shm::Listener::bind(&path).map_err(|e| AgentError::Listen {
            method: "shm",
            source: e.into(),
        })?;
        boot.publish(SHM_CARD, &hex(&path.to_string_lossy()))?;
        listeners.push((Listening::Shm(l), higher(MethodKind::Shm)));
    }
    if uses(MethodKind::Tcp) {
        let all_local =
            (0..size).all(|p| kinds[p as usize] != Some(MethodKind::Tcp) || boot.is_local(p));
        let ip = if all_local {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            node_ip()
        };
        let bind_ip = if all_local {
            ip
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        let l =
            tcp::Listener::bind(SocketAddr::new(bind_ip, 0)).map_err(|e| AgentError::Listen {
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
        boot.publish(TCP_CARD, &SocketAddr::new(ip, port).to_string())?;
        listeners.push((Listening::Tcp(l), higher(MethodKind::Tcp)));
    }
    boot.fence()?;

    let mut expected = 0;
    for (l, expect) in listeners {
        expected += expect.len();
        if expect.is_empty() {
            continue; // dropped now: nobody may connect to it
        }
        let (tx, key, config) = (tx.clone(), key.clone(), config.clone());
        std::thread::Builder::new()
            .name("viaduct-accept".into())
            .spawn(move || accept_loop(l, expect, key, config, tx))
            .map_err(AgentError::Thread)?;
    }
    drop(tx);

    let mut links: Vec<Option<Method>> = (0..size).map(|_| None).collect();
    for p in 0..me {
        let kind = kinds[p as usize].unwrap_or(MethodKind::Tcp);
        let mut m = match kind {
            MethodKind::Shm => {
                let card = boot.lookup(SHM_CARD, p)?;
                let path = unhex(&card).ok_or_else(|| AgentError::BadCard {
                    peer: p,
                    method: "shm",
                    card: card.clone(),
                })?;
                shm::connect(&path, method::shm_config(config))
                    .map(|e| Method::Shm(Box::new(e)))
                    .map_err(|e| AgentError::Connect {
                        peer: p,
                        method: "shm",
                        source: e.into(),
                    })?
            }
            _ => {
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
    for _ in 0..expected {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(Ok((rank, m))) => links[rank as usize] = Some(m),
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                let missing: Vec<String> = (me + 1..size)
                    .filter(|p| links[*p as usize].is_none())
                    .map(|p| p.to_string())
                    .collect();
                return Err(AgentError::SetupTimeout {
                    seconds: config.connect_timeout.as_secs(),
                    what: format!("no connection from rank(s) {}", missing.join(", ")),
                });
            }
        }
    }
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

    #[test]
    fn cards_round_trip() {
        let p = "/tmp/viaduct-1-2-abcd.sock";
        assert_eq!(unhex(&hex(p)).as_deref(), Some(p));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("abc"), None);
    }
}
