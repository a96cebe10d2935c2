//! Messages past the shared-memory ring-copy limit go as `RTS_READ`: the receiver copies them
//! with one `process_vm_readv` straight out of the sender's memory into its own, and the sender
//! takes no step until the `FIN`. So a receive completes while the sender computes (no agent
//! call on its side), into the caller's memory or the agent's, posted before or after the
//! message came; a short buffer truncates and the sender still completes; every kind of send
//! arrives whole. (Where this machine forbids reading another process, the shared-memory
//! method reads through its ring and the tests say so.)

#[macro_use]
mod agent_common;

use std::sync::Arc;
use std::time::Duration;

use agent_common::{config, job};
use viaduct_agent::agent::Agent;
use viaduct_agent::config::{Config, MethodKind};
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::p2p::SharedBytes;
use viaduct_agent::recv_buffer::RecvBuffer;

/// The ring-copy limit of these jobs: messages longer go by the receiver's read.
const LIMIT: usize = 1 << 20;
/// The message: past the limit, not a multiple of a page.
const LEN: usize = 3 * LIMIT + 4099;
/// How long the sender computes (no agent call) after posting its sends.
const COMPUTE: Duration = Duration::from_secs(3);
/// How long a receive may take while the sender computes: well under [`COMPUTE`].
const PATIENCE: Duration = Duration::from_secs(1);
/// What the receiver's memory holds before a message lands.
const FILL: u8 = 0xEE;

fn settings() -> Config {
    Config {
        shm_ring_copy_max: LIMIT,
        ..config(MethodKind::Shm)
    }
}

fn msg(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(29).wrapping_add(seed) as u8)
        .collect()
}

/// Whether this machine lets one process read another's memory (`process_vm_readv`); the
/// shared-memory method probes the same at set-up.
fn may_read_peers() -> bool {
    let v = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").unwrap_or_default();
    matches!(v.trim(), "" | "0" | "1")
}

/// Rank 0 posts four sends (borrowed, owned, shared, synchronous shared) and then computes
/// for [`COMPUTE`] without calling the agent; rank 1 receives them (two into its own memory,
/// two into the agent's, the last two posted after the messages came) and each receive must
/// complete within [`PATIENCE`].
#[test]
fn receives_complete_while_the_sender_computes() {
    if !may_read_peers() {
        println!("SKIPPED: kernel.yama.ptrace_scope forbids reading another process here");
        return;
    }
    job(2, settings(), |agent: Agent| {
        if agent.rank() == 0 {
            let shared = |t| -> SharedBytes { Arc::new(msg(t, LEN)) };
            let mut reqs = [
                agent.isend(1, 0, &msg(0, LEN)).unwrap(),
                agent.isend_owned(1, 1, msg(1, LEN)).unwrap(),
                agent.isend_shared(1, 2, shared(2)).unwrap(),
                agent.issend_shared(1, 3, shared(3)).unwrap(),
            ];
            std::thread::sleep(COMPUTE);
            for (t, r) in reqs.iter_mut().enumerate() {
                let st = r.wait().unwrap();
                assert_eq!(st.count(), LEN as u64, "send {t}");
            }
        } else {
            for tag in 0..4u32 {
                if tag == 2 {
                    // The last two messages came before their receives.
                    std::thread::sleep(Duration::from_millis(300));
                }
                let into_caller = tag % 2 == 0;
                let buf = if into_caller {
                    RecvBuffer::caller(Box::new(vec![FILL; LEN + 64]))
                } else {
                    RecvBuffer::new(LEN)
                };
                let mut req = agent
                    .irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(tag))
                    .unwrap();
                let st = req
                    .wait_timeout(PATIENCE)
                    .unwrap()
                    .unwrap_or_else(|| panic!("message {tag} waited for the sender's progress"));
                assert_eq!(st.count(), LEN as u64);
                assert_eq!(buf.len(), LEN);
                assert!(buf.with(|b| b == msg(tag, LEN).as_slice()), "message {tag}");
                if into_caller {
                    let mut mem = buf.detach().expect("caller memory");
                    let mem = (*mem).as_mut();
                    assert!(mem[LEN..].iter().all(|&b| b == FILL), "past message {tag}");
                }
            }
        }
    });
}

/// A receive shorter than the message gets its first bytes and a truncation error, into the
/// caller's memory and into the agent's; the send completes all the same.
#[test]
fn a_short_receive_truncates_and_the_send_completes() {
    job(2, settings(), |agent: Agent| {
        if agent.rank() == 0 {
            for tag in 0..2u32 {
                let shared: SharedBytes = Arc::new(msg(tag, LEN));
                let st = agent.isend_shared(1, tag, shared).unwrap().wait().unwrap();
                assert_eq!(st.count(), LEN as u64);
            }
        } else {
            let cap = LEN / 2 + 1;
            for tag in 0..2u32 {
                let buf = if tag == 0 {
                    RecvBuffer::caller(Box::new(vec![FILL; cap]))
                } else {
                    RecvBuffer::new(cap)
                };
                let mut req = agent
                    .irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(tag))
                    .unwrap();
                let err = AgentError::from(req.wait().unwrap_err());
                assert!(err.is_truncated(), "{err}");
                assert!(buf.with(|b| b == &msg(tag, LEN)[..cap]), "message {tag}");
            }
        }
    });
}

/// Blocking sends and receives of many lengths around and far past the limit, both ways at
/// once, arrive whole (the sender's memory is read while it waits in its own receive).
#[test]
fn blocking_exchanges_past_the_limit_arrive_whole() {
    job(2, settings(), |agent: Agent| {
        let peer = 1 - agent.rank();
        for (i, len) in [LIMIT, LIMIT + 1, 2 * LIMIT + 3, 9 * LIMIT + 7]
            .into_iter()
            .enumerate()
        {
            let tag = i as u32;
            let out = msg(tag * 2 + agent.rank(), len);
            let send = agent.isend_shared(peer, tag, Arc::new(out)).unwrap();
            let mut got = vec![FILL; len];
            let st = agent
                .recv(&mut got, Source::Rank(peer), TagMatch::Tag(tag))
                .unwrap();
            assert_eq!(st.count(), len as u64);
            assert!(got == msg(tag * 2 + peer, len), "{len} bytes from {peer}");
            let mut send = send;
            send.wait().unwrap();
        }
    });
}
