//! The clock of the latency benchmarks: one read per round trip, and a cheap one.
//!
//! With the `rdma` feature this is the time-stamp counter of `viaduct_verbs::clock` (as
//! perftest and `verbs-lat` use): in the emulated soft-RoCE guest an OS clock read goes to an
//! emulated HPET and costs microseconds, which would weigh on whichever side reads it more
//! often. Without the feature it is the OS monotonic clock. Every latency benchmark (`method`,
//! `agent`) reads it once per round trip, so none pays more clock reads than another.

#[cfg(feature = "rdma")]
pub use viaduct_verbs::clock::{TickRate, ticks};

#[cfg(not(feature = "rdma"))]
pub use os::{TickRate, ticks};

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
