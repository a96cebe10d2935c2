//! Matching bodies: all-to-all with any source and any tag, non-overtaking order, truncation,
//! cancel of a pending receive.

use viaduct_agent::agent::Agent;
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, wait_all};

use super::{assert_truncated, one_way, pattern, roles};
use crate::agent_common::scale::Scale;

/// Length of the larger all-to-all messages: past the eager limit, so they go by rendezvous.
const A2A_LONG: usize = 40_000;

/// The all-to-all message `round` of rank `src`: its first bytes name the sender and round.
fn a2a_message(src: u32, round: u32) -> Vec<u8> {
    let len = if round % 5 == 4 { A2A_LONG } else { 64 };
    let mut msg = pattern(len, src * 1000 + round);
    msg[..2].copy_from_slice(&[src as u8, round as u8]);
    msg
}

/// Every rank sends [`Scale::all_to_all_rounds`] messages to every rank, itself included
/// (eager and rendezvous mixed, tag `100 + round`), and receives them all with any source and
/// any tag: each message is byte-exact, carries its status, and those of one sender arrive in
/// the order sent.
pub fn all_to_all_any_source(agent: Agent, s: &Scale) {
    let me = agent.rank();
    let n = agent.size();
    let rounds = s.all_to_all_rounds;
    let mut sends: Vec<Request> = Vec::new();
    for round in 0..rounds {
        for p in 0..n {
            sends.push(
                agent
                    .isend(p, 100 + round, &a2a_message(me, round))
                    .unwrap(),
            );
        }
    }
    let mut next = vec![0u32; n as usize];
    for _ in 0..rounds * n {
        let (mut r, buf) = agent.irecv(A2A_LONG, Source::Any, TagMatch::Any).unwrap();
        let st = r.wait().unwrap();
        let data = buf.take();
        let src = st.source().unwrap();
        let round = next[src as usize];
        assert_eq!(
            (data[0] as u32, data[1] as u32),
            (src, round),
            "rank {me}: message of rank {src} out of order"
        );
        assert_eq!(st.tag(), Some(100 + round));
        assert_eq!(st.count(), data.len() as u64);
        assert!(
            data == a2a_message(src, round),
            "message {round} of rank {src} differs"
        );
        next[src as usize] += 1;
    }
    wait_all(&mut sends, None).unwrap();
    assert!(next.iter().all(|c| *c == rounds), "{next:?}");
    assert_eq!(agent.unexpected(), (0, 0));
}

/// Message `i` of the non-overtaking body: eager mostly, every seventh one by rendezvous,
/// starting with `i` as 4 little-endian bytes.
fn order_message(i: u32) -> Vec<u8> {
    let len = if i % 7 == 6 {
        20_000
    } else {
        4 + (i % 50) as usize
    };
    let mut msg = pattern(len, i);
    msg[..4].copy_from_slice(&i.to_le_bytes());
    msg
}

/// Messages between one pair of ranks do not overtake each other. Phase one: messages on
/// tags 0, 1, 2 in turn, received tag by tag (so the other tags wait unexpected, eager and
/// rendezvous alike): each tag's messages come in send order. Phase two: messages on tag 3
/// received with any source and any tag come exactly in send order.
pub fn non_overtaking(agent: Agent, s: &Scale) {
    let count = s.order_messages;
    one_way(
        &agent,
        |dest| {
            let mut reqs = Vec::new();
            for i in 0..count {
                reqs.push(agent.isend(dest, i % 3, &order_message(i)).unwrap());
            }
            for i in 0..count {
                reqs.push(agent.isend(dest, 3, &order_message(i)).unwrap());
            }
            reqs
        },
        |src| {
            let mut buf = vec![0u8; 20_000];
            for tag in 0..3 {
                for i in (tag..count).step_by(3) {
                    let st = agent
                        .recv(&mut buf, Source::Rank(src), TagMatch::Tag(tag))
                        .unwrap();
                    let got = &buf[..st.count() as usize];
                    assert_eq!(
                        u32::from_le_bytes(got[..4].try_into().unwrap()),
                        i,
                        "tag {tag}: message {i} overtaken"
                    );
                    assert!(got == order_message(i), "message {i} differs");
                }
            }
            for i in 0..count {
                let st = agent.recv(&mut buf, Source::Any, TagMatch::Any).unwrap();
                assert_eq!((st.source(), st.tag()), (Some(0), Some(3)));
                let got = &buf[..st.count() as usize];
                assert_eq!(u32::from_le_bytes(got[..4].try_into().unwrap()), i);
                assert!(got == order_message(i), "message {i} differs");
            }
        },
    );
}

/// A message longer than its receive fails that receive with `Truncated` and fills the
/// buffer's capacity, never more: eager and rendezvous messages, received after they arrived
/// and posted before, and the blocking form. Also: progress on a VC of a rank outside the job
/// is refused.
pub fn truncation(agent: Agent, s: &Scale) {
    let r = roles(&agent);
    let long = s.truncated_len;
    assert!(agent.make_progress_vc(r.peer).is_ok());
    assert!(matches!(
        agent.make_progress_vc(agent.size()),
        Err(AgentError::BadRank { .. })
    ));
    let mut sends = Vec::new();
    if r.sender {
        sends.push(agent.isend(r.peer, 1, &[9u8; 100]).unwrap());
        sends.push(agent.isend(r.peer, 2, &vec![8u8; long]).unwrap());
        sends.push(agent.issend(r.peer, 3, b"sync").unwrap());
    }
    let mut posted = Vec::new();
    if r.receiver {
        let mut b = [0u8; 4];
        agent
            .recv(&mut b, Source::Rank(r.peer), TagMatch::Tag(3))
            .unwrap();
        // Tags 1 and 2 arrived before tag 3: both are unexpected now.
        for (tag, len, byte) in [(1u32, 100u64, 9u8), (2, long as u64, 8)] {
            let (mut req, buf) = agent.irecv(10, Source::Any, TagMatch::Tag(tag)).unwrap();
            assert_truncated(&req.wait().unwrap_err(), len, 10);
            assert_eq!(buf.take(), vec![byte; 10]);
        }
        // Posted before their messages are sent: the first bytes, then the truncation.
        posted.push((
            agent.irecv(3, Source::Any, TagMatch::Tag(4)).unwrap(),
            6,
            b"abc".to_vec(),
        ));
        posted.push((
            agent.irecv(10, Source::Any, TagMatch::Tag(5)).unwrap(),
            long as u64,
            vec![7u8; 10],
        ));
        if r.two {
            agent.send(r.peer, 0, b"go").unwrap();
        }
    }
    if r.sender {
        if r.two {
            let mut b = [0u8; 2];
            agent
                .recv(&mut b, Source::Rank(r.peer), TagMatch::Tag(0))
                .unwrap();
        }
        sends.push(agent.isend(r.peer, 4, b"abcdef").unwrap());
        sends.push(agent.isend(r.peer, 5, &vec![7u8; long]).unwrap());
        sends.push(agent.isend(r.peer, 6, b"abcdef").unwrap());
    }
    if r.receiver {
        for ((mut req, buf), len, want) in posted {
            assert_truncated(&req.wait().unwrap_err(), len, want.len() as u64);
            assert_eq!(buf.take(), want);
        }
        let mut small = [0u8; 3];
        let e = agent
            .recv(&mut small, Source::Any, TagMatch::Tag(6))
            .unwrap_err();
        let AgentError::Request(re) = &e else {
            panic!("expected a failed request, got {e:?}")
        };
        assert_truncated(re, 6, 3);
        assert_eq!(&small, b"abc");
    }
    wait_all(&mut sends, None).unwrap();
    assert_eq!(agent.unexpected(), (0, 0));
}

/// A pending receive, cancelled, completes cancelled and takes no later message; a receive
/// that already matched is not cancelled.
pub fn cancel_pending_receive(agent: Agent, _s: &Scale) {
    let r = roles(&agent);
    if r.receiver {
        for source in [Source::Rank(r.peer), Source::Any] {
            let (mut req, _buf) = agent.irecv(8, source, TagMatch::Tag(4)).unwrap();
            req.cancel().unwrap();
            let st = req.wait().unwrap();
            assert!(st.test_cancelled(), "{source:?}: not cancelled");
        }
        if r.two {
            agent.send(r.peer, 1, b"go").unwrap();
        }
    }
    let mut sends = Vec::new();
    if r.sender {
        if r.two {
            let mut b = [0u8; 2];
            agent
                .recv(&mut b, Source::Rank(r.peer), TagMatch::Tag(1))
                .unwrap();
        }
        sends.push(agent.isend(r.peer, 4, b"x").unwrap());
        sends.push(agent.issend(r.peer, 5, b"done").unwrap());
    }
    if r.receiver {
        let mut b = [0u8; 4];
        agent
            .recv(&mut b, Source::Rank(r.peer), TagMatch::Tag(5))
            .unwrap();
        // The cancelled receives did not take the message sent before "done".
        assert_eq!(agent.unexpected(), (1, 1));
        let (mut req, buf) = agent.irecv(8, Source::Any, TagMatch::Tag(4)).unwrap();
        req.cancel().unwrap();
        let st = req.wait().unwrap();
        assert!(!st.test_cancelled(), "a matched receive was cancelled");
        assert_eq!(st.count(), 1);
        assert_eq!(buf.take(), b"x");
    }
    wait_all(&mut sends, None).unwrap();
}
