//! Errors of the TCP method.

use std::io;

use crate::frame::FrameError;
use crate::shm::AccessError;
use crate::uring::UringError;

/// An error of the TCP method. Every variant names the failing step; OS errors are kept as the
/// source and their errno is available through [`Error::errno`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket call during set-up failed.
    #[error("TCP {step} failed")]
    Socket {
        /// The step: bind, accept, connect, set option, handshake I/O.
        step: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The peer is not a viaduct TCP endpoint or speaks another version.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The configuration cannot work.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The io_uring engine failed (creating the ring, registering buffers, submitting).
    #[error("io_uring engine failed")]
    Uring(#[source] UringError),
    /// A send on the connection failed with an OS error.
    #[error("sending on the connection failed")]
    Send(#[source] io::Error),
    /// The peer closed the connection or died; outstanding descriptors complete with this.
    #[error("peer failed: {0}")]
    PeerFailed(&'static str),
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
    /// The peer sent a malformed frame; the connection is closed.
    #[error("malformed frame from the peer")]
    Frame(#[source] FrameError),
    /// A sleep on the endpoint's descriptors (`poll`) failed.
    #[error("waiting on the connection failed")]
    Wait(#[source] io::Error),
    /// The peer broke the protocol in a way the frame decoder cannot see.
    #[error("protocol violation by the peer: {0}")]
    Protocol(String),
}

impl Error {
    /// The errno that best describes this error: the OS error where there is one, otherwise the
    /// code a C caller would expect.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Socket { source, .. } | Error::Send(source) | Error::Wait(source) => {
                source.raw_os_error().unwrap_or(libc::EIO)
            }
            Error::Uring(e) => e.raw_os_error().unwrap_or(libc::EIO),
            Error::Handshake(_) | Error::Protocol(_) => libc::EPROTO,
            Error::Frame(e) => e.errno(),
            Error::Config(_) | Error::ConsumeBeyond { .. } => libc::EINVAL,
            Error::PeerFailed(_) => libc::EPIPE,
            Error::TooLong { .. } => libc::EMSGSIZE,
            Error::RemoteAccess(AccessError::BadKey) => libc::EACCES,
            Error::RemoteAccess(AccessError::OutOfBounds) => libc::ERANGE,
        }
    }
}
