//! `Exclusive` sessions (`viaduct_agent::exclusive`): the same results as the handle's `send`
//! and `recv`, the lock held between calls and given back for the general path, other threads
//! waiting until it is released, and a clear panic instead of a self-deadlock. Over `shm` and
//! `tcp`, ranks as threads with their own agents.

mod agent_common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_common::{config, job};
use viaduct_agent::agent::Agent;
use viaduct_agent::config::MethodKind;
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::RequestError;

const METHODS: [MethodKind; 2] = [MethodKind::Shm, MethodKind::Tcp];

fn msg(i: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| (k as u32).wrapping_mul(7) as u8 ^ i as u8)
        .collect()
}

/// Eager sizes, a rendezvous size in the middle (the general path), then eager again.
const SIZES: [usize; 7] = [0, 8, 64, 4096, 300_000, 8, 1000];

/// A ping-pong of every size within sessions on both ranks: byte exact, statuses right.
/// Returns, for rank 1 (whose steps end with a send), whether its session held the lock after
/// each step: after an eager send it does, after the rendezvous (general path) it does not.
fn ping_pong(agent: Agent) -> Vec<bool> {
    let me = agent.rank();
    let peer = 1 - me;
    let mut s = agent.exclusive();
    assert!(!s.holds(), "a new session holds nothing");
    let mut held = Vec::new();
    let mut buf = vec![0u8; 300_000];
    for (i, &len) in SIZES.iter().enumerate() {
        let i = i as u32;
        if me == 0 {
            s.send(peer, i, &msg(i, len)).unwrap();
            let st = s.recv(&mut buf, Source::Any, TagMatch::Any).unwrap();
            assert_eq!(
                (st.source(), st.tag(), st.count()),
                (Some(1), Some(i), len as u64)
            );
            assert_eq!(buf[..len], msg(i + 100, len)[..], "echo {i}");
        } else {
            let st = s.recv(&mut buf, Source::Rank(0), TagMatch::Tag(i)).unwrap();
            assert_eq!((st.source(), st.count()), (Some(0), len as u64));
            assert_eq!(buf[..len], msg(i, len)[..], "message {i}");
            s.send(peer, i, &msg(i + 100, len)).unwrap();
            held.push(s.holds());
        }
    }
    held
}

/// A receive shorter than the message, within a session: the handle's truncation error;
/// the next message arrives whole.
fn truncation(agent: Agent) {
    let mut s = agent.exclusive();
    if agent.rank() == 0 {
        s.send(1, 3, &msg(1, 100)).unwrap();
        s.send(1, 3, &msg(2, 10)).unwrap();
        return;
    }
    let mut b = [0u8; 50];
    match s.recv(&mut b, Source::Rank(0), TagMatch::Tag(3)) {
        Err(AgentError::Request(RequestError::Operation(cause))) => {
            let e = cause.downcast_ref::<AgentError>().expect("an agent error");
            assert!(
                matches!(
                    e,
                    AgentError::Truncated {
                        len: 100,
                        capacity: 50
                    }
                ),
                "{e}"
            );
        }
        other => panic!("expected a truncation error, got {other:?}"),
    }
    assert_eq!(b[..], msg(1, 100)[..50]);
    let st = s.recv(&mut b, Source::Rank(0), TagMatch::Tag(3)).unwrap();
    assert_eq!(st.count(), 10);
    assert_eq!(b[..10], msg(2, 10)[..]);
}

/// While rank 0's session holds the lock, another thread's call waits; it goes on once the
/// session is released. Rank 1 then gets the message sent within the session.
fn others_wait_for_the_session(agent: Agent) {
    if agent.rank() == 1 {
        let mut b = [0u8; 16];
        let st = agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(4))
            .unwrap();
        assert_eq!(b[..st.count() as usize], msg(4, 16)[..]);
        return;
    }
    let mut s = agent.exclusive();
    s.send(1, 4, &msg(4, 16)).unwrap();
    assert!(s.holds());
    let done = Arc::new(AtomicBool::new(false));
    let other = {
        let (agent, done) = (agent.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let unexpected = agent.unexpected();
            done.store(true, Ordering::SeqCst);
            unexpected
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !done.load(Ordering::SeqCst),
        "another thread got into the agent while the session held it"
    );
    s.release();
    assert!(!s.holds());
    assert_eq!(other.join().unwrap(), (0, 0));
    assert!(done.load(Ordering::SeqCst));
}

/// A call through a handle on the thread whose session holds the agent panics with a message
/// that names the session (instead of waiting for itself); after a release the handle works.
fn own_thread_panics_instead_of_deadlocking(agent: Agent) {
    if agent.rank() == 1 {
        let mut b = [0u8; 8];
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(5))
            .unwrap();
        return;
    }
    let mut s = agent.exclusive();
    s.send(1, 5, &msg(5, 8)).unwrap();
    assert!(s.holds());
    let handle = agent.clone();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handle.unexpected()));
    let payload = caught.expect_err("a handle call under the own session must panic");
    let text = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(text.contains("`Exclusive` session"), "{text}");
    s.release();
    assert_eq!(handle.unexpected(), (0, 0));
}

#[test]
fn a_session_ping_pong_of_every_size_is_byte_exact_and_releases_for_rendezvous() {
    for m in METHODS {
        let held = job(2, config(m), ping_pong).remove(1);
        // Eager sends leave the lock held; the rendezvous size took the general path.
        let rendezvous = SIZES.iter().position(|&l| l == 300_000).unwrap();
        assert_eq!(held.len(), SIZES.len());
        for (i, h) in held.iter().enumerate() {
            assert_eq!(*h, i != rendezvous, "{m:?}, size {}", SIZES[i]);
        }
    }
}

#[test]
fn a_short_receive_in_a_session_reports_truncation() {
    for m in METHODS {
        job(2, config(m), truncation);
    }
}

#[test]
fn other_threads_wait_while_a_session_holds_the_agent() {
    for m in METHODS {
        job(2, config(m), others_wait_for_the_session);
    }
}

#[test]
fn a_handle_call_under_the_own_session_panics_with_a_clear_message() {
    job(
        2,
        config(MethodKind::Shm),
        own_thread_panics_instead_of_deadlocking,
    );
}
