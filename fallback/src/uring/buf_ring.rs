//! Provided-buffer rings (`IORING_REGISTER_PBUF_RING`): the kernel picks a receive buffer.
//!
//! A receive submitted with `IOSQE_BUFFER_SELECT` and a buffer group id takes the next free buffer
//! of that group's ring. Its completion carries the buffer id in its flags; [`ProvidedBuffers::take`]
//! turns that into a [`ProvidedBuf`] (a byte slice) which goes back into the ring when dropped.

use std::io;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use io_uring::IoUring;
use io_uring::types::BufRingEntry;

use super::aligned::AlignedAlloc;
use super::error::UringError;

/// An anonymous, page-aligned, zeroed private mapping.
#[derive(Debug)]
pub(crate) struct PageMap {
    addr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value.
unsafe impl Send for PageMap {}
// SAFETY: accessed only through raw pointers by owners that synchronise themselves.
unsafe impl Sync for PageMap {}

impl PageMap {
    /// Maps `len` bytes (rounded up to pages by the kernel).
    pub(crate) fn new(len: usize) -> Result<Self, UringError> {
        // SAFETY: an anonymous private mapping at a kernel-chosen address touches no existing memory.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(UringError::Map {
                bytes: len,
                source: io::Error::last_os_error(),
            });
        }
        Ok(Self { addr, len })
    }

    /// The start of the mapping.
    pub(crate) fn addr(&self) -> *mut libc::c_void {
        self.addr
    }
}

impl Drop for PageMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`, once.
        unsafe {
            libc::munmap(self.addr, self.len);
        }
    }
}

#[derive(Debug)]
struct Inner {
    /// The ring of `io_uring_buf` entries shared with the kernel.
    entries: PageMap,
    /// All buffers, back to back, `size` bytes each.
    memory: AlignedAlloc,
    group: u16,
    count: u16,
    size: u32,
    /// Our copy of the tail, guarded so recycles from several threads stay ordered.
    tail: Mutex<u16>,
    /// `true` while a buffer is out of the ring (taken by a completion, not yet recycled).
    out: Vec<AtomicBool>,
}

/// A registered ring of `count` receive buffers of `size` bytes each, with a buffer group id.
///
/// Cheap to clone (shared). The ring that registered it keeps a clone, so the memory stays valid
/// until the ring is gone, whatever the order of drops.
#[derive(Debug, Clone)]
pub struct ProvidedBuffers {
    inner: Arc<Inner>,
}

impl ProvidedBuffers {
    /// Registers a new ring with `ring`; `count` must be a power of two up to 32768.
    pub(crate) fn register(
        ring: &IoUring,
        group: u16,
        count: u16,
        size: u32,
    ) -> Result<Self, UringError> {
        if !count.is_power_of_two() || count > 32768 {
            return Err(UringError::InvalidArgument(format!(
                "provided-buffer ring of {count} entries: the count must be a power of two \
                 up to 32768"
            )));
        }
        if size == 0 {
            return Err(UringError::InvalidArgument(
                "provided buffers of 0 bytes".to_owned(),
            ));
        }
        let entries = PageMap::new(usize::from(count) * size_of::<BufRingEntry>())?;
        let memory = AlignedAlloc::new(usize::from(count) * size as usize, 4096)?;
        let inner = Arc::new(Inner {
            entries,
            memory,
            group,
            count,
            size,
            tail: Mutex::new(0),
            out: (0..count).map(|_| AtomicBool::new(true)).collect(),
        });
        // SAFETY: the entries mapping is page-aligned, holds `count` entries and lives in `inner`,
        // which the ring keeps (through a clone) until it is closed.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(inner.entries.addr() as u64, count, group, 0)
                .map_err(|source| UringError::Register {
                    what: "provided-buffer ring",
                    source,
                })?;
        }
        let this = Self { inner };
        for bid in 0..count {
            this.recycle(bid);
        }
        Ok(this)
    }

    /// The buffer group id to put in a receive's `buf_group`.
    pub fn group(&self) -> u16 {
        self.inner.group
    }

    /// Number of buffers.
    pub fn count(&self) -> u16 {
        self.inner.count
    }

    /// Size of each buffer in bytes.
    pub fn buf_size(&self) -> u32 {
        self.inner.size
    }

    /// Number of buffers now out of the ring (taken and not yet dropped).
    pub fn taken(&self) -> usize {
        self.inner
            .out
            .iter()
            .filter(|b| b.load(Ordering::Relaxed))
            .count()
    }

    /// Claims the buffer a completion selected, holding `len` received bytes.
    ///
    /// `flags` are the completion's flags and `len` its (nonnegative) result. Returns `None` when
    /// the flags carry no buffer (`IORING_CQE_F_BUFFER` clear: e.g. an error or end of stream), or
    /// the id is out of range or already taken (a completion claimed twice).
    pub fn take(&self, flags: u32, len: usize) -> Option<ProvidedBuf> {
        let bid = io_uring::cqueue::buffer_select(flags)?;
        let slot = self.inner.out.get(usize::from(bid))?;
        if slot.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(ProvidedBuf {
            owner: self.clone(),
            bid,
            len: len.min(self.inner.size as usize),
        })
    }

    /// Puts buffer `bid` back at the ring's tail so the kernel can select it again.
    fn recycle(&self, bid: u16) {
        let inner = &self.inner;
        if !inner.out[usize::from(bid)].swap(false, Ordering::AcqRel) {
            return;
        }
        let mut tail = inner.tail.lock().unwrap_or_else(|p| p.into_inner());
        let index = usize::from(*tail & (inner.count - 1));
        let base = inner.entries.addr().cast::<BufRingEntry>();
        // SAFETY: `index < count`, so the entry lies inside the mapping; the kernel reads only
        // entries between its head and the published tail, and this one is past the tail.
        unsafe {
            let entry = &mut *base.add(index);
            entry.set_addr(
                inner
                    .memory
                    .as_ptr()
                    .add(usize::from(bid) * inner.size as usize) as u64,
            );
            entry.set_len(inner.size);
            entry.set_bid(bid);
        }
        *tail = tail.wrapping_add(1);
        // SAFETY: `BufRingEntry::tail` points at the tail field inside entry 0 of the mapping,
        // which is 2-byte aligned and shared with the kernel only through atomic accesses.
        let shared_tail = unsafe { AtomicU16::from_ptr(BufRingEntry::tail(base).cast_mut()) };
        shared_tail.store(*tail, Ordering::Release);
    }
}

/// A received buffer taken from a [`ProvidedBuffers`] ring; dropping it gives it back to the ring.
#[derive(Debug)]
pub struct ProvidedBuf {
    owner: ProvidedBuffers,
    bid: u16,
    len: usize,
}

impl ProvidedBuf {
    /// The buffer id within its group.
    pub fn bid(&self) -> u16 {
        self.bid
    }
}

impl Deref for ProvidedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        let inner = &self.owner.inner;
        // SAFETY: the buffer is out of the ring (marked in `out`), so the kernel does not write
        // it until it is recycled in `drop`; `len <= size` keeps the slice inside its buffer.
        unsafe {
            std::slice::from_raw_parts(
                inner
                    .memory
                    .as_ptr()
                    .add(usize::from(self.bid) * inner.size as usize),
                self.len,
            )
        }
    }
}

impl Drop for ProvidedBuf {
    fn drop(&mut self) {
        self.owner.recycle(self.bid);
    }
}
