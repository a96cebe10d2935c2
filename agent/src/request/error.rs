//! Errors of requests: what a wait, test or callback can report.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

use crate::error::chain;

/// The error type user callbacks and hooks return: anything that is an error.
///
/// Callbacks write `Err("reason".into())` or `Err(Box::new(io_error))`; the agent wraps it in a
/// [`Cause`] so that it can be cloned into every status that reports it.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A shared, cloneable error produced by user code or by an operation (a failed CAR, a failed
/// progress hook).
///
/// The original error is kept: [`Cause::get_ref`] and [`Cause::downcast_ref`] reach it (for
/// example an [`std::io::Error`] carrying an errno).
#[derive(Clone)]
pub struct Cause(Arc<dyn StdError + Send + Sync + 'static>);

impl Cause {
    /// Wraps an error.
    pub fn new(error: impl Into<BoxError>) -> Self {
        Cause(Arc::from(error.into()))
    }

    /// The wrapped error.
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }

    /// The wrapped error as a concrete type, if it is one.
    pub fn downcast_ref<E: StdError + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }
}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl StdError for Cause {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}

impl From<BoxError> for Cause {
    fn from(error: BoxError) -> Self {
        Cause(Arc::from(error))
    }
}

/// Everything a request operation can report.
///
/// Errors of user callbacks carry the callback's own error as their source. In
/// `wait_some`/`wait_all`/`test_some`/`test_all` a failure of one or more requests is reported as
/// [`RequestError::InStatus`], and each completed request's [`Status::error`](super::Status::error)
/// holds its own error.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The query callback (of a generalized request or request class) returned an error.
    #[error("query callback of the request failed: {}", chain(.0))]
    Query(#[source] Cause),
    /// The free callback returned an error.
    #[error("free callback of the request failed: {}", chain(.0))]
    Free(#[source] Cause),
    /// The cancel callback returned an error.
    #[error("cancel callback of the request failed: {}", chain(.0))]
    Cancel(#[source] Cause),
    /// The poll hook of a request class failed; the class's cancel callback ran and the request
    /// completed with this error.
    #[error("poll hook of the request class failed, so the request was cancelled: {}", chain(.0))]
    Poll(#[source] Cause),
    /// The wait hook of a request class (or a progress driver) failed; each request it was
    /// waiting for was cancelled and completed with this error.
    #[error(
        "wait hook failed, so the requests it was waiting for were cancelled: {}",
        chain(.0)
    )]
    WaitHook(#[source] Cause),
    /// The operation behind the request failed (a CAR completed with an error, or the owner
    /// failed the request).
    #[error("operation of the request failed: {}", chain(.0))]
    Operation(#[source] Cause),
    /// One or more requests of a `*_some`/`*_all` call failed; each status holds its error.
    #[error("{failed} request(s) failed; the error of each is in its status")]
    InStatus {
        /// How many of the completed requests failed.
        failed: usize,
    },
    /// The request was already complete (completed twice, or CARs added to a complete request).
    #[error("the request is already complete")]
    AlreadyComplete,
    /// Every handle that could complete the request ([`CompleteHandle`](super::CompleteHandle)
    /// of a generalized request, [`CarCounter`](super::CarCounter) of a message request) was
    /// dropped before completing it: nothing can complete it any more, so it completed with this
    /// error instead of leaving its waits blocked for ever.
    #[error("the request was abandoned: every handle that could complete it was dropped")]
    Abandoned,
    /// More CARs were added than a request can count.
    #[error("too many outstanding CARs on one request (at most {max})")]
    TooManyCars {
        /// The largest number of outstanding CARs a request can hold.
        max: u32,
    },
    /// The request was freed (its free callback ran); it can no longer be queried or given
    /// handlers.
    #[error("the request has been freed")]
    Freed,
    /// The operation needs an active request but got a null one.
    #[error("the request is null (already completed by a wait or test, or never started)")]
    Null,
    /// The handler thread could not be started.
    #[error("cannot start the request handler thread: {}", chain(.0))]
    HandlerThread(#[source] Cause),
    /// [`flush_handlers`](super::flush_handlers) gave up: handlers whose turn had come had not
    /// all run after `waited` (zero: it was called on the handler thread, which cannot wait for
    /// itself).
    #[error("handlers due have not all run after {waited:?}")]
    HandlersPending {
        /// How long it waited.
        waited: std::time::Duration,
    },
}

impl RequestError {
    /// Whether a message was longer than its receive buffer (an
    /// [`AgentError::Truncated`](crate::error::AgentError::Truncated) in the cause).
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    /// use viaduct_agent::request::{Cause, RequestError};
    ///
    /// let e = RequestError::Operation(Cause::new(AgentError::Truncated { len: 8, capacity: 4 }));
    /// assert!(e.is_truncated());
    /// assert!(!RequestError::Null.is_truncated());
    /// ```
    pub fn is_truncated(&self) -> bool {
        crate::error::is_truncated(self)
    }

    /// Whether a peer failed (an
    /// [`AgentError::PeerFailed`](crate::error::AgentError::PeerFailed) in the cause).
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    /// use viaduct_agent::request::{Cause, RequestError};
    ///
    /// let failed = AgentError::PeerFailed { peer: 2, reason: "closed".into(), source: None };
    /// assert!(RequestError::Operation(Cause::new(failed)).is_peer_failed());
    /// ```
    pub fn is_peer_failed(&self) -> bool {
        self.failed_peer().is_some()
    }

    /// The rank of the peer whose failure failed the request, if that is the cause.
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    /// use viaduct_agent::request::{Cause, RequestError};
    ///
    /// let failed = AgentError::PeerFailed { peer: 2, reason: "closed".into(), source: None };
    /// assert_eq!(RequestError::Operation(Cause::new(failed)).failed_peer(), Some(2));
    /// assert_eq!(RequestError::Null.failed_peer(), None);
    /// ```
    pub fn failed_peer(&self) -> Option<u32> {
        crate::error::failed_peer(self)
    }

    /// The OS error number behind the failure, if an OS call's error is in the chain (an
    /// [`std::io::Error`] of the OS, or a file operation's errno).
    ///
    /// ```
    /// use viaduct_agent::request::{Cause, RequestError};
    ///
    /// let e = RequestError::Operation(Cause::new(std::io::Error::from_raw_os_error(5)));
    /// assert_eq!(e.errno(), Some(5));
    /// ```
    pub fn errno(&self) -> Option<i32> {
        crate::error::errno(self)
    }

    /// Whether a time limit passed (a timeout in the cause: an agent call's limit, or an OS
    /// call that timed out).
    ///
    /// ```
    /// use viaduct_agent::request::{Cause, RequestError};
    ///
    /// let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
    /// assert!(RequestError::Operation(Cause::new(timed_out)).is_timeout());
    /// assert!(!RequestError::Null.is_timeout());
    /// ```
    pub fn is_timeout(&self) -> bool {
        crate::error::is_timeout(self)
    }

    /// Whether the failure cancelled the request: a class's poll hook or a wait hook failed
    /// ([`RequestError::Poll`], [`RequestError::WaitHook`]). (A request cancelled by its owner
    /// completes without error: see [`Status::test_cancelled`](super::Status::test_cancelled).)
    ///
    /// ```
    /// use viaduct_agent::request::{Cause, RequestError};
    ///
    /// assert!(RequestError::Poll(Cause::new("device lost the operation")).is_cancelled());
    /// assert!(!RequestError::Operation(Cause::new("link down")).is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        crate::error::is_cancelled(self)
    }
}
