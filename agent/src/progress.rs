//! The progress engine: who moves messages, when, and what a wait blocks on.
//!
//! # Contract
//!
//! - **Nothing runs in the background.** Messages move only inside calls into the agent:
//!   [`Agent::make_progress`], [`Agent::make_progress_blocking`], posts (which try to hand
//!   the message to the method at once), and the waits and tests of the agent's requests
//!   (`Request::wait`, `test`, `wait_any`/`some`/`all`, `test_*`), which call this engine
//!   through the request's progress driver. A rank that posts and never waits or tests makes
//!   no progress on inbound messages.
//! - **One pass** ([`Agent::make_progress`]) takes the agent's mutex once and, for every VC:
//!   reaps the method's completions (completing send CARs), reads up to 64 inbound messages in
//!   place (matching them, answering rendezvous), posts queued messages, then completes as
//!   cancelled every pending receive whose request asked for it. It returns the number of
//!   events handled; 0 means nothing happened.
//! - **Adaptive polling.** A blocking call first spins on passes, up to a spin count that
//!   adapts between `Config::spin_min` and `Config::spin_max`: it grows by
//!   `Config::spin_increment` after a spin that found work, and shrinks by it after one that
//!   did not. A busy rank thus keeps spinning, an idle one soon stops. Then it sleeps in the
//!   methods' own waits (shared memory: a futex word in the segment; TCP: `io_uring_enter`
//!   on the connection's ring), splitting its timeout between the VCs, and runs one more
//!   pass. A rank with no remote VC does not sleep here: the request's own condition variable
//!   wakes its waiter when another thread completes it.
//! - **Threads.** Any thread may post, wait and call progress. Passes are serialized by the
//!   mutex; a thread sleeping in a method's wait holds it (for at most the timeout it was given,
//!   at most 10 ms from request waits), so other threads' posts may be delayed that long, never
//!   lost. Requests complete on whichever thread runs the pass that sees their last CAR; a
//!   waiting thread is woken through the request's condition variable. No user callback runs
//!   inside a pass: message requests have none, and handlers run on the handler thread.
//! - **Failure.** A peer that dies is noticed by its method within a bounded time (see
//!   `Config::peer_timeout`); the pass that sees it fails every request on that VC. Waits
//!   therefore end, with an error, instead of hanging.

use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::agent::{Agent, Shared};
use crate::error::AgentError;
use crate::request::{BoxError, ProgressDriver};
use crate::vc::Link;

/// The progress driver of an agent's requests.
pub(crate) struct Driver {
    shared: Weak<Shared>,
}

impl Driver {
    pub(crate) fn new(shared: Weak<Shared>) -> Driver {
        Driver { shared }
    }
}

impl ProgressDriver for Driver {
    fn progress(&self, timeout: Option<Duration>) -> Result<(), BoxError> {
        let Some(shared) = self.shared.upgrade() else {
            return Err(Box::new(AgentError::Finalized));
        };
        match timeout {
            None => {
                shared.make_progress();
            }
            Some(t) => {
                shared.progress_blocking(t);
            }
        }
        Ok(())
    }
}

impl Shared {
    /// One non-blocking pass; returns the work done.
    pub(crate) fn make_progress(&self) -> usize {
        let mut st = self.lock();
        if st.finalized {
            return 0;
        }
        st.progress()
    }

    /// Spins adaptively, then sleeps in the methods' waits for up to `timeout` in all.
    pub(crate) fn progress_blocking(&self, timeout: Duration) -> usize {
        let c = &self.config;
        let spins = self.spin_now.load(Ordering::Relaxed);
        for _ in 0..spins {
            let work = self.make_progress();
            if work > 0 {
                let grown = spins.saturating_add(c.spin_increment).min(c.spin_max);
                self.spin_now.store(grown, Ordering::Relaxed);
                return work;
            }
            std::hint::spin_loop();
        }
        let shrunk = spins.saturating_sub(c.spin_increment).max(c.spin_min);
        self.spin_now.store(shrunk, Ordering::Relaxed);

        let mut st = self.lock();
        if st.finalized {
            return 0;
        }
        let work = st.progress();
        if work > 0 {
            return work;
        }
        let waitable = st.waitable();
        if waitable.is_empty() {
            return 0;
        }
        let deadline = Instant::now() + timeout;
        let slice = timeout / waitable.len() as u32;
        let mut failures = Vec::new();
        for i in waitable {
            let left = deadline.saturating_duration_since(Instant::now());
            let vc = &mut st.vcs[i];
            if let Link::Remote(m) = &mut vc.link {
                if let Err(e) = m.wait(slice.min(left)) {
                    failures.push((vc.peer, e.to_string()));
                }
            }
            if left.is_zero() {
                break;
            }
        }
        for (peer, reason) in failures {
            st.fail_vc(peer, reason);
        }
        st.progress()
    }
}

impl Agent {
    /// One non-blocking progress pass over every VC (`Make_progress` of seed 002); returns the
    /// number of events handled (0: nothing happened).
    pub fn make_progress(&self) -> usize {
        self.shared.make_progress()
    }

    /// Makes progress, blocking up to `timeout` when there is nothing to do
    /// (`Make_progress_blocking` of seed 002): spins adaptively, then sleeps in the methods'
    /// waits. Returns the events handled.
    pub fn make_progress_blocking(&self, timeout: Duration) -> usize {
        self.shared.progress_blocking(timeout)
    }
}
