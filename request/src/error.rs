//! Errors of requests: what a wait, test or callback can report.

use std::error::Error as StdError;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

/// The error type user callbacks and hooks return: anything that is an error.
///
/// Callbacks write `Err("reason".into())` or `Err(Box::new(io_error))`; the request wraps it in a
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
    /// Whether a message was longer than its receive buffer (an error in the cause whose crate
    /// reports [`ErrorKind::Truncated`] for it: see [`register_error_kinds`]).
    ///
    /// ```
    /// use std::error::Error;
    /// use viaduct_request::{Cause, ErrorKind, ErrorKinds, RequestError, register_error_kinds};
    ///
    /// #[derive(Debug)]
    /// struct TooLong;
    /// impl std::fmt::Display for TooLong {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         f.write_str("message longer than the buffer")
    ///     }
    /// }
    /// impl Error for TooLong {}
    ///
    /// fn kind_of(e: &(dyn Error + 'static)) -> Option<ErrorKind> {
    ///     e.downcast_ref::<TooLong>().map(|_| ErrorKind::Truncated)
    /// }
    /// static KINDS: ErrorKinds = ErrorKinds::new(kind_of);
    /// register_error_kinds(&KINDS);
    /// assert!(RequestError::Operation(Cause::new(TooLong)).is_truncated());
    /// assert!(!RequestError::Null.is_truncated());
    /// ```
    pub fn is_truncated(&self) -> bool {
        find_kind(self, |k| (k == ErrorKind::Truncated).then_some(())).is_some()
    }

    /// Whether a peer failed (an error in the cause whose crate reports
    /// [`ErrorKind::PeerFailed`] for it: see [`register_error_kinds`]).
    pub fn is_peer_failed(&self) -> bool {
        self.failed_peer().is_some()
    }

    /// The rank of the peer whose failure failed the request, if that is the cause (an error
    /// whose crate reports [`ErrorKind::PeerFailed`] for it).
    ///
    /// ```
    /// use viaduct_request::RequestError;
    ///
    /// assert_eq!(RequestError::Null.failed_peer(), None);
    /// ```
    pub fn failed_peer(&self) -> Option<u32> {
        find_kind(self, |k| match k {
            ErrorKind::PeerFailed(peer) => Some(peer),
            _ => None,
        })
    }

    /// The OS error number behind the failure, if an OS call's error is in the chain (an
    /// [`std::io::Error`] of the OS, or an error whose crate reports [`ErrorKind::Os`] for it,
    /// such as a file operation's errno).
    ///
    /// ```
    /// use viaduct_request::{Cause, RequestError};
    ///
    /// let e = RequestError::Operation(Cause::new(std::io::Error::from_raw_os_error(5)));
    /// assert_eq!(e.errno(), Some(5));
    /// ```
    pub fn errno(&self) -> Option<i32> {
        find_in_chain(self, |c| {
            if let Some(io) = c.downcast_ref::<std::io::Error>() {
                return io.raw_os_error();
            }
            match registered_kind(c) {
                Some(ErrorKind::Os(errno)) => Some(errno),
                _ => None,
            }
        })
    }

    /// Whether a time limit passed (a timeout in the cause: an OS call that timed out,
    /// [`RequestError::HandlersPending`], or an error whose crate reports
    /// [`ErrorKind::TimedOut`] for it, such as an agent call's limit).
    ///
    /// ```
    /// use viaduct_request::{Cause, RequestError};
    ///
    /// let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
    /// assert!(RequestError::Operation(Cause::new(timed_out)).is_timeout());
    /// assert!(!RequestError::Null.is_timeout());
    /// ```
    pub fn is_timeout(&self) -> bool {
        find_in_chain(self, |c| {
            let hit = matches!(
                c.downcast_ref::<RequestError>(),
                Some(RequestError::HandlersPending { .. })
            ) || c
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
                || registered_kind(c) == Some(ErrorKind::TimedOut);
            hit.then_some(())
        })
        .is_some()
    }

    /// Whether the failure cancelled the request: a class's poll hook or a wait hook failed
    /// ([`RequestError::Poll`], [`RequestError::WaitHook`]). (A request cancelled by its owner
    /// completes without error: see [`Status::test_cancelled`](super::Status::test_cancelled).)
    ///
    /// ```
    /// use viaduct_request::{Cause, RequestError};
    ///
    /// assert!(RequestError::Poll(Cause::new("device lost the operation")).is_cancelled());
    /// assert!(!RequestError::Operation(Cause::new("link down")).is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        find_in_chain(self, |c| match c.downcast_ref::<RequestError>() {
            Some(RequestError::Poll(_) | RequestError::WaitHook(_)) => Some(()),
            _ => None,
        })
        .is_some()
    }
}

/// What one error of a cause chain says about a failure, as the function its crate registered
/// with [`register_error_kinds`] tells it. [`RequestError`]'s predicates
/// ([`is_truncated`](RequestError::is_truncated), [`failed_peer`](RequestError::failed_peer),
/// [`errno`](RequestError::errno), [`is_timeout`](RequestError::is_timeout)) look for these
/// along the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A message was longer than its receive buffer.
    Truncated,
    /// The peer of this rank failed.
    PeerFailed(u32),
    /// An OS call failed with this error number (errno).
    Os(i32),
    /// A time limit passed.
    TimedOut,
}

/// A function that tells the [`ErrorKind`] of one error of its crate's types, and `None` for
/// any other error (it is called on each error of a chain, one at a time).
pub type KindOf = fn(&(dyn StdError + 'static)) -> Option<ErrorKind>;

/// A crate's [`KindOf`] function, in a `static` so that registering it twice is recognized
/// (a static has one address; a function pointer may not).
///
/// ```
/// use std::error::Error;
/// use viaduct_request::{ErrorKind, ErrorKinds};
///
/// fn kind_of(e: &(dyn Error + 'static)) -> Option<ErrorKind> {
///     e.downcast_ref::<std::fmt::Error>().map(|_| ErrorKind::Truncated)
/// }
/// static KINDS: ErrorKinds = ErrorKinds::new(kind_of);
/// viaduct_request::register_error_kinds(&KINDS);
/// ```
#[derive(Debug)]
pub struct ErrorKinds(KindOf);

impl ErrorKinds {
    /// Wraps `kind_of`.
    pub const fn new(kind_of: KindOf) -> Self {
        ErrorKinds(kind_of)
    }
}

/// The registered kinds (a short list: one per crate whose errors reach requests).
static KINDS: RwLock<Vec<&'static ErrorKinds>> = RwLock::new(Vec::new());

/// Registers `kinds`, so that [`RequestError`]'s predicates recognize the errors of a crate
/// this crate does not know: the agent registers its errors (truncation, failed peer, time
/// limits, file errors) when an agent or a file engine starts. Registering the same `static`
/// again changes nothing.
///
/// Errors this crate knows need no registration: [`std::io::Error`] (its OS error number and
/// [`std::io::ErrorKind::TimedOut`]) and [`RequestError`] itself. A [`Cause`] is looked through
/// (its wrapped error is asked).
pub fn register_error_kinds(kinds: &'static ErrorKinds) {
    let mut registered = KINDS.write().unwrap_or_else(PoisonError::into_inner);
    if !registered.iter().any(|k| std::ptr::eq(*k, kinds)) {
        registered.push(kinds);
    }
}

/// The kind the registered functions tell for `e` (the first that answers).
fn registered_kind(e: &(dyn StdError + 'static)) -> Option<ErrorKind> {
    // A copy: a function may register another without deadlocking on the list.
    let kinds = KINDS.read().unwrap_or_else(PoisonError::into_inner).clone();
    kinds.iter().find_map(|kinds| (kinds.0)(e))
}

/// The first registered kind along the chain of `e` that `f` accepts.
fn find_kind<T>(
    e: &(dyn StdError + 'static),
    mut f: impl FnMut(ErrorKind) -> Option<T>,
) -> Option<T> {
    find_in_chain(e, |c| registered_kind(c).and_then(&mut f))
}

/// Calls `f` on `e` and on each error of its chain (looking inside a [`Cause`]) until `f`
/// answers.
fn find_in_chain<T>(
    e: &(dyn StdError + 'static),
    mut f: impl FnMut(&(dyn StdError + 'static)) -> Option<T>,
) -> Option<T> {
    let mut next = Some(e);
    while let Some(mut cur) = next {
        // A `Cause` shows its wrapped error's text and source: look at the wrapped error.
        if let Some(c) = cur.downcast_ref::<Cause>() {
            cur = c.get_ref();
        }
        if let Some(answer) = f(cur) {
            return Some(answer);
        }
        next = cur.source();
    }
    None
}

/// Shows an error and its causes, outermost first, separated by `": "`, leaving out a cause
/// whose text the shown text already holds (a message that embeds its source).
struct Chain<'a>(&'a (dyn StdError + 'a));

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
fn chain<E: StdError>(e: &E) -> Chain<'_> {
    Chain(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error of a crate this one does not know, with an optional source.
    #[derive(Debug)]
    struct Foreign(u32, Option<Cause>);

    impl fmt::Display for Foreign {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "foreign error {}", self.0)
        }
    }

    impl StdError for Foreign {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.1.as_ref().map(|c| c as &(dyn StdError + 'static))
        }
    }

    /// `Foreign(n)`: peer `n` failed, except 0 (truncated) and 1 (timed out).
    fn foreign_kind(e: &(dyn StdError + 'static)) -> Option<ErrorKind> {
        e.downcast_ref::<Foreign>().map(|f| match f.0 {
            0 => ErrorKind::Truncated,
            1 => ErrorKind::TimedOut,
            n => ErrorKind::PeerFailed(n),
        })
    }

    static FOREIGN: ErrorKinds = ErrorKinds::new(foreign_kind);
    static REGISTERING: ErrorKinds = ErrorKinds::new(registering_kind);

    /// Registers a second crate's kinds from inside the first call (must not deadlock).
    fn registering_kind(e: &(dyn StdError + 'static)) -> Option<ErrorKind> {
        register_error_kinds(&FOREIGN);
        let _ = e;
        None
    }

    #[test]
    fn registered_kinds_are_found_along_the_chain_and_registered_once() {
        let unknown = RequestError::Operation(Cause::new(Foreign(7, None)));
        register_error_kinds(&REGISTERING);
        register_error_kinds(&REGISTERING);
        // The first predicate call registers `FOREIGN` from inside `registering_kind`.
        let _ = unknown.failed_peer();
        register_error_kinds(&FOREIGN);
        {
            let kinds = KINDS.read().unwrap();
            let count = |s: &ErrorKinds| kinds.iter().filter(|k| std::ptr::eq(**k, s)).count();
            assert_eq!((count(&REGISTERING), count(&FOREIGN)), (1, 1));
        }
        assert_eq!(unknown.failed_peer(), Some(7));
        assert!(unknown.is_peer_failed() && !unknown.is_truncated() && !unknown.is_timeout());
        // Deeper: a request error inside a foreign error inside a request error.
        let inner = RequestError::Poll(Cause::new(Foreign(0, None)));
        let nested = RequestError::Operation(Cause::new(Foreign(9, Some(Cause::new(inner)))));
        assert_eq!(nested.failed_peer(), Some(9), "the outermost answer wins");
        assert!(nested.is_truncated() && nested.is_cancelled());
        let timed_out = RequestError::WaitHook(Cause::new(Foreign(1, None)));
        assert!(timed_out.is_timeout() && timed_out.is_cancelled());
        assert_eq!(timed_out.errno(), None);
    }

    #[test]
    fn errors_this_crate_knows_need_no_registration() {
        let os = RequestError::Operation(Cause::new(std::io::Error::from_raw_os_error(28)));
        assert_eq!(os.errno(), Some(28));
        assert!(!os.is_timeout());
        let pending = RequestError::HandlersPending {
            waited: std::time::Duration::from_millis(5),
        };
        assert!(pending.is_timeout());
        let e = RequestError::Free(Cause::new("leak"));
        assert_eq!(e.to_string(), "free callback of the request failed: leak");
    }
}
