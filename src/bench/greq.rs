//! Benchmark `greq`: the cost of a generalized request (start + complete + wait, on one thread)
//! and the latency of a request handler (from `complete` to the handler's first instruction).
//!
//! The peer is MPICH's `MPI_Grequest_start` + `MPI_Grequest_complete` + `MPI_Wait`
//! (`benches/mpi/greq.c`); `scripts/bench-greq` runs both and prints the ratio. Both report
//! wall-clock time and the CPU time of the timing thread: on a machine shared with other work,
//! wall-clock figures include time spent waiting for a CPU, the CPU-time figures do not.

use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use viaduct_agent::request::{
    BoxError, Condition, Deadline, GrequestOps, HandlerFn, QueryStatus, Request,
};

use super::stats::{median, percentile};

/// Options of this benchmark.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct bench greq\n  viaduct bench greq --iters 100000 --json\n  \
    scripts/bench-greq   (side by side with MPICH's MPI_Grequest_start)"
)]
pub struct Args {
    /// Generalized requests per timed trial (7 trials; the median is reported).
    #[arg(long, default_value_t = 1_000_000)]
    pub iters: u64,
    /// Handler dispatches to time.
    #[arg(long, default_value_t = 2_000)]
    pub handler_iters: u64,
    /// Print one JSON object per result line instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The callbacks of MPICH's own generalized request tests: a query that sets a default status.
struct DefaultStatus;

impl GrequestOps for DefaultStatus {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_source(None);
        status.set_tag(None);
        status.set_cancelled(false);
        status.set_count(0);
        Ok(())
    }
}

/// CPU time of the calling thread so far (what it ran, not the time it waited for a CPU);
/// zero where the clock cannot be read.
fn thread_cpu() -> Duration {
    viaduct_fallback::cputime::thread_cpu_time().unwrap_or(Duration::ZERO)
}

/// One timed trial: wall-clock and thread CPU nanoseconds per request.
fn start_complete_wait(iters: u64) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let cpu = thread_cpu();
    let start = Instant::now();
    for _ in 0..iters {
        let (mut request, handle) = Request::generalized(DefaultStatus);
        handle.complete()?;
        black_box(request.wait()?);
    }
    let wall = start.elapsed().as_nanos() as f64;
    let cpu = thread_cpu().saturating_sub(cpu).as_nanos() as f64;
    let n = iters.max(1) as f64;
    Ok((wall / n, cpu / n))
}

/// Nanoseconds from `complete` to the start of the handler, one sample per request.
fn handler_dispatch(iters: u64) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    let (tx, rx) = mpsc::channel::<Instant>();
    let mut samples = Vec::with_capacity(iters as usize);
    for _ in 0..iters {
        let (request, handle) = Request::generalized(());
        let tx = tx.clone();
        request.post_handler(
            Condition::Complete,
            Some(HandlerFn::new(move |_, _| {
                let _ = tx.send(Instant::now());
            })),
            None,
            Deadline::Asap,
        )?;
        request.free()?;
        let t0 = Instant::now();
        handle.complete()?;
        let t1 = rx.recv_timeout(Duration::from_secs(10))?;
        samples.push(t1.saturating_duration_since(t0).as_nanos() as f64);
    }
    Ok(samples)
}

/// Runs the benchmark and prints its results.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    start_complete_wait(args.iters.min(100_000))?; // warm-up
    let results = (0..7)
        .map(|_| start_complete_wait(args.iters))
        .collect::<Result<Vec<_>, _>>()?;
    let mut trials: Vec<f64> = results.iter().map(|r| r.0).collect();
    let mut cpu_trials: Vec<f64> = results.iter().map(|r| r.1).collect();
    let best = trials.iter().copied().fold(f64::INFINITY, f64::min);
    let ns = median(&mut trials);
    let cpu_best = cpu_trials.iter().copied().fold(f64::INFINITY, f64::min);
    let cpu_ns = median(&mut cpu_trials);
    let mut dispatch = handler_dispatch(args.handler_iters)?;
    let d50 = median(&mut dispatch);
    let d99 = percentile(&mut dispatch, 0.99);
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "bench": "greq",
                "case": "start_complete_wait",
                "iters": args.iters,
                "trials": 7,
                "ns_per_request": ns,
                "ns_per_request_best": best,
                "cpu_ns_per_request": cpu_ns,
                "cpu_ns_per_request_best": cpu_best,
            })
        );
        println!(
            "{}",
            serde_json::json!({
                "bench": "greq",
                "case": "handler_dispatch",
                "iters": args.handler_iters,
                "dispatch_ns_median": d50,
                "dispatch_ns_p99": d99,
            })
        );
    } else {
        println!("case                        iters     result");
        println!(
            "start+complete+wait  {:>12}     {ns:.1} ns/request (median of 7; best {best:.1}); \
             thread CPU {cpu_ns:.1} ns/request (best {cpu_best:.1})",
            args.iters
        );
        println!(
            "handler dispatch     {:>12}     {d50:.0} ns median, {d99:.0} ns p99 (complete -> handler start, blocking wake-up)",
            args.handler_iters
        );
    }
    Ok(())
}
