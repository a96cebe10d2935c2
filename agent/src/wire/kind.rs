//! The kinds of agent messages: the top byte of a method tag (see [`crate::wire`] and
//! [`crate::engine::read_rndv`]).

use std::fmt;

/// What an agent message is: the top byte of its method tag. The values are the wire's and
/// never change.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// A whole small message, its envelope in an 8-byte header (`EAGER`).
    Eager = 1,
    /// The announcement of a rendezvous message (`RTS`, ready to send).
    Rts = 2,
    /// The receiver's go-ahead for a rendezvous message (`CTS`, clear to send).
    Cts = 3,
    /// A piece of a rendezvous message (`DATA`).
    Data = 4,
    /// Bytes of the VC's byte stream, read in place (`STREAM`).
    Stream = 5,
    /// A piece of an xfer block's message (`XFER`, see `crate::xfer`): pieces of one message
    /// arrive in order; the block sequence is the sender's count of earlier blocks to the same
    /// peer with the same context and tag, so blocks match in start order whatever order their
    /// pieces leave in.
    Xfer = 6,
    /// An `RTS` naming the sender's registered region, for an RDMA READ (`RTS_READ`).
    RtsRead = 7,
    /// The receiver read the data of a rendezvous message (`FIN`).
    Fin = 8,
    /// A whole small message whose envelope rides in the method tag (`EAGER_PACKED`).
    EagerPacked = 9,
    /// The receiver's region for an RDMA WRITE of a message announced by `RTS_READ`
    /// (`CTS_WRITE`).
    CtsWrite = 10,
    /// The sender wrote the data of a rendezvous message (`FIN_WRITE`).
    FinWrite = 11,
    /// The last bytes of the connection handshake, if any reach the agent.
    Handshake = 0xff,
}

impl Kind {
    /// Every kind, in wire order.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) const ALL: [Kind; 12] = [
        Kind::Eager,
        Kind::Rts,
        Kind::Cts,
        Kind::Data,
        Kind::Stream,
        Kind::Xfer,
        Kind::RtsRead,
        Kind::Fin,
        Kind::EagerPacked,
        Kind::CtsWrite,
        Kind::FinWrite,
        Kind::Handshake,
    ];

    /// The kind's byte on the wire.
    #[inline]
    pub(crate) const fn byte(self) -> u8 {
        self as u8
    }

    /// The kind's name as the protocol tables write it.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Kind::Eager => "EAGER",
            Kind::Rts => "RTS",
            Kind::Cts => "CTS",
            Kind::Data => "DATA",
            Kind::Stream => "STREAM",
            Kind::Xfer => "XFER",
            Kind::RtsRead => "RTS_READ",
            Kind::Fin => "FIN",
            Kind::EagerPacked => "EAGER_PACKED",
            Kind::CtsWrite => "CTS_WRITE",
            Kind::FinWrite => "FIN_WRITE",
            Kind::Handshake => "HANDSHAKE",
        }
    }
}

/// Shows the kind's wire value (the number a peer sent), as the protocol errors always did.
impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.byte())
    }
}

/// A method tag's top byte that names no message kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown message kind {0}")]
pub(crate) struct UnknownKind(pub(crate) u8);

impl TryFrom<u8> for Kind {
    type Error = UnknownKind;

    #[inline]
    fn try_from(b: u8) -> Result<Kind, UnknownKind> {
        Ok(match b {
            1 => Kind::Eager,
            2 => Kind::Rts,
            3 => Kind::Cts,
            4 => Kind::Data,
            5 => Kind::Stream,
            6 => Kind::Xfer,
            7 => Kind::RtsRead,
            8 => Kind::Fin,
            9 => Kind::EagerPacked,
            10 => Kind::CtsWrite,
            11 => Kind::FinWrite,
            0xff => Kind::Handshake,
            other => return Err(UnknownKind(other)),
        })
    }
}

impl From<Kind> for u8 {
    fn from(k: Kind) -> u8 {
        k.byte()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_byte() {
        for k in Kind::ALL {
            assert_eq!(Kind::try_from(k.byte()), Ok(k), "{}", k.name());
        }
        // The wire values are fixed.
        let bytes: Vec<u8> = Kind::ALL.iter().map(|k| k.byte()).collect();
        assert_eq!(bytes, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0xff]);
    }

    #[test]
    fn an_unknown_kind_byte_is_a_typed_error() {
        for b in (0..=u8::MAX).filter(|b| !matches!(b, 1..=11 | 0xff)) {
            assert_eq!(Kind::try_from(b), Err(UnknownKind(b)));
        }
        assert_eq!(UnknownKind(42).to_string(), "unknown message kind 42");
    }
}
