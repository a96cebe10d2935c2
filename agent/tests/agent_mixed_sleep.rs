//! A rank with VCs of both kinds (a shared-memory VC to a rank on its node, a TCP VC to a
//! rank on another node) sleeps on both at once: a message on either wakes its blocking
//! receive, and while idle it does not wake every half millisecond.
//!
//! Ranks are threads of this process. The launcher's process mapping is rewritten on its way
//! to the ranks (a line proxy in front of the PMI-1 server) so that ranks 0 and 1 count as one
//! node and rank 2 as another: rank 0 then reaches rank 1 over shared memory and rank 2 over
//! TCP, as in a job over two nodes.

mod agent_common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::JobKey;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::config::{Config, MethodKind, ProgressMode};
use viaduct_agent::matching::{Source, TagMatch};

/// A message must wake the receiver within this long (generous: the machine may be loaded).
const SOON: Duration = Duration::from_secs(4);
/// How long rank 0 stays idle in blocking progress while its wake-ups are counted.
const IDLE: Duration = Duration::from_secs(1);
/// Most voluntary context switches rank 0's thread may make while idle for [`IDLE`]. Its
/// sleep ends at the shared-memory liveness interval (20 ms, so about 50 a second) or when
/// a peer's keepalive arrives; turns of 0.5 ms on each kind would make about 2000.
const IDLE_SWITCHES_MAX: u64 = 400;

/// Ranks 0 and 1 on node 0, rank 2 on node 1.
const MAPPING: &str = "(vector,(0,1,2),(1,1,1))";

/// A proxy in front of `server` that hands its clients `MAPPING` as the process mapping;
/// returns its address. Its threads end with the connections.
fn mapping_proxy(server: std::net::SocketAddr, size: u32) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("proxy listener");
    let addr = listener.local_addr().expect("proxy address");
    let preset = format!("value=(vector,(0,1,{size}))");
    let wanted = format!("value={MAPPING}");
    thread::spawn(move || {
        for _ in 0..size {
            let Ok((client, _)) = listener.accept() else {
                return;
            };
            let upstream = TcpStream::connect(server).expect("PMI server");
            let (mut c_in, mut u_out) = (
                client.try_clone().expect("clone"),
                upstream.try_clone().expect("clone"),
            );
            thread::spawn(move || {
                let _ = std::io::copy(&mut c_in, &mut u_out);
                let _ = u_out.shutdown(std::net::Shutdown::Write);
            });
            let (preset, wanted) = (preset.clone(), wanted.clone());
            thread::spawn(move || {
                let mut from = BufReader::new(upstream);
                let mut to = client;
                let mut line = String::new();
                while from.read_line(&mut line).unwrap_or(0) > 0 {
                    let out = line.replace(&preset, &wanted);
                    if to.write_all(out.as_bytes()).is_err() {
                        break;
                    }
                    line.clear();
                }
                let _ = to.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    addr.to_string()
}

/// Runs `body` on three ranks (threads) with `MAPPING`; returns their results in rank order.
fn job<T, F>(config: Config, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Agent) -> T + Send + Sync + 'static,
{
    const SIZE: u32 = 3;
    let server = Pmi1Server::start(ServerConfig::new(SIZE)).expect("PMI server");
    let port = mapping_proxy(server.addr(), SIZE);
    let key = JobKey::generate().expect("job key");
    // Each rank's PMI environment, its server the mapping proxy.
    let vars = |rank| {
        let mut vars = agent_common::rank_env(&server, rank, SIZE, &key);
        vars.retain(|(k, _)| k != "PMI_PORT");
        vars.push(("PMI_PORT".to_owned(), port.clone()));
        vars
    };
    let results = agent_common::run_ranks(SIZE, vars, config, true, body);
    server.shutdown();
    results
}

/// The calling thread's voluntary context switches so far (each sleep that ends is one).
fn voluntary_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").expect("thread status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .expect("voluntary_ctxt_switches")
        .trim()
        .parse()
        .expect("a count")
}

fn config() -> Config {
    Config {
        transports: vec![MethodKind::Shm, MethodKind::Tcp],
        connect_timeout: Duration::from_secs(30),
        // Sleep at once, without a spin first.
        progress: ProgressMode::Block,
        ..Config::default()
    }
}

fn recv_from(agent: &Agent, peer: u32, tag: u32) -> Vec<u8> {
    let mut b = [0u8; 32];
    let st = agent
        .recv(&mut b, Source::Rank(peer), TagMatch::Tag(tag))
        .expect("recv");
    b[..st.count() as usize].to_vec()
}

#[test]
fn a_rank_with_shm_and_tcp_vcs_sleeps_on_both_at_once() {
    let out = job(config(), |agent| {
        match agent.rank() {
            0 => {
                assert_eq!(agent.method_of(1), Some("shm"), "rank 1 is on this node");
                assert_eq!(agent.method_of(2), Some("tcp"), "rank 2 is on another node");
                // Idle, asleep on both VCs: count the sleeps that end.
                let before = voluntary_switches();
                let start = Instant::now();
                agent.make_progress_blocking(IDLE);
                let (idle, switches) = (start.elapsed(), voluntary_switches() - before);
                // A blocking receive from the TCP peer wakes when its message comes.
                agent.send(2, 1, b"go").expect("go to 2");
                let start = Instant::now();
                assert_eq!(recv_from(&agent, 2, 2), b"over tcp");
                let tcp_wait = start.elapsed();
                // And one from the shared-memory peer likewise.
                agent.send(1, 1, b"go").expect("go to 1");
                let start = Instant::now();
                assert_eq!(recv_from(&agent, 1, 3), b"over shm");
                let shm_wait = start.elapsed();
                Some((idle, switches, tcp_wait, shm_wait))
            }
            peer => {
                assert_eq!(recv_from(&agent, 0, 1), b"go");
                // Let rank 0 fall asleep on both VCs again.
                thread::sleep(Duration::from_millis(200));
                let (tag, data): (u32, &[u8]) = if peer == 2 {
                    (2, b"over tcp")
                } else {
                    (3, b"over shm")
                };
                agent.send(0, tag, data).expect("send to 0");
                None
            }
        }
    });
    let (idle, switches, tcp_wait, shm_wait) = out[0].expect("rank 0's figures");
    eprintln!(
        "rank 0: {switches} voluntary switches in {idle:?} idle; woken by tcp after {tcp_wait:?}, by shm after {shm_wait:?}"
    );
    assert!(
        idle >= IDLE - Duration::from_millis(10),
        "idle progress returned after {idle:?}"
    );
    assert!(
        switches <= IDLE_SWITCHES_MAX,
        "rank 0 woke {switches} times in {idle:?} of idle sleep on a shm and a TCP VC"
    );
    assert!(
        tcp_wait < SOON,
        "the TCP message woke rank 0 after {tcp_wait:?}"
    );
    assert!(
        shm_wait < SOON,
        "the shm message woke rank 0 after {shm_wait:?}"
    );
}
