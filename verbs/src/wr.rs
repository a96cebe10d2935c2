//! Work requests: what a queue pair is asked to do, with the memory it owns while doing it.
//!
//! A request owns its local memory as [`Segment`]s (a [`MemoryRegion`] plus a byte range).
//! Posting moves the request into the queue pair; its [`Completion`](crate::wc::Completion)
//! hands the segments back. A batch of requests given to one `post_send`/`post_recv` call goes
//! to the NIC in one verbs call (a linked list of work requests, one doorbell).

use crate::error::{Error, Result};
use crate::mr::{MemoryRegion, RemoteRegion};
use crate::wc::Opcode;

/// A byte range of an owned memory region, lent to one work request.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// let mr = pd.allocate(4096, Access::LOCAL_WRITE)?;
/// let seg = Segment::new(mr, 128, 256)?; // bytes 128..384
/// assert_eq!((seg.offset(), seg.len()), (128, 256));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Segment {
    region: MemoryRegion,
    offset: usize,
    len: usize,
}

impl Segment {
    /// The range `offset..offset + len` of `region`.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(4096, Access::empty())?;
    /// assert!(Segment::new(mr, 4000, 200).is_err()); // past the end
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(region: MemoryRegion, offset: usize, len: usize) -> Result<Self> {
        region.check_range(offset, len)?;
        Ok(Self {
            region,
            offset,
            len,
        })
    }

    /// The whole region.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let seg = Segment::whole(pd.allocate(4096, Access::empty())?);
    /// assert_eq!(seg.len(), 4096);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn whole(region: MemoryRegion) -> Self {
        let len = region.len();
        Self {
            region,
            offset: 0,
            len,
        }
    }

    /// Offset of the range in the region.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let seg = Segment::new(pd.allocate(4096, Access::empty())?, 100, 10)?;
    /// assert_eq!(seg.offset(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Length of the range.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let seg = Segment::new(pd.allocate(4096, Access::empty())?, 100, 10)?;
    /// assert_eq!(seg.len(), 10);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the range is empty.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let seg = Segment::new(pd.allocate(4096, Access::empty())?, 0, 0)?;
    /// assert!(seg.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of the range.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mut mr = pd.allocate(4096, Access::empty())?;
    /// mr[..3].copy_from_slice(b"abc");
    /// assert_eq!(Segment::new(mr, 1, 2)?.bytes(), b"bc");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes(&self) -> &[u8] {
        &self.region[self.offset..self.offset + self.len]
    }

    /// The bytes of the range, writable.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mut seg = Segment::new(pd.allocate(4096, Access::empty())?, 8, 4)?;
    /// seg.bytes_mut().copy_from_slice(b"data");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.region[self.offset..self.offset + self.len]
    }

    /// The whole region.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let seg = Segment::whole(pd.allocate(4096, Access::empty())?);
    /// let lkey = seg.region().lkey();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn region(&self) -> &MemoryRegion {
        &self.region
    }

    /// The whole region, writable.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mut seg = Segment::new(pd.allocate(4096, Access::empty())?, 8, 4)?;
    /// seg.region_mut()[0] = 1; // outside the segment's bytes too
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn region_mut(&mut self) -> &mut MemoryRegion {
        &mut self.region
    }

    /// Gives the region back.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let seg = Segment::whole(pd.allocate(4096, Access::empty())?);
    /// let mr: MemoryRegion = seg.into_region(); // for the next request
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_region(self) -> MemoryRegion {
        self.region
    }

    #[inline]
    pub(crate) fn raw(&self) -> RawSge {
        RawSge {
            addr: self.region.addr() + self.offset as u64,
            len: self.len as u32,
            lkey: self.region.lkey(),
        }
    }
}

impl From<MemoryRegion> for Segment {
    fn from(region: MemoryRegion) -> Self {
        Self::whole(region)
    }
}

/// The operation of a send-queue work request.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// let remote = RemoteRegion { addr: 0x1000, len: 64, rkey: 7 }; // from the peer
/// let req = SendRequest::new(1, SendOp::Write(remote), vec![pd.allocate(64, Access::empty())?.into()]);
/// assert_eq!(req.op(), SendOp::Write(remote));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// SEND: the peer's next receive takes the bytes.
    Send,
    /// SEND WITH IMMEDIATE: as SEND, plus 32 bits of immediate data.
    SendWithImm(u32),
    /// RDMA WRITE into the remote region (its start address; the length is the local one).
    Write(RemoteRegion),
    /// RDMA WRITE WITH IMMEDIATE: the write, then the peer's next receive completes with the
    /// immediate data.
    WriteWithImm(RemoteRegion, u32),
    /// RDMA READ from the remote region into the local segments.
    Read(RemoteRegion),
    /// Atomic FETCH AND ADD on the 8 bytes at the remote region's start: the target's NIC adds
    /// `add` to that 64-bit word (in the target's byte order), and the word's value before the
    /// add lands in the local segment (exactly 8 bytes, in the same byte order). The remote
    /// address must be 8-byte aligned and the target's region and queue pair must allow
    /// [`Access::REMOTE_ATOMIC`](crate::mr::Access).
    FetchAdd {
        /// The word (its first 8 bytes).
        remote: RemoteRegion,
        /// What is added.
        add: u64,
    },
    /// Atomic COMPARE AND SWAP on the 8 bytes at the remote region's start: if the word equals
    /// `compare` it becomes `swap`; either way its value before lands in the local segment
    /// (exactly 8 bytes), so the swap happened when that value equals `compare`. Alignment and
    /// access as for [`SendOp::FetchAdd`].
    CompareSwap {
        /// The word (its first 8 bytes).
        remote: RemoteRegion,
        /// The value the word must have.
        compare: u64,
        /// The value it takes then.
        swap: u64,
    },
}

impl SendOp {
    #[inline]
    pub(crate) fn opcode(&self) -> Opcode {
        match self {
            Self::Send | Self::SendWithImm(_) => Opcode::Send,
            Self::Write(_) | Self::WriteWithImm(..) => Opcode::RdmaWrite,
            Self::Read(_) => Opcode::RdmaRead,
            Self::FetchAdd { .. } => Opcode::FetchAdd,
            Self::CompareSwap { .. } => Opcode::CompareSwap,
        }
    }

    #[inline]
    pub(crate) fn remote(&self) -> Option<&RemoteRegion> {
        match self {
            Self::Write(r) | Self::WriteWithImm(r, _) | Self::Read(r) => Some(r),
            Self::FetchAdd { remote, .. } | Self::CompareSwap { remote, .. } => Some(remote),
            _ => None,
        }
    }
}

/// A send-queue work request that owns its local memory.
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
/// qp.post_send([SendRequest::send_with_imm(1, msg, 42)])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SendRequest {
    pub(crate) id: u64,
    pub(crate) op: SendOp,
    pub(crate) segments: Vec<Segment>,
    pub(crate) signalled: bool,
    pub(crate) inline: bool,
    pub(crate) solicited: bool,
}

impl SendRequest {
    /// A request of any operation over `segments` (a scatter/gather list; may be empty).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let (head, body) = (pd.allocate(16, Access::empty())?, pd.allocate(4096, Access::empty())?);
    /// let req = SendRequest::new(1, SendOp::Send, vec![head.into(), body.into()]); // gathered
    /// assert_eq!(req.len(), 16 + 4096);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn new(id: u64, op: SendOp, segments: Vec<Segment>) -> Self {
        Self {
            id,
            op,
            segments,
            signalled: true,
            inline: false,
            solicited: false,
        }
    }

    /// SEND of one segment.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// qp.post_send([SendRequest::send(1, pd.allocate(64, Access::empty())?)])?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send(id: u64, segment: impl Into<Segment>) -> Self {
        Self::new(id, SendOp::Send, vec![segment.into()])
    }

    /// SEND WITH IMMEDIATE of one segment.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let req = SendRequest::send_with_imm(1, pd.allocate(8, Access::empty())?, 42);
    /// assert_eq!(req.op(), SendOp::SendWithImm(42));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send_with_imm(id: u64, segment: impl Into<Segment>, imm: u32) -> Self {
        Self::new(id, SendOp::SendWithImm(imm), vec![segment.into()])
    }

    /// RDMA WRITE of one segment to `remote`.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let remote = RemoteRegion { addr: 0x1000, len: 4096, rkey: 7 };
    /// let req = SendRequest::write(1, pd.allocate(4096, Access::empty())?, remote); // `remote` from the peer
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write(id: u64, segment: impl Into<Segment>, remote: RemoteRegion) -> Self {
        Self::new(id, SendOp::Write(remote), vec![segment.into()])
    }

    /// RDMA WRITE WITH IMMEDIATE of one segment to `remote`.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let remote = RemoteRegion { addr: 0x1000, len: 4096, rkey: 7 };
    /// let req = SendRequest::write_with_imm(1, pd.allocate(64, Access::empty())?, remote, 9);
    /// assert_eq!(req.op(), SendOp::WriteWithImm(remote, 9));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_with_imm(
        id: u64,
        segment: impl Into<Segment>,
        remote: RemoteRegion,
        imm: u32,
    ) -> Self {
        Self::new(id, SendOp::WriteWithImm(remote, imm), vec![segment.into()])
    }

    /// Atomic fetch-and-add of `add` on the 64-bit word at `remote`'s start; the word's old
    /// value lands in `result` (8 bytes, its region needs
    /// [`Access::LOCAL_WRITE`](crate::mr::Access)). See [`SendOp::FetchAdd`].
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let counter = RemoteRegion { addr: 0x1000, len: 8, rkey: 7 };
    /// let old = pd.allocate(8, Access::LOCAL_WRITE)?; // receives the value before the add
    /// let req = SendRequest::fetch_add(1, old, counter, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fetch_add(id: u64, result: impl Into<Segment>, remote: RemoteRegion, add: u64) -> Self {
        Self::new(id, SendOp::FetchAdd { remote, add }, vec![result.into()])
    }

    /// Atomic compare-and-swap on the 64-bit word at `remote`'s start; the word's old value
    /// lands in `result` (8 bytes). See [`SendOp::CompareSwap`].
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let lock = RemoteRegion { addr: 0x1000, len: 8, rkey: 7 };
    /// let old = pd.allocate(8, Access::LOCAL_WRITE)?;
    /// let req = SendRequest::compare_swap(1, old, lock, 0, 1); // take the lock if free
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compare_swap(
        id: u64,
        result: impl Into<Segment>,
        remote: RemoteRegion,
        compare: u64,
        swap: u64,
    ) -> Self {
        Self::new(
            id,
            SendOp::CompareSwap {
                remote,
                compare,
                swap,
            },
            vec![result.into()],
        )
    }

    /// RDMA READ of `remote` into one segment (its region needs [`Access::LOCAL_WRITE`](crate::mr::Access)).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let remote = RemoteRegion { addr: 0x1000, len: 4096, rkey: 7 };
    /// let into = pd.allocate(4096, Access::LOCAL_WRITE)?;
    /// let req = SendRequest::read(1, into, remote);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(id: u64, segment: impl Into<Segment>, remote: RemoteRegion) -> Self {
        Self::new(id, SendOp::Read(remote), vec![segment.into()])
    }

    /// No completion on success: the request completes (as unsignalled) when a later signalled
    /// request of the same queue pair completes. Errors always produce a completion.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let cq = ctx.create_cq(64)?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?;
    /// let a = SendRequest::send(1, pd.allocate(8, Access::empty())?).unsignalled();
    /// let b = SendRequest::send(2, pd.allocate(8, Access::empty())?); // its completion covers a
    /// qp.post_send([a, b])?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unsignalled(mut self) -> Self {
        self.signalled = false;
        self
    }

    /// Copy the data into the work request at post time (`IBV_SEND_INLINE`); the total length
    /// must not exceed the queue pair's inline size.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let req = SendRequest::send(1, pd.allocate(32, Access::empty())?).inline(); // copied at post
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn inline(mut self) -> Self {
        self.inline = true;
        self
    }

    /// Ask the peer's completion channel to wake even when armed for solicited events only.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let req = SendRequest::send(1, pd.allocate(8, Access::empty())?).solicited(); // wakes a solicited-only waiter
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn solicited(mut self) -> Self {
        self.solicited = true;
        self
    }

    /// The id given at construction.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert_eq!(SendRequest::send(5, pd.allocate(8, Access::empty())?).id(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The operation.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert_eq!(SendRequest::send(5, pd.allocate(8, Access::empty())?).op(), SendOp::Send);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn op(&self) -> SendOp {
        self.op
    }

    /// Total bytes of the local segments.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert_eq!(SendRequest::send(1, pd.allocate(8, Access::empty())?).len(), 8);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.segments.iter().map(Segment::len).sum()
    }

    /// True when no local bytes are involved.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert!(SendRequest::send(1, pd.allocate(0, Access::empty())?).is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives the segments back.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let req = SendRequest::send(1, pd.allocate(8, Access::empty())?);
    /// let segments = req.into_segments(); // the memory back, unposted
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_segments(self) -> Vec<Segment> {
        self.segments
    }

    #[inline]
    pub(crate) fn validate(&self) -> Result<()> {
        if let SendOp::FetchAdd { remote, .. } | SendOp::CompareSwap { remote, .. } = self.op {
            return validate_atomic(self.id, self.len(), self.inline, &remote);
        }
        if let Some(r) = self.op.remote() {
            if (self.len() as u64) > r.len {
                return Err(Error::InvalidRequest(format!(
                    "request {}: {} local bytes do not fit the {}-byte remote region",
                    self.id,
                    self.len(),
                    r.len
                )));
            }
        }
        Ok(())
    }
}

/// An atomic needs an 8-byte local result, an 8-byte aligned remote word inside its region, and
/// no inline flag (its local segment is written, not read).
pub(crate) fn validate_atomic(id: u64, local: usize, inline: bool, r: &RemoteRegion) -> Result<()> {
    if local != 8 {
        return Err(Error::InvalidRequest(format!(
            "request {id}: an atomic's local result is 8 bytes, this one has {local}"
        )));
    }
    if r.addr % 8 != 0 || r.len < 8 {
        return Err(Error::InvalidRequest(format!(
            "request {id}: an atomic's remote word must be 8-byte aligned and inside its region \
             (address {:#x}, region of {} bytes)",
            r.addr, r.len
        )));
    }
    if inline {
        return Err(Error::InvalidRequest(format!(
            "request {id}: an atomic cannot be inline (its local segment receives the old value)"
        )));
    }
    Ok(())
}

/// A receive-queue work request that owns the memory incoming bytes land in.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// # let cq = ctx.create_cq(64)?;
/// # let qp = pd.queue_pair(&cq, &cq).build()?;
/// # let me = qp.endpoint();
/// # let qp = qp.connect(&me, &ConnectOptions::default())?;
/// let buf = pd.allocate(4096, Access::LOCAL_WRITE)?;
/// qp.post_recv([RecvRequest::new(1, buf)])?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RecvRequest {
    pub(crate) id: u64,
    pub(crate) segments: Vec<Segment>,
}

impl RecvRequest {
    /// A receive into one segment (its region needs [`Access::LOCAL_WRITE`](crate::mr::Access)).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let req = RecvRequest::new(1, pd.allocate(4096, Access::LOCAL_WRITE)?);
    /// assert_eq!(req.id(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn new(id: u64, segment: impl Into<Segment>) -> Self {
        Self {
            id,
            segments: vec![segment.into()],
        }
    }

    /// A receive scattered over several segments (may be empty for 0-byte messages and
    /// WRITE WITH IMMEDIATE notifications).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let (head, body) = (pd.allocate(16, Access::LOCAL_WRITE)?, pd.allocate(4096, Access::LOCAL_WRITE)?);
    /// let req = RecvRequest::with_segments(1, vec![head.into(), body.into()]); // scattered
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn with_segments(id: u64, segments: Vec<Segment>) -> Self {
        Self { id, segments }
    }

    /// The id given at construction.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert_eq!(RecvRequest::new(9, pd.allocate(64, Access::LOCAL_WRITE)?).id(), 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Gives the segments back.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let req = RecvRequest::new(1, pd.allocate(64, Access::LOCAL_WRITE)?);
    /// assert_eq!(req.into_segments().len(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_segments(self) -> Vec<Segment> {
        self.segments
    }
}

/// A raw scatter/gather entry for the `unsafe` posting path: address, length, local key.
///
/// ```
/// # use viaduct_verbs::*;
/// let sge = RawSge { addr: 0x1000, len: 64, lkey: 3 }; // addr and lkey of a live region
/// assert_eq!(sge.len, 64);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSge {
    /// Address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of the region holding the bytes.
    pub lkey: u32,
}

/// A send request over raw scatter/gather entries, for
/// [`QueuePair::post_send_raw`](crate::qp::QueuePair::post_send_raw).
///
/// ```
/// # use viaduct_verbs::*;
/// let sges = [RawSge { addr: 0x1000, len: 64, lkey: 3 }];
/// let wr = RawSendRequest { id: 1, op: SendOp::Send, sges: &sges, signalled: true, inline: false };
/// assert_eq!(wr.sges.len(), 1);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RawSendRequest<'a> {
    /// Id returned in the completion.
    pub id: u64,
    /// Operation.
    pub op: SendOp,
    /// Scatter/gather list.
    pub sges: &'a [RawSge],
    /// Produce a completion on success.
    pub signalled: bool,
    /// Copy the data at post time.
    pub inline: bool,
}

/// A failed post: the error and the requests that did not reach the NIC, handed back.
///
/// Requests that were accepted before the failing one stay posted and complete normally.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// # let cq = ctx.create_cq(64)?;
/// # let qp = pd.queue_pair(&cq, &cq).build()?;
/// # let me = qp.endpoint();
/// # let qp = qp.connect(&me, &ConnectOptions::default())?;
/// let reqs = vec![SendRequest::send(1, pd.allocate(8, Access::empty())?)];
/// if let Err(e) = qp.post_send(reqs) {
///     println!("{e}: {} request(s) back", e.unposted.len());
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{} ({} work request(s) not posted)", .error, .unposted.len())]
pub struct PostError<R: std::fmt::Debug> {
    /// What went wrong.
    #[source]
    pub error: Error,
    /// The requests not posted, in posting order.
    pub unposted: Vec<R>,
}
