//! Benchmark `collective`: the time of one collective call (bcast, allreduce, allgather) on the
//! ranks of a job, through the agent's communicators and xfer-block collectives.
//!
//! Run without a launcher, it starts itself under `viaduct launch -n RANKS --transport M`.
//! For each size it runs 7 trials of `iters` calls after a warm-up, each trial between two
//! barriers; a trial's figure is the slowest rank's mean time per call (an allreduce with max),
//! and the line reports the median over the trials (`median_us`), the same procedure as the
//! MPICH program `benches/mpi/coll.c` that `scripts/bench-coll` runs beside it. Sizes are bytes:
//! the whole buffer for bcast and allreduce (f64 elements, sum), each rank's part for allgather.

use std::error::Error;
use std::time::Instant;

use viaduct_agent::agent::Agent;

use super::launched::{relaunch, under_launcher};
use viaduct_agent::comm::Comm;
use viaduct_agent::xfer::{Datatype, ReduceOp};

type BoxError = Box<dyn Error>;

/// The collective to time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Op {
    /// Broadcast from rank 0.
    Bcast,
    /// Allreduce, sum of f64, in place.
    Allreduce,
    /// Allgather of each rank's part.
    Allgather,
}

/// Options of this benchmark.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct bench collective --op allreduce --sizes 8,1048576\n  \
    viaduct bench collective --op bcast --ranks 8 --transport tcp --json"
)]
pub struct Args {
    /// The collective.
    #[arg(long, value_enum, default_value = "allreduce")]
    pub op: Op,
    /// Sizes in bytes, comma separated (allreduce: multiples of 8).
    #[arg(long, value_delimiter = ',', default_value = "8,1048576")]
    pub sizes: Vec<usize>,
    /// Calls per trial (default: 1000 below 1 MiB, 50 from 1 MiB on).
    #[arg(short = 'n', long)]
    pub iters: Option<u32>,
    /// Ranks to start when run without a launcher.
    #[arg(long, default_value_t = 4)]
    pub ranks: u32,
    /// The method between the ranks when run without a launcher (`VIADUCT_TRANSPORT`).
    #[arg(long, default_value = "shm")]
    pub transport: String,
    /// Print one JSON object per size instead of a table.
    #[arg(long)]
    pub json: bool,
}

const TRIALS: usize = 7;

/// Runs the benchmark (starting the ranks when not started by a launcher).
pub fn run(args: &Args) -> Result<(), BoxError> {
    if let Some(bad) = args
        .sizes
        .iter()
        .find(|s| args.op == Op::Allreduce && **s % 8 != 0)
    {
        return Err(format!("--sizes {bad}: allreduce sizes are multiples of 8 (f64)").into());
    }
    if !under_launcher() {
        let what = format!("bench collective {:?}", args.op);
        return relaunch(args.ranks, &args.transport, args.sizes.len(), &what);
    }
    let agent = Agent::init()?;
    let comm = Comm::world(&agent);
    let method = if comm.size() > 1 {
        agent.method_of(1 - agent.rank().min(1)).unwrap_or("none")
    } else {
        "self"
    };
    for &size in &args.sizes {
        let iters = args
            .iters
            .unwrap_or(if size >= 1 << 20 { 50 } else { 1000 })
            .max(1);
        let median = time_op(&comm, args.op, size, iters)?;
        if comm.rank() != 0 {
            continue;
        }
        if args.json {
            println!(
                "{{\"bench\":\"collective\",\"op\":\"{:?}\",\"transport\":\"{method}\",\"ranks\":{},\"size\":{size},\"iters\":{iters},\"median_us\":{median:.3}}}",
                args.op,
                comm.size()
            );
        } else {
            println!(
                "collective {:?} over {method}, {} ranks: {size:>9} B  median {median:>10.2} us",
                args.op,
                comm.size()
            );
        }
    }
    drop(comm);
    agent.finalize()?;
    Ok(())
}

/// The median over the trials of the slowest rank's mean time per call, in microseconds.
fn time_op(comm: &Comm, op: Op, size: usize, iters: u32) -> Result<f64, BoxError> {
    let n = comm.size() as usize;
    let mut buf = vec![0u8; size];
    for (i, c) in buf.chunks_exact_mut(8).enumerate() {
        c.copy_from_slice(&((comm.rank() as f64) + i as f64).to_ne_bytes());
    }
    let mut out = vec![0u8; size * n];
    let mut call = |buf: &mut Vec<u8>| -> Result<(), BoxError> {
        match op {
            Op::Bcast => comm.bcast(buf, 0)?,
            Op::Allreduce => comm.allreduce(buf, Datatype::F64, ReduceOp::Sum)?,
            Op::Allgather => comm.allgather(buf, &mut out)?,
        }
        Ok(())
    };
    for _ in 0..iters / 10 + 1 {
        call(&mut buf)?;
    }
    let mut trials = Vec::with_capacity(TRIALS);
    for _ in 0..TRIALS {
        comm.barrier()?;
        let start = Instant::now();
        for _ in 0..iters {
            call(&mut buf)?;
        }
        let mine = start.elapsed().as_secs_f64() * 1e6 / f64::from(iters);
        let mut slowest = mine.to_ne_bytes().to_vec();
        comm.allreduce(&mut slowest, Datatype::F64, ReduceOp::Max)?;
        trials.push(f64::from_ne_bytes(slowest[..8].try_into()?));
    }
    trials.sort_by(f64::total_cmp);
    Ok(trials[TRIALS / 2])
}
