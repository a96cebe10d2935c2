//! What a broken or hostile peer's message is refused for ([`ProtocolError`]), and why a VC
//! failed ([`Failure`]): the text every request on it reports and the typed error behind it.

use crate::error::{AgentError, PeerCause};
use crate::proto::{Kind, UnknownKind};

/// A message a peer sent that breaks the agent's protocol (see [`crate::wire`]): the VC fails
/// with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// The method tag names no message kind.
    #[error(transparent)]
    Kind(#[from] UnknownKind),
    /// The payload is shorter than its kind's header.
    #[error("message of kind {kind} too short ({len} bytes)")]
    TooShort {
        /// The message's kind.
        kind: Kind,
        /// Its payload's length.
        len: usize,
    },
    /// An `RTS` whose payload is not the announcement's 16 bytes.
    #[error("malformed RTS")]
    MalformedRts,
    /// An `RTS_READ` or `CTS_WRITE` whose region is not address, length and key.
    #[error("malformed region in RTS_READ or CTS_WRITE")]
    MalformedRegion,
    /// A `CTS` without the receiver's id.
    #[error("malformed CTS")]
    MalformedCts,
    /// A `CTS` for a send to another rank.
    #[error("CTS for send {id}, which goes to rank {to}, not to this peer")]
    CtsWrongPeer {
        /// The sender's id it names.
        id: u64,
        /// The rank the send goes to.
        to: u32,
    },
    /// A `CTS` for no send waiting for one.
    #[error("CTS for unknown send {id}")]
    CtsUnknownSend {
        /// The sender's id it names.
        id: u64,
    },
    /// `DATA` for no receive expecting it.
    #[error("data for unknown receive {id}")]
    DataUnknownRecv {
        /// The receiver's id it names.
        id: u64,
    },
    /// `DATA` for a receive whose message comes from another rank.
    #[error("data for receive {id}, which receives from rank {from}, not from this peer")]
    DataWrongPeer {
        /// The receiver's id it names.
        id: u64,
        /// The rank the receive's `RTS` came from.
        from: u32,
    },
    /// `DATA` beyond the length the `RTS` announced.
    #[error(
        "data for receive {id} runs past the {len} bytes its RTS announced ({got} received, \
         {more} more came)"
    )]
    DataPastEnd {
        /// The receiver's id it names.
        id: u64,
        /// The length announced.
        len: u64,
        /// The bytes received before.
        got: u64,
        /// The bytes of this piece.
        more: usize,
    },
    /// A message of a kind the matching engine never handles (stream bytes are read in
    /// place).
    #[error("a {} message outside the byte stream", .0.name())]
    OutOfPlace(Kind),
    /// A `FIN` for a send to another rank.
    #[error("FIN for send {id} to rank {to}")]
    FinWrongPeer {
        /// The sender's id it names.
        id: u64,
        /// The rank the send goes to.
        to: u32,
    },
    /// A `FIN` for no send waiting for one.
    #[error("FIN for unknown send {id}")]
    FinUnknownSend {
        /// The sender's id it names.
        id: u64,
    },
    /// A `CTS_WRITE` for no send waiting to be read or written.
    #[error("CTS_WRITE for unknown send {id}")]
    CtsWriteUnknownSend {
        /// The sender's id it names.
        id: u64,
    },
    /// A `CTS_WRITE` whose region's length is not the message's.
    #[error("CTS_WRITE for send {id} of {len} bytes names a region of {region} bytes")]
    RegionLength {
        /// The sender's id it names.
        id: u64,
        /// The send's length.
        len: u64,
        /// The region's length.
        region: u64,
    },
    /// A `FIN_WRITE` for no receive waiting for one.
    #[error("FIN_WRITE for unknown message {id}")]
    FinWriteUnknownRecv {
        /// The sender's id it names.
        id: u64,
    },
    /// An `XFER` piece shorter than its header.
    #[error("xfer piece too short ({len} bytes)")]
    XferTooShort {
        /// The piece's length.
        len: usize,
    },
}

/// Why a VC failed: the text its requests report ([`AgentError::PeerFailed`]'s `reason`) and,
/// when an error caused it, that error (its `source`).
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) reason: String,
    pub(crate) source: Option<PeerCause>,
}

impl Failure {
    /// A failure caused by `e` (a method's error, an OS error): its text is `e`'s chain.
    pub(crate) fn of<E: std::error::Error + Send + Sync + 'static>(e: E) -> Failure {
        Failure {
            reason: crate::error::Chain(&e).to_string(),
            source: Some(PeerCause::new(e)),
        }
    }

    /// A failure caused by a peer's message that broke the protocol.
    pub(crate) fn protocol(e: ProtocolError) -> Failure {
        Failure {
            reason: format!("protocol error: {e}"),
            source: Some(PeerCause::new(e)),
        }
    }

    /// The error of a request that `peer`'s failure fails.
    pub(crate) fn error(&self, peer: u32) -> AgentError {
        AgentError::PeerFailed {
            peer,
            reason: self.reason.clone(),
            source: self.source.clone(),
        }
    }
}

impl From<String> for Failure {
    fn from(reason: String) -> Failure {
        Failure {
            reason,
            source: None,
        }
    }
}

impl From<&str> for Failure {
    fn from(reason: &str) -> Failure {
        Failure::from(reason.to_owned())
    }
}
