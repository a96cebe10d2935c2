//! A test's watchdog: aborts the test binary (naming the bound) if a test runs past it, so a
//! hang fails instead of blocking the suite. Shared by the request, class and generalized
//! request tests. Under Miri it watches nothing: Miri's clock is virtual (it advances with the
//! steps interpreted), so a bound in seconds says nothing there; the Miri run as a whole is
//! bounded instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

/// Aborts the test process if the test runs longer than `secs` (no test may hang).
pub struct Watchdog(Arc<AtomicBool>);

pub fn watchdog(secs: u64) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    if cfg!(miri) {
        return Watchdog(done);
    }
    let d = Arc::clone(&done);
    thread::spawn(move || {
        for _ in 0..secs * 10 {
            if d.load(Ordering::Acquire) {
                return;
            }
            thread::sleep(Duration::from_millis(100));
        }
        eprintln!("test ran past {secs} s: aborting");
        std::process::abort();
    });
    Watchdog(done)
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}
