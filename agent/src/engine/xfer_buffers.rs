//! [`XferBuffers`]: where a started block's buffers come back; [`XferMonitor`]: its progress
//! counters.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::xfer::BufSlot;
use crate::xfer_base::BufId;

/// What a running block shares with its caller: the buffers once it ended, and counters.
#[derive(Debug, Default)]
pub(crate) struct RunShared {
    pub(crate) bufs: BufSlot,
    pub(crate) pieces_in: AtomicU64,
    pub(crate) pieces_out: AtomicU64,
    pub(crate) steps_done: AtomicU64,
}

/// The buffers of a started block (or collective schedule). They come back once its request
/// completed, successfully or not (like the [`RecvBuffer`](crate::recv_buffer::RecvBuffer) of
/// a receive); until then the agent owns them.
#[derive(Debug)]
pub struct XferBuffers {
    pub(crate) shared: Arc<RunShared>,
}

impl XferBuffers {
    pub(crate) fn new(shared: Arc<RunShared>) -> XferBuffers {
        XferBuffers { shared }
    }

    /// Whether the block ended and its buffers are back.
    pub fn is_ready(&self) -> bool {
        self.shared
            .bufs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Takes buffer `id` out (`None` while the block runs, or when taken already).
    pub fn take(&self, id: BufId) -> Option<Vec<u8>> {
        let mut slot = self.shared.bufs.lock().unwrap_or_else(|e| e.into_inner());
        let b = slot.as_mut()?.get_mut(id.0)?;
        Some(std::mem::take(b))
    }

    /// Takes every buffer out, in the order `buffer` gave their ids (`None` while the block
    /// runs, or when taken already).
    pub fn take_all(&self) -> Option<Vec<Vec<u8>>> {
        self.shared
            .bufs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Counters of the block's progress, readable from any thread while it runs.
    pub fn monitor(&self) -> XferMonitor {
        XferMonitor {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Progress counters of a started block, for observing pipelining: a cheap shared handle.
#[derive(Debug, Clone)]
pub struct XferMonitor {
    shared: Arc<RunShared>,
}

impl XferMonitor {
    /// Pieces of incoming messages that arrived and were handled (stored, combined, forwarded).
    pub fn pieces_received(&self) -> u64 {
        self.shared.pieces_in.load(Ordering::Relaxed)
    }

    /// Pieces of outgoing messages handed to the VCs.
    pub fn pieces_sent(&self) -> u64 {
        self.shared.pieces_out.load(Ordering::Relaxed)
    }

    /// Steps (blocks of a schedule) finished.
    pub fn steps_done(&self) -> u64 {
        self.shared.steps_done.load(Ordering::Relaxed)
    }
}
