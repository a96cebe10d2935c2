//! Inbound messages lent out of an endpoint ([`Endpoint::lease`](super::Endpoint::lease)): an
//! owned handle on the registered receive buffer a message landed in (or on a copy), given
//! back to the endpoint when dropped.
//!
//! A lease goes home through a [`Returns`] box the endpoint shares with its leases: its drop
//! puts the buffer there, and the endpoint's next pass re-posts it and returns the peer's
//! credit. A lease that outlives its endpoint frees its buffer instead, or, for a shared
//! pool's buffer, posts it to the pool again (the other endpoints of the pool use it). Each
//! buffer moves exactly once: into the box, to the pool, or to its end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::pool::ReceivePool;
use crate::mr::MemoryRegion;

/// A lease come home: which one, its receive buffer (if it still holds one), and whether it
/// holds a credit of the peer.
pub(crate) struct Back {
    pub(crate) serial: u64,
    pub(crate) buf: Option<(u32, MemoryRegion)>,
    pub(crate) credit: bool,
}

/// Where an endpoint's leases go when they end, until its next pass takes them.
pub(crate) struct Returns {
    /// The shared pool of the endpoint's buffers, if any: buffers still in the box when it
    /// goes are posted to it again.
    pool: Option<ReceivePool>,
    items: Mutex<Vec<Back>>,
    /// Whether `items` may hold something (checked on every pass without the lock).
    any: AtomicBool,
}

impl Returns {
    pub(crate) fn new(pool: Option<ReceivePool>) -> Arc<Returns> {
        Arc::new(Returns {
            pool,
            items: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
        })
    }

    fn push(&self, back: Back) {
        let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        items.push(back);
        self.any.store(true, Ordering::Release);
    }

    /// The leases that came home since the last call.
    pub(crate) fn take(&self) -> Vec<Back> {
        // A plain load first: the usual pass finds nothing, and a read-modify-write on every
        // pass costs more (an emulated CPU makes it a helper call). A lease that comes home
        // just after the load is taken on the next pass.
        if !self.any.load(Ordering::Relaxed) || !self.any.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.items.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Drop for Returns {
    fn drop(&mut self) {
        let items = std::mem::take(self.items.get_mut().unwrap_or_else(|p| p.into_inner()));
        for b in items {
            if let (Some(pool), Some((idx, region))) = (&self.pool, b.buf) {
                let _ = pool.repost(idx, region);
            }
        }
    }
}

/// Where a lease's bytes are.
enum Bytes {
    /// In the registered receive buffer `idx` the message landed in, from `at`.
    InPlace {
        idx: u32,
        region: MemoryRegion,
        at: usize,
        len: usize,
    },
    /// A copy: made while the shared pool ran low, or the reassembly buffer of a message
    /// that spanned receive buffers.
    Copy(Vec<u8>),
    /// Gone home.
    Returned,
}

/// An inbound message lent out of its [`Endpoint`](super::Endpoint) by
/// [`Endpoint::lease`](super::Endpoint::lease): dereferences to the message's unconsumed bytes,
/// in place in the registered receive buffer it landed in ([`Lease::is_in_place`]) or, while a
/// shared pool runs low or for a message that spanned receive buffers, in a copy.
///
/// Dropping it (or [`Endpoint::give_back`](super::Endpoint::give_back)) hands the buffer back:
/// the endpoint re-posts it and returns the peer's credit (held until then) on its next pass.
/// Leases may come back in any order, from any thread. A lease stays valid after its endpoint
/// is dropped or fails (it owns the registered buffer); its drop then frees the buffer, or
/// posts a shared pool's buffer to the pool again.
pub struct Lease {
    tag: u64,
    bytes: Bytes,
    /// Whether the peer's credit for the message stays held until the lease comes back.
    credit: bool,
    serial: u64,
    home: Weak<Returns>,
    pool: Option<ReceivePool>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("tag", &self.tag)
            .field("len", &self.len())
            .field("in_place", &self.is_in_place())
            .finish()
    }
}

impl Lease {
    pub(crate) fn in_place(
        tag: u64,
        (idx, region): (u32, MemoryRegion),
        at: usize,
        len: usize,
        serial: u64,
        home: &Arc<Returns>,
        pool: Option<ReceivePool>,
    ) -> Lease {
        Lease {
            tag,
            bytes: Bytes::InPlace {
                idx,
                region,
                at,
                len,
            },
            credit: true,
            serial,
            home: Arc::downgrade(home),
            pool,
        }
    }

    pub(crate) fn copy(
        tag: u64,
        data: Vec<u8>,
        credit: bool,
        serial: u64,
        home: &Arc<Returns>,
    ) -> Lease {
        Lease {
            tag,
            bytes: Bytes::Copy(data),
            credit,
            serial,
            home: Arc::downgrade(home),
            pool: None,
        }
    }

    /// The message's tag.
    pub fn tag(&self) -> u64 {
        self.tag
    }

    /// Whether the bytes lie in the registered receive buffer the message landed in (else in
    /// a copy).
    pub fn is_in_place(&self) -> bool {
        matches!(self.bytes, Bytes::InPlace { .. })
    }

    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }
}

impl std::ops::Deref for Lease {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.bytes {
            Bytes::InPlace {
                region, at, len, ..
            } => &region[*at..*at + *len],
            Bytes::Copy(v) => v,
            Bytes::Returned => &[],
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let buf = match std::mem::replace(&mut self.bytes, Bytes::Returned) {
            Bytes::InPlace { idx, region, .. } => Some((idx, region)),
            _ => None,
        };
        let back = Back {
            serial: self.serial,
            buf,
            credit: self.credit,
        };
        match self.home.upgrade() {
            Some(home) => home.push(back),
            None => {
                // The endpoint is gone: a pool's buffer serves the pool's other endpoints.
                if let (Some(pool), Some((idx, region))) = (&self.pool, back.buf) {
                    let _ = pool.repost(idx, region);
                }
            }
        }
    }
}
