//! One anonymous mapping, aligned to huge pages, that registered buffers are carved from.

use std::io;
use std::ptr::NonNull;

use super::error::FileError;

/// Size of a transparent huge page on x86-64 and arm64 with 4 KiB base pages.
const HUGE_PAGE: usize = 2 << 20;

/// Zeroed memory from `mmap`. From 2 MiB on it is aligned to 2 MiB and marked `MADV_HUGEPAGE`,
/// so the kernel can back it with huge pages: a registered buffer in it is then a few physically
/// contiguous pieces instead of one per 4 KiB page, which shortens the kernel's copies to and
/// from it.
#[derive(Debug)]
pub(crate) struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain bytes owned by this value (unmapped once, on drop); the buffers
// carved from it cover disjoint ranges and each is accessed only through its owner.
unsafe impl Send for Region {}
// SAFETY: as above; `Region` itself hands out only a raw pointer.
unsafe impl Sync for Region {}

impl Region {
    /// Maps at least `len` bytes: whole huge pages from 2 MiB on, whole 4 KiB pages below (a
    /// huge page for a smaller region would mostly be waste).
    pub(crate) fn new(len: usize) -> Result<Self, FileError> {
        let huge = len >= HUGE_PAGE;
        let (len, align) = if huge {
            (len.next_multiple_of(HUGE_PAGE), HUGE_PAGE)
        } else {
            (len.max(1).next_multiple_of(4096), 4096)
        };
        let map_len = len + align - 4096;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing; no
        // existing memory is touched.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(FileError::Map {
                len,
                source: io::Error::last_os_error(),
            });
        }
        let base = raw as usize;
        let start = base.next_multiple_of(align);
        let head = start - base;
        let tail = map_len - head - len;
        // SAFETY: both ranges lie inside the mapping made above and are not used by anything;
        // unmapping them leaves exactly [start, start + len) mapped.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
        }
        if huge {
            // SAFETY: advice on the range mapped above; a kernel without transparent huge pages
            // refuses it, which leaves ordinary pages (not an error for the buffers).
            unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        }
        let ptr = NonNull::new(start as *mut u8).ok_or_else(|| FileError::Map {
            len,
            source: io::Error::from(io::ErrorKind::InvalidData),
        })?;
        Ok(Self { ptr, len })
    }

    /// The first byte; valid for [`Region::len`] bytes while `self` lives.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the range is the mapping made in `new`, unmapped once; every buffer carved from
        // it holds the region, so none is left pointing into it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
