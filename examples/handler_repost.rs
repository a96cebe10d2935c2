//! Request handlers re-posting receives (the example of seed 003, with the agent's tagged
//! messaging).
//!
//! Rank 0 posts a receive from any rank with a handler on it. The handler, run on the agent's
//! handler thread when the receive completes, appends the message to a list, posts the next
//! receive with the same handler on it (a persistent request could not late-bind a new buffer,
//! so the handler re-posts itself), and signals the main thread. The main thread takes the
//! messages off the list until every other rank's messages are in, then cancels the last
//! receive and waits for the handler to run one last time (it sees the cancellation and stops
//! re-posting). Every other rank sends `MESSAGES` numbered messages to rank 0.
//!
//! Progress: the agent moves messages only inside its calls (see `viaduct_agent::progress`),
//! so rank 0's main thread drives progress while it waits for the handler's signal, where the
//! seed's program would block in `sem_wait`.
//!
//! ```text
//! viaduct launch -n 3 -- target/debug/examples/handler_repost
//! mpiexec -n 3 target/debug/examples/handler_repost
//! ```

use std::collections::VecDeque;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{
    BoxError, Condition, Deadline, HandlerFn, Request, RequestRef, Status, post_handler,
};

/// Messages each sending rank sends.
const MESSAGES: u32 = 100;
/// Largest message.
const CAPACITY: usize = 64;
/// The longest rank 0 waits for the next handler signal.
const LIMIT: Duration = Duration::from_secs(20);

/// What the handler and the main thread share (the seed's globals).
struct Shared {
    agent: Agent,
    /// The list of received messages, with the seed's `lock` semaphore as its mutex.
    list: Mutex<VecDeque<(u32, Vec<u8>)>>,
    /// The receive currently posted (the seed's `request`), under the same kind of lock.
    current: Mutex<Option<Request>>,
    /// The seed's `wait` semaphore: how many times a handler has signalled.
    signals: Mutex<u64>,
    /// Receives that ended cancelled.
    cancelled: Mutex<u32>,
    /// Errors seen on the handler thread.
    errors: Mutex<Vec<String>>,
}

/// Posts a receive from any rank with the re-posting handler on it.
fn post_receive(shared: &Arc<Shared>) -> Result<Request, BoxError> {
    let (request, buf) = shared
        .agent
        .irecv(CAPACITY, Source::Any, TagMatch::Tag(0))?;
    let s = Arc::clone(shared);
    post_handler(
        &request,
        Condition::Complete,
        Some(HandlerFn::new(move |r, status| {
            on_receive(&s, &buf, r, status)
        })),
        None,
        Deadline::Ignore,
    )?;
    Ok(request)
}

/// The handler (`buf_recv` of the seed).
fn on_receive(shared: &Arc<Shared>, buf: &RecvBuffer, _request: &RequestRef, status: &Status) {
    if status.test_cancelled() {
        *shared.cancelled.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    } else {
        let mut current = shared.current.lock().unwrap_or_else(|p| p.into_inner());
        // Free the old request, keep its message, post the next receive.
        if let Some(old) = current.take() {
            if let Err(e) = old.free() {
                shared.error(format!("freeing a completed receive: {e}"));
            }
        }
        let source = status.source().unwrap_or(u32::MAX);
        shared
            .list
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back((source, buf.take()));
        match post_receive(shared) {
            Ok(next) => *current = Some(next),
            Err(e) => shared.error(format!("re-posting the receive: {e}")),
        }
    }
    *shared.signals.lock().unwrap_or_else(|p| p.into_inner()) += 1;
}

impl Shared {
    fn error(&self, e: String) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
    }

    /// Waits until the handler has signalled more than `seen` times, driving progress.
    fn wait_signal(&self, seen: u64) -> Result<u64, BoxError> {
        let started = Instant::now();
        loop {
            let now = *self.signals.lock().unwrap_or_else(|p| p.into_inner());
            if now > seen {
                return Ok(now);
            }
            if let Some(e) = self
                .errors
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .first()
            {
                return Err(e.clone().into());
            }
            if started.elapsed() > LIMIT {
                return Err("no handler ran within 20 s".into());
            }
            self.agent.make_progress_blocking(Duration::from_millis(1));
        }
    }
}

fn receive_all(agent: &Agent) -> Result<String, BoxError> {
    let size = agent.size();
    let expected = (size - 1) * MESSAGES;
    let shared = Arc::new(Shared {
        agent: agent.clone(),
        list: Mutex::new(VecDeque::new()),
        current: Mutex::new(None),
        signals: Mutex::new(0),
        cancelled: Mutex::new(0),
        errors: Mutex::new(Vec::new()),
    });
    {
        // Hold the lock while posting so the handler cannot run before `current` is set.
        let mut current = shared.current.lock().unwrap_or_else(|p| p.into_inner());
        *current = Some(post_receive(&shared)?);
    }
    let mut next_from = vec![0u32; size as usize];
    let mut consumed = 0u32;
    let mut seen = 0u64;
    while consumed < expected {
        seen = shared.wait_signal(seen)?;
        loop {
            let item = shared
                .list
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front();
            let Some((source, bytes)) = item else { break };
            // Consume: each message is "FROM SEQ"; per sender they arrive in order.
            let text = String::from_utf8(bytes)?;
            let (from, seq) = text
                .split_once(' ')
                .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
                .ok_or_else(|| format!("malformed message {text:?}"))?;
            if from != source || from == 0 || from >= size {
                return Err(format!("message {text:?} reported from rank {source}").into());
            }
            if seq != next_from[from as usize] {
                return Err(format!(
                    "rank {from}'s message {seq} arrived when {} was next",
                    next_from[from as usize]
                )
                .into());
            }
            next_from[from as usize] += 1;
            consumed += 1;
        }
    }
    // Cancel the receive the handler posted last, then wait for its handler's last run.
    {
        let current = shared.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = current.as_ref() {
            r.cancel()?;
        }
    }
    // One signal per message, then one for the cancelled receive. (The last message's signal
    // may still be on its way: the handler pushes the message before it signals.)
    shared.wait_signal(u64::from(expected))?;
    let cancelled = *shared.cancelled.lock().unwrap_or_else(|p| p.into_inner());
    if cancelled != 1 {
        return Err(format!("{cancelled} receives ended cancelled, expected 1").into());
    }
    if let Some(last) = shared
        .current
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        last.free()?;
    }
    Ok(format!(
        "rank 0 of {size}: a handler re-posted {} receives; consumed {consumed} messages in \
         order from {} ranks; the last receive was cancelled and its handler ran",
        consumed + 1,
        size - 1
    ))
}

fn run() -> Result<String, BoxError> {
    let agent = Agent::init()?;
    let (rank, size) = (agent.rank(), agent.size());
    if size < 2 {
        return Err("run with at least 2 ranks (rank 0 receives, the others send)".into());
    }
    let line = if rank == 0 {
        receive_all(&agent)?
    } else {
        for seq in 0..MESSAGES {
            agent.send(0, 0, format!("{rank} {seq}").as_bytes())?;
        }
        format!("rank {rank} of {size}: sent {MESSAGES} messages to rank 0")
    };
    agent.finalize()?;
    Ok(line)
}

fn main() -> ExitCode {
    // The library's warnings on stderr, filtered by VIADUCT_LOG (default: warnings).
    viaduct::agent::log::install_subscriber();
    match run() {
        Ok(line) => {
            println!("handler_repost: {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("handler_repost: error: {e}");
            ExitCode::FAILURE
        }
    }
}
