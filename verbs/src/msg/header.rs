//! The message protocol's header: 16 bytes in front of a SEND's payload, or, for a whole
//! message whose tag the peer has seen recently, 4 bytes of immediate data beside it (a
//! *compact* header), so a message of up to the path MTU travels in one packet.
//!
//! Compact headers name the tag by a slot of a table both sides keep alike: the sender records
//! each tag it sends with a full header in slot [`tag_slot`]`(tag)`, the receiver records it
//! from the same header as it takes the message (a queue pair delivers in order, so both
//! tables change in the same order), and a later whole message with a tag its slot holds goes
//! with the slot number instead. The length is the received byte count; the kind is data and
//! the flags first and last.

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

/// Tags each side remembers for compact headers.
pub(crate) const TAG_SLOTS: usize = 256;

/// The low byte of every compact header's immediate data (anything else is a protocol
/// violation).
const COMPACT_MARK: u32 = 0xc1;

/// The table slot of `tag` (a multiplicative hash: nearby tags land apart).
#[inline]
pub(crate) fn tag_slot(tag: u64) -> usize {
    (tag.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as usize
}

/// Immediate data of a compact header: credits (16 bits), tag slot (8 bits), the mark (8 bits).
#[inline]
pub(crate) fn compact_imm(credits: u16, slot: usize) -> u32 {
    (u32::from(credits) << 16) | ((slot as u32 & 0xff) << 8) | COMPACT_MARK
}

/// Credits and tag slot of a compact header's immediate data.
#[inline]
pub(crate) fn read_compact(imm: u32) -> Result<(u16, usize), Error> {
    if imm & 0xff != COMPACT_MARK {
        return Err(Error::PeerFailed(format!(
            "protocol violation: immediate data {imm:#010x} is no compact header"
        )));
    }
    Ok(((imm >> 16) as u16, ((imm >> 8) & 0xff) as usize))
}

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

    #[test]
    fn compact_headers_round_trip_and_stray_immediates_are_refused() {
        for (credits, slot) in [(0, 0), (1, 255), (u16::MAX, 17)] {
            assert_eq!(
                read_compact(compact_imm(credits, slot)).unwrap(),
                (credits, slot)
            );
        }
        assert!(read_compact(0x0001_0200).is_err());
        // Consecutive tags spread over the table.
        let slots: std::collections::HashSet<_> = (0..64u64).map(tag_slot).collect();
        assert!(slots.len() > 48, "{} distinct slots", slots.len());
        assert!((0..10_000u64).all(|t| tag_slot(t) < TAG_SLOTS));
    }
}
