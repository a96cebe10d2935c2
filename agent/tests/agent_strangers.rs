//! Strangers at a rank's set-up listener: local connections that stay silent, or send
//! garbage, while the job's real ranks set up. The job still sets up within its connect
//! timeout, the strangers are dropped, and over shared memory nothing (no segment) is handed
//! to them. The shm socket's name tells nothing about the job key, and a set-up that fails
//! leaves no socket file behind. Ranks are threads of this process with their own agents,
//! over real shm and tcp; the strangers are plain sockets of this process.
//!
//! The tests find rank 0's listener by looking at this process's sockets, so they run one at
//! a time (one lock).

mod agent_common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use agent_common::{config, rank_env};
use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JobKey};
use viaduct_agent::config::{Config, MethodKind};

/// One test at a time: they look for rank 0's listener among this process's sockets.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How long a test waits for something that must happen.
const BOUND: Duration = Duration::from_secs(30);

/// The shm set-up sockets of this process's ranks (`rank`), by name.
fn shm_sockets(rank: u32) -> Vec<PathBuf> {
    let prefix = format!("viaduct-{}-{rank}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The TCP ports this process listens on (its sockets, matched with `/proc/net/tcp*`).
fn listening_ports() -> HashSet<u16> {
    let mine: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    l.strip_prefix("socket:[")
                        .and_then(|r| r.strip_suffix(']'))
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut ports = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            if f.len() < 10 || f[3] != "0A" || !mine.contains(f[9]) {
                continue;
            }
            if let Some(port) = f[1]
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
            {
                ports.insert(port);
            }
        }
    }
    ports
}

/// Waits until `find` returns something.
fn wait_for<T>(what: &str, mut find: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(t) = find() {
            return t;
        }
        assert!(
            start.elapsed() < BOUND,
            "{what} did not appear within {BOUND:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// A stranger's connection to rank 0's listener.
enum Stranger {
    Shm(UnixStream),
    Tcp(TcpStream),
}

impl Stranger {
    fn send(&mut self, data: &[u8]) {
        let _ = match self {
            Stranger::Shm(s) => s.write_all(data),
            Stranger::Tcp(s) => s.write_all(data),
        };
    }

    /// Everything rank 0 sends until it closes the connection; fails the test if it keeps
    /// the connection open past [`BOUND`].
    fn read_to_close(&mut self) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let start = Instant::now();
        loop {
            let r = match self {
                Stranger::Shm(s) => {
                    s.set_read_timeout(Some(Duration::from_millis(200)))
                        .unwrap();
                    s.read(&mut buf)
                }
                Stranger::Tcp(s) => {
                    s.set_read_timeout(Some(Duration::from_millis(200)))
                        .unwrap();
                    s.read(&mut buf)
                }
            };
            match r {
                Ok(0) => return got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    assert!(
                        start.elapsed() < BOUND,
                        "a stranger's connection was still open after {BOUND:?}"
                    );
                }
                // Reset by rank 0: closed as well.
                Err(_) => return got,
            }
        }
    }
}

/// Starts the bootstrap of rank `rank` of a job of two on a thread (it waits for the other
/// rank's); the result comes on the returned channel.
fn boot_rank(server: &Pmi1Server, rank: u32, key: &JobKey) -> mpsc::Receiver<Bootstrap> {
    let vars = rank_env(server, rank, 2, key);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(Bootstrap::from_vars(vars).expect("bootstrap"));
    });
    rx
}

/// Sets up the agent of the rank of `boot` on a thread; reports its set-up result on `tx`,
/// then finalizes.
fn spawn_rank(boot: Bootstrap, cfg: Config, tx: mpsc::Sender<(u32, Result<(), String>)>) {
    let rank = boot.rank();
    thread::spawn(move || match Agent::with_bootstrap(boot, cfg) {
        Ok(agent) => {
            let _ = tx.send((rank, Ok(())));
            let _ = agent.finalize();
        }
        Err(e) => {
            let _ = tx.send((rank, Err(format!("{e}: {e:?}"))));
        }
    });
}

/// Rank 0 starts; two silent strangers and one that sends garbage connect to its listener;
/// then rank 1 starts its set-up (its bootstrap is ready before, as rank 0's needs it). Before the per-connection deadline each silent stranger held rank 0's
/// single accept loop for the whole connect timeout, so the job failed with "no connection
/// from rank(s) 1".
fn strangers_do_not_block_set_up(method: MethodKind) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let server = Pmi1Server::start(ServerConfig::new(2)).expect("PMI server");
    let key = JobKey::generate().expect("key");
    let mut cfg = config(method);
    cfg.connect_timeout = Duration::from_secs(8);
    let before = listening_ports();
    let (tx, rx) = mpsc::channel();
    let boot0 = boot_rank(&server, 0, &key);
    let boot1 = boot_rank(&server, 1, &key);
    let boot0 = boot0.recv_timeout(BOUND).expect("rank 0's bootstrap");
    let boot1 = boot1.recv_timeout(BOUND).expect("rank 1's bootstrap");
    spawn_rank(boot0, cfg.clone(), tx.clone());

    let connect = || match method {
        MethodKind::Shm => {
            // Rank 0 restricts the socket to its user right after binding it.
            let mode = |p: &PathBuf| {
                std::fs::metadata(p)
                    .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
                    .unwrap_or(0)
            };
            let path = wait_for("rank 0's shm socket, open to its user only", || {
                shm_sockets(0).into_iter().find(|p| mode(p) == 0o600)
            });
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let hex = key.to_hex();
            for at in 0..=hex.len() - 8 {
                assert!(
                    !name.contains(&hex[at..at + 8]),
                    "the socket name {name} contains digits of the job key"
                );
            }
            Stranger::Shm(UnixStream::connect(&path).expect("connect to rank 0"))
        }
        _ => {
            let pmi = server.addr().port();
            let port = wait_for("rank 0's tcp listener", || {
                listening_ports()
                    .into_iter()
                    .find(|p| *p != pmi && !before.contains(p))
            });
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            Stranger::Tcp(TcpStream::connect(addr).expect("connect to rank 0"))
        }
    };
    let mut silent = [connect(), connect()];
    let mut garbage = connect();
    garbage.send(&[0x5a; 200]);

    let start = Instant::now();
    spawn_rank(boot1, cfg.clone(), tx);
    for _ in 0..2 {
        let (rank, result) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a rank hung in set-up");
        if let Err(e) = result {
            panic!("{method:?}: rank {rank} failed set-up beside the strangers: {e}");
        }
    }
    let took = start.elapsed();
    println!("{method:?}: the job set up in {took:?} beside three strangers");

    // Each stranger is dropped; over shm none got the segment's set-up message (which carries
    // the segment's descriptor and ends in "viaduct1").
    for s in silent.iter_mut().chain([&mut garbage]) {
        let got = s.read_to_close();
        assert!(
            !got.windows(8).any(|w| w == b"viaduct1"),
            "{method:?}: a stranger was sent the shared segment's set-up message"
        );
    }
    server.shutdown();
}

#[test]
fn strangers_at_the_listener_do_not_block_set_up_over_tcp() {
    strangers_do_not_block_set_up(MethodKind::Tcp);
}

#[test]
fn strangers_at_the_listener_do_not_block_set_up_over_shm() {
    strangers_do_not_block_set_up(MethodKind::Shm);
}

/// A job whose rank 1 holds another key fails set-up; afterwards no shm socket file of rank 0
/// is left (before, rank 0's accept thread kept the listener, and its file, open for good).
#[test]
fn a_failed_set_up_leaves_no_socket_file() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let server = Pmi1Server::start(ServerConfig::new(2)).expect("PMI server");
    let keys = [
        JobKey::generate().expect("key"),
        JobKey::generate().expect("key"),
    ];
    let (tx, rx) = mpsc::channel();
    let boots: Vec<_> = (0..2u32)
        .map(|rank| boot_rank(&server, rank, &keys[rank as usize]))
        .collect();
    for boot in boots {
        let mut cfg = config(MethodKind::Shm);
        cfg.connect_timeout = Duration::from_secs(3);
        spawn_rank(
            boot.recv_timeout(BOUND).expect("bootstrap"),
            cfg,
            tx.clone(),
        );
    }
    for _ in 0..2 {
        let (rank, result) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a rank hung in set-up");
        assert!(
            result.is_err(),
            "rank {rank} joined a job it holds no key of"
        );
    }
    server.shutdown();
    let left = shm_sockets(0);
    assert!(
        left.is_empty(),
        "a failed set-up left its socket file(s) behind: {left:?}"
    );
}
