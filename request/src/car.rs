//! Message requests: a counter of outstanding CARs (communication agent requests), completed
//! one CAR at a time by the agent's methods.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::core::{Body, Completer, Core, CoreRef};
use super::error::{BoxError, Cause, RequestError};
use super::handle::Request;
use super::status::QueryStatus;

/// Drives the progress of the operations behind message requests (the agent's progress engine).
///
/// Waits and tests call it: `progress(None)` must not block, `progress(Some(t))` may block up to
/// `t` waiting for any completion. A wait calls it once per round for all its requests that share
/// this driver (identity is the `Arc`), never with an internal lock held.
pub trait ProgressDriver: Send + Sync + 'static {
    /// Makes progress; completes CARs through their [`CarCounter`]s. An error fails every
    /// incomplete request of the wait that shares this driver.
    fn progress(&self, timeout: Option<Duration>) -> Result<(), BoxError>;

    /// Like `progress(Some(timeout))` for a wait that needs only `done` to turn true (it turns
    /// true when a request of the wait completed, whichever thread completed it): a driver may
    /// then block until `done()`, the timeout, or an error, instead of returning at the first
    /// completion of any request, so that a thread waiting on one request does not spin while
    /// other threads complete theirs. The default calls `progress(Some(timeout))`.
    fn progress_until(&self, timeout: Duration, done: &dyn Fn() -> bool) -> Result<(), BoxError> {
        let _ = done;
        self.progress(Some(timeout))
    }
}

const NONE: u32 = u32::MAX;

fn opt(v: u32) -> Option<u32> {
    (v != NONE).then_some(v)
}

fn message_query(core: &Core, status: &mut QueryStatus<'_>) {
    status.set_source(opt(core.source.load(Ordering::Relaxed)));
    status.set_tag(opt(core.tag.load(Ordering::Relaxed)));
    status.set_count(core.bytes.load(Ordering::Relaxed));
}

/// A message request without a driver (zero-sized: no allocation beyond the request).
struct Message;

impl Body for Message {
    fn query(&self, core: &Core, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        message_query(core, status);
        Ok(())
    }
    fn free(&self) -> Result<(), BoxError> {
        Ok(())
    }
    fn cancel(&self, _: &CoreRef, _complete: bool) -> Result<(), BoxError> {
        // The owner of the operation sees the request's cancel flag and decides.
        Ok(())
    }
    fn abandonable(&self) -> bool {
        true
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A message request whose waits call a progress driver.
struct DrivenMessage(Arc<dyn ProgressDriver>);

impl Body for DrivenMessage {
    fn query(&self, core: &Core, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        message_query(core, status);
        Ok(())
    }
    fn free(&self) -> Result<(), BoxError> {
        Ok(())
    }
    fn cancel(&self, _: &CoreRef, _complete: bool) -> Result<(), BoxError> {
        Ok(())
    }
    fn hook_key(&self) -> Option<usize> {
        Some(Arc::as_ptr(&self.0) as *const () as usize)
    }
    fn poll_group(&self, members: &[&CoreRef]) {
        if let Err(e) = self.0.progress(None) {
            fail_all(members, e);
        }
    }
    fn wait_group(&self, members: &[&CoreRef], timeout: Duration) {
        // The members were incomplete when the wait looked: it has something to look at once
        // any of them completes.
        let done = || members.iter().any(|m| m.is_complete());
        if let Err(e) = self.0.progress_until(timeout, &done) {
            fail_all(members, e);
        }
    }
    fn abandonable(&self) -> bool {
        true
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn fail_all(members: &[&CoreRef], error: BoxError) {
    let cause = Cause::from(error);
    for m in members {
        let _ = m.fail(RequestError::WaitHook(cause.clone()));
    }
}

impl Request {
    /// Starts a message request with `outstanding` CARs (0 makes it complete at once). The
    /// returned [`CarCounter`] is what the methods complete CARs through.
    pub fn message(outstanding: u32) -> (Request, CarCounter) {
        let (request, core) = Request::from_body(outstanding, Message);
        (request, CarCounter::new(core))
    }

    /// Like [`Request::message`], with a progress driver that waits and tests call.
    pub fn message_driven(
        outstanding: u32,
        driver: Arc<dyn ProgressDriver>,
    ) -> (Request, CarCounter) {
        let (request, core) = Request::from_body(outstanding, DrivenMessage(driver));
        (request, CarCounter::new(core))
    }
}

/// The counter of outstanding CARs of a message request: the side of the request that the
/// agent's methods hold. Cloneable, `Send` and `Sync`.
///
/// The request completes when the count reaches 0; its status reports the envelope set with
/// [`CarCounter::set_envelope`], the sum of the bytes of all CARs, and the first CAR error.
///
/// Dropping the last counter of an incomplete request completes it with
/// [`RequestError::Abandoned`]: no CAR of it can complete any more.
#[derive(Clone)]
pub struct CarCounter {
    core: Completer,
}

impl std::fmt::Debug for CarCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CarCounter")
            .field("outstanding", &self.core.outstanding())
            .finish()
    }
}

impl CarCounter {
    /// The counter of a request just started.
    fn new(core: CoreRef) -> Self {
        CarCounter {
            core: Completer::first(core),
        }
    }

    /// Adds `n` outstanding CARs; fails on a complete request.
    pub fn add_outstanding(&self, n: u32) -> Result<(), RequestError> {
        self.core.add_outstanding(n)
    }

    /// Number of CARs still outstanding.
    pub fn outstanding(&self) -> u32 {
        self.core.outstanding()
    }

    /// Whether the request is complete.
    pub fn is_complete(&self) -> bool {
        self.core.is_complete()
    }

    /// Records the envelope of the message (source rank and tag) for the status.
    pub fn set_envelope(&self, source: u32, tag: u32) {
        self.core.source.store(source, Ordering::Relaxed);
        self.core.tag.store(tag, Ordering::Relaxed);
    }

    /// Completes one CAR that moved `bytes` bytes. Returns whether the request is now complete.
    /// A CAR that finds the request complete (or losing its last CAR to a cancellation or a
    /// failure) gives [`RequestError::AlreadyComplete`] and its bytes are not counted.
    #[inline]
    pub fn complete_car(&self, bytes: u64) -> Result<bool, RequestError> {
        self.core.complete_car(bytes)
    }

    /// Completes one CAR with an error; the first error is the request's. Returns whether the
    /// request is now complete. On a complete request (or one whose last CAR another call took)
    /// it gives [`RequestError::AlreadyComplete`] and the request's outcome is unchanged.
    pub fn fail_car(&self, error: impl Into<BoxError>) -> Result<bool, RequestError> {
        self.core
            .fail_car(RequestError::Operation(Cause::new(error)))
    }

    /// Whether the user called [`Request::cancel`].
    pub fn cancel_requested(&self) -> bool {
        self.core.cancel_requested()
    }

    /// Completes every outstanding CAR at once, with the status reporting a cancellation.
    pub fn complete_cancelled(&self) -> Result<(), RequestError> {
        self.core.complete_cancelled()
    }

    /// Keeps the RELEASE condition from following completion until [`CarCounter::release`].
    pub fn hold_release(&self) -> Result<(), RequestError> {
        self.core.hold_release()
    }

    /// Signals that every resource of the operation has been given back.
    pub fn release(&self) {
        self.core.release();
    }
}
