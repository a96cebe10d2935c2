//! Errors of the message endpoint.

use std::error::Error as _;

/// An error of the message endpoint. The verbs call behind a failure is kept as the source;
/// [`Error::errno`] gives the errno a C caller would expect.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A verbs call failed while setting up or driving the connection.
    #[error("{step} failed")]
    Verbs {
        /// What was being done.
        step: &'static str,
        /// The verbs error.
        #[source]
        source: crate::Error,
    },
    /// The settings cannot work.
    #[error("invalid message endpoint settings: {0}")]
    Config(String),
    /// The peer's business card cannot be read.
    #[error("malformed business card: {0}")]
    Card(String),
    /// The peer died, vanished, closed its end, or broke the protocol; accepted descriptors
    /// complete with this.
    #[error("peer failed: {0}")]
    PeerFailed(String),
    /// A message longer than the configured maximum.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    TooLong {
        /// Length given.
        len: usize,
        /// Configured maximum.
        max: usize,
    },
    /// A one-sided operation that cannot be posted as asked.
    #[error("invalid one-sided operation: {0}")]
    Rdma(String),
    /// `consume` was asked to give back more bytes than `next` had shown.
    #[error("consume({requested}) beyond the {available} bytes available")]
    ConsumeBeyond {
        /// Bytes asked for.
        requested: usize,
        /// Bytes of the current message left.
        available: usize,
    },
}

impl Error {
    pub(crate) fn verbs(step: &'static str) -> impl FnOnce(crate::Error) -> Error {
        move |source| Error::Verbs { step, source }
    }

    /// The errno that best describes this error: the OS error where there is one.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Verbs { source, .. } => {
                let mut cur: Option<&(dyn std::error::Error + 'static)> = source.source();
                while let Some(e) = cur {
                    if let Some(code) = e
                        .downcast_ref::<std::io::Error>()
                        .and_then(std::io::Error::raw_os_error)
                    {
                        return code;
                    }
                    cur = e.source();
                }
                match source {
                    crate::Error::NoDevice | crate::Error::UnknownDevice { .. } => libc::ENODEV,
                    _ => libc::EIO,
                }
            }
            Error::Config(_) | Error::ConsumeBeyond { .. } | Error::Rdma(_) => libc::EINVAL,
            Error::Card(_) => libc::EPROTO,
            Error::PeerFailed(_) => libc::EPIPE,
            Error::TooLong { .. } => libc::EMSGSIZE,
        }
    }
}
