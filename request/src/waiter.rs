//! A blocked wait: one condition variable a wait set registers on every request it waits for.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Woken by any completion of a request it is registered on.
#[derive(Debug, Default)]
pub(crate) struct Waiter {
    notified: Mutex<bool>,
    cv: Condvar,
}

impl Waiter {
    /// Marks the waiter notified and wakes it.
    pub(crate) fn notify(&self) {
        let mut n = self.notified.lock().unwrap_or_else(PoisonError::into_inner);
        *n = true;
        self.cv.notify_one();
    }

    /// Blocks until notified or `timeout` passed, then clears the notification.
    pub(crate) fn wait_timeout(&self, timeout: Duration) {
        let mut n = self.notified.lock().unwrap_or_else(PoisonError::into_inner);
        if !*n && !timeout.is_zero() {
            n = self
                .cv
                .wait_timeout_while(n, timeout, |n| !*n)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *n = false;
    }
}
