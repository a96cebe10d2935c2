//! Message requests: a counter of outstanding CARs, completed by other threads, mixed with
//! generalized requests in one array.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use viaduct_request::{
    BoxError, ProgressDriver, Request, RequestError, wait_all, wait_any, wait_some,
};

mod watchdog;
use watchdog::watchdog;
#[test]
fn request_completes_when_its_last_car_completes() {
    let (mut req, cars) = Request::message(3);
    cars.set_envelope(5, 9);
    assert!(!cars.complete_car(100).unwrap());
    assert!(!cars.complete_car(200).unwrap());
    assert!(req.test().unwrap().is_none());
    cars.add_outstanding(1).unwrap();
    assert!(!cars.complete_car(300).unwrap());
    assert_eq!(cars.outstanding(), 1);
    assert!(cars.complete_car(400).unwrap());
    let s = req.wait().unwrap();
    assert_eq!((s.source(), s.tag(), s.count()), (Some(5), Some(9), 1000));
    assert!(matches!(
        cars.complete_car(1),
        Err(RequestError::AlreadyComplete)
    ));
    assert!(matches!(
        cars.add_outstanding(1),
        Err(RequestError::AlreadyComplete)
    ));
}

#[test]
fn cars_completed_by_many_threads() {
    let _w = watchdog(30);
    let (mut req, cars) = Request::message(400);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let cars = cars.clone();
            thread::spawn(move || {
                for _ in 0..100 {
                    cars.complete_car(8).unwrap();
                }
            })
        })
        .collect();
    let s = req.wait().unwrap();
    assert_eq!(s.count(), 3200);
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn a_failed_car_is_the_request_error() {
    let (mut req, cars) = Request::message(2);
    cars.fail_car("link down").unwrap();
    cars.complete_car(10).unwrap();
    let e = req.wait().unwrap_err();
    match e {
        RequestError::Operation(c) => assert_eq!(c.to_string(), "link down"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn zero_cars_is_complete_at_once() {
    let (mut req, _cars) = Request::message(0);
    assert!(req.is_complete());
    assert_eq!(req.wait().unwrap().count(), 0);
}

#[test]
fn cancel_is_decided_by_the_operation_owner() {
    let (mut req, cars) = Request::message(1);
    assert!(!cars.cancel_requested());
    req.cancel().unwrap();
    assert!(cars.cancel_requested());
    cars.complete_cancelled().unwrap();
    assert!(req.wait().unwrap().test_cancelled());
}

#[test]
fn message_and_generalized_requests_mix_in_one_array() {
    let _w = watchdog(30);
    let (m, cars) = Request::message(2);
    let (g, handle) = Request::generalized(());
    let mut reqs = vec![m, g];
    let (go, wait_go) = std::sync::mpsc::channel::<()>();
    let t = thread::spawn(move || {
        handle.complete().unwrap();
        wait_go.recv().unwrap();
        cars.complete_car(1).unwrap();
        cars.complete_car(1).unwrap();
    });
    let (i, r) = wait_any(&mut reqs).completed().unwrap();
    r.unwrap();
    assert_eq!(i, 1, "the generalized request completes first");
    go.send(()).unwrap();
    let mut indices = Vec::new();
    let mut statuses = Vec::new();
    wait_some(&mut reqs, &mut indices, Some(&mut statuses)).unwrap();
    assert_eq!(indices, [0]);
    assert_eq!(statuses[0].count(), 2);
    t.join().unwrap();

    let (m, cars) = Request::message(1);
    let (g, handle) = Request::generalized(());
    let mut reqs = vec![g, Request::null(), m];
    let t = thread::spawn(move || {
        cars.complete_car(4).unwrap();
        handle.complete().unwrap();
    });
    let mut statuses = Vec::new();
    wait_all(&mut reqs, Some(&mut statuses)).unwrap();
    assert_eq!(statuses[2].count(), 4);
    t.join().unwrap();
}

/// A progress engine stand-in: each call completes one queued CAR.
struct Engine {
    queue: Mutex<Vec<viaduct_request::CarCounter>>,
    calls: AtomicUsize,
    blocking_calls: AtomicUsize,
}

impl ProgressDriver for Engine {
    fn progress(&self, timeout: Option<Duration>) -> Result<(), BoxError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if timeout.is_some() {
            self.blocking_calls.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(cars) = self.queue.lock().unwrap().pop() {
            cars.complete_car(1)?;
        }
        Ok(())
    }
}

#[test]
fn waits_drive_the_progress_engine() {
    let _w = watchdog(30);
    let engine = Arc::new(Engine {
        queue: Mutex::new(Vec::new()),
        calls: AtomicUsize::new(0),
        blocking_calls: AtomicUsize::new(0),
    });
    let mut reqs = Vec::new();
    for _ in 0..4 {
        let (r, cars) = Request::message_driven(1, engine.clone());
        engine.queue.lock().unwrap().push(cars);
        reqs.push(r);
    }
    // Nothing but the waits drives the engine: no other thread exists.
    wait_all(&mut reqs, None).unwrap();
    assert!(engine.calls.load(Ordering::SeqCst) >= 4);

    struct Broken;
    impl ProgressDriver for Broken {
        fn progress(&self, _: Option<Duration>) -> Result<(), BoxError> {
            Err("engine died".into())
        }
    }
    let (mut r, _cars) = Request::message_driven(1, Arc::new(Broken));
    assert!(matches!(r.wait(), Err(RequestError::WaitHook(_))));
}

#[test]
fn wait_timeout_gives_up_and_leaves_the_request_active() {
    let _w = watchdog(30);
    let (mut req, cars) = Request::message(1);
    assert!(
        req.wait_timeout(Duration::from_millis(20))
            .unwrap()
            .is_none()
    );
    assert!(!req.is_null());
    cars.complete_car(6).unwrap();
    let s = req
        .wait_timeout(Duration::from_secs(20))
        .unwrap()
        .expect("complete");
    assert_eq!(s.count(), 6);
    assert!(req.is_null());
}
