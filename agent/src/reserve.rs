//! The contexts a communicator reserves for its duplicates made without messages
//! (`Comm::idup`, `Intercomm::idup`; see [`crate::comm`]): how many, where, how many taken.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Duplicates without messages (`Comm::idup`, `Intercomm::idup`) reserved after each
/// communicator's own contexts when it is made by an agreement.
pub const RESERVED_DUPS: u32 = 32;

/// Duplicates without messages each of those duplicates reserves in turn (theirs reserve
/// none).
pub const NESTED_DUPS: u32 = 4;

/// The contexts a communicator reserved for its duplicates without messages: `count`
/// duplicates of `width` contexts each from `base`, each followed by the `nested` ones it
/// reserves in turn; how many are taken (shared by every handle of the communicator).
#[derive(Clone, Debug)]
pub(crate) struct Reserve {
    base: u32,
    width: u32,
    count: u32,
    nested: u32,
    used: Arc<AtomicU32>,
}

impl Reserve {
    /// The reserve of a communicator made by an agreement (or the world) whose duplicates
    /// take `width` contexts each, from `base`.
    pub(crate) fn new(base: u32, width: u32) -> Reserve {
        Reserve {
            base,
            width,
            count: RESERVED_DUPS,
            nested: NESTED_DUPS,
            used: Arc::new(AtomicU32::new(0)),
        }
    }

    /// The context ids the reserve covers.
    pub(crate) fn span(&self) -> u32 {
        self.count * self.width * (1 + self.nested)
    }

    /// The first context of the next reserved duplicate and the duplicates it reserves in
    /// turn (`None`: all taken).
    pub(crate) fn take(&self) -> Option<(u32, Option<Reserve>)> {
        let k = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |k| {
                (k < self.count).then_some(k + 1)
            })
            .ok()?;
        let ctx = self.base + k * self.width * (1 + self.nested);
        let nested = (self.nested > 0).then(|| Reserve {
            base: ctx + self.width,
            width: self.width,
            count: self.nested,
            nested: 0,
            used: Arc::new(AtomicU32::new(0)),
        });
        Some((ctx, nested))
    }
}
