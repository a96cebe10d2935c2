//! Benchmark `threads`: what a thread asleep in blocking progress costs another thread's
//! posts on the same agent.
//!
//! Two ranks under `viaduct launch -n 2` (started by the benchmark itself when run without a
//! launcher). Rank 0 times each of `--posts` small `isend`s to rank 1 (which receives them)
//! twice: first with no other thread in the agent, then while a second thread of rank 0 blocks
//! in `recv` on a message that rank 1 sends only `--delay-ms` after that round starts, so it
//! is asleep in the progress engine while the posts run. The posts are spread out, one every
//! `--gap-us` (the gap is not timed), so that they meet the sleeper whenever it sleeps. It
//! prints the p50, p99 and largest post time of both rounds, how many posts took over 100 us,
//! and, over `--rounds` such pairs run alternately, the ratio of the median p99s (with
//! sleeper / without).

use std::error::Error;
use std::time::{Duration, Instant};

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, wait_all};

use super::launched::{relaunch, under_launcher};
use super::stats::{median, percentile};

type BoxError = Box<dyn Error>;

/// Options of `viaduct bench threads`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  viaduct bench threads\n  \
    viaduct bench threads --transport tcp --posts 20000")]
pub struct Args {
    /// The method between the two ranks (`VIADUCT_TRANSPORT`): shm, tcp or verbs.
    #[arg(long, default_value = "shm")]
    pub transport: String,
    /// Posts timed per round.
    #[arg(long, default_value_t = 10_000)]
    pub posts: u32,
    /// Bytes per message.
    #[arg(long, default_value_t = 8)]
    pub size: usize,
    /// How long after the round with a sleeper starts rank 1 sends the message the sleeper
    /// waits for, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub delay_ms: u64,
    /// Microseconds between the starts of two posts (the posting thread spins meanwhile).
    #[arg(long, default_value_t = 50)]
    pub gap_us: u64,
    /// Pairs of rounds (one without, one with a sleeper, alternating); the ratio is that of
    /// the median p99s, so that one round disturbed by the machine does not decide it.
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
}

const DATA: u32 = 1;
const SYNC: u32 = 2;
const WAKE: u32 = 3;

/// Posts slower than this are counted.
const SLOW_US: f64 = 100.0;

/// p50, p99 and largest of `times` (microseconds), and how many exceed [`SLOW_US`].
fn percentiles(times: &mut [f64]) -> (f64, f64, f64, usize) {
    if times.is_empty() {
        return (0.0, 0.0, 0.0, 0);
    }
    let slow = times.iter().filter(|&&t| t > SLOW_US).count();
    let (p50, p99) = (percentile(times, 0.5), percentile(times, 0.99));
    (p50, p99, times[times.len() - 1], slow)
}

/// Runs the benchmark (starting the two ranks when not started by a launcher).
pub fn run(args: &Args) -> Result<(), BoxError> {
    if args.posts == 0 {
        return Err("--posts must be at least 1".into());
    }
    if args.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    if !under_launcher() {
        return relaunch(2, &args.transport, 3, "bench threads");
    }
    let agent = Agent::init()?;
    if agent.size() != 2 {
        return Err(format!("the threads benchmark needs 2 ranks, got {}", agent.size()).into());
    }
    let method = agent
        .method_of(1 - agent.rank())
        .unwrap_or("none")
        .to_owned();
    let mut quiet_p99 = Vec::new();
    let mut busy_p99 = Vec::new();
    let n = args.posts;
    for r in 1..=args.rounds {
        let quiet = round(&agent, args, false)?;
        let busy = round(&agent, args, true)?;
        if let (Some(mut quiet), Some(mut busy)) = (quiet, busy) {
            let (q50, q99, qmax, qslow) = percentiles(&mut quiet);
            let (b50, b99, bmax, bslow) = percentiles(&mut busy);
            println!(
                "threads over {method}: round {r}: {n} posts, no sleeper:   p50 {q50:>8.2} us  p99 {q99:>8.2} us  max {qmax:>10.2} us  over 100 us: {qslow}"
            );
            println!(
                "threads over {method}: round {r}: {n} posts, with sleeper: p50 {b50:>8.2} us  p99 {b99:>8.2} us  max {bmax:>10.2} us  over 100 us: {bslow}"
            );
            quiet_p99.push(q99);
            busy_p99.push(b99);
        }
    }
    if agent.rank() == 0 {
        let q = median(&mut quiet_p99);
        let b = median(&mut busy_p99);
        println!(
            "threads over {method}: median p99 of {} rounds: no sleeper {q:.2} us, with sleeper {b:.2} us",
            args.rounds
        );
        println!(
            "threads over {method}: p99 ratio (with sleeper / no sleeper) {:.2}",
            b / q.max(1e-3)
        );
    }
    agent.finalize()?;
    Ok(())
}

/// One round; rank 0 returns its post times in microseconds.
fn round(agent: &Agent, args: &Args, sleeper: bool) -> Result<Option<Vec<f64>>, BoxError> {
    let peer = 1 - agent.rank();
    let mut one = [0u8; 1];
    if agent.rank() == 1 {
        // Both ranks enter the round together.
        agent.send(peer, SYNC, &one)?;
        let waker = sleeper.then(|| {
            let agent = agent.clone();
            let delay = Duration::from_millis(args.delay_ms);
            std::thread::spawn(move || -> Result<(), String> {
                std::thread::sleep(delay);
                agent.send(0, WAKE, &[1]).map_err(|e| e.to_string())
            })
        });
        let mut buf = vec![0u8; args.size];
        for _ in 0..args.posts {
            agent.recv(&mut buf, Source::Rank(peer), TagMatch::Tag(DATA))?;
        }
        if let Some(w) = waker {
            w.join().map_err(|_| "the waking thread panicked")??;
        }
        agent.send(peer, SYNC, &one)?;
        return Ok(None);
    }
    agent.recv(&mut one, Source::Rank(peer), TagMatch::Tag(SYNC))?;
    let sleeping = sleeper.then(|| {
        let agent = agent.clone();
        std::thread::spawn(move || -> Result<Duration, String> {
            let start = Instant::now();
            let mut b = [0u8; 1];
            agent
                .recv(&mut b, Source::Rank(1), TagMatch::Tag(WAKE))
                .map_err(|e| e.to_string())?;
            Ok(start.elapsed())
        })
    });
    if sleeping.is_some() {
        // Let the sleeper get past its spin and fall asleep.
        std::thread::sleep(Duration::from_millis(50));
    }
    let data = vec![7u8; args.size];
    let mut times = Vec::with_capacity(args.posts as usize);
    let mut reqs: Vec<Request> = Vec::with_capacity(args.posts as usize);
    let gap = Duration::from_micros(args.gap_us);
    let started = Instant::now();
    for i in 0..args.posts {
        let slot = started + gap * i;
        while Instant::now() < slot {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        reqs.push(agent.isend(peer, DATA, &data)?);
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let posting = started.elapsed();
    if let Some(s) = sleeping {
        let slept = s.join().map_err(|_| "the sleeping thread panicked")??;
        if posting >= slept {
            eprintln!(
                "bench threads: the posts took {posting:?}, longer than the sleeper slept \
                 ({slept:?}): raise --delay-ms"
            );
        }
    }
    wait_all(&mut reqs, None)?;
    agent.recv(&mut one, Source::Rank(peer), TagMatch::Tag(SYNC))?;
    Ok(Some(times))
}
