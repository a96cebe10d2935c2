//! Request classes: `poll` and `wait` progress hooks (seed 000), cancel on hook failure
//! (seed 001), and mixed arrays that must not hang.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use viaduct_request::{
    BoxError, ClassOps, ClassRequest, QueryStatus, Request, RequestClass, RequestError, test_any,
    wait_all, wait_any,
};

mod watchdog;
use watchdog::watchdog;
/// A device with a completion queue: operations finish when `finish` is called (from any
/// thread); the class's wait hook blocks on the device for a whole batch, like one
/// `io_uring_enter` for all file requests of a wait.
#[derive(Default)]
struct Device {
    done: Mutex<Vec<usize>>,
    cv: Condvar,
}

impl Device {
    fn finish(&self, op: usize) {
        self.done.lock().unwrap().push(op);
        self.cv.notify_all();
    }
}

#[derive(Default)]
struct DeviceClass {
    device: Arc<Device>,
    polls: AtomicUsize,
    waits: Mutex<Vec<usize>>,
    frees: AtomicUsize,
    cancels: Mutex<Vec<(usize, bool)>>,
    fail_poll_of: Option<usize>,
    fail_wait: bool,
}

struct Op {
    id: usize,
    bytes: u64,
}

impl DeviceClass {
    /// Completes every request of `requests` whose operation the device finished.
    fn reap(&self, requests: &[&ClassRequest<'_, Op>]) {
        let done = self.device.done.lock().unwrap().clone();
        for r in requests {
            if !r.is_complete() && done.contains(&r.state().id) {
                r.complete().unwrap();
            }
        }
    }
}

impl ClassOps for DeviceClass {
    type State = Op;

    fn query(&self, state: &Op, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_count(state.bytes);
        Ok(())
    }

    fn free(&self, _state: &Op) -> Result<(), BoxError> {
        self.frees.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn cancel(&self, state: &Op, complete: bool) -> Result<(), BoxError> {
        self.cancels.lock().unwrap().push((state.id, complete));
        Ok(())
    }

    fn poll(&self, request: &ClassRequest<'_, Op>) -> Result<(), BoxError> {
        self.polls.fetch_add(1, Ordering::SeqCst);
        if self.fail_poll_of == Some(request.state().id) {
            return Err("device lost the operation".into());
        }
        self.reap(&[request]);
        Ok(())
    }

    fn wait(&self, requests: &[ClassRequest<'_, Op>], timeout: Duration) -> Result<(), BoxError> {
        self.waits.lock().unwrap().push(requests.len());
        if self.fail_wait {
            return Err("device wait failed".into());
        }
        let ids: Vec<usize> = requests.iter().map(|r| r.state().id).collect();
        let done = self.device.done.lock().unwrap();
        let _ = self
            .device
            .cv
            .wait_timeout_while(done, timeout, |d| !ids.iter().any(|i| d.contains(i)))
            .unwrap();
        let refs: Vec<&ClassRequest<'_, Op>> = requests.iter().collect();
        self.reap(&refs);
        Ok(())
    }
}

#[test]
fn test_calls_poll_which_completes_the_request() {
    let class = RequestClass::new(DeviceClass::default());
    let (mut req, _h) = class.start(Op { id: 1, bytes: 64 });
    assert!(req.test().unwrap().is_none());
    assert_eq!(class.ops().polls.load(Ordering::SeqCst), 1);
    class.ops().device.finish(1);
    let s = req.test().unwrap().expect("poll completed it");
    assert_eq!(s.count(), 64);
    assert_eq!(class.ops().frees.load(Ordering::SeqCst), 1);
    // get_status also drives progress.
    let (req, _h) = class.start(Op { id: 2, bytes: 8 });
    class.ops().device.finish(2);
    assert_eq!(req.get_status().unwrap().unwrap().count(), 8);
}

#[test]
fn one_wait_hook_call_serves_every_request_of_the_class() {
    let _w = watchdog(30);
    let class = RequestClass::new(DeviceClass::default());
    let mut reqs: Vec<Request> = (0..5)
        .map(|id| class.start(Op { id, bytes: 1 }).0)
        .collect();
    let c = class.clone();
    let t = thread::spawn(move || {
        // Finish only once the waiting thread sits in the wait hook.
        while c.ops().waits.lock().unwrap().is_empty() {
            thread::sleep(Duration::from_millis(1));
        }
        for id in 0..5 {
            c.ops().device.finish(id);
        }
    });
    wait_all(&mut reqs, None).unwrap();
    t.join().unwrap();
    let waits = class.ops().waits.lock().unwrap().clone();
    assert!(!waits.is_empty());
    assert_eq!(waits[0], 5, "the first wait hook call got the whole batch");
    assert!(waits.iter().all(|n| (1..=5).contains(n)));
    assert_eq!(class.ops().frees.load(Ordering::SeqCst), 5);
}

#[test]
fn no_helper_thread_needed_when_poll_drives_the_operation() {
    /// An operation that finishes on its third poll, all on the waiting thread.
    struct Countdown;
    impl ClassOps for Countdown {
        type State = AtomicUsize;
        fn poll(&self, r: &ClassRequest<'_, AtomicUsize>) -> Result<(), BoxError> {
            if r.state().fetch_sub(1, Ordering::SeqCst) == 1 {
                r.complete()?;
            }
            Ok(())
        }
    }
    let _w = watchdog(30);
    let class = RequestClass::new(Countdown);
    let (mut req, _h) = class.start(AtomicUsize::new(3));
    req.wait().unwrap();
}

#[test]
fn poll_failure_runs_cancel_and_completes_with_the_error() {
    let class = RequestClass::new(DeviceClass {
        fail_poll_of: Some(7),
        ..DeviceClass::default()
    });
    let (mut req, handle) = class.start(Op { id: 7, bytes: 0 });
    let e = req.test().unwrap_err();
    match &e {
        RequestError::Poll(c) => assert_eq!(c.to_string(), "device lost the operation"),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(*class.ops().cancels.lock().unwrap(), [(7, false)]);
    assert_eq!(class.ops().frees.load(Ordering::SeqCst), 1);
    assert!(matches!(
        handle.complete(),
        Err(RequestError::AlreadyComplete)
    ));
}

#[test]
fn wait_hook_failure_cancels_every_request_of_the_batch() {
    let _w = watchdog(30);
    let class = RequestClass::new(DeviceClass {
        fail_wait: true,
        ..DeviceClass::default()
    });
    let mut reqs: Vec<Request> = (0..3)
        .map(|id| class.start(Op { id, bytes: 0 }).0)
        .collect();
    let mut statuses = Vec::new();
    let e = wait_all(&mut reqs, Some(&mut statuses)).unwrap_err();
    assert!(matches!(e, RequestError::InStatus { failed: 3 }));
    assert!(
        statuses
            .iter()
            .all(|s| matches!(s.error(), Some(RequestError::WaitHook(_))))
    );
    let mut cancels = class.ops().cancels.lock().unwrap().clone();
    cancels.sort_unstable();
    assert_eq!(cancels, [(0, false), (1, false), (2, false)]);
}

#[test]
fn mixed_array_wait_any_sees_another_threads_completion() {
    let _w = watchdog(30);
    // The class's operations never finish; its wait hook sleeps for the whole timeout.
    let class = RequestClass::new(DeviceClass::default());
    let (c, _ch) = class.start(Op { id: 1, bytes: 0 });
    let (g, handle) = Request::generalized(());
    let (m, cars) = Request::message(1);
    let mut reqs = vec![c, g, m];
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        handle.complete().unwrap();
    });
    let (i, r) = wait_any(&mut reqs).completed().expect("active");
    r.unwrap();
    assert_eq!(i, 1);
    t.join().unwrap();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        cars.complete_car(3).unwrap();
    });
    let (i, r) = wait_any(&mut reqs).completed().expect("active");
    assert_eq!((i, r.unwrap().count()), (2, 3));
    t.join().unwrap();
    // Finish the class request too, through the device, from another thread.
    let device = Arc::clone(&class.ops().device);
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(30));
        device.finish(1);
    });
    wait_all(&mut reqs, None).unwrap();
    t.join().unwrap();
    assert!(test_any(&mut reqs).is_all_null());
}

#[test]
fn class_request_completed_through_its_handle_wakes_a_plain_wait() {
    let _w = watchdog(30);
    struct Passive;
    impl ClassOps for Passive {
        type State = ();
        fn poll(&self, _: &ClassRequest<'_, ()>) -> Result<(), BoxError> {
            Ok(())
        }
    }
    let class = RequestClass::new(Passive);
    let (mut req, handle) = class.start(());
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(20));
        handle.complete().unwrap();
    });
    req.wait().unwrap();
    t.join().unwrap();
}

#[test]
fn cancel_reaches_the_class_with_the_request_state() {
    let class = RequestClass::new(DeviceClass::default());
    let (mut req, _h) = class.start(Op { id: 4, bytes: 0 });
    req.cancel().unwrap();
    class.ops().device.finish(4);
    req.test().unwrap().expect("complete");
    req.cancel().unwrap_err();
    let (req, h) = class.start(Op { id: 5, bytes: 0 });
    h.complete().unwrap();
    req.cancel().unwrap();
    assert_eq!(
        *class.ops().cancels.lock().unwrap(),
        [(4, false), (5, true)]
    );
}
