//! Matched probe (`Agent::mprobe`, `Agent::improbe`, `Message`): the probed message leaves
//! matching at once (no later probe or receive sees it) and is received through its handle,
//! small (eager) and large (rendezvous, answered at the receive) alike, on one rank (the self
//! loop) and between two ranks over shared memory and TCP.

#[macro_use]
mod agent_common;

use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::config::MethodKind;
use viaduct_agent::matching::{Source, TagMatch};

const LIMIT: Option<Duration> = Some(Duration::from_secs(60));

fn data(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn self_loop_message_leaves_matching() {
    let a = Agent::singleton().expect("single-rank agent");
    a.send(0, 4, &data(100, 1)).unwrap();
    let m = a
        .improbe(Source::Any, TagMatch::Any)
        .unwrap()
        .expect("matched");
    assert_eq!((m.source(), m.tag(), m.len()), (0, 4, 100));
    // Gone from matching: neither a probe nor a receive finds it.
    assert_eq!(a.iprobe(Source::Any, TagMatch::Any).unwrap(), None);
    assert!(a.improbe(Source::Any, TagMatch::Any).unwrap().is_none());
    let (mut pending, other) = a.irecv(100, Source::Any, TagMatch::Tag(4)).unwrap();
    let mut buf = vec![0u8; 100];
    let st = m.recv(&mut buf).unwrap();
    assert_eq!((st.source(), st.tag(), st.count()), (Some(0), Some(4), 100));
    assert_eq!(buf, data(100, 1));
    assert!(
        pending.test().unwrap().is_none(),
        "the receive took a matched message"
    );
    a.send(0, 4, &data(10, 2)).unwrap();
    pending.wait().unwrap();
    assert_eq!(other.take(), data(10, 2));
    // A synchronous send to self completes when its message is received through the handle.
    let mut s = a.issend(0, 5, &[9; 3]).unwrap();
    let m = a.mprobe(Source::Rank(0), TagMatch::Tag(5), LIMIT).unwrap();
    assert!(s.test().unwrap().is_none());
    let (mut r, got) = m.irecv(3).unwrap();
    r.wait().unwrap();
    s.wait().unwrap();
    assert_eq!(got.take(), vec![9; 3]);
    a.finalize().unwrap();
}

#[test]
fn self_loop_truncation_and_drop() {
    let a = Agent::singleton().expect("single-rank agent");
    a.send(0, 1, &data(50, 3)).unwrap();
    let m = a.mprobe(Source::Any, TagMatch::Any, LIMIT).unwrap();
    let mut small = [0u8; 10];
    assert!(m.recv(&mut small).is_err(), "a longer message is truncated");
    assert_eq!(&small[..], &data(50, 3)[..10]);
    // A message dropped unreceived is gone, and a synchronous send of it completes.
    let mut s = a.issend(0, 2, &[1]).unwrap();
    drop(a.mprobe(Source::Any, TagMatch::Any, LIMIT).unwrap());
    s.wait().unwrap();
    assert_eq!(a.iprobe(Source::Any, TagMatch::Any).unwrap(), None);
    a.finalize().unwrap();
}

fn two_ranks(method: MethodKind) {
    let config = agent_common::config(method);
    let big = 3 * config.eager_limit + 17;
    agent_common::job(2, config, move |a: Agent| {
        if a.rank() == 1 {
            a.send(0, 7, &data(40, 5)).unwrap();
            a.send(0, 8, &data(big, 6)).unwrap();
            // A large message whose handle is dropped unreceived: the send still completes.
            a.send(0, 9, &data(big, 7)).unwrap();
            a.send(0, 10, &[1]).unwrap();
            return;
        }
        // The large message first: its announcement is matched; the data moves at the receive.
        let m = a.mprobe(Source::Any, TagMatch::Tag(8), LIMIT).unwrap();
        assert_eq!((m.source(), m.tag(), m.len()), (1, 8, big as u64));
        assert!(a.iprobe(Source::Any, TagMatch::Tag(8)).unwrap().is_none());
        let small = a.mprobe(Source::Rank(1), TagMatch::Any, LIMIT).unwrap();
        assert_eq!((small.tag(), small.len()), (7, 40));
        let (mut r, got) = m.irecv(big).unwrap();
        let st = r.wait().unwrap();
        assert_eq!(
            (st.source(), st.tag(), st.count()),
            (Some(1), Some(8), big as u64)
        );
        assert_eq!(got.take(), data(big, 6));
        let mut buf = vec![0u8; 40];
        small.recv(&mut buf).unwrap();
        assert_eq!(buf, data(40, 5));
        drop(a.mprobe(Source::Any, TagMatch::Tag(9), LIMIT).unwrap());
        let mut one = [0u8; 1];
        a.recv(&mut one, Source::Rank(1), TagMatch::Tag(10))
            .unwrap();
    });
}

#[test]
fn two_ranks_shm() {
    two_ranks(MethodKind::Shm);
}

#[test]
fn two_ranks_tcp() {
    two_ranks(MethodKind::Tcp);
}

#[test]
fn threads_do_not_take_each_others_message() {
    let config = agent_common::config(MethodKind::Shm);
    agent_common::job(2, config, |a: Agent| {
        const EACH: u32 = 200;
        if a.rank() == 1 {
            for i in 0..2 * EACH {
                a.send(0, 3, &i.to_le_bytes()).unwrap();
            }
            return;
        }
        let seen = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..EACH {
                        let m = a.mprobe(Source::Any, TagMatch::Tag(3), LIMIT).unwrap();
                        let mut b = [0u8; 4];
                        m.recv(&mut b).unwrap();
                        seen.lock().unwrap().push(u32::from_le_bytes(b));
                    }
                });
            }
        });
        let mut v = seen.into_inner().unwrap();
        v.sort_unstable();
        assert_eq!(v, (0..2 * EACH).collect::<Vec<_>>());
    });
}
