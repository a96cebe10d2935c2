//! Owned I/O buffers whose bytes do not move while the kernel uses them.

use std::ops::{Deref, DerefMut};

use std::sync::Arc;

use crate::uring::AlignedAlloc;

use super::error::FileError;
use super::region::Region;

#[derive(Debug)]
enum Storage {
    Vec(Vec<u8>),
    Aligned {
        alloc: AlignedAlloc,
        len: usize,
    },
    /// `len` bytes at `offset` of a region shared with other buffers (disjoint ranges).
    Region {
        region: Arc<Region>,
        offset: usize,
        len: usize,
    },
}

/// An owned byte buffer handed to a file operation and given back with its completion.
///
/// Either a plain `Vec<u8>` or an aligned allocation (needed for `O_DIRECT`). Buffers from
/// [`super::FileIo::register_buffers`] are also registered with the ring, which lets reads and
/// writes skip pinning pages on every operation.
#[derive(Debug)]
pub struct IoBuffer {
    storage: Storage,
    /// `(ring id, buffer index)` when registered as a fixed buffer.
    fixed: Option<(u64, u16)>,
}

impl IoBuffer {
    /// `len` zero bytes aligned to `align` (a power of two, e.g. 4096 for `O_DIRECT`).
    pub fn aligned(len: usize, align: usize) -> Result<Self, FileError> {
        let alloc = AlignedAlloc::new(len, align)?;
        Ok(Self {
            storage: Storage::Aligned { alloc, len },
            fixed: None,
        })
    }

    /// `count` buffers of `len` bytes each, carved from one huge-page-aligned region, each
    /// starting on a 4 KiB boundary.
    pub(crate) fn carve(count: usize, len: usize) -> Result<Vec<Self>, FileError> {
        let stride = len.max(1).next_multiple_of(4096);
        let region = Arc::new(Region::new(stride * count)?);
        debug_assert!(region.len() >= stride * count);
        Ok((0..count)
            .map(|i| Self {
                storage: Storage::Region {
                    region: Arc::clone(&region),
                    offset: i * stride,
                    len,
                },
                fixed: None,
            })
            .collect())
    }

    pub(crate) fn with_fixed(mut self, ring: u64, index: u16) -> Self {
        self.fixed = Some((ring, index));
        self
    }

    /// `(ring id, index)` of a registered buffer.
    pub(crate) fn fixed(&self) -> Option<(u64, u16)> {
        self.fixed
    }

    /// Whether this buffer is registered with a ring as a fixed buffer.
    pub fn is_fixed(&self) -> bool {
        self.fixed.is_some()
    }

    /// Length in bytes (what a read fills at most, what a write writes).
    pub fn len(&self) -> usize {
        match &self.storage {
            Storage::Vec(v) => v.len(),
            Storage::Aligned { len, .. } | Storage::Region { len, .. } => *len,
        }
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first byte, for building submissions.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        match &mut self.storage {
            Storage::Vec(v) => v.as_mut_ptr(),
            Storage::Aligned { alloc, .. } => alloc.as_ptr(),
            // SAFETY: `offset + len` lies inside the region (see `carve`).
            Storage::Region { region, offset, .. } => unsafe { region.as_ptr().add(*offset) },
        }
    }

    /// The address of the first byte (for alignment checks and messages).
    pub fn addr(&self) -> usize {
        self.as_ptr() as usize
    }

    fn as_ptr(&self) -> *const u8 {
        match &self.storage {
            Storage::Vec(v) => v.as_ptr(),
            Storage::Aligned { alloc, .. } => alloc.as_ptr(),
            // SAFETY: `offset + len` lies inside the region (see `carve`).
            Storage::Region { region, offset, .. } => unsafe { region.as_ptr().add(*offset) },
        }
    }

    /// The bytes as a `Vec` (copied out of an aligned allocation).
    pub fn into_vec(self) -> Vec<u8> {
        match self.storage {
            Storage::Vec(v) => v,
            Storage::Aligned { .. } | Storage::Region { .. } => self.to_vec(),
        }
    }
}

impl From<Vec<u8>> for IoBuffer {
    fn from(v: Vec<u8>) -> Self {
        Self {
            storage: Storage::Vec(v),
            fixed: None,
        }
    }
}

impl Deref for IoBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.storage {
            Storage::Vec(v) => v,
            // SAFETY: the allocation holds at least `len` initialised (zeroed) bytes and is owned
            // by `self`; no operation uses it while the caller holds the buffer.
            Storage::Aligned { alloc, len } => unsafe {
                std::slice::from_raw_parts(alloc.as_ptr(), *len)
            },
            Storage::Region {
                region,
                offset,
                len,
            } => {
                // SAFETY: the range lies inside the region (zeroed by the kernel when mapped),
                // which lives as long as `self`; no other buffer covers it and no operation uses
                // it while the caller holds the buffer.
                unsafe { std::slice::from_raw_parts(region.as_ptr().add(*offset), *len) }
            }
        }
    }
}

impl DerefMut for IoBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.storage {
            Storage::Vec(v) => v,
            // SAFETY: as in `deref`, with exclusive access through `&mut self`.
            Storage::Aligned { alloc, len } => unsafe {
                std::slice::from_raw_parts_mut(alloc.as_ptr(), *len)
            },
            Storage::Region {
                region,
                offset,
                len,
            } => {
                // SAFETY: as in `deref`, with exclusive access through `&mut self`.
                unsafe { std::slice::from_raw_parts_mut(region.as_ptr().add(*offset), *len) }
            }
        }
    }
}

/// The buffers an operation gives back with its completion.
#[derive(Debug)]
pub enum Buffers {
    /// No buffer (fsync).
    None,
    /// The buffer of a read or write.
    One(IoBuffer),
    /// The buffers of a vectored read or write, in order.
    Many(Vec<IoBuffer>),
}

impl Buffers {
    /// The single buffer, if this is one.
    pub fn into_one(self) -> Option<IoBuffer> {
        match self {
            Self::One(b) => Some(b),
            _ => None,
        }
    }

    /// All buffers, in order (empty for none).
    pub fn into_vec(self) -> Vec<IoBuffer> {
        match self {
            Self::None => Vec::new(),
            Self::One(b) => vec![b],
            Self::Many(v) => v,
        }
    }

    /// Total bytes across the buffers.
    pub fn total_len(&self) -> usize {
        match self {
            Self::None => 0,
            Self::One(b) => b.len(),
            Self::Many(v) => v.iter().map(|b| b.len()).sum(),
        }
    }
}
