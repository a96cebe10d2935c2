//! The adaptive spin count of [`Endpoint::wait`](super::Endpoint::wait): how many polls it
//! makes before it sleeps on the futex, between a sixteenth of `Config::spin` and all of it.

use std::time::Duration;

/// A sleep in `wait` that ends with work within this long counts as a quick wake (the spin
/// before it was too short): a futex sleep and wake cost 10-20 us here.
pub(super) const QUICK_WAKE: Duration = Duration::from_micros(100);

/// How a wait ended, for the next spin count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The spin found work.
    Found,
    /// The spin found nothing; the wait goes to sleep.
    Missed,
    /// The sleep after a missed spin ended with work within [`QUICK_WAKE`]: the peer answered
    /// about as soon as a sleep and a wake take, so the spin was shorter than the sleep it
    /// tried to spare.
    QuickWake,
}

/// The spin count after a wait that ended with `outcome`, from `now`, for a `cap` of
/// `Config::spin`: doubled when the spin found work, halved (down to a sixteenth of the cap)
/// when it did not, quadrupled after a quick wake (undoing the halving twice over), never
/// above the cap.
///
/// Without the quick-wake rule a blocking ping-pong settled into sleeping on both ends: one
/// late reply made one end sleep, the other end's reply then came after a wake-up, longer than
/// its spin, so it slept too, and every halving made the next spin shorter still. Measured
/// with `viaduct bench method latency --transport shm --mode blocking --sizes 8`: runs gave
/// 0.13 us or 19-23 us by chance before, 0.12-0.14 us in 8 of 8 runs with it.
pub(super) fn next(now: u32, cap: u32, outcome: Outcome) -> u32 {
    match outcome {
        Outcome::Found => now.saturating_mul(2).min(cap),
        Outcome::Missed => (now / 2).max(cap / 16),
        Outcome::QuickWake => now.saturating_mul(4).min(cap),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_shrink_to_a_sixteenth_and_finds_grow_to_the_cap() {
        let mut s = 64;
        for _ in 0..10 {
            s = next(s, 64, Outcome::Missed);
        }
        assert_eq!(s, 4);
        for _ in 0..10 {
            s = next(s, 64, Outcome::Found);
        }
        assert_eq!(s, 64);
        assert_eq!(
            next(0, 0, Outcome::QuickWake),
            0,
            "a cap of 0 sleeps at once"
        );
    }

    /// A wait that misses and is then woken quickly, over and over (both ends of a ping-pong
    /// asleep in turn), keeps its full spin instead of shrinking to the floor.
    #[test]
    fn quick_wakes_keep_the_spin_through_a_run_of_misses() {
        let mut s = 64;
        for _ in 0..10 {
            s = next(s, 64, Outcome::Missed);
            s = next(s, 64, Outcome::QuickWake);
        }
        assert_eq!(s, 64);
        // From the floor, one quick wake is a step back up.
        assert_eq!(next(4, 64, Outcome::QuickWake), 16);
    }
}
