//! Point-to-point bodies: ping-pong from 0 bytes to several rendezvous chunks, receives posted
//! before and after their message, one large message both ways, synchronous sends, threads
//! sharing one agent.

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, wait_all};

use super::{one_way, pattern, roles};
use crate::agent_common::scale::Scale;

/// The responder's half of one round trip: takes the next message with any source and any
/// tag, checks it is `data` from rank 0 under `tag`, and sends it back (the returned request).
fn echo(agent: &Agent, tag: u32, data: &[u8]) -> Request {
    let mut buf = vec![0u8; data.len()];
    let st = agent.recv(&mut buf, Source::Any, TagMatch::Any).unwrap();
    assert_eq!(
        (st.source(), st.tag(), st.count()),
        (Some(0), Some(tag), data.len() as u64)
    );
    assert!(buf == data, "payload of {} bytes differs", data.len());
    agent.isend(0, tag, &buf).unwrap()
}

/// Round trips of every size in [`Scale::ping_sizes`] (byte-exact both ways, statuses
/// checked), then [`Scale::small_pings`] round trips of 8 bytes.
pub fn ping_pong(agent: Agent, s: &Scale) {
    let r = roles(&agent);
    for (i, &len) in s.ping_sizes.iter().enumerate() {
        let tag = i as u32;
        let rounds = if len > 100_000 {
            s.ping_rounds_large
        } else {
            s.ping_rounds
        };
        for round in 0..rounds {
            let data = pattern(len, round + tag);
            if r.sender {
                let mut out = agent.isend(r.peer, tag, &data).unwrap();
                let back_out = (!r.two).then(|| echo(&agent, tag, &data));
                let mut back = vec![0u8; len];
                let st = agent
                    .recv(&mut back, Source::Rank(r.peer), TagMatch::Tag(tag))
                    .unwrap();
                assert_eq!(st.count(), len as u64);
                assert!(back == data, "echo of {len} bytes differs");
                out.wait().unwrap();
                if let Some(mut b) = back_out {
                    b.wait().unwrap();
                }
            } else {
                echo(&agent, tag, &data).wait().unwrap();
            }
        }
    }
    for i in 0..s.small_pings {
        let data = (i as u64).to_le_bytes();
        let mut b = [0u8; 8];
        if r.sender {
            agent.send(r.peer, 77, &data).unwrap();
            if !r.two {
                agent
                    .recv(&mut b, Source::Rank(0), TagMatch::Tag(77))
                    .unwrap();
                agent.send(0, 78, &b).unwrap();
            }
            agent
                .recv(&mut b, Source::Rank(r.peer), TagMatch::Tag(78))
                .unwrap();
        } else {
            agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(77))
                .unwrap();
            agent.send(0, 78, &b).unwrap();
        }
        assert_eq!(b, data);
    }
}

/// A receive posted before its message arrives, then a message that arrives before its
/// receive (held as unexpected, counted, then taken by a receive with any source and tag);
/// statuses of both sides checked.
pub fn posted_and_unexpected(agent: Agent, _s: &Scale) {
    let r = roles(&agent);
    // Posted first: the receiver posts, then lets the sender go.
    let mut posted = None;
    if r.receiver {
        let (mut req, buf) = agent
            .irecv(16, Source::Rank(r.peer), TagMatch::Tag(5))
            .unwrap();
        assert!(
            req.test().unwrap().is_none(),
            "completed with no message sent"
        );
        if r.two {
            agent.send(r.peer, 1, b"go").unwrap();
        }
        posted = Some((req, buf));
    }
    let mut sends = Vec::new();
    if r.sender {
        if r.two {
            let mut b = [0u8; 2];
            agent
                .recv(&mut b, Source::Rank(r.peer), TagMatch::Tag(1))
                .unwrap();
        }
        sends.push(agent.isend(r.peer, 5, b"hello").unwrap());
    }
    if let Some((mut req, buf)) = posted {
        let st = req.wait().unwrap();
        assert_eq!((st.source(), st.tag(), st.count()), (Some(0), Some(5), 5));
        assert_eq!(buf.take(), b"hello");
    }
    for mut s in sends {
        assert_eq!(s.wait().unwrap().count(), 5);
    }
    // Unexpected first: the synchronous send completes only once the receiver has taken it,
    // and the message before it is held by then (non-overtaking).
    one_way(
        &agent,
        |dest| {
            vec![
                agent.isend(dest, 6, b"world!").unwrap(),
                agent.issend(dest, 7, b"sync").unwrap(),
            ]
        },
        |src| {
            let mut b = [0u8; 4];
            agent
                .recv(&mut b, Source::Rank(src), TagMatch::Tag(7))
                .unwrap();
            assert_eq!(agent.unexpected(), (1, 6));
            let mut out = [0u8; 32];
            let st = agent.recv(&mut out, Source::Any, TagMatch::Any).unwrap();
            assert_eq!((st.source(), st.tag(), st.count()), (Some(0), Some(6), 6));
            assert_eq!(&out[..6], b"world!");
            assert_eq!(agent.unexpected(), (0, 0));
        },
    );
}

/// One message of [`Scale::big_message`] bytes there and back, byte-exact. The receive is
/// posted before the message is sent on one rank (and as soon as it can on two); the way
/// back hands the received buffer over without a copy (`isend_owned`).
pub fn big_message(agent: Agent, s: &Scale) {
    let len = s.big_message;
    let r = roles(&agent);
    let posted = r
        .receiver
        .then(|| agent.irecv(len, Source::Rank(0), TagMatch::Tag(3)).unwrap());
    let forward = |(mut req, buf): (Request, viaduct_agent::recv_buffer::RecvBuffer)| {
        assert_eq!(req.wait().unwrap().count(), len as u64);
        let data = buf.take();
        assert!(
            data == pattern(len, 42),
            "{len}-byte message is not byte-exact"
        );
        agent.isend_owned(0, 4, data).unwrap()
    };
    if r.sender {
        let data = pattern(len, 42);
        let mut out = agent.isend(r.peer, 3, &data).unwrap();
        let back_out = posted.map(forward);
        let mut back = vec![0u8; len];
        agent
            .recv(&mut back, Source::Rank(r.peer), TagMatch::Tag(4))
            .unwrap();
        assert!(back == data, "{len}-byte round trip is not byte-exact");
        out.wait().unwrap();
        if let Some(mut b) = back_out {
            b.wait().unwrap();
        }
    } else {
        forward(posted.unwrap()).wait().unwrap();
    }
}

/// A synchronous send completes only when a receive has matched it: the receiver posts its
/// receive only after the sender has tested the send many times.
pub fn synchronous_send(agent: Agent, _s: &Scale) {
    let r = roles(&agent);
    let mut sync = None;
    if r.sender {
        let mut s = agent.issend(r.peer, 1, b"sync").unwrap();
        for _ in 0..50 {
            assert!(
                s.test().unwrap().is_none(),
                "the synchronous send completed before a receive matched it"
            );
        }
        if r.two {
            agent.send(r.peer, 9, b"go").unwrap();
        }
        sync = Some(s);
    }
    if r.receiver {
        let mut b = [0u8; 4];
        if r.two {
            agent
                .recv(&mut b[..2], Source::Rank(r.peer), TagMatch::Tag(9))
                .unwrap();
        }
        let st = agent
            .recv(&mut b, Source::Rank(r.peer), TagMatch::Tag(1))
            .unwrap();
        assert_eq!(st.count(), 4);
        assert_eq!(&b, b"sync");
    }
    if let Some(mut s) = sync {
        assert_eq!(s.wait().unwrap().count(), 4);
    }
}

/// [`Scale::threads`] threads of each rank post receives and sends on one agent at once, each
/// thread on its own tag; nothing is left unexpected at the end.
pub fn threads_share_one_agent(agent: Agent, s: &Scale) {
    let peer = roles(&agent).peer;
    let per_thread = s.per_thread;
    let threads: Vec<_> = (0..s.threads)
        .map(|t| {
            let agent = agent.clone();
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let (r, buf) = agent
                        .irecv(64, Source::Rank(peer), TagMatch::Tag(t))
                        .unwrap();
                    let s = agent.isend(peer, t, &[t as u8, i as u8]).unwrap();
                    let mut reqs = vec![r, s];
                    wait_all(&mut reqs, None).unwrap();
                    assert_eq!(buf.take(), vec![t as u8, i as u8]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(agent.unexpected(), (0, 0));
}
