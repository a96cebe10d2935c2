//! A thread blocked on its own receive sleeps while another thread of its rank posts: it does
//! not wake for the other thread's completions and spin on the agent's lock (which took the
//! lock, and a CPU, from the posting thread for the whole wait).
//!
//! Rank 0 has two threads: one blocks in `recv` on a message that rank 1 sends only after it
//! received every message of the other thread, which posts `POSTS` `isend`s spaced `GAP`
//! apart. The blocked thread's CPU time over its wait must stay a small part of the wait. In
//! spin mode a thread waits by spinning first, so before this rule it spun through the whole
//! wait, woken by each completion of the posting thread (its CPU time was most of the wait).

mod agent_common;

use std::thread;
use std::time::{Duration, Instant};

use viaduct_agent::config::{MethodKind, ProgressMode};
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::wait_all;
use viaduct_fallback::cputime::thread_cpu_time;

const DATA: u32 = 1;
const WAKE: u32 = 2;
const POSTS: u32 = 2000;
const GAP: Duration = Duration::from_micros(150);
/// Most of its wait the blocked thread may spend on a CPU. It sleeps in the methods' waits,
/// waking at their longest slice (TCP: 1 ms while its ring has work, shm: the liveness
/// interval) or for the peer's credit, and spins only before its first sleep of each wait
/// round; a spinning waiter ran for most of the wait.
const MAX_CPU_SHARE: f64 = 0.3;

fn a_receiver_sleeps_while_another_thread_posts(method: MethodKind) {
    let config = viaduct_agent::config::Config {
        progress: ProgressMode::Spin,
        ..agent_common::config(method)
    };
    let out = agent_common::job(2, config, |agent| {
        if agent.rank() == 1 {
            let mut b = [0u8; 8];
            for _ in 0..POSTS {
                agent
                    .recv(&mut b, Source::Rank(0), TagMatch::Tag(DATA))
                    .expect("data");
            }
            agent.send(0, WAKE, b"w").expect("wake");
            return None;
        }
        let sleeper = {
            let agent = agent.clone();
            thread::spawn(move || {
                let (cpu, start) = (thread_cpu_time().expect("cpu time"), Instant::now());
                let mut b = [0u8; 1];
                agent
                    .recv(&mut b, Source::Rank(1), TagMatch::Tag(WAKE))
                    .expect("wake");
                let cpu = thread_cpu_time().expect("cpu time") - cpu;
                (cpu, start.elapsed())
            })
        };
        let started = Instant::now();
        let mut reqs = Vec::with_capacity(POSTS as usize);
        for i in 0..POSTS {
            let slot = started + GAP * i;
            if let Some(d) = slot.checked_duration_since(Instant::now()) {
                thread::sleep(d);
            }
            reqs.push(agent.isend(1, DATA, &[7u8; 8]).expect("isend"));
        }
        wait_all(&mut reqs, None).expect("sends");
        Some(sleeper.join().expect("sleeper"))
    });
    let (cpu, wall) = out[0].expect("rank 0's measure");
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    eprintln!("{method:?}: blocked thread ran {cpu:?} of {wall:?}");
    assert!(
        wall >= GAP * POSTS / 2,
        "the blocked thread waited only {wall:?}: the test did not measure a wait"
    );
    assert!(
        share <= MAX_CPU_SHARE,
        "over {method:?} the thread blocked in recv ran {cpu:?} of its {wall:?} wait ({:.0}%) \
         while another thread posted: it spun instead of sleeping",
        share * 100.0
    );
}

#[test]
fn tcp_receiver_sleeps_while_another_thread_posts() {
    a_receiver_sleeps_while_another_thread_posts(MethodKind::Tcp);
}

#[test]
fn shm_receiver_sleeps_while_another_thread_posts() {
    a_receiver_sleeps_while_another_thread_posts(MethodKind::Shm);
}
