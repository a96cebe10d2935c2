//! The example of seed 003: a handler posted on a receive request appends each message to a
//! list and re-posts a receive with a handler on it; the main thread consumes the list; at the
//! end it cancels the last receive and waits for the handler to run one last time.
//!
//! Receives are message requests; a producer thread stands in for the network: it takes each
//! posted receive (its CAR counter and buffer), writes a message into the buffer and completes
//! the CAR, or completes it as cancelled once the receiver asked for cancellation.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use viaduct_request::{CarCounter, Condition, Deadline, HandlerFn, Request, post_handler};

const MESSAGES: u32 = 200;
const LONG: Duration = Duration::from_secs(20);

/// A counting semaphore (POSIX `sem_t` of the example), with a timeout so nothing hangs.
#[derive(Default)]
struct Semaphore {
    count: Mutex<usize>,
    cv: Condvar,
}

impl Semaphore {
    fn post(&self) {
        *self.count.lock().unwrap() += 1;
        self.cv.notify_one();
    }
    fn wait(&self) {
        let guard = self.count.lock().unwrap();
        let (mut guard, timeout) = self
            .cv
            .wait_timeout_while(guard, LONG, |c| *c == 0)
            .unwrap();
        assert!(!timeout.timed_out(), "no handler signalled in time");
        *guard -= 1;
    }
}

type Buffer = Arc<Mutex<Vec<u8>>>;

/// A posted receive as the network sees it.
struct PostedRecv {
    cars: CarCounter,
    buffer: Buffer,
}

struct Shared {
    /// `wait` of the example: a handler is done.
    wait: Semaphore,
    /// `lock` + `buflist` of the example.
    list: Mutex<VecDeque<Buffer>>,
    /// `request` of the example: the receive currently posted.
    request: Mutex<Request>,
    /// Where posted receives go (the network's receive queue).
    network: Mutex<Sender<PostedRecv>>,
    last_saw_cancel: AtomicBool,
}

/// Posts a receive into a fresh buffer with `buf_recv` as its COMPLETE handler.
fn post_receive(shared: &Arc<Shared>) -> Request {
    let buffer: Buffer = Arc::new(Mutex::new(Vec::new()));
    let (request, cars) = Request::message(1);
    post_handler(
        &request,
        Condition::Complete,
        Some(buf_recv(Arc::clone(shared), Arc::clone(&buffer))),
        None,
        Deadline::Ignore,
    )
    .unwrap();
    shared
        .network
        .lock()
        .unwrap()
        .send(PostedRecv { cars, buffer })
        .unwrap();
    request
}

/// The handler of the example.
fn buf_recv(shared: Arc<Shared>, oldbuf: Buffer) -> HandlerFn {
    HandlerFn::new(move |_request, status| {
        if !status.test_cancelled() {
            assert_eq!(status.count(), 4);
            // Under the list lock: append the buffer, post the next receive, replace (and so
            // free) the old request.
            let mut list = shared.list.lock().unwrap();
            list.push_back(oldbuf);
            let next = post_receive(&shared);
            *shared.request.lock().unwrap() = next;
            drop(list);
        } else {
            shared.last_saw_cancel.store(true, Ordering::SeqCst);
        }
        shared.wait.post();
    })
}

/// The network: delivers `MESSAGES` messages, one per posted receive, then completes the next
/// receive as cancelled once cancellation is requested.
fn network(queue: Receiver<PostedRecv>) {
    for i in 0..MESSAGES {
        let recv = queue.recv_timeout(LONG).expect("a receive is posted");
        *recv.buffer.lock().unwrap() = i.to_le_bytes().to_vec();
        recv.cars.set_envelope(1, 0);
        recv.cars.complete_car(4).unwrap();
    }
    let last = queue
        .recv_timeout(LONG)
        .expect("the last receive is posted");
    for _ in 0..LONG.as_millis() {
        if last.cars.cancel_requested() {
            last.cars.complete_cancelled().unwrap();
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
    panic!("the last receive was never cancelled");
}

#[test]
fn handler_reposts_receives_and_the_main_thread_consumes() {
    let (net_tx, net_rx) = mpsc::channel();
    let net = thread::spawn(move || network(net_rx));
    let shared = Arc::new(Shared {
        wait: Semaphore::default(),
        list: Mutex::new(VecDeque::new()),
        request: Mutex::new(Request::null()),
        network: Mutex::new(net_tx),
        last_saw_cancel: AtomicBool::new(false),
    });
    let first = post_receive(&shared);
    *shared.request.lock().unwrap() = first;

    let mut consumed = Vec::new();
    loop {
        shared.wait.wait();
        let next = shared.list.lock().unwrap().pop_front().expect("a buffer");
        let bytes = next.lock().unwrap().clone();
        let value = u32::from_le_bytes(bytes.try_into().expect("4 bytes"));
        consumed.push(value);
        if value == MESSAGES - 1 {
            break;
        }
    }
    // Cancel the current receive (holding the list lock so no handler replaces it meanwhile).
    {
        let _list = shared.list.lock().unwrap();
        shared.request.lock().unwrap().cancel().unwrap();
    }
    // The handler runs one last time, sees the cancellation, and posts nothing new.
    shared.wait.wait();
    net.join().unwrap();
    assert!(shared.last_saw_cancel.load(Ordering::SeqCst));
    assert_eq!(consumed, (0..MESSAGES).collect::<Vec<_>>());
    let mut last = std::mem::take(&mut *shared.request.lock().unwrap());
    assert!(last.wait().unwrap().test_cancelled());
}
