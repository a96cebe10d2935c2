//! Hardening of the request layer: every request completes exactly once (also on failure), the
//! first completion decides its outcome, `get_status` agrees with `wait`, waits stay within their
//! bounds, and the handler thread survives user callbacks that panic.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use viaduct_request::{
    BoxError, ClassOps, ClassRequest, CompleteHandle, Condition, Deadline, GrequestOps, HandlerFn,
    QueryStatus, Request, RequestClass, RequestError, wait_any,
};

mod watchdog;
use watchdog::watchdog;

/// Waits up to `limit` for `cond` to hold; returns whether it did.
fn eventually(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(5));
    }
    cond()
}

/// A handler that reports, through a channel, that it ran and what its status said.
fn reporting_handler(tx: mpsc::Sender<bool>) -> HandlerFn {
    HandlerFn::new(move |_, status| {
        let _ = tx.send(status.error().is_some());
    })
}

// ---- 10: get_status agrees with wait on a failed request -------------------------------------

#[test]
fn get_status_reports_the_error_of_a_failed_generalized_request() {
    let _w = watchdog(30);
    let (mut req, handle) = Request::generalized(());
    handle.fail("device lost").unwrap();
    // Reported at every call, and the request stays valid.
    for _ in 0..2 {
        assert!(matches!(req.get_status(), Err(RequestError::Operation(_))));
        assert!(!req.is_null());
    }
    assert!(matches!(req.wait(), Err(RequestError::Operation(_))));
    assert!(req.is_null());
}

#[test]
fn get_status_reports_the_error_of_a_failed_car() {
    let _w = watchdog(30);
    let (mut req, cars) = Request::message(2);
    cars.complete_car(8).unwrap();
    assert!(req.get_status().unwrap().is_none());
    cars.fail_car("link down").unwrap();
    assert!(matches!(req.get_status(), Err(RequestError::Operation(_))));
    assert!(matches!(req.wait(), Err(RequestError::Operation(_))));
}

#[test]
fn a_handler_sees_the_error_through_get_status_too() {
    let _w = watchdog(30);
    let (req, handle) = Request::generalized(());
    let (tx, rx) = mpsc::channel();
    req.post_handler(
        Condition::Complete,
        Some(HandlerFn::new(move |r, status| {
            let _ = tx.send((status.error().is_some(), r.get_status().is_err()));
        })),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    handle.fail("boom").unwrap();
    let (in_status, in_get_status) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(in_status && in_get_status);
    drop(req);
}

// ---- 11: the first completion decides ----------------------------------------------------------

#[test]
fn complete_then_fail_gives_already_complete_and_the_wait_succeeds() {
    let _w = watchdog(30);
    let (mut req, handle) = Request::generalized(());
    handle.complete().unwrap();
    assert!(matches!(
        handle.fail("late"),
        Err(RequestError::AlreadyComplete)
    ));
    assert!(req.wait().is_ok());

    let (mut req, cars) = Request::message(1);
    cars.complete_car(4).unwrap();
    assert!(matches!(
        cars.fail_car("late"),
        Err(RequestError::AlreadyComplete)
    ));
    assert_eq!(req.wait().unwrap().count(), 4);
}

#[test]
fn a_completion_during_fail_does_not_make_both_win() {
    let _w = watchdog(30);
    let completed: Arc<Mutex<Option<Result<(), RequestError>>>> = Arc::new(Mutex::new(None));
    /// Its cancel callback completes the request: a completion that lands while `fail` runs.
    struct CompletesInCancel {
        completed: Arc<Mutex<Option<Result<(), RequestError>>>>,
    }
    impl GrequestOps for CompletesInCancel {
        fn cancel(&self, _complete: bool, handle: &CompleteHandle) -> Result<(), BoxError> {
            *self.completed.lock().unwrap() = Some(handle.complete());
            Ok(())
        }
    }
    let (mut req, handle) = Request::generalized(CompletesInCancel {
        completed: Arc::clone(&completed),
    });
    let failed = handle.fail("boom");
    let completed = completed.lock().unwrap().take().unwrap();
    // Exactly one of them completed the request, and the wait reports that one's outcome.
    assert_ne!(
        failed.is_ok(),
        completed.is_ok(),
        "{failed:?} {completed:?}"
    );
    let waited = req.wait();
    if completed.is_ok() {
        assert!(
            waited.is_ok(),
            "complete() won but the wait reports {waited:?}"
        );
    } else {
        assert!(matches!(waited, Err(RequestError::Operation(_))));
    }
}

/// A cancel callback that takes a little time, so that a completion from another thread can
/// land while `fail` runs.
struct SlowCancel;

impl GrequestOps for SlowCancel {
    fn cancel(&self, _complete: bool, _: &CompleteHandle) -> Result<(), BoxError> {
        for _ in 0..200 {
            std::hint::spin_loop();
        }
        thread::yield_now();
        Ok(())
    }
}

/// Runs `rounds` rounds of `a` and `b` racing on two threads; `check` gets both results.
fn race<S: Send + Sync + 'static, A, B>(
    rounds: usize,
    setup: impl Fn() -> S,
    a: A,
    b: B,
    mut check: impl FnMut(S, bool, bool),
) where
    A: Fn(&S) -> bool + Send + Sync + 'static,
    B: Fn(&S) -> bool + Send + Sync + 'static,
{
    let barrier = Arc::new(Barrier::new(2));
    let (to_b, b_rx) = mpsc::channel::<Option<Arc<S>>>();
    let (b_tx, from_b) = mpsc::channel::<bool>();
    let bb = Arc::clone(&barrier);
    let worker = thread::spawn(move || {
        while let Ok(Some(s)) = b_rx.recv() {
            bb.wait();
            let result = b(&s);
            // Given back before the answer, so that the main thread owns the state again.
            drop(s);
            let _ = b_tx.send(result);
        }
    });
    // Miri interprets every step: a few dozen rounds there (its scheduler varies the order).
    let rounds = if cfg!(miri) { rounds.min(25) } else { rounds };
    for _ in 0..rounds {
        let s = Arc::new(setup());
        to_b.send(Some(Arc::clone(&s))).unwrap();
        barrier.wait();
        let ra = a(&s);
        let rb = from_b.recv_timeout(Duration::from_secs(20)).unwrap();
        let s = Arc::into_inner(s).unwrap_or_else(|| panic!("state still shared"));
        check(s, ra, rb);
    }
    to_b.send(None).unwrap();
    worker.join().unwrap();
}

#[test]
fn fail_racing_complete_never_taints_the_winner() {
    let _w = watchdog(60);
    let mut fail_won = 0;
    race(
        20_000,
        || {
            let (req, handle) = Request::generalized(SlowCancel);
            (Mutex::new(req), handle)
        },
        |(_, h)| h.complete().is_ok(),
        |(_, h)| h.fail("lost").is_ok(),
        |(req, _), completed, failed| {
            assert_ne!(completed, failed, "exactly one completion must succeed");
            let waited = req.into_inner().unwrap().wait();
            if completed {
                assert!(waited.is_ok(), "complete() won, the wait says {waited:?}");
            } else {
                fail_won += 1;
                assert!(matches!(waited, Err(RequestError::Operation(_))));
            }
        },
    );
    eprintln!("fail won {fail_won} of 2000 rounds");
}

#[test]
fn fail_car_racing_complete_car_never_taints_the_winner() {
    let _w = watchdog(60);
    race(
        20_000,
        || {
            let (req, cars) = Request::message(1);
            (Mutex::new(req), cars)
        },
        |(_, c)| c.complete_car(16).is_ok(),
        |(_, c)| c.fail_car("lost").is_ok(),
        |(req, _), completed, failed| {
            assert_ne!(completed, failed, "exactly one CAR completion must succeed");
            let waited = req.into_inner().unwrap().wait();
            if completed {
                assert_eq!(waited.unwrap().count(), 16);
            } else {
                assert!(matches!(waited, Err(RequestError::Operation(_))));
            }
        },
    );
}

#[test]
fn complete_cancelled_racing_complete_car_reports_only_the_winner() {
    let _w = watchdog(60);
    race(
        20_000,
        || {
            let (req, cars) = Request::message(1);
            (Mutex::new(req), cars)
        },
        |(_, c)| c.complete_car(16).is_ok(),
        |(_, c)| c.complete_cancelled().is_ok(),
        |(req, _), completed, cancelled| {
            assert_ne!(completed, cancelled, "exactly one completion must succeed");
            let status = req.into_inner().unwrap().wait().unwrap();
            if completed {
                assert!(!status.test_cancelled());
                assert_eq!(status.count(), 16);
            } else {
                assert!(status.test_cancelled());
                assert_eq!(status.count(), 0, "a losing CAR's bytes were counted");
            }
        },
    );
}

/// A class whose poll hook always fails: the failure races a completion through the handle.
struct FailingPoll;

impl ClassOps for FailingPoll {
    type State = ();
    fn cancel(&self, _: &(), _complete: bool) -> Result<(), BoxError> {
        thread::yield_now();
        Ok(())
    }
    fn poll(&self, _: &ClassRequest<'_, ()>) -> Result<(), BoxError> {
        Err("device error".into())
    }
}

#[test]
fn hook_failure_racing_an_outside_completion_never_taints_the_winner() {
    let _w = watchdog(60);
    let class = RequestClass::new(FailingPoll);
    race(
        20_000,
        || {
            let (req, handle) = class.start(());
            (Mutex::new(req), handle)
        },
        |(_, h)| h.complete().is_ok(),
        |(req, _)| {
            // One poll pass: the hook fails, and fails the request unless it is complete.
            let _ = req.lock().unwrap().get_status();
            true
        },
        |(req, _), completed, _| {
            let waited = req.into_inner().unwrap().wait();
            if completed {
                assert!(waited.is_ok(), "complete() won, the wait says {waited:?}");
            } else {
                assert!(matches!(waited, Err(RequestError::Poll(_))));
            }
        },
    );
}

// ---- 12: the default wait hook polls at adaptive intervals ----------------------------------

#[derive(Default)]
struct CountingPoll {
    polls: AtomicUsize,
}

impl ClassOps for CountingPoll {
    type State = ();
    fn poll(&self, _: &ClassRequest<'_, ()>) -> Result<(), BoxError> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn the_default_wait_hook_backs_off_instead_of_spinning() {
    let _w = watchdog(30);
    let class = RequestClass::new(CountingPoll::default());
    let (mut req, handle) = class.start(());
    let t0 = Instant::now();
    assert!(
        req.wait_timeout(Duration::from_millis(300))
            .unwrap()
            .is_none()
    );
    assert!(t0.elapsed() >= Duration::from_millis(300));
    let polls = class.ops().polls.load(Ordering::Relaxed);
    assert!(polls > 1, "the wait must poll ({polls} polls)");
    assert!(polls < 5_000, "a 300 ms wait made {polls} poll calls");

    // A completion by another thread still ends the wait promptly.
    let completer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        let at = Instant::now();
        handle.complete().unwrap();
        at
    });
    req.wait().unwrap();
    let done = Instant::now();
    let completed_at = completer.join().unwrap();
    assert!(
        done.duration_since(completed_at) < Duration::from_secs(2),
        "the wait saw the completion {:?} late",
        done.duration_since(completed_at)
    );
}

#[test]
fn a_mixed_array_with_a_default_wait_hook_does_not_spin_either() {
    let _w = watchdog(30);
    let class = RequestClass::new(CountingPoll::default());
    let (req, _handle) = class.start(());
    let (other, done) = Request::generalized(());
    let mut reqs = [req, other];
    let completer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        done.complete().unwrap();
    });
    let (index, result) = wait_any(&mut reqs).completed().unwrap();
    completer.join().unwrap();
    assert_eq!(index, 1);
    result.unwrap();
    let polls = class.ops().polls.load(Ordering::Relaxed);
    assert!(polls < 5_000, "a 300 ms wait_any made {polls} poll calls");
}

// ---- 13: a far deadline does not keep a finished request alive ------------------------------

static FAR_DROPS: AtomicUsize = AtomicUsize::new(0);

struct CountsDrops(&'static AtomicUsize);

impl Drop for CountsDrops {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl GrequestOps for CountsDrops {}

#[test]
fn a_far_deadline_frees_the_request_once_its_handler_ran() {
    let _w = watchdog(30);
    let (req, handle) = Request::generalized(CountsDrops(&FAR_DROPS));
    let (tx, rx) = mpsc::channel();
    req.post_handler(
        Condition::Complete,
        Some(reporting_handler(tx)),
        None,
        Deadline::At(Instant::now() + Duration::from_secs(3600)),
    )
    .unwrap();
    handle.complete().unwrap();
    assert!(!rx.recv_timeout(Duration::from_secs(20)).unwrap());
    drop(req);
    drop(handle);
    assert!(
        eventually(Duration::from_secs(10), || FAR_DROPS.load(Ordering::SeqCst)
            == 1),
        "the request's state is still alive after its handler ran"
    );
}

static REMOVED_DROPS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn a_removed_posting_with_a_far_deadline_does_not_keep_the_request_alive() {
    let _w = watchdog(30);
    let (req, handle) = Request::generalized(CountsDrops(&REMOVED_DROPS));
    let (tx, _rx) = mpsc::channel();
    let far = Deadline::At(Instant::now() + Duration::from_secs(3600));
    req.post_handler(Condition::Release, Some(reporting_handler(tx)), None, far)
        .unwrap();
    // Removed before it ran: it never runs, and its timer must not hold the request.
    req.post_handler(Condition::Release, None, None, far)
        .unwrap();
    handle.complete().unwrap();
    drop(req);
    drop(handle);
    assert!(
        eventually(Duration::from_secs(10), || REMOVED_DROPS
            .load(Ordering::SeqCst)
            == 1),
        "the request's state is still alive after its posting was removed"
    );
}

// ---- 14: a panicking callback on the handler thread ----------------------------------------

struct PanickingQuery;

impl GrequestOps for PanickingQuery {
    fn query(&self, _: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        panic!("query callback panics (on purpose)");
    }
}

struct PanickingFree;

impl GrequestOps for PanickingFree {
    fn free(&self) -> Result<(), BoxError> {
        panic!("free callback panics (on purpose)");
    }
}

/// Posts an ASAP handler on a fresh request, completes it, and waits for the handler.
fn handler_still_runs() -> bool {
    let (req, handle) = Request::generalized(());
    let (tx, rx) = mpsc::channel();
    req.post_handler(
        Condition::Complete,
        Some(reporting_handler(tx)),
        None,
        Deadline::Asap,
    )
    .unwrap();
    handle.complete().unwrap();
    let ran = rx.recv_timeout(Duration::from_secs(10)).is_ok();
    drop(req);
    ran
}

#[test]
fn a_panicking_query_fails_its_request_and_later_handlers_still_run() {
    let _w = watchdog(60);
    let (req, handle) = Request::generalized(PanickingQuery);
    let (tx, rx) = mpsc::channel();
    req.post_handler(
        Condition::Complete,
        Some(reporting_handler(tx)),
        None,
        Deadline::Asap,
    )
    .unwrap();
    handle.complete().unwrap();
    // The handler runs with the request failed.
    assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap());
    // Given back without a wait (a wait would run the query on this thread).
    req.free().unwrap();
    assert!(handler_still_runs(), "the handler thread stopped");
}

static PANIC_FREE_DROPS: AtomicUsize = AtomicUsize::new(0);

/// A panicking free callback on state whose drop is counted.
struct PanickingFreeCounted {
    _drops: CountsDrops,
}

impl GrequestOps for PanickingFreeCounted {
    fn free(&self) -> Result<(), BoxError> {
        PanickingFree.free()
    }
}

#[test]
fn a_panicking_free_on_the_handler_thread_does_not_stop_it() {
    let _w = watchdog(60);
    let (req, handle) = Request::generalized(PanickingFreeCounted {
        _drops: CountsDrops(&PANIC_FREE_DROPS),
    });
    let (tx, rx) = mpsc::channel();
    req.post_handler(
        Condition::Complete,
        Some(reporting_handler(tx)),
        None,
        Deadline::Asap,
    )
    .unwrap();
    // Freed before completion: the free callback runs on the handler thread, after the handler.
    req.free().unwrap();
    handle.complete().unwrap();
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    drop(handle);
    assert!(handler_still_runs(), "the handler thread stopped");
    assert!(
        eventually(Duration::from_secs(10), || PANIC_FREE_DROPS
            .load(Ordering::SeqCst)
            == 1),
        "the request's state was never dropped"
    );
}

// ---- 15: an abandoned generalized request ----------------------------------------------------

#[derive(Default)]
struct Frees(AtomicUsize);

struct CountsFrees(Arc<Frees>);

impl GrequestOps for CountsFrees {
    fn free(&self) -> Result<(), BoxError> {
        self.0.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn dropping_the_last_complete_handle_completes_with_abandoned() {
    let _w = watchdog(30);
    let frees = Arc::new(Frees::default());
    let (mut req, handle) = Request::generalized(CountsFrees(Arc::clone(&frees)));
    let copy = handle.clone();
    drop(handle);
    // Another handle is left: the request is still in progress.
    assert!(req.test().unwrap().is_none());
    let dropper = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        drop(copy);
    });
    let got = req.wait_timeout(Duration::from_secs(10));
    dropper.join().unwrap();
    assert!(
        matches!(got, Err(RequestError::Abandoned)),
        "the wait gave {got:?}"
    );
    assert_eq!(frees.0.load(Ordering::SeqCst), 1);
}

#[test]
fn an_abandoned_request_runs_its_handlers_and_reports_to_get_status() {
    let _w = watchdog(30);
    let (req, handle) = Request::generalized(());
    let (tx, rx) = mpsc::channel();
    req.post_handler(
        Condition::Complete,
        Some(reporting_handler(tx)),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    drop(handle);
    assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap());
    assert!(matches!(req.get_status(), Err(RequestError::Abandoned)));
}

#[test]
fn dropping_a_handle_of_a_complete_request_changes_nothing() {
    let _w = watchdog(30);
    let (mut req, handle) = Request::generalized(());
    handle.complete().unwrap();
    drop(handle);
    assert!(req.wait().is_ok());
}

// ---- panics in callbacks on the caller's thread --------------------------------------------

/// A class whose poll hook fails and whose cancel callback (run before the failure completes the
/// request) panics.
struct PanickingCancel;

impl ClassOps for PanickingCancel {
    type State = ();
    fn cancel(&self, _: &(), _complete: bool) -> Result<(), BoxError> {
        panic!("cancel callback panics (on purpose)");
    }
    fn poll(&self, _: &ClassRequest<'_, ()>) -> Result<(), BoxError> {
        Err("device error".into())
    }
}

#[test]
fn a_panicking_cancel_during_a_hook_failure_still_completes_the_request() {
    let _w = watchdog(30);
    let class = RequestClass::new(PanickingCancel);
    let (mut req, _handle) = class.start(());
    // The panic reaches the caller whose test ran the hook...
    let tested = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| req.test()));
    assert!(tested.is_err());
    // ...and the request is complete all the same, with the hook's error: no wait hangs on it.
    assert!(req.is_complete());
    let got = req.wait_timeout(Duration::from_secs(5));
    assert!(matches!(got, Err(RequestError::Poll(_))), "{got:?}");
}

#[test]
fn a_query_panicking_in_a_wait_still_frees_the_request_once() {
    let _w = watchdog(30);
    struct Ops(Arc<Frees>);
    impl GrequestOps for Ops {
        fn query(&self, _: &mut QueryStatus<'_>) -> Result<(), BoxError> {
            panic!("query callback panics (on purpose)");
        }
        fn free(&self) -> Result<(), BoxError> {
            self.0.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }
    let frees = Arc::new(Frees::default());
    let (mut req, handle) = Request::generalized(Ops(Arc::clone(&frees)));
    handle.complete().unwrap();
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| req.wait()));
    assert!(waited.is_err());
    assert!(req.is_null());
    assert_eq!(
        frees.0.load(Ordering::SeqCst),
        1,
        "free must run exactly once"
    );
    drop(handle);
    assert_eq!(frees.0.load(Ordering::SeqCst), 1);
}

#[test]
fn dropping_the_last_handle_reaches_a_held_release() {
    let _w = watchdog(30);
    let frees = Arc::new(Frees::default());
    let (req, handle) = Request::generalized(CountsFrees(Arc::clone(&frees)));
    handle.hold_release().unwrap();
    let (tx, rx) = mpsc::channel();
    req.post_handler(
        Condition::Release,
        Some(reporting_handler(tx)),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    handle.complete().unwrap();
    req.free().unwrap();
    // Completed, the user's handle given back, but the owner never signalled release: when its
    // last handle goes nobody can, so the RELEASE handler runs then and the request is freed.
    drop(handle);
    assert!(!rx.recv_timeout(Duration::from_secs(10)).unwrap());
    assert!(
        eventually(Duration::from_secs(10), || frees.0.load(Ordering::SeqCst)
            == 1),
        "the request was never freed"
    );
}

#[test]
fn dropping_the_last_car_counter_completes_with_abandoned() {
    let _w = watchdog(30);
    let (mut req, cars) = Request::message(2);
    let copy = cars.clone();
    cars.complete_car(3).unwrap();
    drop(cars);
    assert!(req.test().unwrap().is_none());
    drop(copy);
    let got = req.wait_timeout(Duration::from_secs(10));
    assert!(
        matches!(got, Err(RequestError::Abandoned)),
        "the wait gave {got:?}"
    );
}

#[test]
fn a_class_request_is_not_abandoned_while_its_hooks_can_complete_it() {
    let _w = watchdog(30);
    struct CompletesOnPoll;
    impl ClassOps for CompletesOnPoll {
        type State = ();
        fn poll(&self, r: &ClassRequest<'_, ()>) -> Result<(), BoxError> {
            r.complete().map_err(Into::into)
        }
    }
    let class = RequestClass::new(CompletesOnPoll);
    let (mut req, handle) = class.start(());
    drop(handle);
    assert!(!req.is_complete());
    assert!(req.wait_timeout(Duration::from_secs(10)).unwrap().is_some());
}

/// An error whose destructor completes another CAR of its own request (user code that runs when
/// a later error is dropped because the request already has one).
#[derive(Debug)]
struct FailsAgainOnDrop(Mutex<Option<viaduct_request::CarCounter>>);

impl std::fmt::Display for FailsAgainOnDrop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("second failure")
    }
}

impl std::error::Error for FailsAgainOnDrop {}

impl Drop for FailsAgainOnDrop {
    fn drop(&mut self) {
        if let Some(cars) = self.0.lock().unwrap().take() {
            let _ = cars.fail_car("third failure");
        }
    }
}

#[test]
fn a_dropped_later_error_may_call_back_into_its_request() {
    let _w = watchdog(30);
    let (mut req, cars) = Request::message(2);
    cars.fail_car("first failure").unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let again = FailsAgainOnDrop(Mutex::new(Some(cars.clone())));
        let _ = tx.send(cars.fail_car(again));
    });
    let done = rx.recv_timeout(Duration::from_secs(10));
    assert!(
        matches!(done, Ok(Ok(true))),
        "the second failure gave {done:?}"
    );
    let got = req.wait_timeout(Duration::from_secs(10));
    assert!(matches!(got, Err(RequestError::Operation(_))), "{got:?}");
}

static MANY_DROPS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn many_far_deadlines_free_their_requests_and_a_near_one_still_fails_on_time() {
    let _w = watchdog(60);
    const N: usize = 300;
    let far = Deadline::At(Instant::now() + Duration::from_secs(3600));
    let (tx, rx) = mpsc::channel();
    let mut handles = Vec::new();
    for _ in 0..N {
        let (req, handle) = Request::generalized(CountsDrops(&MANY_DROPS));
        req.post_handler(
            Condition::Complete,
            Some(reporting_handler(tx.clone())),
            None,
            far,
        )
        .unwrap();
        req.free().unwrap();
        handles.push(handle);
    }
    // A near deadline queued behind the far ones still fails at its instant.
    let (late, late_handle) = Request::generalized(());
    let (ftx, frx) = mpsc::channel();
    late.post_handler(
        Condition::Complete,
        Some(HandlerFn::new(|_, _| {})),
        Some(HandlerFn::new(move |_, _| {
            let _ = ftx.send(());
        })),
        Deadline::At(Instant::now() + Duration::from_millis(50)),
    )
    .unwrap();
    for handle in handles {
        handle.complete().unwrap();
    }
    for _ in 0..N {
        rx.recv_timeout(Duration::from_secs(20)).unwrap();
    }
    assert!(
        eventually(Duration::from_secs(20), || MANY_DROPS
            .load(Ordering::SeqCst)
            == N),
        "{} of {N} requests freed",
        MANY_DROPS.load(Ordering::SeqCst)
    );
    frx.recv_timeout(Duration::from_secs(20)).unwrap();
    drop((late, late_handle));
}

// ---- a mixed wait sees a completion within one hook round ------------------------------------

/// Class A: its wait hook completes a generalized request of the same wait (as a device that
/// finishes another operation would), then returns.
struct CompletesOther(Mutex<Option<CompleteHandle>>);

impl ClassOps for CompletesOther {
    type State = ();
    fn poll(&self, _: &ClassRequest<'_, ()>) -> Result<(), BoxError> {
        Ok(())
    }
    fn wait(&self, _: &[ClassRequest<'_, ()>], _: Duration) -> Result<(), BoxError> {
        if let Some(h) = self.0.lock().unwrap().take() {
            h.complete()?;
        }
        Ok(())
    }
}

/// Class B: its wait hook blocks for its whole timeout, and counts the calls made after the
/// generalized request (seen through a handle of it) completed.
struct BlocksFully(CompleteHandle, AtomicUsize);

impl ClassOps for BlocksFully {
    type State = ();
    fn poll(&self, _: &ClassRequest<'_, ()>) -> Result<(), BoxError> {
        Ok(())
    }
    fn wait(&self, _: &[ClassRequest<'_, ()>], timeout: Duration) -> Result<(), BoxError> {
        if self.0.is_complete() {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
        thread::sleep(timeout);
        Ok(())
    }
}

#[test]
fn a_mixed_wait_enters_no_further_hook_once_satisfied() {
    let _w = watchdog(30);
    let (greq, done) = Request::generalized(());
    let b = RequestClass::new(BlocksFully(done.clone(), AtomicUsize::new(0)));
    let a = RequestClass::new(CompletesOther(Mutex::new(Some(done))));
    let (ra, _ha) = a.start(());
    let (rb, _hb) = b.start(());
    let mut reqs = [ra, rb, greq];
    let (index, result) = wait_any(&mut reqs).completed().unwrap();
    assert_eq!(index, 2);
    result.unwrap();
    assert_eq!(
        b.ops().1.load(Ordering::SeqCst),
        0,
        "a wait hook was entered after the wait was satisfied"
    );
}
