//! The agent on one rank (the self loop): matching, probes, synchronous sends, truncation,
//! cancellation, non-overtaking, many unexpected messages, contexts, threads.

use std::time::{Duration, Instant};

use viaduct_agent::agent::Agent;
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{RequestError, wait_all};

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
fn posted_and_unexpected_receives() {
    let a = agent();
    assert_eq!((a.rank(), a.size()), (0, 1));
    assert_eq!(a.method_of(0), Some("self"));
    // Posted first.
    let (mut r, buf) = a.irecv(16, Source::Rank(0), TagMatch::Tag(5)).unwrap();
    assert!(r.test().unwrap().is_none());
    let mut s = a.isend(0, 5, b"hello").unwrap();
    let st = r.wait().unwrap();
    assert_eq!((st.source(), st.tag(), st.count()), (Some(0), Some(5), 5));
    assert_eq!(buf.take(), b"hello");
    assert_eq!(s.wait().unwrap().count(), 5);
    // Unexpected first.
    a.send(0, 6, b"world!").unwrap();
    assert_eq!(a.unexpected(), (1, 6));
    let mut out = [0u8; 32];
    let st = a.recv(&mut out, Source::Any, TagMatch::Any).unwrap();
    assert_eq!((st.tag(), st.count()), (Some(6), 6));
    assert_eq!(&out[..6], b"world!");
    assert_eq!(a.unexpected(), (0, 0));
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
fn synchronous_send_completes_only_when_matched() {
    let a = agent();
    let mut s = a.issend(0, 1, b"sync").unwrap();
    for _ in 0..10 {
        assert!(
            s.test().unwrap().is_none(),
            "ssend completed before a receive matched"
        );
    }
    let (mut r, buf) = a.irecv(4, Source::Any, TagMatch::Any).unwrap();
    r.wait().unwrap();
    assert_eq!(s.wait().unwrap().count(), 4);
    assert_eq!(buf.take(), b"sync");
}

#[test]
fn truncation_is_an_error_without_overflow() {
    let a = agent();
    a.send(0, 1, &[1u8; 100]).unwrap();
    let (mut r, buf) = a.irecv(10, Source::Any, TagMatch::Any).unwrap();
    let e = r.wait().unwrap_err();
    assert!(
        matches!(
            cause(&e),
            AgentError::Truncated {
                len: 100,
                capacity: 10
            }
        ),
        "{e:?}"
    );
    assert_eq!(buf.take(), vec![1u8; 10]);
    // Posted first, too; and the blocking form.
    let mut small = [0u8; 3];
    let (mut r, buf) = a.irecv(3, Source::Any, TagMatch::Any).unwrap();
    a.send(0, 1, b"abcdef").unwrap();
    assert!(r.wait().is_err());
    assert_eq!(buf.take(), b"abc");
    a.send(0, 1, b"abcdef").unwrap();
    let e = a.recv(&mut small, Source::Any, TagMatch::Any).unwrap_err();
    assert!(
        matches!(e, AgentError::Request(ref re) if matches!(cause(re), AgentError::Truncated { .. }))
    );
    assert_eq!(&small, b"abc");
}

#[test]
fn cancel_of_a_pending_receive() {
    let a = agent();
    let (mut r, _buf) = a.irecv(8, Source::Any, TagMatch::Tag(4)).unwrap();
    r.cancel().unwrap();
    let st = r.wait().unwrap();
    assert!(st.test_cancelled());
    // The cancelled receive does not take a later message.
    a.send(0, 4, b"x").unwrap();
    assert_eq!(a.unexpected(), (1, 1));
    // A completed receive is not cancelled.
    let (mut r, _buf) = a.irecv(8, Source::Any, TagMatch::Tag(4)).unwrap();
    r.cancel().unwrap();
    assert!(!r.wait().unwrap().test_cancelled());
}

#[test]
fn messages_do_not_overtake() {
    let a = agent();
    for i in 0u32..200 {
        a.isend(0, i % 3, &i.to_le_bytes()).unwrap().wait().unwrap();
    }
    for tag in 0..3 {
        let mut last = None;
        for _ in 0..(200 / 3 + u32::from(tag < 200 % 3)) {
            let mut b = [0u8; 4];
            a.recv(&mut b, Source::Any, TagMatch::Tag(tag)).unwrap();
            let v = u32::from_le_bytes(b);
            assert!(last.is_none_or(|l| l < v), "{v} overtook {last:?}");
            last = Some(v);
        }
    }
}

#[test]
fn hundred_thousand_unexpected_messages_memory_counted() {
    const N: u32 = 100_000;
    let a = agent();
    for i in 0..N {
        let mut s = a.isend(0, 1, &i.to_le_bytes()).unwrap();
        s.wait().unwrap();
    }
    // Payload held is exactly the bytes sent: no hidden per-message buffer of eager size.
    assert_eq!(a.unexpected(), (N as usize, 4 * N as usize));
    for i in 0..N {
        let mut b = [0u8; 4];
        a.recv(&mut b, Source::Rank(0), TagMatch::Tag(1)).unwrap();
        assert_eq!(u32::from_le_bytes(b), i);
    }
    assert_eq!(a.unexpected(), (0, 0));
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
fn large_self_messages_and_empty_ones() {
    let a = agent();
    let big: Vec<u8> = (0..(3 << 20)).map(|i| (i * 7 + 1) as u8).collect();
    let (mut r, buf) = a.irecv(big.len(), Source::Any, TagMatch::Any).unwrap();
    let mut s = a.isend(0, 2, &big).unwrap();
    assert_eq!(r.wait().unwrap().count(), big.len() as u64);
    s.wait().unwrap();
    assert!(buf.take() == big);
    a.send(0, 3, b"").unwrap();
    let (mut r, buf) = a.irecv(0, Source::Any, TagMatch::Any).unwrap();
    assert_eq!(r.wait().unwrap().count(), 0);
    assert!(buf.is_empty());
}

#[test]
fn many_threads_post_and_wait_on_one_agent() {
    let a = agent();
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                for i in 0..500u32 {
                    let (r, buf) = a.irecv(8, Source::Any, TagMatch::Tag(t)).unwrap();
                    let s = a.isend(0, t, &[t as u8, (i % 256) as u8]).unwrap();
                    let mut reqs = vec![r, s];
                    wait_all(&mut reqs, None).unwrap();
                    assert_eq!(buf.take(), vec![t as u8, (i % 256) as u8]);
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    for t in threads {
        assert!(Instant::now() < deadline);
        t.join().unwrap();
    }
    assert_eq!(a.unexpected(), (0, 0));
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
