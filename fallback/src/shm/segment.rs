//! The shared segment: a memfd mapped by both ends, holding a control page and two rings.
//!
//! Layout: one 4 KiB control page ([`Control`]), then the data area of ring 0 (side 0 sends,
//! side 1 receives), then the data area of ring 1. Every word both ends touch is an atomic, and
//! words written by different ends sit on different cache lines.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::error::Error;

/// Identifies a viaduct shared segment ("VIADSHM1").
pub(crate) const MAGIC: u64 = 0x5649_4144_5348_4d31;
/// Layout version; both ends must agree.
pub(crate) const VERSION: u32 = 3;
/// Size of the control page in front of the rings.
pub(crate) const CONTROL_BYTES: usize = 4096;
/// Cache line size the layout aligns to.
pub(crate) const LINE: usize = 64;
/// Seals of a segment: its size is fixed for good.
const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// Words written by the consumer of one ring.
#[repr(C, align(64))]
pub(crate) struct ConsumerLine {
    /// Ring position up to which the consumer has released space (bytes, monotonic).
    pub tail: AtomicU64,
    /// Rendezvous messages the consumer has finished reading from the producer's memory.
    pub rendezvous_done: AtomicU64,
}

/// The long message of one ring being copied by both ends at once (see `endpoint/split.rs`).
///
/// The consumer publishes a rendezvous here; then both ends claim chunks of it through `claim`
/// and copy them (the consumer reads, the producer writes), and add the bytes to `done`.
#[repr(C, align(64))]
pub(crate) struct SplitLine {
    /// Rendezvous number (upper 32 bits, counting from 1) and next unclaimed chunk (lower 32).
    pub claim: AtomicU64,
    /// Bytes per chunk of the published rendezvous.
    pub chunk: AtomicU64,
    /// Address of the consumer's destination buffer.
    pub dest: AtomicU64,
    /// Bytes of the published rendezvous copied so far, by either end.
    pub done: AtomicU64,
    /// A chunk the producer claimed but could not write: rendezvous number (upper 32 bits) and
    /// chunk index + 1 (lower 32); 0 when none. The consumer copies it instead.
    pub handback: AtomicU64,
}

/// Control words of one ring.
#[repr(C)]
pub(crate) struct RingControl {
    /// Written by the consumer.
    pub consumer: ConsumerLine,
    /// Written by both ends while a long message is copied in chunks.
    pub split: SplitLine,
}

/// Words of one side: its wake-up word, whether it sleeps, whether it left.
#[repr(C, align(64))]
pub(crate) struct SideLine {
    /// Futex word: bumped by the other side to wake this side.
    pub bell: AtomicU32,
    /// How many threads of this side are (about to be) asleep on `bell` (non-zero: ring it).
    pub sleeping: AtomicU32,
    /// Non-zero once this side has closed its endpoint in order.
    pub closed: AtomicU32,
    /// Process id of this side.
    pub pid: AtomicU32,
}

/// The heartbeat of one side, on a line of its own (the peer reads it only now and then).
#[repr(C, align(64))]
pub(crate) struct BeatLine {
    /// Bumped by its side's endpoint at each poll, post and sleeping wait (plain stores: only
    /// the endpoint writes it): while it changes, that side's progress engine runs.
    pub count: AtomicU64,
    /// Bumped by its side's [`Heartbeat`](super::Heartbeat) handles (atomic adds: any thread),
    /// e.g. from a background thread: while it changes, that side's process runs.
    pub background: AtomicU64,
}

/// The control page. Only atomics and set-once values: both processes access it concurrently.
#[repr(C)]
pub(crate) struct Control {
    /// [`MAGIC`].
    pub magic: AtomicU64,
    /// [`VERSION`].
    pub version: AtomicU32,
    /// Bytes of each ring's data area.
    pub ring_bytes: AtomicU64,
    /// Random value mixed into record stamps so that stale payload bytes never look like a stamp.
    pub salt: AtomicU64,
    /// Per side words, indexed by side (0 created the segment, 1 attached).
    pub sides: [SideLine; 2],
    /// Per ring words, indexed by the sending side.
    pub rings: [RingControl; 2],
    /// Per side heartbeats, indexed by side.
    pub beats: [BeatLine; 2],
}

const _: () = assert!(std::mem::size_of::<Control>() <= CONTROL_BYTES);

/// A mapped segment. Unmapped on drop; the memfd is closed once both ends dropped it.
pub(crate) struct Segment {
    base: NonNull<u8>,
    len: usize,
    ring_bytes: usize,
    _fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; all cross-thread access goes through atomics or is
// ordered by them (ring protocol), so moving the owner to another thread is sound.
unsafe impl Send for Segment {}
// SAFETY: a shared `&Segment` gives access only to the control page, which holds only atomics
// (`control`), and to raw pointers into the rings (`ring_data`), whose use is `unsafe` at the
// caller and ordered by the ring protocol; so sharing it between threads (a heartbeat handle
// beside its endpoint) is sound.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates a new segment with two rings of `ring_bytes` each and initialises its control page.
    pub(crate) fn create(ring_bytes: usize, salt: u64) -> Result<Segment, Error> {
        let name = c"viaduct-shm";
        // SAFETY: `name` is a valid NUL-terminated string; the flags are valid.
        let fd = unsafe {
            libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if fd < 0 {
            return Err(Error::CreateSegment(io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let len = CONTROL_BYTES + 2 * ring_bytes;
        // SAFETY: `fd` is a valid memfd; ftruncate only sizes it.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(Error::CreateSegment(io::Error::last_os_error()));
        }
        // Sealed at its size: a peer holding the descriptor cannot shrink the segment under
        // this side's mapping (which would make this side's next access fault).
        // SAFETY: `fd` is a valid memfd created with MFD_ALLOW_SEALING; F_ADD_SEALS takes an int.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SEALS) } != 0 {
            return Err(Error::CreateSegment(io::Error::last_os_error()));
        }
        let seg = Segment::map(fd, len, ring_bytes)?;
        let c = seg.control();
        c.version.store(VERSION, Ordering::Relaxed);
        c.ring_bytes.store(ring_bytes as u64, Ordering::Relaxed);
        c.salt.store(salt, Ordering::Relaxed);
        c.magic.store(MAGIC, Ordering::Release);
        Ok(seg)
    }

    /// Maps a segment received from the creator and checks its header.
    pub(crate) fn attach(fd: OwnedFd) -> Result<Segment, Error> {
        // SAFETY: `st` is plain old data that fstat fills in; `fd` is a valid descriptor.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: see above.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::MapSegment(io::Error::last_os_error()));
        }
        // SAFETY: F_GET_SEALS only reads the descriptor's seals.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & SEALS != SEALS {
            return Err(Error::Handshake(
                "the segment is not sealed at its size (the peer could shrink it)".into(),
            ));
        }
        let len = st.st_size as usize;
        if len < CONTROL_BYTES + 2 * LINE {
            return Err(Error::Handshake(format!(
                "segment of {len} bytes is too small"
            )));
        }
        let mut seg = Segment::map(fd, len, 0)?;
        let c = seg.control();
        if c.magic.load(Ordering::Acquire) != MAGIC || c.version.load(Ordering::Relaxed) != VERSION
        {
            return Err(Error::Handshake(
                "segment has a foreign magic or version".into(),
            ));
        }
        let ring_bytes = c.ring_bytes.load(Ordering::Relaxed) as usize;
        let expected = ring_bytes
            .checked_mul(2)
            .and_then(|r| r.checked_add(CONTROL_BYTES));
        if ring_bytes % LINE != 0 || ring_bytes == 0 || expected != Some(len) {
            return Err(Error::Handshake(format!(
                "segment of {len} bytes does not hold two rings of {ring_bytes} bytes"
            )));
        }
        seg.ring_bytes = ring_bytes;
        Ok(seg)
    }

    fn map(fd: OwnedFd, len: usize, ring_bytes: usize) -> Result<Segment, Error> {
        // SAFETY: a fresh shared mapping of a file we hold open; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::MapSegment(io::Error::last_os_error()));
        }
        let base = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| Error::MapSegment(io::Error::other("mmap returned a null address")))?;
        Ok(Segment {
            base,
            len,
            ring_bytes,
            _fd: fd,
        })
    }

    /// The descriptor of the segment, to pass to the peer.
    /// The addresses of the mapping.
    pub(crate) fn range(&self) -> std::ops::Range<usize> {
        let base = self.base.as_ptr() as usize;
        base..base + self.len
    }

    pub(crate) fn fd(&self) -> &OwnedFd {
        &self._fd
    }

    /// The control page.
    pub(crate) fn control(&self) -> &Control {
        // SAFETY: the mapping is at least CONTROL_BYTES long, page aligned, and `Control` holds
        // only atomics, for which any bit pattern (zero-filled memfd) is valid.
        unsafe { &*self.base.as_ptr().cast::<Control>() }
    }

    /// Bytes of each ring's data area.
    pub(crate) fn ring_bytes(&self) -> usize {
        self.ring_bytes
    }

    /// Start of the data area of the ring sent by `side`.
    pub(crate) fn ring_data(&self, side: usize) -> NonNull<u8> {
        debug_assert!(side < 2);
        // SAFETY: CONTROL_BYTES + side * ring_bytes is inside the mapping (checked at attach).
        unsafe { self.base.add(CONTROL_BYTES + side * self.ring_bytes) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` describe the mapping created in `map`, unmapped exactly once here,
        // when the last owner (the endpoint, or a heartbeat handle outliving it) drops it;
        // nothing borrowed from it outlives the segment (borrows are tied to those owners).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}
