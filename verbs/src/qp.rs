//! Reliable-connected queue pairs, set up as a sequence of types:
//! [`QueuePairBuilder`] -> [`PreparedQueuePair`] (in INIT; gives its [`Endpoint`], takes
//! receives) -> [`PreparedQueuePair::connect`] (INIT -> RTR -> RTS) -> [`QueuePair`].
//!
//! A queue pair owns every request posted to it until the request's completion is polled from
//! its completion queue. Dropping the last handle moves the QP to the error state and destroys
//! it before the memory of still-outstanding requests is released, so the NIC never touches
//! freed memory.
//!
//! Only a connected queue pair can post sends; a prepared one cannot:
//!
//! ```compile_fail
//! fn f(qp: viaduct_verbs::PreparedQueuePair, r: viaduct_verbs::SendRequest) {
//!     qp.post_send(vec![r]);
//! }
//! ```
//!
//! And a region lent to a request cannot be touched until the completion gives it back:
//!
//! ```compile_fail
//! fn f(qp: &viaduct_verbs::QueuePair, mr: viaduct_verbs::MemoryRegion) {
//!     qp.post_send(vec![viaduct_verbs::SendRequest::send(1, mr)]).unwrap();
//!     let _ = mr.len();
//! }
//! ```

use std::collections::VecDeque;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rdma_sys as sys;

use crate::cq::CompletionQueue;
use crate::device::{Gid, LinkLayer, Mtu};
use crate::error::{Error, Result, from_code, last_os_error};
use crate::mr::Access;
use crate::pd::ProtectionDomain;
use crate::srq::{SharedReceiveQueue, SrqShared};
use crate::wc::{Completion, Opcode, Status};
use crate::wr::{PostError, RawSendRequest, RawSge, RecvRequest, Segment, SendOp, SendRequest};

/// Hardware work-request ids come from one counter for the whole process, so an id is never
/// reused and completions left behind by a destroyed queue pair cannot match a newer one's
/// requests. A queue pair takes them in blocks of `ID_BLOCK`, so posting needs no atomics.
pub(crate) static NEXT_WR_ID: AtomicU64 = AtomicU64::new(1);
pub(crate) const ID_BLOCK: u64 = 1 << 32;
/// Set on receive work-request ids: error completions carry no valid opcode, so the id tells
/// which queue a completion belongs to.
pub(crate) const RECV_BIT: u64 = 1 << 63;

pub(crate) enum Posted {
    Send(SendRequest),
    Recv(RecvRequest),
}

pub(crate) struct Pending {
    pub(crate) hw_id: u64,
    pub(crate) req: Posted,
}

impl Pending {
    #[inline]
    pub(crate) fn into_completion(self, wc: Option<&sys::ibv_wc>, qp_num: u32) -> Completion {
        let (id, posted_opcode, signalled, segments) = match self.req {
            Posted::Send(r) => (r.id, r.op.opcode(), r.signalled, r.segments),
            Posted::Recv(r) => (r.id, Opcode::Recv, true, r.segments),
        };
        match wc {
            // An unsignalled request before a completed signalled one: it succeeded.
            None => Completion {
                id,
                status: Status::Success,
                opcode: posted_opcode,
                byte_len: 0,
                imm: None,
                qp_num,
                vendor_err: 0,
                signalled,
                segments,
            },
            Some(wc) => {
                let status = Status::from_raw(wc.status);
                let opcode = if status.is_success() {
                    Opcode::from_raw(wc.opcode)
                } else {
                    posted_opcode
                };
                let with_imm = wc.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
                let imm = if status.is_success() && with_imm {
                    // SAFETY: with IBV_WC_WITH_IMM set, the union holds the immediate data.
                    Some(u32::from_be(unsafe {
                        wc.imm_data_invalidated_rkey_union.imm_data
                    }))
                } else {
                    None
                };
                Completion {
                    id,
                    status,
                    opcode,
                    byte_len: wc.byte_len,
                    imm,
                    qp_num,
                    vendor_err: wc.vendor_err,
                    signalled,
                    segments,
                }
            }
        }
    }
}

struct Queues {
    send: VecDeque<Pending>,
    recv: VecDeque<Pending>,
    /// Next hardware id of this queue pair, and the end of its current block.
    next_id: u64,
    id_limit: u64,
    /// Scratch arrays for building one post; empty between posts.
    wrs: Vec<sys::ibv_send_wr>,
    rwrs: Vec<sys::ibv_recv_wr>,
    sges: Vec<sys::ibv_sge>,
}

// SAFETY: the raw pointers in the scratch arrays only point into the arrays themselves and into
// memory owned by pending requests, and are only used during a post, under the mutex.
unsafe impl Send for Queues {}

/// The part of a queue pair its completion queues reach: outstanding requests and state.
pub(crate) struct QpShared {
    qp_num: u32,
    state: AtomicU32,
    queues: Mutex<Queues>,
    /// The shared receive queue its receives come from, if any.
    srq: Option<Arc<SrqShared>>,
}

impl Queues {
    #[inline]
    fn alloc_id(&mut self) -> u64 {
        if self.next_id >= self.id_limit {
            self.next_id = NEXT_WR_ID.fetch_add(ID_BLOCK, Ordering::Relaxed) & !RECV_BIT;
            self.id_limit = self.next_id + ID_BLOCK;
        }
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

impl QpShared {
    #[inline]
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Matches a work completion with its request (and completes the unsignalled requests
    /// posted before it on the same queue).
    #[inline]
    pub(crate) fn complete(&self, wc: &sys::ibv_wc, out: &mut VecDeque<Completion>) {
        if wc.wr_id & RECV_BIT != 0 {
            if let Some(srq) = &self.srq {
                // Receives of a shared queue complete one by one, each explicitly.
                out.extend(srq.complete(wc, self.qp_num));
                return;
            }
        }
        let mut q = self.lock();
        let queue = if wc.wr_id & RECV_BIT != 0 {
            &mut q.recv
        } else {
            &mut q.send
        };
        match queue.front() {
            // Left over from an earlier queue pair with the same number: not ours.
            None => return,
            Some(f) if f.hw_id > wc.wr_id => return,
            // The common case: the oldest request completed.
            Some(f) if f.hw_id == wc.wr_id => {
                if let Some(p) = queue.pop_front() {
                    out.push_back(p.into_completion(Some(wc), self.qp_num));
                }
                return;
            }
            Some(_) => {}
        }
        while let Some(p) = queue.pop_front() {
            if p.hw_id < wc.wr_id {
                out.push_back(p.into_completion(None, self.qp_num));
                continue;
            }
            if p.hw_id == wc.wr_id {
                out.push_back(p.into_completion(Some(wc), self.qp_num));
            } else {
                queue.push_front(p);
            }
            break;
        }
    }

    #[inline]
    fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }
}

/// Capacities of a queue pair's queues.
///
/// ```
/// # use viaduct_verbs::*;
/// let caps = Capabilities { max_inline_data: 64, ..Capabilities::default() };
/// assert_eq!((caps.max_send_wr, caps.max_inline_data), (128, 64));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Outstanding send work requests.
    pub max_send_wr: u32,
    /// Outstanding receive work requests.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive request.
    pub max_recv_sge: u32,
    /// Bytes a send request may carry inline.
    pub max_inline_data: u32,
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            max_send_wr: 128,
            max_recv_wr: 128,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        }
    }
}

/// Where a queue pair can be reached: what the peer needs to connect to it.
///
/// ```
/// # use viaduct_verbs::*;
/// let ep = Endpoint { qp_num: 17, psn: 1, lid: 0, gid: Gid::default(), port: 1, mtu: Mtu::Mtu1024 };
/// assert_eq!(Endpoint::from_bytes(&ep.to_bytes())?, ep);
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// QP number.
    pub qp_num: u32,
    /// Initial packet sequence number of its send queue (24 bits).
    pub psn: u32,
    /// LID of its port (0 on Ethernet).
    pub lid: u16,
    /// GID it sends from.
    pub gid: Gid,
    /// Its port number.
    pub port: u8,
    /// Active MTU of its port.
    pub mtu: Mtu,
}

impl Endpoint {
    /// Encoded size in bytes.
    pub const ENCODED_LEN: usize = 32;
    const VERSION: u8 = 1;

    /// Fixed little-endian encoding (version, port, MTU, QPN, PSN, LID, GID).
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// # let ep = Endpoint { qp_num: 17, psn: 1, lid: 0, gid: Gid::default(), port: 1, mtu: Mtu::Mtu1024 };
    /// let card: [u8; Endpoint::ENCODED_LEN] = ep.to_bytes(); // for the peer
    /// assert_eq!(card[0], 1); // the encoding's version
    /// ```
    pub fn to_bytes(&self) -> [u8; Self::ENCODED_LEN] {
        let mut b = [0u8; Self::ENCODED_LEN];
        b[0] = Self::VERSION;
        b[1] = self.port;
        b[2] = self.mtu.to_raw() as u8;
        b[4..8].copy_from_slice(&self.qp_num.to_le_bytes());
        b[8..12].copy_from_slice(&self.psn.to_le_bytes());
        b[12..14].copy_from_slice(&self.lid.to_le_bytes());
        b[16..32].copy_from_slice(&self.gid.0);
        b
    }

    /// Decodes [`to_bytes`](Self::to_bytes)' output.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// # let ep = Endpoint { qp_num: 17, psn: 1, lid: 0, gid: Gid::default(), port: 1, mtu: Mtu::Mtu1024 };
    /// assert_eq!(Endpoint::from_bytes(&ep.to_bytes())?.qp_num, 17);
    /// assert!(Endpoint::from_bytes(&[0; 32]).is_err()); // version 0
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        let bad = |reason: String| Error::Decode {
            what: "queue pair endpoint",
            reason,
        };
        if b.len() != Self::ENCODED_LEN {
            return Err(bad(format!(
                "{} bytes, expected {}",
                b.len(),
                Self::ENCODED_LEN
            )));
        }
        if b[0] != Self::VERSION {
            return Err(bad(format!("version {}, expected {}", b[0], Self::VERSION)));
        }
        if !(1..=5).contains(&b[2]) {
            return Err(bad(format!("MTU code {} is not 1..=5", b[2])));
        }
        // Bytes the encoding leaves zero: anything else is another encoding or damage, not
        // something to connect to.
        if let Some(i) = [3usize, 11, 14, 15].into_iter().find(|&i| b[i] != 0) {
            return Err(bad(format!(
                "byte {i} is {:#04x}, expected 0 (reserved{})",
                b[i],
                if i == 11 { ": a PSN has 24 bits" } else { "" }
            )));
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[16..32]);
        Ok(Self {
            port: b[1],
            mtu: Mtu::from_raw(u32::from(b[2])),
            qp_num: u32_at(4),
            psn: u32_at(8) & 0x00ff_ffff,
            lid: u16::from_le_bytes([b[12], b[13]]),
            gid: Gid(gid),
        })
    }
}

/// Reliability parameters of [`PreparedQueuePair::connect`].
///
/// ```
/// # use viaduct_verbs::*;
/// let options = ConnectOptions { retry_count: 3, mtu: Some(Mtu::Mtu1024), ..ConnectOptions::default() };
/// assert_eq!(options.retry_count, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Local ACK timeout exponent: 4.096 us * 2^timeout (0 = infinite; 14 is about 67 ms).
    pub timeout: u8,
    /// Transport retries before [`Status::RetryExceeded`] (0..=7).
    pub retry_count: u8,
    /// Receiver-not-ready retries before [`Status::RnrRetryExceeded`] (0..=6; 7 = forever).
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer code (0..=31; 12 is 0.64 ms).
    pub min_rnr_timer: u8,
    /// Outstanding RDMA reads/atomics this side issues (clamped to the device's limit).
    pub max_rd_atomic: u8,
    /// Outstanding RDMA reads/atomics this side accepts (clamped to the device's limit).
    pub max_dest_rd_atomic: u8,
    /// Path MTU; `None` takes the smaller of both ports' active MTUs.
    pub mtu: Option<Mtu>,
    /// GRH hop limit.
    pub hop_limit: u8,
    /// GRH traffic class.
    pub traffic_class: u8,
    /// Service level.
    pub service_level: u8,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            timeout: 14,
            retry_count: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            mtu: None,
            hop_limit: 64,
            traffic_class: 0,
            service_level: 0,
        }
    }
}

pub(crate) struct QpInner {
    qp: *mut sys::ibv_qp,
    // Dropped after the QP is destroyed (Drop::drop runs before fields drop), so memory owned
    // by outstanding requests outlives the hardware's view of them.
    shared: Arc<QpShared>,
    caps: Capabilities,
    local: Endpoint,
    gid_index: u32,
    link_layer: LinkLayer,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    pd: ProtectionDomain,
    /// Kept alive until the QP is destroyed (fields drop after `Drop::drop`).
    srq: Option<SharedReceiveQueue>,
}

// SAFETY: QP verbs are thread safe in rdma-core; our own state is atomics and mutexes.
unsafe impl Send for QpInner {}
// SAFETY: as above.
unsafe impl Sync for QpInner {}

impl Drop for QpInner {
    fn drop(&mut self) {
        for cq in [&self.send_cq, &self.recv_cq] {
            let mut reg = cq.inner.registry.lock().unwrap_or_else(|e| e.into_inner());
            reg.retain(|(_, s)| !Arc::ptr_eq(s, &self.shared));
        }
        let _ = modify_state(self.qp, sys::ibv_qp_state::IBV_QPS_ERR);
        // SAFETY: the QP is live and destroyed once. Its CQs and PD are fields of self, so they
        // are still alive; the memory of outstanding requests (in `shared`) is released only
        // after this call, when the NIC no longer processes the QP.
        unsafe { sys::ibv_destroy_qp(self.qp) };
    }
}

fn state_name(s: u32) -> &'static str {
    use sys::ibv_qp_state::*;
    match s {
        IBV_QPS_RESET => "RESET",
        IBV_QPS_INIT => "INIT",
        IBV_QPS_RTR => "RTR",
        IBV_QPS_RTS => "RTS",
        IBV_QPS_SQD => "SQD",
        IBV_QPS_SQE => "SQE",
        IBV_QPS_ERR => "ERR",
        _ => "UNKNOWN",
    }
}

fn modify_state(qp: *mut sys::ibv_qp, state: u32) -> Result<()> {
    // SAFETY: ibv_qp_attr is plain old data; zero is valid.
    let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    attr.qp_state = state;
    modify(qp, &mut attr, sys::ibv_qp_attr_mask::IBV_QP_STATE.0, state)
}

fn modify(qp: *mut sys::ibv_qp, attr: &mut sys::ibv_qp_attr, mask: u32, state: u32) -> Result<()> {
    // SAFETY: live QP; attr valid for the fields named in mask.
    let rc = unsafe { sys::ibv_modify_qp(qp, attr, mask as libc::c_int) };
    if rc != 0 {
        return Err(Error::ModifyQp {
            state: state_name(state),
            source: from_code(rc),
        });
    }
    Ok(())
}

/// Configures and creates an RC queue pair.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// # let cq = ctx.create_cq(64)?;
/// let prepared = pd.queue_pair(&cq, &cq).max_send_wr(256).max_inline_data(64).build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct QueuePairBuilder {
    pd: ProtectionDomain,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    caps: Capabilities,
    port: u8,
    gid_index: Option<u32>,
    access: Access,
    srq: Option<SharedReceiveQueue>,
}

impl ProtectionDomain {
    /// Starts building an RC queue pair completing into `send_cq` and `recv_cq` (may be the
    /// same queue).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let (send_cq, recv_cq) = (ctx.create_cq(64)?, ctx.create_cq(64)?);
    /// let prepared = pd.queue_pair(&send_cq, &recv_cq).build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn queue_pair(
        &self,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
    ) -> QueuePairBuilder {
        QueuePairBuilder {
            pd: self.clone(),
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            caps: Capabilities::default(),
            port: 1,
            gid_index: None,
            access: Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            srq: None,
        }
    }
}

impl QueuePairBuilder {
    /// Outstanding send work requests (default 128).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let p = pd.queue_pair(&cq, &cq).max_send_wr(512).build()?;
    /// assert!(p.capabilities().max_send_wr >= 512);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_send_wr(mut self, n: u32) -> Self {
        self.caps.max_send_wr = n;
        self
    }

    /// Outstanding receive work requests (default 128).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let p = pd.queue_pair(&cq, &cq).max_recv_wr(512).build()?;
    /// assert!(p.capabilities().max_recv_wr >= 512);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_recv_wr(mut self, n: u32) -> Self {
        self.caps.max_recv_wr = n;
        self
    }

    /// Scatter/gather entries per send request (default 1).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let p = pd.queue_pair(&cq, &cq).max_send_sge(4).build()?;
    /// assert!(p.capabilities().max_send_sge >= 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_send_sge(mut self, n: u32) -> Self {
        self.caps.max_send_sge = n;
        self
    }

    /// Scatter/gather entries per receive request (default 1).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let p = pd.queue_pair(&cq, &cq).max_recv_sge(2).build()?;
    /// assert!(p.capabilities().max_recv_sge >= 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_recv_sge(mut self, n: u32) -> Self {
        self.caps.max_recv_sge = n;
        self
    }

    /// Bytes a send request may carry inline (default 0).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let p = pd.queue_pair(&cq, &cq).max_inline_data(128).build()?;
    /// assert!(p.capabilities().max_inline_data >= 128);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_inline_data(mut self, n: u32) -> Self {
        self.caps.max_inline_data = n;
        self
    }

    /// Port to use (default 1).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let p = pd.queue_pair(&cq, &cq).port(1).build()?;
    /// assert_eq!(p.endpoint().port, 1);
    /// // A port the device does not have is refused when the queue pair is built.
    /// assert!(pd.queue_pair(&cq, &cq).port(200).build().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn port(mut self, port: u8) -> Self {
        self.port = port;
        self
    }

    /// GID index to send from (perftest's `-x`); default: chosen by
    /// [`Context::choose_gid`](crate::device::Context::choose_gid).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let p = pd.queue_pair(&cq, &cq).gid_index(ctx.choose_gid(1)?.index).build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gid_index(mut self, index: u32) -> Self {
        self.gid_index = Some(index);
        self
    }

    /// What peers may do to memory through this QP (default: remote write and read).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    /// let p = pd.queue_pair(&cq, &cq).access(access).build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }

    /// Takes receives from `srq` instead of a receive queue of its own (see [`crate::srq`]);
    /// [`max_recv_wr`](Self::max_recv_wr) and [`max_recv_sge`](Self::max_recv_sge) then do not
    /// apply, and posting a receive to the queue pair itself is refused. The SRQ must belong
    /// to the same protection domain.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let srq = pd.shared_receive_queue(1024, 1)?;
    /// let p = pd.queue_pair(&cq, &cq).srq(&srq).build()?; // receives come from the SRQ
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn srq(mut self, srq: &SharedReceiveQueue) -> Self {
        self.srq = Some(srq.clone());
        self
    }

    /// Creates the QP (`ibv_create_qp`) and moves it to INIT.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let prepared = pd.queue_pair(&cq, &cq).build()?;
    /// let card = prepared.endpoint().to_bytes(); // exchange with the peer
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn build(self) -> Result<PreparedQueuePair> {
        let ctx = self.pd.context();
        let port = ctx.port(self.port)?;
        let (gid_index, gid) = match self.gid_index {
            Some(i) => (i, ctx.gid(self.port, i)?),
            None if port.link_layer == LinkLayer::Ethernet => {
                let e = ctx.choose_gid(self.port)?;
                (e.index, e.gid)
            }
            None => (0, ctx.gid(self.port, 0).unwrap_or_default()),
        };
        // SAFETY: ibv_qp_init_attr is plain old data; zero is valid.
        let mut init: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        init.send_cq = self.send_cq.inner.as_ptr();
        init.recv_cq = self.recv_cq.inner.as_ptr();
        init.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
        init.sq_sig_all = 0;
        let (max_recv_wr, max_recv_sge) = match &self.srq {
            Some(srq) => {
                if srq.inner.pd_raw() != self.pd.as_raw() {
                    return Err(Error::InvalidRequest(
                        "the shared receive queue belongs to another protection domain".into(),
                    ));
                }
                init.srq = srq.as_raw();
                (0, 0)
            }
            None => (self.caps.max_recv_wr, self.caps.max_recv_sge),
        };
        init.cap = sys::ibv_qp_cap {
            max_send_wr: self.caps.max_send_wr,
            max_recv_wr,
            max_send_sge: self.caps.max_send_sge,
            max_recv_sge,
            max_inline_data: self.caps.max_inline_data,
        };
        // SAFETY: live PD and CQs of the same context; the QP keeps all three alive.
        let qp = unsafe { sys::ibv_create_qp(self.pd.as_raw(), &mut init) };
        if qp.is_null() {
            return Err(Error::CreateQp(last_os_error()));
        }
        let caps = Capabilities {
            max_send_wr: init.cap.max_send_wr,
            max_recv_wr: init.cap.max_recv_wr,
            max_send_sge: init.cap.max_send_sge,
            max_recv_sge: init.cap.max_recv_sge,
            max_inline_data: init.cap.max_inline_data,
        };
        // SAFETY: the QP was just created.
        let qp_num = unsafe { (*qp).qp_num };
        let shared = Arc::new(QpShared {
            qp_num,
            state: AtomicU32::new(sys::ibv_qp_state::IBV_QPS_RESET),
            queues: Mutex::new(Queues {
                send: VecDeque::new(),
                recv: VecDeque::new(),
                next_id: 0,
                id_limit: 0,
                wrs: Vec::new(),
                rwrs: Vec::new(),
                sges: Vec::new(),
            }),
            srq: self.srq.as_ref().map(|s| s.inner.shared.clone()),
        });
        let psn = (RandomState::new().build_hasher().finish() as u32) & 0x00ff_ffff;
        let inner = Arc::new(QpInner {
            qp,
            shared: shared.clone(),
            caps,
            local: Endpoint {
                qp_num,
                psn,
                lid: port.lid,
                gid,
                port: self.port,
                mtu: port.active_mtu,
            },
            gid_index,
            link_layer: port.link_layer,
            send_cq: self.send_cq.clone(),
            recv_cq: self.recv_cq.clone(),
            pd: self.pd.clone(),
            srq: self.srq.clone(),
        });
        for cq in [&self.send_cq, &self.recv_cq] {
            let mut reg = cq.inner.registry.lock().unwrap_or_else(|e| e.into_inner());
            // A stale entry with this number belongs to a destroyed QP whose drop is under way.
            reg.retain(|(n, _)| *n != qp_num);
            reg.push((qp_num, shared.clone()));
        }
        // SAFETY: plain old data; zero is valid.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = self.port;
        attr.qp_access_flags = self.access.bits();
        use sys::ibv_qp_attr_mask as M;
        let mask = M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS;
        modify(qp, &mut attr, mask.0, sys::ibv_qp_state::IBV_QPS_INIT)?;
        shared
            .state
            .store(sys::ibv_qp_state::IBV_QPS_INIT, Ordering::Release);
        Ok(PreparedQueuePair { inner })
    }
}

/// A queue pair in INIT: it can take receives and gives the endpoint a peer connects to.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// # let cq = ctx.create_cq(64)?;
/// let prepared = pd.queue_pair(&cq, &cq).build()?;
/// let remote = prepared.endpoint(); // the peer's, in a real run
/// let qp = prepared.connect(&remote, &ConnectOptions::default())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PreparedQueuePair {
    inner: Arc<QpInner>,
}

impl fmt::Debug for PreparedQueuePair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedQueuePair")
            .field("endpoint", &self.inner.local)
            .finish()
    }
}

impl PreparedQueuePair {
    /// What the peer needs to connect to this queue pair.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let prepared = pd.queue_pair(&cq, &cq).build()?;
    /// println!("QP {} on port {}", prepared.endpoint().qp_num, prepared.endpoint().port);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn endpoint(&self) -> Endpoint {
        self.inner.local
    }

    /// Capacities granted by the device (may exceed those asked for).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let prepared = pd.queue_pair(&cq, &cq).build()?;
    /// println!("{:?}", prepared.capabilities());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capabilities(&self) -> Capabilities {
        self.inner.caps
    }

    /// Posts receives before connecting, so the peer's first sends find them.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let prepared = pd.queue_pair(&cq, &cq).build()?;
    /// let buf = pd.allocate(4096, Access::LOCAL_WRITE)?;
    /// prepared.post_recv([RecvRequest::new(1, buf)])?; // ready before the peer's first send
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn post_recv(
        &self,
        requests: impl IntoIterator<Item = RecvRequest>,
    ) -> Result<(), PostError<RecvRequest>> {
        post_recv(&self.inner, requests)
    }

    /// Connects to `remote`: INIT -> RTR -> RTS (`ibv_modify_qp` twice).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// let prepared = pd.queue_pair(&cq, &cq).build()?;
    /// let remote = Endpoint::from_bytes(&prepared.endpoint().to_bytes())?; // the peer's card
    /// let qp = prepared.connect(&remote, &ConnectOptions::default())?;
    /// assert_eq!(qp.state(), "RTS");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn connect(self, remote: &Endpoint, options: &ConnectOptions) -> Result<QueuePair> {
        let inner = &self.inner;
        let dev = inner.pd.context().attributes()?;
        let clamp = |want: u8, max: i32| -> u8 {
            let m = u8::try_from(max.max(1)).unwrap_or(u8::MAX);
            want.clamp(1, m)
        };
        let mtu = options
            .mtu
            .unwrap_or(std::cmp::min(inner.local.mtu, remote.mtu));
        use sys::ibv_qp_attr_mask as M;

        // SAFETY: plain old data; zero is valid.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
        attr.path_mtu = mtu.to_raw();
        attr.dest_qp_num = remote.qp_num;
        attr.rq_psn = remote.psn;
        attr.max_dest_rd_atomic = clamp(options.max_dest_rd_atomic, dev.max_qp_rd_atom);
        attr.min_rnr_timer = options.min_rnr_timer;
        attr.ah_attr.dlid = remote.lid;
        attr.ah_attr.sl = options.service_level;
        attr.ah_attr.port_num = inner.local.port;
        if !remote.gid.is_zero() || inner.link_layer == LinkLayer::Ethernet {
            attr.ah_attr.is_global = 1;
            attr.ah_attr.grh.dgid = sys::ibv_gid { raw: remote.gid.0 };
            attr.ah_attr.grh.sgid_index = u8::try_from(inner.gid_index).unwrap_or(0);
            attr.ah_attr.grh.hop_limit = options.hop_limit;
            attr.ah_attr.grh.traffic_class = options.traffic_class;
        }
        let mask = M::IBV_QP_STATE
            | M::IBV_QP_AV
            | M::IBV_QP_PATH_MTU
            | M::IBV_QP_DEST_QPN
            | M::IBV_QP_RQ_PSN
            | M::IBV_QP_MAX_DEST_RD_ATOMIC
            | M::IBV_QP_MIN_RNR_TIMER;
        modify(inner.qp, &mut attr, mask.0, sys::ibv_qp_state::IBV_QPS_RTR)?;
        inner
            .shared
            .state
            .store(sys::ibv_qp_state::IBV_QPS_RTR, Ordering::Release);

        // SAFETY: plain old data; zero is valid.
        let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        attr.qp_state = sys::ibv_qp_state::IBV_QPS_RTS;
        attr.timeout = options.timeout;
        attr.retry_cnt = options.retry_count;
        attr.rnr_retry = options.rnr_retry;
        attr.sq_psn = inner.local.psn;
        attr.max_rd_atomic = clamp(options.max_rd_atomic, dev.max_qp_init_rd_atom);
        let mask = M::IBV_QP_STATE
            | M::IBV_QP_TIMEOUT
            | M::IBV_QP_RETRY_CNT
            | M::IBV_QP_RNR_RETRY
            | M::IBV_QP_SQ_PSN
            | M::IBV_QP_MAX_QP_RD_ATOMIC;
        modify(inner.qp, &mut attr, mask.0, sys::ibv_qp_state::IBV_QPS_RTS)?;
        inner
            .shared
            .state
            .store(sys::ibv_qp_state::IBV_QPS_RTS, Ordering::Release);
        Ok(QueuePair {
            inner: self.inner,
            remote: *remote,
        })
    }
}

/// A connected RC queue pair. Clone it to post from several threads.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// # let cq = ctx.create_cq(64)?;
/// # let qp = pd.queue_pair(&cq, &cq).build()?;
/// # let me = qp.endpoint();
/// # let qp = qp.connect(&me, &ConnectOptions::default())?;
/// let msg = pd.allocate(64, Access::empty())?;
/// qp.post_send([SendRequest::send(1, msg)])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct QueuePair {
    inner: Arc<QpInner>,
    remote: Endpoint,
}

impl fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueuePair")
            .field("local", &self.inner.local)
            .field("remote", &self.remote)
            .field("state", &self.state())
            .finish()
    }
}

impl QueuePair {
    /// This side's endpoint.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// println!("QP {}", qp.endpoint().qp_num);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn endpoint(&self) -> Endpoint {
        self.inner.local
    }

    /// The peer's endpoint.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// println!("connected to QP {}", qp.remote().qp_num);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remote(&self) -> Endpoint {
        self.remote
    }

    /// QP number.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// assert_eq!(qp.qp_num(), qp.endpoint().qp_num);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn qp_num(&self) -> u32 {
        self.inner.local.qp_num
    }

    /// Capacities granted by the device.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// let inline_max = qp.capabilities().max_inline_data;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capabilities(&self) -> Capabilities {
        self.inner.caps
    }

    /// State as last set through this API (`RTS`, or `ERR` after
    /// [`set_error`](Self::set_error)).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// assert_eq!(qp.state(), "RTS");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn state(&self) -> &'static str {
        state_name(self.inner.shared.state())
    }

    /// The raw `ibv_qp`, owned by this queue pair: do not destroy it or post to it directly.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// let raw = qp.as_raw(); // for a libibverbs call of your own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_raw(&self) -> *mut sys::ibv_qp {
        self.inner.qp
    }

    /// Moves the QP to the error state: every outstanding request completes with
    /// [`Status::WrFlush`] (or its own error), exactly once; later posts are refused.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// qp.set_error()?; // outstanding requests complete with WrFlush
    /// assert_eq!(qp.state(), "ERR");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_error(&self) -> Result<()> {
        // Taken so no post runs between the state change and its bookkeeping.
        let _q = self.inner.shared.lock();
        modify_state(self.inner.qp, sys::ibv_qp_state::IBV_QPS_ERR)?;
        self.inner
            .shared
            .state
            .store(sys::ibv_qp_state::IBV_QPS_ERR, Ordering::Release);
        Ok(())
    }

    /// Posts receives, all in one `ibv_post_recv` call.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// let bufs = (1..=4).map(|id| Ok(RecvRequest::new(id, pd.allocate(4096, Access::LOCAL_WRITE)?)));
    /// qp.post_recv(bufs.collect::<Result<Vec<_>>>()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn post_recv(
        &self,
        requests: impl IntoIterator<Item = RecvRequest>,
    ) -> Result<(), PostError<RecvRequest>> {
        post_recv(&self.inner, requests)
    }

    /// Posts send-queue requests, all in one `ibv_post_send` call (a linked list, one
    /// doorbell). Each request owns its memory until its completion is polled. On failure the
    /// requests that did not reach the NIC come back in the error.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// let (a, b) = (pd.allocate(64, Access::empty())?, pd.allocate(64, Access::empty())?);
    /// qp.post_send([SendRequest::send(1, a).unsignalled(), SendRequest::send(2, b)])?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn post_send(
        &self,
        requests: impl IntoIterator<Item = SendRequest>,
    ) -> Result<(), PostError<SendRequest>> {
        let mut it = requests.into_iter();
        let first = it.next();
        let second = if first.is_some() { it.next() } else { None };
        match (first, second) {
            // The common case, one request: no scratch arrays, no list to link.
            (Some(r), None) if r.segments.len() <= 1 => self.post_send_one(r),
            (first, second) => self.post_send_many(first.into_iter().chain(second).chain(it)),
        }
    }

    /// Posts one send request of at most one segment, its descriptor built on the stack.
    #[inline]
    fn post_send_one(&self, r: SendRequest) -> Result<(), PostError<SendRequest>> {
        let shared = &*self.inner.shared;
        let mut q = shared.lock();
        if shared.state() != sys::ibv_qp_state::IBV_QPS_RTS {
            return Err(PostError {
                error: self.not_connected(),
                unposted: vec![r],
            });
        }
        if let Err(error) = r.validate() {
            return Err(PostError {
                error,
                unposted: vec![r],
            });
        }
        let hw_id = q.alloc_id();
        let mut wr = send_wr(hw_id, r.op, (r.signalled, r.inline, r.solicited));
        let mut entry = match r.segments.first() {
            Some(s) if !s.is_empty() => Some(sge(s.raw())),
            _ => None,
        };
        if let Some(e) = &mut entry {
            wr.sg_list = e;
            wr.num_sge = 1;
        }
        let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: live QP; a single work request whose scatter/gather entry (if any) lives on
        // this stack frame through the call and names the heap buffer of the request's segment.
        // That buffer does not move when the request moves into the queue below, and the
        // request stays there, owning it, until its completion is polled. The queue lock is
        // held, so no completion is matched before the request is queued.
        let rc = unsafe { sys::ibv_post_send(self.inner.qp, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(PostError {
                error: Error::PostSend(from_code(rc)),
                unposted: vec![r],
            });
        }
        q.send.push_back(Pending {
            hw_id,
            req: Posted::Send(r),
        });
        Ok(())
    }

    /// Posts any number of send requests as one linked list, built in the scratch arrays.
    fn post_send_many(
        &self,
        requests: impl Iterator<Item = SendRequest>,
    ) -> Result<(), PostError<SendRequest>> {
        let shared = &self.inner.shared;
        let mut guard = shared.lock();
        let q = &mut *guard;
        // The requests wait in the queue while their descriptors are built; the lock keeps
        // completions from looking at them before the post.
        let start = q.send.len();
        let mut refused =
            (shared.state() != sys::ibv_qp_state::IBV_QPS_RTS).then(|| self.not_connected());
        for r in requests {
            if refused.is_none() {
                refused = r.validate().err();
            }
            let hw_id = if refused.is_none() {
                let id = q.alloc_id();
                push_send_wr(
                    &mut q.wrs,
                    &mut q.sges,
                    id,
                    r.op,
                    r.segments.iter().map(Segment::raw),
                    (r.signalled, r.inline, r.solicited),
                );
                id
            } else {
                0
            };
            q.send.push_back(Pending {
                hw_id,
                req: Posted::Send(r),
            });
        }
        let Queues {
            send, wrs, sges, ..
        } = q;
        if let Some(error) = refused {
            wrs.clear();
            sges.clear();
            return Err(PostError {
                error,
                unposted: take_sends(send, start),
            });
        }
        let (posted, error) = post_send_list(self.inner.qp, wrs, sges);
        match error {
            None => Ok(()),
            Some(error) => Err(PostError {
                error,
                unposted: take_sends(send, start + posted),
            }),
        }
    }

    /// Posts send-queue requests over raw scatter/gather entries in one `ibv_post_send` call;
    /// their completions carry no segments. Returns how many were posted before an error.
    ///
    /// # Safety
    ///
    /// Every byte named by every entry must lie in a live memory region of this queue pair's
    /// protection domain (with the access the operation needs), and must stay valid, and not
    /// be written by the CPU while the NIC may read it or read while the NIC may write it,
    /// until the request's completion (or that of a later signalled request) is polled.
    /// Inline requests are copied during this call.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// # qp.post_recv([RecvRequest::new(2, pd.allocate(64, Access::LOCAL_WRITE)?)])?;
    /// let mr = pd.allocate(64, Access::empty())?;
    /// let sge = [RawSge { addr: mr.addr(), len: 64, lkey: mr.lkey() }];
    /// let wr = RawSendRequest { id: 1, op: SendOp::Send, sges: &sge, signalled: true, inline: false };
    /// // SAFETY: `mr` lives, and is not written, until the completion is polled.
    /// let posted = unsafe { qp.post_send_raw(&[wr])? };
    /// # let mut done = Completions::default();
    /// # cq.wait(&mut done, 2, std::time::Duration::from_secs(5))?; // the send and the receive
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub unsafe fn post_send_raw(&self, requests: &[RawSendRequest<'_>]) -> Result<usize> {
        let shared = &self.inner.shared;
        let mut guard = shared.lock();
        if shared.state() != sys::ibv_qp_state::IBV_QPS_RTS {
            return Err(self.not_connected());
        }
        for r in requests {
            if let SendOp::FetchAdd { remote, .. } | SendOp::CompareSwap { remote, .. } = r.op {
                let local = r.sges.iter().map(|e| e.len as usize).sum();
                crate::wr::validate_atomic(r.id, local, r.inline, &remote)?;
            }
        }
        let q = &mut *guard;
        let start = q.send.len();
        for r in requests {
            let hw_id = q.alloc_id();
            push_send_wr(
                &mut q.wrs,
                &mut q.sges,
                hw_id,
                r.op,
                r.sges.iter().copied(),
                (r.signalled, r.inline, false),
            );
            let mut req = SendRequest::new(r.id, r.op, Vec::new());
            req.signalled = r.signalled;
            q.send.push_back(Pending {
                hw_id,
                req: Posted::Send(req),
            });
        }
        let (n, err) = post_send_list(self.inner.qp, &mut q.wrs, &mut q.sges);
        q.send.truncate(start + n);
        match err {
            Some(e) if n == 0 => Err(e),
            _ => Ok(n),
        }
    }

    /// Posts one send-queue request whose bytes are copied into the work request during this
    /// call (`IBV_SEND_INLINE`), so `data` is free again when it returns; `data.len()` must not
    /// exceed [`Capabilities::max_inline_data`]. The completion (when `signalled`, or when a
    /// later signalled request completes) carries no segments.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// qp.post_send_inline(1, SendOp::Send, b"small", true)?; // the bytes are copied now
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn post_send_inline(
        &self,
        id: u64,
        op: SendOp,
        data: &[u8],
        signalled: bool,
    ) -> Result<()> {
        if data.len() > self.inner.caps.max_inline_data as usize {
            return Err(Error::InvalidRequest(format!(
                "{} bytes inline exceed this queue pair's inline size of {}",
                data.len(),
                self.inner.caps.max_inline_data
            )));
        }
        if matches!(op, SendOp::Read(_)) {
            return Err(Error::InvalidRequest(
                "an RDMA READ cannot be inline: its local side is written".to_owned(),
            ));
        }
        let sge = [RawSge {
            addr: data.as_ptr() as u64,
            len: data.len() as u32,
            lkey: 0,
        }];
        let req = RawSendRequest {
            id,
            op,
            sges: &sge,
            signalled,
            inline: true,
        };
        // SAFETY: the request is inline, so the provider copies `data` during the call and
        // keeps no reference to it afterwards; inline data needs no registered region.
        unsafe { self.post_send_raw(&[req]) }.map(|_| ())
    }

    fn not_connected(&self) -> Error {
        Error::NotConnected {
            qp_num: self.qp_num(),
            state: self.state(),
        }
    }
}

#[inline]
pub(crate) fn sge(s: RawSge) -> sys::ibv_sge {
    sys::ibv_sge {
        addr: s.addr,
        length: s.len,
        lkey: s.lkey,
    }
}

/// The send requests from `from` on, taken back out of the queue (they were not posted).
fn take_sends(send: &mut VecDeque<Pending>, from: usize) -> Vec<SendRequest> {
    send.drain(from..)
        .filter_map(|p| match p.req {
            Posted::Send(r) => Some(r),
            Posted::Recv(_) => None,
        })
        .collect()
}

/// Appends one send work request and its scatter/gather entries to the scratch arrays. The
/// list pointers are set by [`post_send_list`], once the arrays stop growing.
fn push_send_wr(
    wrs: &mut Vec<sys::ibv_send_wr>,
    sges: &mut Vec<sys::ibv_sge>,
    hw_id: u64,
    op: SendOp,
    entries: impl Iterator<Item = RawSge>,
    flags: (bool, bool, bool),
) {
    let before = sges.len();
    sges.extend(entries.filter(|e| e.len > 0).map(sge));
    let mut wr = send_wr(hw_id, op, flags);
    wr.num_sge = (sges.len() - before) as libc::c_int;
    wrs.push(wr);
}

/// A send work request without scatter/gather entries or list link.
#[inline]
fn send_wr(
    hw_id: u64,
    op: SendOp,
    (signalled, inline, solicited): (bool, bool, bool),
) -> sys::ibv_send_wr {
    // SAFETY: ibv_send_wr is integers, raw pointers and unions of those; zero is valid.
    let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = hw_id;
    let mut flags = 0u32;
    if signalled {
        flags |= sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
    }
    if inline {
        flags |= sys::ibv_send_flags::IBV_SEND_INLINE.0;
    }
    if solicited {
        flags |= sys::ibv_send_flags::IBV_SEND_SOLICITED.0;
    }
    wr.send_flags = flags;
    use sys::ibv_wr_opcode::*;
    let (opcode, imm, remote) = match op {
        SendOp::Send => (IBV_WR_SEND, None, None),
        SendOp::SendWithImm(i) => (IBV_WR_SEND_WITH_IMM, Some(i), None),
        SendOp::Write(r) => (IBV_WR_RDMA_WRITE, None, Some(r)),
        SendOp::WriteWithImm(r, i) => (IBV_WR_RDMA_WRITE_WITH_IMM, Some(i), Some(r)),
        SendOp::Read(r) => (IBV_WR_RDMA_READ, None, Some(r)),
        SendOp::FetchAdd { remote, add } => {
            wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
            wr.wr.atomic = sys::atomic_t {
                remote_addr: remote.addr,
                compare_add: add,
                swap: 0,
                rkey: remote.rkey,
            };
            return wr;
        }
        SendOp::CompareSwap {
            remote,
            compare,
            swap,
        } => {
            wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
            wr.wr.atomic = sys::atomic_t {
                remote_addr: remote.addr,
                compare_add: compare,
                swap,
                rkey: remote.rkey,
            };
            return wr;
        }
    };
    wr.opcode = opcode;
    if let Some(i) = imm {
        wr.imm_data_invalidated_rkey_union.imm_data = i.to_be();
    }
    if let Some(r) = remote {
        wr.wr.rdma = sys::rdma_t {
            remote_addr: r.addr,
            rkey: r.rkey,
        };
    }
    wr
}

/// Links the scratch send work requests into one list, posts it with one `ibv_post_send`, and
/// empties the scratch arrays. Returns how many were posted, and the error if not all were.
#[inline]
fn post_send_list(
    qp: *mut sys::ibv_qp,
    wrs: &mut Vec<sys::ibv_send_wr>,
    sges: &mut Vec<sys::ibv_sge>,
) -> (usize, Option<Error>) {
    let n = wrs.len();
    if n == 0 {
        return (0, None);
    }
    let sge_base = sges.as_mut_ptr();
    let base = wrs.as_mut_ptr();
    let mut offset = 0usize;
    for i in 0..n {
        // SAFETY: i < n; the arrays are not resized until they are cleared below, so the
        // pointers into them stay valid through the post.
        unsafe {
            let wr = &mut *base.add(i);
            if wr.num_sge > 0 {
                wr.sg_list = sge_base.add(offset);
                offset += wr.num_sge as usize;
            }
            if i + 1 < n {
                wr.next = base.add(i + 1);
            }
        }
    }
    let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
    // SAFETY: live QP; a well-formed list whose scatter/gather entries name memory owned by
    // the pending requests (or vouched for by the caller of the raw path) until completion.
    let rc = unsafe { sys::ibv_post_send(qp, base, &mut bad) };
    let result = if rc == 0 {
        (n, None)
    } else {
        (
            bad_index(base, bad, n),
            Some(Error::PostSend(from_code(rc))),
        )
    };
    wrs.clear();
    sges.clear();
    result
}

#[inline]
fn bad_index<T>(base: *const T, bad: *const T, n: usize) -> usize {
    let (b, x) = (base as usize, bad as usize);
    if bad.is_null() || x < b {
        return 0;
    }
    ((x - b) / std::mem::size_of::<T>()).min(n)
}

#[inline]
fn post_recv(
    inner: &QpInner,
    requests: impl IntoIterator<Item = RecvRequest>,
) -> Result<(), PostError<RecvRequest>> {
    if inner.srq.is_some() {
        return Err(PostError {
            error: Error::InvalidRequest(format!(
                "queue pair {} takes its receives from a shared receive queue: post them there",
                inner.shared.qp_num
            )),
            unposted: requests.into_iter().collect(),
        });
    }
    let mut it = requests.into_iter();
    let first = it.next();
    let second = if first.is_some() { it.next() } else { None };
    match (first, second) {
        // The common case, one request: no scratch arrays, no list to link.
        (Some(r), None) if r.segments.len() <= 1 => post_recv_one(inner, r),
        (first, second) => post_recv_many(inner, first.into_iter().chain(second).chain(it)),
    }
}

/// Posts one receive of at most one segment, its descriptor built on the stack.
#[inline]
fn post_recv_one(inner: &QpInner, r: RecvRequest) -> Result<(), PostError<RecvRequest>> {
    let shared = &*inner.shared;
    let mut q = shared.lock();
    let st = shared.state();
    use sys::ibv_qp_state::*;
    if !matches!(st, IBV_QPS_INIT | IBV_QPS_RTR | IBV_QPS_RTS) {
        return Err(PostError {
            error: Error::NotConnected {
                qp_num: shared.qp_num,
                state: state_name(st),
            },
            unposted: vec![r],
        });
    }
    let hw_id = q.alloc_id() | RECV_BIT;
    let mut entry = match r.segments.first() {
        Some(s) if !s.is_empty() => Some(sge(s.raw())),
        _ => None,
    };
    let mut wr = sys::ibv_recv_wr {
        wr_id: hw_id,
        next: std::ptr::null_mut(),
        sg_list: std::ptr::null_mut(),
        num_sge: 0,
    };
    if let Some(e) = &mut entry {
        wr.sg_list = e;
        wr.num_sge = 1;
    }
    let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
    // SAFETY: live QP; a single work request whose scatter/gather entry (if any) lives on this
    // stack frame through the call and names the heap buffer of the request's segment. That
    // buffer does not move when the request moves into the queue below, and the request stays
    // there, owning it, until its completion is polled. The queue lock is held, so no
    // completion is matched before the request is queued.
    let rc = unsafe { sys::ibv_post_recv(inner.qp, &mut wr, &mut bad) };
    if rc != 0 {
        return Err(PostError {
            error: Error::PostRecv(from_code(rc)),
            unposted: vec![r],
        });
    }
    q.recv.push_back(Pending {
        hw_id,
        req: Posted::Recv(r),
    });
    Ok(())
}

/// Posts any number of receives as one linked list, built in the scratch arrays.
fn post_recv_many(
    inner: &QpInner,
    requests: impl Iterator<Item = RecvRequest>,
) -> Result<(), PostError<RecvRequest>> {
    let shared = &inner.shared;
    let mut guard = shared.lock();
    let q = &mut *guard;
    let start = q.recv.len();
    for r in requests {
        let hw_id = q.alloc_id() | RECV_BIT;
        q.recv.push_back(Pending {
            hw_id,
            req: Posted::Recv(r),
        });
    }
    let Queues {
        recv, rwrs, sges, ..
    } = q;
    let take = |recv: &mut VecDeque<Pending>, from: usize| -> Vec<RecvRequest> {
        recv.drain(from..)
            .filter_map(|p| match p.req {
                Posted::Recv(r) => Some(r),
                Posted::Send(_) => None,
            })
            .collect()
    };
    let st = shared.state();
    use sys::ibv_qp_state::*;
    if !matches!(st, IBV_QPS_INIT | IBV_QPS_RTR | IBV_QPS_RTS) {
        return Err(PostError {
            error: Error::NotConnected {
                qp_num: shared.qp_num,
                state: state_name(st),
            },
            unposted: take(recv, start),
        });
    }
    if recv.len() == start {
        return Ok(());
    }
    for p in recv.range(start..) {
        let Posted::Recv(r) = &p.req else { continue };
        let before = sges.len();
        sges.extend(
            r.segments
                .iter()
                .filter(|s| !s.is_empty())
                .map(|s| sge(s.raw())),
        );
        rwrs.push(sys::ibv_recv_wr {
            wr_id: p.hw_id,
            next: std::ptr::null_mut(),
            sg_list: std::ptr::null_mut(),
            num_sge: (sges.len() - before) as libc::c_int,
        });
    }
    let n = rwrs.len();
    let sge_base = sges.as_mut_ptr();
    let base = rwrs.as_mut_ptr();
    let mut offset = 0usize;
    for i in 0..n {
        // SAFETY: i < n; the arrays are not resized until they are cleared below.
        unsafe {
            let wr = &mut *base.add(i);
            if wr.num_sge > 0 {
                wr.sg_list = sge_base.add(offset);
                offset += wr.num_sge as usize;
            }
            if i + 1 < n {
                wr.next = base.add(i + 1);
            }
        }
    }
    let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
    // SAFETY: live QP; well-formed list; the segments stay in the queue, owned by their
    // pending requests, until their completions are polled.
    let rc = unsafe { sys::ibv_post_recv(inner.qp, base, &mut bad) };
    let posted = if rc == 0 { n } else { bad_index(base, bad, n) };
    rwrs.clear();
    sges.clear();
    if rc == 0 {
        Ok(())
    } else {
        Err(PostError {
            error: Error::PostRecv(from_code(rc)),
            unposted: take(recv, start + posted),
        })
    }
}
