//! Benchmark `agent`: tagged ping-pong latency and streaming bandwidth through the
//! communication agent (matching, eager and rendezvous protocols, progress engine) between two
//! ranks started by `viaduct launch`.
//!
//! Run without a launcher, it starts itself under `viaduct launch -n 2 --transport M`; each
//! rank then runs the same command with the launcher's environment. Latency is half the round
//! trip of a blocking `send`/`recv` ping-pong (the median over batches of 16 round trips, see
//! `clock`, and the mean over the timed round trips);
//! bandwidth is the bytes per second rank 0 streams to rank 1 with a window of `isend`s in
//! flight, the receiver keeping as many `irecv`s posted, timed after one untimed window.

use std::error::Error;
use std::time::Instant;

use viaduct_agent::agent::Agent;

use super::clock;
use super::launched::{relaunch, under_launcher};
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::wait_all;

type BoxError = Box<dyn Error>;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Test {
    /// Ping-pong, half round trip.
    Latency,
    /// One-way stream, bytes per second.
    Bandwidth,
}

/// Options of `viaduct bench agent`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct bench agent latency --transport shm\n  \
    viaduct bench agent bandwidth --transport tcp --sizes 65536 --window 32 --json"
)]
pub struct Args {
    /// What to measure.
    #[arg(value_enum, default_value = "latency")]
    pub test: Test,
    /// The rest of the options.
    #[command(flatten)]
    pub common: Common,
}

/// Options shared by `viaduct bench agent`, `viaduct bench latency` and
/// `viaduct bench bandwidth`.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// The method between the two ranks (`VIADUCT_TRANSPORT`): shm, tcp or verbs.
    #[arg(long, default_value = "shm")]
    pub transport: String,
    /// Message sizes in bytes, comma separated (default 8,64,4096 for latency,
    /// 65536,4194304 for bandwidth).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Timed iterations (round trips or messages) per size.
    #[arg(long, default_value_t = 20_000)]
    pub iters: u32,
    /// Messages in flight for bandwidth.
    #[arg(long, default_value_t = 16)]
    pub window: u32,
    /// Print one JSON object per result line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Latency over shm, tcp or verbs: interleave, between the same two ranks, blocks of the raw
    /// method's ping-pong and the agent's, and print both with their ratio (see
    /// `bench::paired`).
    #[arg(long)]
    pub against_raw: bool,
}

const WARMUP: u32 = 200;

/// Runs the benchmark (starting the two ranks when not started by a launcher).
pub fn run(args: &Args) -> Result<(), BoxError> {
    run_test(args.test, &args.common)
}

/// Runs one test of the benchmark.
pub fn run_test(test: Test, args: &Common) -> Result<(), BoxError> {
    let sizes = if args.sizes.is_empty() {
        match test {
            Test::Latency => vec![8, 64, 4096],
            Test::Bandwidth => vec![65536, 4 << 20],
        }
    } else {
        args.sizes.clone()
    };
    if args.against_raw && test != Test::Latency {
        return Err("--against-raw is for the latency test (the raw method's ping-pong)".into());
    }
    if !under_launcher() {
        let what = format!("bench {}", format!("{test:?}").to_lowercase());
        return relaunch(2, &args.transport, sizes.len(), &what);
    }
    let agent = Agent::init()?;
    if agent.size() != 2 {
        return Err(format!("the agent benchmark needs 2 ranks, got {}", agent.size()).into());
    }
    let method = agent.method_of(1 - agent.rank()).unwrap_or("none");
    if args.against_raw {
        for p in super::paired::run(&agent, &sizes, args.iters)? {
            p.print(method, args.json);
        }
        agent.finalize()?;
        return Ok(());
    }
    for size in sizes {
        let line = match test {
            Test::Latency => latency(&agent, size, args.iters)?,
            Test::Bandwidth => bandwidth(&agent, size, args.iters, args.window)?,
        };
        if let Some((median, mean)) = line {
            let unit = match test {
                Test::Latency => "us",
                Test::Bandwidth => "MB/s",
            };
            if args.json {
                // Also under the names of the method benchmark: median_us, gbytes_per_s.
                let named = match test {
                    Test::Latency => format!("\"median_us\":{median:.4}"),
                    Test::Bandwidth => format!("\"gbytes_per_s\":{:.4}", median / 1e3),
                };
                println!(
                    "{{\"bench\":\"agent\",\"test\":\"{test:?}\",\"transport\":\"{method}\",\"size\":{size},\"median\":{median:.4},\"mean\":{mean:.4},\"unit\":\"{unit}\",{named}}}"
                );
            } else {
                println!(
                    "agent {test:?} over {method}: {size:>9} B  median {median:>10.2} {unit}  mean {mean:>10.2} {unit}"
                );
            }
        }
    }
    agent.finalize()?;
    Ok(())
}

/// Half round trips in microseconds (median, mean), reported by rank 0.
fn latency(agent: &Agent, size: usize, iters: u32) -> Result<Option<(f64, f64)>, BoxError> {
    let me = agent.rank();
    let peer = 1 - me;
    let mut buf = vec![0u8; size];
    let mut round_trip = || -> Result<(), BoxError> {
        if me == 0 {
            agent.send(peer, 1, &buf)?;
            agent.recv(&mut buf, Source::Rank(peer), TagMatch::Tag(1))?;
        } else {
            agent.recv(&mut buf, Source::Rank(peer), TagMatch::Tag(1))?;
            agent.send(peer, 1, &buf)?;
        }
        Ok(())
    };
    for _ in 0..WARMUP {
        round_trip()?;
    }
    let samples = clock::half_round_trips(u64::from(iters), None, &mut round_trip)?;
    if me != 0 {
        return Ok(None);
    }
    let Some(median) = clock::median_of_batches(&samples) else {
        return Ok(None);
    };
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    Ok(Some((median, mean)))
}

/// Bytes per second (in MB/s, both figures the same), reported by rank 0.
fn bandwidth(
    agent: &Agent,
    size: usize,
    iters: u32,
    window: u32,
) -> Result<Option<(f64, f64)>, BoxError> {
    let me = agent.rank();
    let peer = 1 - me;
    let window = window.max(1);
    let rounds = iters.div_ceil(window).max(1);
    let data = vec![7u8; size];
    // The receiver reuses its window of buffers, as an application (and osu_bw) does.
    let bufs: Vec<RecvBuffer> = (0..window).map(|_| RecvBuffer::new(size)).collect();
    let mut ack = [0u8; 1];
    let round = || -> Result<(), BoxError> {
        let mut reqs = Vec::with_capacity(window as usize);
        for b in &bufs {
            if me == 0 {
                reqs.push(agent.isend(peer, 2, &data)?);
            } else {
                b.clear();
                reqs.push(agent.irecv_into(b.clone(), Source::Rank(peer), TagMatch::Tag(2))?);
            }
        }
        wait_all(&mut reqs, None)?;
        Ok(())
    };
    // One window untimed first, as osu_bw's skipped iterations and perftest's set-up before
    // its clock starts: the first messages of a size register and fault in their buffers
    // (verbs: the registration cache's misses), which a stream of many messages never pays
    // again. Then the two ranks line up, so the clock starts with both ready.
    round()?;
    if me == 0 {
        agent.recv(&mut ack, Source::Rank(peer), TagMatch::Tag(4))?;
    } else {
        agent.send(peer, 4, &ack)?;
    }
    let start = Instant::now();
    for _ in 0..rounds {
        round()?;
    }
    if me == 0 {
        agent.recv(&mut ack, Source::Rank(peer), TagMatch::Tag(3))?;
    } else {
        agent.send(peer, 3, &ack)?;
        return Ok(None);
    }
    let secs = start.elapsed().as_secs_f64();
    let mbs = (rounds as f64 * window as f64 * size as f64) / secs / 1e6;
    Ok(Some((mbs, mbs)))
}
