//! Errors of the agent: set-up, posting, and the causes carried by failed requests.
//!
//! # Reading an error
//!
//! The text of an error (`{e}`) holds its whole cause chain, outermost first, each cause once:
//! `bootstrap failed: incomplete PMI environment: PMI_RANK set but PMI_FD or PMI_PORT is not
//! (...)`. [`std::error::Error::source`] still gives the next error of the chain, for code that
//! wants the typed value; a reporter that prints every `source()` itself repeats text, so print
//! `{e}` alone.
//!
//! The common questions have answers on [`AgentError`] and [`RequestError`] that look through
//! the nested errors (a failed receive is
//! `AgentError::Request(RequestError::Operation(cause))` with an [`AgentError`] inside the
//! cause), so no caller has to match or downcast:
//!
//! | question | call |
//! | --- | --- |
//! | was a message longer than the receive buffer? | [`AgentError::is_truncated`] |
//! | did a peer fail, and which one? | [`AgentError::is_peer_failed`], [`AgentError::failed_peer`] |
//! | which OS error (errno) is behind it? | [`AgentError::errno`] |
//! | did a limit pass? | [`AgentError::is_timeout`] |
//! | was the request cancelled because of the failure? | [`AgentError::is_cancelled`] |
//!
//! ```
//! use viaduct_agent::prelude::*;
//!
//! # fn main() -> Result<(), AgentError> {
//! let agent = Agent::singleton()?;
//! agent.send(0, 1, b"twelve bytes")?;
//! let mut small = [0u8; 4];
//! let e = agent
//!     .recv(&mut small, Source::Rank(0), TagMatch::Tag(1))
//!     .unwrap_err();
//! assert!(e.is_truncated());
//! assert!(e.to_string().contains("message of 12 bytes truncated to the receive buffer of 4 bytes"));
//! assert_eq!(&small, b"twel");
//! # Ok(())
//! # }
//! ```

pub(crate) mod method_error;

use std::error::Error as StdError;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use crate::bootstrap::BootstrapError;
use crate::bootstrap::auth::AuthError;
use crate::request::{Cause, ErrorKind, ErrorKinds, RequestError};
use crate::xfer_base::XferError;
pub(crate) use method_error::MethodError;

/// Everything the agent can report.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// use std::time::Duration;
///
/// match agent.recv_in_place(Source::Rank(0), TagMatch::Tag(9), Duration::from_millis(10)) {
///     Err(e) if e.is_timeout() => println!("nothing yet: {e}"),
///     Err(e) if e.is_peer_failed() => println!("rank {:?} failed: {e}", e.failed_peer()),
///     Err(e) => return Err(e.into()),
///     Ok(msg) => println!("{} bytes", msg.len()),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// A setting (environment variable or config field) is invalid or asks for something
    /// impossible.
    #[error("invalid agent setting {setting}: {reason}")]
    Config {
        /// The setting, e.g. `VIADUCT_TRANSPORT`.
        setting: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// No allowed method can reach a peer.
    #[error("no method can reach rank {peer}: {reason}")]
    NoMethod {
        /// The peer rank.
        peer: u32,
        /// Why each allowed method cannot be used.
        reason: String,
    },
    /// The launcher exchange (business cards, fence) failed.
    #[error("bootstrap failed: {}", chain(.0))]
    Bootstrap(#[source] BootstrapError),
    /// A peer's business card cannot be read.
    #[error("business card of rank {peer} for {method} is malformed: {card:?}")]
    BadCard {
        /// The peer rank.
        peer: u32,
        /// The method the entry is for.
        method: &'static str,
        /// The entry as published.
        card: String,
    },
    /// Opening this rank's listener for a method failed.
    #[error("cannot listen for {method} connections: {}", chain(.source))]
    Listen {
        /// The method.
        method: &'static str,
        /// The method's error.
        #[source]
        source: MethodError,
    },
    /// Setting up a connection to or from a peer failed.
    #[error("cannot connect with rank {peer} over {method}: {}", chain(.source))]
    Connect {
        /// The peer rank (or the rank the connecting side claimed).
        peer: u32,
        /// The method.
        method: &'static str,
        /// The method's error.
        #[source]
        source: MethodError,
    },
    /// A connection failed the job-key handshake.
    #[error("authentication with rank {peer} over {method} failed: {}", chain(.source))]
    Auth {
        /// The peer rank (as far as known).
        peer: u32,
        /// The method.
        method: &'static str,
        /// Why.
        #[source]
        source: AuthError,
    },
    /// Connection set-up did not finish in time.
    #[error("connection set-up timed out after {seconds} s: {what}")]
    SetupTimeout {
        /// The limit.
        seconds: u64,
        /// What was still missing.
        what: String,
    },
    /// A thread of the agent could not be started.
    #[error("cannot start a thread of the agent: {}", chain(.0))]
    Thread(#[source] std::io::Error),
    /// The liveness socket (the UDP socket of the heartbeat thread, see [`crate::config`],
    /// "Peer liveness") could not be opened.
    #[error("cannot open the liveness socket (UDP heartbeats) on {addr}: {}", chain(.source))]
    LivenessSocket {
        /// The address it was to be bound to.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `reserve_write` was asked for the self loop, which has no outgoing queue.
    #[error("reserve_write is not available on the self loop (the destination is this rank)")]
    SelfReservation,
    /// The byte stream (`write`/`next`) was asked of the self loop, which has none.
    #[error("the self loop has no byte stream (the peer is this rank)")]
    SelfStream,
    /// A stream message longer than one rendezvous piece (`Config::rendezvous_chunk`).
    #[error("stream message of {len} bytes exceeds the limit of {max} bytes")]
    StreamTooLong {
        /// The length given.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The buffers bound to a reserved read cannot hold the reserved bytes.
    #[error("read buffers of {capacity} bytes cannot hold the {len} bytes reserved")]
    ReadBufferTooSmall {
        /// The bytes reserved.
        len: usize,
        /// The bytes the buffers hold.
        capacity: usize,
    },
    /// The method of the VC keeps no buffer after sending (verbs copies into registered
    /// memory), so a written method buffer cannot be handed back.
    #[error("the method to rank {peer} does not hand written buffers back")]
    BufferNotReturned {
        /// The peer rank.
        peer: u32,
    },
    /// Method buffers of different VCs were given to one vectored write.
    #[error("method buffers of rank {first} and rank {other} given to one write")]
    MixedBuffers {
        /// The peer of the first buffer.
        first: u32,
        /// The peer of a buffer that differs.
        other: u32,
    },
    /// A rank outside `0..size`.
    #[error("rank {rank} is not in this job of {size} ranks")]
    BadRank {
        /// The rank given.
        rank: u32,
        /// The job size.
        size: u32,
    },
    /// `u32::MAX` is reserved (it means "no tag" in a status).
    #[error("tag {0} is reserved")]
    ReservedTag(u32),
    /// The agent was finalized.
    #[error("the agent has been finalized")]
    Finalized,
    /// The peer failed (died, closed its end, or broke the protocol): carried by every
    /// request on its VC that could not complete.
    #[error("rank {peer} failed: {reason}")]
    PeerFailed {
        /// The peer rank.
        peer: u32,
        /// What was observed (the text of `source` when there is one).
        reason: String,
        /// The error that failed the VC, when one did: the method's error (with the OS error
        /// behind it, see [`AgentError::errno`]), or the protocol error of a broken message.
        /// `None` for a failure seen without an error (silence past the peer timeout).
        #[source]
        source: Option<PeerCause>,
    },
    /// The message is longer than the receive buffer: carried by the receive's request, whose
    /// buffer holds the first `capacity` bytes.
    #[error("message of {len} bytes truncated to the receive buffer of {capacity} bytes")]
    Truncated {
        /// Length of the message sent.
        len: u64,
        /// Capacity of the receive buffer.
        capacity: u64,
    },
    /// A wait on a request of the agent failed.
    #[error("request failed: {}", chain(.0))]
    Request(#[source] RequestError),
    /// An xfer block is invalid (refused at start), or its message did not fit.
    #[error("xfer block failed: {}", chain(.0))]
    Xfer(#[source] XferError),
    /// A color of a communicator split must be below `u32::MAX`.
    #[error("split color {0} is reserved")]
    BadColor(u32),
    /// A new communicator would pass the last context id of a member (ids are never reused;
    /// each communicator made by an agreement takes a few hundred), or a member holds
    /// [`crate::limits::MAX_LIVE_COMMS`] communicators already.
    #[error(
        "no context ids are left for a new communicator: a member holds {} communicators \
         (free some), or used up its context ids",
        crate::limits::MAX_LIVE_COMMS
    )]
    ContextsExhausted,
    /// A collective's buffers do not fit each other or the communicator.
    #[error("collective {what}: {reason}")]
    CollectiveArgs {
        /// The collective.
        what: &'static str,
        /// What does not fit.
        reason: String,
    },
    /// A blocking operation did not finish within its limit.
    #[error("{what} did not finish within {seconds} s")]
    Timeout {
        /// The operation.
        what: &'static str,
        /// The limit.
        seconds: u64,
    },
}

impl From<RequestError> for AgentError {
    fn from(e: RequestError) -> Self {
        AgentError::Request(e)
    }
}

impl From<BootstrapError> for AgentError {
    fn from(e: BootstrapError) -> Self {
        AgentError::Bootstrap(e)
    }
}

impl AgentError {
    /// Whether a message was longer than its receive buffer ([`AgentError::Truncated`]),
    /// here or in a request's cause.
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    ///
    /// assert!(AgentError::Truncated { len: 8, capacity: 4 }.is_truncated());
    /// assert!(!AgentError::Finalized.is_truncated());
    /// ```
    pub fn is_truncated(&self) -> bool {
        is_truncated(self)
    }

    /// Whether a peer failed ([`AgentError::PeerFailed`]), here or in a request's cause.
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    ///
    /// let e = AgentError::PeerFailed { peer: 3, reason: "connection reset".into(), source: None };
    /// assert!(e.is_peer_failed());
    /// ```
    pub fn is_peer_failed(&self) -> bool {
        self.failed_peer().is_some()
    }

    /// The rank of the peer that failed, if the error is (or was caused by) a peer failure.
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    ///
    /// let e = AgentError::PeerFailed { peer: 3, reason: "connection reset".into(), source: None };
    /// assert_eq!(e.failed_peer(), Some(3));
    /// assert_eq!(AgentError::Finalized.failed_peer(), None);
    /// ```
    pub fn failed_peer(&self) -> Option<u32> {
        failed_peer(self)
    }

    /// The OS error number behind the error, if an OS call's failure is in its chain (an
    /// [`std::io::Error`] of the OS, or a file operation's errno).
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    ///
    /// let e = AgentError::Thread(std::io::Error::from_raw_os_error(11));
    /// assert_eq!(e.errno(), Some(11));
    /// assert_eq!(AgentError::Finalized.errno(), None);
    /// ```
    pub fn errno(&self) -> Option<i32> {
        errno(self)
    }

    /// Whether a time limit passed: a blocking call's limit ([`AgentError::Timeout`]),
    /// connection set-up ([`AgentError::SetupTimeout`]), the PMI server's answer, or an OS
    /// call that timed out.
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    ///
    /// assert!(AgentError::Timeout { what: "barrier", seconds: 5 }.is_timeout());
    /// assert!(!AgentError::Finalized.is_timeout());
    /// ```
    pub fn is_timeout(&self) -> bool {
        is_timeout(self)
    }

    /// Whether the failure cancelled the request that reports it: a class's poll hook or a
    /// wait hook failed ([`RequestError::Poll`], [`RequestError::WaitHook`]), so the request
    /// was cancelled and completed with the error. (A request cancelled by its owner completes
    /// without error: see [`Status::test_cancelled`](crate::request::Status::test_cancelled).)
    ///
    /// ```
    /// use viaduct_agent::error::AgentError;
    /// use viaduct_agent::request::{Cause, RequestError};
    ///
    /// let e = AgentError::Request(RequestError::WaitHook(Cause::new("device gone")));
    /// assert!(e.is_cancelled());
    /// assert!(!AgentError::Finalized.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        is_cancelled(self)
    }
}

/// The error behind a peer failure ([`AgentError::PeerFailed`]), shared by every request the
/// failure fails. [`std::error::Error::source`] of the `PeerFailed` error is the wrapped error
/// itself (this type derefs to it), so a caller downcasts it directly:
///
/// ```
/// use std::error::Error;
/// use viaduct_agent::error::{AgentError, PeerCause};
///
/// let os = std::io::Error::from_raw_os_error(libc::ECONNRESET);
/// let e = AgentError::PeerFailed { peer: 1, reason: os.to_string(), source: Some(PeerCause::new(os)) };
/// assert!(e.source().unwrap().downcast_ref::<std::io::Error>().is_some());
/// assert_eq!(e.errno(), Some(libc::ECONNRESET));
/// ```
#[derive(Clone)]
pub struct PeerCause(Arc<dyn StdError + Send + Sync + 'static>);

impl PeerCause {
    /// Wraps an error.
    ///
    /// ```
    /// use viaduct_agent::error::PeerCause;
    ///
    /// let cause = PeerCause::new(std::io::Error::from_raw_os_error(libc::EPIPE));
    /// assert!(cause.get_ref().downcast_ref::<std::io::Error>().is_some());
    /// ```
    pub fn new(error: impl Into<Box<dyn StdError + Send + Sync + 'static>>) -> PeerCause {
        PeerCause(Arc::from(error.into()))
    }

    /// The wrapped error.
    ///
    /// ```
    /// use viaduct_agent::error::PeerCause;
    ///
    /// let cause = PeerCause::new("the peer closed the connection");
    /// assert_eq!(cause.get_ref().to_string(), "the peer closed the connection");
    /// ```
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }
}

impl Deref for PeerCause {
    type Target = dyn StdError + Send + Sync + 'static;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Debug for PeerCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

// The cause-chain display is the PMI crate's (the agent's errors wrap its errors).
pub(crate) use viaduct_pmi::{Chain, chain};

/// Calls `f` on `e` and on each error of its chain, looking inside a [`Cause`] and a boxed
/// agent error, until `f` answers.
pub(crate) fn find_in_chain<T>(
    e: &(dyn StdError + 'static),
    mut f: impl FnMut(&(dyn StdError + 'static)) -> Option<T>,
) -> Option<T> {
    let mut next = Some(e);
    while let Some(mut cur) = next {
        // A `Cause` shows its wrapped error's text and source: look at the wrapped error.
        if let Some(c) = cur.downcast_ref::<Cause>() {
            cur = c.get_ref();
        }
        if let Some(b) = cur.downcast_ref::<Box<AgentError>>() {
            cur = &**b;
        }
        if let Some(answer) = f(cur) {
            return Some(answer);
        }
        next = cur.source();
    }
    None
}

/// What one error of the agent's types says about a failure, for the request crate's
/// predicates ([`RequestError::is_truncated`], [`RequestError::failed_peer`],
/// [`RequestError::errno`], [`RequestError::is_timeout`]).
fn kind_of(e: &(dyn StdError + 'static)) -> Option<ErrorKind> {
    let e: &(dyn StdError + 'static) = match e.downcast_ref::<Box<AgentError>>() {
        Some(b) => &**b,
        None => e,
    };
    match e.downcast_ref::<AgentError>() {
        Some(AgentError::Truncated { .. }) => return Some(ErrorKind::Truncated),
        Some(AgentError::PeerFailed { peer, .. }) => return Some(ErrorKind::PeerFailed(*peer)),
        Some(AgentError::Timeout { .. } | AgentError::SetupTimeout { .. }) => {
            return Some(ErrorKind::TimedOut);
        }
        _ => {}
    }
    if let Some(BootstrapError::Timeout { .. }) = e.downcast_ref::<BootstrapError>() {
        return Some(ErrorKind::TimedOut);
    }
    e.downcast_ref::<viaduct_fallback::file::FileError>()
        .and_then(|fe| fe.errno())
        .map(ErrorKind::Os)
}

/// Registers the agent's errors with the request crate (once), so that a [`RequestError`]
/// whose cause holds one answers its predicates. The agent and the file engine call it when
/// they start.
pub(crate) fn register_error_kinds() {
    static KINDS: ErrorKinds = ErrorKinds::new(kind_of);
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| crate::request::register_error_kinds(&KINDS));
}

pub(crate) fn is_truncated(e: &(dyn StdError + 'static)) -> bool {
    find_in_chain(e, |c| match c.downcast_ref::<AgentError>() {
        Some(AgentError::Truncated { .. }) => Some(()),
        _ => None,
    })
    .is_some()
}

/// The length of the message that `e` says was truncated ([`AgentError::Truncated`]).
pub(crate) fn truncated_len(e: &(dyn StdError + 'static)) -> Option<u64> {
    find_in_chain(e, |c| match c.downcast_ref::<AgentError>() {
        Some(AgentError::Truncated { len, .. }) => Some(*len),
        _ => None,
    })
}

pub(crate) fn failed_peer(e: &(dyn StdError + 'static)) -> Option<u32> {
    find_in_chain(e, |c| match c.downcast_ref::<AgentError>() {
        Some(AgentError::PeerFailed { peer, .. }) => Some(*peer),
        _ => None,
    })
}

pub(crate) fn errno(e: &(dyn StdError + 'static)) -> Option<i32> {
    find_in_chain(e, |c| {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        if let Some(fe) = c.downcast_ref::<viaduct_fallback::file::FileError>() {
            return fe.errno();
        }
        None
    })
}

pub(crate) fn is_timeout(e: &(dyn StdError + 'static)) -> bool {
    find_in_chain(e, |c| {
        let hit = matches!(
            c.downcast_ref::<AgentError>(),
            Some(AgentError::Timeout { .. } | AgentError::SetupTimeout { .. })
        ) || matches!(
            c.downcast_ref::<BootstrapError>(),
            Some(BootstrapError::Timeout { .. })
        ) || matches!(
            c.downcast_ref::<crate::request::RequestError>(),
            Some(crate::request::RequestError::HandlersPending { .. })
        ) || c
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
        hit.then_some(())
    })
    .is_some()
}

pub(crate) fn is_cancelled(e: &(dyn StdError + 'static)) -> bool {
    find_in_chain(e, |c| match c.downcast_ref::<RequestError>() {
        Some(RequestError::Poll(_) | RequestError::WaitHook(_)) => Some(()),
        _ => None,
    })
    .is_some()
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;
    use crate::bootstrap::Bootstrap;
    use crate::fileio::FileIoError;
    use crate::request::RequestError;

    fn os(errno: i32) -> io::Error {
        io::Error::from_raw_os_error(errno)
    }

    fn truncated_request() -> AgentError {
        AgentError::Request(RequestError::Operation(Cause::new(AgentError::Truncated {
            len: 12,
            capacity: 4,
        })))
    }

    /// Every error that carries a source shows the source's text in its own, exactly once.
    #[test]
    fn display_shows_each_source_once() {
        let wire = crate::bootstrap::wire::WireError::NoCommand("x=1".into());
        let errors: Vec<Box<dyn StdError>> = vec![
            Box::new(AgentError::Bootstrap(BootstrapError::Io {
                op: "fence",
                source: os(libc::EPIPE),
            })),
            Box::new(AgentError::Bootstrap(BootstrapError::Wire {
                op: "get",
                source: wire,
            })),
            Box::new(BootstrapError::Connect {
                addr: "127.0.0.1:1".into(),
                source: os(libc::ECONNREFUSED),
            }),
            Box::new(AgentError::Thread(os(libc::EAGAIN))),
            Box::new(AgentError::LivenessSocket {
                addr: "10.0.0.1:0".into(),
                source: os(libc::EADDRNOTAVAIL),
            }),
            Box::new(AgentError::Auth {
                peer: 2,
                method: "tcp",
                source: crate::bootstrap::auth::AuthError::Io(os(libc::ECONNRESET)),
            }),
            Box::new(AgentError::Connect {
                peer: 1,
                method: "tcp",
                source: MethodError::Tcp(viaduct_fallback::tcp::Error::Socket {
                    step: "connect",
                    source: os(libc::ECONNREFUSED),
                }),
            }),
            Box::new(AgentError::Xfer(XferError::ZeroElementSize)),
            Box::new(truncated_request()),
            Box::new(RequestError::Query(Cause::new("the query found no data"))),
            Box::new(RequestError::Free(Cause::new("the free found a leak"))),
            Box::new(RequestError::Cancel(Cause::new("too late to cancel"))),
            Box::new(RequestError::Poll(Cause::new("device lost the operation"))),
            Box::new(RequestError::WaitHook(Cause::new(os(libc::EINTR)))),
            Box::new(RequestError::HandlerThread(Cause::new(os(libc::EAGAIN)))),
            Box::new(FileIoError::Open {
                path: "/no/such/file".into(),
                source: os(libc::ENOENT),
            }),
            Box::new(FileIoError::Write {
                written: 7,
                source: os(libc::ENOSPC),
            }),
            Box::new(FileIoError::Stream {
                peer: 1,
                source: Box::new(AgentError::PeerFailed {
                    peer: 1,
                    reason: "closed its end".into(),
                    source: None,
                }),
            }),
        ];
        for e in errors {
            let text = e.to_string();
            let mut source = e.source();
            assert!(source.is_some(), "{text}: no source");
            while let Some(s) = source {
                let inner = s.to_string();
                assert_eq!(
                    text.matches(&inner).count(),
                    1,
                    "{text:?} should hold {inner:?} once"
                );
                source = s.source();
            }
        }
    }

    #[test]
    fn display_of_nested_errors_reads_outer_to_inner() {
        assert_eq!(
            truncated_request().to_string(),
            "request failed: operation of the request failed: message of 12 bytes truncated to \
             the receive buffer of 4 bytes"
        );
        let e = AgentError::Bootstrap(BootstrapError::Io {
            op: "fence",
            source: os(libc::EPIPE),
        });
        assert_eq!(
            e.to_string(),
            format!(
                "bootstrap failed: PMI fence: I/O error: {}",
                os(libc::EPIPE)
            )
        );
    }

    #[test]
    fn display_names_the_reason_of_an_incomplete_pmi_environment() {
        let e = Bootstrap::from_vars([("PMI_RANK", "0")]).expect_err("PMI_FD/PMI_PORT missing");
        let text = AgentError::from(e).to_string();
        assert!(text.starts_with("bootstrap failed: "), "{text}");
        assert!(text.contains("PMI_RANK"), "{text}");
        assert!(text.contains("is not"), "{text}");
    }

    #[test]
    fn chain_leaves_out_a_source_the_message_embeds() {
        // tcp::Error::Socket shows only its step; the OS error follows once.
        let e = MethodError::Tcp(viaduct_fallback::tcp::Error::Socket {
            step: "bind",
            source: os(libc::EADDRINUSE),
        });
        assert_eq!(
            crate::engine::chain(&e),
            format!("TCP method: TCP bind failed: {}", os(libc::EADDRINUSE))
        );
    }

    #[test]
    fn truncation_is_found_through_requests_and_causes() {
        // The request crate knows the agent's errors once the agent has registered them.
        register_error_kinds();
        assert!(
            AgentError::Truncated {
                len: 2,
                capacity: 1
            }
            .is_truncated()
        );
        assert!(truncated_request().is_truncated());
        let AgentError::Request(r) = truncated_request() else {
            unreachable!()
        };
        assert!(r.is_truncated());
        assert!(!AgentError::Finalized.is_truncated());
        assert!(!RequestError::Operation(Cause::new("link down")).is_truncated());
    }

    #[test]
    fn peer_failure_names_the_peer_at_any_depth() {
        // The request crate knows the agent's errors once the agent has registered them.
        register_error_kinds();
        let failed = || AgentError::PeerFailed {
            peer: 5,
            reason: "closed its end".into(),
            source: None,
        };
        assert_eq!(failed().failed_peer(), Some(5));
        let nested = AgentError::Request(RequestError::Operation(Cause::new(failed())));
        assert!(nested.is_peer_failed());
        assert_eq!(nested.failed_peer(), Some(5));
        let in_file = RequestError::Operation(Cause::new(FileIoError::Stream {
            peer: 5,
            source: Box::new(failed()),
        }));
        assert_eq!(in_file.failed_peer(), Some(5));
        assert!(!truncated_request().is_peer_failed());
        assert_eq!(RequestError::Null.failed_peer(), None);
    }

    #[test]
    fn errno_comes_from_the_os_error_in_the_chain() {
        // The request crate knows the agent's errors once the agent has registered them.
        register_error_kinds();
        let e = AgentError::Connect {
            peer: 1,
            method: "tcp",
            source: MethodError::Tcp(viaduct_fallback::tcp::Error::Socket {
                step: "connect",
                source: os(libc::ECONNREFUSED),
            }),
        };
        assert_eq!(e.errno(), Some(libc::ECONNREFUSED));
        let file = RequestError::Operation(Cause::new(FileIoError::Open {
            path: "/x".into(),
            source: os(libc::EACCES),
        }));
        assert_eq!(file.errno(), Some(libc::EACCES));
        assert_eq!(AgentError::Finalized.errno(), None);
        assert_eq!(truncated_request().errno(), None);
        // An io::Error that is not the OS's has no errno.
        let custom = AgentError::Thread(io::Error::other("no threads left"));
        assert_eq!(custom.errno(), None);
    }

    #[test]
    fn a_peer_failure_keeps_the_method_error_and_its_errno() {
        use crate::proto::Failure;
        // From an OS error: the source is that io::Error, and its errno answers.
        let f = Failure::of(os(libc::ECONNRESET));
        let e = f.error(3);
        assert_eq!(
            e.to_string(),
            format!("rank 3 failed: {}", os(libc::ECONNRESET))
        );
        let source = e.source().expect("the OS error as source");
        assert_eq!(
            source
                .downcast_ref::<io::Error>()
                .and_then(io::Error::raw_os_error),
            Some(libc::ECONNRESET)
        );
        assert_eq!(e.errno(), Some(libc::ECONNRESET));
        assert_eq!(e.failed_peer(), Some(3));
        // From a method's error: the source is the MethodError, the errno is found below it,
        // also through a request's cause.
        let method = MethodError::Tcp(viaduct_fallback::tcp::Error::Socket {
            step: "send",
            source: os(libc::EPIPE),
        });
        let text = crate::engine::chain(&method);
        let e = Failure::of(method).error(2);
        assert_eq!(e.to_string(), format!("rank 2 failed: {text}"));
        assert!(e.source().unwrap().downcast_ref::<MethodError>().is_some());
        assert_eq!(e.errno(), Some(libc::EPIPE));
        let nested = AgentError::Request(RequestError::Operation(Cause::new(e)));
        assert_eq!(nested.errno(), Some(libc::EPIPE));
        assert_eq!(nested.failed_peer(), Some(2));
        assert_eq!(nested.to_string().matches(&text).count(), 1, "{nested}");
        // A failure seen without an error has no source and no errno.
        let silent = Failure::from("no sign of life").error(4);
        assert!(silent.source().is_none());
        assert_eq!(silent.errno(), None);
    }

    #[test]
    fn timeouts_are_recognized_at_every_layer() {
        assert!(
            AgentError::Timeout {
                what: "barrier",
                seconds: 1
            }
            .is_timeout()
        );
        assert!(
            AgentError::SetupTimeout {
                seconds: 1,
                what: "rank 1".into()
            }
            .is_timeout()
        );
        let pmi = AgentError::Bootstrap(BootstrapError::Timeout {
            op: "fence",
            secs: 1.0,
        });
        assert!(pmi.is_timeout());
        let os_timeout =
            RequestError::Operation(Cause::new(io::Error::from(io::ErrorKind::TimedOut)));
        assert!(os_timeout.is_timeout());
        assert!(AgentError::Request(os_timeout).is_timeout());
        assert!(!AgentError::Finalized.is_timeout());
        assert!(!truncated_request().is_timeout());
    }

    #[test]
    fn cancellation_by_a_failing_hook_is_recognized() {
        let poll = RequestError::Poll(Cause::new("device lost the operation"));
        assert!(poll.is_cancelled());
        assert!(AgentError::Request(poll).is_cancelled());
        assert!(RequestError::WaitHook(Cause::new("gone")).is_cancelled());
        assert!(!RequestError::Operation(Cause::new("link down")).is_cancelled());
        assert!(!truncated_request().is_cancelled());
    }
}
