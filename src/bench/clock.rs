//! The clock of the latency benchmarks: one read per round trip, and a cheap one.
//!
//! With the `rdma` feature this is the time-stamp counter of `viaduct_verbs::clock` (as
//! perftest and `verbs-lat` use): in the emulated soft-RoCE guest an OS clock read goes to an
//! emulated HPET and costs microseconds, which would weigh on whichever side reads it more
//! often. Without the feature it is the OS monotonic clock. Every latency benchmark (`method`,
//! `agent`) reads it once per round trip, so none pays more clock reads than another.

use std::time::{Duration, Instant};

#[cfg(feature = "rdma")]
pub use viaduct_verbs::clock::{TickRate, ticks};

#[cfg(not(feature = "rdma"))]
pub use os::{TickRate, ticks};

/// Runs `round_trip` `iters` times (fewer once `budget` has passed, checked every 256) and
/// returns the half round trips in microseconds, in run order. The clock is read once per round
/// trip: each sample runs from the end of the previous one.
pub fn half_round_trips<E>(
    iters: u64,
    budget: Option<Duration>,
    mut round_trip: impl FnMut() -> Result<(), E>,
) -> Result<Vec<f64>, E> {
    let mut ticks_each = Vec::with_capacity(iters.min(1 << 24) as usize);
    let probe = TickRate::start();
    let start = Instant::now();
    let mut prev = ticks();
    for i in 0..iters {
        round_trip()?;
        let now = ticks();
        ticks_each.push(now.wrapping_sub(prev));
        prev = now;
        if i % 256 == 255 && budget.is_some_and(|b| start.elapsed() > b) {
            break;
        }
    }
    let rate = probe.finish(Duration::from_millis(100));
    Ok(ticks_each.iter().map(|&t| rate.to_us(t) / 2.0).collect())
}

#[cfg(not(feature = "rdma"))]
mod os {
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};

    fn origin() -> Instant {
        static START: OnceLock<Instant> = OnceLock::new();
        *START.get_or_init(Instant::now)
    }

    /// Nanoseconds since the first call.
    pub fn ticks() -> u64 {
        origin().elapsed().as_nanos() as u64
    }

    /// Ticks per microsecond (always 1000 here).
    #[derive(Debug, Clone)]
    pub struct TickRate;

    /// A rate measurement under way (nothing to measure here).
    #[derive(Debug, Clone, Copy)]
    pub struct TickRateProbe;

    impl TickRate {
        /// Starts measuring.
        pub fn start() -> TickRateProbe {
            origin();
            TickRateProbe
        }

        /// Converts a tick difference into microseconds.
        pub fn to_us(&self, ticks: u64) -> f64 {
            ticks as f64 / 1e3
        }
    }

    impl TickRateProbe {
        /// Ends the measurement.
        pub fn finish(self, _min: Duration) -> TickRate {
            TickRate
        }
    }
}
