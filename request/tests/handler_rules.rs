//! Request handlers (seed 003): conditions, deadlines, failure functions, replacement, and what
//! handlers may do.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use viaduct_request::{
    BoxError, CompleteHandle, Condition, Deadline, GrequestOps, HandlerFn, QueryStatus, Request,
    RequestError, flush_handlers, post_handler,
};

const LONG: Duration = Duration::from_secs(20);

/// A handler that reports `tag` on a channel.
fn report(tx: &Sender<&'static str>, tag: &'static str) -> Option<HandlerFn> {
    let tx = tx.clone();
    Some(HandlerFn::new(move |_, _| {
        let _ = tx.send(tag);
    }))
}

/// Waits for every handler scheduled so far to have run.
fn drain_handlers() {
    flush_handlers(LONG).expect("handlers due ran within 20 s");
}

fn no_more(rx: &Receiver<&'static str>) {
    drain_handlers();
    assert!(rx.try_recv().is_err(), "an unexpected handler ran");
}

#[test]
fn complete_handler_runs_without_anyone_calling_progress() {
    let (tx, rx) = mpsc::channel();
    let (req, handle) = Request::generalized(());
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "done"),
        report(&tx, "failed"),
        Deadline::Ignore,
    )
    .unwrap();
    let t = thread::spawn(move || handle.complete().unwrap());
    // The main thread calls no agent function while it waits.
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "done");
    t.join().unwrap();
    // Handlers do not consume the request: it can still be waited on.
    let mut req = req;
    req.wait().unwrap();
    no_more(&rx);
}

#[test]
fn handler_posted_after_the_condition_is_scheduled_at_once() {
    let (tx, rx) = mpsc::channel();
    let (req, handle) = Request::generalized(());
    handle.complete().unwrap();
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "now"),
        None,
        Deadline::Asap,
    )
    .unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "now");
}

#[test]
fn release_follows_completion_unless_the_owner_holds_it() {
    let (tx, rx) = mpsc::channel();
    let (req, handle) = Request::generalized(());
    post_handler(
        &req,
        Condition::Release,
        report(&tx, "released"),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    handle.complete().unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "released");

    let (req, cars) = Request::message(1);
    cars.hold_release().unwrap();
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "complete"),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    post_handler(
        &req,
        Condition::Release,
        report(&tx, "released"),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    cars.complete_car(1).unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "complete");
    no_more(&rx);
    cars.release();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "released");
    assert!(matches!(
        cars.hold_release(),
        Err(RequestError::AlreadyComplete)
    ));
}

#[test]
fn absolute_deadline_already_past_runs_the_failure() {
    let (tx, rx) = mpsc::channel();
    let (req, handle) = Request::generalized(());
    let past = Instant::now() - Duration::from_millis(1);
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "handler"),
        report(&tx, "failure"),
        Deadline::At(past),
    )
    .unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "failure");
    handle.complete().unwrap();
    no_more(&rx);
}

#[test]
fn absolute_deadline_passing_before_the_condition_runs_the_failure() {
    let (tx, rx) = mpsc::channel();
    let (req, handle) = Request::generalized(());
    let at = Instant::now() + Duration::from_millis(20);
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "handler"),
        report(&tx, "failure"),
        Deadline::At(at),
    )
    .unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "failure");
    assert!(Instant::now() >= at);
    handle.complete().unwrap();
    no_more(&rx);
}

#[test]
fn relative_deadline_that_cannot_be_met_runs_the_failure() {
    // Occupy the handler thread so the next handler cannot start within 1 ms.
    let (tx, rx) = mpsc::channel();
    let (unblock_tx, unblock_rx) = mpsc::channel::<()>();
    let (blocker, bh) = Request::generalized(());
    let started = tx.clone();
    post_handler(
        &blocker,
        Condition::Complete,
        Some(HandlerFn::new(move |_, _| {
            let _ = started.send("blocker");
            let _ = unblock_rx.recv_timeout(LONG);
        })),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    bh.complete().unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "blocker");

    let (req, handle) = Request::generalized(());
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "handler"),
        report(&tx, "failure"),
        Deadline::After(Duration::from_millis(1)),
    )
    .unwrap();
    handle.complete().unwrap();
    thread::sleep(Duration::from_millis(30));
    unblock_tx.send(()).unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "failure");
    no_more(&rx);
}

#[test]
fn met_relative_deadline_runs_the_handler_and_not_the_failure() {
    let (tx, rx) = mpsc::channel();
    let (req, handle) = Request::generalized(());
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "handler"),
        report(&tx, "failure"),
        Deadline::After(LONG),
    )
    .unwrap();
    handle.complete().unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "handler");
    no_more(&rx);
}

#[test]
fn a_new_handler_replaces_the_old_and_none_removes_it() {
    let (tx, rx) = mpsc::channel();
    let (req, handle) = Request::generalized(());
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "old"),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "new"),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    handle.complete().unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "new");
    no_more(&rx);

    let (req, handle) = Request::generalized(());
    post_handler(
        &req,
        Condition::Complete,
        report(&tx, "removed"),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    post_handler(&req, Condition::Complete, None, None, Deadline::Ignore).unwrap();
    handle.complete().unwrap();
    no_more(&rx);
}

#[test]
fn handlers_may_call_any_agent_function() {
    let (tx, rx) = mpsc::channel();
    let (req, handle) = Request::generalized(());
    let inner_tx = tx.clone();
    post_handler(
        &req,
        Condition::Complete,
        Some(HandlerFn::new(move |me, status| {
            // Query the request it runs for, start a request, post a handler on it, complete it.
            assert!(me.is_complete());
            assert!(me.get_status().unwrap().is_some());
            assert!(status.error().is_none());
            let (nested, nh) = Request::generalized(());
            post_handler(
                &nested,
                Condition::Complete,
                report(&inner_tx, "nested"),
                None,
                Deadline::Asap,
            )
            .unwrap();
            nh.complete().unwrap();
            // And post another handler on its own request.
            me.post_handler(
                Condition::Release,
                report(&inner_tx, "release"),
                None,
                Deadline::Asap,
            )
            .unwrap();
            let _ = inner_tx.send("outer");
        })),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    handle.complete().unwrap();
    let mut seen: Vec<_> = (0..3).map(|_| rx.recv_timeout(LONG).unwrap()).collect();
    seen.sort_unstable();
    assert_eq!(seen, ["nested", "outer", "release"]);
}

struct CountFree {
    frees: Arc<AtomicUsize>,
    cancelled: Arc<AtomicBool>,
}

impl GrequestOps for CountFree {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_cancelled(self.cancelled.load(Ordering::SeqCst));
        status.set_count(5);
        Ok(())
    }
    fn free(&self) -> Result<(), BoxError> {
        self.frees.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn cancel(&self, _complete: bool, _: &CompleteHandle) -> Result<(), BoxError> {
        self.cancelled.store(true, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn request_is_not_freed_until_its_handlers_ran() {
    let frees = Arc::new(AtomicUsize::new(0));
    let (req, handle) = Request::generalized(CountFree {
        frees: Arc::clone(&frees),
        cancelled: Arc::new(AtomicBool::new(false)),
    });
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (tx, rx) = mpsc::channel();
    let seen_frees = Arc::clone(&frees);
    post_handler(
        &req,
        Condition::Complete,
        Some(HandlerFn::new(move |me, status| {
            let _ = go_rx.recv_timeout(LONG);
            // The user waited on (and so freed) the request before this ran: still valid.
            assert_eq!(seen_frees.load(Ordering::SeqCst), 0);
            assert_eq!(me.get_status().unwrap().unwrap().count(), 5);
            assert_eq!(status.count(), 5);
            let _ = tx.send("handler");
        })),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    handle.complete().unwrap();
    let mut req = req;
    assert_eq!(req.wait().unwrap().count(), 5);
    assert_eq!(
        frees.load(Ordering::SeqCst),
        0,
        "free waits for the handler"
    );
    go_tx.send(()).unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), "handler");
    drain_handlers();
    // The free ran right after the handler, on the handler thread.
    let deadline = Instant::now() + LONG;
    while frees.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(frees.load(Ordering::SeqCst), 1);
}

#[test]
fn a_cancelled_request_still_runs_its_handlers_and_they_see_it() {
    let (tx, rx) = mpsc::channel();
    let frees = Arc::new(AtomicUsize::new(0));
    let (req, handle) = Request::generalized(CountFree {
        frees: Arc::clone(&frees),
        cancelled: Arc::new(AtomicBool::new(false)),
    });
    post_handler(
        &req,
        Condition::Complete,
        Some(HandlerFn::new(move |_, status| {
            let _ = tx.send(status.test_cancelled());
        })),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    req.cancel().unwrap();
    req.free().unwrap();
    handle.complete().unwrap();
    assert!(
        rx.recv_timeout(LONG).unwrap(),
        "handler saw the cancellation"
    );
    let deadline = Instant::now() + LONG;
    while frees.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        frees.load(Ordering::SeqCst),
        1,
        "freed exactly once, after the handler"
    );
}

#[test]
fn a_panicking_handler_does_not_stop_later_handlers() {
    let (req, handle) = Request::generalized(());
    post_handler(
        &req,
        Condition::Complete,
        Some(HandlerFn::new(|_, _| panic!("handler panics on purpose"))),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    handle.complete().unwrap();
    drain_handlers();
}

#[test]
fn exactly_one_of_handler_and_failure_runs_per_posting() {
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..50usize {
        let (req, handle) = Request::generalized(());
        let (a, b) = (Arc::clone(&ran), Arc::clone(&ran));
        let deadline = if i % 2 == 0 {
            Deadline::At(Instant::now() - Duration::from_millis(1))
        } else {
            Deadline::Asap
        };
        post_handler(
            &req,
            Condition::Complete,
            Some(HandlerFn::new(move |_, _| a.lock().unwrap().push((i, "h")))),
            Some(HandlerFn::new(move |_, _| b.lock().unwrap().push((i, "f")))),
            deadline,
        )
        .unwrap();
        drop(req);
        handles.push(handle);
    }
    for h in &handles {
        h.complete().unwrap();
    }
    drain_handlers();
    let mut ran = ran.lock().unwrap().clone();
    ran.sort_unstable();
    assert_eq!(ran.len(), 50);
    for (i, (id, which)) in ran.iter().enumerate() {
        assert_eq!(*id, i);
        assert_eq!(*which, if i % 2 == 0 { "f" } else { "h" });
    }
}

#[test]
fn posting_on_a_null_request_is_an_error() {
    let req = Request::null();
    assert!(matches!(
        post_handler(&req, Condition::Complete, None, None, Deadline::Ignore),
        Err(RequestError::Null)
    ));
}

#[test]
fn free_runs_once_after_handlers_under_racing_free_complete_and_handler() {
    let frees = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicUsize::new(0));
    // Miri interprets each step: fewer rounds there (its scheduler varies the order).
    const N: usize = if cfg!(miri) { 20 } else { 300 };
    for _ in 0..N {
        let (req, handle) = Request::generalized(CountFree {
            frees: Arc::clone(&frees),
            cancelled: Arc::new(AtomicBool::new(false)),
        });
        let r = Arc::clone(&ran);
        post_handler(
            &req,
            Condition::Complete,
            Some(HandlerFn::new(move |me, _| {
                assert!(me.get_status().is_ok(), "not freed while its handler runs");
                r.fetch_add(1, Ordering::SeqCst);
            })),
            None,
            Deadline::Asap,
        )
        .unwrap();
        let t = thread::spawn(move || handle.complete().unwrap());
        req.free().unwrap();
        t.join().unwrap();
    }
    drain_handlers();
    let deadline = Instant::now() + LONG;
    while frees.load(Ordering::SeqCst) < N && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(ran.load(Ordering::SeqCst), N);
    assert_eq!(frees.load(Ordering::SeqCst), N);
}

#[test]
fn flush_waits_for_handlers_whose_condition_was_reached() {
    let ran = Arc::new(AtomicUsize::new(0));
    let mut requests = Vec::new();
    for _ in 0..3 {
        let (req, h) = Request::generalized(());
        let n = Arc::clone(&ran);
        let slow = HandlerFn::new(move |_, _| {
            thread::sleep(Duration::from_millis(100));
            n.fetch_add(1, Ordering::SeqCst);
        });
        post_handler(
            &req,
            Condition::Complete,
            Some(slow),
            None,
            Deadline::Ignore,
        )
        .unwrap();
        h.complete().unwrap();
        requests.push(req);
    }
    flush_handlers(LONG).unwrap();
    assert_eq!(
        ran.load(Ordering::SeqCst),
        3,
        "flush returned before the handlers ran"
    );
}

#[test]
fn flush_runs_failures_whose_deadline_passed_and_leaves_later_ones() {
    let (tx, rx) = mpsc::channel();
    let (due, _due_h) = Request::generalized(());
    post_handler(
        &due,
        Condition::Complete,
        report(&tx, "due handler"),
        report(&tx, "due failure"),
        Deadline::At(Instant::now()),
    )
    .unwrap();
    let (later, _later_h) = Request::generalized(());
    post_handler(
        &later,
        Condition::Complete,
        report(&tx, "later handler"),
        report(&tx, "later failure"),
        Deadline::At(Instant::now() + Duration::from_secs(3600)),
    )
    .unwrap();
    flush_handlers(LONG).unwrap();
    assert_eq!(rx.try_recv(), Ok("due failure"));
    assert!(
        rx.try_recv().is_err(),
        "a deadline an hour ahead was waited for"
    );
}

#[test]
fn flush_times_out_behind_a_blocked_handler_and_refuses_the_handler_thread() {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let (from_handler_tx, from_handler_rx) = mpsc::channel();
    let (req, h) = Request::generalized(());
    let blocker = HandlerFn::new(move |_, _| {
        // On the handler thread a flush cannot wait for itself: an error at once.
        let _ = from_handler_tx.send(flush_handlers(LONG));
        let _ = release_rx.lock().unwrap().recv_timeout(LONG);
    });
    post_handler(
        &req,
        Condition::Complete,
        Some(blocker),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    h.complete().unwrap();
    let inside = from_handler_rx.recv_timeout(LONG).unwrap();
    match inside {
        Err(RequestError::HandlersPending { waited }) => assert_eq!(waited, Duration::ZERO),
        other => panic!("a flush on the handler thread gave {other:?}"),
    }
    let started = Instant::now();
    let e = flush_handlers(Duration::from_millis(200)).unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(started.elapsed() < LONG, "the flush did not give up");
    release_tx.send(()).unwrap();
    flush_handlers(LONG).unwrap();
}
