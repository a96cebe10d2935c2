//! Peer liveness over shared memory and TCP: a peer whose process stops (it is sent
//! `SIGSTOP`) fails the requests waiting on it within about the peer timeout, with an error
//! naming it; a peer that is alive is never declared failed, whether it is idle in a wait,
//! slow (one message every half timeout, computing in between without calling the library),
//! or computes outside the library for several peer timeouts before it sends (its agent's
//! heartbeat thread keeps it alive to its peers).
//!
//! Rank 0 is the test's own thread; rank 1 is a child process running this test binary's
//! ignored test `child_rank`.

mod agent_common;

use std::process::Command;
use std::time::{Duration, Instant};

use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::Bootstrap;
use viaduct_agent::comm::Comm;
use viaduct_agent::config::Config;
use viaduct_agent::matching::{Source, TagMatch};

use agent_common::child::ChildJob;
use agent_common::method::Method;
use agent_common::{job, job_owned};

/// `METHOD:MODE` of the child; only a process started by these tests has it.
const CHILD_VAR: &str = "VIADUCT_TEST_LIVENESS";

/// Set for the process that counts heartbeat threads ([`threads_child`]).
const THREADS_VAR: &str = "VIADUCT_TEST_HEARTBEAT_THREADS";

/// Messages the slow child sends, one every half peer timeout.
const SLOW_MESSAGES: u32 = 4;

/// How long the computing child computes, without calling the library, before it sends: four
/// peer timeouts.
const COMPUTE: Duration = Duration::from_secs(4);

fn settings(method: Method, peer_timeout: Duration) -> Config {
    Config {
        peer_timeout,
        ..method.config()
    }
}

fn timeout_of(mode: &str) -> Duration {
    match mode {
        "slow" => Duration::from_secs(2),
        _ => Duration::from_secs(1),
    }
}

/// The child's side. `idle`: waits in a blocking receive that never matches (its progress
/// engine runs) until it is stopped and killed. `slow`: sends [`SLOW_MESSAGES`] messages,
/// sleeping half the peer timeout before each without calling the library, then waits like
/// `idle`. `compute`: computes for [`COMPUTE`] without calling the library, then sends one
/// message and waits like `idle`.
#[test]
#[ignore = "child process of the liveness tests"]
fn child_rank() {
    let Ok(what) = std::env::var(CHILD_VAR) else {
        return;
    };
    let (name, mode) = what.split_once(':').expect("METHOD:MODE");
    let method = [Method::Shm, Method::Tcp]
        .into_iter()
        .find(|m| m.name() == name)
        .expect("method");
    let boot = Bootstrap::from_env().unwrap();
    let t = timeout_of(mode);
    let agent = Agent::with_bootstrap(boot, settings(method, t)).unwrap();
    let mut b = [0u8; 4];
    agent
        .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
        .unwrap();
    eprintln!("ready");
    if mode == "slow" {
        for i in 0..SLOW_MESSAGES {
            std::thread::sleep(t / 2);
            agent.send(0, 6, &i.to_le_bytes()).unwrap();
        }
    }
    if mode == "compute" {
        let sum = compute(COMPUTE);
        agent.send(0, 7, &sum.to_le_bytes()).unwrap();
    }
    let _ = agent.recv(&mut b, Source::Rank(0), TagMatch::Tag(99));
}

/// Keeps a core busy for `how_long` (no sleep, no library call); returns a value that depends on
/// every step, so the loop cannot be optimised away.
fn compute(how_long: Duration) -> u64 {
    let start = Instant::now();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while start.elapsed() < how_long {
        for _ in 0..100_000 {
            x = std::hint::black_box(x ^ (x << 13) ^ (x >> 7) ^ (x << 17));
        }
    }
    x
}

fn start(method: Method, mode: &str) -> (ChildJob, Agent) {
    let mut job = ChildJob::spawn(
        "child_rank",
        CHILD_VAR,
        &format!("{}:{mode}", method.name()),
    );
    let agent = Agent::with_bootstrap(job.bootstrap(), settings(method, timeout_of(mode))).unwrap();
    assert_eq!(agent.method_of(1), Some(method.name()));
    agent.send(1, 1, b"ping").unwrap();
    job.wait_ready();
    (job, agent)
}

fn signal(job: &ChildJob, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &job.child.id().to_string()])
        .status()
        .expect("running kill")
        .success();
    assert!(ok, "kill {sig} failed");
}

fn stopped_peer_fails_pending_receive(method: Method) {
    if !method.available() {
        return;
    }
    let t = timeout_of("idle");
    let (mut job, agent) = start(method, "idle");
    let (mut recv, _buf) = agent.irecv(8, Source::Rank(1), TagMatch::Tag(5)).unwrap();
    // Alive and waiting itself: three timeouts pass without a failure.
    match recv.wait_timeout(t * 3) {
        Ok(None) => {}
        other => panic!("a live, idle peer was judged: {other:?}"),
    }
    signal(&job, "-STOP");
    let stopped = Instant::now();
    let e = recv
        .wait_timeout(Duration::from_secs(60))
        .expect_err("a receive from a stopped peer must fail");
    let after = stopped.elapsed();
    assert_eq!(e.failed_peer(), Some(1), "unexpected error: {e:?}");
    let failure = e.to_string();
    println!(
        "{}: failed {after:?} after SIGSTOP: {failure}",
        method.name()
    );
    assert!(failure.contains("VIADUCT_PEER_TIMEOUT"), "{failure}");
    assert!(failure.contains("rank 1"), "{failure}");
    // Silence counts from the peer's last heartbeat, which may come up to a quarter timeout
    // before the stop.
    assert!(
        after >= t / 2,
        "failed {after:?} after the stop, long before the timeout"
    );
    assert!(
        after < t + Duration::from_secs(9),
        "failed only {after:?} after the stop"
    );
    // Later sends to it fail at once.
    assert!(agent.connect(1).is_err());
    drop(agent);
    job.kill();
    job.shutdown();
}

fn slow_peer_is_alive(method: Method) {
    if !method.available() {
        return;
    }
    let (mut job, agent) = start(method, "slow");
    for i in 0..SLOW_MESSAGES {
        let (mut r, buf) = agent.irecv(4, Source::Rank(1), TagMatch::Tag(6)).unwrap();
        match r.wait_timeout(Duration::from_secs(60)) {
            Ok(Some(_)) => {}
            other => panic!("message {i} of a slow peer: {other:?}"),
        }
        assert_eq!(buf.take(), i.to_le_bytes());
    }
    assert!(agent.connect(1).is_ok());
    drop(agent);
    job.kill();
    job.shutdown();
}

/// Rank 0 waits in a blocking receive while the peer computes for four peer timeouts without
/// calling the library: the receive completes with the peer's message and the VC stays usable.
fn computing_peer_is_alive(method: Method) {
    if !method.available() {
        return;
    }
    let t = timeout_of("compute");
    let (mut job, agent) = start(method, "compute");
    let began = Instant::now();
    let mut b = [0u8; 8];
    let got = agent.recv(&mut b, Source::Rank(1), TagMatch::Tag(7));
    let waited = began.elapsed();
    println!(
        "{}: waited {waited:?} on a peer computing for {COMPUTE:?} (peer timeout {t:?}): {got:?}",
        method.name()
    );
    let status = got.unwrap_or_else(|e| {
        panic!("a peer computing outside the library was judged after {waited:?}: {e}")
    });
    assert_eq!(status.count(), 8);
    assert!(
        waited >= COMPUTE - Duration::from_millis(500),
        "the message came after {waited:?}, before the computation ended"
    );
    assert!(agent.connect(1).is_ok());
    drop(agent);
    job.kill();
    job.shutdown();
}

#[test]
fn computing_peer_over_shm() {
    computing_peer_is_alive(Method::Shm);
}

#[test]
fn computing_peer_over_tcp() {
    computing_peer_is_alive(Method::Tcp);
}

#[test]
fn stopped_peer_over_shm() {
    stopped_peer_fails_pending_receive(Method::Shm);
}

#[test]
fn stopped_peer_over_tcp() {
    stopped_peer_fails_pending_receive(Method::Tcp);
}

#[test]
fn slow_peer_over_shm() {
    slow_peer_is_alive(Method::Shm);
}

#[test]
fn slow_peer_over_tcp() {
    slow_peer_is_alive(Method::Tcp);
}

/// Threads of this process named like the agent's heartbeat thread (`comm` holds the first
/// 15 bytes of the name).
fn heartbeat_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "viaduct-heartbe")
        .count()
}

/// The heartbeat threads left once `within` has passed or as soon as none is left. A joined
/// thread's task can outlive `join` by a moment: the kernel wakes the joiner when it clears
/// the thread's id, before it closes the thread's own descriptor table and removes the task.
fn heartbeat_threads_after(within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let n = heartbeat_threads();
        if n == 0 || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The descriptors (by number) of each heartbeat thread's table.
fn heartbeat_tables() -> Vec<Vec<i32>> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|t| t.ok())
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|name| name.trim_end() == "viaduct-heartbe")
        })
        .map(|t| {
            std::fs::read_dir(t.path().join("fd"))
                .map(|d| {
                    d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// The process of [`heartbeat_threads_end_with_their_agents`]: jobs of two ranks (threads of
/// this process) over shared memory and TCP, finalized or dropped; each agent runs a heartbeat
/// thread while it lives and none is left after.
#[test]
#[ignore = "child process of the liveness tests"]
fn threads_child() {
    if std::env::var(THREADS_VAR).is_err() {
        return;
    }
    assert_eq!(heartbeat_threads(), 0);
    for method in [Method::Shm, Method::Tcp] {
        let during = job(2, method.config(), move |agent| {
            // Both agents live until both bodies are done (finalize fences).
            let world = Comm::world(&agent);
            world.barrier().unwrap();
            // A new thread takes its name once it runs: wait for both (at most 20 s).
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut n = heartbeat_threads();
            while agent.rank() == 0 && n < 2 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                n = heartbeat_threads();
            }
            if agent.rank() == 0 {
                // Each heartbeat thread has a table of its own with only the standard
                // streams, its liveness socket and its segments: a file this thread opens
                // now is not in it (in a shared table it would be).
                let file = std::fs::File::open("/proc/self/status").unwrap();
                let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
                // A thread that just took its name may not have dropped the shared table yet.
                let deadline = Instant::now() + Duration::from_secs(20);
                let mut tables = heartbeat_tables();
                while tables.iter().any(|t| t.contains(&fd)) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                    tables = heartbeat_tables();
                }
                for t in &tables {
                    assert!(
                        !t.contains(&fd) && t.len() <= 3 + 2,
                        "{method:?}: {t:?} ({fd})"
                    );
                }
            }
            world.barrier().unwrap();
            n
        });
        assert!(during[0] >= 2, "{method:?}: {during:?}");
        assert_eq!(
            heartbeat_threads_after(Duration::from_secs(5)),
            0,
            "{method:?}: left after finalize"
        );
        job_owned(2, method.config(), |agent| {
            Comm::world(&agent).barrier().unwrap();
            drop(agent);
        });
        assert_eq!(
            heartbeat_threads_after(Duration::from_secs(5)),
            0,
            "{method:?}: left after drop"
        );
    }
    println!("heartbeat threads ended");
}

#[test]
fn heartbeat_threads_end_with_their_agents() {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--ignored", "--exact", "threads_child", "--nocapture"])
        .env(THREADS_VAR, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("child process");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("child status") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the thread-counting process did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut out)
        .expect("child output");
    assert!(
        status.success() && out.contains("heartbeat threads ended"),
        "{status}: {out}"
    );
}
