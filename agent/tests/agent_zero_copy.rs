//! Sends from memory the caller shares (`Agent::isend_shared`, `Agent::issend_shared`) and
//! receives into memory the caller hands over (`RecvBuffer::caller`), between two ranks over
//! shared memory and over TCP: messages below and above the eager limit and over several
//! rendezvous pieces arrive whole in the caller's memory and nowhere beyond it, a shorter
//! buffer truncates, a receive cancelled or detached before its message writes nothing, and
//! the agent holds no reference to the sender's memory once the send completed. And the
//! broadcast in place (`Comm::bcast_in_place`) on two and three ranks, on each of its paths.
//! And every kind of send on both sides of the shared-memory ring-copy limit, where the
//! rendezvous pieces change size.

#[macro_use]
mod agent_common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_common::{config, job};
use viaduct_agent::agent::Agent;
use viaduct_agent::coll::BCAST_IN_PLACE_MAX;
use viaduct_agent::comm::Comm;
use viaduct_agent::config::{Config, MethodKind};
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::p2p::SharedBytes;
use viaduct_agent::recv_buffer::RecvBuffer;

/// Rendezvous pieces of this many bytes, so a long message spans several.
const CHUNK: usize = 64 << 10;
/// Bytes past the message that the receiver's memory has, which must stay untouched.
const GUARD: usize = 64;
/// What the receiver's memory holds before a message lands.
const FILL: u8 = 0xEE;

fn settings(method: MethodKind) -> Config {
    Config {
        rendezvous_chunk: CHUNK,
        ..config(method)
    }
}

fn msg(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

/// The sizes: empty, small, the eager limit and one past it, and several pieces.
fn sizes(agent: &Agent) -> Vec<usize> {
    let eager = agent.config().eager_limit;
    vec![0, 100, eager, eager + 1, 3 * CHUNK + 5]
}

/// The caller's memory of a receive after it completed, taken back from the buffer.
fn memory_of(buf: &RecvBuffer) -> Vec<u8> {
    let mut mem = buf.detach().expect("caller memory");
    (*mem).as_mut().to_vec()
}

fn shared_to_caller(method: MethodKind) {
    job(2, settings(method), |agent| {
        let sizes = sizes(&agent);
        if agent.rank() == 0 {
            for (i, &len) in sizes.iter().enumerate() {
                for sync in [false, true] {
                    let tag = (2 * i + usize::from(sync)) as u32;
                    let data: Arc<Vec<u8>> = Arc::new(msg(tag, len));
                    let shared: SharedBytes = data.clone();
                    let mut req = if sync {
                        agent.issend_shared(1, tag, shared).unwrap()
                    } else {
                        agent.isend_shared(1, tag, shared).unwrap()
                    };
                    let st = req.wait().unwrap();
                    assert_eq!(st.count(), len as u64, "send of {len} bytes");
                    // Nothing of the agent refers to the sender's memory any more.
                    assert_eq!(Arc::strong_count(&data), 1, "send of {len} bytes");
                }
            }
        } else {
            for (i, &len) in sizes.iter().enumerate() {
                for sync in [false, true] {
                    let tag = (2 * i + usize::from(sync)) as u32;
                    let buf = RecvBuffer::caller(Box::new(vec![FILL; len + GUARD]));
                    assert!(buf.is_caller_owned());
                    let mut req = agent
                        .irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(tag))
                        .unwrap();
                    let st = req.wait().unwrap();
                    assert_eq!(st.count(), len as u64);
                    assert_eq!(buf.len(), len);
                    assert!(buf.with(|b| b == msg(tag, len).as_slice()));
                    let mem = memory_of(&buf);
                    assert_eq!(mem[..len], msg(tag, len)[..], "{len} bytes, sync {sync}");
                    assert_eq!(mem[len..], vec![FILL; GUARD][..], "past {len} bytes");
                }
            }
        }
    });
}

fn truncated_into_caller(method: MethodKind) {
    job(2, settings(method), |agent| {
        let sizes = sizes(&agent);
        if agent.rank() == 0 {
            let mut reqs = Vec::new();
            for (i, &len) in sizes.iter().enumerate().skip(1) {
                let data: SharedBytes = Arc::new(msg(i as u32, len));
                reqs.push(agent.isend_shared(1, i as u32, data).unwrap());
            }
            for mut r in reqs {
                r.wait().unwrap();
            }
        } else {
            for (i, &len) in sizes.iter().enumerate().skip(1) {
                let cap = len / 2;
                let buf = RecvBuffer::caller(Box::new(vec![FILL; cap]));
                let mut req = agent
                    .irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(i as u32))
                    .unwrap();
                let err = AgentError::from(req.wait().unwrap_err());
                assert!(err.is_truncated(), "{len} bytes into {cap}: {err}");
                assert_eq!(
                    memory_of(&buf),
                    msg(i as u32, len)[..cap],
                    "{len} into {cap}"
                );
            }
        }
    });
}

/// A receive cancelled, and one detached, before their message was sent: neither writes the
/// caller's memory; the messages go to the receives posted next.
fn cancelled_and_detached_write_nothing(method: MethodKind) {
    job(2, settings(method), |agent| {
        let long = agent.config().eager_limit * 2 + 7;
        if agent.rank() == 1 {
            let cancelled = RecvBuffer::caller(Box::new(vec![FILL; long]));
            let mut req = agent
                .irecv_into(cancelled.clone(), Source::Rank(0), TagMatch::Tag(5))
                .unwrap();
            req.cancel().unwrap();
            assert!(req.wait().unwrap().test_cancelled());
            // Detached while it waits: it still completes, the bytes go nowhere.
            let detached = RecvBuffer::caller(Box::new(vec![FILL; long]));
            let mut dreq = agent
                .irecv_into(detached.clone(), Source::Rank(0), TagMatch::Tag(6))
                .unwrap();
            let mut dmem = detached.detach().expect("caller memory");
            assert!(detached.detach().is_none(), "detached twice");
            agent.send(0, 1, b"go").unwrap();
            let st = dreq
                .wait_timeout(Duration::from_secs(60))
                .unwrap()
                .expect("the detached receive completes");
            assert_eq!(st.count(), long as u64);
            assert_eq!(detached.len(), 0);
            assert_eq!((*dmem).as_mut().to_vec(), vec![FILL; long]);
            // The message of tag 5 went to this receive, not to the cancelled one.
            let next = RecvBuffer::caller(Box::new(vec![0u8; long]));
            let mut nreq = agent
                .irecv_into(next.clone(), Source::Rank(0), TagMatch::Tag(5))
                .unwrap();
            nreq.wait().unwrap();
            assert_eq!(memory_of(&next), msg(5, long));
            assert_eq!(memory_of(&cancelled), vec![FILL; long]);
        } else {
            let mut b = [0u8; 2];
            agent
                .recv(&mut b, Source::Rank(1), TagMatch::Tag(1))
                .unwrap();
            let mut a = agent.isend_shared(1, 6, Arc::new(msg(6, long))).unwrap();
            let mut c = agent.isend_shared(1, 5, Arc::new(msg(5, long))).unwrap();
            a.wait().unwrap();
            c.wait().unwrap();
        }
    });
}

/// Memory handed to `bcast_in_place`: when the broadcast lets go of it, its bytes go to `out`
/// (so a check after the call sees what the memory held, and that nothing kept it).
struct Probe {
    data: Vec<u8>,
    out: Arc<Mutex<Option<Vec<u8>>>>,
}

impl AsRef<[u8]> for Probe {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl AsMut<[u8]> for Probe {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        *self.out.lock().unwrap() = Some(std::mem::take(&mut self.data));
    }
}

/// Every rank gets the root's bytes, for each root: below the small switch point, in place,
/// and (on three ranks) past [`BCAST_IN_PLACE_MAX`]; on two ranks, a rank passing a longer
/// buffer than the root gets an error naming both lengths, and the call returns.
fn bcast_in_place(method: MethodKind, ranks: u32) {
    job(ranks, settings(method), move |agent| {
        let comm = Comm::world(&agent);
        let me = agent.rank();
        for len in [100usize, 64 << 10, BCAST_IN_PLACE_MAX + 3] {
            for root in 0..ranks {
                let want = msg(root * 1000 + len as u32, len);
                let data = if me == root {
                    want.clone()
                } else {
                    vec![FILL; len]
                };
                let out = Arc::new(Mutex::new(None));
                let probe = Probe {
                    data,
                    out: Arc::clone(&out),
                };
                comm.bcast_in_place(probe, root).unwrap();
                let got = out.lock().unwrap().take();
                let got = got.expect("the broadcast let go of the memory by its return");
                assert!(got == want, "rank {me}, root {root}, {len} bytes");
            }
        }
        if ranks == 2 {
            let len = 64 << 10;
            let mine = if me == 0 { len } else { len + 8 };
            let out = Arc::new(Mutex::new(None));
            let probe = Probe {
                data: vec![1; mine],
                out,
            };
            let r = comm.bcast_in_place(probe, 0);
            if me == 1 {
                let e = r.unwrap_err().to_string();
                // One point-to-point message (shm) or eager xfer pieces (TCP below
                // `BCAST_PAIR_P2P_MIN`): either way the receiver names both lengths.
                assert!(
                    e.contains("passed 65536 bytes where this rank passed 65544")
                        || e.contains(
                            "message of 65536 bytes from rank 0 does not fit the block, which expects 65544 bytes"
                        ),
                    "{e}"
                );
            } else {
                r.unwrap();
            }
        }
    });
}

/// Every kind of send (borrowed, owned, shared, blocking) arrives whole on both sides of the
/// shared-memory ring-copy limit: up to it a rendezvous message goes in pieces of one ring
/// record, past it in `rendezvous_chunk` pieces; owned data goes in pieces of the one buffer.
fn every_send_kind_across_the_ring_copy_limit(method: MethodKind) {
    const LIMIT: usize = 1 << 20;
    let c = Config {
        shm_ring_copy_max: LIMIT,
        rendezvous_chunk: 256 << 10,
        ..config(method)
    };
    job(2, c, |agent| {
        let eager = agent.config().eager_limit;
        let sizes = [
            eager + 1,
            5 * (16 << 10) - 1,
            5 * (16 << 10) + 1,
            LIMIT,
            LIMIT + 1,
            3 * LIMIT + 17,
        ];
        for (i, &len) in sizes.iter().enumerate() {
            for kind in 0..4u32 {
                let tag = 4 * i as u32 + kind;
                if agent.rank() == 0 {
                    let data = msg(tag, len);
                    match kind {
                        0 => agent.isend(1, tag, &data).unwrap().wait().unwrap(),
                        1 => agent.isend_owned(1, tag, data).unwrap().wait().unwrap(),
                        2 => {
                            let shared: SharedBytes = Arc::new(data);
                            agent.isend_shared(1, tag, shared).unwrap().wait().unwrap()
                        }
                        _ => {
                            agent.send(1, tag, &data).unwrap();
                            continue;
                        }
                    };
                } else {
                    let mut got = vec![FILL; len + GUARD];
                    let st = agent
                        .recv(&mut got, Source::Rank(0), TagMatch::Tag(tag))
                        .unwrap();
                    assert_eq!(st.count(), len as u64, "{len} bytes, send kind {kind}");
                    assert!(
                        got[..len] == msg(tag, len)[..],
                        "{len} bytes, send kind {kind}: the data differs"
                    );
                    assert_eq!(got[len..], vec![FILL; GUARD][..], "past {len} bytes");
                }
            }
        }
    });
}

mod shm {
    use super::*;

    #[test]
    fn every_send_kind_arrives_whole_across_the_ring_copy_limit() {
        every_send_kind_across_the_ring_copy_limit(MethodKind::Shm);
    }

    #[test]
    fn a_shared_send_lands_in_the_callers_memory() {
        shared_to_caller(MethodKind::Shm);
    }

    #[test]
    fn a_short_caller_buffer_is_truncated() {
        truncated_into_caller(MethodKind::Shm);
    }

    #[test]
    fn cancelled_or_detached_receives_write_nothing() {
        cancelled_and_detached_write_nothing(MethodKind::Shm);
    }

    #[test]
    fn bcast_in_place_on_two_and_three_ranks() {
        bcast_in_place(MethodKind::Shm, 2);
        bcast_in_place(MethodKind::Shm, 3);
    }
}

mod tcp {
    use super::*;

    #[test]
    fn every_send_kind_arrives_whole_across_the_ring_copy_limit() {
        every_send_kind_across_the_ring_copy_limit(MethodKind::Tcp);
    }

    #[test]
    fn a_shared_send_lands_in_the_callers_memory() {
        shared_to_caller(MethodKind::Tcp);
    }

    #[test]
    fn a_short_caller_buffer_is_truncated() {
        truncated_into_caller(MethodKind::Tcp);
    }

    #[test]
    fn cancelled_or_detached_receives_write_nothing() {
        cancelled_and_detached_write_nothing(MethodKind::Tcp);
    }

    #[test]
    fn bcast_in_place_on_two_and_three_ranks() {
        bcast_in_place(MethodKind::Tcp, 2);
        bcast_in_place(MethodKind::Tcp, 3);
    }
}
