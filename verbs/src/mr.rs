//! Memory regions over owned, page-aligned buffers, and the descriptor a peer needs to reach one.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fmt;
use std::ptr::NonNull;

use bitflags::bitflags;
use rdma_sys as sys;

use crate::error::{Error, Result, last_os_error, memlock_limit};
use crate::pd::ProtectionDomain;

const PAGE: usize = 4096;

bitflags! {
    /// Access rights of a memory region (`ibv_access_flags`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        /// The local NIC may write (needed for receives and RDMA read targets).
        const LOCAL_WRITE = 1;
        /// Peers may RDMA-write into it.
        const REMOTE_WRITE = 2;
        /// Peers may RDMA-read from it.
        const REMOTE_READ = 4;
        /// Peers may run atomics on it.
        const REMOTE_ATOMIC = 8;
    }
}

/// An owned, zero-initialised, page-aligned byte buffer.
///
/// ```
/// # use viaduct_verbs::*;
/// let mut buf = AlignedBuffer::zeroed(100)?;
/// buf[0] = 7;
/// assert_eq!((buf.len(), buf[0]), (100, 7));
/// # Ok::<(), Error>(())
/// ```
pub struct AlignedBuffer {
    ptr: NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: the buffer is uniquely owned memory, like a Box<[u8]>.
unsafe impl Send for AlignedBuffer {}
// SAFETY: shared access only reads through &self.
unsafe impl Sync for AlignedBuffer {}

impl AlignedBuffer {
    /// A zeroed buffer of `len` bytes (at least one page is reserved, so `len` may be 0).
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let buf = AlignedBuffer::zeroed(4096)?;
    /// assert!(buf.iter().all(|&b| b == 0));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn zeroed(len: usize) -> Result<Self> {
        let size = len.max(1).div_ceil(PAGE) * PAGE;
        let layout = Layout::from_size_align(size, PAGE).map_err(|_| Error::Allocate { len })?;
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(Error::Allocate { len })?;
        Ok(Self { ptr, len, layout })
    }

    /// A buffer holding a copy of `data`.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let buf = AlignedBuffer::from_slice(b"abc")?;
    /// assert_eq!(&buf[..], b"abc");
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_slice(data: &[u8]) -> Result<Self> {
        let mut b = Self::zeroed(data.len())?;
        b.copy_from_slice(data);
        Ok(b)
    }

    /// Length in bytes.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert_eq!(AlignedBuffer::zeroed(10)?.len(), 10);
    /// # Ok::<(), Error>(())
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the length is 0.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert!(AlignedBuffer::zeroed(0)?.is_empty());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl std::ops::Deref for AlignedBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points at `layout.size() >= len` initialised bytes we own.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `zeroed`, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

impl fmt::Debug for AlignedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuffer")
            .field("len", &self.len)
            .finish()
    }
}

/// A registered memory region that owns its buffer.
///
/// Dropping it deregisters the region, then frees the buffer. Posting a work request moves the
/// region into the queue pair until the request's completion hands it back, so memory the NIC
/// may touch cannot be freed or reused by safe code.
///
/// A region registered with [`Access::REMOTE_WRITE`] (or `REMOTE_READ`) and handed to a peer
/// as a [`RemoteRegion`] is outside that rule: the peer's NIC may write (read) it whenever the
/// registration lives, whatever this process does. Read such a region only after the peer
/// said it is done (a message, or the immediate data of a WRITE WITH IMMEDIATE), and drop it,
/// which revokes the peer's access, to take it back for good.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// let mut mr = pd.allocate(4096, Access::LOCAL_WRITE | Access::REMOTE_READ)?;
/// mr[..5].copy_from_slice(b"hello");
/// let for_peer = mr.remote(); // address, length, rkey
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MemoryRegion {
    mr: *mut sys::ibv_mr,
    // Field order matters for drop: the registration goes first (in Drop::drop), then the
    // buffer, then the PD reference.
    buf: AlignedBuffer,
    access: Access,
    pd: ProtectionDomain,
}

// SAFETY: the region owns its buffer; ibv_mr handles may be used from any thread.
unsafe impl Send for MemoryRegion {}
// SAFETY: shared access only reads.
unsafe impl Sync for MemoryRegion {}

impl fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("len", &self.buf.len)
            .field("lkey", &self.lkey())
            .field("rkey", &self.rkey())
            .field("access", &self.access)
            .finish()
    }
}

impl ProtectionDomain {
    /// Registers `buf` with `access` rights (`ibv_reg_mr`); the region owns the buffer.
    ///
    /// `ENOMEM`/`EPERM` from the kernel become [`Error::MemlockLimit`], which names the
    /// current `ulimit -l` and how to raise it.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let buf = AlignedBuffer::from_slice(b"payload")?;
    /// let mr = pd.register(buf, Access::LOCAL_WRITE)?;
    /// assert_eq!(&mr[..], b"payload");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register(&self, buf: AlignedBuffer, access: Access) -> Result<MemoryRegion> {
        let len = buf.len();
        // Register at least one byte: some providers refuse empty regions, and a 0-byte
        // region is still useful as the target of 0-byte operations.
        let reg_len = len.max(1);
        // SAFETY: live PD; the buffer is valid for reg_len bytes and stays allocated as long as
        // the registration (both owned by the returned MemoryRegion, deregistered first).
        let mr = unsafe {
            sys::ibv_reg_mr(
                self.as_raw(),
                buf.as_ptr().cast(),
                reg_len,
                access.bits() as libc::c_int,
            )
        };
        if mr.is_null() {
            let source = last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::ENOMEM) | Some(libc::EPERM) => Error::MemlockLimit {
                    len,
                    limit: memlock_limit(),
                    source,
                },
                _ => Error::RegisterMr { len, source },
            });
        }
        Ok(MemoryRegion {
            mr,
            buf,
            access,
            pd: self.clone(),
        })
    }

    /// Allocates a zeroed page-aligned buffer of `len` bytes and registers it.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(1 << 20, Access::LOCAL_WRITE)?;
    /// assert_eq!(mr.len(), 1 << 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn allocate(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        self.register(AlignedBuffer::zeroed(len)?, access)
    }
}

impl MemoryRegion {
    /// Length in bytes.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert_eq!(pd.allocate(100, Access::empty())?.len(), 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn len(&self) -> usize {
        self.buf.len
    }

    /// True when the length is 0.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// assert!(pd.allocate(0, Access::empty())?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.buf.len == 0
    }

    /// Local key (goes into scatter/gather entries).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(64, Access::LOCAL_WRITE)?;
    /// println!("lkey {:#x}", mr.lkey());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn lkey(&self) -> u32 {
        // SAFETY: the registration is live while self exists.
        unsafe { (*self.mr).lkey }
    }

    /// Remote key (what a peer needs for RDMA read/write).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(64, Access::REMOTE_WRITE | Access::LOCAL_WRITE)?;
    /// assert_eq!(mr.remote().rkey, mr.rkey());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn rkey(&self) -> u32 {
        // SAFETY: as in lkey.
        unsafe { (*self.mr).rkey }
    }

    /// Access rights.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(64, Access::LOCAL_WRITE)?;
    /// assert!(mr.access().contains(Access::LOCAL_WRITE));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn access(&self) -> Access {
        self.access
    }

    /// Start address of the buffer.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(64, Access::empty())?;
    /// assert_eq!(mr.addr(), mr.as_ptr() as u64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn addr(&self) -> u64 {
        self.buf.as_ptr() as u64
    }

    /// The protection domain it is registered in.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(64, Access::empty())?;
    /// let same_pd = mr.pd().context().name() == ctx.name();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    /// The raw `ibv_mr`, owned by this region: do not deregister it.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let raw = pd.allocate(64, Access::empty())?.as_raw(); // for a libibverbs call of your own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_raw(&self) -> *mut sys::ibv_mr {
        self.mr
    }

    /// Descriptor of the whole region for a peer.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(4096, Access::REMOTE_READ)?;
    /// let card = mr.remote().to_bytes(); // send it to the peer
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remote(&self) -> RemoteRegion {
        RemoteRegion {
            addr: self.addr(),
            len: self.len() as u64,
            rkey: self.rkey(),
        }
    }

    /// Deregisters the region and gives the buffer back.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// # let pd = ctx.alloc_pd()?;
    /// let mr = pd.allocate(64, Access::empty())?;
    /// let buf: AlignedBuffer = mr.into_buffer(); // deregistered, the bytes kept
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_buffer(self) -> AlignedBuffer {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the registration is live and deregistered once; nothing else can post this
        // region (we own it).
        unsafe { sys::ibv_dereg_mr(this.mr) };
        // SAFETY: fields are moved out exactly once; `this` is never used or dropped again.
        let buf = unsafe { std::ptr::read(&this.buf) };
        // SAFETY: as above, the PD handle is moved out once and dropped here.
        drop(unsafe { std::ptr::read(&this.pd) });
        buf
    }

    pub(crate) fn check_range(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(Error::OutOfRange {
                offset,
                end: offset.saturating_add(len),
                len: self.len(),
            }),
        }
    }
}

impl std::ops::Deref for MemoryRegion {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl std::ops::DerefMut for MemoryRegion {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: the registration is live and deregistered once. A region held by an in-flight
        // work request is owned by its queue pair, which destroys the QP before dropping it.
        unsafe { sys::ibv_dereg_mr(self.mr) };
    }
}

/// What a peer needs to RDMA-read or -write a region: address, length and remote key.
///
/// ```
/// # use viaduct_verbs::*;
/// let region = RemoteRegion { addr: 0x1000, len: 4096, rkey: 7 };
/// let first = region.slice(0, 512)?;
/// assert_eq!((first.addr, first.len, first.rkey), (0x1000, 512, 7));
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteRegion {
    /// Virtual address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote key.
    pub rkey: u32,
}

impl RemoteRegion {
    /// Encoded size in bytes.
    pub const ENCODED_LEN: usize = 20;

    /// Little-endian encoding: addr (8), len (8), rkey (4).
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let region = RemoteRegion { addr: 0x1000, len: 4096, rkey: 7 };
    /// assert_eq!(region.to_bytes().len(), RemoteRegion::ENCODED_LEN);
    /// ```
    pub fn to_bytes(&self) -> [u8; Self::ENCODED_LEN] {
        let mut b = [0u8; Self::ENCODED_LEN];
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..20].copy_from_slice(&self.rkey.to_le_bytes());
        b
    }

    /// Decodes [`to_bytes`](Self::to_bytes)' output.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let region = RemoteRegion { addr: 0x1000, len: 4096, rkey: 7 };
    /// assert_eq!(RemoteRegion::from_bytes(&region.to_bytes())?, region);
    /// assert!(RemoteRegion::from_bytes(&[0; 3]).is_err());
    /// # Ok::<(), Error>(())
    /// ```
    pub fn from_bytes(b: &[u8]) -> Result<Self> {
        if b.len() != Self::ENCODED_LEN {
            return Err(Error::Decode {
                what: "remote region",
                reason: format!("{} bytes, expected {}", b.len(), Self::ENCODED_LEN),
            });
        }
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let mut k = [0u8; 4];
        k.copy_from_slice(&b[16..20]);
        Ok(Self {
            addr: u64_at(0),
            len: u64_at(8),
            rkey: u32::from_le_bytes(k),
        })
    }

    /// The part `offset..offset + len` of this region.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let region = RemoteRegion { addr: 0x1000, len: 4096, rkey: 7 };
    /// assert_eq!(region.slice(4000, 96)?.addr, 0x1000 + 4000);
    /// assert!(region.slice(4000, 97).is_err()); // past the end
    /// # Ok::<(), Error>(())
    /// ```
    pub fn slice(&self, offset: u64, len: u64) -> Result<Self> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(Self {
                addr: self.addr + offset,
                len,
                rkey: self.rkey,
            }),
            _ => Err(Error::OutOfRange {
                offset: offset as usize,
                end: offset.saturating_add(len) as usize,
                len: self.len as usize,
            }),
        }
    }
}
