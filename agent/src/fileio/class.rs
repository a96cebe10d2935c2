//! The io_uring request class: `poll` reaps without blocking, `wait` is one `io_uring_enter`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use viaduct_fallback::file::{Buffers, FileError, FileIo, FileOp};

use crate::request::{BoxError, ClassOps, ClassRequest, QueryStatus};

/// Per-request state of the io_uring class: the operation in flight, then its outcome.
#[derive(Debug, Default)]
pub struct OpState {
    /// The engine's handle while the operation is in flight.
    op: Mutex<Option<FileOp>>,
    /// The buffers, once the operation finished (for the [`super::BufferClaim`]).
    pub(crate) buffers: Mutex<Option<Buffers>>,
    /// Bytes moved.
    count: AtomicU64,
    /// Whether the operation ended cancelled.
    cancelled: AtomicBool,
}

impl OpState {
    pub(crate) fn new(op: FileOp) -> Self {
        Self {
            op: Mutex::new(Some(op)),
            ..Self::default()
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The request class of one io_uring file engine (shared by all its files).
#[derive(Debug)]
pub struct UringClass {
    pub(crate) engine: Mutex<FileIo>,
}

/// What a finished operation means for its request.
enum Outcome {
    Done,
    Failed(FileError),
}

impl UringClass {
    /// Takes a finished operation's result and buffers into its request state. The request is
    /// completed by [`apply`] afterwards, once the engine lock is released (failing a request
    /// runs the cancel hook, which takes that lock).
    fn collect(engine: &mut FileIo, state: &OpState) -> Option<Outcome> {
        let mut slot = lock(&state.op);
        let op = slot.take()?;
        let done = match engine.take(op) {
            Ok(done) => done,
            Err(op) => {
                *slot = Some(op);
                return None;
            }
        };
        drop(slot);
        *lock(&state.buffers) = Some(done.buffers);
        Some(match done.result {
            Ok(n) => {
                state.count.store(n as u64, Ordering::Release);
                Outcome::Done
            }
            Err(FileError::Cancelled { done, .. }) => {
                state.count.store(done as u64, Ordering::Release);
                state.cancelled.store(true, Ordering::Release);
                Outcome::Done
            }
            Err(e) => Outcome::Failed(e),
        })
    }
}

fn apply(request: &ClassRequest<'_, Arc<OpState>>, outcome: Outcome) -> Result<(), BoxError> {
    match outcome {
        Outcome::Done => request.complete()?,
        Outcome::Failed(e) => request.fail(e)?,
    }
    Ok(())
}

impl ClassOps for UringClass {
    type State = Arc<OpState>;

    fn query(&self, state: &Arc<OpState>, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_count(state.count.load(Ordering::Acquire));
        status.set_cancelled(state.cancelled.load(Ordering::Acquire));
        Ok(())
    }

    fn free(&self, state: &Arc<OpState>) -> Result<(), BoxError> {
        // A request freed before completing drops its handle: the engine keeps the buffers until
        // the kernel is done with them.
        drop(lock(&state.op).take());
        Ok(())
    }

    fn cancel(&self, state: &Arc<OpState>, complete: bool) -> Result<(), BoxError> {
        if complete || lock(&state.op).is_none() {
            return Ok(());
        }
        let mut engine = lock(&self.engine);
        let slot = lock(&state.op);
        if let Some(op) = slot.as_ref() {
            engine.cancel(op)?;
        }
        Ok(())
    }

    fn poll(&self, request: &ClassRequest<'_, Arc<OpState>>) -> Result<(), BoxError> {
        let outcome = {
            let mut engine = lock(&self.engine);
            engine.poll()?;
            Self::collect(&mut engine, request.state())
        };
        match outcome {
            Some(o) => apply(request, o),
            None => Ok(()),
        }
    }

    fn wait(
        &self,
        requests: &[ClassRequest<'_, Arc<OpState>>],
        timeout: Duration,
    ) -> Result<(), BoxError> {
        let mut outcomes = Vec::new();
        {
            let mut engine = lock(&self.engine);
            {
                let guards: Vec<_> = requests
                    .iter()
                    .filter(|r| !r.is_complete())
                    .map(|r| lock(&r.state().op))
                    .collect();
                let ops: Vec<&FileOp> = guards.iter().filter_map(|g| g.as_ref()).collect();
                if !ops.is_empty() {
                    engine.wait_any(&ops, Some(timeout))?;
                }
            }
            for (i, request) in requests.iter().enumerate() {
                if let Some(o) = Self::collect(&mut engine, request.state()) {
                    outcomes.push((i, o));
                }
            }
        }
        for (i, o) in outcomes {
            apply(&requests[i], o)?;
        }
        Ok(())
    }
}
