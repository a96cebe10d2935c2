//! The byte stream of a VC over every method between ranks of one machine (`shm`, `tcp`):
//! `nextv`, reserved reads, `read`/`readv`, `writev`, `set_markerv`, method buffers
//! forwarded from one VC to another without a copy, and the errors. Ranks are threads of this
//! process, each with its own agent, connected through a real PMI-1 exchange, real sockets
//! and shared segments.

mod agent_common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use agent_common::{job, job_owned};

/// Upper bound on one wait inside a test.
const WAIT: Duration = Duration::from_secs(60);

/// Settings using only `method`, with a short failure-detection time.
fn config(method: MethodKind) -> Config {
    Config {
        peer_timeout: Duration::from_secs(2),
        ..agent_common::config(method)
    }
}
use viaduct_agent::agent::Agent;
use viaduct_agent::config::{Config, MethodKind};
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

/// Reads `len` stream bytes from `peer` through one reservation.
fn read_exact(agent: &Agent, peer: u32, len: usize) -> Vec<u8> {
    let res = agent.reserve_read(peer, len).unwrap();
    agent
        .read(res, vec![0u8; len])
        .unwrap()
        .wait_timeout(WAIT)
        .unwrap()
}

fn is_peer_failure(e: &AgentError, peer: u32) -> bool {
    e.failed_peer() == Some(peer)
}

/// Several stream messages shown at once and consumed across their boundaries; tagged traffic
/// behind them still flows.
fn nextv_across_messages(agent: Agent, ready: &Barrier) {
    let msgs: [&[u8]; 5] = [b"ab", b"cde", b"", b"fghij", b"k"];
    let all: Vec<u8> = msgs.concat();
    if agent.rank() == 0 {
        let mut reqs: Vec<_> = msgs
            .iter()
            .map(|m| agent.write(1, m.to_vec()).unwrap())
            .collect();
        for r in &mut reqs {
            r.wait_timeout(WAIT).unwrap().expect("write completes");
        }
        agent.send(1, 3, b"after").unwrap();
        ready.wait();
    } else {
        ready.wait();
        let shm = agent.method_of(0) == Some("shm");
        let mut got = Vec::new();
        let mut most_views = 0;
        let mut calls = 0;
        while got.len() < all.len() {
            calls += 1;
            assert!(calls < 1000, "stream bytes did not all come");
            let n = agent
                .nextv_timeout(0, WAIT, |views| {
                    most_views = most_views.max(views.len());
                    // Take 4 bytes, across message boundaries where several are shown.
                    let mut want = 4;
                    for v in views {
                        let k = want.min(v.len());
                        got.extend_from_slice(&v[..k]);
                        want -= k;
                        if k < v.len() || want == 0 {
                            break;
                        }
                    }
                    4
                })
                .unwrap();
            assert!(n.is_some(), "no stream message within the wait");
        }
        assert_eq!(got, all);
        if shm {
            // The shared-memory method shows the queued messages together, in place.
            assert!(most_views >= 3, "only {most_views} messages shown at once");
        }
        assert_eq!(agent.next(0, |d| d.len()).unwrap(), None);
        let mut b = [0u8; 5];
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(3))
            .unwrap();
        assert_eq!(&b, b"after");
    }
}

/// `stream_next*`: the closure marks what it consumes on the view and its own result comes
/// back; nothing marked leaves the bytes for the next call; the timed forms wait for a message
/// and give `None` at their timeout without calling the closure.
fn stream_views(agent: Agent, ready: &Barrier) {
    if agent.rank() == 0 {
        let mut record = 5u32.to_le_bytes().to_vec();
        record.extend_from_slice(b"hello");
        let mut reqs = vec![
            agent.write(1, record).unwrap(),
            agent.write(1, b"ab".to_vec()).unwrap(),
            agent.write(1, b"cd".to_vec()).unwrap(),
        ];
        for r in &mut reqs {
            r.wait_timeout(WAIT).unwrap().expect("write completes");
        }
        ready.wait();
    } else {
        // Nothing marked: the bytes stay.
        let shown = agent
            .stream_next_timeout(0, WAIT, |v| v.len())
            .unwrap()
            .expect("a stream message within the wait");
        assert_eq!(shown, 9);
        // The header, then the body.
        let len = agent
            .stream_next(0, |v| {
                let len = u32::from_le_bytes(v.data()[..4].try_into().unwrap());
                v.consume(4);
                len as usize
            })
            .unwrap();
        assert_eq!(len, Some(5));
        let body = agent
            .stream_next(0, |v| {
                let body = v.data().to_vec();
                v.consume_all();
                (body, v.consumed())
            })
            .unwrap();
        assert_eq!(body, Some((b"hello".to_vec(), 5)));
        // Two messages, consumed across their boundary.
        let mut got = Vec::new();
        while got.len() < 4 {
            agent
                .stream_nextv_timeout(0, WAIT, |vs| {
                    let take = 3usize.min(vs.len());
                    for v in vs.views() {
                        got.extend_from_slice(v);
                    }
                    got.truncate(got.len() - (vs.len() - take));
                    vs.consume(take);
                })
                .unwrap()
                .expect("stream messages within the wait");
        }
        assert_eq!(got, b"abcd");
        ready.wait();
        // Nothing more comes: None at the timeout, the closure not called.
        let limit = Duration::from_millis(100);
        let start = std::time::Instant::now();
        let none = agent
            .stream_next_timeout(0, limit, |_| panic!("nothing to show"))
            .unwrap();
        assert_eq!(none, None::<()>);
        assert!(start.elapsed() >= limit, "returned before its timeout");
    }
}

/// Reserved reads take the stream's bytes in reservation order, whatever the order in which
/// their buffers are bound and whether they were made before or after the bytes arrived.
fn reserve_read_order(agent: Agent, ready: &Barrier) {
    if agent.rank() == 0 {
        ready.wait(); // the first reservation is made
        for m in [&b"hel"[..], b"loabcw", b"xyz"] {
            agent.write(1, m.to_vec()).unwrap();
        }
        let mut last = agent.write(1, b"tail".to_vec()).unwrap();
        last.wait_timeout(WAIT).unwrap().expect("write completes");
        ready.wait();
    } else {
        let r1 = agent.reserve_read(0, 5).unwrap();
        ready.wait();
        ready.wait(); // every byte is sent
        let r2 = agent.reserve_read(0, 3).unwrap();
        let r3 = agent.reserve_read(0, 4).unwrap();
        assert_eq!((r1.len(), r2.peer()), (5, 0));
        let w3 = agent.read(r3, vec![0u8; 4]).unwrap();
        // The oldest reservation has no buffer yet: nothing is read, not even by `next`.
        assert_eq!(agent.next(0, |d| d.len()).unwrap(), None);
        let w2 = agent.readv(r2, vec![vec![0u8; 1], vec![0u8; 2]]).unwrap();
        let w1 = agent.read(r1, [0u8; 8]).unwrap();
        assert_eq!(&w1.wait_timeout(WAIT).unwrap()[..5], b"hello");
        assert_eq!(
            w2.wait_timeout(WAIT).unwrap(),
            vec![b"a".to_vec(), b"bc".to_vec()]
        );
        assert_eq!(w3.wait_timeout(WAIT).unwrap(), b"wxyz");
        // A dropped reservation gives its place up.
        drop(agent.reserve_read(0, 2).unwrap());
        assert_eq!(read_exact(&agent, 0, 4), b"tail");
    }
}

/// `read`/`readv` byte-exact at the edge sizes, from `write` and `writev`.
fn read_sizes(agent: Agent) {
    for (i, len) in [0usize, 1, 4095, 65536].into_iter().enumerate() {
        let data = pattern(len, i as u32);
        if agent.rank() == 0 {
            agent.write(1, data.clone()).unwrap();
            let (a, rest) = data.split_at(len / 3);
            let (b, c) = rest.split_at(rest.len() / 2);
            agent.writev(1, &[a, b, &[], c]).unwrap();
        } else {
            assert!(
                read_exact(&agent, 0, len) == data,
                "read of {len} bytes differs"
            );
            let res = agent.reserve_read(0, len).unwrap();
            let segs = vec![vec![0u8; len / 2], vec![], vec![0u8; len - len / 2]];
            let back = agent.readv(res, segs).unwrap().wait_timeout(WAIT).unwrap();
            assert!(back.concat() == data, "readv of {len} bytes differs");
        }
    }
    if agent.rank() == 0 {
        let mut r = agent.write(1, vec![9]).unwrap();
        r.wait_timeout(WAIT).unwrap().expect("write completes");
    } else {
        assert_eq!(read_exact(&agent, 0, 1), [9]);
    }
}

/// Messages bound with `set_markerv` out of order leave in reservation order.
fn set_markerv_order(agent: Agent) {
    let big = pattern(100_000, 7);
    if agent.rank() == 0 {
        let m1 = agent.reserve_write(1).unwrap();
        let m2 = agent.reserve_write(1).unwrap();
        let m3 = agent.reserve_write(1).unwrap();
        let later = agent.isend(1, 7, b"later").unwrap();
        let (a, b) = big.split_at(40_000);
        let mut reqs = vec![
            agent.set_markerv(m3, 7, &[a, b]).unwrap(),
            agent
                .set_markerv(m2, 7, &[b"second", b"", b"-two"])
                .unwrap(),
            agent.set_markerv(m1, 7, &[b"first"]).unwrap(),
            later,
        ];
        for r in &mut reqs {
            r.wait_timeout(WAIT).unwrap().expect("send completes");
        }
    } else {
        let mut got = Vec::new();
        for _ in 0..4 {
            let mut b = vec![0u8; big.len()];
            let st = agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(7))
                .unwrap();
            b.truncate(st.count() as usize);
            got.push(b);
        }
        assert_eq!(got[0], b"first");
        assert_eq!(got[1], b"second-two");
        assert!(got[2] == big, "the gathered long message differs");
        assert_eq!(got[3], b"later");
    }
}

/// Rank 1 reads what rank 0 writes straight into method buffers of its VC to rank 2 and
/// writes them on: the method sends from the very memory the read filled.
fn forward_without_copy(agent: Agent) {
    let sizes = [100usize, 65536];
    match agent.rank() {
        0 => {
            for (i, len) in sizes.into_iter().enumerate() {
                agent.write(1, pattern(len, 40 + i as u32)).unwrap();
            }
        }
        1 => {
            for len in sizes {
                let buf = agent.get_buffer(2, len).unwrap();
                assert_eq!((buf.peer(), buf.len()), (2, len));
                let filled_at = buf.as_ptr();
                let res = agent.reserve_read(0, len).unwrap();
                let buf = agent.read(res, buf).unwrap().wait_timeout(WAIT).unwrap();
                assert_eq!(buf.as_ptr(), filled_at, "the read filled other memory");
                let sent = agent.write_buffer(buf).unwrap().wait_timeout(WAIT).unwrap();
                // The method handed back the buffer it sent from: the one the read filled.
                assert_eq!(sent.as_ptr(), filled_at, "the method sent from a copy");
                agent.release_buffer(sent);
                let again = agent.get_buffer(2, len).unwrap();
                assert_eq!(
                    again.as_ptr(),
                    filled_at,
                    "the pool did not keep the buffer"
                );
                agent.release_buffer(again);
            }
            // The vectored forms: two buffers, written back to back.
            let bufs = agent.get_bufferv(2, 10).unwrap();
            assert_eq!(bufs.len(), 1);
            let mut bufs = bufs;
            bufs.push(agent.get_buffer(2, 3).unwrap());
            bufs[0].copy_from_slice(b"0123456789");
            bufs[1].copy_from_slice(b"abc");
            for w in agent.write_bufferv(bufs).unwrap() {
                drop(w); // the buffers go back to the pool when the method is done
            }
            let spare = agent.get_bufferv(2, 5).unwrap();
            agent.release_bufferv(spare);
            assert!(matches!(
                agent.write_bufferv(vec![
                    agent.get_buffer(0, 1).unwrap(),
                    agent.get_buffer(2, 1).unwrap()
                ]),
                Err(AgentError::MixedBuffers { first: 0, other: 2 })
            ));
        }
        _ => {
            for (i, len) in sizes.into_iter().enumerate() {
                assert!(
                    read_exact(&agent, 1, len) == pattern(len, 40 + i as u32),
                    "forwarded {len} bytes differ"
                );
            }
            assert_eq!(read_exact(&agent, 1, 13), b"0123456789abc");
        }
    }
}

/// Refusals: the self loop, lengths, buffers, finalize.
fn errors(agent: Agent) {
    let me = agent.rank();
    let peer = 1 - me;
    let max = agent.config().rendezvous_chunk;
    assert!(matches!(
        agent.write(me, vec![1]),
        Err(AgentError::SelfStream)
    ));
    assert!(matches!(
        agent.writev(me, &[b"x"]),
        Err(AgentError::SelfStream)
    ));
    assert!(matches!(
        agent.reserve_read(me, 1),
        Err(AgentError::SelfStream)
    ));
    assert!(matches!(
        agent.get_buffer(me, 1),
        Err(AgentError::SelfStream)
    ));
    assert!(matches!(
        agent.nextv(me, |_| 0),
        Err(AgentError::SelfStream)
    ));
    assert!(matches!(
        agent.write(peer, vec![0; max + 1]),
        Err(AgentError::StreamTooLong { .. })
    ));
    let half = vec![0u8; max / 2 + 1];
    assert!(matches!(
        agent.writev(peer, &[&half, &half]),
        Err(AgentError::StreamTooLong { .. })
    ));
    assert!(matches!(
        agent.get_buffer(peer, max + 1),
        Err(AgentError::StreamTooLong { .. })
    ));
    assert!(matches!(
        agent.write(7, vec![1]),
        Err(AgentError::BadRank { .. })
    ));
    let res = agent.reserve_read(peer, 10).unwrap();
    assert!(matches!(
        agent.read(res, vec![0u8; 9]),
        Err(AgentError::ReadBufferTooSmall {
            len: 10,
            capacity: 9
        })
    ));
    // The refused read gave its place up: the next one gets the bytes.
    if me == 0 {
        agent.write(1, b"ok".to_vec()).unwrap();
    } else {
        assert_eq!(read_exact(&agent, 0, 2), b"ok");
    }
    let other = agent.clone();
    let buf = agent.get_buffer(peer, 4).unwrap();
    agent.finalize().unwrap();
    assert!(matches!(
        other.write(peer, vec![1]),
        Err(AgentError::Finalized)
    ));
    assert!(matches!(
        other.reserve_read(peer, 1),
        Err(AgentError::Finalized)
    ));
    assert!(matches!(
        other.get_buffer(peer, 1),
        Err(AgentError::Finalized)
    ));
    assert!(matches!(
        other.write_buffer(buf),
        Err(AgentError::Finalized)
    ));
    assert!(matches!(
        other.nextv(peer, |_| 0),
        Err(AgentError::Finalized)
    ));
}

/// A peer that goes away: a pending read ends with the peer's failure (never hangs), later
/// stream operations on the VC fail too.
fn dead_peer(agent: Agent, ready: &Barrier) {
    if agent.rank() == 0 {
        agent
            .write(1, b"abc".to_vec())
            .unwrap()
            .wait_timeout(WAIT)
            .unwrap();
        ready.wait(); // the read is pending
        drop(agent);
        return;
    }
    let res = agent.reserve_read(0, 10).unwrap();
    let pending = agent.read(res, vec![0u8; 10]).unwrap();
    ready.wait();
    let e = pending
        .wait_timeout(WAIT)
        .expect_err("a read from a dead peer must fail");
    assert!(is_peer_failure(&e, 0), "unexpected error: {e:?}");
    let e = agent
        .write(0, vec![1])
        .unwrap()
        .wait_timeout(WAIT)
        .expect_err("a write to a dead peer must fail");
    assert!(is_peer_failure(&AgentError::Request(e), 0));
    let res = agent.reserve_read(0, 1).unwrap();
    let e = agent
        .read(res, vec![0u8; 1])
        .unwrap()
        .wait_timeout(WAIT)
        .expect_err("a read on a failed VC must fail");
    assert!(is_peer_failure(&e, 0), "unexpected error: {e:?}");
    let buf = agent.get_buffer(0, 8).unwrap();
    let e = agent
        .write_buffer(buf)
        .unwrap()
        .wait_timeout(WAIT)
        .expect_err("a buffer write to a dead peer must fail");
    assert!(is_peer_failure(&e, 0), "unexpected error: {e:?}");
    drop(agent);
}

fn with_barrier(size: u32, f: fn(Agent, &Barrier)) -> impl Fn(Agent) + Send + Sync + 'static {
    let barrier = Arc::new(Barrier::new(size as usize));
    move |a| f(a, &barrier)
}

macro_rules! per_method {
    ($($name:ident: $size:expr, $run:ident, $body:expr;)*) => {
        mod shm {
            use super::*;
            $(#[test] fn $name() { $run($size, config(MethodKind::Shm), $body); })*
        }
        mod tcp {
            use super::*;
            $(#[test] fn $name() { $run($size, config(MethodKind::Tcp), $body); })*
        }
    };
}

per_method! {
    nextv_across_messages: 2, job, with_barrier(2, super::nextv_across_messages);
    stream_views: 2, job, with_barrier(2, super::stream_views);
    reserve_read_order: 2, job, with_barrier(2, super::reserve_read_order);
    read_sizes: 2, job, super::read_sizes;
    set_markerv_order: 2, job, super::set_markerv_order;
    forward_without_copy: 3, job, super::forward_without_copy;
    errors: 2, job_owned, super::errors;
    dead_peer: 2, job_owned, with_barrier(2, super::dead_peer);
}
