//! Communicator creations running at once on one rank: claims on context ids.
//!
//! A new communicator's contexts are the maximum of every member's next free context, agreed
//! in one exchange (see [`crate::comm`]). Two creations running at once on one rank (threads
//! creating communicators from different parents under `MPI_THREAD_MULTIPLE`) both offer
//! that counter; where their member sets overlap, they can agree on the same ids (rank r
//! offers 10 to one and 12 to the other, rank s the other way round: both take 12), and the
//! two communicators' messages then match each other's receives.
//!
//! So an agreed id is only a proposal. Each member then **claims** the ids it would take
//! (the communicator's own and the duplicates reserved after them) on its rank: the claim
//! holds when the ids are all at or past the rank's counter and no other creation in
//! progress there claimed any of them. A second exchange tells every member whether every
//! claim held: then each moves its counter past the ids; else each drops its claim and the
//! members agree again, offering past every claim in progress on their ranks. Of two
//! creations that meet on a rank, the one that claims first keeps the ids; the other fails
//! its claim there and takes later ids in its next round.
//!
//! Nothing here ever waits for another creation: a claim is taken or refused at once, so a
//! creation whose other members are busy elsewhere (a thread that makes this rank's part of
//! a second communicator first, or that holds a lock of the program's meanwhile) never keeps
//! another from completing. A creation whose claims failed yields before its next round,
//! then sleeps a little longer each time (with jitter), so that two creations that keep
//! meeting on several ranks stop meeting.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::limits::MAX_LIVE_COMMS;

/// The claims of the creations in progress on one rank.
#[derive(Debug, Default)]
pub(crate) struct Creations {
    inner: Mutex<Claims>,
}

#[derive(Debug, Default)]
struct Claims {
    /// `(creation id, first id, one past the last)` of every claim in progress.
    held: Vec<(u64, u32, u32)>,
    /// The next creation's id.
    next_id: u64,
}

impl Creations {
    fn lock(&self) -> MutexGuard<'_, Claims> {
        // Every critical section leaves the claims consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One communicator creation in progress on this rank (its claim goes when it is dropped).
pub(crate) struct Creation<'a> {
    /// The claims of this rank's creations.
    claims: &'a Creations,
    /// The rank's counter: the lowest context id its communicators do not use yet.
    next_context: &'a AtomicU32,
    /// The rank's live communicators.
    live_comms: &'a AtomicU32,
    id: u64,
    failed: u32,
}

impl<'a> Creation<'a> {
    /// Starts a creation on a rank with these claims, counter and live communicators.
    pub(crate) fn enter(
        claims: &'a Creations,
        next_context: &'a AtomicU32,
        live_comms: &'a AtomicU32,
    ) -> Creation<'a> {
        let mut c = claims.lock();
        let id = c.next_id;
        c.next_id += 1;
        Creation {
            claims,
            next_context,
            live_comms,
            id,
            failed: 0,
        }
    }

    /// This rank's offer for the next agreement: its counter or, past it, the end of the
    /// last claim in progress; `u32::MAX` (no ids for anyone) when the rank holds
    /// [`MAX_LIVE_COMMS`] communicators.
    pub(crate) fn offer(&self) -> u32 {
        if self.live_comms.load(Ordering::Relaxed) >= MAX_LIVE_COMMS {
            return u32::MAX;
        }
        let c = self.claims.lock();
        let next = self.next_context.load(Ordering::Relaxed);
        c.held.iter().map(|h| h.2).fold(next, u32::max)
    }

    /// Claims ids `from..to` on this rank for this creation; `false` when some are below the
    /// counter or claimed by another creation in progress.
    pub(crate) fn claim(&mut self, from: u32, to: u32) -> bool {
        let mut c = self.claims.lock();
        c.held.retain(|h| h.0 != self.id);
        let below = from < self.next_context.load(Ordering::Relaxed);
        if below || c.held.iter().any(|h| h.1 < to && from < h.2) {
            return false;
        }
        c.held.push((self.id, from, to));
        true
    }

    /// Ends a round in which every claim held (`all_held`): moves this rank's counter to
    /// `to` and ends the creation (`true`); otherwise drops this rank's claim and pauses
    /// before the next round (`false`).
    pub(crate) fn settle(&mut self, all_held: bool, to: u32) -> bool {
        if all_held {
            let mut c = self.claims.lock();
            self.next_context.fetch_max(to, Ordering::Relaxed);
            c.held.retain(|h| h.0 != self.id);
            return true;
        }
        self.claims.lock().held.retain(|h| h.0 != self.id);
        self.failed += 1;
        pause(self.failed, self.id);
        false
    }
}

impl Drop for Creation<'_> {
    fn drop(&mut self) {
        let id = self.id;
        self.claims.lock().held.retain(|h| h.0 != id);
    }
}

/// The pause after the `n`-th round whose claims failed: a yield for the first three, then a
/// sleep that doubles up to about a millisecond, with jitter from `seed`.
fn pause(n: u32, seed: u64) {
    if n <= 3 {
        std::thread::yield_now();
        return;
    }
    let base = 1u64 << n.min(10);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    let jitter = (nanos ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)) % base;
    std::thread::sleep(Duration::from_micros(base + jitter));
}
