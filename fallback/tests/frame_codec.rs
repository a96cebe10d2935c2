//! The frame codec against random, truncated and oversized input.

use proptest::prelude::*;
use viaduct_fallback::frame::{Decoded, Decoder, FrameError, HEADER_LEN, Header, Kind};

const KINDS: [Kind; 9] = [
    Kind::Send,
    Kind::Write,
    Kind::WriteAck,
    Kind::Read,
    Kind::ReadReply,
    Kind::Credit,
    Kind::Close,
    Kind::Rendezvous,
    Kind::Fragment,
];

fn header(kind: usize, len: u32, seq: u32, key: u32, tag: u64, offset: u64) -> Header {
    Header {
        len,
        kind: KINDS[kind % KINDS.len()],
        flags: 0,
        status: 7,
        seq,
        key,
        tag,
        offset,
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), max in 0u32..10_000) {
        let mut d = Decoder::new(max);
        match d.decode(&bytes) {
            Ok(Decoded::Frame { header, payload }) => {
                prop_assert!(header.len <= max);
                prop_assert_eq!(payload.len(), header.len as usize);
            }
            Ok(Decoded::NeedHeader { need }) => prop_assert_eq!(need, HEADER_LEN - bytes.len()),
            Ok(Decoded::NeedPayload { header, need }) => {
                prop_assert!(header.len <= max);
                prop_assert_eq!(need, HEADER_LEN + header.len as usize - bytes.len());
            }
            Err(e) => prop_assert!(e.errno() > 0),
        }
    }

    #[test]
    fn encode_then_decode_is_identity(kind in 0usize..9, len in 0u32..5000, seq: u32, key: u32, tag: u64, offset: u64) {
        let h = header(kind, len, seq, key, tag, offset);
        prop_assert_eq!(Header::decode(&h.encode(), u32::MAX), Ok(h));
    }

    #[test]
    fn truncated_header_is_reported(kind in 0usize..9, cut in 0usize..HEADER_LEN) {
        let h = header(kind, 0, 0, 1, 2, 3);
        let b = h.encode();
        prop_assert_eq!(Header::decode(&b[..cut], 100), Err(FrameError::Truncated { have: cut }));
        prop_assert_eq!(Decoder::new(100).decode(&b[..cut]), Ok(Decoded::NeedHeader { need: HEADER_LEN - cut }));
    }

    #[test]
    fn length_beyond_maximum_is_refused_before_allocating(len in 1001u32..=u32::MAX) {
        // The claimed length may be 4 GiB: only the header is present and nothing is allocated.
        let b = header(0, len, 0, 0, 0, 0).encode();
        prop_assert_eq!(Decoder::new(1000).decode(&b), Err(FrameError::TooLong { len, max: 1000 }));
    }

    #[test]
    fn a_stream_split_anywhere_decodes_to_the_same_frames(
        lens in proptest::collection::vec(0u32..300, 1..20),
        split in 0usize..4000,
    ) {
        let mut wire = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            wire.extend_from_slice(&header(i, len, i as u32, 0, i as u64, 0).encode());
            wire.extend((0..len).map(|j| (j as usize + i) as u8));
        }
        let split = split.min(wire.len());
        // Feed the first part, then everything: frames come out whole and in order.
        let mut d = Decoder::new(300);
        let mut at = 0;
        let mut seen = 0;
        for end in [split, wire.len()] {
            while let Decoded::Frame { header, payload } =
                d.decode(&wire[at..end]).expect("valid stream")
            {
                prop_assert_eq!(header.tag, seen as u64);
                prop_assert_eq!(payload.len(), lens[seen] as usize);
                prop_assert!(payload.iter().enumerate().all(|(j, &b)| b == (j + seen) as u8));
                at += HEADER_LEN + payload.len();
                seen += 1;
            }
        }
        prop_assert_eq!(seen, lens.len());
        prop_assert_eq!(at, wire.len());
    }
}

#[test]
fn unknown_kind_flags_and_sequence_are_errors() {
    let mut b = header(0, 0, 0, 0, 0, 0).encode();
    b[4] = 0;
    assert_eq!(Header::decode(&b, 10), Err(FrameError::UnknownKind(0)));
    b[4] = 200;
    assert_eq!(Header::decode(&b, 10), Err(FrameError::UnknownKind(200)));
    let mut b = header(0, 0, 0, 0, 0, 0).encode();
    b[5] = 0x80;
    assert_eq!(Header::decode(&b, 10), Err(FrameError::UnknownFlags(0x80)));
    let b = header(0, 0, 5, 0, 0, 0).encode();
    assert_eq!(
        Decoder::new(10).decode(&b),
        Err(FrameError::OutOfSequence {
            got: 5,
            expected: 0
        })
    );
}
