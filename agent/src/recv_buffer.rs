//! [`RecvBuffer`]: where a nonblocking receive puts its message.

use std::sync::{Arc, Mutex, MutexGuard};

/// The destination of a receive: a buffer of fixed capacity that the agent fills and the
/// caller reads once the receive's request completed.
///
/// It is a shared handle (cloning gives another handle on the same bytes): the agent keeps one
/// until the message is in, the caller keeps the other. The agent never writes more than
/// [`RecvBuffer::capacity`] bytes: a longer message is truncated and its request fails with
/// [`AgentError::Truncated`](crate::error::AgentError::Truncated).
#[derive(Debug, Clone)]
pub struct RecvBuffer {
    data: Arc<Mutex<Vec<u8>>>,
    capacity: usize,
}

impl RecvBuffer {
    /// An empty buffer that accepts up to `capacity` bytes. Memory is allocated as bytes
    /// arrive.
    pub fn new(capacity: usize) -> RecvBuffer {
        RecvBuffer {
            data: Arc::new(Mutex::new(Vec::new())),
            capacity,
        }
    }

    /// Most bytes this buffer accepts.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> MutexGuard<'_, Vec<u8>> {
        // The lock is only held for copies that cannot panic; a poisoned lock still holds
        // consistent bytes.
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Number of bytes received so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no byte was received.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the received bytes out (the buffer is then empty).
    pub fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.lock())
    }

    /// Empties the buffer but keeps its memory, so that posting it again with
    /// [`Agent::irecv_into`](crate::agent::Agent::irecv_into) receives into the same pages
    /// (no allocation or page faults for a repeated large receive).
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Copies the received bytes to the front of `out`; returns how many were copied.
    pub fn copy_to(&self, out: &mut [u8]) -> usize {
        let d = self.lock();
        let n = d.len().min(out.len());
        out[..n].copy_from_slice(&d[..n]);
        n
    }

    /// Runs `f` on the received bytes without copying them.
    pub fn with<T>(&self, f: impl FnOnce(&[u8]) -> T) -> T {
        f(&self.lock())
    }

    /// Appends `bytes`, up to the capacity; returns how many were kept.
    pub(crate) fn fill(&self, bytes: &[u8]) -> usize {
        let mut d = self.lock();
        let room = self.capacity - d.len().min(self.capacity);
        let n = room.min(bytes.len());
        if d.capacity() == 0 && n < bytes.len() {
            d.reserve_exact(self.capacity);
        }
        d.extend_from_slice(&bytes[..n]);
        n
    }

    /// Prepares room for `want` bytes of a message, taking the memory from `spare` when the
    /// buffer has none yet.
    pub(crate) fn expect_in(&self, want: usize, spare: &mut crate::spare::Spare) {
        let mut d = self.lock();
        if d.capacity() == 0 && want >= crate::spare::MIN_BYTES {
            *d = spare.take(want);
        } else {
            let extra = want.saturating_sub(d.len());
            d.reserve_exact(extra);
        }
    }
}
