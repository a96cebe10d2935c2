//! The agent's tagged messaging over the verbs method (RC queue pairs), between ranks that are
//! threads of this process, each with its own agent, connected through a real PMI-1 exchange,
//! real queue pairs on one RDMA device (soft-RoCE `rxe0` in the VM of `scripts/rxe-vm`), and
//! the job-key handshake.
//!
//! Without a device the tests that need one print `SKIPPED: ...` and return, unless
//! `VIADUCT_REQUIRE_RDMA=1` is set (the VM sets it), where a missing device fails them. Run one
//! at a time: `--test-threads=1`.
#![cfg(feature = "rdma")]

mod agent_common;

use std::sync::mpsc;
use std::time::Duration;

use agent_common::{config, job, rank_env};
use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JobKey};
use viaduct_agent::config::{Config, MethodKind};
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, RequestError, wait_all};

fn have_rdma() -> bool {
    let names = viaduct_verbs::device::names().unwrap_or_default();
    if names.is_empty() {
        if std::env::var("VIADUCT_REQUIRE_RDMA").as_deref() == Ok("1") {
            panic!("VIADUCT_REQUIRE_RDMA=1 but this machine has no RDMA device");
        }
        println!("SKIPPED: no RDMA device (run through scripts/rxe-vm)");
        return false;
    }
    true
}

fn verbs() -> Config {
    config(MethodKind::Verbs)
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

fn ping_pong(agent: Agent) {
    let me = agent.rank();
    let peer = 1 - me;
    assert_eq!(agent.method_of(peer), Some("verbs"));
    for (i, len) in [
        0usize,
        1,
        100,
        16_000,
        16_321,
        65_536,
        100_000,
        1 << 20,
        5 << 20,
    ]
    .into_iter()
    .enumerate()
    {
        // Two rounds each, one for the longest (the emulated guest is slow).
        for round in 0..if len > 100_000 { 1 } else { 2u32 } {
            let data = pattern(len, round + i as u32);
            let mut buf = vec![0u8; len];
            if me == 0 {
                agent.send(peer, i as u32, &data).unwrap();
                let st = agent
                    .recv(&mut buf, Source::Rank(peer), TagMatch::Tag(i as u32))
                    .unwrap();
                assert_eq!(st.count(), len as u64);
            } else {
                let st = agent.recv(&mut buf, Source::Any, TagMatch::Any).unwrap();
                assert_eq!(
                    (st.source(), st.tag(), st.count()),
                    (Some(0), Some(i as u32), len as u64)
                );
                agent.send(peer, i as u32, &buf).unwrap();
            }
            assert!(buf == data, "payload of {len} bytes differs");
        }
    }
    for _ in 0..100 {
        let mut b = [0u8; 8];
        if me == 0 {
            agent.send(1, 77, &[1; 8]).unwrap();
            agent
                .recv(&mut b, Source::Rank(1), TagMatch::Tag(77))
                .unwrap();
        } else {
            agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(77))
                .unwrap();
            agent.send(0, 77, &b).unwrap();
        }
    }
}

/// Every rank sends to every other one, receives with any source and any tag.
fn any_source_any_tag(agent: Agent) {
    const PER_PEER: u32 = 12;
    let me = agent.rank();
    let n = agent.size();
    for p in (0..n).filter(|p| *p != me) {
        assert_eq!(agent.method_of(p), Some("verbs"));
    }
    let mut sends: Vec<Request> = Vec::new();
    for round in 0..PER_PEER {
        for p in (0..n).filter(|p| *p != me) {
            let len = if round % 4 == 3 { 40_000 } else { 64 };
            let mut msg = pattern(len, me * 1000 + round);
            msg[..2].copy_from_slice(&[me as u8, round as u8]);
            sends.push(agent.isend(p, 100 + round, &msg).unwrap());
        }
    }
    let mut next = vec![0u32; n as usize];
    for _ in 0..PER_PEER * (n - 1) {
        let (mut r, buf) = agent.irecv(40_000, Source::Any, TagMatch::Any).unwrap();
        let st = r.wait().unwrap();
        let data = buf.take();
        let src = st.source().unwrap();
        let round = next[src as usize];
        assert_eq!((data[0] as u32, data[1] as u32), (src, round));
        assert_eq!(st.tag(), Some(100 + round));
        let mut want = pattern(data.len(), src * 1000 + round);
        want[..2].copy_from_slice(&[src as u8, round as u8]);
        assert!(data == want, "message {round} of rank {src} differs");
        next[src as usize] += 1;
    }
    wait_all(&mut sends, None).unwrap();
}

/// Messages that arrive before their receive wait in the unexpected queue, in order.
fn unexpected(agent: Agent) {
    const N: u32 = 500;
    if agent.rank() == 0 {
        for i in 0..N {
            agent.isend(1, 1, &i.to_le_bytes()).unwrap().wait().unwrap();
        }
        agent.ssend(1, 2, b"done").unwrap();
    } else {
        let mut b = [0u8; 4];
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(2))
            .unwrap();
        assert_eq!(agent.unexpected(), (N as usize, 4 * N as usize));
        for i in 0..N {
            agent.recv(&mut b, Source::Any, TagMatch::Tag(1)).unwrap();
            assert_eq!(u32::from_le_bytes(b), i);
        }
        assert_eq!(agent.unexpected(), (0, 0));
    }
}

fn truncation(agent: Agent) {
    if agent.rank() == 0 {
        agent.send(1, 1, &[9u8; 100]).unwrap();
        agent.send(1, 2, &vec![8u8; 1 << 20]).unwrap();
    } else {
        for (tag, len, byte) in [(1u32, 100u64, 9u8), (2, 1 << 20, 8)] {
            let (mut r, buf) = agent.irecv(10, Source::Any, TagMatch::Tag(tag)).unwrap();
            let e = r.wait().unwrap_err();
            let RequestError::Operation(c) = &e else {
                panic!("{e:?}")
            };
            assert!(matches!(
                c.downcast_ref::<AgentError>(),
                Some(AgentError::Truncated { len: l, capacity: 10 }) if *l == len
            ));
            assert_eq!(buf.take(), vec![byte; 10]);
        }
    }
}

/// The VC's byte stream over verbs: shown in place, consumed in parts.
fn byte_stream(agent: Agent) {
    let limit = Duration::from_secs(30);
    if agent.rank() == 0 {
        let mut reqs = vec![
            agent.write(1, b"first".to_vec()).unwrap(),
            agent.isend(1, 7, b"tagged").unwrap(),
            agent.write(1, pattern(300_000, 5)).unwrap(),
        ];
        wait_all(&mut reqs, None).unwrap();
    } else {
        let mut got = Vec::new();
        let n = agent
            .next_timeout(0, limit, |d| {
                got.extend_from_slice(&d[..2]);
                2
            })
            .unwrap();
        assert_eq!(n, Some(2));
        agent
            .next_timeout(0, limit, |d| {
                got.extend_from_slice(d);
                d.len()
            })
            .unwrap();
        assert_eq!(got, b"first");
        let mut b = [0u8; 6];
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(7))
            .unwrap();
        assert_eq!(&b, b"tagged");
        let mut big = Vec::new();
        while big.len() < 300_000 {
            agent
                .next_timeout(0, limit, |d| {
                    big.extend_from_slice(d);
                    d.len()
                })
                .unwrap();
        }
        assert!(big == pattern(300_000, 5));
    }
}

#[test]
fn ping_pong_0_to_5_mib_over_verbs() {
    if have_rdma() {
        job(2, verbs(), ping_pong);
    }
}

#[test]
fn any_source_any_tag_between_4_ranks() {
    if have_rdma() {
        job(4, verbs(), any_source_any_tag);
    }
}

#[test]
fn unexpected_messages() {
    if have_rdma() {
        job(2, verbs(), unexpected);
    }
}

#[test]
fn truncated_receives() {
    if have_rdma() {
        job(2, verbs(), truncation);
    }
}

#[test]
fn stream_next_and_consume() {
    if have_rdma() {
        job(2, verbs(), byte_stream);
    }
}

#[test]
fn verbs_listed_first_falls_back_to_tcp_without_a_device() {
    let has = !viaduct_verbs::device::names()
        .unwrap_or_default()
        .is_empty();
    let cfg = Config {
        transports: vec![MethodKind::Verbs, MethodKind::Tcp],
        // In the VM a device exists: name one that does not, so verbs cannot be offered.
        rdma_device: has.then(|| "no-such-device".to_owned()),
        ..verbs()
    };
    let kinds = job(2, cfg, |a| a.method_of(1 - a.rank()).unwrap());
    assert_eq!(kinds, vec!["tcp", "tcp"]);
}

/// `verbs` alone where it cannot work fails at init, on every rank, naming the cause.
#[test]
fn verbs_alone_without_a_device_fails_at_init_naming_the_cause() {
    let has = !viaduct_verbs::device::names()
        .unwrap_or_default()
        .is_empty();
    let cfg = Config {
        rdma_device: has.then(|| "no-such-device".to_owned()),
        connect_timeout: Duration::from_secs(20),
        ..verbs()
    };
    let server = Pmi1Server::start(ServerConfig::new(2)).expect("PMI server");
    let key = JobKey::generate().expect("job key");
    let (tx, rx) = mpsc::channel();
    for rank in 0..2 {
        let vars = rank_env(&server, rank, 2, &key);
        let (tx, cfg) = (tx.clone(), cfg.clone());
        std::thread::spawn(move || {
            let boot = Bootstrap::from_vars(vars).expect("bootstrap");
            let r = Agent::with_bootstrap(boot, cfg).map(|_| ());
            let _ = tx.send((rank, r));
        });
    }
    for _ in 0..2 {
        let (rank, r) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("init must fail, not hang");
        let e = r.expect_err("init over verbs alone must fail");
        let text = e.to_string();
        println!("rank {rank}: {text}");
        assert!(matches!(e, AgentError::NoMethod { .. }), "{e:?}");
        let cause = if has {
            "no RDMA device named no-such-device"
        } else {
            "no RDMA device"
        };
        assert!(text.contains(cause), "{text}");
    }
    server.shutdown();
}

const CHILD_VAR: &str = "VIADUCT_TEST_VERBS_CHILD";

fn failure_config() -> Config {
    Config {
        peer_timeout: Duration::from_secs(2),
        ..verbs()
    }
}

/// The rank killed by `a_killed_rank_fails_every_request_on_its_vc`: connects, takes one
/// message, says "ready" on standard error, then sleeps without progress until killed.
#[test]
#[ignore = "child process of the killed-rank test"]
fn verbs_child_rank() {
    if std::env::var(CHILD_VAR).is_err() {
        return;
    }
    let boot = Bootstrap::from_env().unwrap();
    let agent = Agent::with_bootstrap(boot, failure_config()).unwrap();
    let mut b = [0u8; 4];
    agent
        .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
        .unwrap();
    eprintln!("ready");
    std::thread::sleep(Duration::from_secs(120));
}

/// A rank killed with SIGKILL while transfers to and from it are in flight over verbs: every
/// request on its VC ends (most with the peer's failure) on the surviving rank; nothing hangs.
#[test]
fn a_killed_rank_fails_every_request_on_its_vc() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    if !have_rdma() {
        return;
    }
    let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    let key = JobKey::generate().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "verbs_child_rank",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(rank_env(&server, 1, 2, &key))
        .env(CHILD_VAR, "1")
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
    let agent = Agent::with_bootstrap(boot, failure_config()).unwrap();
    assert_eq!(agent.method_of(1), Some("verbs"));
    agent.send(1, 1, b"ping").unwrap();
    rx.recv_timeout(Duration::from_secs(60))
        .expect("child ready");
    let mut reqs: Vec<Request> = vec![agent.isend(1, 2, &vec![5u8; 2 << 20]).unwrap()];
    for _ in 0..100 {
        reqs.push(agent.isend(1, 3, &[6u8; 16_000]).unwrap());
    }
    let (recv, _buf) = agent.irecv(8, Source::Rank(1), TagMatch::Any).unwrap();
    reqs.push(recv);
    for _ in 0..20 {
        agent.make_progress();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let t = std::time::Instant::now();
    let mut failed = 0;
    let mut last = String::new();
    for (i, mut r) in reqs.into_iter().enumerate() {
        match r.wait_timeout(Duration::from_secs(60)) {
            Ok(Some(_)) => {}
            Ok(None) => panic!("request {i} did not complete within 60 s of the peer's death"),
            Err(e) => {
                let RequestError::Operation(c) = &e else {
                    panic!("{e:?}")
                };
                let cause = c.downcast_ref::<AgentError>();
                assert!(
                    matches!(cause, Some(AgentError::PeerFailed { peer: 1, .. })),
                    "unexpected error: {e:?}"
                );
                last = cause.map(|a| a.to_string()).unwrap_or_default();
                failed += 1;
            }
        }
    }
    println!(
        "{failed} requests failed {:?} after the kill: {last}",
        t.elapsed()
    );
    // At least the rendezvous send (never matched) and the receive fail.
    assert!(failed >= 2, "{failed}");
    assert!(agent.connect(1).is_err());
    drop(agent);
    server.shutdown();
}
