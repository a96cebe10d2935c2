//! The agent on one rank (the self loop): the shared test bodies of `agent_common::bodies`
//! that make sense on one rank (ping-pong, posted and unexpected receives, a large message,
//! synchronous sends, threads, all-to-all, non-overtaking, truncation, cancel, many unexpected
//! messages), then what only a single rank shows: wildcards, probes, contexts, refused
//! arguments, finalize.

#[macro_use]
mod agent_common;

mod self_loop {
    self_tests!();
}

use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::RequestError;

fn agent() -> Agent {
    Agent::singleton().expect("single-rank agent")
}

fn cause(e: &RequestError) -> &AgentError {
    match e {
        RequestError::Operation(c) => c
            .downcast_ref::<AgentError>()
            .unwrap_or_else(|| panic!("not an agent error: {c}")),
        other => panic!("not an operation error: {other}"),
    }
}

#[test]
fn wildcards_pick_the_oldest_match() {
    let a = agent();
    for tag in [3, 1, 2] {
        a.send(0, tag, &[tag as u8]).unwrap();
    }
    let mut b = [0u8; 1];
    assert_eq!(
        a.recv(&mut b, Source::Any, TagMatch::Tag(2)).unwrap().tag(),
        Some(2)
    );
    assert_eq!(
        a.recv(&mut b, Source::Rank(0), TagMatch::Any)
            .unwrap()
            .tag(),
        Some(3)
    );
    assert_eq!(
        a.recv(&mut b, Source::Any, TagMatch::Any).unwrap().tag(),
        Some(1)
    );
}

#[test]
fn probe_sees_without_receiving() {
    let a = agent();
    assert_eq!(a.iprobe(Source::Any, TagMatch::Any).unwrap(), None);
    a.send(0, 9, &[7; 100]).unwrap();
    let p = a.iprobe(Source::Any, TagMatch::Any).unwrap().unwrap();
    assert_eq!((p.source, p.tag, p.len), (0, 9, 100));
    let p = a
        .probe(
            Source::Rank(0),
            TagMatch::Tag(9),
            Some(Duration::from_secs(5)),
        )
        .unwrap();
    assert_eq!(p.len, 100);
    assert!(matches!(
        a.probe(
            Source::Any,
            TagMatch::Tag(10),
            Some(Duration::from_millis(20))
        ),
        Err(AgentError::Timeout { .. })
    ));
    let mut b = vec![0u8; p.len as usize];
    a.recv(&mut b, Source::Any, TagMatch::Tag(9)).unwrap();
    assert_eq!(b, vec![7; 100]);
    assert_eq!(a.iprobe(Source::Any, TagMatch::Any).unwrap(), None);
}

#[test]
fn contexts_do_not_match_each_other() {
    let a = agent();
    let b = a.with_context(7);
    a.send(0, 1, b"ctx0").unwrap();
    assert_eq!(b.iprobe(Source::Any, TagMatch::Any).unwrap(), None);
    b.send(0, 1, b"ctx7").unwrap();
    let mut buf = [0u8; 4];
    b.recv(&mut buf, Source::Any, TagMatch::Any).unwrap();
    assert_eq!(&buf, b"ctx7");
    a.recv(&mut buf, Source::Any, TagMatch::Any).unwrap();
    assert_eq!(&buf, b"ctx0");
}

#[test]
fn bad_arguments_are_errors() {
    let a = agent();
    assert!(matches!(
        a.isend(1, 0, b""),
        Err(AgentError::BadRank { rank: 1, size: 1 })
    ));
    assert!(matches!(
        a.isend(0, u32::MAX, b""),
        Err(AgentError::ReservedTag(_))
    ));
    assert!(matches!(
        a.irecv(1, Source::Rank(5), TagMatch::Any),
        Err(AgentError::BadRank { .. })
    ));
    assert!(matches!(
        a.reserve_write(0),
        Err(AgentError::SelfReservation)
    ));
}

#[test]
fn finalize_fails_open_requests_and_later_calls() {
    let a = agent();
    let b = a.clone();
    let (mut r, _buf) = a.irecv(1, Source::Any, TagMatch::Any).unwrap();
    a.finalize().unwrap();
    let e = r.wait().unwrap_err();
    assert!(matches!(cause(&e), AgentError::Finalized));
    assert!(matches!(b.isend(0, 0, b""), Err(AgentError::Finalized)));
}

/// A receive shorter than its message: the error's text names both sizes and the error says
/// what it is without matching on nested errors, through `recv` and through a request's wait.
#[test]
fn truncation_explains_itself() {
    let a = agent();
    a.send(0, 21, &[7u8; 12]).unwrap();
    let mut small = [0u8; 4];
    let e = a
        .recv(&mut small, Source::Rank(0), TagMatch::Tag(21))
        .unwrap_err();
    assert!(e.is_truncated(), "{e:?}");
    assert!(!e.is_peer_failed() && !e.is_timeout() && !e.is_cancelled());
    assert_eq!((e.failed_peer(), e.errno()), (None, None));
    let text = e.to_string();
    assert!(
        text.contains("message of 12 bytes truncated to the receive buffer of 4 bytes"),
        "{text}"
    );
    assert_eq!(small, [7u8; 4]);

    a.send(0, 22, &[1u8; 9]).unwrap();
    let (mut r, buf) = a.irecv(3, Source::Any, TagMatch::Tag(22)).unwrap();
    let e = r.wait().unwrap_err();
    assert!(e.is_truncated(), "{e:?}");
    assert!(e.to_string().contains("message of 9 bytes"), "{e}");
    assert_eq!(buf.take(), vec![1u8; 3]);
}

/// Each agent counts its own completions: a blocking progress call of one agent with nothing
/// to do runs to its timeout while another agent of the same process completes requests.
#[test]
fn another_agents_completions_do_not_end_a_blocking_call() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::Instant;

    let idle = agent();
    let busy = agent();
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let worker = {
        let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut b = [0u8; 1];
            while !stop.load(Ordering::Relaxed) {
                busy.send(0, 1, b"x").unwrap();
                busy.recv(&mut b, Source::Any, TagMatch::Any).unwrap();
                done.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // The other agent is completing requests before the call starts.
    let start = Instant::now();
    while done.load(Ordering::Relaxed) == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "no completion");
        std::thread::yield_now();
    }
    let timeout = Duration::from_millis(300);
    let before = done.load(Ordering::Relaxed);
    let start = Instant::now();
    idle.make_progress_blocking(timeout);
    let took = start.elapsed();
    let during = done.load(Ordering::Relaxed) - before;
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    assert!(during > 0, "the other agent completed nothing meanwhile");
    assert!(
        took >= timeout,
        "the idle agent's blocking call ended after {took:?}, before its timeout, \
         while the other agent completed {during} requests"
    );
}
