//! The same test bodies over every method between ranks of one machine (`shm`, `tcp`): ranks
//! are threads of this process, each with its own agent, connected through a real PMI-1
//! exchange, real sockets and shared segments, and the job-key handshake.

mod agent_common;

use agent_common::{config, job};
use viaduct_agent::agent::Agent;
use viaduct_agent::config::MethodKind;
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, RequestError, wait_all};

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

fn ping_pong(agent: Agent) {
    let me = agent.rank();
    let peer = 1 - me;
    assert!(agent.method_of(peer).is_some());
    for (i, len) in [0usize, 1, 100, 16_000, 16_321, 100_000, 5 << 20]
        .into_iter()
        .enumerate()
    {
        for round in 0..3u32 {
            let data = pattern(len, round + i as u32);
            let mut buf = vec![0u8; len];
            if me == 0 {
                agent.send(peer, i as u32, &data).unwrap();
                let st = agent
                    .recv(&mut buf, Source::Rank(peer), TagMatch::Tag(i as u32))
                    .unwrap();
                assert_eq!(st.count(), len as u64);
            } else {
                let st = agent.recv(&mut buf, Source::Any, TagMatch::Any).unwrap();
                assert_eq!(
                    (st.source(), st.tag(), st.count()),
                    (Some(0), Some(i as u32), len as u64)
                );
                agent.send(peer, i as u32, &buf).unwrap();
            }
            assert!(buf == data, "payload of {len} bytes differs");
        }
    }
    for _ in 0..1000 {
        let mut b = [0u8; 8];
        if me == 0 {
            agent.send(1, 77, &[1; 8]).unwrap();
            agent
                .recv(&mut b, Source::Rank(1), TagMatch::Tag(77))
                .unwrap();
        } else {
            agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(77))
                .unwrap();
            agent.send(0, 77, &b).unwrap();
        }
    }
}

fn all_to_all_any_source(agent: Agent) {
    const PER_PEER: u32 = 20;
    let me = agent.rank();
    let n = agent.size();
    let mut sends: Vec<Request> = Vec::new();
    for round in 0..PER_PEER {
        for p in (0..n).filter(|p| *p != me) {
            let len = if round % 5 == 4 { 40_000 } else { 64 };
            let mut msg = pattern(len, me * 1000 + round);
            msg[..8].copy_from_slice(&[me as u8, round as u8, 0, 0, 0, 0, 0, 0]);
            sends.push(agent.isend(p, 5, &msg).unwrap());
        }
    }
    let mut next = vec![0u32; n as usize];
    for _ in 0..PER_PEER * (n - 1) {
        let (mut r, buf) = agent.irecv(40_000, Source::Any, TagMatch::Tag(5)).unwrap();
        let st = r.wait().unwrap();
        let data = buf.take();
        let src = st.source().unwrap();
        assert_eq!(data[0] as u32, src);
        // Messages of one sender arrive in send order (non-overtaking), eager or not.
        assert_eq!(data[1] as u32, next[src as usize]);
        next[src as usize] += 1;
    }
    wait_all(&mut sends, None).unwrap();
    assert!(
        next.iter()
            .enumerate()
            .all(|(p, c)| p as u32 == me || *c == PER_PEER)
    );
}

fn many_unexpected(agent: Agent) {
    const N: u32 = 100_000;
    if agent.rank() == 0 {
        for i in 0..N {
            agent.isend(1, 1, &i.to_le_bytes()).unwrap().wait().unwrap();
        }
        agent.ssend(1, 2, b"done").unwrap();
    } else {
        let mut b = [0u8; 4];
        // Receiving the last message makes every earlier one unexpected first.
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(2))
            .unwrap();
        assert_eq!(agent.unexpected(), (N as usize, 4 * N as usize));
        for i in 0..N {
            agent.recv(&mut b, Source::Any, TagMatch::Tag(1)).unwrap();
            assert_eq!(u32::from_le_bytes(b), i);
        }
        assert_eq!(agent.unexpected(), (0, 0));
    }
}

fn truncation(agent: Agent) {
    assert!(agent.make_progress_vc(1 - agent.rank()).is_ok());
    assert!(matches!(
        agent.make_progress_vc(2),
        Err(AgentError::BadRank { .. })
    ));
    if agent.rank() == 0 {
        agent.send(1, 1, &[9u8; 100]).unwrap();
        agent.send(1, 2, &vec![8u8; 1 << 20]).unwrap();
    } else {
        for (tag, len, byte) in [(1u32, 100u64, 9u8), (2, 1 << 20, 8)] {
            let (mut r, buf) = agent.irecv(10, Source::Any, TagMatch::Tag(tag)).unwrap();
            let e = r.wait().unwrap_err();
            let RequestError::Operation(c) = &e else {
                panic!("{e:?}")
            };
            assert!(matches!(
                c.downcast_ref::<AgentError>(),
                Some(AgentError::Truncated { len: l, capacity: 10 }) if *l == len
            ));
            assert_eq!(buf.take(), vec![byte; 10]);
        }
    }
}

fn sixty_four_mib(agent: Agent) {
    let len = 64 << 20;
    if agent.rank() == 0 {
        let data = pattern(len, 42);
        agent.send(1, 3, &data).unwrap();
        let mut back = vec![0u8; len];
        agent
            .recv(&mut back, Source::Rank(1), TagMatch::Tag(4))
            .unwrap();
        assert!(back == data, "64 MiB round trip is not byte-exact");
    } else {
        let (mut r, buf) = agent.irecv(len, Source::Rank(0), TagMatch::Tag(3)).unwrap();
        assert_eq!(r.wait().unwrap().count(), len as u64);
        let data = buf.take();
        assert!(data == pattern(len, 42), "64 MiB message is not byte-exact");
        agent.isend_owned(0, 4, data).unwrap().wait().unwrap();
    }
}

fn markers_keep_order(agent: Agent) {
    if agent.rank() == 0 {
        let m1 = agent.reserve_write(1).unwrap();
        let m2 = agent.reserve_write(1).unwrap();
        let mut c = agent.isend(1, 0, b"c").unwrap();
        let mut b = agent.set_marker(m2, 0, &vec![b'b'; 50_000]).unwrap();
        assert!(
            c.test().unwrap().is_none(),
            "a message overtook a reserved place"
        );
        let mut a = agent.set_marker(m1, 0, b"a").unwrap();
        a.wait().unwrap();
        b.wait().unwrap();
        c.wait().unwrap();
    } else {
        let mut got = Vec::new();
        for _ in 0..3 {
            let (mut r, buf) = agent.irecv(50_000, Source::Rank(0), TagMatch::Any).unwrap();
            r.wait().unwrap();
            got.push(buf.take()[0]);
        }
        assert_eq!(got, b"abc");
    }
}

fn synchronous_send(agent: Agent) {
    if agent.rank() == 0 {
        let mut s = agent.issend(1, 1, b"sync").unwrap();
        // Rank 1 posts its receive only after our go: the ssend cannot have completed before.
        for _ in 0..50 {
            assert!(s.test().unwrap().is_none());
        }
        agent.send(1, 9, b"go").unwrap();
        s.wait().unwrap();
    } else {
        let mut b = [0u8; 4];
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(9))
            .unwrap();
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
            .unwrap();
        assert_eq!(&b, b"sync");
    }
}

fn threads_share_one_agent(agent: Agent) {
    let peer = 1 - agent.rank();
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let agent = agent.clone();
            std::thread::spawn(move || {
                for i in 0..200u32 {
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
}

/// With a small `max_unexpected_bytes`, a receiver that posts no receive holds at most about
/// that much of unexpected payload: the rest waits in the method (back-pressure on the
/// sender), and every message still arrives, in order, once receives are posted.
fn unexpected_memory_is_bounded(agent: Agent) {
    const N: u32 = 2000;
    const LEN: usize = 1024;
    let limit = agent.config().max_unexpected_bytes;
    if agent.rank() == 0 {
        let mut reqs: Vec<Request> = (0..N)
            .map(|i| agent.isend(1, 1, &[i as u8; LEN]).unwrap())
            .collect();
        wait_all(&mut reqs, None).unwrap();
    } else {
        let mut rounds = 0;
        while agent.unexpected().1 < limit && rounds < 20_000 {
            agent.make_progress_blocking(std::time::Duration::from_millis(1));
            rounds += 1;
        }
        assert!(
            agent.unexpected().1 >= limit,
            "the sender never filled the limit"
        );
        for _ in 0..1000 {
            agent.make_progress();
        }
        // One pass may take one burst of 64 messages past the limit, no more.
        let held = agent.unexpected().1;
        assert!(
            held <= limit + 64 * LEN,
            "{held} bytes held for a limit of {limit}"
        );
        for i in 0..N {
            let mut b = [0u8; LEN];
            agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
                .unwrap();
            assert_eq!(b[0], i as u8);
        }
    }
}

fn small_limit(method: MethodKind) -> viaduct_agent::config::Config {
    viaduct_agent::config::Config {
        max_unexpected_bytes: 64 << 10,
        ..config(method)
    }
}

#[test]
fn unexpected_memory_bounded_shm() {
    job(
        2,
        small_limit(MethodKind::Shm),
        unexpected_memory_is_bounded,
    );
}

#[test]
fn unexpected_memory_bounded_tcp() {
    job(
        2,
        small_limit(MethodKind::Tcp),
        unexpected_memory_is_bounded,
    );
}

/// The VC's byte stream: messages shown in place, consumed in parts, in order with the
/// tagged messages around them.
fn byte_stream(agent: Agent) {
    use std::time::Duration;
    let limit = Duration::from_secs(30);
    if agent.rank() == 0 {
        let mut reqs = vec![
            agent.write(1, b"first".to_vec()).unwrap(),
            agent.isend(1, 7, b"tagged").unwrap(),
            agent.write(1, pattern(300_000, 5)).unwrap(),
        ];
        wait_all(&mut reqs, None).unwrap();
    } else {
        let mut got = Vec::new();
        // Consumed in two parts.
        let n = agent
            .next_timeout(0, limit, |d| {
                got.extend_from_slice(&d[..2]);
                2
            })
            .unwrap();
        assert_eq!(n, Some(2));
        let n = agent
            .next_timeout(0, limit, |d| {
                got.extend_from_slice(d);
                d.len()
            })
            .unwrap();
        assert_eq!(n, Some(3));
        assert_eq!(got, b"first");
        let mut b = [0u8; 6];
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(7))
            .unwrap();
        assert_eq!(&b, b"tagged");
        let mut big = Vec::new();
        agent
            .next_timeout(0, limit, |d| {
                big.extend_from_slice(d);
                d.len()
            })
            .unwrap();
        assert!(big == pattern(300_000, 5));
        assert_eq!(agent.next(0, |d| d.len()).unwrap(), None);
        assert!(matches!(
            agent.write(1, vec![1]),
            Err(AgentError::SelfStream)
        ));
        assert!(matches!(
            agent.write(0, vec![0; 64 << 20]),
            Err(AgentError::StreamTooLong { .. })
        ));
    }
}

macro_rules! for_methods {
    ($($name:ident: $size:expr, $body:expr;)*) => {
        mod shm {
            use super::*;
            $(#[test] fn $name() { job($size, config(MethodKind::Shm), $body); })*
        }
        mod tcp {
            use super::*;
            $(#[test] fn $name() { job($size, config(MethodKind::Tcp), $body); })*
        }
    };
}

for_methods! {
    ping_pong_2: 2, ping_pong;
    all_to_all_4: 4, all_to_all_any_source;
    all_to_all_8: 8, all_to_all_any_source;
    unexpected_100k: 2, many_unexpected;
    truncated: 2, truncation;
    message_64_mib: 2, sixty_four_mib;
    reserve_write_set_marker: 2, markers_keep_order;
    ssend: 2, synchronous_send;
    threads: 2, threads_share_one_agent;
    stream: 2, byte_stream;
}

#[test]
fn methods_are_as_chosen() {
    let kinds = job(2, config(MethodKind::Tcp), |a| {
        a.method_of(1 - a.rank()).unwrap()
    });
    assert_eq!(kinds, vec!["tcp", "tcp"]);
    let kinds = job(2, agent_common::config(MethodKind::Shm), |a| {
        a.method_of(1 - a.rank()).unwrap()
    });
    assert_eq!(kinds, vec!["shm", "shm"]);
}
