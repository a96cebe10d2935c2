//! A request class with a batched wait hook: jobs run by worker threads, their requests
//! completed by the waits that look at them, one blocking call serving every job in a wait.
//!
//! The class owns the receiving end of a channel the workers post `(job id, result)` on. Its
//! `poll` hook (tests, and the first rounds of a wait) takes what is already there without
//! blocking; its `wait` hook gets **every** incomplete job of the caller's wait at once and
//! blocks in a single `recv_timeout` for all of them, completing whichever jobs' results came
//! in (results of jobs that are not in the batch are kept for later). No thread is started per
//! request, and a wait sleeps in the channel instead of spinning.
//!
//! Every rank starts `JOBS` jobs (summing ranges of integers on `WORKERS` threads) and, beside
//! them, an exchange of one message with its neighbours in a ring; it waits for jobs and
//! messages together with one `wait_all`, checks every result, and prints
//!
//! ```text
//! class_batch: rank R of N ok: 8 jobs and 2 messages, largest batch the wait hook saw: B
//! ```
//!
//! ```text
//! viaduct launch -n 2 -- target/debug/examples/class_batch
//! mpiexec -n 2 target/debug/examples/class_batch
//! target/debug/examples/class_batch          # one rank alone
//! ```

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use viaduct_agent::prelude::*;
use viaduct_agent::request::{BoxError, ClassOps, ClassRequest, QueryStatus, RequestClass};

/// Jobs per rank.
const JOBS: u64 = 8;
/// Worker threads per rank.
const WORKERS: usize = 3;

/// One job's own state: which job, and its result once the hooks saw it.
struct Job {
    id: u64,
    result: Mutex<Option<u64>>,
}

/// The class: the workers' results, and what the hooks saw.
struct Jobs {
    results: Mutex<Receiver<(u64, u64)>>,
    /// Results that came in for jobs that were not being looked at.
    early: Mutex<HashMap<u64, u64>>,
    largest_batch: AtomicUsize,
}

impl Jobs {
    /// Takes every result already posted, without blocking.
    fn drain(&self) {
        let rx = self.results.lock().unwrap();
        let mut early = self.early.lock().unwrap();
        while let Ok((id, value)) = rx.try_recv() {
            early.insert(id, value);
        }
    }

    /// Completes `job` if its result came in.
    fn settle(&self, job: &ClassRequest<'_, Job>) -> Result<(), BoxError> {
        let state = job.state();
        if let Some(value) = self.early.lock().unwrap().remove(&state.id) {
            *state.result.lock().unwrap() = Some(value);
            job.complete()?;
        }
        Ok(())
    }
}

impl ClassOps for Jobs {
    type State = Job;

    fn query(&self, job: &Job, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        // The status tells which job (tag) and its result (count).
        status.set_tag(Some(job.id as u32));
        status.set_count(job.result.lock().unwrap().unwrap_or(0));
        Ok(())
    }

    fn poll(&self, job: &ClassRequest<'_, Job>) -> Result<(), BoxError> {
        self.drain();
        self.settle(job)
    }

    fn wait(&self, batch: &[ClassRequest<'_, Job>], timeout: Duration) -> Result<(), BoxError> {
        self.largest_batch.fetch_max(batch.len(), Ordering::Relaxed);
        self.drain();
        let ready = {
            let early = self.early.lock().unwrap();
            batch.iter().any(|j| early.contains_key(&j.state().id))
        };
        if !ready {
            // One blocking call for the whole batch.
            match self.results.lock().unwrap().recv_timeout(timeout) {
                Ok((id, value)) => {
                    self.early.lock().unwrap().insert(id, value);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("every worker thread has ended".into());
                }
            }
        }
        for job in batch {
            self.settle(job)?;
        }
        Ok(())
    }
}

/// The sum of `lo..hi`, slowly enough that the jobs overlap the message exchange.
fn sum(lo: u64, hi: u64) -> u64 {
    thread::sleep(Duration::from_millis(5 + lo % 7));
    (lo..hi).sum()
}

fn run() -> Result<String, Box<dyn std::error::Error>> {
    let agent = Agent::init()?;
    let world = Comm::world(&agent);
    let (rank, size) = (world.rank(), world.size());

    // The workers, fed through a queue of job ids, answering through the class's channel.
    let (post, results) = mpsc::channel::<(u64, u64)>();
    let (give, take) = mpsc::channel::<u64>();
    let take = Arc::new(Mutex::new(take));
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (take, post) = (Arc::clone(&take), post.clone());
            thread::spawn(move || {
                loop {
                    let next = take.lock().unwrap().recv();
                    let Ok(id) = next else { break };
                    let _ = post.send((id, sum(id * 1000, (id + 1) * 1000)));
                }
            })
        })
        .collect();
    drop(post);

    let class = RequestClass::new(Jobs {
        results: Mutex::new(results),
        early: Mutex::new(HashMap::new()),
        largest_batch: AtomicUsize::new(0),
    });
    let mut requests = Vec::new();
    for id in 0..JOBS {
        // The request needs no handle: its hooks complete it.
        let (request, _handle) = class.start(Job {
            id,
            result: Mutex::new(None),
        });
        requests.push(request);
        give.send(id)?;
    }

    // Beside the jobs: one message from each ring neighbour.
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    let mut buffers = Vec::new();
    if size > 1 {
        let (r, buf) = world.irecv(8, Source::Rank(prev), TagMatch::Tag(7))?;
        requests.push(r);
        buffers.push(buf);
        requests.push(world.isend(next, 7, &u64::from(rank).to_le_bytes())?);
    }

    let mut statuses = Vec::new();
    wait_all(&mut requests, Some(&mut statuses))?;
    drop(give);
    for w in workers {
        let _ = w.join();
    }

    for status in &statuses[..JOBS as usize] {
        let id = u64::from(status.tag().ok_or("a job's status has no tag")?);
        let want: u64 = (id * 1000..(id + 1) * 1000).sum();
        if status.count() != want {
            return Err(format!("job {id}: result {}, expected {want}", status.count()).into());
        }
    }
    if let Some(buf) = buffers.first() {
        let got = buf.take();
        let got = u64::from_le_bytes(got[..8].try_into()?);
        if got != u64::from(prev) {
            return Err(format!("the message from rank {prev} carried {got}").into());
        }
    }
    let messages = if size > 1 { 2 } else { 0 };
    let batch = class.ops().largest_batch.load(Ordering::Relaxed);
    agent.finalize()?;
    Ok(format!(
        "rank {rank} of {size} ok: {JOBS} jobs and {messages} messages, largest batch the wait hook saw: {batch}"
    ))
}

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("class_batch: {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The agent's errors carry their whole cause chain in their text.
            eprintln!("class_batch: error: {e}");
            ExitCode::FAILURE
        }
    }
}
