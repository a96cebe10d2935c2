//! Errors of nonblocking file I/O set-up (operation errors travel in request statuses).

use std::path::PathBuf;

use viaduct_fallback::file::FileError;

use crate::error::{AgentError, chain};

/// Why a file or engine could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FileIoError {
    /// The io_uring engine could not be created (the message names the cause: sysctl, seccomp,
    /// memlock limit, old kernel).
    #[error("the file I/O engine could not start: {}", chain(.0))]
    Engine(#[source] FileError),
    /// Opening the file failed.
    #[error("opening {path} failed: {}", chain(.source))]
    Open {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Reaping completions from the ring failed.
    #[error("reaping file completions failed: {}", chain(.0))]
    Progress(#[source] FileError),
    /// A received message was to be written to a file before its receive completed.
    #[error("the receive has not completed: its buffer is still being filled")]
    ReceiveIncomplete,
    /// Taking the next stream message from the agent failed.
    #[error("taking the next stream message from rank {peer} failed: {}", chain(.source))]
    Stream {
        /// The sending rank.
        peer: u32,
        /// The agent's error (boxed: it is large, and this error travels by value).
        #[source]
        source: Box<AgentError>,
    },
    /// Writing a stream message in place to the file failed after `written` of its bytes.
    #[error(
        "writing a stream message to the file failed after {written} bytes: {}",
        chain(.source)
    )]
    Write {
        /// Bytes written (and consumed from the stream) before the failure.
        written: usize,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}
