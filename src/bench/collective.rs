//! Benchmark `collective`: the time of one collective call (bcast, allreduce, reduce,
//! allgather, alltoall) on the ranks of a job, through the agent's communicators and
//! collectives.
//!
//! Run without a launcher, it starts itself under `viaduct launch -n RANKS --transport M`.
//! For each size it runs 7 trials of `iters` calls after a warm-up, each trial between two
//! barriers; a trial's figure is the slowest rank's mean time per call (an allreduce with max),
//! and the line reports the median over the trials (`median_us`), the same procedure as the
//! MPICH program `benches/mpi/coll.c` that `scripts/bench-coll` runs beside it. With `--osu`
//! the procedure is that of the OSU micro-benchmarks (`mpi/bench/osucoll.c`,
//! `scripts/bench-coll-osu`) instead: a barrier before every call, each call timed on its own,
//! and the line reports each rank's mean time per call averaged over the ranks (`avg_us`), so
//! that no rank runs ahead of the others into the next call, and beside it each rank's median
//! call averaged over the ranks (`p50_us`), which calls that lost their core to other work
//! move little. Sizes are bytes: the whole buffer
//! for bcast, allreduce and reduce (f64 elements, sum, root 0), each rank's part for allgather
//! and alltoall.

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
    /// Reduce to rank 0, sum of f64.
    Reduce,
    /// Alltoall of a part for each rank.
    Alltoall,
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
    /// The OSU procedure: a barrier before every call, each call timed alone, each rank's
    /// mean averaged over the ranks.
    #[arg(long)]
    pub osu: bool,
}

const TRIALS: usize = 7;

/// Runs the benchmark (starting the ranks when not started by a launcher).
pub fn run(args: &Args) -> Result<(), BoxError> {
    if let Some(bad) = args
        .sizes
        .iter()
        .find(|s| matches!(args.op, Op::Allreduce | Op::Reduce) && **s % 8 != 0)
    {
        return Err(format!("--sizes {bad}: (all)reduce sizes are multiples of 8 (f64)").into());
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
        let (what, figure, median) = if args.osu {
            let (avg, median) = time_osu(&comm, args.op, size, iters)?;
            ("avg", avg, Some(median))
        } else {
            ("median", time_op(&comm, args.op, size, iters)?, None)
        };
        if comm.rank() != 0 {
            continue;
        }
        let p50 = median.map_or(String::new(), |m| {
            if args.json {
                format!(",\"p50_us\":{m:.3}")
            } else {
                format!("  p50 {m:>10.2} us")
            }
        });
        if args.json {
            println!(
                "{{\"bench\":\"collective\",\"op\":\"{:?}\",\"transport\":\"{method}\",\"ranks\":{},\"size\":{size},\"iters\":{iters},\"{what}_us\":{figure:.3}{p50}}}",
                args.op,
                comm.size()
            );
        } else {
            println!(
                "collective {:?} over {method}, {} ranks: {size:>9} B  {what} {figure:>10.2} us{p50}",
                args.op,
                comm.size()
            );
        }
    }
    drop(comm);
    agent.finalize()?;
    Ok(())
}

/// The buffers of one rank and the call that times them.
struct Bufs {
    /// The buffer of bcast, allreduce and reduce, the own part of allgather.
    buf: Vec<u8>,
    /// Alltoall's parts for every rank.
    parts: Vec<u8>,
    /// Allgather's and alltoall's result.
    out: Vec<u8>,
}

impl Bufs {
    fn new(comm: &Comm, size: usize) -> Bufs {
        let n = comm.size() as usize;
        let mut parts = vec![0u8; size * n];
        for (i, c) in parts.chunks_exact_mut(8).enumerate() {
            c.copy_from_slice(&((comm.rank() as f64) + i as f64).to_ne_bytes());
        }
        Bufs {
            buf: parts[..size].to_vec(),
            parts,
            out: vec![0u8; size * n],
        }
    }

    fn call(&mut self, comm: &Comm, op: Op) -> Result<(), BoxError> {
        match op {
            Op::Bcast => comm.bcast(&mut self.buf, 0)?,
            Op::Allreduce => comm.allreduce(&mut self.buf, Datatype::F64, ReduceOp::Sum)?,
            Op::Reduce => comm.reduce(&mut self.buf, Datatype::F64, ReduceOp::Sum, 0)?,
            Op::Allgather => comm.allgather(&self.buf, &mut self.out)?,
            Op::Alltoall => comm.alltoall(&self.parts, &mut self.out)?,
        }
        Ok(())
    }
}

/// The median over the trials of the slowest rank's mean time per call, in microseconds.
fn time_op(comm: &Comm, op: Op, size: usize, iters: u32) -> Result<f64, BoxError> {
    let mut b = Bufs::new(comm, size);
    for _ in 0..iters / 10 + 1 {
        b.call(comm, op)?;
    }
    let mut trials = Vec::with_capacity(TRIALS);
    for _ in 0..TRIALS {
        comm.barrier()?;
        let start = Instant::now();
        for _ in 0..iters {
            b.call(comm, op)?;
        }
        let mine = start.elapsed().as_secs_f64() * 1e6 / f64::from(iters);
        let mut slowest = mine.to_ne_bytes().to_vec();
        comm.allreduce(&mut slowest, Datatype::F64, ReduceOp::Max)?;
        trials.push(f64::from_ne_bytes(slowest[..8].try_into()?));
    }
    trials.sort_by(f64::total_cmp);
    Ok(trials[TRIALS / 2])
}

/// The OSU procedure: a barrier before each call, each call timed alone; each rank's mean time
/// per call averaged over the ranks, and each rank's median call averaged over the ranks (the
/// median shrugs off calls of a rank that lost its core to other work), in microseconds.
fn time_osu(comm: &Comm, op: Op, size: usize, iters: u32) -> Result<(f64, f64), BoxError> {
    let mut b = Bufs::new(comm, size);
    let warm = iters / 10 + 1;
    let mut times = Vec::with_capacity(iters as usize);
    for i in 0..warm + iters {
        comm.barrier()?;
        let start = Instant::now();
        b.call(comm, op)?;
        if i >= warm {
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    let mean = times.iter().sum::<f64>() / f64::from(iters);
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let mut sums: Vec<u8> = [mean, median]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    comm.allreduce(&mut sums, Datatype::F64, ReduceOp::Sum)?;
    let n = f64::from(comm.size());
    Ok((
        f64::from_ne_bytes(sums[..8].try_into()?) / n,
        f64::from_ne_bytes(sums[8..16].try_into()?) / n,
    ))
}
