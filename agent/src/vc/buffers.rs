//! The buffer pool of one VC: free buffers for `Agent::get_buffer`, and the buffers its
//! method holds for written method buffers until their completion (see [`crate::stream`]
//! for the operations on top of it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Buffers kept for reuse per VC; more released ones are freed.
const POOL_BUFFERS: usize = 8;

/// Where a written method buffer goes back to the waiting write handle.
pub(crate) type Slot = Arc<Mutex<Option<Vec<u8>>>>;

/// The buffer pool of one VC, and the buffers its method holds for written method buffers.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    free: Vec<Vec<u8>>,
    /// Descriptor id -> where its buffer goes back when the method completes it.
    in_method: HashMap<u64, Slot>,
}

impl BufferPool {
    /// A buffer of `len` bytes (zeroed where new), from the pool when one is large enough.
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        let fit = self.free.iter().position(|b| b.capacity() >= len);
        let mut buf = fit.map(|i| self.free.swap_remove(i)).unwrap_or_default();
        buf.clear();
        buf.resize(len, 0);
        buf
    }

    /// Keeps `buf` for reuse, while the pool holds fewer than its bound.
    pub(crate) fn put(&mut self, buf: Vec<u8>) {
        if self.free.len() < POOL_BUFFERS && buf.capacity() > 0 {
            self.free.push(buf);
        }
    }

    /// The method now holds the buffer of descriptor `id`; it goes back through `slot`.
    pub(crate) fn hold(&mut self, id: u64, slot: Slot) {
        self.in_method.insert(id, slot);
    }

    /// The method completed descriptor `id` and handed back `buf`: to the waiting
    /// [`BufferWrite`](crate::stream::BufferWrite), or to the pool when that was dropped; any other buffer is given back
    /// to the caller.
    pub(crate) fn returned(&mut self, id: u64, buf: Vec<u8>) -> Option<Vec<u8>> {
        if self.in_method.is_empty() {
            return Some(buf);
        }
        match self.in_method.remove(&id) {
            Some(slot) => {
                if Arc::strong_count(&slot) == 1 {
                    self.put(buf);
                } else {
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(buf);
                }
                None
            }
            None => Some(buf),
        }
    }

    /// The VC failed: buffers its method still holds will not come back.
    pub(crate) fn clear_in_method(&mut self) {
        self.in_method.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_reuses_buffers_and_routes_returned_ones() {
        let mut pool = BufferPool::default();
        let a = pool.take(100);
        assert_eq!(a.len(), 100);
        let at = a.as_ptr();
        pool.put(a);
        // A smaller request reuses the larger buffer, zeroed to its length.
        let b = pool.take(10);
        assert_eq!((b.as_ptr(), b.len()), (at, 10));
        // A buffer whose write is awaited goes to the waiter; one nobody awaits, to the pool;
        // an unknown one is freed.
        let slot: Slot = Arc::new(Mutex::new(None));
        pool.in_method.insert(7, Arc::clone(&slot));
        pool.returned(7, b);
        assert_eq!(slot.lock().unwrap().as_ref().map(|v| v.as_ptr()), Some(at));
        pool.in_method.insert(8, Arc::new(Mutex::new(None)));
        pool.returned(8, vec![1; 4]);
        assert_eq!(pool.free.len(), 1);
        pool.returned(9, vec![1; 4]);
        assert_eq!(pool.free.len(), 1);
        for _ in 0..2 * POOL_BUFFERS {
            pool.put(vec![0; 1]);
        }
        assert_eq!(pool.free.len(), POOL_BUFFERS);
    }
}
