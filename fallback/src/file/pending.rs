//! A file operation in flight: its buffers, its progress, and the submission that continues it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use io_uring::{opcode, squeue, types};

use super::buffer::Buffers;
use super::error::OpKind;

/// Largest transfer put in one submission (a read or write is continued until done).
const MAX_CHUNK: usize = 1 << 30;

/// The payload the ring holds for a file operation.
#[derive(Debug)]
pub(crate) struct Pending {
    pub kind: OpKind,
    /// Keeps the descriptor open while the operation is in flight.
    pub file: Arc<File>,
    /// Index in the ring's fixed-file table, when the file is registered.
    pub fixed_file: Option<u32>,
    pub offset: u64,
    /// Bytes moved so far (by earlier, short transfers).
    pub done: usize,
    /// Bytes to move in all.
    pub total: usize,
    pub bufs: Buffers,
    /// iovecs of a vectored operation, rebuilt from `bufs` and `done` before each submission.
    iov: Vec<libc::iovec>,
    pub direct: bool,
    /// The next submission waits for the descriptor to be ready (`IORING_OP_POLL_ADD`) instead
    /// of moving bytes: set after the kernel answered `EAGAIN` (a descriptor in `O_NONBLOCK`
    /// mode that had nothing to read or no room to write).
    pub awaiting_ready: bool,
}

// SAFETY: the iovecs point only into `bufs`, which this value owns and moves along with them;
// everything else is `Send`.
unsafe impl Send for Pending {}

impl Pending {
    pub(crate) fn new(
        kind: OpKind,
        file: Arc<File>,
        fixed_file: Option<u32>,
        offset: u64,
        bufs: Buffers,
        direct: bool,
    ) -> Self {
        let total = bufs.total_len();
        Self {
            kind,
            file,
            fixed_file,
            offset,
            done: 0,
            total,
            bufs,
            iov: Vec::new(),
            direct,
            awaiting_ready: false,
        }
    }

    /// Whether this operation moves bytes (not a sync).
    pub(crate) fn is_transfer(&self) -> bool {
        !matches!(self.kind, OpKind::Fsync | OpKind::Fdatasync)
    }

    /// The submission for the rest of the operation. Its pointers point into `self.bufs` (heap
    /// memory that stays put when `self` moves) and `self.iov`.
    pub(crate) fn entry(&mut self, ring_id: u64) -> squeue::Entry {
        macro_rules! with_fd {
            ($build:expr) => {
                match self.fixed_file {
                    Some(i) => $build(types::Fixed(i)),
                    None => $build(types::Fd(self.file.as_raw_fd())),
                }
            };
        }
        if self.awaiting_ready {
            let mask = if matches!(self.kind, OpKind::Read | OpKind::Readv) {
                libc::POLLIN
            } else {
                libc::POLLOUT
            };
            return with_fd!(|fd| opcode::PollAdd::new(fd, mask as u32).build());
        }
        let len = (self.total - self.done).min(MAX_CHUNK) as u32;
        let off = self.offset + self.done as u64;
        let done = self.done;
        match self.kind {
            OpKind::Read | OpKind::Write => {
                let Buffers::One(buf) = &mut self.bufs else {
                    unreachable!("single-buffer operations own one buffer");
                };
                let fixed = buf.fixed().filter(|(r, _)| *r == ring_id).map(|(_, i)| i);
                // SAFETY: `done < total == buf.len()`, so the pointer stays inside the buffer.
                let ptr = unsafe { buf.as_mut_ptr().add(done) };
                let read = self.kind == OpKind::Read;
                match (read, fixed) {
                    (true, Some(i)) => {
                        with_fd!(|fd| opcode::ReadFixed::new(fd, ptr, len, i).offset(off).build())
                    }
                    (true, None) => {
                        with_fd!(|fd| opcode::Read::new(fd, ptr, len).offset(off).build())
                    }
                    (false, Some(i)) => {
                        with_fd!(|fd| opcode::WriteFixed::new(fd, ptr, len, i).offset(off).build())
                    }
                    (false, None) => {
                        with_fd!(|fd| opcode::Write::new(fd, ptr, len).offset(off).build())
                    }
                }
            }
            OpKind::Readv | OpKind::Writev => {
                self.rebuild_iov();
                let (ptr, n) = (self.iov.as_ptr(), self.iov.len() as u32);
                if self.kind == OpKind::Readv {
                    with_fd!(|fd| opcode::Readv::new(fd, ptr, n).offset(off).build())
                } else {
                    with_fd!(|fd| opcode::Writev::new(fd, ptr, n).offset(off).build())
                }
            }
            OpKind::Fsync => with_fd!(|fd| opcode::Fsync::new(fd).build()),
            OpKind::Fdatasync => with_fd!(|fd| opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build()),
        }
    }

    /// iovecs for the bytes not yet moved.
    fn rebuild_iov(&mut self) {
        self.iov.clear();
        let Buffers::Many(bufs) = &mut self.bufs else {
            return;
        };
        let mut skip = self.done;
        for buf in bufs.iter_mut() {
            let len = buf.len();
            if skip >= len {
                skip -= len;
                continue;
            }
            // SAFETY: `skip < len`, so the pointer stays inside the buffer.
            let base = unsafe { buf.as_mut_ptr().add(skip) };
            self.iov.push(libc::iovec {
                iov_base: base.cast(),
                iov_len: len - skip,
            });
            skip = 0;
        }
    }
}
