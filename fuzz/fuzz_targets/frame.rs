//! The frame decoder of the TCP and shared-memory methods, fed a peer's byte stream.
//!
//! Input: byte 0 sets the largest payload accepted (`16 * byte`), byte 1 the size of the
//! pieces the stream arrives in; the rest is the stream. Checks: nothing panics; a decoded
//! header encodes back to its bytes and respects the maximum; the stream decodes to the same
//! frames and the same error whether it arrives whole, in pieces, or header and payload apart
//! (as the TCP endpoint reads it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use viaduct_fallback::frame::{Decoded, Decoder, FrameError, HEADER_LEN, Header};

type Outcome = (Vec<(Header, Vec<u8>)>, Option<FrameError>);

/// Decodes `input` with a [`Decoder`], appending `step` bytes at a time.
fn stream(input: &[u8], max_len: u32, step: usize) -> Outcome {
    let mut d = Decoder::new(max_len);
    let mut buf = Vec::new();
    let mut fed = 0;
    let mut frames = Vec::new();
    loop {
        match d.decode(&buf) {
            Ok(Decoded::Frame { header, payload }) => {
                assert_eq!(payload.len(), header.len as usize);
                assert!(header.len <= max_len);
                frames.push((header, payload.to_vec()));
                buf.drain(..HEADER_LEN + header.len as usize);
            }
            Ok(Decoded::NeedHeader { need }) | Ok(Decoded::NeedPayload { need, .. }) => {
                assert!(need > 0 && need <= HEADER_LEN + max_len as usize);
                if fed == input.len() {
                    return (frames, None);
                }
                let n = step.min(input.len() - fed);
                buf.extend_from_slice(&input[fed..fed + n]);
                fed += n;
            }
            Err(e) => return (frames, Some(e)),
        }
    }
}

/// Decodes `input` as the TCP endpoint does: header with [`Header::decode`] and
/// [`Decoder::accept`], then the payload.
fn apart(input: &[u8], max_len: u32) -> Outcome {
    let mut d = Decoder::new(max_len);
    let mut at = 0;
    let mut frames = Vec::new();
    while input.len() - at >= HEADER_LEN {
        let header = match Header::decode(&input[at..at + HEADER_LEN], max_len) {
            Ok(h) => h,
            Err(e) => return (frames, Some(e)),
        };
        if let Err(e) = d.accept(&header) {
            return (frames, Some(e));
        }
        let start = at + HEADER_LEN;
        let Some(payload) = input.get(start..start + header.len as usize) else {
            break;
        };
        frames.push((header, payload.to_vec()));
        at = start + header.len as usize;
    }
    (frames, None)
}

fuzz_target!(|data: &[u8]| {
    let [max, step, input @ ..] = data else {
        return;
    };
    let max_len = u32::from(*max) * 16;
    if let Ok(h) = Header::decode(input, max_len) {
        assert_eq!(h.encode()[..], input[..HEADER_LEN]);
        assert!(h.len <= max_len);
    }
    let whole = stream(input, max_len, input.len().max(1));
    assert_eq!(whole, stream(input, max_len, usize::from(*step).max(1)));
    let (frames, err) = apart(input, max_len);
    // Header-then-payload reading sees the frames the whole-buffer decoder sees; it reports
    // a bad header even when that frame's payload has not fully arrived, which the whole
    // decoder treats the same way (it checks the header first).
    assert_eq!(whole.0, frames);
    assert_eq!(whole.1, err);
});
