//! Errors of nonblocking file I/O set-up (operation errors travel in request statuses).

use std::path::PathBuf;

use viaduct_fallback::file::FileError;

/// Why a file or engine could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FileIoError {
    /// The io_uring engine could not be created (the message names the cause: sysctl, seccomp,
    /// memlock limit, old kernel).
    #[error("the file I/O engine could not start")]
    Engine(#[source] FileError),
    /// Opening the file failed.
    #[error("opening {path} failed")]
    Open {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}
