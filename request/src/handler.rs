//! Request handlers: a function run when a request reaches a condition, within a
//! deadline, or else a failure function instead.
//!
//! # Where handlers run
//!
//! On the handler thread of this crate (`viaduct-handlers`), started by the first
//! [`post_handler`]: handlers run even while the program calls no agent function, one at a time,
//! in the order their conditions were reached. A handler that blocks delays the ones after it
//! (and may make their deadlines fail). The agent never holds an internal lock while it runs a
//! handler, so a handler may call any agent function: start requests, post handlers, complete,
//! cancel, wait (a wait on a request only another handler can complete would wait for ever).
//! A panicking handler is caught; the thread goes on with the next one. So is a query or free
//! callback that panics on the handler thread: a panicking query makes the status the handler
//! gets report [`RequestError::Query`] (the request failed), a panicking free counts as run.
//!
//! # Deadlines
//!
//! Checked against the monotonic clock ([`Instant`]). [`Deadline::After`] counts from the moment
//! the condition was reached (or the post, if it was reached already); [`Deadline::At`] is an
//! instant: if it passes before the condition is reached, the failure function runs at that
//! instant. [`Deadline::Asap`] and [`Deadline::Ignore`] never fail. Exactly one of handler and
//! failure runs per posting, unless the posting is replaced or removed before it ran. A pending
//! deadline holds the request only while its posting waits: once the handler ran (or the
//! posting was replaced or removed) the request and its state are freed as usual, however far
//! the deadline.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::core::{CoreRef, Shared};
use super::error::{Cause, RequestError};
use super::handle::Request;
use super::state::{self, FREE_CLAIMED, HANDLERS_POSTED, PIN_ONE};
use super::status::Status;

/// The condition of a request a handler waits for.
///
/// ```
/// # use viaduct_request::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::mpsc;
/// let (request, cars) = Request::message(1);
/// let (tx, rx) = mpsc::channel();
/// let done = HandlerFn::new(move |_, status| tx.send(status.count()).unwrap());
/// post_handler(&request, Condition::Complete, Some(done), None, Deadline::Asap)?;
/// cars.complete_car(5)?;
/// assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10))?, 5);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    /// The request completed (for a send: the buffer may be reused).
    Complete,
    /// Every resource of the operation was given back. For a request whose owner did not call
    /// `hold_release`, this is the same moment as completion.
    Release,
}

/// By when a handler must start after its condition is reached.
///
/// ```
/// # use viaduct_request::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// let (request, cars) = Request::message(1);
/// let on_time = HandlerFn::new(|_, _| println!("completed"));
/// let late = HandlerFn::new(|_, _| println!("not started within a second"));
/// let within = Deadline::After(Duration::from_secs(1));
/// post_handler(&request, Condition::Complete, Some(on_time), Some(late), within)?;
/// cars.complete_car(0)?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// As soon as possible (a relative time of zero); never fails.
    Asap,
    /// No deadline (`MPI_TIME_IGNORE`): some time later; never fails.
    Ignore,
    /// Within this long after the condition is reached.
    After(Duration),
    /// By this instant.
    At(Instant),
}

/// A handler or failure function: called with the request and its status.
///
/// ```
/// # use viaduct_request::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let log = HandlerFn::new(|request, status| {
///     println!("complete: {}, {} bytes", request.is_complete(), status.count());
/// });
/// let (request, cars) = Request::message(1);
/// post_handler(&request, Condition::Complete, Some(log), None, Deadline::Ignore)?;
/// cars.complete_car(3)?;
/// # Ok(())
/// # }
/// ```
pub struct HandlerFn(Box<HandlerBody>);

/// The closure inside a [`HandlerFn`].
type HandlerBody = dyn FnOnce(&RequestRef, &Status) + Send + 'static;

impl HandlerFn {
    /// Wraps a closure.
    ///
    /// ```
    /// # use viaduct_request::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let handler = HandlerFn::new(|_request, status| assert!(!status.test_cancelled()));
    /// let (request, cars) = Request::message(1);
    /// post_handler(&request, Condition::Complete, Some(handler), None, Deadline::Asap)?;
    /// cars.complete_car(1)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(f: impl FnOnce(&RequestRef, &Status) + Send + 'static) -> Self {
        HandlerFn(Box::new(f))
    }
}

impl std::fmt::Debug for HandlerFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandlerFn")
    }
}

/// The request a handler runs for. It is valid (can be queried, cancelled, given handlers)
/// until the handler returns: the request is not freed before its handlers ran. Handlers only
/// borrow it, so it cannot outlive them.
///
/// ```compile_fail
/// # use viaduct_request::RequestRef;
/// fn keep(r: &RequestRef) -> RequestRef {
///     r.clone()
/// }
/// ```
pub struct RequestRef {
    core: Shared,
}

impl std::fmt::Debug for RequestRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestRef")
            .field("complete", &self.core.is_complete())
            .finish()
    }
}

impl RequestRef {
    /// Whether the request is complete.
    ///
    /// ```
    /// # use viaduct_request::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (request, cars) = Request::message(1);
    /// let check = HandlerFn::new(|r, _| assert!(r.is_complete()));
    /// post_handler(&request, Condition::Complete, Some(check), None, Deadline::Asap)?;
    /// cars.complete_car(0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_complete(&self) -> bool {
        self.core.is_complete()
    }

    /// The status of the complete request (query runs); `None` if not complete. Like
    /// [`Request::get_status`], a failed request reports its error.
    /// [`RequestError::Freed`] once the free callback ran.
    ///
    /// ```
    /// # use viaduct_request::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (request, cars) = Request::message(1);
    /// let show = HandlerFn::new(|r, _| {
    ///     let status = r.get_status().unwrap().expect("complete");
    ///     assert_eq!(status.count(), 4);
    /// });
    /// post_handler(&request, Condition::Complete, Some(show), None, Deadline::Asap)?;
    /// cars.complete_car(4)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_status(&self) -> Result<Option<Status>, RequestError> {
        if self.core.load() & FREE_CLAIMED != 0 {
            return Err(RequestError::Freed);
        }
        if !self.core.is_complete() {
            return Ok(None);
        }
        self.core.current_status().into_result().map(Some)
    }

    /// Asks for cancellation, like [`Request::cancel`].
    ///
    /// ```
    /// # use viaduct_request::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (first, cars) = Request::message(1);
    /// let (second, _second_cars) = Request::message(1);
    /// let second = std::sync::Mutex::new(second);
    /// // When the first completes, ask for the second to be cancelled (its owner decides).
    /// let stop = HandlerFn::new(move |_, _| {
    ///     let _ = second.lock().unwrap().cancel();
    /// });
    /// post_handler(&first, Condition::Complete, Some(stop), None, Deadline::Asap)?;
    /// cars.complete_car(0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cancel(&self) -> Result<(), RequestError> {
        if self.core.load() & FREE_CLAIMED != 0 {
            return Err(RequestError::Freed);
        }
        self.core.cancel()
    }

    /// Posts a handler on this request, like [`post_handler`].
    ///
    /// ```
    /// # use viaduct_request::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let (request, cars) = Request::message(1);
    /// let chain = HandlerFn::new(|r, _| {
    ///     // A second handler, on the release of the same request.
    ///     let again = HandlerFn::new(|_, _| println!("released"));
    ///     r.post_handler(Condition::Release, Some(again), None, Deadline::Ignore).unwrap();
    /// });
    /// post_handler(&request, Condition::Complete, Some(chain), None, Deadline::Asap)?;
    /// cars.complete_car(0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn post_handler(
        &self,
        condition: Condition,
        handler: Option<HandlerFn>,
        failure: Option<HandlerFn>,
        deadline: Deadline,
    ) -> Result<(), RequestError> {
        post(&self.core, condition, handler, failure, deadline)
    }
}

/// Posts `handler` for `condition` on `request`, to start within `deadline` after the condition
/// is reached; if it cannot, `failure` runs instead (if given).
///
/// A request has at most one handler per condition: a new posting replaces one that has not run
/// yet (which then never runs), and `handler == None` removes it. If the condition is already
/// reached the handler is scheduled at once (or, with a [`Deadline::At`] already past, the
/// failure). Handlers do not consume the request: it can still be waited on or freed, and its
/// free callback waits until its handlers ran. A cancelled request still runs its handlers; their
/// status tells the cancellation. See the [module docs](self) for the thread they run on.
///
/// ```
/// # use viaduct_request::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::mpsc;
/// let (request, cars) = Request::message(1);
/// let (tx, rx) = mpsc::channel();
/// let handler = HandlerFn::new(move |_, s| tx.send(s.count()).unwrap());
/// post_handler(&request, Condition::Complete, Some(handler), None, Deadline::Asap)?;
/// cars.complete_car(8)?;
/// assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(10))?, 8);
/// # Ok(())
/// # }
/// ```
pub fn post_handler(
    request: &Request,
    condition: Condition,
    handler: Option<HandlerFn>,
    failure: Option<HandlerFn>,
    deadline: Deadline,
) -> Result<(), RequestError> {
    request.post_handler(condition, handler, failure, deadline)
}

struct Posting {
    id: u64,
    handler: HandlerFn,
    failure: Option<HandlerFn>,
    deadline: Deadline,
    /// The timer of a [`Deadline::At`] not reached yet, to empty when the posting runs or goes.
    timer: Option<Arc<TimerSlot>>,
}

/// What a pending deadline holds: the request, until the deadline comes or the posting runs,
/// is replaced or is removed (then it is emptied, so that a far deadline does not keep the
/// request and the user's state alive; the empty timer is dropped when it comes due, or when
/// empty timers outnumber live ones).
type TimerSlot = Mutex<Option<CoreRef>>;

/// Empty timers tolerated in the queue before it is compacted (when they also are half of it).
const HOLLOW_TIMERS_KEPT: usize = 64;

/// The handler postings of one request.
#[derive(Default)]
pub(crate) struct HandlerSlots {
    next_id: u64,
    complete: Option<Posting>,
    release: Option<Posting>,
}

impl HandlerSlots {
    fn slot(&mut self, condition: Condition) -> &mut Option<Posting> {
        match condition {
            Condition::Complete => &mut self.complete,
            Condition::Release => &mut self.release,
        }
    }
}

struct Job {
    core: CoreRef,
    posting: Posting,
    reached_at: Instant,
    /// The deadline passed before the condition was reached.
    missed: bool,
}

struct Timer {
    at: Instant,
    seq: u64,
    slot: Arc<TimerSlot>,
    condition: Condition,
    id: u64,
}

impl Timer {
    fn is_hollow(&self) -> bool {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }
}

impl PartialEq for Timer {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timer {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A thread waiting in [`flush_handlers`] until the handler thread reaches its turn.
struct Flush {
    /// Due timers up to this instant run before the flush is answered.
    at: Instant,
    done: Mutex<bool>,
    cv: Condvar,
}

/// An entry of the ready queue.
enum Ready {
    Job(Job),
    Flush(Arc<Flush>),
}

struct Queue {
    ready: VecDeque<Ready>,
    timers: BinaryHeap<Reverse<Timer>>,
    /// Timers emptied since the last compaction (an upper bound).
    hollow: usize,
    next_seq: u64,
}

struct Engine {
    queue: Mutex<Queue>,
    cv: Condvar,
}

static ENGINE: Engine = Engine {
    queue: Mutex::new(Queue {
        ready: VecDeque::new(),
        timers: BinaryHeap::new(),
        hollow: 0,
        next_seq: 0,
    }),
    cv: Condvar::new(),
};

/// Whether the handler thread started (or why not).
static STARTED: OnceLock<Result<(), Cause>> = OnceLock::new();

/// The handler engine, its thread started on first use.
fn engine() -> Result<&'static Engine, RequestError> {
    let started = STARTED.get_or_init(|| {
        std::thread::Builder::new()
            .name(HANDLER_THREAD.into())
            .spawn(|| run_engine(&ENGINE))
            .map(|_| ())
            .map_err(Cause::new)
    });
    match started {
        Ok(()) => Ok(&ENGINE),
        Err(e) => Err(RequestError::HandlerThread(e.clone())),
    }
}

impl Engine {
    fn schedule(&self, job: Job) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.ready.push_back(Ready::Job(job));
        self.cv.notify_one();
    }

    /// Empties the timer of a posting that ran, or was replaced or removed, so that it does not
    /// keep the request (and the user's state) alive until its instant: O(1), plus a compaction
    /// of the queue once empty timers are half of it.
    fn cancel_timer(&self, slot: &TimerSlot) {
        let core = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
        if core.is_none() {
            return;
        }
        {
            let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            q.hollow += 1;
            if q.hollow > HOLLOW_TIMERS_KEPT && q.hollow * 2 > q.timers.len() {
                // Empty timers hold no request: dropping them here runs no user code.
                q.timers.retain(|Reverse(t)| !t.is_hollow());
                q.hollow = 0;
            }
        }
        // The request is let go with no lock held: dropping the last handle drops user state.
        drop(core);
    }

    fn add_timer(&self, at: Instant, slot: Arc<TimerSlot>, condition: Condition, id: u64) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = q.next_seq;
        q.next_seq += 1;
        q.timers.push(Reverse(Timer {
            at,
            seq,
            slot,
            condition,
            id,
        }));
        self.cv.notify_one();
    }
}

/// Waits until every handler (or failure function) whose turn had come when this was called has
/// run: those whose condition was reached, and failures whose [`Deadline::At`] had passed.
/// Handlers posted later, and deadlines still ahead, are not waited for. Returns at once when no
/// handler was ever posted in this process.
///
/// Handlers run one at a time on the handler thread, so this is how a program (or a test) knows
/// that the effects of the handlers it caused are visible, without polling flags and sleeping.
/// It must not be called from a handler (the handler thread would wait for itself): that gives
/// [`RequestError::HandlersPending`] at once.
///
/// # Errors
/// [`RequestError::HandlersPending`] when they have not all run within `timeout` (a handler
/// that blocks holds up the ones after it).
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::time::Duration;
/// use viaduct_request::{
///     Condition, Deadline, HandlerFn, Request, flush_handlers, post_handler,
/// };
///
/// let ran = Arc::new(AtomicBool::new(false));
/// let (request, complete) = Request::generalized(());
/// let flag = Arc::clone(&ran);
/// let handler = HandlerFn::new(move |_, _| flag.store(true, Ordering::SeqCst));
/// post_handler(&request, Condition::Complete, Some(handler), None, Deadline::Asap)?;
/// complete.complete()?;
/// flush_handlers(Duration::from_secs(10))?;
/// assert!(ran.load(Ordering::SeqCst));
/// # Ok::<(), viaduct_request::RequestError>(())
/// ```
pub fn flush_handlers(timeout: Duration) -> Result<(), RequestError> {
    let Some(Ok(())) = STARTED.get() else {
        // No handler thread: nothing was ever posted (or it could not start, and posting
        // reported that).
        return Ok(());
    };
    if std::thread::current().name() == Some(HANDLER_THREAD) {
        return Err(RequestError::HandlersPending {
            waited: Duration::ZERO,
        });
    }
    let flush = Arc::new(Flush {
        at: Instant::now(),
        done: Mutex::new(false),
        cv: Condvar::new(),
    });
    {
        let mut q = ENGINE.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.ready.push_back(Ready::Flush(Arc::clone(&flush)));
        ENGINE.cv.notify_one();
    }
    let done = flush.done.lock().unwrap_or_else(PoisonError::into_inner);
    let (done, _) = flush
        .cv
        .wait_timeout_while(done, timeout, |done| !*done)
        .unwrap_or_else(PoisonError::into_inner);
    if *done {
        Ok(())
    } else {
        Err(RequestError::HandlersPending { waited: timeout })
    }
}

/// The name of the handler thread.
const HANDLER_THREAD: &str = "viaduct-handlers";

/// What the handler thread does next.
enum Work {
    Job(Job),
    Timer(Timer),
}

fn run_engine(engine: &'static Engine) {
    let mut q = engine.queue.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let work = if let Some(item) = q.ready.pop_front() {
            match item {
                Ready::Job(job) => Some(Work::Job(job)),
                Ready::Flush(flush) => match q.timers.peek() {
                    // A deadline that had passed when the flush was asked for runs first.
                    Some(Reverse(t)) if t.at <= flush.at => {
                        let due = q.timers.pop().map(|Reverse(t)| Work::Timer(t));
                        q.ready.push_front(Ready::Flush(flush));
                        due
                    }
                    _ => {
                        *flush.done.lock().unwrap_or_else(PoisonError::into_inner) = true;
                        flush.cv.notify_all();
                        None
                    }
                },
            }
        } else {
            let now = Instant::now();
            match q.timers.peek() {
                Some(Reverse(t)) if t.at <= now => q.timers.pop().map(|Reverse(t)| Work::Timer(t)),
                Some(Reverse(t)) => {
                    let d = t.at - now;
                    q = engine
                        .cv
                        .wait_timeout(q, d)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    None
                }
                None => {
                    q = engine.cv.wait(q).unwrap_or_else(PoisonError::into_inner);
                    None
                }
            }
        };
        let Some(work) = work else {
            continue;
        };
        drop(q);
        // A last guard: whatever user code panics (a destructor of the user's state dropped
        // with the request, say), the thread goes on serving.
        let _ = catch_unwind(AssertUnwindSafe(|| match work {
            Work::Job(job) => run_job(job),
            Work::Timer(t) => fire_timer(t),
        }));
        q = engine.queue.lock().unwrap_or_else(PoisonError::into_inner);
    }
}

fn run_job(job: Job) {
    let Job {
        core,
        posting,
        reached_at,
        missed,
    } = job;
    let now = Instant::now();
    let on_time = !missed
        && match posting.deadline {
            Deadline::Asap | Deadline::Ignore => true,
            Deadline::After(d) => reached_at.checked_add(d).is_none_or(|end| now <= end),
            Deadline::At(t) => now <= t,
        };
    // User code runs at each step below; a panic in any of them must not take the handler
    // thread (and every later handler) down, nor keep the request pinned for ever.
    let status = catch_unwind(AssertUnwindSafe(|| core.handler_status()))
        .unwrap_or_else(|panic| panicked_query(panic.as_ref()));
    let request = RequestRef {
        core: Shared::new(Arc::clone(&core)),
    };
    let Posting {
        handler, failure, ..
    } = posting;
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let (run, unused) = if on_time {
            (Some(handler), failure)
        } else {
            (failure, Some(handler))
        };
        drop(unused);
        if let Some(f) = run {
            (f.0)(&request, &status);
        }
    }));
    let _ = catch_unwind(AssertUnwindSafe(move || drop(request)));
    // The free callback may run here (the request is unpinned); its panic counts as a free.
    let _ = catch_unwind(AssertUnwindSafe(|| core.unpin()));
}

/// The status of a request whose query callback panicked on the handler thread: the request
/// failed with [`RequestError::Query`].
fn panicked_query(panic: &(dyn std::any::Any + Send)) -> Status {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    let mut status = Status::empty();
    status.set_error(Some(RequestError::Query(Cause::new(format!(
        "query callback panicked: {what}"
    )))));
    status
}

fn fire_timer(t: Timer) {
    // Empty: the posting ran, or was replaced or removed, before its deadline.
    let Some(core) = t.slot.lock().unwrap_or_else(PoisonError::into_inner).take() else {
        return;
    };
    let posting = {
        let mut slots = core.handlers.lock().unwrap_or_else(PoisonError::into_inner);
        match slots.as_mut().map(|s| s.slot(t.condition)) {
            Some(slot) if slot.as_ref().is_some_and(|p| p.id == t.id) => slot.take(),
            _ => None,
        }
    };
    if let Some(posting) = posting {
        run_job(Job {
            core,
            posting,
            reached_at: t.at,
            missed: true,
        });
    }
}

/// Schedules the posting for `condition`, which the request just reached.
pub(crate) fn fire(core: &CoreRef, condition: Condition) {
    let posting = {
        let mut slots = core.handlers.lock().unwrap_or_else(PoisonError::into_inner);
        slots.as_mut().and_then(|s| s.slot(condition).take())
    };
    let Some(mut posting) = posting else {
        return;
    };
    if let Some(slot) = posting.timer.take() {
        ENGINE.cancel_timer(&slot);
    }
    // A posting exists, so `post` started the handler thread.
    ENGINE.schedule(Job {
        core: Arc::clone(core),
        posting,
        reached_at: Instant::now(),
        missed: false,
    });
}

fn reached(condition: Condition, s: u64) -> bool {
    match condition {
        Condition::Complete => state::is_complete(s),
        Condition::Release => state::is_released(s),
    }
}

/// What `post` decided under the slot lock, carried out after it.
enum Then {
    Nothing,
    Schedule(Job),
    Timer(Instant, Arc<TimerSlot>, u64),
}

pub(crate) fn post(
    core: &CoreRef,
    condition: Condition,
    handler: Option<HandlerFn>,
    failure: Option<HandlerFn>,
    deadline: Deadline,
) -> Result<(), RequestError> {
    let engine = engine()?;
    let mut guard = core.handlers.lock().unwrap_or_else(PoisonError::into_inner);
    if guard.is_none() {
        // Tells the pool these slots must be cleared before the request is reused.
        core.set_flags(HANDLERS_POSTED);
    }
    let slots = guard.get_or_insert_with(Box::default);
    let old = slots.slot(condition).take();
    let mut unpin = false;
    let mut then = Then::Nothing;
    // A posting refused because the request was freed; dropped after the lock like `old`.
    let mut refused = None;
    match handler {
        None => unpin = old.is_some(),
        Some(handler) => {
            slots.next_id += 1;
            let posting = Posting {
                id: slots.next_id,
                handler,
                failure,
                deadline,
                timer: None,
            };
            // The pin is taken (or kept, when replacing) before the condition is looked at: a
            // completion after this point sees the pin and takes the posting from the slot.
            let s = if old.is_some() {
                core.load()
            } else {
                core.fetch_add(PIN_ONE)
            };
            let now = Instant::now();
            if s & FREE_CLAIMED != 0 {
                unpin = old.is_none();
                refused = Some(posting);
            } else if reached(condition, s) {
                then = Then::Schedule(Job {
                    core: Arc::clone(core),
                    posting,
                    reached_at: now,
                    missed: false,
                });
            } else if let Deadline::At(at) = deadline {
                let id = posting.id;
                let missed = at <= now;
                if missed {
                    then = Then::Schedule(Job {
                        core: Arc::clone(core),
                        posting,
                        reached_at: now,
                        missed,
                    });
                } else {
                    let slot = Arc::new(Mutex::new(Some(Arc::clone(core))));
                    then = Then::Timer(at, Arc::clone(&slot), id);
                    *slots.slot(condition) = Some(Posting {
                        timer: Some(slot),
                        ..posting
                    });
                }
            } else {
                *slots.slot(condition) = Some(posting);
            }
        }
    }
    drop(guard);
    if let Some(slot) = old.as_ref().and_then(|p| p.timer.as_ref()) {
        engine.cancel_timer(slot);
    }
    // User closures are dropped outside the lock: their destructors may call the agent.
    drop(old);
    match then {
        Then::Nothing => {}
        Then::Schedule(job) => engine.schedule(job),
        Then::Timer(at, slot, id) => engine.add_timer(at, slot, condition, id),
    }
    if unpin {
        core.unpin();
    }
    match refused {
        Some(_) => Err(RequestError::Freed),
        None => Ok(()),
    }
}
