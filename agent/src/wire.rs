//! The agent's protocol on a VC: what each message carries.
//!
//! Every agent message is one method message. Its 64-bit method tag holds the kind in the top
//! byte and an id in the low 56 bits; the payload starts with a small little-endian header:
//!
//! | kind | method tag id | payload |
//! | --- | --- | --- |
//! | `EAGER` | 0 | context u32, tag u32, then the data |
//! | `EAGER_PACKED` | context (below 2^24) in bits 32..56, tag in bits 0..32 | the data |
//! | `RTS` (ready to send) | sender's id | context u32, tag u32, length u64 |
//! | `CTS` (clear to send) | sender's id | receiver's id u64 |
//! | `DATA` | receiver's id | a piece of the data (pieces arrive in order) |
//! | `STREAM` | 0 | bytes of the VC's byte stream (`Agent::write` / `Agent::next`) |
//! | `XFER` | 0 | context u32, tag u32, block sequence u32, 0 u32, message length u64, then a piece of the message |
//!
//! The kinds are the values of [`Kind`] (one byte each; the verbs rendezvous adds
//! `RTS_READ`, `FIN`, `CTS_WRITE` and `FIN_WRITE`, see [`crate::engine::read_rndv`]).
//!
//! Rendezvous: the sender keeps the data and sends `RTS`; the receiver matches it like any
//! message and answers `CTS` naming where the data goes; the sender then sends the data in
//! `DATA` pieces of `rendezvous_chunk` bytes, pipelined by the method.

mod kind;
pub(crate) use kind::{Kind, UnknownKind};

/// Bytes of the `XFER` header.
pub(crate) const XFER_HEADER: usize = 24;

/// Contexts below this fit an [`Kind::EagerPacked`] tag (24 bits): those of the first 52,000
/// or so communicators a job makes (each takes some 322 ids with the duplicates it reserves,
/// see [`crate::comm`]); later ones send with the `EAGER` header. Such a message has no header in the payload, so the data lies where the method
/// puts a payload (in the shared-memory ring, at the same offset as a raw method message) and a
/// send posts one part instead of two.
pub(crate) const PACKED_CONTEXTS: u32 = 1 << 24;

/// Bytes of the `EAGER` header.
pub(crate) const EAGER_HEADER: usize = 8;
/// Bytes of the `RTS` payload.
pub(crate) const RTS_LEN: usize = 16;
/// Ids fit in the low 56 bits of a method tag.
pub(crate) const ID_MASK: u64 = (1 << 56) - 1;

/// The method tag of a message of `kind` with `id` (its low 56 bits).
#[inline]
pub(crate) fn method_tag(kind: Kind, id: u64) -> u64 {
    raw_tag(kind.byte(), id)
}

/// A method tag with any top byte (a peer's, or a fuzzer's).
#[inline]
pub(crate) fn raw_tag(kind: u8, id: u64) -> u64 {
    (u64::from(kind) << 56) | (id & ID_MASK)
}

/// The top byte of a method tag, unchecked.
#[inline]
pub(crate) fn kind_byte(tag: u64) -> u8 {
    (tag >> 56) as u8
}

/// Whether `tag` is of `kind` (one compare, for the loops that look for stream bytes).
#[inline]
pub(crate) fn is_kind(tag: u64, kind: Kind) -> bool {
    kind_byte(tag) == kind.byte()
}

/// Kind and id of a method tag; an unknown kind is an error naming its byte.
#[inline]
pub(crate) fn split_tag(tag: u64) -> (Result<Kind, UnknownKind>, u64) {
    (Kind::try_from(kind_byte(tag)), tag & ID_MASK)
}

#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The `EAGER` header: context and tag.
#[inline]
pub(crate) fn eager_header(context: u32, tag: u32) -> [u8; EAGER_HEADER] {
    let mut h = [0u8; EAGER_HEADER];
    h[..4].copy_from_slice(&context.to_le_bytes());
    h[4..].copy_from_slice(&tag.to_le_bytes());
    h
}

/// The method tag of an [`Kind::EagerPacked`] message, when `context` fits one.
#[inline]
pub(crate) fn eager_packed_tag(context: u32, tag: u32) -> Option<u64> {
    (context < PACKED_CONTEXTS)
        .then(|| method_tag(Kind::EagerPacked, u64::from(context) << 32 | u64::from(tag)))
}

/// Context, tag and data of an eager message of either form (`EAGER`, `EAGER_PACKED`), from
/// its method tag and payload; `None` for another kind or an `EAGER` payload shorter than its
/// header.
#[inline]
pub(crate) fn eager_parts(tag: u64, payload: &[u8]) -> Option<(u32, u32, &[u8])> {
    match split_tag(tag) {
        (Ok(Kind::EagerPacked), id) => Some(((id >> 32) as u32, id as u32, payload)),
        (Ok(Kind::Eager), _) => Some((
            u32_at(payload, 0)?,
            u32_at(payload, 4)?,
            &payload[EAGER_HEADER..],
        )),
        _ => None,
    }
}

/// An `EAGER` payload: header and data in one buffer.
pub(crate) fn eager(context: u32, tag: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(EAGER_HEADER + data.len());
    b.extend_from_slice(&eager_header(context, tag));
    b.extend_from_slice(data);
    b
}

/// An `RTS` payload.
pub(crate) fn rts(context: u32, tag: u32, len: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(RTS_LEN);
    b.extend_from_slice(&context.to_le_bytes());
    b.extend_from_slice(&tag.to_le_bytes());
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// An `XFER` piece: header and `data` in one buffer.
pub(crate) fn xfer_piece(context: u32, tag: u32, seq: u32, total: u64, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(XFER_HEADER + data.len());
    b.extend_from_slice(&context.to_le_bytes());
    b.extend_from_slice(&tag.to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&total.to_le_bytes());
    b.extend_from_slice(data);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        for kind in [Kind::Eager, Kind::Rts, Kind::Cts, Kind::Data] {
            assert_eq!(split_tag(method_tag(kind, 12345)), (Ok(kind), 12345));
        }
        assert_eq!(
            split_tag(method_tag(Kind::Data, u64::MAX)),
            (Ok(Kind::Data), ID_MASK)
        );
        assert_eq!(split_tag(raw_tag(200, 1)), (Err(UnknownKind(200)), 1));
        let e = eager(3, 9, b"abc");
        assert_eq!(
            (u32_at(&e, 0), u32_at(&e, 4), &e[8..]),
            (Some(3), Some(9), &b"abc"[..])
        );
        let t = eager_packed_tag(PACKED_CONTEXTS - 1, u32::MAX).unwrap();
        assert_eq!(
            eager_parts(t, b"xyz"),
            Some((PACKED_CONTEXTS - 1, u32::MAX, &b"xyz"[..]))
        );
        assert_eq!(eager_packed_tag(PACKED_CONTEXTS, 0), None);
        let t = method_tag(Kind::Eager, 0);
        assert_eq!(eager_parts(t, &e), Some((3, 9, &b"abc"[..])));
        assert_eq!(eager_parts(t, &e[..7]), None);
        assert_eq!(eager_parts(method_tag(Kind::Rts, 0), &e), None);
        let r = rts(1, 2, 99);
        assert_eq!(u64_at(&r, 8), Some(99));
        assert_eq!(u64_at(&r, 9), None);
    }
}
