//! One test per rule of the MPI-2 `MPI_Grequest_start` contract (seed 004).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use viaduct_request::{
    AnyOutcome, BoxError, CompleteHandle, GrequestOps, QueryStatus, Request, RequestError, Status,
    test_all, test_any, test_some, wait_all, wait_any, wait_some,
};

mod watchdog;
use watchdog::watchdog;

/// What the callbacks saw, in order.
#[derive(Default)]
struct Log {
    events: Mutex<Vec<String>>,
    frees: AtomicUsize,
    queries: AtomicUsize,
    /// Set while free runs: the request must still be valid.
    in_free: AtomicBool,
}

impl Log {
    fn push(&self, e: impl Into<String>) {
        self.events.lock().unwrap().push(e.into());
    }
    fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }
}

struct Ops {
    log: Arc<Log>,
    source: u32,
    count: u64,
    cancelled_by_query: Arc<AtomicBool>,
    query_error: Option<&'static str>,
    free_error: Option<&'static str>,
    cancel_error: Option<&'static str>,
}

impl Ops {
    fn new(log: &Arc<Log>) -> Self {
        Ops {
            log: Arc::clone(log),
            source: 3,
            count: 42,
            cancelled_by_query: Arc::new(AtomicBool::new(false)),
            query_error: None,
            free_error: None,
            cancel_error: None,
        }
    }
}

impl GrequestOps for Ops {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        // The status handed to query is always a valid, fresh one.
        assert!(status.status().error().is_none());
        self.log.queries.fetch_add(1, Ordering::SeqCst);
        self.log.push("query");
        status.set_source(Some(self.source));
        status.set_tag(Some(7));
        status.set_count(self.count);
        status.set_cancelled(self.cancelled_by_query.load(Ordering::SeqCst));
        match self.query_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    fn free(&self) -> Result<(), BoxError> {
        self.log.in_free.store(true, Ordering::SeqCst);
        self.log.frees.fetch_add(1, Ordering::SeqCst);
        self.log.push("free");
        self.log.in_free.store(false, Ordering::SeqCst);
        match self.free_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    fn cancel(&self, complete: bool, _: &CompleteHandle) -> Result<(), BoxError> {
        self.log.push(format!("cancel({complete})"));
        self.cancelled_by_query.store(true, Ordering::SeqCst);
        match self.cancel_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}

fn cause(e: &RequestError) -> String {
    match e {
        RequestError::Query(c) | RequestError::Free(c) | RequestError::Cancel(c) => c.to_string(),
        other => other.to_string(),
    }
}

#[test]
fn query_runs_only_after_complete() {
    let _w = watchdog(20);
    let log = Arc::new(Log::default());
    let (mut req, handle) = Request::generalized(Ops::new(&log));
    assert!(req.get_status().unwrap().is_none());
    assert!(req.test().unwrap().is_none());
    assert!(log.events().is_empty(), "no callback before complete");
    handle.complete().unwrap();
    let status = req.wait().unwrap();
    assert_eq!(log.events(), ["query", "free"]);
    assert_eq!(status.source(), Some(3));
    assert_eq!(status.count(), 42);
}

#[test]
fn query_runs_in_the_completing_wait_and_test() {
    let log = Arc::new(Log::default());
    let (mut req, handle) = Request::generalized(Ops::new(&log));
    handle.complete().unwrap();
    assert!(log.events().is_empty(), "complete alone runs no query");
    let status = req.test().unwrap().expect("complete");
    assert_eq!(status.tag(), Some(7));
    assert_eq!(log.events(), ["query", "free"]);
    assert!(req.is_null());

    let log = Arc::new(Log::default());
    let mut reqs: Vec<Request> = (0..3)
        .map(|_| {
            let (r, h) = Request::generalized(Ops::new(&log));
            h.complete().unwrap();
            r
        })
        .collect();
    let mut statuses = Vec::new();
    wait_all(&mut reqs, Some(&mut statuses)).unwrap();
    assert_eq!(
        log.queries.load(Ordering::SeqCst),
        3,
        "one query per request"
    );
    assert!(statuses.iter().all(|s| s.count() == 42));
}

#[test]
fn get_status_runs_query_each_time_once_complete() {
    let log = Arc::new(Log::default());
    let (mut req, handle) = Request::generalized(Ops::new(&log));
    handle.complete().unwrap();
    for i in 1..=3 {
        let s = req.get_status().unwrap().expect("complete");
        assert_eq!(s.source(), Some(3));
        assert_eq!(log.queries.load(Ordering::SeqCst), i);
    }
    assert_eq!(
        log.frees.load(Ordering::SeqCst),
        0,
        "get_status never frees"
    );
    assert!(!req.is_null());
    req.wait().unwrap();
    assert_eq!(log.queries.load(Ordering::SeqCst), 4);
    assert_eq!(log.frees.load(Ordering::SeqCst), 1);
}

#[test]
fn ignored_status_still_gets_a_valid_status_to_fill() {
    let log = Arc::new(Log::default());
    let mut reqs: Vec<Request> = (0..2)
        .map(|_| {
            let (r, h) = Request::generalized(Ops::new(&log));
            h.complete().unwrap();
            r
        })
        .collect();
    // `query` asserts that its status is valid and fresh; statuses are ignored here.
    wait_all(&mut reqs, None).unwrap();
    let (r, h) = Request::generalized(Ops::new(&log));
    h.complete().unwrap();
    let mut reqs = vec![r];
    let mut indices = Vec::new();
    wait_some(&mut reqs, &mut indices, None).unwrap();
    assert_eq!(indices, [0]);
    assert_eq!(log.queries.load(Ordering::SeqCst), 3);
    assert_eq!(log.frees.load(Ordering::SeqCst), 3);
}

#[test]
fn test_on_incomplete_request_returns_false_and_runs_no_callback() {
    let log = Arc::new(Log::default());
    let (a, ha) = Request::generalized(Ops::new(&log));
    let (b, hb) = Request::generalized(Ops::new(&log));
    let mut reqs = vec![a, b];
    let mut one = Request::null();
    std::mem::swap(&mut one, &mut reqs[0]);
    assert!(one.test().unwrap().is_none());
    std::mem::swap(&mut one, &mut reqs[0]);
    assert!(test_any(&mut reqs).is_pending());
    let mut indices = vec![9];
    test_some(&mut reqs, &mut indices, None).unwrap();
    assert!(indices.is_empty());
    assert!(!test_all(&mut reqs, None).unwrap());
    // test_all with one of two complete completes neither.
    ha.complete().unwrap();
    assert!(!test_all(&mut reqs, None).unwrap());
    assert!(log.events().is_empty());
    hb.complete().unwrap();
    assert!(test_all(&mut reqs, None).unwrap());
    assert_eq!(log.frees.load(Ordering::SeqCst), 2);
}

#[test]
fn free_runs_after_query_in_the_completing_call() {
    let log = Arc::new(Log::default());
    let (mut req, handle) = Request::generalized(Ops::new(&log));
    handle.complete().unwrap();
    assert_eq!(
        log.frees.load(Ordering::SeqCst),
        0,
        "complete alone does not free"
    );
    req.wait().unwrap();
    assert_eq!(log.events(), ["query", "free"]);

    let log = Arc::new(Log::default());
    let (r, h) = Request::generalized(Ops::new(&log));
    h.complete().unwrap();
    let mut reqs = vec![Request::null(), r];
    let (i, result) = wait_any(&mut reqs).completed().expect("one active");
    assert_eq!(i, 1);
    result.unwrap();
    assert_eq!(log.events(), ["query", "free"]);
}

#[test]
fn user_freed_request_frees_in_complete_when_complete_comes_last() {
    let log = Arc::new(Log::default());
    let (req, handle) = Request::generalized(Ops::new(&log));
    req.free().unwrap();
    assert_eq!(log.frees.load(Ordering::SeqCst), 0, "not complete yet");
    // The handle is the user's copy: still valid after free, until the free callback ran.
    handle.complete().unwrap();
    assert_eq!(log.events(), ["free"], "free in complete, and no query");
    assert!(handle.is_complete());
}

#[test]
fn user_freed_request_frees_in_free_when_free_comes_last() {
    let log = Arc::new(Log::default());
    let (req, handle) = Request::generalized(Ops::new(&log));
    handle.complete().unwrap();
    assert_eq!(log.frees.load(Ordering::SeqCst), 0);
    req.free().unwrap();
    assert_eq!(log.events(), ["free"]);
    // Dropping a request is freeing it.
    let log = Arc::new(Log::default());
    let (req, handle) = Request::generalized(Ops::new(&log));
    drop(req);
    handle.complete().unwrap();
    assert_eq!(log.frees.load(Ordering::SeqCst), 1);
}

#[test]
fn free_runs_exactly_once_under_racing_free_and_complete() {
    let _w = watchdog(30);
    let log = Arc::new(Log::default());
    // Miri interprets each thread start: fewer rounds there (its scheduler varies the order).
    let rounds = if cfg!(miri) { 20 } else { 2000 };
    for _ in 0..rounds {
        let (req, handle) = Request::generalized(Ops::new(&log));
        let t = thread::spawn(move || handle.complete().unwrap());
        req.free().unwrap();
        t.join().unwrap();
    }
    assert_eq!(log.frees.load(Ordering::SeqCst), rounds);
}

#[test]
fn request_is_not_deallocated_before_free_returns() {
    struct Holds {
        alive: Arc<AtomicBool>,
        freed: Arc<AtomicBool>,
    }
    impl GrequestOps for Holds {
        fn free(&self) -> Result<(), BoxError> {
            // Still inside the request: its state is alive.
            assert!(self.alive.load(Ordering::SeqCst));
            thread::sleep(Duration::from_millis(5));
            self.freed.store(true, Ordering::SeqCst);
            Ok(())
        }
    }
    impl Drop for Holds {
        fn drop(&mut self) {
            // The state (MPI's extra_state) is dropped only after free returned.
            assert!(self.freed.load(Ordering::SeqCst));
            self.alive.store(false, Ordering::SeqCst);
        }
    }
    let alive = Arc::new(AtomicBool::new(true));
    let freed = Arc::new(AtomicBool::new(false));
    let (req, handle) = Request::generalized(Holds {
        alive: Arc::clone(&alive),
        freed: Arc::clone(&freed),
    });
    req.free().unwrap();
    handle.complete().unwrap();
    assert!(freed.load(Ordering::SeqCst));
    drop(handle);
    assert!(
        !alive.load(Ordering::SeqCst),
        "state dropped with the last handle"
    );
}

#[test]
fn cancel_passes_complete_false_before_and_true_after_complete() {
    let log = Arc::new(Log::default());
    let (mut req, handle) = Request::generalized(Ops::new(&log));
    req.cancel().unwrap();
    handle.complete().unwrap();
    req.cancel().unwrap();
    let status = req.wait().unwrap();
    assert_eq!(
        log.events(),
        ["cancel(false)", "cancel(true)", "query", "free"]
    );
    assert!(status.test_cancelled());
}

/// What the completion from a cancel callback returned.
type Completion = Arc<Mutex<Option<Result<(), RequestError>>>>;

/// A request whose operation stops only when cancelled: its cancel callback completes the
/// request with the handle it is given, so the state holds no handle of its own request.
struct StopsOnCancel {
    cancelled: AtomicBool,
    /// Completes from another thread, through a clone of the handle, when set.
    later: bool,
    /// Set when the state is dropped.
    dropped: Arc<AtomicBool>,
    /// What the completion from the cancel callback returned.
    completion: Completion,
}

impl GrequestOps for StopsOnCancel {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_cancelled(self.cancelled.load(Ordering::SeqCst));
        Ok(())
    }
    fn cancel(&self, complete: bool, handle: &CompleteHandle) -> Result<(), BoxError> {
        if complete {
            *self.completion.lock().unwrap() = Some(handle.complete());
            return Ok(());
        }
        self.cancelled.store(true, Ordering::SeqCst);
        if self.later {
            let handle = handle.clone();
            let completion = Arc::clone(&self.completion);
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                *completion.lock().unwrap() = Some(handle.complete());
            });
        } else {
            *self.completion.lock().unwrap() = Some(handle.complete());
        }
        Ok(())
    }
}

impl Drop for StopsOnCancel {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

fn stops_on_cancel(later: bool) -> (StopsOnCancel, Arc<AtomicBool>, Completion) {
    let dropped = Arc::new(AtomicBool::new(false));
    let completion = Arc::new(Mutex::new(None));
    let ops = StopsOnCancel {
        cancelled: AtomicBool::new(false),
        later,
        dropped: Arc::clone(&dropped),
        completion: Arc::clone(&completion),
    };
    (ops, dropped, completion)
}

#[test]
fn cancel_callback_completes_its_own_request_without_a_handle_in_the_state() {
    for later in [false, true] {
        let (ops, dropped, completion) = stops_on_cancel(later);
        // The operation's handle: held by whatever runs it, never by the state.
        let (mut req, operation) = Request::generalized(ops);
        assert!(req.test().unwrap().is_none());
        req.cancel().unwrap();
        let status = req.wait().unwrap();
        assert!(status.test_cancelled(), "later: {later}");
        assert!(operation.is_complete());
        // The thread of `later` records what `complete` returned only after it returned,
        // which is when `wait` may already have woken: give it a moment (bounded).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while completion.lock().unwrap().is_none() && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        assert!(
            matches!(*completion.lock().unwrap(), Some(Ok(()))),
            "later: {later}"
        );
        // A cancel on a complete request: the handle it gets says so.
        let (ops2, dropped2, completion2) = stops_on_cancel(false);
        let (mut done, h2) = Request::generalized(ops2);
        h2.complete().unwrap();
        done.cancel().unwrap();
        assert!(matches!(
            *completion2.lock().unwrap(),
            Some(Err(RequestError::AlreadyComplete))
        ));
        done.wait().unwrap();
        drop(h2);
        assert!(dropped2.load(Ordering::SeqCst));
        // No cycle: the state goes once the request and the operation's handle are gone (the
        // clone of the later completion is dropped by its thread).
        drop(req);
        drop(operation);
        let t0 = std::time::Instant::now();
        while !dropped.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_secs(10) {
            thread::sleep(Duration::from_millis(5));
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "the state leaked (later: {later})"
        );
    }
}

#[test]
fn a_cancel_with_no_handle_left_is_abandoned_not_hung() {
    // The operation's handle dropped before the cancel: the request was abandoned then, and the
    // handle the cancel callback gets finds it complete.
    let (ops, dropped, completion) = stops_on_cancel(false);
    let (mut req, operation) = Request::generalized(ops);
    drop(operation);
    req.cancel().unwrap();
    assert!(matches!(
        *completion.lock().unwrap(),
        Some(Err(RequestError::AlreadyComplete))
    ));
    assert!(matches!(req.wait(), Err(RequestError::Abandoned)));
    drop(req);
    assert!(dropped.load(Ordering::SeqCst));
}

#[test]
fn test_cancelled_reports_what_query_set() {
    let log = Arc::new(Log::default());
    let (mut req, handle) = Request::generalized(Ops::new(&log));
    handle.complete().unwrap();
    assert!(!req.wait().unwrap().test_cancelled());

    let ops = Ops::new(&log);
    let flag = Arc::clone(&ops.cancelled_by_query);
    let (mut req, handle) = Request::generalized(ops);
    flag.store(true, Ordering::SeqCst);
    handle.complete().unwrap();
    assert!(req.wait().unwrap().test_cancelled(), "query said cancelled");
}

#[test]
fn callback_error_is_the_call_error() {
    let log = Arc::new(Log::default());
    let mut ops = Ops::new(&log);
    ops.query_error = Some("query broke");
    let (mut req, handle) = Request::generalized(ops);
    handle.complete().unwrap();
    let e = req.get_status().unwrap_err();
    assert!(matches!(e, RequestError::Query(_)));
    let e = req.wait().unwrap_err();
    assert!(matches!(e, RequestError::Query(_)));
    assert_eq!(cause(&e), "query broke");
    assert_eq!(log.frees.load(Ordering::SeqCst), 1, "free still runs");

    let mut ops = Ops::new(&log);
    ops.cancel_error = Some("cancel broke");
    let (req, handle) = Request::generalized(ops);
    let e = req.cancel().unwrap_err();
    assert!(matches!(e, RequestError::Cancel(_)));
    assert_eq!(cause(&e), "cancel broke");
    handle.complete().unwrap();

    // A user-freed request: the free error surfaces in the call that ran free.
    let mut ops = Ops::new(&log);
    ops.free_error = Some("free broke");
    let (req, handle) = Request::generalized(ops);
    req.free().unwrap();
    let e = handle.complete().unwrap_err();
    assert!(matches!(e, RequestError::Free(_)));
}

#[test]
fn free_error_wins_when_wait_runs_both_callbacks() {
    let log = Arc::new(Log::default());
    let mut ops = Ops::new(&log);
    ops.query_error = Some("query broke");
    ops.free_error = Some("free broke");
    let (mut req, handle) = Request::generalized(ops);
    handle.complete().unwrap();
    let e = req.wait().unwrap_err();
    assert!(matches!(e, RequestError::Free(_)), "{e:?}");
    assert_eq!(cause(&e), "free broke");

    let mut ops = Ops::new(&log);
    ops.query_error = Some("query broke");
    ops.free_error = Some("free broke");
    let (r, h) = Request::generalized(ops);
    h.complete().unwrap();
    let mut reqs = vec![r];
    let (_, result) = test_any(&mut reqs).completed().expect("complete");
    assert_eq!(cause(&result.unwrap_err()), "free broke");
}

#[test]
fn some_and_all_report_error_in_status() {
    let log = Arc::new(Log::default());
    let make = |free_error: Option<&'static str>, query_error: Option<&'static str>| {
        let mut ops = Ops::new(&log);
        ops.free_error = free_error;
        ops.query_error = query_error;
        let (r, h) = Request::generalized(ops);
        h.complete().unwrap();
        r
    };
    let mut reqs = vec![
        make(None, None),
        make(Some("free 1"), None),
        make(None, Some("query 2")),
    ];
    let mut statuses = Vec::new();
    let e = wait_all(&mut reqs, Some(&mut statuses)).unwrap_err();
    assert!(matches!(e, RequestError::InStatus { failed: 2 }));
    assert!(statuses[0].error().is_none());
    assert_eq!(cause(statuses[1].error().unwrap()), "free 1");
    assert_eq!(cause(statuses[2].error().unwrap()), "query 2");

    let mut reqs = vec![make(None, None), make(Some("free 1"), None)];
    let mut indices = Vec::new();
    let mut statuses = Vec::new();
    let e = wait_some(&mut reqs, &mut indices, Some(&mut statuses)).unwrap_err();
    assert!(matches!(e, RequestError::InStatus { failed: 1 }));
    assert_eq!(indices, [0, 1]);
    assert!(statuses[0].error().is_none());
    assert_eq!(cause(statuses[1].error().unwrap()), "free 1");

    // Ignored statuses: the result still says "error in status".
    let mut reqs = vec![make(Some("free"), None)];
    let e = test_some(&mut reqs, &mut indices, None).unwrap_err();
    assert!(matches!(e, RequestError::InStatus { failed: 1 }));
    assert_eq!(indices, [0]);
    // test_all with an error.
    let mut reqs = vec![make(None, Some("q")), make(None, None)];
    let mut statuses = Vec::new();
    let e = test_all(&mut reqs, Some(&mut statuses)).unwrap_err();
    assert!(matches!(e, RequestError::InStatus { failed: 1 }));
    assert!(statuses[0].error().is_some() && statuses[1].error().is_none());
}

#[test]
fn complete_twice_is_an_error_not_a_second_completion() {
    let log = Arc::new(Log::default());
    let (mut req, handle) = Request::generalized(Ops::new(&log));
    handle.complete().unwrap();
    assert!(matches!(
        handle.complete(),
        Err(RequestError::AlreadyComplete)
    ));
    req.wait().unwrap();
    assert!(matches!(
        handle.complete(),
        Err(RequestError::AlreadyComplete)
    ));
    assert_eq!(log.frees.load(Ordering::SeqCst), 1);
}

#[test]
fn statuses_follow_one_rule_in_all_four_calls() {
    // Whatever the vector held before, each call clears it and pushes the statuses of the
    // requests it completed: wait_all/test_all one per request (null ones empty), wait_some/
    // test_some one per index.
    let junk = || vec![Status::empty(); 5];
    let (a, ha) = Request::generalized(());
    let (b, hb) = Request::generalized(());
    let mut reqs = vec![a, Request::null(), b];
    let mut statuses = junk();
    assert!(!test_all(&mut reqs, Some(&mut statuses)).unwrap());
    assert!(statuses.is_empty(), "nothing completed: {statuses:?}");
    ha.complete().unwrap();
    let mut indices = Vec::new();
    let mut statuses = junk();
    test_some(&mut reqs, &mut indices, Some(&mut statuses)).unwrap();
    assert_eq!(
        (indices.as_slice(), statuses.len()),
        ([0usize].as_slice(), 1)
    );
    let mut statuses = junk();
    test_some(&mut reqs, &mut indices, Some(&mut statuses)).unwrap();
    assert!(indices.is_empty() && statuses.is_empty());
    hb.complete().unwrap();
    let mut statuses = junk();
    wait_some(&mut reqs, &mut indices, Some(&mut statuses)).unwrap();
    assert_eq!(
        (indices.as_slice(), statuses.len()),
        ([2usize].as_slice(), 1)
    );

    let (a, ha) = Request::generalized(());
    let mut reqs = vec![Request::null(), a];
    ha.complete().unwrap();
    let mut statuses = junk();
    assert!(test_all(&mut reqs, Some(&mut statuses)).unwrap());
    assert_eq!(statuses.len(), 2);
    let mut statuses = junk();
    wait_all(&mut reqs, Some(&mut statuses)).unwrap();
    assert_eq!(statuses.len(), 2, "null requests get an empty status each");
    assert!(
        statuses
            .iter()
            .all(|s| s.count() == 0 && s.error().is_none())
    );
    let mut statuses = junk();
    wait_all(&mut [], Some(&mut statuses)).unwrap();
    assert!(statuses.is_empty());
}

#[test]
fn test_any_tells_nothing_completed_from_all_null() {
    let log = Arc::new(Log::default());
    let (a, ha) = Request::generalized(Ops::new(&log));
    let mut reqs = vec![Request::null(), a, Request::null()];
    // Active but incomplete: pending, nothing runs.
    assert!(test_any(&mut reqs).is_pending());
    assert!(!test_any(&mut reqs).is_all_null());
    assert!(log.events().is_empty());
    ha.complete().unwrap();
    match test_any(&mut reqs) {
        AnyOutcome::Completed(1, Ok(_)) => {}
        other => panic!("expected request 1 to complete, got {other:?}"),
    }
    // Every request null now: not pending.
    assert!(reqs.iter().all(Request::is_null));
    let outcome = test_any(&mut reqs);
    assert!(
        outcome.is_all_null() && !outcome.is_pending(),
        "{outcome:?}"
    );
    assert!(outcome.completed().is_none());
    assert!(wait_any(&mut reqs).is_all_null());
    assert!(test_any(&mut []).is_all_null());
}

#[test]
fn null_requests_are_complete_with_an_empty_status() {
    let mut r = Request::null();
    let s = r.wait().unwrap();
    assert_eq!((s.source(), s.tag(), s.count()), (None, None, 0));
    assert!(s.error().is_none() && !s.test_cancelled());
    assert!(r.get_status().unwrap().is_some());
    let mut reqs = vec![Request::null(), Request::null()];
    assert!(wait_any(&mut reqs).is_all_null());
    assert!(test_any(&mut reqs).is_all_null());
    assert!(wait_any(&mut []).is_all_null());
    let mut indices = vec![1];
    wait_some(&mut reqs, &mut indices, None).unwrap();
    assert!(indices.is_empty());
    assert!(matches!(r.cancel(), Err(RequestError::Null)));
}
