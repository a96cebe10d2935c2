//! Errors of the shared-memory method.

use std::io;

/// Why a remote access (emulated RDMA write or read) was refused by its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessError {
    /// The key names no region registered at the target.
    BadKey,
    /// The range `offset..offset + len` does not lie inside the region.
    OutOfBounds,
}

impl AccessError {
    /// Wire status code of this refusal (0 is success on the wire).
    pub(crate) fn code(self) -> u16 {
        match self {
            AccessError::BadKey => 1,
            AccessError::OutOfBounds => 2,
        }
    }

    /// Decodes a wire status code; `None` for 0 (success) and for unknown codes.
    pub(crate) fn from_code(code: u16) -> Option<Self> {
        match code {
            1 => Some(AccessError::BadKey),
            2 => Some(AccessError::OutOfBounds),
            _ => None,
        }
    }
}

impl std::fmt::Display for AccessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessError::BadKey => f.write_str("no region is registered under this key"),
            AccessError::OutOfBounds => f.write_str("the range lies outside the region"),
        }
    }
}

/// An error of the shared-memory method. Every variant names the failing step; OS errors are
/// kept as the source and their errno is available through [`Error::errno`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `memfd_create` or sizing the segment failed.
    #[error("creating the shared segment failed")]
    CreateSegment(#[source] io::Error),
    /// `mmap` of the shared segment failed.
    #[error("mapping the shared segment failed")]
    MapSegment(#[source] io::Error),
    /// A step on the unix socket used for set-up failed.
    #[error("unix socket {step} failed")]
    Socket {
        /// The step: bind, accept, connect, send, receive.
        step: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The peer sent something the set-up protocol does not allow.
    #[error("set-up handshake failed: {0}")]
    Handshake(String),
    /// The configuration cannot work (sizes out of range).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The peer closed the connection or died; outstanding descriptors complete with this.
    #[error("peer failed: {0}")]
    PeerFailed(&'static str),
    /// The single-copy read from the peer's memory (`process_vm_readv`) failed.
    #[error("single-copy read of {len} bytes from the peer failed")]
    SingleCopy {
        /// Bytes that were to be read.
        len: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A message or an access is longer than the configured maximum.
    #[error("{len} bytes exceed the maximum of {max} bytes")]
    TooLong {
        /// Requested length.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
    /// The target refused an emulated RDMA write or read.
    #[error("remote access refused: {0}")]
    RemoteAccess(AccessError),
    /// `consume` was asked to give back more bytes than `next` had shown.
    #[error("consume({requested}) beyond the {available} bytes available")]
    ConsumeBeyond {
        /// Bytes asked for.
        requested: usize,
        /// Bytes of the current message left.
        available: usize,
    },
    /// The peer wrote a record that breaks the ring protocol; the connection is unusable.
    #[error("protocol violation by the peer: {0}")]
    Protocol(String),
    /// A futex wait failed with an unexpected error.
    #[error("waiting on the shared segment failed")]
    Wait(#[source] io::Error),
}

impl Error {
    /// The errno that best describes this error: the OS error where there is one, otherwise the
    /// code a C caller would expect (`EPIPE` for a failed peer, `EACCES`/`ERANGE` for a refused
    /// access, `EMSGSIZE` for a too long message, `EPROTO` for a protocol violation).
    pub fn errno(&self) -> i32 {
        match self {
            Error::CreateSegment(e) | Error::MapSegment(e) | Error::Wait(e) => {
                e.raw_os_error().unwrap_or(libc::EIO)
            }
            Error::Socket { source, .. } | Error::SingleCopy { source, .. } => {
                source.raw_os_error().unwrap_or(libc::EIO)
            }
            Error::Handshake(_) | Error::Protocol(_) => libc::EPROTO,
            Error::Config(_) => libc::EINVAL,
            Error::PeerFailed(_) => libc::EPIPE,
            Error::TooLong { .. } => libc::EMSGSIZE,
            Error::RemoteAccess(AccessError::BadKey) => libc::EACCES,
            Error::RemoteAccess(AccessError::OutOfBounds) => libc::ERANGE,
            Error::ConsumeBeyond { .. } => libc::EINVAL,
        }
    }
}
