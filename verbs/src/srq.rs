//! Shared receive queues: one pool of receive buffers for many queue pairs.
//!
//! A queue pair built with [`QueuePairBuilder::srq`](crate::qp::QueuePairBuilder::srq) takes
//! every inbound SEND into the next buffer of its shared receive queue (SRQ) instead of a
//! receive queue of its own, so the receive memory of a process is what its SRQ holds, whatever
//! the number of peers. The completion of such a receive arrives on the receive completion
//! queue of the queue pair that took the message (its `qp_num` names the sender's connection)
//! and hands the buffer back, as for a receive of the queue pair's own.
//!
//! Ownership is as for queue pairs: the SRQ owns every receive posted to it until that
//! receive's completion is polled; the SRQ is destroyed after its last queue pair, and the
//! memory of receives still posted is released after the device forgets them. A queue pair
//! that fails does not flush the SRQ's receives (they stay posted for the other queue pairs).
//!
//! [`SharedReceiveQueue::arm_limit`] asks the device for an
//! [`AsyncEventKind::SrqLimitReached`](crate::event::AsyncEventKind) event when fewer receives
//! than the limit remain posted, the moment to post more.
//!
//! ```no_run
//! # fn main() -> viaduct_verbs::Result<()> {
//! use viaduct_verbs::{Access, Context, RecvRequest};
//! let ctx = Context::open("rxe0")?;
//! let pd = ctx.alloc_pd()?;
//! let cq = ctx.create_cq(256)?;
//! let srq = pd.shared_receive_queue(64, 1)?;
//! for id in 0..64 {
//!     let buf = pd.allocate(4096, Access::LOCAL_WRITE)?;
//!     srq.post_recv([RecvRequest::new(id, buf)]).map_err(|e| e.error)?;
//! }
//! // Every queue pair built with `.srq(&srq)` receives into these 64 buffers.
//! let prepared = pd.queue_pair(&cq, &cq).srq(&srq).build()?;
//! # let _ = prepared;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use rdma_sys as sys;

use crate::error::{Error, Result, from_code, last_os_error};
use crate::pd::ProtectionDomain;
use crate::qp::{ID_BLOCK, NEXT_WR_ID, Pending, Posted, RECV_BIT, sge};
use crate::wc::Completion;
use crate::wr::{PostError, RecvRequest};

/// The receives an SRQ holds, by hardware id, and its share of the process's id counter.
pub(crate) struct SrqShared {
    state: Mutex<SrqState>,
}

struct SrqState {
    pending: HashMap<u64, Pending>,
    next_id: u64,
    id_limit: u64,
}

impl SrqState {
    fn alloc_id(&mut self) -> u64 {
        if self.next_id >= self.id_limit {
            self.next_id = NEXT_WR_ID.fetch_add(ID_BLOCK, Ordering::Relaxed) & !RECV_BIT;
            self.id_limit = self.next_id + ID_BLOCK;
        }
        let id = self.next_id;
        self.next_id += 1;
        id | RECV_BIT
    }
}

impl SrqShared {
    fn lock(&self) -> MutexGuard<'_, SrqState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The completion of the receive with hardware id `wc.wr_id`, taken out of the SRQ; `None`
    /// when the SRQ holds no such receive (a completion of an earlier SRQ).
    pub(crate) fn complete(&self, wc: &sys::ibv_wc, qp_num: u32) -> Option<Completion> {
        let p = self.lock().pending.remove(&wc.wr_id)?;
        Some(p.into_completion(Some(wc), qp_num))
    }
}

pub(crate) struct SrqInner {
    srq: *mut sys::ibv_srq,
    // Dropped after the SRQ is destroyed (Drop::drop runs before the fields drop), so the
    // memory of receives still posted outlives the device's view of them.
    pub(crate) shared: Arc<SrqShared>,
    max_wr: u32,
    max_sge: u32,
    pd: ProtectionDomain,
}

impl SrqInner {
    pub(crate) fn pd_raw(&self) -> *mut sys::ibv_pd {
        self.pd.as_raw()
    }
}

// SAFETY: SRQ verbs are thread safe in rdma-core; our own state is behind a mutex.
unsafe impl Send for SrqInner {}
// SAFETY: as above.
unsafe impl Sync for SrqInner {}

impl Drop for SrqInner {
    fn drop(&mut self) {
        // SAFETY: the SRQ is live and destroyed once. Every queue pair attached to it holds an
        // Arc to this struct and destroys itself first, so none is attached any more; the PD
        // (a field) is still alive.
        unsafe { sys::ibv_destroy_srq(self.srq) };
    }
}

/// A shared receive queue (`ibv_srq`): receive buffers for every queue pair built with it.
/// Cheap to clone; destroyed after the last clone and the last queue pair using it.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// # let cq = ctx.create_cq(64)?;
/// let srq = pd.shared_receive_queue(1024, 1)?;
/// srq.post_recv([RecvRequest::new(1, pd.allocate(4096, Access::LOCAL_WRITE)?)])?;
/// let a = pd.queue_pair(&cq, &cq).srq(&srq).build()?;
/// let b = pd.queue_pair(&cq, &cq).srq(&srq).build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SharedReceiveQueue {
    pub(crate) inner: Arc<SrqInner>,
}

impl fmt::Debug for SharedReceiveQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedReceiveQueue")
            .field("max_wr", &self.inner.max_wr)
            .field("max_sge", &self.inner.max_sge)
            .field("posted", &self.posted())
            .finish()
    }
}

impl ProtectionDomain {
    /// Creates a shared receive queue (`ibv_create_srq`) holding up to `max_wr` receives of up
    /// to `max_sge` scatter/gather entries each.
    ///
    /// ```no_run
    /// # fn main() -> viaduct_verbs::Result<()> {
    /// let pd = viaduct_verbs::Context::open("rxe0")?.alloc_pd()?;
    /// let srq = pd.shared_receive_queue(128, 1)?;
    /// assert!(srq.max_wr() >= 128);
    /// # Ok(())
    /// # }
    /// ```
    pub fn shared_receive_queue(&self, max_wr: u32, max_sge: u32) -> Result<SharedReceiveQueue> {
        if max_wr == 0 || max_sge == 0 {
            return Err(Error::InvalidRequest(format!(
                "a shared receive queue needs room for at least one receive of one entry \
                 (asked for {max_wr} receives of {max_sge} entries)"
            )));
        }
        // SAFETY: plain old data; zero is valid.
        let mut init: sys::ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        init.attr.max_wr = max_wr;
        init.attr.max_sge = max_sge;
        // SAFETY: live PD; init is valid for the call; the SRQ keeps the PD alive (a field).
        let srq = unsafe { sys::ibv_create_srq(self.as_raw(), &mut init) };
        if srq.is_null() {
            return Err(Error::CreateSrq(last_os_error()));
        }
        Ok(SharedReceiveQueue {
            inner: Arc::new(SrqInner {
                srq,
                shared: Arc::new(SrqShared {
                    state: Mutex::new(SrqState {
                        pending: HashMap::new(),
                        next_id: 0,
                        id_limit: 0,
                    }),
                }),
                max_wr: init.attr.max_wr,
                max_sge: init.attr.max_sge,
                pd: self.clone(),
            }),
        })
    }
}

impl SharedReceiveQueue {
    /// Receives it can hold, as granted by the device (may exceed what was asked for).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert!(pd.shared_receive_queue(1024, 1)?.max_wr() >= 1024);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_wr(&self) -> u32 {
        self.inner.max_wr
    }

    /// Scatter/gather entries per receive, as granted.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert!(pd.shared_receive_queue(64, 2)?.max_sge() >= 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_sge(&self) -> u32 {
        self.inner.max_sge
    }

    /// Receives posted and not yet completed by a polled completion.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let srq = pd.shared_receive_queue(64, 1)?;
    /// srq.post_recv([RecvRequest::new(1, pd.allocate(4096, Access::LOCAL_WRITE)?)])?;
    /// assert_eq!(srq.posted(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn posted(&self) -> usize {
        self.inner.shared.lock().pending.len()
    }

    /// The raw `ibv_srq`, owned by this value: do not destroy it or post to it directly.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let raw = pd.shared_receive_queue(64, 1)?.as_raw(); // for a libibverbs call of your own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_raw(&self) -> *mut sys::ibv_srq {
        self.inner.srq
    }

    /// Posts receives, all in one `ibv_post_srq_recv` call. Each owns its memory until its
    /// completion is polled (from the receive completion queue of the queue pair that took the
    /// message). On failure the receives that did not reach the device come back in the error.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let srq = pd.shared_receive_queue(64, 1)?;
    /// let buf = pd.allocate(4096, Access::LOCAL_WRITE)?;
    /// srq.post_recv([RecvRequest::new(7, buf)])?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn post_recv(
        &self,
        requests: impl IntoIterator<Item = RecvRequest>,
    ) -> std::result::Result<(), PostError<RecvRequest>> {
        let shared = &self.inner.shared;
        let mut st = shared.lock();
        let mut ids = Vec::new();
        let mut sges: Vec<sys::ibv_sge> = Vec::new();
        let mut counts = Vec::new();
        for r in requests {
            let before = sges.len();
            sges.extend(
                r.segments
                    .iter()
                    .filter(|s| !s.is_empty())
                    .map(|s| sge(s.raw())),
            );
            counts.push(sges.len() - before);
            let hw_id = st.alloc_id();
            ids.push(hw_id);
            st.pending.insert(
                hw_id,
                Pending {
                    hw_id,
                    req: Posted::Recv(r),
                },
            );
        }
        if ids.is_empty() {
            return Ok(());
        }
        let take_back = |st: &mut SrqState, from: usize| -> Vec<RecvRequest> {
            ids[from..]
                .iter()
                .filter_map(|id| match st.pending.remove(id)?.req {
                    Posted::Recv(r) => Some(r),
                    Posted::Send(_) => None,
                })
                .collect()
        };
        if let Some(&n) = counts.iter().find(|&&n| n > self.inner.max_sge as usize) {
            return Err(PostError {
                error: Error::InvalidRequest(format!(
                    "a receive of {n} scatter/gather entries exceeds the shared receive \
                     queue's {} entries",
                    self.inner.max_sge
                )),
                unposted: take_back(&mut st, 0),
            });
        }
        let mut wrs: Vec<sys::ibv_recv_wr> = Vec::with_capacity(ids.len());
        let base = sges.as_mut_ptr();
        let mut offset = 0usize;
        for (&hw_id, &n) in ids.iter().zip(&counts) {
            let sg_list = if n > 0 {
                // SAFETY: offset + n <= sges.len(): the counts add up to the entries pushed.
                unsafe { base.add(offset) }
            } else {
                std::ptr::null_mut()
            };
            wrs.push(sys::ibv_recv_wr {
                wr_id: hw_id,
                next: std::ptr::null_mut(),
                sg_list,
                num_sge: n as libc::c_int,
            });
            offset += n;
        }
        let wbase = wrs.as_mut_ptr();
        for i in 0..wrs.len().saturating_sub(1) {
            // SAFETY: i + 1 < wrs.len(); `wrs` is not resized before the post below.
            unsafe { (*wbase.add(i)).next = wbase.add(i + 1) };
        }
        let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: live SRQ; a well-formed list whose entries live in `sges` through the call
        // and name memory owned by receives now in `pending` (which do not move their heap
        // buffers) until their completions are polled. The SRQ's lock is held, so no
        // completion is matched before every receive is recorded.
        let rc = unsafe { sys::ibv_post_srq_recv(self.inner.srq, wbase, &mut bad) };
        if rc != 0 {
            let posted = if bad.is_null() {
                0
            } else {
                ((bad as usize - wbase as usize) / std::mem::size_of::<sys::ibv_recv_wr>())
                    .min(ids.len())
            };
            return Err(PostError {
                error: Error::PostRecv(from_code(rc)),
                unposted: take_back(&mut st, posted),
            });
        }
        Ok(())
    }

    /// Arms the limit event: the device raises
    /// [`AsyncEventKind::SrqLimitReached`](crate::event::AsyncEventKind) once, when fewer than
    /// `limit` receives remain posted (`ibv_modify_srq` with `IBV_SRQ_LIMIT`); arm again
    /// after it. `limit` must be below [`max_wr`](Self::max_wr).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let srq = pd.shared_receive_queue(1024, 1)?;
    /// srq.arm_limit(16)?; // SrqLimitReached once fewer than 16 remain
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        if limit == 0 || limit >= self.inner.max_wr {
            return Err(Error::InvalidRequest(format!(
                "a shared receive queue's limit must lie in 1..{} (its size), not {limit}",
                self.inner.max_wr
            )));
        }
        // SAFETY: plain old data; zero is valid.
        let mut attr: sys::ibv_srq_attr = unsafe { std::mem::zeroed() };
        attr.srq_limit = limit;
        // SAFETY: live SRQ; attr valid for the field named by the mask.
        let rc = unsafe {
            sys::ibv_modify_srq(
                self.inner.srq,
                &mut attr,
                sys::ibv_srq_attr_mask::IBV_SRQ_LIMIT.0 as libc::c_int,
            )
        };
        if rc != 0 {
            return Err(Error::ModifySrq(from_code(rc)));
        }
        Ok(())
    }
}
