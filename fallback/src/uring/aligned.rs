//! Heap memory with a chosen alignment (page-aligned buffers for O_DIRECT and buffer rings).

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

use super::error::UringError;

/// A zero-initialised heap allocation of `len` bytes aligned to `align` (a power of two).
///
/// Accessed through raw pointers only: the kernel may write into it while an operation owns it,
/// so this type never hands out references itself.
#[derive(Debug)]
pub struct AlignedAlloc {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the allocation is plain bytes owned by this value; moving it between threads is sound.
unsafe impl Send for AlignedAlloc {}
// SAFETY: this type exposes only raw pointers; synchronising access through them is the
// caller's job, as documented on `as_ptr`.
unsafe impl Sync for AlignedAlloc {}

impl AlignedAlloc {
    /// Allocates `len` zeroed bytes aligned to `align`; `len` 0 is rounded up to 1.
    pub fn new(len: usize, align: usize) -> Result<Self, UringError> {
        let layout = Layout::from_size_align(len.max(1), align).map_err(|e| {
            UringError::InvalidArgument(format!("allocation of {len} bytes aligned {align}: {e}"))
        })?;
        // SAFETY: `layout` has a nonzero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| {
            UringError::InvalidArgument(format!("out of memory allocating {len} bytes"))
        })?;
        Ok(Self { ptr, layout })
    }

    /// The first byte. Valid for [`AlignedAlloc::len`] bytes for as long as `self` lives.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// Whether the allocation is empty (never: a zero length is rounded up to 1).
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for AlignedAlloc {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout and is freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}
