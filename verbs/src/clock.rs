//! A cheap timestamp for timing verbs operations.
//!
//! On x86_64 it reads the CPU's time-stamp counter, as perftest does: an OS clock read can cost
//! more than a small verbs operation (in an emulated guest with an HPET clock source, much
//! more). Ticks become microseconds through a [`TickRate`] measured against the OS clock over
//! the same run. Elsewhere ticks are nanoseconds of the OS monotonic clock.

use std::time::{Duration, Instant};

/// Current tick count.
///
/// ```
/// use viaduct_verbs::clock::ticks;
/// let t0 = ticks();
/// assert!(ticks().wrapping_sub(t0) < u64::MAX / 2);
/// ```
#[inline]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86_64 CPU, takes no operands and touches no memory.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Ticks per microsecond, measured between [`TickRate::start`] and [`TickRateProbe::finish`].
///
/// ```
/// use std::time::Duration;
/// use viaduct_verbs::clock::{TickRate, ticks};
/// let probe = TickRate::start();
/// let t0 = ticks();
/// let rate = probe.finish(Duration::from_millis(1));
/// println!("{:.3} us", rate.to_us(ticks().wrapping_sub(t0)));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TickRate {
    per_us: f64,
}

/// A measurement of the tick rate under way.
///
/// ```
/// use viaduct_verbs::clock::TickRate;
/// let probe = TickRate::start(); // then the timed work
/// let rate = probe.finish(std::time::Duration::from_millis(1));
/// assert!(rate.per_us() > 0.0);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TickRateProbe {
    at: Instant,
    ticks: u64,
}

impl TickRate {
    /// Starts measuring: take this before the timed work.
    ///
    /// ```
    /// # use viaduct_verbs::clock::TickRate;
    /// let probe = TickRate::start();
    /// # let _ = probe;
    /// ```
    pub fn start() -> TickRateProbe {
        TickRateProbe {
            at: Instant::now(),
            ticks: ticks(),
        }
    }

    /// Ticks per microsecond.
    ///
    /// ```
    /// # use viaduct_verbs::clock::TickRate;
    /// let rate = TickRate::start().finish(std::time::Duration::from_millis(1));
    /// assert!(rate.per_us() > 0.0);
    /// ```
    pub fn per_us(&self) -> f64 {
        self.per_us
    }

    /// Converts a tick difference into microseconds.
    ///
    /// ```
    /// # use viaduct_verbs::clock::TickRate;
    /// let rate = TickRate::start().finish(std::time::Duration::from_millis(1));
    /// assert_eq!(rate.to_us(0), 0.0);
    /// ```
    pub fn to_us(&self, ticks: u64) -> f64 {
        ticks as f64 / self.per_us
    }
}

impl TickRateProbe {
    /// Ends the measurement (after the timed work; at least `min` after the start, sleeping
    /// if the work was shorter, so the rate is precise).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_verbs::clock::TickRate;
    /// let probe = TickRate::start();
    /// let rate = probe.finish(Duration::from_millis(1)); // sleeps the rest of the millisecond
    /// # let _ = rate;
    /// ```
    pub fn finish(self, min: Duration) -> TickRate {
        let spent = self.at.elapsed();
        if spent < min {
            std::thread::sleep(min - spent);
        }
        let dt = self.at.elapsed().as_secs_f64() * 1e6;
        let dticks = ticks().wrapping_sub(self.ticks) as f64;
        let per_us = if dt > 0.0 && dticks > 0.0 {
            dticks / dt
        } else {
            1e3
        };
        TickRate { per_us }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_advance_and_convert() {
        let probe = TickRate::start();
        let a = ticks();
        std::thread::sleep(Duration::from_millis(20));
        let b = ticks();
        let rate = probe.finish(Duration::from_millis(20));
        assert!(b > a);
        let us = rate.to_us(b - a);
        // A sleep of 20 ms lasts at least 20 ms; the conversion must agree within the
        // calibration's own error, which the upper bound leaves room for.
        assert!(us >= 15_000.0, "{us} us");
    }
}
