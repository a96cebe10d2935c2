//! The business card of a message endpoint: what the peer needs to connect to it.

use super::error::Error;
use crate::mr::RemoteRegion;
use crate::qp::Endpoint as QpEndpoint;

/// What a peer needs to connect to a prepared message endpoint: the queue pair's address
/// (GID, QPN, PSN, LID, port, MTU), the receive ring's shape (its buffers are the peer's
/// credits) and the region keepalives are written to. Exchange it out of band (as hex text
/// with [`Card::to_hex`] / [`Card::from_hex`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Card {
    /// The queue pair.
    pub qp: QpEndpoint,
    /// Receive buffers posted for the peer.
    pub recv_buffers: u32,
    /// Bytes of each receive buffer, header included.
    pub buffer_bytes: u32,
    /// Where the peer writes keepalives.
    pub keepalive: RemoteRegion,
    /// The receive buffers come from a [`ReceivePool`](super::ReceivePool) shared with other
    /// peers (so a send may meet receiver-not-ready for a moment, which the peer retries
    /// without limit) rather than a ring of the endpoint's own.
    pub shared_receive: bool,
}

/// 2: compact headers (immediate data) beside the 16-byte one. 3: a flags byte at the end
/// (bit 0: shared receive pool).
const VERSION: u8 = 3;

/// Flag bit: the receive buffers come from a shared pool.
const FLAG_SHARED_RECEIVE: u8 = 1;

impl Card {
    /// Encoded size in bytes.
    pub const ENCODED_LEN: usize = 1 + QpEndpoint::ENCODED_LEN + 8 + RemoteRegion::ENCODED_LEN + 1;

    /// Fixed little-endian encoding: version, queue pair endpoint, ring shape, keepalive
    /// region, flags.
    pub fn to_bytes(&self) -> [u8; Self::ENCODED_LEN] {
        let mut b = [0u8; Self::ENCODED_LEN];
        b[0] = VERSION;
        let q = 1 + QpEndpoint::ENCODED_LEN;
        b[1..q].copy_from_slice(&self.qp.to_bytes());
        b[q..q + 4].copy_from_slice(&self.recv_buffers.to_le_bytes());
        b[q + 4..q + 8].copy_from_slice(&self.buffer_bytes.to_le_bytes());
        b[q + 8..Self::ENCODED_LEN - 1].copy_from_slice(&self.keepalive.to_bytes());
        b[Self::ENCODED_LEN - 1] = if self.shared_receive {
            FLAG_SHARED_RECEIVE
        } else {
            0
        };
        b
    }

    /// Decodes [`Card::to_bytes`]' output.
    pub fn from_bytes(b: &[u8]) -> Result<Card, Error> {
        if b.len() != Self::ENCODED_LEN {
            return Err(Error::Card(format!(
                "{} bytes, expected {}",
                b.len(),
                Self::ENCODED_LEN
            )));
        }
        if b[0] != VERSION {
            return Err(Error::Card(format!("version {}, expected {VERSION}", b[0])));
        }
        let q = 1 + QpEndpoint::ENCODED_LEN;
        let qp = QpEndpoint::from_bytes(&b[1..q]).map_err(|e| Error::Card(e.to_string()))?;
        let flags = b[Self::ENCODED_LEN - 1];
        if flags & !FLAG_SHARED_RECEIVE != 0 {
            return Err(Error::Card(format!("unknown flags {flags:#x}")));
        }
        let keepalive = RemoteRegion::from_bytes(&b[q + 8..Self::ENCODED_LEN - 1])
            .map_err(|e| Error::Card(e.to_string()))?;
        Ok(Card {
            qp,
            recv_buffers: u32::from_le_bytes([b[q], b[q + 1], b[q + 2], b[q + 3]]),
            buffer_bytes: u32::from_le_bytes([b[q + 4], b[q + 5], b[q + 6], b[q + 7]]),
            keepalive,
            shared_receive: flags & FLAG_SHARED_RECEIVE != 0,
        })
    }

    /// The encoding as lowercase hex text.
    pub fn to_hex(&self) -> String {
        hex::encode(self.to_bytes())
    }

    /// Decodes [`Card::to_hex`]' output.
    pub fn from_hex(s: &str) -> Result<Card, Error> {
        let s = s.trim();
        let bytes = hex::decode(s).map_err(|_| Error::Card(format!("{s:?} is not hex text")))?;
        Card::from_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Gid, Mtu};

    #[test]
    fn hex_round_trip_and_refusals() {
        let c = Card {
            qp: QpEndpoint {
                qp_num: 17,
                psn: 0x12_3456,
                lid: 3,
                gid: Gid([7; 16]),
                port: 1,
                mtu: Mtu::from_raw(3),
            },
            recv_buffers: 32,
            buffer_bytes: 65536,
            keepalive: RemoteRegion {
                addr: 0xdead_beef,
                len: 8,
                rkey: 99,
            },
            shared_receive: false,
        };
        assert_eq!(Card::from_hex(&c.to_hex()).unwrap(), c);
        let shared = Card {
            shared_receive: true,
            ..c
        };
        assert_eq!(Card::from_hex(&shared.to_hex()).unwrap(), shared);
        let mut unknown = shared.to_bytes();
        unknown[Card::ENCODED_LEN - 1] = 2;
        assert!(matches!(Card::from_bytes(&unknown), Err(Error::Card(m)) if m.contains("flags")));
        assert!(Card::from_hex("zz").is_err());
        assert!(Card::from_hex("abc").is_err());
        assert!(Card::from_hex("00").is_err());
    }

    #[test]
    fn hex_with_signs_is_refused() {
        // `u8::from_str_radix` would take "+1" for 1: a card whose version byte is written "+1"
        // must still be refused, as must any text that is not hex digits.
        // Every byte 1 but the endpoint's reserved ones (card offsets 4, 12, 15, 16), which a
        // card must keep zero.
        let mut bytes = [1; Card::ENCODED_LEN];
        for i in [4, 12, 15, 16] {
            bytes[i] = 0;
        }
        bytes[0] = VERSION;
        let hex = Card::from_bytes(&bytes).unwrap().to_hex();
        assert!(Card::from_hex(&hex).is_ok());
        let signed = format!("+{VERSION}{}", &hex[2..]);
        assert!(
            matches!(Card::from_hex(&signed), Err(Error::Card(m)) if m.contains("not hex")),
            "{signed:?} was accepted"
        );
    }
}
