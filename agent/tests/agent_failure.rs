//! A rank killed with SIGKILL in the middle of transfers: every request on its VC ends with an
//! error on the surviving rank, nothing hangs, over shm and tcp.
//!
//! Rank 0 is this test's thread; rank 1 is a child process running this same test binary
//! (the ignored `child_rank` entry), killed by the test with `Child::kill` (SIGKILL).

mod agent_common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agent_common::{config, rank_env};
use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JobKey};
use viaduct_agent::config::{Config, MethodKind};
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, RequestError};

const CHILD_VAR: &str = "VIADUCT_TEST_CHILD_METHOD";

/// The killed rank: connects, says "ready" on standard error, then sleeps without making progress (so the
/// survivor's transfers stay in flight) until it is killed.
#[test]
#[ignore = "child process of the killed-rank tests"]
fn child_rank() {
    let Ok(method) = std::env::var(CHILD_VAR) else {
        return;
    };
    let kind = if method == "tcp" {
        MethodKind::Tcp
    } else {
        MethodKind::Shm
    };
    let boot = Bootstrap::from_env().unwrap();
    let agent = Agent::with_bootstrap(boot, child_config(kind)).unwrap();
    // Take one message so the survivor knows data flows, then stop progressing.
    let mut b = [0u8; 4];
    agent
        .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
        .unwrap();
    // Standard error: the test harness captures standard output.
    eprintln!("ready");
    std::thread::sleep(Duration::from_secs(120));
}

fn child_config(kind: MethodKind) -> Config {
    Config {
        peer_timeout: Duration::from_secs(2),
        ..config(kind)
    }
}

fn is_peer_failure(e: &RequestError) -> bool {
    matches!(e, RequestError::Operation(c)
        if matches!(c.downcast_ref::<AgentError>(), Some(AgentError::PeerFailed { peer: 1, .. })))
}

fn killed_mid_transfer(kind: MethodKind, name: &str) {
    let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    let key = JobKey::generate().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "child_rank",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(rank_env(&server, 1, 2, &key))
        .env(CHILD_VAR, name)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.trim() == "ready" {
                let _ = tx.send(());
            }
        }
    });

    let boot = Bootstrap::from_vars(rank_env(&server, 0, 2, &key)).unwrap();
    let agent = Agent::with_bootstrap(boot, child_config(kind)).unwrap();
    agent.send(1, 1, b"ping").unwrap();
    rx.recv_timeout(Duration::from_secs(60))
        .expect("child ready");
    // In flight when the peer dies: a rendezvous send, many eager sends (filling the method's
    // window), and a receive from it.
    let mut reqs: Vec<Request> = vec![agent.isend(1, 2, &vec![5u8; 16 << 20]).unwrap()];
    for _ in 0..600 {
        reqs.push(agent.isend(1, 3, &[6u8; 16_000]).unwrap());
    }
    let (recv, _buf) = agent.irecv(8, Source::Rank(1), TagMatch::Any).unwrap();
    reqs.push(recv);
    for _ in 0..20 {
        agent.make_progress();
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let mut failed = 0;
    for (i, mut r) in reqs.into_iter().enumerate() {
        match r.wait_timeout(Duration::from_secs(60)) {
            Ok(Some(_)) => {}
            Ok(None) => panic!("request {i} did not complete within 60 s of the peer's death"),
            Err(e) => {
                assert!(is_peer_failure(&e), "unexpected error: {e:?}");
                failed += 1;
            }
        }
    }
    // At least the rendezvous send (never matched) and the receive fail.
    assert!(failed >= 2, "only {failed} requests failed");
    // Later operations on the dead VC fail at once; the agent itself still works.
    let e = agent
        .isend(1, 4, b"late")
        .unwrap()
        .wait_timeout(Duration::from_secs(60))
        .expect_err("a send to a dead peer must fail");
    assert!(is_peer_failure(&e), "{e:?}");
    assert!(agent.connect(1).is_err());
    agent.send(0, 9, b"self").unwrap();
    let mut b = [0u8; 4];
    agent
        .recv(&mut b, Source::Rank(0), TagMatch::Tag(9))
        .unwrap();
    drop(agent);
    server.shutdown();
}

#[test]
fn killed_rank_over_shm() {
    killed_mid_transfer(MethodKind::Shm, "shm");
}

#[test]
fn killed_rank_over_tcp() {
    killed_mid_transfer(MethodKind::Tcp, "tcp");
}
