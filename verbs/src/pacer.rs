//! When a loop that spins through many progress passes reads the OS clock.
//!
//! The message endpoint keeps timers of tenths of seconds (keepalive, peer timeout). Reading
//! the OS clock on every pass would cost more than the pass: in an emulated guest whose clock
//! source is an HPET, one read is about 3 us, and a spinning receive makes dozens of passes per
//! message. Reading it on a fixed share of the passes (one in 64) still cost 2.5 reads per
//! round trip there. A [`ClockPacer`] instead reads the OS clock about every
//! [`ClockPacer::TARGET`] of real time, whatever the pass rate: every
//! [`ClockPacer::CHECK_EVERY`] passes it looks at the time-stamp counter ([`crate::clock`]),
//! whose rate it learns from the OS clock reads it makes, and reads the OS clock once the
//! counter says the interval is over.
//!
//! The counter only decides *when* to read; every timer decision uses the OS clock. A counter
//! that runs backwards, or a rate not learned yet, makes the pacer read at once; a counter that
//! stops is caught by [`ClockPacer::MAX_PASSES`]. Where there is no time-stamp counter (not
//! x86_64) the pacer reads the OS clock every 64 passes.

use std::time::{Duration, Instant};

use crate::clock::ticks;

/// Decides on which passes of a spinning loop the OS clock is read (see the module docs).
///
/// ```
/// use viaduct_verbs::pacer::ClockPacer;
/// let mut pacer = ClockPacer::new();
/// for _ in 0..1000 {
///     if let Some(now) = pacer.pass() {
///         let _ = now; // check deadlines against `now`
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct ClockPacer {
    /// Passes since the last OS clock read.
    since_read: u32,
    /// Counter value at the last OS clock read.
    read_ticks: u64,
    /// Counter ticks per [`ClockPacer::TARGET`]; 0 until learned.
    gap: u64,
    /// The OS clock read the rate is learned from, with the counter then.
    anchor: Option<(Instant, u64)>,
    /// OS clock reads made, for tests and statistics.
    reads: u64,
}

impl Default for ClockPacer {
    fn default() -> Self {
        Self::new()
    }
}

impl ClockPacer {
    /// Real time between two OS clock reads of a spinning loop.
    pub const TARGET: Duration = Duration::from_millis(2);
    /// The counter is looked at on one pass in this many.
    pub const CHECK_EVERY: u32 = 16;
    /// Most passes between two OS clock reads, whatever the counter says.
    pub const MAX_PASSES: u32 = 1 << 20;

    /// A pacer that reads the clock on its first check.
    ///
    /// ```
    /// use viaduct_verbs::pacer::ClockPacer;
    /// assert_eq!(ClockPacer::new().reads(), 0);
    /// ```
    pub fn new() -> Self {
        ClockPacer {
            since_read: 0,
            read_ticks: 0,
            gap: 0,
            anchor: None,
            reads: 0,
        }
    }

    /// Counts one pass; returns the time when this pass should act on its timers.
    ///
    /// ```
    /// use viaduct_verbs::pacer::ClockPacer;
    /// let mut pacer = ClockPacer::new();
    /// let acted = (0..ClockPacer::CHECK_EVERY).filter_map(|_| pacer.pass()).count();
    /// assert_eq!(acted as u64, pacer.reads());
    /// ```
    #[inline]
    pub fn pass(&mut self) -> Option<Instant> {
        self.since_read = self.since_read.saturating_add(1);
        if cfg!(not(target_arch = "x86_64")) {
            return (self.since_read >= 64).then(|| self.now());
        }
        if self.since_read % Self::CHECK_EVERY != 0 {
            return None;
        }
        let t = ticks();
        // Wrapping: a counter that went backwards gives a huge difference and reads at once.
        let elapsed = t.wrapping_sub(self.read_ticks);
        if self.gap != 0 && elapsed < self.gap && self.since_read < Self::MAX_PASSES {
            return None;
        }
        Some(self.now_at(t))
    }

    /// Reads the OS clock now (for a caller that needs the time anyway, such as a wait about
    /// to sleep), and restarts the interval.
    ///
    /// ```
    /// use viaduct_verbs::pacer::ClockPacer;
    /// let mut pacer = ClockPacer::new();
    /// let now = pacer.now();
    /// assert!(now.elapsed() < std::time::Duration::from_secs(60) && pacer.reads() == 1);
    /// ```
    pub fn now(&mut self) -> Instant {
        self.now_at(ticks())
    }

    /// OS clock reads made so far.
    ///
    /// ```
    /// use viaduct_verbs::pacer::ClockPacer;
    /// let mut pacer = ClockPacer::new();
    /// pacer.now();
    /// assert_eq!(pacer.reads(), 1);
    /// ```
    pub fn reads(&self) -> u64 {
        self.reads
    }

    fn now_at(&mut self, t: u64) -> Instant {
        let now = Instant::now();
        self.reads += 1;
        self.since_read = 0;
        self.read_ticks = t;
        match self.anchor {
            None => self.anchor = Some((now, t)),
            Some((at, at_ticks)) => {
                let dt = now.saturating_duration_since(at);
                // Learn the rate over at least a millisecond, so the OS clock's own
                // granularity does not matter.
                if dt >= Duration::from_millis(1) {
                    let dticks = t.wrapping_sub(at_ticks);
                    self.gap = if dticks == 0 || dticks > u64::MAX / 2 {
                        0 // the counter stood still or ran backwards: read at every check
                    } else {
                        let per_target =
                            u128::from(dticks) * Self::TARGET.as_nanos() / dt.as_nanos().max(1);
                        per_target.min(u128::from(u64::MAX / 2)) as u64
                    };
                    self.anchor = Some((now, t));
                }
            }
        }
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs passes for `d` as fast as it can; returns the OS clock reads made.
    fn spin(p: &mut ClockPacer, d: Duration) -> u64 {
        let before = p.reads();
        let end = Instant::now() + d;
        while Instant::now() < end {
            let _ = p.pass();
        }
        p.reads() - before
    }

    #[test]
    fn a_fast_spin_reads_the_clock_about_once_per_target() {
        let mut p = ClockPacer::new();
        // Learn the rate.
        spin(&mut p, Duration::from_millis(20));
        let reads = spin(&mut p, Duration::from_millis(100));
        // 100 ms at one read per 2 ms is 50 reads; a loaded machine stretches intervals,
        // which only lowers the count (so the lower bound is loose). Reading on a fixed share
        // of the (millions of) passes would give tens of thousands.
        if cfg!(target_arch = "x86_64") {
            assert!((2..=120).contains(&reads), "{reads} clock reads in 100 ms");
        }
    }

    #[test]
    fn slow_passes_still_read_the_clock_every_target() {
        let mut p = ClockPacer::new();
        spin(&mut p, Duration::from_millis(20));
        // Passes of at least 1 ms each: every check (one per 16 passes, 16 ms or more) must
        // find the interval over, so timers are never starved by a learned pass rate. A read
        // now starts the count of passes at 0: left where the spin stopped, the count could
        // reach its first check on the very next pass, under a target after the spin's last
        // read (a check that rightly does not read).
        p.now();
        let before = p.reads();
        let mut checks = 0;
        let end = Instant::now() + Duration::from_millis(200);
        while Instant::now() < end {
            for _ in 0..ClockPacer::CHECK_EVERY {
                let _ = p.pass();
                std::thread::sleep(Duration::from_millis(1));
            }
            checks += 1;
        }
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                p.reads() - before,
                checks,
                "a check of slow passes did not read"
            );
        }
    }

    #[test]
    fn the_first_check_reads_the_clock() {
        let mut p = ClockPacer::new();
        let n = if cfg!(target_arch = "x86_64") {
            ClockPacer::CHECK_EVERY
        } else {
            64
        };
        for _ in 1..n {
            assert!(p.pass().is_none());
        }
        assert!(p.pass().is_some());
        assert_eq!(p.reads(), 1);
    }
}
