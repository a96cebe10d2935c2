//! Tagged messages received in place (`Agent::recv_in_place`, `Agent::try_recv_in_place`,
//! `Comm::recv_in_place`), between ranks over shared memory, TCP and verbs: the bytes lie in the
//! method's receive memory (the shared segment, the TCP endpoint's receive buffers), byte-exact
//! for empty, one-byte and eager-limit messages; wildcards match; messages behind a held one
//! wait in order; another VC goes on while one is held; a receive that times out leaves its
//! message for later; an unexpected or rendezvous message is shown from the agent's memory;
//! a `Received` outlives its agent; the death of a peer whose VC is held still fails the waits
//! on that peer, and the held `Received` stays readable and drops cleanly; more messages than
//! the method's receive window come through in place, in order.
//!
//! The same tests run over verbs (the registered receive buffers of the shared pool, or of a
//! ring per peer) on an RDMA device (soft-RoCE in the VM of `scripts/rxe-vm`); without one they
//! print `SKIPPED: ...` and return, unless `VIADUCT_REQUIRE_RDMA=1` (the VM sets it).

#[macro_use]
mod agent_common;

use std::time::{Duration, Instant};

use agent_common::child::ChildJob;
use agent_common::{config, job, job_owned};
use viaduct_agent::Received;
use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::Bootstrap;
use viaduct_agent::comm::Comm;
use viaduct_agent::config::{Config, MethodKind, ProgressMode};
use viaduct_agent::matching::{Source, TagMatch};

/// The agent's eager limit in these tests: below the shared-memory method's in-ring limit, so
/// every eager message lies in a ring record.
const EAGER: usize = 8 << 10;
const WAIT: Duration = Duration::from_secs(30);
const GO: u32 = 1000;
const DONE: u32 = 1001;

fn settings(method: MethodKind) -> Config {
    Config {
        eager_limit: EAGER,
        ..config(method)
    }
}

fn msg(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

/// Whether `bytes` lie inside the receive memory of the method behind `peer`'s VC.
fn in_method_memory(agent: &Agent, peer: u32, bytes: &[u8]) -> bool {
    let at = bytes.as_ptr() as usize;
    agent
        .method_memory(peer)
        .iter()
        .any(|r| r.start <= at && at + bytes.len() <= r.end)
}

fn recv(agent: &Agent, from: u32, tag: u32) -> Vec<u8> {
    let mut buf = vec![0; 64 << 10];
    let st = agent
        .recv(&mut buf, Source::Rank(from), TagMatch::Tag(tag))
        .unwrap();
    buf.truncate(st.count() as usize);
    buf
}

#[test]
fn received_is_send() {
    fn send<T: Send>() {}
    send::<Received>();
}

/// Sizes 0, 1 and the eager limit arrive in the method's memory, byte-exact, with their status.
fn sizes_in_method_memory(method: MethodKind) {
    job(2, settings(method), |agent| {
        let sizes = [0, 1, 100, EAGER];
        if agent.rank() == 0 {
            recv(&agent, 1, GO);
            for (i, &len) in sizes.iter().enumerate() {
                agent.send(1, i as u32, &msg(i as u32, len)).unwrap();
            }
            recv(&agent, 1, DONE);
        } else {
            agent.send(0, GO, b"go").unwrap();
            for (i, &len) in sizes.iter().enumerate() {
                let r = agent
                    .recv_in_place(Source::Rank(0), TagMatch::Tag(i as u32), WAIT)
                    .unwrap();
                assert_eq!(&r[..], &msg(i as u32, len)[..], "message of {len} bytes");
                let st = r.status();
                assert_eq!(
                    (st.source(), st.tag(), st.count()),
                    (Some(0), Some(i as u32), len as u64)
                );
                assert!(r.is_in_place(), "message of {len} bytes was copied");
                if len > 0 {
                    assert!(
                        in_method_memory(&agent, 0, &r),
                        "message of {len} bytes is not in the method's memory"
                    );
                }
            }
            agent.send(0, DONE, b"done").unwrap();
        }
    });
}

/// Wildcards match; a message behind a held one waits (not lost, not reordered).
fn wildcards_and_order(method: MethodKind) {
    job(2, settings(method), |agent| {
        if agent.rank() == 0 {
            recv(&agent, 1, GO);
            for tag in 1..=4u32 {
                agent.send(1, tag, &msg(tag, 50 * tag as usize)).unwrap();
            }
            recv(&agent, 1, DONE);
        } else {
            agent.send(0, GO, b"go").unwrap();
            let first = agent
                .recv_in_place(Source::Any, TagMatch::Any, WAIT)
                .unwrap();
            assert_eq!(first.status().tag(), Some(1));
            assert_eq!(first.status().source(), Some(0));
            assert_eq!(&first[..], &msg(1, 50)[..]);
            // While it is held nothing behind it comes out of that VC.
            assert!(
                agent
                    .try_recv_in_place(Source::Rank(0), TagMatch::Tag(2))
                    .unwrap()
                    .is_none()
            );
            let (mut req, _buf) = agent
                .irecv(8 << 10, Source::Rank(0), TagMatch::Tag(4))
                .unwrap();
            assert!(
                req.wait_timeout(Duration::from_millis(50))
                    .unwrap()
                    .is_none(),
                "a message behind a held one came out"
            );
            req.cancel().unwrap();
            assert!(req.wait().unwrap().test_cancelled());
            drop(first);
            for tag in 2..=4u32 {
                let r = agent
                    .recv_in_place(Source::Any, TagMatch::Any, WAIT)
                    .unwrap();
                assert_eq!(r.status().tag(), Some(tag), "order behind the held message");
                assert_eq!(&r[..], &msg(tag, 50 * tag as usize)[..]);
            }
            agent.send(0, DONE, b"done").unwrap();
        }
    });
}

/// More messages than the method's receive window, each received in place and dropped before
/// the next, byte-exact and in order (the lent memory and its flow-control credit come back
/// with each drop). With `burst`, the sender waits for an acknowledgement after each burst of
/// that many, so a verbs shared pool never runs low; without, it floods. Every message lies in
/// the method's memory, but for a flood into a verbs shared pool, which runs low and lends
/// copies of some (byte-exact too).
fn beyond_the_window(config: Config, burst: Option<u32>) {
    // Only a verbs shared pool lends copies (while it runs low).
    let may_copy =
        burst.is_none() && config.transports == [MethodKind::Verbs] && config.verbs_recv_pool != 0;
    const N: u32 = 112;
    let size = |i: u32| 1 + (i as usize * 97) % EAGER;
    job(2, config, move |agent| {
        let per = burst.unwrap_or(N);
        if agent.rank() == 0 {
            recv(&agent, 1, GO);
            for i in 0..N {
                agent.send(1, i, &msg(i, size(i))).unwrap();
                if (i + 1) % per == 0 {
                    recv(&agent, 1, GO);
                }
            }
            recv(&agent, 1, DONE);
        } else {
            agent.send(0, GO, b"go").unwrap();
            let mut in_place = 0;
            for i in 0..N {
                let r = agent
                    .recv_in_place(Source::Rank(0), TagMatch::Any, WAIT)
                    .unwrap();
                assert_eq!(r.status().tag(), Some(i), "out of order");
                assert_eq!(&r[..], &msg(i, size(i))[..], "message {i}");
                if r.is_in_place() {
                    in_place += 1;
                    assert!(in_method_memory(&agent, 0, &r), "message {i} is elsewhere");
                } else {
                    assert!(may_copy, "message {i} was copied");
                }
                drop(r);
                if (i + 1) % per == 0 {
                    agent.send(0, GO, b"go").unwrap();
                }
            }
            println!("{in_place} of {N} messages in place");
            agent.send(0, DONE, b"done").unwrap();
        }
    });
}

/// While rank 2 holds a message of rank 0, a second thread of rank 2 exchanges with rank 1.
fn other_vc_goes_on(method: MethodKind) {
    job(3, settings(method), |agent| match agent.rank() {
        0 => {
            recv(&agent, 2, GO);
            agent.send(2, 7, &msg(7, 300)).unwrap();
            recv(&agent, 2, DONE);
        }
        1 => {
            let got = recv(&agent, 2, 8);
            agent.send(2, 9, &got).unwrap();
        }
        _ => {
            agent.send(0, GO, b"go").unwrap();
            let held = agent
                .recv_in_place(Source::Rank(0), TagMatch::Tag(7), WAIT)
                .unwrap();
            let other = agent.clone();
            let t = std::thread::spawn(move || {
                other.send(1, 8, &msg(8, 200)).unwrap();
                recv(&other, 1, 9)
            });
            let back = t.join().unwrap();
            assert_eq!(back, msg(8, 200));
            assert_eq!(&held[..], &msg(7, 300)[..], "the held view changed");
            drop(held);
            agent.send(0, DONE, b"done").unwrap();
        }
    });
}

/// A receive that matched nothing in time ends with a timeout and leaves the message later sent
/// to a later receive.
fn timeout_leaves_the_message(method: MethodKind) {
    job(2, settings(method), |agent| {
        if agent.rank() == 0 {
            recv(&agent, 1, GO);
            agent.send(1, 99, b"late").unwrap();
        } else {
            let t = Instant::now();
            let e = agent
                .recv_in_place(
                    Source::Rank(0),
                    TagMatch::Tag(99),
                    Duration::from_millis(200),
                )
                .unwrap_err();
            assert!(e.is_timeout(), "{e}");
            assert!(t.elapsed() >= Duration::from_millis(200));
            assert!(
                agent
                    .try_recv_in_place(Source::Any, TagMatch::Tag(99))
                    .unwrap()
                    .is_none()
            );
            agent.send(0, GO, b"go").unwrap();
            assert_eq!(recv(&agent, 0, 99), b"late");
        }
    });
}

/// A message already in the unexpected queue, and a rendezvous message, are shown from the
/// agent's memory, whole.
fn unexpected_and_rendezvous(method: MethodKind) {
    job(2, settings(method), |agent| {
        let big = 3 * EAGER + 5;
        if agent.rank() == 0 {
            recv(&agent, 1, GO);
            agent.send(1, 5, &msg(5, 700)).unwrap();
            agent.send(1, 6, b"six").unwrap();
            agent.send(1, 7, &msg(7, big)).unwrap();
        } else {
            agent.send(0, GO, b"go").unwrap();
            // Receiving 6 first puts 5 into the unexpected queue.
            assert_eq!(recv(&agent, 0, 6), b"six");
            let r = agent
                .recv_in_place(Source::Rank(0), TagMatch::Tag(5), WAIT)
                .unwrap();
            assert!(!r.is_in_place());
            assert_eq!(&r[..], &msg(5, 700)[..]);
            let r = agent
                .recv_in_place(Source::Rank(0), TagMatch::Tag(7), WAIT)
                .unwrap();
            assert!(!r.is_in_place());
            assert_eq!(r.len(), big);
            assert_eq!(r.status().count(), big as u64);
            assert_eq!(r.into_vec(), msg(7, big));
        }
    });
}

/// A `Received` still shows its bytes after its agent was finalized and dropped, and its drop
/// then only frees them.
fn outlives_the_agent(method: MethodKind) {
    job_owned(2, settings(method), |agent| {
        if agent.rank() == 0 {
            recv(&agent, 1, GO);
            agent.send(1, 3, &msg(3, 900)).unwrap();
            recv(&agent, 1, DONE);
            agent.finalize().unwrap();
        } else {
            agent.send(0, GO, b"go").unwrap();
            let r = agent
                .recv_in_place(Source::Rank(0), TagMatch::Tag(3), WAIT)
                .unwrap();
            assert!(r.is_in_place());
            agent.send(0, DONE, b"done").unwrap();
            agent.finalize().unwrap();
            assert_eq!(&r[..], &msg(3, 900)[..]);
            drop(r);
        }
    });
}

/// CPU time this thread has used so far (user and system, from `/proc/thread-self/stat`, in
/// clock ticks of 10 ms).
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("thread stat");
    // Fields after the command (which sits in parentheses): state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// A blocking wait while a VC is held, with a message waiting behind the held one, sleeps: the
/// held VC's method does not count the waiting bytes as work (a sleeper that did would spin).
fn a_held_vc_does_not_make_waits_spin(method: MethodKind) {
    let settings = Config {
        progress: ProgressMode::Block,
        ..settings(method)
    };
    job(2, settings, |agent| {
        if agent.rank() == 0 {
            recv(&agent, 1, GO);
            agent.send(1, 1, b"first").unwrap();
            agent.send(1, 2, b"behind").unwrap();
            recv(&agent, 1, DONE);
        } else {
            agent.send(0, GO, b"go").unwrap();
            let held = agent
                .recv_in_place(Source::Rank(0), TagMatch::Tag(1), WAIT)
                .unwrap();
            // Let the second message arrive behind the held one.
            std::thread::sleep(Duration::from_millis(50));
            let (mut req, _buf) = agent.irecv(64, Source::Rank(0), TagMatch::Tag(77)).unwrap();
            let cpu = thread_cpu();
            let wall = Instant::now();
            assert!(
                req.wait_timeout(Duration::from_millis(600))
                    .unwrap()
                    .is_none()
            );
            let (cpu, wall) = (thread_cpu() - cpu, wall.elapsed());
            assert!(
                cpu < wall / 2,
                "the wait used {cpu:?} of CPU in {wall:?}: it spun on the held VC"
            );
            req.cancel().unwrap();
            assert!(req.wait().unwrap().test_cancelled());
            drop(held);
            assert_eq!(recv(&agent, 0, 2), b"behind");
            agent.send(0, DONE, b"done").unwrap();
        }
    });
}

/// On a communicator whose ranks are the world's reversed, the status names the source by its
/// communicator rank, and a message of another communicator does not match.
fn on_a_communicator(method: MethodKind) {
    job(2, settings(method), |agent| {
        let world = Comm::world(&agent);
        let me = agent.rank() as i32;
        let comm = world.split(Some(0), -me).unwrap().expect("member");
        assert_eq!(comm.rank(), 1 - agent.rank());
        if agent.rank() == 0 {
            // World rank 0 is rank 1 of `comm`; its peer is rank 0 there.
            comm.recv(&mut [0u8; 4], Source::Rank(0), TagMatch::Tag(GO))
                .unwrap();
            agent.send(1, 4, b"world").unwrap();
            comm.send(0, 4, b"comm").unwrap();
            comm.recv(&mut [0u8; 4], Source::Rank(0), TagMatch::Tag(DONE))
                .unwrap();
        } else {
            comm.send(1, GO, b"go").unwrap();
            let r = comm
                .recv_in_place(Source::Any, TagMatch::Tag(4), WAIT)
                .unwrap();
            assert_eq!(&r[..], b"comm", "a message of another communicator matched");
            assert_eq!(
                r.status().source(),
                Some(1),
                "the status names the world rank"
            );
            drop(r);
            let r = agent
                .recv_in_place(Source::Rank(0), TagMatch::Tag(4), WAIT)
                .unwrap();
            assert_eq!(&r[..], b"world");
            assert!(
                comm.try_recv_in_place(Source::Any, TagMatch::Any)
                    .unwrap()
                    .is_none()
            );
            comm.send(1, DONE, b"done").unwrap();
        }
    });
}

/// Names the method (and progress mode) of the child rank of the held-VC failure test; only a
/// process started by [`held_vc_peer_dies`] has it.
const CHILD_VAR: &str = "VIADUCT_TEST_IN_PLACE_CHILD";
/// The peer timeout on both sides of the held-VC failure test: short, so a death shows soon.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);
/// The held message of the held-VC failure test.
const HELD_LEN: usize = 700;

fn dying_settings(method: MethodKind, progress: ProgressMode) -> Config {
    Config {
        peer_timeout: PEER_TIMEOUT,
        progress,
        ..settings(method)
    }
}

fn child_settings(value: &str) -> Config {
    let (method, progress) = value.split_once(',').expect("method,progress");
    let method = match method {
        "shm" => MethodKind::Shm,
        "tcp" => MethodKind::Tcp,
        "verbs" => MethodKind::Verbs,
        other => panic!("unknown method {other:?}"),
    };
    let progress = ProgressMode::parse(progress).expect("progress mode");
    dying_settings(method, progress)
}

/// Rank 1 of the held-VC failure test (a child process): sends the message rank 0 holds,
/// and one behind it, says "ready" on standard error, then sleeps until it is killed.
#[test]
#[ignore = "child process of the held-VC failure tests"]
fn child_rank_that_dies() {
    let Ok(value) = std::env::var(CHILD_VAR) else {
        return;
    };
    let boot = Bootstrap::from_env().unwrap();
    let agent = Agent::with_bootstrap(boot, child_settings(&value)).unwrap();
    agent.send(0, 1, &msg(1, HELD_LEN)).unwrap();
    agent.send(0, 3, b"behind").unwrap();
    eprintln!("ready");
    std::thread::sleep(Duration::from_secs(120));
}

/// Rank 0 holds a message of rank 1 in place (its VC held) while rank 1 is killed (or, with
/// `stop`, stopped with `SIGSTOP`: silent, its connection still open): a blocking receive from
/// rank 1 waiting meanwhile, a rendezvous send to it in flight and a receive posted afterwards
/// all end with rank 1's failure (within the peer timeout and a generous margin, not when the
/// `Received` is dropped); the held bytes stay readable; the `Received` drops cleanly
/// afterwards and the agent still works.
fn held_vc_peer_dies(method: MethodKind, progress: ProgressMode, stop: bool) {
    let mut job = ChildJob::spawn(
        "child_rank_that_dies",
        CHILD_VAR,
        &format!("{},{}", method.name(), progress.name()),
    );
    let agent = Agent::with_bootstrap(job.bootstrap(), dying_settings(method, progress)).unwrap();
    let held = agent
        .recv_in_place(Source::Rank(1), TagMatch::Tag(1), WAIT)
        .unwrap();
    assert!(
        held.is_in_place(),
        "the message was copied: nothing is held"
    );
    job.wait_ready();

    // A blocking receive from the held peer, in a thread; and a rendezvous send to it.
    let (tx, rx) = std::sync::mpsc::channel();
    let other = agent.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16];
        let _ = tx.send(other.recv(&mut buf, Source::Rank(1), TagMatch::Tag(2)));
    });
    let mut send = agent.isend(1, 4, &msg(4, 4 * EAGER)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    if stop {
        let stopped = std::process::Command::new("kill")
            .args(["-STOP", &job.child.id().to_string()])
            .status()
            .expect("running kill -STOP");
        assert!(stopped.success(), "kill -STOP failed");
    } else {
        job.kill();
    }
    let killed = Instant::now();

    // Generous: the peer timeout plus a wide margin for a loaded machine.
    let bound = PEER_TIMEOUT + Duration::from_secs(40);
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let got = rx.recv_timeout(bound).unwrap_or_else(|_| {
            panic!("a receive from the failed peer of a held VC still waits {bound:?} after it")
        });
        let e = got.expect_err("a receive from a failed peer must fail");
        assert_eq!(e.failed_peer(), Some(1), "unexpected error: {e}");
        let e = send
            .wait_timeout(bound)
            .expect_err("a rendezvous send to a failed peer must fail");
        assert_eq!(e.failed_peer(), Some(1), "unexpected error: {e:?}");
        let e = agent
            .recv(&mut [0u8; 16], Source::Rank(1), TagMatch::Tag(5))
            .expect_err("a later receive from a failed peer must fail");
        assert_eq!(e.failed_peer(), Some(1), "unexpected error: {e}");
    }));
    println!(
        "{} ({}, {}): the waits on the peer ended {:?} after the signal",
        method.name(),
        progress.name(),
        if stop { "stopped" } else { "killed" },
        killed.elapsed()
    );
    if stop {
        // A stopped child never ends by itself: killed whether the checks passed or not.
        job.kill();
    }
    if let Err(p) = checked {
        std::panic::resume_unwind(p);
    }

    // The lent memory is still the message's; dropping it is no error.
    assert_eq!(&held[..], &msg(1, HELD_LEN)[..], "the held view changed");
    drop(held);
    agent.send(0, 9, b"self").unwrap();
    let mut b = [0u8; 4];
    agent
        .recv(&mut b, Source::Rank(0), TagMatch::Tag(9))
        .unwrap();
    assert_eq!(&b, b"self");
    drop(agent);
    job.shutdown();
}

macro_rules! in_place_tests {
    ($name:ident, $method:expr $(, $extra:item)*) => {
        mod $name {
            use super::*;

            #[test]
            fn sizes_lie_in_the_method_memory() {
                if !available($method) {
                    return;
                }
                sizes_in_method_memory($method);
            }

            #[test]
            fn more_messages_than_the_window_in_place_in_order() {
                if !available($method) {
                    return;
                }
                beyond_the_window(settings($method), Some(16));
            }

            #[test]
            fn a_flood_beyond_the_window_comes_whole_in_order() {
                if !available($method) {
                    return;
                }
                beyond_the_window(settings($method), None);
            }

            #[test]
            fn wildcards_and_order_behind_a_held_message() {
                if !available($method) {
                    return;
                }
                wildcards_and_order($method);
            }

            #[test]
            fn another_vc_goes_on_while_one_is_held() {
                if !available($method) {
                    return;
                }
                other_vc_goes_on($method);
            }

            #[test]
            fn a_timeout_leaves_the_message() {
                if !available($method) {
                    return;
                }
                timeout_leaves_the_message($method);
            }

            #[test]
            fn unexpected_and_rendezvous_messages_are_shown_whole() {
                if !available($method) {
                    return;
                }
                unexpected_and_rendezvous($method);
            }

            #[test]
            fn a_held_vc_does_not_make_a_blocking_wait_spin() {
                if !available($method) {
                    return;
                }
                a_held_vc_does_not_make_waits_spin($method);
            }

            #[test]
            fn on_a_communicator_the_status_names_the_communicator_rank() {
                if !available($method) {
                    return;
                }
                on_a_communicator($method);
            }

            #[test]
            fn a_received_outlives_its_agent() {
                if !available($method) {
                    return;
                }
                outlives_the_agent($method);
            }

            #[test]
            fn a_held_vc_still_reports_its_peer_failure() {
                if !available($method) {
                    return;
                }
                held_vc_peer_dies($method, ProgressMode::Auto, false);
            }

            $($extra)*

            #[test]
            fn a_held_vc_still_reports_its_peer_failure_blocking() {
                if !available($method) {
                    return;
                }
                held_vc_peer_dies($method, ProgressMode::Block, false);
            }
        }
    };
}

/// A stopped process (`SIGSTOP`) still holds its shared segment and its kernel still
/// acknowledges TCP: the agent's silence check catches it (over verbs the device's transport
/// acknowledges for it, as before any message is held, so that case is not claimed there).
macro_rules! stopped_peer_test {
    ($method:expr) => {
        #[test]
        fn a_held_vc_still_reports_its_peer_stopped() {
            if !available($method) {
                return;
            }
            held_vc_peer_dies($method, ProgressMode::Auto, true);
        }
    };
}

in_place_tests!(shm, MethodKind::Shm, stopped_peer_test!(MethodKind::Shm););
in_place_tests!(tcp, MethodKind::Tcp, stopped_peer_test!(MethodKind::Tcp););
#[cfg(feature = "rdma")]
in_place_tests!(
    verbs,
    MethodKind::Verbs,
    /// With a receive ring per peer always (two ranks get rings by default too: a pool of 64
    /// would hold more than the one peer's window).
    #[test]
    fn more_messages_than_the_window_in_place_in_order_over_rings() {
        if !available(MethodKind::Verbs) {
            return;
        }
        beyond_the_window(
            Config {
                verbs_recv_pool: 0,
                ..settings(MethodKind::Verbs)
            },
            None,
        );
    },
    /// With a shared pool of 16 buffers, fewer than the one peer's window of 32, so two ranks
    /// get one: flooded, it runs low and lends copies of some messages.
    #[test]
    fn more_messages_than_the_window_in_place_in_order_over_a_small_shared_pool() {
        if !available(MethodKind::Verbs) {
            return;
        }
        beyond_the_window(
            Config {
                verbs_recv_pool: 16,
                ..settings(MethodKind::Verbs)
            },
            None,
        );
    }
);

/// Whether this machine can run `method` (verbs needs an RDMA device: without one the test
/// prints `SKIPPED: ...` and passes, unless `VIADUCT_REQUIRE_RDMA=1`). Inside the soft-RoCE
/// guest (`VIADUCT_IN_RXE_VM=1`, where this binary runs for its verbs tests) the shm and TCP
/// tests print `SKIPPED` too: they run on the host in `cargo test`, and the guest's shared
/// filesystem cannot hold the shared-memory set-up sockets.
fn available(method: MethodKind) -> bool {
    if method != MethodKind::Verbs
        && std::env::var_os("VIADUCT_IN_RXE_VM").is_some_and(|v| v == "1")
    {
        eprintln!("SKIPPED: {method:?} in-place tests run on the host, not in the soft-RoCE guest");
        return false;
    }
    method != MethodKind::Verbs || agent_common::method::have_rdma()
}
