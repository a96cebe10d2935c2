//! The semantics of MPICH's generalized request tests (`pt2pt/greq1`, `threads/pt2pt/greq_wait`,
//! `threads/pt2pt/greq_test`) and of `pt2pt/rqstatus`, on viaduct's requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread;
use std::time::Duration;

use viaduct_request::{
    BoxError, CompleteHandle, GrequestOps, QueryStatus, Request, test_all, test_some, wait_all,
    wait_some,
};

mod watchdog;
use watchdog::watchdog;
/// greq1's callbacks: query sets a default status; free decrements the counter in the state.
struct Greq1 {
    counter: Option<Arc<AtomicI32>>,
}

impl GrequestOps for Greq1 {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_source(None);
        status.set_tag(None);
        status.set_cancelled(false);
        status.set_count(0);
        Ok(())
    }
    fn free(&self) -> Result<(), BoxError> {
        if let Some(c) = &self.counter {
            c.fetch_sub(1, Ordering::SeqCst);
        }
        Ok(())
    }
}

#[test]
fn greq1_test_before_complete_then_wait() {
    let (mut request, handle) = Request::generalized(Greq1 { counter: None });
    assert!(
        request.test().unwrap().is_none(),
        "generalized request marked as complete"
    );
    handle.complete().unwrap();
    let status = request.wait().unwrap();
    assert_eq!(status.source(), None);
    assert!(!status.test_cancelled());

    let counter = Arc::new(AtomicI32::new(1));
    let (mut request, handle) = Request::generalized(Greq1 {
        counter: Some(Arc::clone(&counter)),
    });
    handle.complete().unwrap();
    let _ = request.wait().unwrap(); // status ignored
    assert_eq!(
        counter.load(Ordering::SeqCst),
        0,
        "free routine not called, or not called with its state"
    );
}

/// `do_work` of greq_wait/greq_test: sleep a little, then complete through a copy of the handle.
fn complete_later(handle: CompleteHandle) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        handle.complete().unwrap();
    })
}

#[test]
fn greq_wait_thread_completes_while_main_waits() {
    let _w = watchdog(30);
    let (mut request, handle) = Request::generalized(Greq1 { counter: None });
    let t = complete_later(handle);
    request.wait().unwrap();
    t.join().unwrap();

    let (request, handle) = Request::generalized(Greq1 { counter: None });
    let t = complete_later(handle);
    let mut reqs = vec![request];
    let mut indices = Vec::new();
    let mut statuses = Vec::new();
    wait_some(&mut reqs, &mut indices, Some(&mut statuses)).unwrap();
    assert_eq!(indices, [0]);
    t.join().unwrap();

    let (request, handle) = Request::generalized(Greq1 { counter: None });
    let t = complete_later(handle);
    let mut reqs = vec![request];
    let mut statuses = Vec::new();
    wait_all(&mut reqs, Some(&mut statuses)).unwrap();
    assert!(reqs[0].is_null());
    t.join().unwrap();
}

#[test]
fn greq_test_thread_completes_while_main_polls() {
    let _w = watchdog(30);
    let (mut request, handle) = Request::generalized(Greq1 { counter: None });
    let t = complete_later(handle);
    while request.test().unwrap().is_none() {
        thread::yield_now();
    }
    t.join().unwrap();

    let (request, handle) = Request::generalized(Greq1 { counter: None });
    let t = complete_later(handle);
    let mut reqs = vec![request];
    let mut indices = Vec::new();
    while indices.is_empty() {
        test_some(&mut reqs, &mut indices, None).unwrap();
        thread::yield_now();
    }
    t.join().unwrap();

    let (request, handle) = Request::generalized(Greq1 { counter: None });
    let t = complete_later(handle);
    let mut reqs = vec![request];
    let mut statuses = Vec::new();
    while !test_all(&mut reqs, Some(&mut statuses)).unwrap() {
        thread::yield_now();
    }
    t.join().unwrap();
}

#[test]
fn rqstatus_get_status_of_null_and_of_a_received_message() {
    let _w = watchdog(30);
    // get_status on the null request: complete, empty status (also with the status ignored).
    let null = Request::null();
    let status = null.get_status().unwrap().expect("null counts as complete");
    assert_eq!((status.source(), status.tag()), (None, None));
    assert!(status.error().is_none());
    assert!(null.get_status().unwrap().is_some());

    // A "receive" of 2 ints from rank 0 with tag 10, completed by the method's thread.
    let (mut req, cars) = Request::message(1);
    let sender = thread::spawn(move || {
        cars.set_envelope(0, 10);
        cars.complete_car(2 * 4).unwrap();
    });
    sender.join().unwrap();
    let status = req.get_status().unwrap().expect("complete");
    assert_eq!(status.tag(), Some(10));
    assert_eq!(status.source(), Some(0));
    assert_eq!(status.count() / 4, 2);
    // get_status did not free: the request can still be waited on, with the same status.
    let status2 = req.wait().unwrap();
    assert_eq!(
        (status2.source(), status2.tag(), status2.count()),
        (Some(0), Some(10), 8)
    );
}
