//! Sleeping on an endpoint's bell without holding the endpoint (see [`Endpoint::sleeper`]).
//!
//! [`Endpoint::sleeper`]: super::Endpoint::sleeper

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::error::Error;
use super::futex;
use super::segment::Segment;

/// Most bells one [`sleep_any`] waits on together (the kernel's `futex_waitv` limit); more
/// are waited on in turns.
pub const MAX_BELLS: usize = 128;

/// A sleep on one endpoint's bell, prepared under the endpoint (by
/// [`Endpoint::sleeper`](super::Endpoint::sleeper)) and taken without it, so that other
/// threads may use the endpoint meanwhile.
///
/// While it lives, this side counts as asleep: the peer rings the bell (a futex word in the
/// shared segment) when it publishes a message, frees ring space or closes. It keeps the
/// segment mapped. Dropping it ends the sleeper's count.
pub struct Sleeper {
    seg: Arc<Segment>,
    side: usize,
    /// The bell's value when the sleep was prepared: a ring since then ends the sleep at once.
    seen: u32,
    /// Longest single sleep (the endpoint's liveness interval): the peer's liveness is
    /// checked between sleeps.
    longest: Duration,
}

impl Sleeper {
    /// Prepares a sleep: counts this side asleep (so that the peer rings from now on), then
    /// reads the bell. The caller looks for work once more before sleeping.
    pub(crate) fn new(seg: Arc<Segment>, side: usize, longest: Duration) -> Sleeper {
        let line = &seg.control().sides[side];
        line.sleeping.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        let seen = line.bell.load(Ordering::SeqCst);
        Sleeper {
            seg,
            side,
            seen,
            longest,
        }
    }

    /// The longest sleep this sleeper takes at once.
    pub fn longest(&self) -> Duration {
        self.longest
    }

    /// Sleeps until the peer rings the bell (or rang it since the sleep was prepared), a
    /// signal, or `timeout` (at most [`Sleeper::longest`]).
    pub fn sleep(&self, timeout: Duration) -> Result<(), Error> {
        futex::wait(self.bell(), self.seen, timeout.min(self.longest)).map_err(Error::Wait)
    }

    /// The bell and the value it held when the sleep was prepared (the value a futex wait on
    /// it expects: a ring since then ends the wait at once).
    pub(crate) fn bell_and_seen(&self) -> (&std::sync::atomic::AtomicU32, u32) {
        (self.bell(), self.seen)
    }

    /// Whether the bell rang since the sleep was prepared.
    pub(crate) fn rung(&self) -> bool {
        self.bell().load(Ordering::SeqCst) != self.seen
    }

    fn bell(&self) -> &std::sync::atomic::AtomicU32 {
        &self.seg.control().sides[self.side].bell
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.seg.control().sides[self.side]
            .sleeping
            .fetch_sub(1, Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Sleeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleeper")
            .field("side", &self.side)
            .field("seen", &self.seen)
            .finish()
    }
}

/// Sleeps until any of `sleepers` is rung, a signal, or `timeout` (at most the shortest
/// [`Sleeper::longest`]): one `futex_waitv` over every bell (up to [`MAX_BELLS`]; where the
/// kernel lacks it, turns of at most 0.5 ms on each bell).
pub fn sleep_any(sleepers: &[&Sleeper], timeout: Duration) -> Result<(), Error> {
    let timeout = sleepers
        .iter()
        .map(|s| s.longest)
        .fold(timeout, Duration::min);
    match sleepers {
        [] => Ok(()),
        [one] => one.sleep(timeout),
        many => {
            let bells: Vec<(&std::sync::atomic::AtomicU32, u32)> = many
                .iter()
                .take(MAX_BELLS)
                .map(|s| (s.bell(), s.seen))
                .collect();
            match futex::wait_any(&bells, timeout) {
                Ok(()) => Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                    // Turns on each bell until one rang or the time is up.
                    let turn = Duration::from_micros(500);
                    let deadline = std::time::Instant::now() + timeout;
                    loop {
                        for s in many {
                            if s.rung() {
                                return Ok(());
                            }
                            let left =
                                deadline.saturating_duration_since(std::time::Instant::now());
                            if left.is_zero() {
                                return Ok(());
                            }
                            s.sleep(left.min(turn))?;
                        }
                    }
                }
                Err(e) => Err(Error::Wait(e)),
            }
        }
    }
}
