//! A receive pool shared by message endpoints: one shared receive queue (SRQ) of a fixed number
//! of registered buffers, so a process's receive memory does not grow with its peers.

use std::ops::Range;
use std::sync::Arc;

use super::config::Config;
use super::endpoint::RECV_BASE;
use super::error::Error;
use crate::device::Context;
use crate::mr::{Access, MemoryRegion};
use crate::pd::ProtectionDomain;
use crate::srq::SharedReceiveQueue;
use crate::wr::RecvRequest;

struct Inner {
    pd: ProtectionDomain,
    srq: SharedReceiveQueue,
    buffers: u32,
    buffer_bytes: u32,
    low_water: usize,
    ranges: Vec<Range<usize>>,
}

/// Receive buffers for many message endpoints: [`Config::pool_buffers`] buffers of
/// [`Config::buffer_bytes`] on one protection domain, posted to one shared receive queue that
/// every endpoint prepared with [`Prepared::with_pool`](super::Prepared::with_pool) receives
/// from. Cheap to clone (the endpoints keep it alive).
///
/// Each endpoint still grants its peer [`Config::recv_buffers`] credits (a window per peer),
/// but the buffers come from the pool: a message consumed in place goes back to the pool, and
/// while the pool runs low (fewer than a quarter of its buffers posted) an arriving message is
/// copied out of its buffer at once so that messages nobody consumes yet cannot hold the pool
/// empty (the peer gets the credit back only when the copy is consumed, so a receiver that does
/// not consume still stops each peer after its window). A buffer lent out by
/// [`Endpoint::lease`](super::Endpoint::lease) counts as held, and while the pool runs low a
/// lease is a copy (its buffer goes back to the pool at once, its credit when the lease does),
/// so leases cannot hold the pool empty either. When the windows of all peers together exceed the pool, a burst may find it empty for a
/// moment: the sender's queue pair then retries without limit (receiver-not-ready retry 7, set
/// by the card's mark), so nothing is lost.
///
/// All endpoints of a pool share its protection domain, and with it the remote keys of their
/// registration caches.
#[derive(Clone)]
pub struct ReceivePool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ReceivePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivePool")
            .field("buffers", &self.inner.buffers)
            .field("buffer_bytes", &self.inner.buffer_bytes)
            .field("posted", &self.posted())
            .finish()
    }
}

impl ReceivePool {
    /// Allocates a protection domain on `ctx`, a shared receive queue and
    /// `config.pool_buffers` registered buffers of `config.buffer_bytes`, all posted.
    pub fn new(ctx: &Context, config: &Config) -> Result<ReceivePool, Error> {
        config.validate()?;
        let pd = ctx
            .alloc_pd()
            .map_err(Error::verbs("allocating a protection domain"))?;
        let srq = pd
            .shared_receive_queue(config.pool_buffers, 1)
            .map_err(Error::verbs("creating a shared receive queue"))?;
        let size = config.buffer_bytes as usize;
        let mut recvs = Vec::with_capacity(config.pool_buffers as usize);
        let mut ranges = Vec::with_capacity(config.pool_buffers as usize);
        for i in 0..config.pool_buffers {
            let mr = pd
                .allocate(size, Access::LOCAL_WRITE)
                .map_err(Error::verbs("registering a receive buffer"))?;
            ranges.push(mr.addr() as usize..mr.addr() as usize + mr.len());
            recvs.push(RecvRequest::new(RECV_BASE | u64::from(i), mr));
        }
        srq.post_recv(recvs)
            .map_err(|e| Error::verbs("posting the receive buffers")(e.error))?;
        Ok(ReceivePool {
            inner: Arc::new(Inner {
                pd,
                srq,
                buffers: config.pool_buffers,
                buffer_bytes: config.buffer_bytes,
                low_water: (config.pool_buffers as usize / 4).max(1),
                ranges,
            }),
        })
    }

    /// Buffers in the pool.
    pub fn buffers(&self) -> u32 {
        self.inner.buffers
    }

    /// Bytes of each buffer.
    pub fn buffer_bytes(&self) -> u32 {
        self.inner.buffer_bytes
    }

    /// Buffers posted now (not holding a message an endpoint has taken).
    pub fn posted(&self) -> usize {
        self.inner.srq.posted()
    }

    /// Bytes registered for receives: the same for any number of endpoints.
    pub fn registered_bytes(&self) -> usize {
        self.inner.ranges.iter().map(|r| r.len()).sum()
    }

    /// The protection domain of the pool and of its endpoints.
    pub fn protection_domain(&self) -> &ProtectionDomain {
        &self.inner.pd
    }

    /// Whether `other` is this very pool (a clone of it), not merely one alike.
    pub fn same(&self, other: &ReceivePool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    pub(crate) fn srq(&self) -> &SharedReceiveQueue {
        &self.inner.srq
    }

    pub(crate) fn ranges(&self) -> &[Range<usize>] {
        &self.inner.ranges
    }

    /// Whether so few buffers are posted that arriving messages should be copied out.
    pub(crate) fn low(&self) -> bool {
        self.posted() < self.inner.low_water
    }

    /// Posts buffer `idx` again; `Err` says why it could not be.
    pub(crate) fn repost(&self, idx: u32, region: MemoryRegion) -> Result<(), String> {
        self.inner
            .srq
            .post_recv([RecvRequest::new(RECV_BASE | u64::from(idx), region)])
            .map_err(|e| {
                format!(
                    "re-posting a receive buffer to the pool failed: {}",
                    e.error
                )
            })
    }
}
