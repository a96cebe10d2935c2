//! Handles of file operations and what they complete with.

use std::sync::{Arc, Mutex};

use super::buffer::Buffers;
use super::error::{FileError, OpKind};

/// Keys of handles dropped without being taken, for the engine to collect.
pub(crate) type DropQueue = Arc<Mutex<Vec<u64>>>;

/// A file operation started on a [`super::FileIo`].
///
/// Ask the engine about it ([`super::FileIo::is_done`], [`super::FileIo::wait_any`]) and collect
/// its result with [`super::FileIo::take`]. Dropping the handle gives up the result: the engine
/// keeps the buffers until the kernel has finished with them, then frees them.
#[must_use = "dropping a file operation discards its result"]
#[derive(Debug)]
pub struct FileOp {
    pub(crate) key: u64,
    pub(crate) engine: u64,
    drops: Option<DropQueue>,
}

impl FileOp {
    pub(crate) fn new(key: u64, engine: u64, drops: DropQueue) -> Self {
        Self {
            key,
            engine,
            drops: Some(drops),
        }
    }

    /// Turns the handle off: its drop no longer reports anything.
    pub(crate) fn disarm(mut self) -> u64 {
        self.drops = None;
        self.key
    }
}

impl Drop for FileOp {
    fn drop(&mut self) {
        if let Some(q) = self.drops.take() {
            q.lock().unwrap_or_else(|p| p.into_inner()).push(self.key);
        }
    }
}

/// A finished file operation: its result and its buffers, handed back.
#[derive(Debug)]
pub struct FileCompletion {
    /// Which operation this was.
    pub kind: OpKind,
    /// Bytes moved (a read at end of file reports what it read, possibly 0), or why it failed.
    pub result: Result<usize, FileError>,
    /// The buffers the operation owned.
    pub buffers: Buffers,
}
