//! Generalized requests of the user's own: a timer and a thread-pool job, waited on together.
//!
//! Every rank starts
//! - three timers (`Request::generalized` with a state of our own): a thread sleeps, then
//!   completes the request; the `query` callback reports which timer it was (tag) and how many
//!   milliseconds it slept (count), and `free` counts how many requests were given back;
//! - one job on a small thread pool: summing 1..=N on a worker thread, which completes its
//!   request; the result travels in the request's state and `query` reports it as the count;
//!
//! then waits for them as they finish with `wait_any`, mixed in one array, checks what each
//! reported, and prints one line with the order they were seen in. Runs under `viaduct launch`, `mpiexec` or alone:
//!
//! ```text
//! viaduct launch -n 2 -- target/debug/examples/greq_timer
//! mpiexec -n 2 target/debug/examples/greq_timer
//! ```

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use viaduct_agent::bootstrap::Bootstrap;
use viaduct_agent::request::{
    AnyOutcome, BoxError, CompleteHandle, GrequestOps, QueryStatus, Request, wait_any,
};

/// How many requests had their free callback run.
static FREED: AtomicUsize = AtomicUsize::new(0);

/// The state of a timer request.
struct Timer {
    id: u32,
    millis: u64,
}

impl GrequestOps for Timer {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_tag(Some(self.id));
        status.set_count(self.millis);
        Ok(())
    }
    fn free(&self) -> Result<(), BoxError> {
        FREED.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Starts a timer request that completes after `millis` milliseconds.
fn start_timer(id: u32, millis: u64) -> Result<Request, BoxError> {
    let (request, done) = Request::generalized(Timer { id, millis });
    thread::Builder::new()
        .name(format!("timer-{id}"))
        .spawn(move || {
            thread::sleep(Duration::from_millis(millis));
            if let Err(e) = done.complete() {
                eprintln!("greq_timer: timer {id}: {e}");
            }
        })?;
    Ok(request)
}

/// The state of a thread-pool job: its result, filled in by the worker before it completes
/// the request.
struct Job {
    id: u32,
    result: Arc<AtomicU64>,
}

impl GrequestOps for Job {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_tag(Some(self.id));
        status.set_count(self.result.load(Ordering::Acquire));
        Ok(())
    }
    fn free(&self) -> Result<(), BoxError> {
        FREED.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

type Work = Box<dyn FnOnce() + Send>;

/// A fixed pool of worker threads taking closures from one queue.
struct Pool {
    queue: Option<mpsc::Sender<Work>>,
    workers: Vec<thread::JoinHandle<()>>,
}

impl Pool {
    fn new(threads: usize) -> Result<Self, BoxError> {
        let (tx, rx) = mpsc::channel::<Work>();
        let rx = Arc::new(Mutex::new(rx));
        let mut workers = Vec::new();
        for i in 0..threads {
            let rx = Arc::clone(&rx);
            workers.push(
                thread::Builder::new()
                    .name(format!("pool-{i}"))
                    .spawn(move || {
                        loop {
                            let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                            match next {
                                Ok(work) => work(),
                                Err(_) => break,
                            }
                        }
                    })?,
            );
        }
        Ok(Pool {
            queue: Some(tx),
            workers,
        })
    }

    /// Runs `f` on a worker; the returned request completes when it has, its status count
    /// being `f`'s result.
    fn submit(
        &self,
        id: u32,
        f: impl FnOnce() -> u64 + Send + 'static,
    ) -> Result<Request, BoxError> {
        let result = Arc::new(AtomicU64::new(0));
        let (request, done): (Request, CompleteHandle) = Request::generalized(Job {
            id,
            result: Arc::clone(&result),
        });
        let work: Work = Box::new(move || {
            result.store(f(), Ordering::Release);
            if let Err(e) = done.complete() {
                eprintln!("greq_timer: job {id}: {e}");
            }
        });
        self.queue
            .as_ref()
            .ok_or("the pool is closed")?
            .send(work)
            .map_err(|_| "the pool's workers are gone")?;
        Ok(request)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.queue = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn run() -> Result<String, BoxError> {
    let mut boot = Bootstrap::from_env()?;
    let (rank, size) = (boot.rank(), boot.size());
    let pool = Pool::new(2)?;
    let n = 1_000_000 + u64::from(rank);
    // Timers of 60, 20 and 40 ms (shifted a little per rank), and the job.
    let timers = [(1u32, 60u64), (2, 20), (3, 40)];
    let mut requests = Vec::new();
    let started = Instant::now();
    for &(id, ms) in &timers {
        requests.push(start_timer(id, ms + u64::from(rank))?);
    }
    requests.push(pool.submit(100, move || (1..=n).sum())?);

    let mut order = Vec::new();
    while let AnyOutcome::Completed(index, status) = wait_any(&mut requests) {
        let status = status?;
        let tag = status.tag().ok_or("a request reported no tag")?;
        match tag {
            100 => {
                let want = n * (n + 1) / 2;
                if status.count() != want {
                    return Err(format!("job reported {}, expected {want}", status.count()).into());
                }
            }
            id => {
                let ms = timers
                    .iter()
                    .find(|t| t.0 == id)
                    .map(|t| t.1 + u64::from(rank))
                    .ok_or_else(|| format!("unknown tag {id} at index {index}"))?;
                if status.count() != ms {
                    return Err(
                        format!("timer {id} reported {} ms, set {ms}", status.count()).into(),
                    );
                }
            }
        }
        order.push(tag);
    }
    // Each request was reported exactly once. (The order follows the delays on an idle machine,
    // but a loaded one may wake the waiter late enough to find several complete at once.)
    let mut sorted = order.clone();
    sorted.sort_unstable();
    if sorted != [1, 2, 3, 100] {
        return Err(format!(
            "completions reported as {order:?}, expected each of 1, 2, 3, 100 once"
        )
        .into());
    }
    let freed = FREED.load(Ordering::Relaxed);
    if freed != 4 {
        return Err(format!("{freed} free callbacks ran for 4 requests").into());
    }
    boot.fence()?;
    let elapsed = started.elapsed().as_millis();
    boot.finalize()?;
    Ok(format!(
        "rank {rank} of {size}: 3 timers and 1 pool job completed in the order {order:?} \
         within {elapsed} ms; sum 1..={n} checked; 4 free callbacks ran"
    ))
}

fn main() -> ExitCode {
    // The library's warnings on stderr, filtered by VIADUCT_LOG (default: warnings).
    viaduct::agent::log::install_subscriber();
    match run() {
        Ok(line) => {
            println!("greq_timer: {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("greq_timer: error: {e}");
            ExitCode::FAILURE
        }
    }
}
