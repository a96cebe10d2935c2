//! MPI-2 generalized requests: user callbacks for query, free and cancel, completed by the user
//! from any thread through a [`CompleteHandle`].

use std::any::Any;
use std::sync::Arc;

use super::core::{Body, Completer, Core, CoreRef};
use super::error::{BoxError, Cause, RequestError};
use super::handle::Request;
use super::status::QueryStatus;

/// The callbacks of a generalized request, implemented by the user on the request's own state
/// (the type's fields are MPI's `extra_state`).
///
/// All three have defaults that do nothing and succeed. They may run on any thread (the state is
/// `Send + Sync`; use interior mutability for what changes), never with an internal lock of the
/// agent held, so they may call any agent function.
///
/// When each runs (MPI-2 `MPI_Grequest_start`):
/// - `query` only after [`CompleteHandle::complete`]: in the wait/test that completes the request,
///   and in every [`Request::get_status`] on a complete request.
/// - `free` exactly once, after `query`, in the wait/test that completes the request; for a
///   request given back with [`Request::free`] (or dropped), in whichever of `free` and `complete`
///   comes last; for a request with handlers posted, after the last handler ran.
/// - `cancel` in [`Request::cancel`], with `complete` telling whether `complete` was called,
///   and in [`CompleteHandle::fail`] (with `complete == false`).
///
/// The cancel callback gets a [`CompleteHandle`] of its own request: an operation that stops
/// at once completes the request from the callback (`handle.complete()`), or hands a clone of
/// the handle to whatever finishes the cancellation later. The state need not (and should not)
/// keep a handle of its own request: the request owns the state, so such a handle would keep
/// both alive for ever.
///
/// A request whose last [`CompleteHandle`] is dropped before it completed can never complete:
/// it completes then with [`RequestError::Abandoned`] (no `cancel` runs; `query` and `free` run
/// as after `complete`).
pub trait GrequestOps: Send + Sync + 'static {
    /// Fills the status of the complete request (source, tag, count, cancelled). The error field
    /// is out of reach: the agent sets it from the call's context.
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        let _ = status;
        Ok(())
    }

    /// Gives back the resources of the request; runs exactly once. Its error is the error of the
    /// call that ran it.
    fn free(&self) -> Result<(), BoxError> {
        Ok(())
    }

    /// Starts cancelling the operation; `complete` is true when the request was already
    /// completed. `handle` completes this request: call [`CompleteHandle::complete`] on it once
    /// the operation stopped (setting the cancelled flag in `query`), here or later through a
    /// clone. Completing a complete request gives [`RequestError::AlreadyComplete`] (so does a
    /// completion from the cancel callback that [`CompleteHandle::fail`] runs: the failure
    /// decided the outcome already).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use viaduct_request::{BoxError, CompleteHandle, GrequestOps, QueryStatus, Request};
    ///
    /// /// An operation that stops as soon as it is cancelled.
    /// #[derive(Default)]
    /// struct Stoppable {
    ///     cancelled: AtomicBool,
    /// }
    ///
    /// impl GrequestOps for Stoppable {
    ///     fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
    ///         status.set_cancelled(self.cancelled.load(Ordering::Acquire));
    ///         Ok(())
    ///     }
    ///     fn cancel(&self, complete: bool, handle: &CompleteHandle) -> Result<(), BoxError> {
    ///         if !complete {
    ///             self.cancelled.store(true, Ordering::Release);
    ///             handle.complete()?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // The handle goes to the operation (here: kept aside), not into the state.
    /// let (mut request, _operation) = Request::generalized(Stoppable::default());
    /// request.cancel()?;
    /// assert!(request.wait()?.test_cancelled());
    /// # Ok(())
    /// # }
    /// ```
    fn cancel(&self, complete: bool, handle: &CompleteHandle) -> Result<(), BoxError> {
        let _ = (complete, handle);
        Ok(())
    }
}

/// No state, no callbacks: a generalized request whose status is empty.
impl GrequestOps for () {}

pub(crate) struct GreqBody<T>(T);

impl<T: GrequestOps> Body for GreqBody<T> {
    fn query(&self, _: &Core, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        self.0.query(status)
    }
    fn free(&self) -> Result<(), BoxError> {
        self.0.free()
    }
    fn cancel(&self, core: &CoreRef, complete: bool) -> Result<(), BoxError> {
        // A handle for the callback only: dropped when it returns (the callback clones it to
        // keep it). If it was the last one and the request is still incomplete, nobody can
        // complete it any more, so it is abandoned as on any handle's drop.
        let handle = CompleteHandle::another(Arc::clone(core));
        self.0.cancel(complete, &handle)
    }
    fn abandonable(&self) -> bool {
        true
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Request {
    /// Starts a generalized request (`MPI_Grequest_start`) whose callbacks are `ops`'s.
    ///
    /// Returns the request and the handle that completes it (`MPI_Grequest_complete`). One
    /// allocation holds the request, its state word and `ops`.
    #[inline]
    pub fn generalized<T: GrequestOps>(ops: T) -> (Request, CompleteHandle) {
        let (request, core) = Request::from_body(1, GreqBody(ops));
        (request, CompleteHandle::first(core))
    }
}

/// Completes a generalized or class-driven request from any thread.
///
/// Cloneable, `Send` and `Sync`; it stays valid after the user's [`Request`] was waited on or
/// freed (the request's memory lives as long as any handle to it).
///
/// Dropping the last handle of an incomplete generalized request completes it with
/// [`RequestError::Abandoned`] (nothing else could complete it: its waits would block for ever).
/// A class-driven request is left alone, since its hooks can still complete it.
#[derive(Clone)]
pub struct CompleteHandle {
    core: Completer,
}

impl std::fmt::Debug for CompleteHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompleteHandle")
            .field("complete", &self.core.is_complete())
            .finish()
    }
}

impl CompleteHandle {
    /// The first handle of a request just started.
    pub(crate) fn first(core: CoreRef) -> Self {
        CompleteHandle {
            core: Completer::first(core),
        }
    }

    /// Another handle of a request that may have some already.
    pub(crate) fn another(core: CoreRef) -> Self {
        CompleteHandle {
            core: Completer::another(core),
        }
    }

    /// Marks the request complete (`MPI_Grequest_complete`): waiters wake, handlers for the
    /// COMPLETE condition are scheduled, and if the user already freed the request its free
    /// callback runs here (its error is returned). Completing twice gives
    /// [`RequestError::AlreadyComplete`].
    #[inline]
    pub fn complete(&self) -> Result<(), RequestError> {
        self.core.complete_cars(false, 0).map(|_| ())
    }

    /// Fails the operation: the cancel callback runs (with `complete == false`), then the request
    /// completes and its wait/test reports [`RequestError::Operation`] with `error` (unless a
    /// query or free callback fails too). Returns the cancel callback's error, if any.
    ///
    /// The first completion decides: on a complete request this gives
    /// [`RequestError::AlreadyComplete`] and changes nothing; once `fail` started, a
    /// [`CompleteHandle::complete`] (from another thread, or from the cancel callback) gives
    /// [`RequestError::AlreadyComplete`].
    pub fn fail(&self, error: impl Into<BoxError>) -> Result<(), RequestError> {
        self.core.fail(RequestError::Operation(Cause::new(error)))
    }

    /// Whether the request was completed.
    pub fn is_complete(&self) -> bool {
        self.core.is_complete()
    }

    /// Whether the user asked to cancel the request.
    pub fn cancel_requested(&self) -> bool {
        self.core.cancel_requested()
    }

    /// Keeps the RELEASE condition from following completion: it is reached at
    /// [`CompleteHandle::release`] instead. Only before completion.
    pub fn hold_release(&self) -> Result<(), RequestError> {
        self.core.hold_release()
    }

    /// Signals that every resource of the operation has been given back (after
    /// [`CompleteHandle::hold_release`]); handlers for the RELEASE condition are scheduled once
    /// the request is also complete.
    pub fn release(&self) {
        self.core.release();
    }
}
