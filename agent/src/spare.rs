//! Large buffers kept for reuse: the pieces of rendezvous sends and the memory of rendezvous
//! receives.
//!
//! A buffer of several megabytes comes from the allocator as fresh pages: every page faults
//! and is zeroed on first touch, and freeing it unmaps it again, so a stream of large messages
//! would spend more time in page faults than in copies. The agent keeps a few such buffers
//! (at most [`MAX_BUFFERS`], [`MAX_BYTES`] in all) once their message is done: the pieces a
//! method hands back when a send completes, and the memory of a blocking receive once its
//! bytes were copied out. Buffers below [`MIN_BYTES`] are left to the allocator.

/// Smallest buffer worth keeping.
pub(crate) const MIN_BYTES: usize = 64 << 10;
/// Most buffers kept.
pub(crate) const MAX_BUFFERS: usize = 32;
/// Most bytes kept in all.
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// The kept buffers.
#[derive(Debug, Default)]
pub(crate) struct Spare {
    free: Vec<Vec<u8>>,
    bytes: usize,
}

impl Spare {
    /// An empty buffer with room for `len` bytes: a kept one when one is large enough (and not
    /// more than twice as large), else a new allocation.
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        if len >= MIN_BYTES {
            let fit = self
                .free
                .iter()
                .position(|b| b.capacity() >= len && b.capacity() / 2 <= len);
            if let Some(i) = fit {
                let mut b = self.free.swap_remove(i);
                self.bytes -= b.capacity();
                b.clear();
                return b;
            }
        }
        Vec::with_capacity(len)
    }

    /// Keeps `buf` for reuse if it is large and there is room; frees it otherwise.
    pub(crate) fn put(&mut self, buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap >= MIN_BYTES && self.free.len() < MAX_BUFFERS && self.bytes + cap <= MAX_BYTES {
            self.bytes += cap;
            self.free.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_is_handed_out_again_for_a_similar_size() {
        let mut s = Spare::default();
        let b = vec![7u8; 1 << 20];
        let ptr = b.as_ptr();
        s.put(b);
        let again = s.take((1 << 20) - 100);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        // Too small a request for that buffer, and small buffers are not kept.
        s.put(again);
        let small = s.take(100 << 10);
        assert_ne!(small.as_ptr(), ptr);
        s.put(vec![0u8; 100]);
        assert_eq!(s.free.len(), 1);
    }

    #[test]
    fn the_kept_bytes_are_bounded() {
        let mut s = Spare::default();
        for _ in 0..MAX_BUFFERS + 4 {
            s.put(Vec::with_capacity(16 << 20));
        }
        assert!(s.bytes <= MAX_BYTES);
        assert_eq!(s.free.len(), MAX_BYTES / (16 << 20));
    }
}
