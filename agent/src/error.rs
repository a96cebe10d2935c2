//! Errors of the agent: set-up, posting, and the causes carried by failed requests.

use crate::bootstrap::BootstrapError;
use crate::bootstrap::auth::AuthError;
use crate::method::MethodError;
use crate::request::RequestError;
use crate::xfer::XferError;

/// Everything the agent can report.
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
    #[error("bootstrap failed")]
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
    #[error("cannot listen for {method} connections")]
    Listen {
        /// The method.
        method: &'static str,
        /// The method's error.
        #[source]
        source: MethodError,
    },
    /// Setting up a connection to or from a peer failed.
    #[error("cannot connect with rank {peer} over {method}")]
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
    #[error("authentication with rank {peer} over {method} failed")]
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
    #[error("cannot start a thread of the agent")]
    Thread(#[source] std::io::Error),
    /// The liveness socket (the UDP socket of the heartbeat thread, see [`crate::config`],
    /// "Peer liveness") could not be opened.
    #[error("cannot open the liveness socket (UDP heartbeats) on {addr}")]
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
        /// What was observed.
        reason: String,
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
    #[error("request failed")]
    Request(#[source] RequestError),
    /// An xfer block is invalid (refused at start), or its message did not fit.
    #[error("xfer block failed")]
    Xfer(#[source] XferError),
    /// A color of a communicator split must be below `u32::MAX`.
    #[error("split color {0} is reserved")]
    BadColor(u32),
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
