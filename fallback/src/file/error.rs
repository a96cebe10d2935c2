//! Errors of file operations, naming the errno and what it usually means.

use std::fmt;
use std::io;

use crate::uring::UringError;

/// Which file operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// Positional read.
    Read,
    /// Positional write.
    Write,
    /// Vectored positional read.
    Readv,
    /// Vectored positional write.
    Writev,
    /// `fsync`.
    Fsync,
    /// `fdatasync`.
    Fdatasync,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Readv => "readv",
            Self::Writev => "writev",
            Self::Fsync => "fsync",
            Self::Fdatasync => "fdatasync",
        })
    }
}

/// Why a file operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The kernel returned an error for the operation.
    #[error("{op} at offset {offset} failed with {name} after {done} bytes: {hint}", name = errno_name(*errno))]
    Os {
        /// The operation.
        op: OpKind,
        /// The file offset the operation started at.
        offset: u64,
        /// Bytes moved before the error (from earlier partial transfers).
        done: usize,
        /// The errno.
        errno: i32,
        /// What the errno usually means for file I/O.
        hint: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// An `O_DIRECT` transfer whose buffer address, length or offset is not aligned.
    #[error(
        "O_DIRECT {op} refused before submission: buffer address {addr:#x} (needs a multiple of \
         {mem_align}), length {len} and offset {offset} (need multiples of the logical block \
         size {block}) are not all aligned"
    )]
    Misaligned {
        /// The operation.
        op: OpKind,
        /// Address of the offending buffer.
        addr: usize,
        /// Its length.
        len: usize,
        /// The file offset.
        offset: u64,
        /// Memory alignment the file needs.
        mem_align: u32,
        /// Offset/length alignment (the logical block size).
        block: u32,
    },
    /// The operation was cancelled before it finished.
    #[error("{op} at offset {offset} was cancelled after {done} bytes")]
    Cancelled {
        /// The operation.
        op: OpKind,
        /// The file offset the operation started at.
        offset: u64,
        /// Bytes moved before the cancel took effect.
        done: usize,
    },
    /// A write that the kernel completed with 0 bytes.
    #[error("write at offset {offset} made no progress after {done} bytes (0 bytes written)")]
    WriteZero {
        /// The file offset the operation started at.
        offset: u64,
        /// Bytes written before.
        done: usize,
    },
    /// The arguments cannot make a valid operation.
    #[error("{op}: {reason}")]
    InvalidArgument {
        /// The operation.
        op: OpKind,
        /// What is wrong.
        reason: String,
    },
    /// Mapping memory for registered buffers failed.
    #[error("mapping {len} bytes for registered buffers failed")]
    Map {
        /// Bytes asked for.
        len: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The io_uring engine failed (ring creation, submission, registration).
    #[error(transparent)]
    Engine(#[from] UringError),
}

impl FileError {
    /// The errno behind this error, if the kernel returned one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Os { errno, .. } => Some(*errno),
            Self::Cancelled { .. } => Some(libc::ECANCELED),
            Self::Engine(e) => e.raw_os_error(),
            _ => None,
        }
    }

    pub(crate) fn os(op: OpKind, offset: u64, done: usize, errno: i32, direct: bool) -> Self {
        Self::Os {
            op,
            offset,
            done,
            errno,
            hint: errno_hint(errno, op, direct),
            source: io::Error::from_raw_os_error(errno),
        }
    }
}

/// The symbolic name of an errno common in file I/O (`errno N` for others).
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EBADF => "EBADF",
        libc::ENOSPC => "ENOSPC",
        libc::EFBIG => "EFBIG",
        libc::EIO => "EIO",
        libc::EINVAL => "EINVAL",
        libc::EFAULT => "EFAULT",
        libc::EISDIR => "EISDIR",
        libc::EROFS => "EROFS",
        libc::EDQUOT => "EDQUOT",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::ECANCELED => "ECANCELED",
        libc::EAGAIN => "EAGAIN",
        libc::EINTR => "EINTR",
        libc::ENXIO => "ENXIO",
        libc::ESPIPE => "ESPIPE",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => return format!("errno {errno}"),
    };
    name.to_owned()
}

fn errno_hint(errno: i32, op: OpKind, direct: bool) -> &'static str {
    let writing = matches!(op, OpKind::Write | OpKind::Writev);
    match errno {
        libc::EBADF if writing => {
            "the descriptor is not open for writing (was the file opened read-only?)"
        }
        libc::EBADF => "the descriptor is not open for this access or is closed",
        libc::ENOSPC => "no space left on the device",
        libc::EDQUOT => "the disk quota is exhausted",
        libc::EFBIG => {
            "the write goes past the file size limit (RLIMIT_FSIZE, see `ulimit -f`) or the \
             largest file the filesystem allows"
        }
        libc::EIO => "the device or filesystem reported an I/O error",
        libc::EINVAL if direct => {
            "the filesystem refused the O_DIRECT transfer (alignment or size not accepted)"
        }
        libc::EINVAL => "the kernel refused the arguments",
        libc::EISDIR => "the descriptor refers to a directory",
        libc::EROFS => "the filesystem is read-only",
        libc::EFAULT => "a buffer address is invalid",
        libc::EOVERFLOW | libc::ENXIO => "the offset is beyond what the file or device allows",
        libc::ESPIPE => "the descriptor is not seekable (a pipe or socket)",
        _ => "see errno(3)",
    }
}
