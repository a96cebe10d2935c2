//! Errors of the bootstrap layer.

use std::error::Error as StdError;
use std::fmt;
use std::io;

use super::wire::WireError;

/// What can go wrong while finding the launcher, talking PMI to it, or exchanging keys.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// Some PMI variables are set but one this mode needs is not: the launcher's environment is
    /// incomplete. A half-present environment is never taken for a single-rank run.
    #[error("incomplete PMI environment: {present} set but {missing} is not ({hint})")]
    MissingEnv {
        /// The PMI variables that are set.
        present: String,
        /// The variable (or alternatives) that is missing.
        missing: &'static str,
        /// What this usually means.
        hint: &'static str,
    },
    /// A PMI variable holds a value that cannot be used.
    #[error("bad PMI environment: {var}={value:?}: {reason}")]
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// The inherited PMI socket (`PMI_FD`) cannot be taken over.
    #[error("cannot use inherited PMI_FD={fd}: {reason}")]
    AdoptFd {
        /// The descriptor number.
        fd: i32,
        /// Why not.
        reason: String,
    },
    /// Connecting to the PMI server at `PMI_PORT` failed.
    #[error("cannot connect to the PMI server at {addr}: {}", chain(.source))]
    Connect {
        /// The address from `PMI_PORT`.
        addr: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Reading from or writing to the PMI server failed.
    #[error("PMI {op}: I/O error: {}", chain(.source))]
    Io {
        /// The PMI operation in progress.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The PMI server did not answer within the configured time.
    #[error("PMI {op}: no answer from the PMI server within {secs:.1} s (VIADUCT_PMI_TIMEOUT)")]
    Timeout {
        /// The PMI operation in progress.
        op: &'static str,
        /// The limit that passed.
        secs: f64,
    },
    /// The PMI server closed the connection.
    #[error(
        "PMI {op}: the PMI server closed the connection (the launcher has ended, or it refused \
         this rank: see its output)"
    )]
    Closed {
        /// The PMI operation in progress.
        op: &'static str,
    },
    /// The PMI server sent something that does not follow the protocol.
    #[error("PMI {op}: malformed answer from the PMI server: {detail}")]
    Protocol {
        /// The PMI operation in progress.
        op: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A message could not be encoded or decoded.
    #[error("PMI {op}: {}", chain(.source))]
    Wire {
        /// The PMI operation in progress.
        op: &'static str,
        /// The codec error.
        #[source]
        source: WireError,
    },
    /// The PMI server answered with an error code.
    #[error("PMI {op}: the PMI server refused (rc={rc}): {msg}")]
    Refused {
        /// The PMI operation.
        op: &'static str,
        /// The server's return code.
        rc: i64,
        /// The server's message.
        msg: String,
    },
    /// A key was not in the key-value space (not put, or not fenced yet).
    #[error("PMI get: key {key:?} not found (was it put, and did every rank fence?)")]
    KeyNotFound {
        /// The key.
        key: String,
    },
    /// A key or value cannot be carried by the PMI wire protocols.
    #[error("PMI {op}: {what} {text:?} {reason}")]
    Invalid {
        /// The PMI operation.
        op: &'static str,
        /// "key" or "value".
        what: &'static str,
        /// The offending text (shortened).
        text: String,
        /// Why it is refused.
        reason: String,
    },
    /// The rank and size from the environment and from the server disagree.
    #[error("PMI init: {what} is {from_env} in the environment but {from_server} from the server")]
    Mismatch {
        /// "rank" or "size".
        what: &'static str,
        /// The environment's value.
        from_env: u32,
        /// The server's value.
        from_server: u32,
    },
    /// The job key could not be made or read.
    #[error("job key: {reason}")]
    JobKey {
        /// Why.
        reason: String,
    },
    /// The process mapping could not be read.
    #[error("PMI_process_mapping {value:?}: {reason}")]
    Mapping {
        /// The value the server gave.
        value: String,
        /// Why it cannot be used.
        reason: String,
    },
}

/// Maps an I/O error of a PMI exchange to a [`BootstrapError`], telling timeouts apart.
pub(crate) fn io_error(
    op: &'static str,
    err: io::Error,
    timeout: std::time::Duration,
) -> BootstrapError {
    match err.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => BootstrapError::Timeout {
            op,
            secs: timeout.as_secs_f64(),
        },
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe => BootstrapError::Closed { op },
        _ => BootstrapError::Io { op, source: err },
    }
}

/// Shows an error and its causes, outermost first, separated by `": "`, leaving out a cause
/// whose text the shown text already holds (a message that embeds its source).
///
/// ```
/// let e = std::io::Error::other("inner");
/// assert_eq!(viaduct_pmi::chain(&e).to_string(), "inner");
/// ```
pub struct Chain<'a>(pub &'a (dyn StdError + 'a));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = self.0.to_string();
        let mut next = self.0.source();
        while let Some(cause) = next {
            let more = cause.to_string();
            if !more.is_empty() && !text.contains(&more) {
                text.push_str(": ");
                text.push_str(&more);
            }
            next = cause.source();
        }
        f.write_str(&text)
    }
}

/// [`Chain`] of any error value (the form the `#[error]` attributes use).
pub fn chain<E: StdError>(e: &E) -> Chain<'_> {
    Chain(e)
}
