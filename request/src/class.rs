//! Request classes: generalized requests whose progress is driven by the waits and tests that
//! look at them, through a `poll` hook (one request, non-blocking) and a `wait` hook (every
//! request of the class in a blocking wait at once, with a timeout).

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use super::core::{Body, Core, CoreRef};
use super::error::{BoxError, Cause, RequestError};
use super::greq::CompleteHandle;
use super::handle::Request;
use super::status::QueryStatus;

/// The operations of a request class, implemented once per class (an io_uring ring, a device
/// queue, ...); each request carries its own [`ClassOps::State`].
///
/// `query`, `free` and `cancel` follow the rules of [`GrequestOps`](super::GrequestOps). `poll`
/// is called by tests and waits on an incomplete request to advance it; `wait` is called by a
/// blocking wait with **all** incomplete requests of this class in its array, so that one
/// blocking system call (one `io_uring_enter`, one `poll(2)`) serves the whole batch. A request
/// driven this way needs no helper thread.
///
/// When `poll` fails, the class's `cancel` runs and the request completes with
/// [`RequestError::Poll`]; when `wait` fails, the same happens to every incomplete request of
/// the batch, with [`RequestError::WaitHook`] (a cancel callback that also runs on
/// failure). No hook is called with an internal lock held.
pub trait ClassOps: Send + Sync + 'static {
    /// Per-request state of this class.
    type State: Send + Sync + 'static;

    /// Fills the status of a complete request.
    fn query(&self, state: &Self::State, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        let _ = (state, status);
        Ok(())
    }

    /// Gives back the request's resources; exactly once.
    fn free(&self, state: &Self::State) -> Result<(), BoxError> {
        let _ = state;
        Ok(())
    }

    /// Cancels the operation (`complete`: whether the request already completed). Also called
    /// before a request fails because a hook failed.
    fn cancel(&self, state: &Self::State, complete: bool) -> Result<(), BoxError> {
        let _ = (state, complete);
        Ok(())
    }

    /// Advances one incomplete request without blocking; may complete it (or any other request
    /// of the class).
    fn poll(&self, request: &ClassRequest<'_, Self::State>) -> Result<(), BoxError>;

    /// Blocks at most `timeout` until some request of `requests` (every incomplete request of
    /// this class in the caller's wait) may have progressed, completing what it can. Returning
    /// early is always allowed, but a hook that always returns at once makes the wait spin.
    ///
    /// The default only paces the wait's polling (adaptive intervals): it yields while the
    /// wait's timeouts are short (its first rounds), then sleeps for the timeout, at most
    /// [`MAX_DEFAULT_WAIT_SLEEP`]; the wait never gives it more than what is left of its own
    /// deadline. A completion through a [`CompleteHandle`] is then seen within about one
    /// sleep.
    fn wait(
        &self,
        requests: &[ClassRequest<'_, Self::State>],
        timeout: Duration,
    ) -> Result<(), BoxError> {
        let _ = requests;
        pace(timeout);
        Ok(())
    }
}

/// Longest sleep of the default [`ClassOps::wait`]: the longest a completion by another thread
/// goes unseen by a wait that polls a class without its own wait hook.
pub const MAX_DEFAULT_WAIT_SLEEP: Duration = Duration::from_millis(1);

/// Timeouts up to this long are the first rounds of a wait: the default wait hook yields instead
/// of sleeping, so that an operation about to finish is seen at once.
const DEFAULT_WAIT_SPIN_BELOW: Duration = Duration::from_micros(200);

/// The default wait hook's pacing for one round of `timeout`.
fn pace(timeout: Duration) {
    if timeout.is_zero() {
        return;
    }
    if timeout <= DEFAULT_WAIT_SPIN_BELOW {
        std::thread::yield_now();
    } else {
        std::thread::sleep(timeout.min(MAX_DEFAULT_WAIT_SLEEP));
    }
}

/// A request of a class as its hooks see it: its state, and the means to complete it.
pub struct ClassRequest<'a, S> {
    core: &'a CoreRef,
    state: &'a S,
}

impl<S> std::fmt::Debug for ClassRequest<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassRequest")
            .field("complete", &self.core.is_complete())
            .finish()
    }
}

impl<S> ClassRequest<'_, S> {
    /// The request's state.
    pub fn state(&self) -> &S {
        self.state
    }

    /// Whether the request is complete.
    pub fn is_complete(&self) -> bool {
        self.core.is_complete()
    }

    /// Whether the user asked to cancel the request.
    pub fn cancel_requested(&self) -> bool {
        self.core.cancel_requested()
    }

    /// Completes the request.
    pub fn complete(&self) -> Result<(), RequestError> {
        self.core.complete_cars(false, 0).map(|_| ())
    }

    /// Fails the request: the class's cancel runs, then the request completes with
    /// [`RequestError::Operation`].
    pub fn fail(&self, error: impl Into<BoxError>) -> Result<(), RequestError> {
        self.core.fail(RequestError::Operation(Cause::new(error)))
    }

    /// A handle that completes this request from anywhere (to keep in a table of operations in
    /// flight, for example).
    pub fn complete_handle(&self) -> CompleteHandle {
        CompleteHandle::another(Arc::clone(self.core))
    }
}

/// A request class: created once, then [`RequestClass::start`] makes its requests.
pub struct RequestClass<C> {
    ops: Arc<C>,
}

impl<C> Clone for RequestClass<C> {
    fn clone(&self) -> Self {
        RequestClass {
            ops: Arc::clone(&self.ops),
        }
    }
}

impl<C> std::fmt::Debug for RequestClass<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestClass").finish_non_exhaustive()
    }
}

impl<C: ClassOps> RequestClass<C> {
    /// Creates the class.
    pub fn new(ops: C) -> Self {
        RequestClass { ops: Arc::new(ops) }
    }

    /// The class's operations.
    pub fn ops(&self) -> &C {
        &self.ops
    }

    /// Starts a request of this class with its own `state`. The handle completes it from outside
    /// the hooks (a table of operations in flight may keep it).
    pub fn start(&self, state: C::State) -> (Request, CompleteHandle) {
        let body = ClassBody {
            class: Arc::clone(&self.ops),
            state,
        };
        let (request, core) = Request::from_body(1, body);
        (request, CompleteHandle::first(core))
    }
}

struct ClassBody<C: ClassOps> {
    class: Arc<C>,
    state: C::State,
}

fn view<C: ClassOps>(core: &CoreRef) -> Option<ClassRequest<'_, C::State>> {
    let body = core.body.as_any().downcast_ref::<ClassBody<C>>()?;
    Some(ClassRequest {
        core,
        state: &body.state,
    })
}

impl<C: ClassOps> Body for ClassBody<C> {
    fn query(&self, _: &Core, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        self.class.query(&self.state, status)
    }
    fn free(&self) -> Result<(), BoxError> {
        self.class.free(&self.state)
    }
    fn cancel(&self, _: &CoreRef, complete: bool) -> Result<(), BoxError> {
        self.class.cancel(&self.state, complete)
    }
    fn hook_key(&self) -> Option<usize> {
        Some(Arc::as_ptr(&self.class) as *const () as usize)
    }
    fn poll_group(&self, members: &[&CoreRef]) {
        for member in members {
            let Some(request) = view::<C>(member) else {
                continue;
            };
            if request.is_complete() {
                continue;
            }
            if let Err(e) = self.class.poll(&request) {
                let _ = member.fail(RequestError::Poll(Cause::from(e)));
            }
        }
    }
    fn wait_group(&self, members: &[&CoreRef], timeout: Duration) {
        let batch: Vec<_> = members.iter().filter_map(|m| view::<C>(m)).collect();
        if let Err(e) = self.class.wait(&batch, timeout) {
            let cause = Cause::from(e);
            for request in batch.iter().filter(|r| !r.is_complete()) {
                let _ = request.core.fail(RequestError::WaitHook(cause.clone()));
            }
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
