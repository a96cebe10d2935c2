//! A rank killed (SIGKILL) while xfer blocks and a collective with it are in flight: every one
//! of them fails with the peer's failure on the surviving rank, nothing hangs, the buffers come
//! back; a block started after the death fails too. Over shm and tcp.
//!
//! Rank 0 is this test's thread; rank 1 is a child process running this same test binary (the
//! ignored `child_rank` entry), killed by the test with `Child::kill`.

mod agent_common;

use std::time::Duration;

use agent_common::child::ChildJob;
use agent_common::config;
use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::Bootstrap;
use viaduct_agent::comm::Comm;
use viaduct_agent::config::{Config, MethodKind};
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, RequestError};
use viaduct_agent::xfer::{Datatype, ReduceOp, Reduction};

const CHILD_VAR: &str = "VIADUCT_TEST_XFER_CHILD_METHOD";

fn child_config(kind: MethodKind) -> Config {
    Config {
        peer_timeout: Duration::from_secs(2),
        ..config(kind)
    }
}

/// The rank that dies: connects, takes one message, says "ready", then sleeps without making
/// progress until it is killed.
#[test]
#[ignore = "child process of the killed-rank test"]
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
    let mut b = [0u8; 4];
    agent
        .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
        .unwrap();
    eprintln!("ready");
    std::thread::sleep(Duration::from_secs(120));
}

fn is_peer_failure(e: &RequestError) -> bool {
    e.failed_peer() == Some(1)
}

fn killed(kind: MethodKind, name: &str) {
    let mut job = ChildJob::spawn("child_rank", CHILD_VAR, name);
    let boot = job.bootstrap();
    let agent = Agent::with_bootstrap(boot, child_config(kind)).unwrap();
    let comm = Comm::world(&agent);
    agent.send(1, 1, b"ping").unwrap();
    job.wait_ready();

    let len = 4 << 20;
    let mut b = comm.xfer_scatter(Some(1), 3);
    let x = b.buffer(vec![1; len]);
    let y = b.buffer(vec![0; len]);
    b.send_op(x, 0, len, 1).recv_op(y, 0, len);
    let (block, bufs) = b.start().unwrap();
    let sum = Reduction::Builtin(Datatype::I64, ReduceOp::Sum);
    let (coll, _out) = comm.iallreduce(vec![0; 1 << 20], &sum).unwrap();
    for _ in 0..20 {
        agent.make_progress();
    }
    job.kill();

    let reqs: Vec<Request> = vec![block, coll];
    for (i, mut r) in reqs.into_iter().enumerate() {
        match r.wait_timeout(Duration::from_secs(60)) {
            Ok(Some(_)) => panic!("request {i} completed although its peer died"),
            Ok(None) => panic!("request {i} did not end within 60 s of the peer's death"),
            Err(e) => assert!(is_peer_failure(&e), "request {i}: {e:?}"),
        }
    }
    assert_eq!(bufs.take(x).unwrap().len(), len);
    assert_eq!(bufs.take(y).unwrap().len(), len);

    // A block started after the death fails at once.
    let mut b = comm.xfer_gather(Some(1), 3);
    let z = b.buffer(vec![2; 8]);
    b.send_op(z, 0, 8);
    let e = b
        .start()
        .unwrap()
        .0
        .wait_timeout(Duration::from_secs(60))
        .expect_err("a block with a dead peer must fail");
    assert!(is_peer_failure(&e), "{e:?}");
    drop(comm);
    drop(agent);
    job.shutdown();
}

#[test]
fn killed_rank_over_shm() {
    killed(MethodKind::Shm, "shm");
}

#[test]
fn killed_rank_over_tcp() {
    killed(MethodKind::Tcp, "tcp");
}
