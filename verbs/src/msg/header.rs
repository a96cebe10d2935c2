//! The 16-byte header in front of every SEND of the message protocol.

use super::error::Error;

/// Bytes of the header.
pub(crate) const HEADER_LEN: usize = 16;

/// A data fragment (part or all of a message).
pub(crate) const KIND_DATA: u8 = 1;
/// Credits only.
pub(crate) const KIND_CREDIT: u8 = 2;
/// The peer closes its end.
pub(crate) const KIND_CLOSE: u8 = 3;

/// First fragment of a message.
pub(crate) const FIRST: u8 = 1;
/// Last fragment of a message.
pub(crate) const LAST: u8 = 2;

/// Header fields, little-endian on the wire: tag (8), total length (4), credits (2), kind (1),
/// flags (1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) tag: u64,
    pub(crate) total: u32,
    pub(crate) credits: u16,
    pub(crate) kind: u8,
    pub(crate) flags: u8,
}

impl Header {
    pub(crate) fn write(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.tag.to_le_bytes());
        out[8..12].copy_from_slice(&self.total.to_le_bytes());
        out[12..14].copy_from_slice(&self.credits.to_le_bytes());
        out[14] = self.kind;
        out[15] = self.flags;
    }

    pub(crate) fn read(b: &[u8]) -> Result<Header, Error> {
        if b.len() < HEADER_LEN {
            return Err(Error::PeerFailed(format!(
                "protocol violation: a {}-byte message is shorter than the header",
                b.len()
            )));
        }
        let mut tag = [0u8; 8];
        tag.copy_from_slice(&b[0..8]);
        let h = Header {
            tag: u64::from_le_bytes(tag),
            total: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            credits: u16::from_le_bytes([b[12], b[13]]),
            kind: b[14],
            flags: b[15],
        };
        if !(KIND_DATA..=KIND_CLOSE).contains(&h.kind) || h.flags & !(FIRST | LAST) != 0 {
            return Err(Error::PeerFailed(format!(
                "protocol violation: unknown kind {} or flags {:#x}",
                h.kind, h.flags
            )));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let h = Header {
            tag: 0x0102_0304_0506_0708,
            total: 77,
            credits: 5,
            kind: KIND_DATA,
            flags: FIRST | LAST,
        };
        let mut b = [0u8; HEADER_LEN];
        h.write(&mut b);
        assert_eq!(Header::read(&b).unwrap(), h);
        assert!(Header::read(&b[..10]).is_err());
        b[14] = 9;
        assert!(Header::read(&b).is_err());
    }
}
