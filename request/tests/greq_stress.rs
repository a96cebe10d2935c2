//! 100,000 generalized requests completed from 4 threads while the main thread waits with
//! `wait_any` and `wait_some`; every free callback runs exactly once. (Under Miri, which
//! interprets every step and checks every access, 300 requests in a window of 16.)

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use viaduct_request::{BoxError, CompleteHandle, GrequestOps, Request, wait_any, wait_some};

const TOTAL: usize = if cfg!(miri) { 300 } else { 100_000 };
const WINDOW: usize = if cfg!(miri) { 16 } else { 64 };
const THREADS: usize = 4;

struct Counted {
    frees: Arc<Vec<AtomicUsize>>,
    id: usize,
}

impl GrequestOps for Counted {
    fn free(&self) -> Result<(), BoxError> {
        self.frees[self.id].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn hundred_thousand_requests_from_four_threads() {
    let done = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&done);
    // The bound, in real time (Miri's clock is virtual: its run as a whole is bounded instead).
    if !cfg!(miri) {
        thread::spawn(move || {
            for _ in 0..1200 {
                if d.load(Ordering::Acquire) {
                    return;
                }
                thread::sleep(Duration::from_millis(100));
            }
            eprintln!("stress test ran past 120 s: aborting");
            std::process::abort();
        });
    }

    let frees: Arc<Vec<AtomicUsize>> = Arc::new((0..TOTAL).map(|_| AtomicUsize::new(0)).collect());
    let mut senders = Vec::new();
    let mut workers = Vec::new();
    for _ in 0..THREADS {
        let (tx, rx) = mpsc::channel::<CompleteHandle>();
        senders.push(tx);
        workers.push(thread::spawn(move || {
            for handle in rx {
                handle.complete().unwrap();
            }
        }));
    }

    let mut started = 0;
    let mut finished = 0;
    let mut window: Vec<Request> = Vec::with_capacity(WINDOW);
    let mut indices = Vec::new();
    let mut round = 0usize;
    while finished < TOTAL {
        // Refill the window: start requests and hand their completion to the workers.
        for slot in 0..WINDOW {
            if started == TOTAL {
                break;
            }
            if slot < window.len() && !window[slot].is_null() {
                continue;
            }
            let (req, handle) = Request::generalized(Counted {
                frees: Arc::clone(&frees),
                id: started,
            });
            senders[started % THREADS].send(handle).unwrap();
            if slot < window.len() {
                window[slot] = req;
            } else {
                window.push(req);
            }
            started += 1;
        }
        round += 1;
        if round % 2 == 0 {
            let (_, result) = wait_any(&mut window).completed().expect("active requests");
            result.unwrap();
            finished += 1;
        } else {
            wait_some(&mut window, &mut indices, None).unwrap();
            assert!(!indices.is_empty());
            finished += indices.len();
        }
    }
    drop(senders);
    for w in workers {
        w.join().unwrap();
    }
    assert!(window.iter().all(Request::is_null));
    let runs: Vec<usize> = frees.iter().map(|f| f.load(Ordering::Relaxed)).collect();
    assert!(
        runs.iter().all(|&n| n == 1),
        "free ran {} times in total for {TOTAL} requests; first bad id {:?}",
        runs.iter().sum::<usize>(),
        runs.iter().position(|&n| n != 1)
    );
    done.store(true, Ordering::Release);
}
