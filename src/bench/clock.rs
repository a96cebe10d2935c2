//! The clock of the latency benchmarks: one read per round trip, and a cheap one.
//!
//! With the `rdma` feature this is the time-stamp counter of `viaduct_verbs::clock` (as
//! perftest and `verbs-lat` use): in the emulated soft-RoCE guest an OS clock read goes to an
//! emulated HPET and costs microseconds, which would weigh on whichever side reads it more
//! often. Without the feature it is the OS monotonic clock. Every latency benchmark (`method`,
//! `agent`) reads it once per round trip, so none pays more clock reads than another.
//!
//! # Resolution
//!
//! A clock read need not resolve one round trip: the time-stamp counter of the AMD EPYC virtual
//! machines measured in `docs/PERFORMANCE.md` advances in steps of 26 ticks (10 ns), so a single half round trip of
//! 0.09 us is one of 0.085, 0.090 or 0.095 us, and the median of such samples moves in 5 %
//! steps. [`median_of_batches`] therefore takes the median over the means of
//! [`BATCH`] consecutive round trips (a resolution of 0.3 ns at that step); a preemption or
//! interrupt still falls into one batch and leaves the median alone. The per-round-trip samples
//! stay for the tail figures (p99) and the mean.

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

/// Round trips per sample of [`median_of_batches`].
pub const BATCH: usize = 16;

/// The median over the means of [`BATCH`] consecutive `samples` (a trailing partial batch is
/// left out; fewer samples than one batch give their plain median), `None` for no samples.
pub fn median_of_batches(samples: &[f64]) -> Option<f64> {
    let mut means: Vec<f64> = samples
        .chunks_exact(BATCH)
        .map(|b| b.iter().sum::<f64>() / BATCH as f64)
        .collect();
    if means.is_empty() {
        means = samples.to_vec();
    }
    means.sort_by(f64::total_cmp);
    means.get(means.len().checked_sub(1)? / 2).copied()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_resolve_below_the_clock_step() {
        // A clock with 10-unit steps: a true value of 92.5 reads as 90 or 100, in the
        // proportion that keeps the mean; the plain median says 90, the batched one 92.5.
        let samples: Vec<f64> = (0..BATCH * 100)
            .map(|i| if i % 4 == 3 { 100.0 } else { 90.0 })
            .collect();
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(sorted[sorted.len() / 2], 90.0);
        assert_eq!(median_of_batches(&samples), Some(92.5));
    }

    #[test]
    fn an_outlier_stays_in_its_batch() {
        let mut samples = vec![1.0; BATCH * 9];
        samples[3] = 1000.0;
        assert_eq!(median_of_batches(&samples), Some(1.0));
    }

    #[test]
    fn few_samples_give_their_median_and_none_give_none() {
        assert_eq!(median_of_batches(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_of_batches(&[]), None);
    }
}
