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
#[derive(Debug)]
pub struct Segment {
    region: MemoryRegion,
    offset: usize,
    len: usize,
}

impl Segment {
    /// The range `offset..offset + len` of `region`.
    pub fn new(region: MemoryRegion, offset: usize, len: usize) -> Result<Self> {
        region.check_range(offset, len)?;
        Ok(Self {
            region,
            offset,
            len,
        })
    }

    /// The whole region.
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
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Length of the range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of the range.
    pub fn bytes(&self) -> &[u8] {
        &self.region[self.offset..self.offset + self.len]
    }

    /// The bytes of the range, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.region[self.offset..self.offset + self.len]
    }

    /// The whole region.
    pub fn region(&self) -> &MemoryRegion {
        &self.region
    }

    /// The whole region, writable.
    pub fn region_mut(&mut self) -> &mut MemoryRegion {
        &mut self.region
    }

    /// Gives the region back.
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
    pub fn send(id: u64, segment: impl Into<Segment>) -> Self {
        Self::new(id, SendOp::Send, vec![segment.into()])
    }

    /// SEND WITH IMMEDIATE of one segment.
    pub fn send_with_imm(id: u64, segment: impl Into<Segment>, imm: u32) -> Self {
        Self::new(id, SendOp::SendWithImm(imm), vec![segment.into()])
    }

    /// RDMA WRITE of one segment to `remote`.
    pub fn write(id: u64, segment: impl Into<Segment>, remote: RemoteRegion) -> Self {
        Self::new(id, SendOp::Write(remote), vec![segment.into()])
    }

    /// RDMA WRITE WITH IMMEDIATE of one segment to `remote`.
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
    pub fn fetch_add(id: u64, result: impl Into<Segment>, remote: RemoteRegion, add: u64) -> Self {
        Self::new(id, SendOp::FetchAdd { remote, add }, vec![result.into()])
    }

    /// Atomic compare-and-swap on the 64-bit word at `remote`'s start; the word's old value
    /// lands in `result` (8 bytes). See [`SendOp::CompareSwap`].
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
    pub fn read(id: u64, segment: impl Into<Segment>, remote: RemoteRegion) -> Self {
        Self::new(id, SendOp::Read(remote), vec![segment.into()])
    }

    /// No completion on success: the request completes (as unsignalled) when a later signalled
    /// request of the same queue pair completes. Errors always produce a completion.
    pub fn unsignalled(mut self) -> Self {
        self.signalled = false;
        self
    }

    /// Copy the data into the work request at post time (`IBV_SEND_INLINE`); the total length
    /// must not exceed the queue pair's inline size.
    pub fn inline(mut self) -> Self {
        self.inline = true;
        self
    }

    /// Ask the peer's completion channel to wake even when armed for solicited events only.
    pub fn solicited(mut self) -> Self {
        self.solicited = true;
        self
    }

    /// The id given at construction.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The operation.
    pub fn op(&self) -> SendOp {
        self.op
    }

    /// Total bytes of the local segments.
    #[inline]
    pub fn len(&self) -> usize {
        self.segments.iter().map(Segment::len).sum()
    }

    /// True when no local bytes are involved.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives the segments back.
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
#[derive(Debug)]
pub struct RecvRequest {
    pub(crate) id: u64,
    pub(crate) segments: Vec<Segment>,
}

impl RecvRequest {
    /// A receive into one segment (its region needs [`Access::LOCAL_WRITE`](crate::mr::Access)).
    #[inline]
    pub fn new(id: u64, segment: impl Into<Segment>) -> Self {
        Self {
            id,
            segments: vec![segment.into()],
        }
    }

    /// A receive scattered over several segments (may be empty for 0-byte messages and
    /// WRITE WITH IMMEDIATE notifications).
    #[inline]
    pub fn with_segments(id: u64, segments: Vec<Segment>) -> Self {
        Self { id, segments }
    }

    /// The id given at construction.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Gives the segments back.
    pub fn into_segments(self) -> Vec<Segment> {
        self.segments
    }
}

/// A raw scatter/gather entry for the `unsafe` posting path: address, length, local key.
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
#[derive(Debug, thiserror::Error)]
#[error("{} ({} work request(s) not posted)", .error, .unposted.len())]
pub struct PostError<R: std::fmt::Debug> {
    /// What went wrong.
    #[source]
    pub error: Error,
    /// The requests not posted, in posting order.
    pub unposted: Vec<R>,
}
