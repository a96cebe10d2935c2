//! What can go wrong in a demo run, each with the part of the tour it belongs to.

use std::time::Duration;

use viaduct_agent::bootstrap::BootstrapError;
use viaduct_agent::error::AgentError;
use viaduct_agent::fileio::FileIoError;
use viaduct_agent::request::RequestError;
use viaduct_fallback::{shm, tcp};

/// An error of `viaduct demo`, on a rank or in the command that started the ranks.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The launcher's key-value space failed.
    #[error("bootstrap: {0}")]
    Bootstrap(#[from] BootstrapError),
    /// The agent's messaging failed.
    #[error("agent: {0}")]
    Agent(#[from] AgentError),
    /// The shared-memory method failed.
    #[error("shared-memory method (peer rank {peer}): {source}")]
    Shm {
        /// The rank at the other end.
        peer: u32,
        /// The method's error.
        #[source]
        source: shm::Error,
    },
    /// The TCP method failed.
    #[error("TCP method (peer rank {peer}): {source}")]
    Tcp {
        /// The rank at the other end.
        peer: u32,
        /// The method's error.
        #[source]
        source: tcp::Error,
    },
    /// Opening a file for nonblocking I/O failed.
    #[error("file I/O: {0}")]
    FileIo(#[from] FileIoError),
    /// A request (file operation, generalized request, handler posting) failed.
    #[error("request: {0}")]
    Request(#[from] RequestError),
    /// A local system call failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Something did not happen in time.
    #[error("{what} did not happen within {limit:?}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long it was awaited.
        limit: Duration,
    },
    /// A result did not match what the demo computed it must be.
    #[error("wrong result: {0}")]
    Wrong(String),
    /// A peer sent something out of the demo's order.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The job of ranks failed or its output could not be read.
    #[error("{0}")]
    Job(String),
}

impl DemoError {
    /// An OS error with what was being done.
    pub fn os(what: impl Into<String>, source: std::io::Error) -> Self {
        DemoError::Os {
            what: what.into(),
            source,
        }
    }
}
