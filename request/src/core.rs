//! The shared body of every request: state word, waiter list, handler slots, completion error,
//! and the kind-specific part behind a trait object; plus the per-thread pool that recycles it.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::error::{BoxError, Cause, RequestError};
use super::handler::{self, Condition, HandlerSlots};
use super::state::{self, CANCEL_REQUESTED, CANCELLED, COUNT_MASK, FREE_CLAIMED, HANDLE_RELEASED};
use super::state::{FAILING, SETTLING};
use super::state::{HANDLERS_POSTED, PIN_ONE, RELEASE_HELD, RELEASE_SIGNALLED, WAITING};
use super::status::{QueryFields, QueryStatus, Status};
use super::waiter::Waiter;

/// The shared request every handle points at.
pub(crate) type CoreRef = Arc<Core>;

/// Requests kept per thread for reuse, so that starting one usually allocates nothing.
const POOL_CAP: usize = 256;

thread_local! {
    static POOL: RefCell<Vec<CoreRef>> = const { RefCell::new(Vec::new()) };
}

/// Whether a body of type `B` holds nothing and drops nothing, so a pooled request may keep it
/// from one use to the next instead of replacing it.
#[inline(always)]
fn is_trivial<B: Body>() -> bool {
    std::mem::size_of::<B>() == 0 && !std::mem::needs_drop::<B>()
}

/// A request for `body` with `outstanding` CARs, from this thread's pool when it has one.
#[inline]
pub(crate) fn new_core<B: Body>(outstanding: u32, body: B) -> CoreRef {
    let pooled = POOL.try_with(|p| p.borrow_mut().pop()).ok().flatten();
    if let Some(mut core) = pooled {
        if is_trivial::<B>() && core.body_type == TypeId::of::<B>() {
            // The pooled request already holds an empty body of this very type, and was reset
            // when it was pooled: only the count is set (no exclusive access needed, since the
            // pool holds the only handle to it).
            core.state.store(u64::from(outstanding), Ordering::Relaxed);
            return core;
        }
        if let Some(c) = Arc::get_mut(&mut core) {
            *c.state.get_mut() = u64::from(outstanding);
            c.set_body(body);
            return core;
        }
    }
    Arc::new(Core::new(
        outstanding,
        Box::new(body),
        TypeId::of::<B>(),
        is_trivial::<B>(),
    ))
}

/// Drops a handle; the last one puts the request back into this thread's pool.
#[inline]
pub(crate) fn recycle(mut core: CoreRef) {
    // Only the last handle can see a count of 1 (nobody is left to clone it; no weak
    // references exist), so this check never races with a clone.
    if Arc::strong_count(&core) != 1 {
        return;
    }
    if !(core.trivial_body && core.reset_in_place()) {
        let Some(c) = Arc::get_mut(&mut core) else {
            return;
        };
        // The user's state is dropped here, with no lock held.
        c.set_body(Recycled);
        c.reset();
    }
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_CAP {
            p.push(core);
        }
    });
}

/// A counted handle to a request that gives it back to the pool when it is the last one.
pub(crate) struct Shared(Option<CoreRef>);

impl Shared {
    pub(crate) fn new(core: CoreRef) -> Self {
        Shared(Some(core))
    }
}

impl std::ops::Deref for Shared {
    type Target = CoreRef;
    #[inline]
    fn deref(&self) -> &CoreRef {
        match &self.0 {
            Some(core) => core,
            // Only `drop` takes the request out.
            None => unreachable!("request handle used after drop"),
        }
    }
}

impl Clone for Shared {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(core) = self.0.take() {
            recycle(core);
        }
    }
}

/// Waiting for another thread's short critical step on the state word (a reserved CAR being
/// counted: a few stores, no user code): spins a little, then yields.
#[derive(Default)]
struct Backoff(u32);

impl Backoff {
    fn snooze(&mut self) {
        if self.0 < 64 {
            self.0 += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A handle that can complete the request ([`CompleteHandle`](super::CompleteHandle),
/// [`CarCounter`](super::CarCounter)). The request counts them: when the last one goes while the
/// request is incomplete, and nothing else can complete it (a generalized or message request;
/// a class's hooks still can), it completes with [`RequestError::Abandoned`].
pub(crate) struct Completer(Shared);

impl Completer {
    /// The first completing handle of a request just started (nobody else holds one, so a
    /// plain store sets the count).
    #[inline]
    pub(crate) fn first(core: CoreRef) -> Self {
        core.completers.store(1, Ordering::Relaxed);
        Completer(Shared::new(core))
    }

    /// Another completing handle of a request that may have some already.
    pub(crate) fn another(core: CoreRef) -> Self {
        core.completers.fetch_add(1, Ordering::Relaxed);
        Completer(Shared::new(core))
    }
}

impl std::ops::Deref for Completer {
    type Target = CoreRef;
    #[inline]
    fn deref(&self) -> &CoreRef {
        &self.0
    }
}

impl Clone for Completer {
    fn clone(&self) -> Self {
        Completer::another(Arc::clone(&self.0))
    }
}

impl Drop for Completer {
    #[inline]
    fn drop(&mut self) {
        // Once the request is complete and its RELEASE condition not held back, the last handle
        // has nothing left to do, and the count no longer matters (it is set afresh when the
        // request is reused): no atomic read-modify-write on this common path.
        let s = self.0.load();
        if state::is_complete(s) && (s & RELEASE_HELD == 0 || s & RELEASE_SIGNALLED != 0) {
            return;
        }
        if self.0.completers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.abandon();
        }
    }
}

/// The body of a pooled request.
struct Recycled;

impl Body for Recycled {
    fn query(&self, _: &Core, _: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        Ok(())
    }
    fn free(&self) -> Result<(), BoxError> {
        Ok(())
    }
    fn cancel(&self, _: &CoreRef, _: bool) -> Result<(), BoxError> {
        Ok(())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// What differs between request kinds (message, generalized, class-driven).
///
/// No method is called with an internal lock held: all of them may run user code.
pub(crate) trait Body: Send + Sync + 'static {
    /// Fills the status of a complete request.
    fn query(&self, core: &Core, status: &mut QueryStatus<'_>) -> Result<(), BoxError>;
    /// Gives back the user's resources; runs exactly once.
    fn free(&self) -> Result<(), BoxError>;
    /// Starts cancellation of `core`'s request (this body's); `complete` says whether the
    /// request already completed.
    fn cancel(&self, core: &CoreRef, complete: bool) -> Result<(), BoxError>;
    /// Identity of the progress hook that drives this request, if any. Requests with the same key
    /// are polled and waited on together.
    fn hook_key(&self) -> Option<usize> {
        None
    }
    /// Advances every request of `members` (all with this body's hook key) without blocking.
    fn poll_group(&self, _members: &[&CoreRef]) {}
    /// Blocks at most `timeout` until some request of `members` may have progressed.
    fn wait_group(&self, _members: &[&CoreRef], _timeout: Duration) {}
    /// Whether only its completing handles can complete a request of this body (so that it is
    /// abandoned when the last of them goes).
    fn abandonable(&self) -> bool {
        false
    }
    /// The concrete body, for downcasting inside a hook group.
    fn as_any(&self) -> &dyn Any;
}

/// A request: the state word, what a message reports, waiters, handlers, the completion error,
/// and the kind-specific body (a zero-sized body costs no allocation).
pub(crate) struct Core {
    state: AtomicU64,
    /// Bytes moved by the CARs of a message request.
    pub(crate) bytes: AtomicU64,
    /// Source rank of a message request (`u32::MAX`: none).
    pub(crate) source: AtomicU32,
    /// Tag of a message request (`u32::MAX`: none).
    pub(crate) tag: AtomicU32,
    waiters: Mutex<Vec<Arc<Waiter>>>,
    pub(crate) handlers: Mutex<Option<Box<HandlerSlots>>>,
    error: OnceLock<RequestError>,
    /// Live completing handles (see [`Completer`]) while the request can still be abandoned;
    /// stale once it is complete (and its RELEASE condition not held back).
    completers: AtomicUsize,
    pub(crate) body: Box<dyn Body>,
    /// The concrete type of `body`.
    body_type: TypeId,
    /// Whether `body` holds and drops nothing (see `is_trivial`).
    trivial_body: bool,
}

impl Core {
    /// A request with `outstanding` CARs (0: complete from the start).
    fn new(outstanding: u32, body: Box<dyn Body>, body_type: TypeId, trivial_body: bool) -> Self {
        Core {
            state: AtomicU64::new(u64::from(outstanding)),
            bytes: AtomicU64::new(0),
            source: AtomicU32::new(u32::MAX),
            tag: AtomicU32::new(u32::MAX),
            waiters: Mutex::new(Vec::new()),
            handlers: Mutex::new(None),
            error: OnceLock::new(),
            completers: AtomicUsize::new(0),
            body,
            body_type,
            trivial_body,
        }
    }

    /// Replaces the body (the old one is dropped here).
    #[inline]
    fn set_body<B: Body>(&mut self, body: B) {
        self.body = Box::new(body);
        self.body_type = TypeId::of::<B>();
        self.trivial_body = is_trivial::<B>();
    }

    /// Resets a request nobody else holds without exclusive access, when only its atomic fields
    /// changed: no waiter list, no handler slots, no error to clear. Returns whether it did.
    #[inline]
    fn reset_in_place(&self) -> bool {
        let s = self.state.load(Ordering::Relaxed);
        if s & (WAITING | HANDLERS_POSTED) != 0 || self.error.get().is_some() {
            return false;
        }
        self.state.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
        self.source.store(u32::MAX, Ordering::Relaxed);
        self.tag.store(u32::MAX, Ordering::Relaxed);
        true
    }

    /// Clears everything but the body, for reuse.
    #[inline]
    fn reset(&mut self) {
        let s = std::mem::take(self.state.get_mut());
        *self.bytes.get_mut() = 0;
        *self.source.get_mut() = u32::MAX;
        *self.tag.get_mut() = u32::MAX;
        // Only a wait that blocked touched the waiter list.
        if s & WAITING != 0 {
            self.waiters
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        }
        let handlers = self
            .handlers
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if handlers.is_some() {
            *handlers = None;
        }
        if self.error.get().is_some() {
            self.error.take();
        }
    }

    /// The current state word.
    #[inline]
    pub(crate) fn load(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }

    /// Atomically adds `bits` (flags or pins) and returns the new word.
    pub(crate) fn fetch_add(&self, bits: u64) -> u64 {
        self.state
            .fetch_add(bits, Ordering::AcqRel)
            .wrapping_add(bits)
    }

    /// Atomically sets `bits` (flags).
    pub(crate) fn set_flags(&self, bits: u64) {
        self.state.fetch_or(bits, Ordering::AcqRel);
    }

    /// Atomically removes one pin and returns the new word.
    fn remove_pin(&self) -> u64 {
        self.state.fetch_sub(PIN_ONE, Ordering::AcqRel) - PIN_ONE
    }

    /// Whether all outstanding CARs completed.
    #[inline]
    pub(crate) fn is_complete(&self) -> bool {
        state::is_complete(self.load())
    }

    /// Outstanding CAR count.
    pub(crate) fn outstanding(&self) -> u32 {
        // The mask keeps 32 bits, so the conversion never saturates.
        u32::try_from(state::count(self.load())).unwrap_or(u32::MAX)
    }

    /// Whether `cancel` was called.
    pub(crate) fn cancel_requested(&self) -> bool {
        self.load() & CANCEL_REQUESTED != 0
    }

    /// Adds `n` outstanding CARs to an incomplete request.
    pub(crate) fn add_outstanding(&self, n: u32) -> Result<(), RequestError> {
        let mut s = self.load();
        loop {
            let c = state::count(s);
            if c == 0 || s & FAILING != 0 {
                return Err(RequestError::AlreadyComplete);
            }
            let new_count = c + u64::from(n);
            if new_count > COUNT_MASK {
                return Err(RequestError::TooManyCars { max: u32::MAX });
            }
            let new = (s & !COUNT_MASK) | new_count;
            match self.cas(s, new) {
                Ok(()) => return Ok(()),
                Err(now) => s = now,
            }
        }
    }

    #[inline]
    fn cas(&self, current: u64, new: u64) -> Result<(), u64> {
        self.state
            .compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }

    /// Completes one CAR (`all`: every outstanding CAR) and sets `flags`. Returns whether this
    /// call completed the request; a complete request gives [`RequestError::AlreadyComplete`],
    /// and so does a request a failure is completing, or whose last CAR another call reserved.
    /// The error, if any, is the free callback's (it runs here when the user already freed the
    /// request).
    #[inline]
    pub(crate) fn complete_cars(
        self: &Arc<Self>,
        all: bool,
        flags: u64,
    ) -> Result<bool, RequestError> {
        let mut s = self.load();
        let mut backoff = Backoff::default();
        let new = loop {
            if state::count(s) == 0 {
                return Err(RequestError::AlreadyComplete);
            }
            if s & (FAILING | SETTLING) != 0 {
                if s & FAILING != 0 {
                    // The failure completes every CAR: it came first.
                    return Err(RequestError::AlreadyComplete);
                }
                if all {
                    // Let the reserved CAR be counted first (no user code runs meanwhile).
                    backoff.snooze();
                    s = self.load();
                    continue;
                }
                if state::count(s) == 1 {
                    // The last CAR is reserved by another call, which completes the request.
                    return Err(RequestError::AlreadyComplete);
                }
            }
            let new = (if all { s & !COUNT_MASK } else { s - 1 }) | flags;
            match self.cas(s, new) {
                Ok(()) => break new,
                Err(now) => s = now,
            }
        };
        self.counted(new)
    }

    /// After a CAS that left `new` in the state word: the completion's work if it reached 0.
    #[inline]
    fn counted(self: &Arc<Self>, new: u64) -> Result<bool, RequestError> {
        if state::count(new) != 0 {
            return Ok(false);
        }
        if new & WAITING != 0 || state::pins(new) != 0 || state::free_due(new) {
            self.on_complete(new)?;
        }
        Ok(true)
    }

    /// Reserves one outstanding CAR so that its result can be written before it is counted
    /// (by [`Core::settle_car`], which the caller must call next).
    fn reserve_car(&self) -> Result<(), RequestError> {
        let mut s = self.load();
        let mut backoff = Backoff::default();
        loop {
            if state::count(s) == 0 || s & FAILING != 0 {
                return Err(RequestError::AlreadyComplete);
            }
            if s & SETTLING != 0 {
                backoff.snooze();
                s = self.load();
                continue;
            }
            match self.cas(s, s | SETTLING) {
                Ok(()) => return Ok(()),
                Err(now) => s = now,
            }
        }
    }

    /// Counts the CAR reserved by [`Core::reserve_car`]. Returns whether the request is now
    /// complete.
    fn settle_car(self: &Arc<Self>) -> Result<bool, RequestError> {
        // The reservation keeps the count at 1 or more and the SETTLING bit ours: one
        // subtraction clears both without a borrow.
        let new = self.state.fetch_sub(SETTLING + 1, Ordering::AcqRel) - (SETTLING + 1);
        self.counted(new)
    }

    /// Completes one CAR that moved `bytes` bytes; the bytes count only if this CAR is counted
    /// (a CAR that loses a race to a cancellation or a failure adds nothing).
    #[inline]
    pub(crate) fn complete_car(self: &Arc<Self>, bytes: u64) -> Result<bool, RequestError> {
        if bytes == 0 {
            return self.complete_cars(false, 0);
        }
        self.reserve_car()?;
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.settle_car()
    }

    /// Completes one CAR with `error`; the first error is the request's. A CAR that loses the
    /// race for the last count records nothing.
    pub(crate) fn fail_car(self: &Arc<Self>, error: RequestError) -> Result<bool, RequestError> {
        self.reserve_car()?;
        let rejected = self.record_error(error);
        let result = self.settle_car();
        drop(rejected);
        result
    }

    /// Records the first error of the operation; a later one is handed back, for the caller to
    /// drop once its step on the state word is done (dropping it runs user code).
    fn record_error(&self, error: RequestError) -> Option<RequestError> {
        self.error.set(error).err()
    }

    /// The error the operation completed with, if any.
    #[inline]
    pub(crate) fn completion_error(&self) -> Option<&RequestError> {
        self.error.get()
    }

    /// Fails an incomplete request: the cancel callback runs, then the request
    /// completes with `error`. Returns the cancel callback's error, if any.
    ///
    /// The failure is decided before the cancel callback runs: a completion that comes later
    /// (from another thread, or from the cancel callback itself) gets
    /// [`RequestError::AlreadyComplete`]; a failure that comes after a completion gets it and
    /// leaves the request's outcome alone.
    pub(crate) fn fail(self: &Arc<Self>, error: RequestError) -> Result<(), RequestError> {
        self.fail_with(error, true)
    }

    /// [`Core::fail`], with or without the cancel callback.
    fn fail_with(self: &Arc<Self>, error: RequestError, cancel: bool) -> Result<(), RequestError> {
        let mut s = self.load();
        let mut backoff = Backoff::default();
        loop {
            if state::count(s) == 0 || s & FAILING != 0 {
                return Err(RequestError::AlreadyComplete);
            }
            if s & SETTLING != 0 {
                backoff.snooze();
                s = self.load();
                continue;
            }
            match self.cas(s, s | FAILING) {
                Ok(()) => break,
                Err(now) => s = now,
            }
        }
        // A panicking cancel callback still lets the request complete (else every wait on it
        // would block for ever); the panic goes on to the caller afterwards.
        let cancelled = if cancel {
            catch_unwind(AssertUnwindSafe(|| self.body.cancel(self, false)))
        } else {
            Ok(Ok(()))
        };
        let rejected = self.record_error(error);
        let prev = self
            .state
            .fetch_and(!(COUNT_MASK | FAILING), Ordering::AcqRel);
        let freed = self.counted(prev & !(COUNT_MASK | FAILING));
        drop(rejected);
        match cancelled {
            Err(panic) => resume_unwind(panic),
            Ok(cancelled) => {
                freed?;
                cancelled.map_err(|e| RequestError::Cancel(Cause::from(e)))
            }
        }
    }

    /// The last of the request's completing handles is gone. If only they could complete it
    /// (not a class-driven request, whose hooks still can), an incomplete request completes with
    /// [`RequestError::Abandoned`], and a held RELEASE condition is reached (nobody is left to
    /// signal it, and its handlers would otherwise pin the request for ever).
    fn abandon(self: &Arc<Self>) {
        if !self.body.abandonable() {
            return;
        }
        if !self.is_complete() {
            // Nobody can receive an error of the free callback here.
            let _ = self.fail_with(RequestError::Abandoned, false);
        }
        let s = self.load();
        if s & RELEASE_HELD != 0 && s & RELEASE_SIGNALLED == 0 {
            self.release();
        }
    }

    /// Completes the request as cancelled by its operation's owner.
    pub(crate) fn complete_cancelled(self: &Arc<Self>) -> Result<(), RequestError> {
        self.complete_cars(true, CANCELLED).map(|_| ())
    }

    /// What happens once, when the count reaches 0.
    fn on_complete(self: &Arc<Self>, s: u64) -> Result<(), RequestError> {
        if s & WAITING != 0 {
            self.wake();
        }
        if state::pins(s) != 0 {
            handler::fire(self, Condition::Complete);
            if state::is_released(s) {
                handler::fire(self, Condition::Release);
            }
        }
        if state::free_due(s) && self.try_claim_free() {
            return self.run_free();
        }
        Ok(())
    }

    /// Defers the RELEASE condition until [`Core::release`]; only before completion.
    pub(crate) fn hold_release(&self) -> Result<(), RequestError> {
        let mut s = self.load();
        loop {
            if state::is_complete(s) {
                return Err(RequestError::AlreadyComplete);
            }
            match self.cas(s, s | RELEASE_HELD) {
                Ok(()) => return Ok(()),
                Err(now) => s = now,
            }
        }
    }

    /// Signals that all resources of the operation are given back.
    pub(crate) fn release(self: &Arc<Self>) {
        let prev = self.state.fetch_or(RELEASE_SIGNALLED, Ordering::AcqRel);
        let now = prev | RELEASE_SIGNALLED;
        if prev & RELEASE_SIGNALLED == 0
            && state::is_released(now)
            && !state::is_released(prev)
            && state::pins(now) != 0
        {
            handler::fire(self, Condition::Release);
        }
    }

    /// Claims the free callback if it is due; true for exactly one caller.
    pub(crate) fn try_claim_free(&self) -> bool {
        let mut s = self.load();
        while state::free_due(s) {
            match self.cas(s, s | FREE_CLAIMED) {
                Ok(()) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    /// Marks the user's handle given back; claims the free callback too when it is due.
    /// Returns whether this call claimed it.
    #[inline(always)]
    pub(crate) fn release_handle(&self) -> bool {
        let s = self.load();
        if state::is_complete(s) && state::pins(s) == 0 && s & (HANDLE_RELEASED | FREE_CLAIMED) == 0
        {
            // Fast path, a plain store: with the request complete and no handler pinning it,
            // nobody else can change the bits that matter. Other writers at this point are
            // `release` (its bit is meaningless once the request is freed) and nothing else:
            // completion already happened, handle methods need `&mut` or ownership of the one
            // handle we are giving back, and `RequestRef`s only exist while a handler pins the
            // request.
            self.state
                .store(s | HANDLE_RELEASED | FREE_CLAIMED, Ordering::Release);
            return true;
        }
        let mut s = s;
        loop {
            let mut new = s | HANDLE_RELEASED;
            if state::free_due(new) {
                new |= FREE_CLAIMED;
            }
            match self.cas(s, new) {
                Ok(()) => return new & FREE_CLAIMED != 0 && s & FREE_CLAIMED == 0,
                Err(now) => s = now,
            }
        }
    }

    /// Drops one handler pin; runs the free callback when it became due (its error has nowhere
    /// to go and is dropped).
    pub(crate) fn unpin(&self) {
        let s = self.remove_pin();
        if state::free_due(s) && self.try_claim_free() {
            let _ = self.run_free();
        }
    }

    /// Runs the free callback (the caller claimed it).
    #[inline]
    pub(crate) fn run_free(&self) -> Result<(), RequestError> {
        self.body
            .free()
            .map_err(|e| RequestError::Free(Cause::from(e)))
    }

    /// Runs the query callback on a fresh status; the query's error goes in the status's error
    /// field. Only for complete requests.
    #[inline(always)]
    pub(crate) fn query(&self) -> Status {
        let fields = QueryFields::new();
        let result = self.body.query(self, &mut QueryStatus::new(&fields));
        let mut status = fields.status();
        if self.load() & CANCELLED != 0 {
            status.set_cancelled(true);
        }
        if let Err(e) = result {
            status.set_error(Some(RequestError::Query(Cause::from(e))));
        }
        status
    }

    /// The status a completing wait or test reports: query, give the handle back, free (unless
    /// handlers still pin the request). The error field holds the last failing callback's error
    /// (free, then query), else the operation's.
    #[inline(always)]
    pub(crate) fn finalize(&self) -> Status {
        let mut status = self.query();
        if self.release_handle() {
            if let Err(e) = self.run_free() {
                status.set_error(Some(e));
            }
        }
        if status.error().is_none() {
            if let Some(e) = self.completion_error() {
                status.set_error(Some(e.clone()));
            }
        }
        status
    }

    /// The status of a complete request that is not given back (`get_status`, handlers): the
    /// query's, with the query's error, else the operation's, in the error field.
    pub(crate) fn current_status(&self) -> Status {
        let mut status = self.query();
        if status.error().is_none() {
            status.set_error(self.completion_error().cloned());
        }
        status
    }

    /// The status a handler sees: [`Core::current_status`], or an empty one if not complete.
    pub(crate) fn handler_status(&self) -> Status {
        if !self.is_complete() {
            return Status::empty();
        }
        self.current_status()
    }

    /// Calls the cancel callback with whether the request already completed.
    pub(crate) fn cancel(self: &Arc<Self>) -> Result<(), RequestError> {
        let prev = self.state.fetch_or(CANCEL_REQUESTED, Ordering::AcqRel);
        self.body
            .cancel(self, state::is_complete(prev))
            .map_err(|e| RequestError::Cancel(Cause::from(e)))
    }

    /// Adds a waiter to be woken on completion.
    pub(crate) fn register(&self, waiter: &Arc<Waiter>) {
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(waiter));
        self.state.fetch_or(WAITING, Ordering::AcqRel);
    }

    /// Removes a waiter added by [`Core::register`].
    pub(crate) fn unregister(&self, waiter: &Arc<Waiter>) {
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|w| !Arc::ptr_eq(w, waiter));
    }

    fn wake(&self) {
        let waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        for w in waiters.iter() {
            w.notify();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Condition, Deadline, HandlerFn, Request};

    #[test]
    fn a_recycled_request_starts_clean() {
        let (mut first, cars) = Request::message(1);
        let ptr = Arc::as_ptr(first.core().unwrap());
        cars.set_envelope(1, 2);
        cars.fail_car("boom").unwrap();
        first.cancel().unwrap();
        assert!(first.wait().is_err());
        drop(cars);
        // The last handle went away: the next request on this thread reuses the allocation.
        let (mut second, cars) = Request::message(1);
        assert_eq!(Arc::as_ptr(second.core().unwrap()), ptr);
        assert!(!cars.cancel_requested());
        assert_eq!(cars.outstanding(), 1);
        cars.complete_car(3).unwrap();
        let status = second.wait().unwrap();
        assert_eq!(
            (status.source(), status.tag(), status.count()),
            (None, None, 3)
        );
    }

    #[test]
    fn an_empty_body_is_kept_across_reuse_and_the_request_starts_clean() {
        let (mut first, handle) = Request::generalized(());
        let ptr = Arc::as_ptr(first.core().unwrap());
        handle.complete().unwrap();
        drop(handle);
        first.wait().unwrap();
        // Same type of empty body: the pooled request is reused without replacing its body.
        let (mut second, handle) = Request::generalized(());
        let core = second.core().unwrap();
        assert_eq!(Arc::as_ptr(core), ptr);
        assert_eq!(core.body_type, TypeId::of::<crate::greq::GreqBody<()>>());
        assert_eq!(core.outstanding(), 1);
        assert!(second.test().unwrap().is_none());
        handle.complete().unwrap();
        let status = second.wait().unwrap();
        assert_eq!(
            (status.source(), status.tag(), status.count()),
            (None, None, 0)
        );
        assert!(!status.test_cancelled() && status.error().is_none());
    }

    #[test]
    fn a_body_with_drop_glue_is_dropped_when_its_request_is_pooled() {
        use std::sync::atomic::AtomicUsize;
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        struct Noisy;
        impl Drop for Noisy {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::Relaxed);
            }
        }
        impl crate::GrequestOps for Noisy {}
        for round in 1..=3 {
            let (mut request, handle) = Request::generalized(Noisy);
            handle.complete().unwrap();
            request.wait().unwrap();
            assert_eq!(DROPS.load(Ordering::Relaxed), round - 1);
            drop(handle);
            // The last handle is gone: the state was dropped, not kept in the pool.
            assert_eq!(DROPS.load(Ordering::Relaxed), round);
        }
    }

    #[test]
    fn a_failed_request_is_reset_before_reuse() {
        let (mut first, handle) = Request::generalized(());
        handle.fail("boom").unwrap();
        assert!(first.wait().is_err());
        drop(handle);
        let (mut second, handle) = Request::generalized(());
        handle.complete().unwrap();
        assert!(second.wait().is_ok());
    }

    #[test]
    fn a_request_with_handlers_is_not_recycled_while_they_are_pending() {
        let (req, handle) = Request::generalized(());
        let (tx, rx) = std::sync::mpsc::channel();
        req.post_handler(
            Condition::Complete,
            Some(HandlerFn::new(move |_, _| {
                let _ = tx.send(());
            })),
            None,
            Deadline::Ignore,
        )
        .unwrap();
        let core = Arc::clone(req.core().unwrap());
        drop(req);
        handle.complete().unwrap();
        rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap();
        drop(handle);
        // Our clone kept it out of the pool; the state word says freed, not reset.
        assert!(core.load() & FREE_CLAIMED != 0 || state::pins(core.load()) != 0);
    }
}
