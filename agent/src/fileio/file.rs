//! [`File`]: a file opened on a [`FileEngine`], with nonblocking positional operations.

use std::path::Path;
use std::sync::Arc;

use viaduct_fallback::file::{FileOp, IoBuffer};

use super::class::{OpState, UringClass};
use super::engine::FileEngine;
use super::error::FileIoError;
use super::request::{BufferClaim, FileRequest};
use crate::request::RequestClass;

/// How to open a [`File`] (the `std::fs::OpenOptions` switches plus `O_DIRECT`).
#[derive(Debug, Clone, Default)]
#[allow(clippy::struct_excessive_bools)]
pub struct OpenOptions {
    /// Open for reading.
    pub read: bool,
    /// Open for writing.
    pub write: bool,
    /// Every write goes to the end of the file (`O_APPEND`: positional offsets are ignored).
    pub append: bool,
    /// Create the file if it does not exist.
    pub create: bool,
    /// Truncate the file to 0 bytes.
    pub truncate: bool,
    /// Bypass the page cache (`O_DIRECT`): buffers, lengths and offsets must be aligned, which is
    /// checked before submission.
    pub direct: bool,
}

impl OpenOptions {
    /// Read only.
    pub fn read() -> Self {
        Self {
            read: true,
            ..Self::default()
        }
    }

    /// Read and write, created if missing, truncated.
    pub fn create_rw() -> Self {
        Self {
            read: true,
            write: true,
            create: true,
            truncate: true,
            ..Self::default()
        }
    }
}

/// A file whose reads, writes and syncs are agent requests completed through io_uring.
#[derive(Debug, Clone)]
pub struct File {
    pub(super) file: Arc<std::fs::File>,
    pub(super) engine: FileEngine,
}

impl File {
    /// Opens `path` with `options` on `engine`.
    pub fn open(
        engine: &FileEngine,
        path: impl AsRef<Path>,
        options: &OpenOptions,
    ) -> Result<Self, FileIoError> {
        let path = path.as_ref();
        let mut o = std::fs::OpenOptions::new();
        o.read(options.read)
            .write(options.write)
            .append(options.append)
            .create(options.create)
            .truncate(options.truncate);
        if options.direct {
            use std::os::unix::fs::OpenOptionsExt;
            o.custom_flags(libc::O_DIRECT);
        }
        let file = o.open(path).map_err(|source| FileIoError::Open {
            path: path.to_owned(),
            source,
        })?;
        Ok(Self {
            file: Arc::new(file),
            engine: engine.clone(),
        })
    }

    /// The underlying standard file.
    pub fn std(&self) -> &std::fs::File {
        &self.file
    }

    /// Starts a read filling `buf` from `offset` (short only at end of file).
    pub fn iread_at(&self, buf: IoBuffer, offset: u64) -> FileRequest {
        self.start(|io, f| io.read_at(f, buf, offset))
    }

    /// Starts a write of all of `buf` at `offset`.
    pub fn iwrite_at(&self, buf: IoBuffer, offset: u64) -> FileRequest {
        self.start(|io, f| io.write_at(f, buf, offset))
    }

    /// Starts a vectored read filling `bufs` in order from `offset`.
    pub fn ireadv_at(&self, bufs: Vec<IoBuffer>, offset: u64) -> FileRequest {
        self.start(|io, f| io.readv_at(f, bufs, offset))
    }

    /// Starts a vectored write of `bufs` in order at `offset`.
    pub fn iwritev_at(&self, bufs: Vec<IoBuffer>, offset: u64) -> FileRequest {
        self.start(|io, f| io.writev_at(f, bufs, offset))
    }

    /// Starts an `fsync` (data and metadata).
    pub fn isync(&self) -> FileRequest {
        self.start(|io, f| io.fsync(f))
    }

    /// Starts an `fdatasync` (data, and metadata only as needed to read it back).
    pub fn isync_data(&self) -> FileRequest {
        self.start(|io, f| io.fdatasync(f))
    }

    pub(super) fn start(
        &self,
        begin: impl FnOnce(&mut viaduct_fallback::file::FileIo, &Arc<std::fs::File>) -> FileOp,
    ) -> FileRequest {
        let op = {
            let mut io = self.engine.lock();
            let op = begin(&mut io, &self.file);
            // Errors here surface as the operation's own result at the next poll or wait.
            let _ = io.submit();
            op
        };
        let class: &RequestClass<UringClass> = &self.engine.class;
        let state = Arc::new(OpState::new(op));
        // Completion comes from the class's hooks, not from this outside handle.
        let (request, _outside) = class.start(Arc::clone(&state));
        FileRequest {
            request,
            buffers: BufferClaim { state },
        }
    }
}
