//! [`Request`]: the one request handle.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::core::{self, Body, CoreRef};
use super::error::RequestError;
use super::handler::{self, Condition, Deadline, HandlerFn};
use super::set;
use super::status::Status;

/// A handle to an operation in progress: a message (a counter of outstanding CARs), a
/// generalized request, or a request of a [`RequestClass`](super::RequestClass).
///
/// The handle is unique (not `Clone`). A wait or test that completes the request consumes it:
/// the handle becomes *null* ([`Request::is_null`]), like `MPI_REQUEST_NULL`, and waiting on a
/// null request returns an empty status at once. Dropping an active handle is
/// [`Request::free`]: the operation goes on, and the free callback runs when it completes.
///
/// Requests of every kind mix freely in the arrays given to [`wait_any`](super::wait_any),
/// [`wait_some`](super::wait_some), [`wait_all`](super::wait_all) and the `test_*` family.
pub struct Request {
    core: Option<CoreRef>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.core {
            None => f.write_str("Request(null)"),
            Some(core) => f
                .debug_struct("Request")
                .field("outstanding", &core.outstanding())
                .finish(),
        }
    }
}

impl Default for Request {
    fn default() -> Self {
        Request::null()
    }
}

impl Request {
    /// The null request: complete, with an empty status.
    pub const fn null() -> Self {
        Request { core: None }
    }

    #[inline]
    pub(crate) fn from_body<B: Body>(outstanding: u32, body: B) -> (Request, CoreRef) {
        let core = core::new_core(outstanding, body);
        (
            Request {
                core: Some(Arc::clone(&core)),
            },
            core,
        )
    }

    pub(crate) fn core(&self) -> Option<&CoreRef> {
        self.core.as_ref()
    }

    /// Whether this is the null request (never started, or already completed by a wait/test).
    pub fn is_null(&self) -> bool {
        self.core.is_none()
    }

    /// Whether the operation completed (a null request counts as complete). Runs no callback and
    /// no progress hook; use [`Request::test`] to drive progress.
    pub fn is_complete(&self) -> bool {
        self.core.as_ref().is_none_or(|c| c.is_complete())
    }

    /// Blocks until the request completes, then runs its query and free callbacks and makes the
    /// handle null.
    ///
    /// Progress hooks of class-driven requests and progress drivers of message requests run in
    /// this call; other requests are completed by other threads. The error, if any, is the free
    /// callback's, else the query callback's, else the operation's. A status the caller ignores
    /// (drops) was still filled by a real query.
    #[inline(always)]
    pub fn wait(&mut self) -> Result<Status, RequestError> {
        let Some(core) = &self.core else {
            return Ok(Status::empty());
        };
        if !core.is_complete() {
            set::wait_until(std::slice::from_ref(self), set::Need::Any);
        }
        self.finish()
    }

    /// Like [`Request::wait`], but the status carries the error, if any, in its
    /// [`Status::error`] (as each status of [`wait_all`](super::wait_all) does), so that the
    /// envelope and count of a failed request are kept.
    #[inline(always)]
    pub fn wait_with_error(&mut self) -> Status {
        let Some(core) = &self.core else {
            return Status::empty();
        };
        if !core.is_complete() {
            set::wait_until(std::slice::from_ref(self), set::Need::Any);
        }
        self.finish_with_error()
    }

    /// Like [`Request::wait`], but gives up after `timeout`: `Ok(None)` then, with the request
    /// still active and no callback run.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<Status>, RequestError> {
        let Some(core) = &self.core else {
            return Ok(Some(Status::empty()));
        };
        if !core.is_complete() {
            let deadline = Instant::now().checked_add(timeout);
            if !set::wait_until_deadline(std::slice::from_ref(self), set::Need::Any, deadline) {
                return Ok(None);
            }
        }
        self.finish().map(Some)
    }

    /// Returns the status if the request completed (running query and free, making the handle
    /// null), `None` otherwise. An incomplete generalized request runs no callback; a
    /// class-driven request gets one call of its poll hook.
    #[inline]
    pub fn test(&mut self) -> Result<Option<Status>, RequestError> {
        let Some(core) = &self.core else {
            return Ok(Some(Status::empty()));
        };
        if !core.is_complete() {
            set::poll_pass(std::slice::from_ref(self));
            if !core.is_complete() {
                return Ok(None);
            }
        }
        self.finish().map(Some)
    }

    /// The status of a complete request without freeing it (`None`: not complete yet). The query
    /// callback runs at each call on a complete request; the handle stays valid.
    /// (`MPI_Request_get_status`.) A request that completed with a failure reports it here as
    /// [`Request::wait`] would (the query's error, else the operation's) at every call, and stays
    /// valid.
    pub fn get_status(&self) -> Result<Option<Status>, RequestError> {
        let Some(core) = &self.core else {
            return Ok(Some(Status::empty()));
        };
        if !core.is_complete() {
            set::poll_pass(std::slice::from_ref(self));
            if !core.is_complete() {
                return Ok(None);
            }
        }
        core.current_status().into_result().map(Some)
    }

    /// Gives the handle back without waiting (`MPI_Request_free`). The free callback runs now if
    /// the request is complete (its error is returned), else in the call that completes it.
    /// Handlers posted on the request still run, and free waits for them.
    pub fn free(mut self) -> Result<(), RequestError> {
        let Some(core) = self.core.take() else {
            return Ok(());
        };
        let result = if core.release_handle() {
            core.run_free()
        } else {
            Ok(())
        };
        core::recycle(core);
        result
    }

    /// Asks for cancellation: runs the cancel callback with `complete` telling whether the
    /// request already completed. The request must still be waited for (or freed); its status
    /// then tells, through [`Status::test_cancelled`], whether the cancellation took effect.
    ///
    /// For message requests the owner of the operation sees
    /// [`CarCounter::cancel_requested`](super::CarCounter::cancel_requested) and decides.
    pub fn cancel(&self) -> Result<(), RequestError> {
        self.core.as_ref().ok_or(RequestError::Null)?.cancel()
    }

    /// Posts a handler on this request; see [`post_handler`](super::post_handler).
    pub fn post_handler(
        &self,
        condition: Condition,
        handler: Option<HandlerFn>,
        failure: Option<HandlerFn>,
        deadline: Deadline,
    ) -> Result<(), RequestError> {
        let core = self.core.as_ref().ok_or(RequestError::Null)?;
        handler::post(core, condition, handler, failure, deadline)
    }

    /// Query and free for a complete request; the handle becomes null.
    #[inline(always)]
    pub(crate) fn finish(&mut self) -> Result<Status, RequestError> {
        self.finish_with_error().into_result()
    }

    /// Like [`Request::finish`] but keeps the status, with the error in its error field.
    #[inline(always)]
    pub(crate) fn finish_with_error(&mut self) -> Status {
        match self.core.take() {
            None => Status::empty(),
            Some(core) => {
                let guard = ReleaseOnUnwind(&core);
                let result = core.finalize();
                std::mem::forget(guard);
                core::recycle(core);
                result
            }
        }
    }
}

/// Gives the user's handle back if a callback run by a completing wait or test panics (the query,
/// say), so that the free callback still runs exactly once; forgotten on the normal path, where it
/// costs nothing.
struct ReleaseOnUnwind<'a>(&'a CoreRef);

impl Drop for ReleaseOnUnwind<'_> {
    fn drop(&mut self) {
        if self.0.release_handle() {
            // Already unwinding: a panic of the free callback too would abort the process.
            let _ = catch_unwind(AssertUnwindSafe(|| self.0.run_free()));
        }
    }
}

impl Drop for Request {
    #[inline]
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            if core.release_handle() {
                // Nobody can receive this error: a caller who wants it uses `free`.
                let _ = core.run_free();
            }
            core::recycle(core);
        }
    }
}
