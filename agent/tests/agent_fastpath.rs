//! The blocking `send`/`recv` fast paths (`viaduct_agent` module `fast`) keep every rule of the
//! general path: matching order against posted receives and the unexpected queue, wildcards,
//! truncation, rendezvous sizes, and long runs of fast sends. Over `shm` and `tcp`, ranks as
//! threads with their own agents.

mod agent_common;

use std::time::Duration;

use agent_common::{config, job};
use viaduct_agent::agent::Agent;
use viaduct_agent::config::MethodKind;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::wait_all;

const METHODS: [MethodKind; 2] = [MethodKind::Shm, MethodKind::Tcp];

fn msg(i: u32, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len).map(|k| (k as u32 ^ i) as u8).collect();
    if len >= 4 {
        m[..4].copy_from_slice(&i.to_le_bytes());
    }
    m
}

/// A receive posted before a blocking `recv` gets the first message even when the blocking
/// `recv` is the first to look at it in the method; both with wildcards.
fn posted_receive_comes_first(agent: Agent) {
    if agent.rank() == 0 {
        // Let rank 1 post and start spinning first.
        agent
            .recv(&mut [0u8; 1], Source::Rank(1), TagMatch::Tag(9))
            .unwrap();
        for i in 0..2u32 {
            agent.send(1, 10 + i, &msg(i, 64)).unwrap();
        }
    } else {
        let (mut first, buf) = agent.irecv(64, Source::Any, TagMatch::Any).unwrap();
        agent.send(0, 9, &[1]).unwrap();
        // Let both messages land in the method unread, so the blocking receive finds them
        // at the head of the VC.
        std::thread::sleep(Duration::from_millis(200));
        let mut b = [0u8; 64];
        let st = agent.recv(&mut b, Source::Any, TagMatch::Any).unwrap();
        assert_eq!((st.source(), st.tag(), st.count()), (Some(0), Some(11), 64));
        assert_eq!(b.to_vec(), msg(1, 64));
        let st = first.wait().unwrap();
        assert_eq!(st.tag(), Some(10));
        assert_eq!(buf.take(), msg(0, 64));
    }
}

/// Messages that arrived before the receive (the unexpected queue) are received in order,
/// eager and rendezvous mixed, then later ones in place; a tag filter skips others.
fn unexpected_then_in_place(agent: Agent) {
    let sizes = [8usize, 100_000, 16, 0, 200_000, 4096];
    if agent.rank() == 0 {
        // Rendezvous sends complete only once matched: start them all, wait later.
        let mut sends: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, len)| agent.isend(1, 5, &msg(i as u32, *len)).unwrap())
            .collect();
        sends.push(agent.isend(1, 6, &msg(99, 32)).unwrap());
        wait_all(&mut sends, None).unwrap();
        agent
            .recv(&mut [0u8; 1], Source::Rank(1), TagMatch::Tag(7))
            .unwrap();
        for (i, len) in sizes.iter().enumerate() {
            agent.send(1, 5, &msg(10 + i as u32, *len)).unwrap();
        }
    } else {
        // Wait until the first messages are all here (tag 6 comes last).
        agent
            .probe(
                Source::Rank(0),
                TagMatch::Tag(6),
                Some(Duration::from_secs(30)),
            )
            .unwrap();
        let mut b = vec![0u8; 200_000];
        for (i, len) in sizes.iter().enumerate() {
            let st = agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(5))
                .unwrap();
            assert_eq!(st.count(), *len as u64, "message {i}");
            assert_eq!(b[..*len].to_vec(), msg(i as u32, *len), "message {i}");
        }
        let st = agent.recv(&mut b, Source::Any, TagMatch::Any).unwrap();
        assert_eq!((st.tag(), st.count()), (Some(6), 32));
        agent.send(0, 7, &[1]).unwrap();
        for (i, len) in sizes.iter().enumerate() {
            let st = agent.recv(&mut b, Source::Any, TagMatch::Tag(5)).unwrap();
            assert_eq!(st.count(), *len as u64, "message {}", 10 + i);
            assert_eq!(b[..*len].to_vec(), msg(10 + i as u32, *len));
        }
    }
}

/// A blocking `recv` shorter than the message fails with `Truncated`, its buffer holding the
/// first bytes; the next message is still received whole.
fn truncation(agent: Agent) {
    if agent.rank() == 0 {
        agent.send(1, 3, &msg(1, 100)).unwrap();
        agent.send(1, 3, &msg(2, 10)).unwrap();
    } else {
        let mut b = [0u8; 50];
        let err = agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(3))
            .unwrap_err();
        assert!(err.is_truncated(), "expected a truncation, got {err:?}");
        assert!(
            err.to_string()
                .contains("message of 100 bytes truncated to the receive buffer of 50 bytes"),
            "{err}"
        );
        assert_eq!(b.to_vec(), msg(1, 100)[..50].to_vec());
        let st = agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(3))
            .unwrap();
        assert_eq!(st.count(), 10);
        assert_eq!(b[..10].to_vec(), msg(2, 10));
    }
}

/// Many fast sends in a row, the last right before `finalize`: every one arrives, in order,
/// also when the method runs out of room and the general path queues some.
fn sends_then_finalize(agent: Agent) {
    const N: u32 = 5000;
    if agent.rank() == 0 {
        for i in 0..N {
            agent.send(1, 1, &msg(i, 24)).unwrap();
        }
    } else {
        let mut b = [0u8; 24];
        for i in 0..N {
            agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
                .unwrap();
            assert_eq!(b.to_vec(), msg(i, 24), "message {i}");
        }
    }
}

/// An eager `isend` that the method takes at once is complete when it returns (no progress
/// call in between); a synchronous or rendezvous one waits for its receiver. A stream of such
/// sends, some of them queued when the method runs out of room, all arrive, in order.
fn isends_complete_as_they_leave(agent: Agent) {
    const N: u32 = 3000;
    if agent.rank() == 0 {
        let first = agent.isend(1, 1, &msg(0, 24)).unwrap();
        assert!(
            first.is_complete(),
            "an eager isend the method took is complete at return"
        );
        let sync = agent.issend(1, 2, &msg(1, 24)).unwrap();
        let long = agent.isend(1, 3, &msg(2, 100_000)).unwrap();
        assert!(
            !sync.is_complete(),
            "a synchronous isend completed before its match"
        );
        assert!(
            !long.is_complete(),
            "a rendezvous isend completed before its match"
        );
        let mut reqs = vec![first, sync, long];
        for i in 1..N {
            reqs.push(agent.isend(1, 1, &msg(i, 24)).unwrap());
        }
        wait_all(&mut reqs, None).unwrap();
    } else {
        // The first message waits in the method until the receives below: the synchronous
        // and rendezvous sends cannot complete before them.
        std::thread::sleep(Duration::from_millis(100));
        let mut b = [0u8; 24];
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
            .unwrap();
        assert_eq!(b.to_vec(), msg(0, 24));
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(2))
            .unwrap();
        assert_eq!(b.to_vec(), msg(1, 24));
        let mut long = vec![0u8; 100_000];
        agent
            .recv(&mut long, Source::Rank(0), TagMatch::Tag(3))
            .unwrap();
        assert_eq!(long, msg(2, 100_000));
        for i in 1..N {
            agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
                .unwrap();
            assert_eq!(b.to_vec(), msg(i, 24), "message {i}");
        }
    }
}

/// Three ranks: any-source blocking receives get every message of both senders, each
/// sender's in order.
fn any_source_order(agent: Agent) {
    const N: u32 = 2000;
    if agent.rank() > 0 {
        for i in 0..N {
            agent.send(0, 4, &msg(i, 12)).unwrap();
        }
    } else {
        let mut next = [0u32; 3];
        let mut b = [0u8; 12];
        for _ in 0..2 * N {
            let st = agent.recv(&mut b, Source::Any, TagMatch::Tag(4)).unwrap();
            let from = st.source().unwrap() as usize;
            assert_eq!(b.to_vec(), msg(next[from], 12), "from {from}");
            next[from] += 1;
        }
        assert_eq!(next, [0, N, N]);
    }
}

/// Four threads of each rank run blocking ping-pongs on one agent at once, each on its own
/// tag, while a fifth thread receives a stream with any source: every message reaches the
/// right thread, in order.
fn threads_block_on_one_agent(agent: Agent) {
    const ROUNDS: u32 = 200;
    let me = agent.rank();
    let peer = 1 - me;
    let mut threads: Vec<_> = (0..4u32)
        .map(|t| {
            let agent = agent.clone();
            std::thread::spawn(move || {
                let mut b = [0u8; 16];
                for i in 0..ROUNDS {
                    let m = msg(t * 100_000 + i, 16);
                    if me == 0 {
                        agent.send(peer, t, &m).unwrap();
                        agent
                            .recv(&mut b, Source::Rank(peer), TagMatch::Tag(t))
                            .unwrap();
                    } else {
                        agent
                            .recv(&mut b, Source::Rank(peer), TagMatch::Tag(t))
                            .unwrap();
                        agent.send(peer, t, &b).unwrap();
                    }
                    assert_eq!(b.to_vec(), m, "thread {t}, round {i}");
                }
            })
        })
        .collect();
    let stream = agent.clone();
    threads.push(std::thread::spawn(move || {
        let mut b = [0u8; 8];
        for i in 0..ROUNDS {
            if me == 0 {
                stream.send(peer, 100, &msg(i, 8)).unwrap();
            } else {
                let st = stream
                    .recv(&mut b, Source::Any, TagMatch::Tag(100))
                    .unwrap();
                assert_eq!((st.source(), st.tag()), (Some(0), Some(100)));
                assert_eq!(b.to_vec(), msg(i, 8), "stream message {i}");
            }
        }
    }));
    for t in threads {
        t.join().unwrap();
    }
}

/// Eager messages carry their envelope in the method tag for contexts below 2^24 and in a
/// header above: both forms match only their own context and tag, through the fast paths,
/// posted receives and the unexpected queue alike, at the edges of both fields.
fn contexts_on_both_sides_of_the_packed_range(agent: Agent) {
    let packed = agent.with_context((1 << 24) - 1);
    let wide = agent.with_context(1 << 24);
    let tag = u32::MAX - 1;
    if agent.rank() == 0 {
        for (i, len) in [8usize, 4096].into_iter().enumerate() {
            // The wide-context message goes first: the receive on the packed context must
            // pass it over (unexpected queue) and take the second.
            wide.send(1, tag, &msg(i as u32, len)).unwrap();
            packed.send(1, tag, &msg(100 + i as u32, len)).unwrap();
            let mut r = vec![
                wide.isend(1, 3, &msg(200 + i as u32, len)).unwrap(),
                packed.isend(1, 3, &msg(300 + i as u32, len)).unwrap(),
            ];
            wait_all(&mut r, None).unwrap();
        }
    } else {
        for (i, len) in [8usize, 4096].into_iter().enumerate() {
            let i = i as u32;
            let mut b = vec![0u8; len];
            let st = packed.recv(&mut b, Source::Any, TagMatch::Any).unwrap();
            assert_eq!(
                (st.source(), st.tag(), st.count()),
                (Some(0), Some(tag), len as u64)
            );
            assert_eq!(b, msg(100 + i, len));
            let st = wide
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(tag))
                .unwrap();
            assert_eq!(st.count(), len as u64);
            assert_eq!(b, msg(i, len));
            // Posted receives, the wide one first, each takes its own context's message.
            let (mut w, wb) = wide.irecv(len, Source::Rank(0), TagMatch::Tag(3)).unwrap();
            let (mut p, pb) = packed.irecv(len, Source::Any, TagMatch::Tag(3)).unwrap();
            assert_eq!(p.wait().unwrap().count(), len as u64);
            assert_eq!(w.wait().unwrap().count(), len as u64);
            assert_eq!(
                (wb.take(), pb.take()),
                (msg(200 + i, len), msg(300 + i, len))
            );
        }
    }
}

#[test]
fn eager_envelopes_match_on_both_sides_of_the_packed_context_range() {
    for m in METHODS {
        job(2, config(m), contexts_on_both_sides_of_the_packed_range);
    }
}

#[test]
fn threads_run_blocking_ping_pongs_on_one_agent() {
    for m in METHODS {
        job(2, config(m), threads_block_on_one_agent);
    }
}

#[test]
fn a_posted_receive_comes_before_a_blocking_one() {
    for m in METHODS {
        job(2, config(m), posted_receive_comes_first);
    }
}

#[test]
fn unexpected_messages_then_in_place_ones_arrive_in_order() {
    for m in METHODS {
        job(2, config(m), unexpected_then_in_place);
    }
}

#[test]
fn a_short_blocking_receive_reports_truncation() {
    for m in METHODS {
        job(2, config(m), truncation);
    }
}

#[test]
fn a_stream_of_fast_sends_arrives_whole_and_in_order() {
    for m in METHODS {
        job(2, config(m), sends_then_finalize);
    }
}

#[test]
fn any_source_blocking_receives_keep_each_senders_order() {
    for m in METHODS {
        job(3, config(m), any_source_order);
    }
}

#[test]
fn an_eager_isend_the_method_takes_is_complete_when_it_returns() {
    for m in METHODS {
        job(2, config(m), isends_complete_as_they_leave);
    }
}
