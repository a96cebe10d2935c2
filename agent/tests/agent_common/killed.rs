//! A rank killed with SIGKILL in the middle of transfers: every request on its VC ends on the
//! surviving rank (those that cannot complete with the peer's failure), nothing hangs, later
//! operations on the dead VC fail, and the survivor's agent still works.
//!
//! Rank 0 is the test's own thread; rank 1 is a child process running the same test binary
//! (an ignored test that calls [`child_rank`]), killed by the test with `Child::kill`.

use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::Bootstrap;
use viaduct_agent::config::Config;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, RequestError};

use super::child::ChildJob;
use super::method::Method;

/// Names the child's method; only a process started by [`killed_mid_transfer`] has it.
const CHILD_VAR: &str = "VIADUCT_TEST_KILLED_METHOD";

/// How long either side waits on a silent peer: short, so a death shows soon.
fn settings(method: Method) -> Config {
    Config {
        peer_timeout: Duration::from_secs(2),
        ..method.config()
    }
}

fn method_named(name: &str) -> Option<Method> {
    [Method::Shm, Method::Tcp, Method::Verbs]
        .into_iter()
        .find(|m| m.name() == name)
}

/// The killed rank's side, the body of an ignored test named as the `child_test` given to
/// [`killed_mid_transfer`]: connects, takes one message so the survivor knows data flows,
/// says "ready" on standard error (the harness captures standard output), then sleeps without
/// progress (so the survivor's transfers stay in flight) until it is killed. Does nothing
/// when not started as the child.
pub fn child_rank() {
    let Ok(name) = std::env::var(CHILD_VAR) else {
        return;
    };
    let method = method_named(&name).unwrap_or_else(|| panic!("unknown method {name:?}"));
    let boot = Bootstrap::from_env().unwrap();
    let agent = Agent::with_bootstrap(boot, settings(method)).unwrap();
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

/// The survivor's side over `method`, with rank 1 a child running the ignored test
/// `child_test` of this binary. In flight when the child dies: a rendezvous send of
/// `Scale::killed_long` bytes, `Scale::killed_eager` eager sends (filling the method's
/// window) and a receive from it.
pub fn killed_mid_transfer(method: Method, child_test: &str) {
    if !method.available() {
        return;
    }
    let scale = method.scale();
    let mut job = ChildJob::spawn(child_test, CHILD_VAR, method.name());
    let boot = job.bootstrap();
    let agent = Agent::with_bootstrap(boot, settings(method)).unwrap();
    assert_eq!(agent.method_of(1), Some(method.name()));
    agent.send(1, 1, b"ping").unwrap();
    job.wait_ready();
    let mut reqs: Vec<Request> = vec![agent.isend(1, 2, &vec![5u8; scale.killed_long]).unwrap()];
    for _ in 0..scale.killed_eager {
        reqs.push(agent.isend(1, 3, &[6u8; 16_000]).unwrap());
    }
    let (recv, _buf) = agent.irecv(8, Source::Rank(1), TagMatch::Any).unwrap();
    reqs.push(recv);
    for _ in 0..20 {
        agent.make_progress();
    }
    job.kill();

    let started = std::time::Instant::now();
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
    println!(
        "{}: {failed} requests failed {:?} after the kill",
        method.name(),
        started.elapsed()
    );
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
    assert_eq!(&b, b"self");
    drop(agent);
    job.shutdown();
}

/// The survivor blocked in a long `send` and, on another thread, a long `recv` (both in place
/// in the caller's memory) when the child dies: both return the peer's failure, neither hangs,
/// and the agent gave the caller's memory back (the calls returned at all).
pub fn killed_during_blocking_calls(method: Method, child_test: &str) {
    if !method.available() {
        return;
    }
    let mut job = ChildJob::spawn(child_test, CHILD_VAR, method.name());
    let boot = job.bootstrap();
    let agent = std::sync::Arc::new(Agent::with_bootstrap(boot, settings(method)).unwrap());
    agent.send(1, 1, b"ping").unwrap();
    job.wait_ready();
    let receiver = {
        let agent = agent.clone();
        std::thread::spawn(move || {
            let mut big = vec![0u8; 1 << 20];
            agent.recv(&mut big, Source::Rank(1), TagMatch::Tag(7))
        })
    };
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        job.kill();
        job
    });
    let started = std::time::Instant::now();
    let sent = agent.send(1, 2, &vec![9u8; 4 << 20]);
    let received = receiver.join().expect("the receiving thread");
    println!(
        "{}: blocking send and recv ended {:?} after they started",
        method.name(),
        started.elapsed()
    );
    for (what, e) in [
        ("send", sent.expect_err("a send to a killed peer must fail")),
        (
            "recv",
            received.expect_err("a recv from a killed peer must fail"),
        ),
    ] {
        assert_eq!(e.failed_peer(), Some(1), "{what}: {e}");
    }
    let job = killer.join().expect("the killing thread");
    drop(agent);
    job.shutdown();
}
