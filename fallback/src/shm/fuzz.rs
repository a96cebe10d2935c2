//! Entry point for the fuzz targets in the repository's `fuzz/` folder (cargo feature
//! `fuzzing`): drives a ring [`Consumer`] over a data area whose bytes come from the fuzzer,
//! as a broken or hostile peer could leave them in the shared segment. Not part of the API.

use std::ptr::NonNull;

use super::ring::{Consumer, Peek, RECORD_HEADER, fuzz_stamp, record_bytes};
use super::segment::{ConsumerLine, LINE};

/// One cache line of the data area (the ring's records start on lines).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; LINE]);

/// Salt of the fuzzed ring (a peer knows the salt of its segment, so nothing is gained by
/// hiding it from the fuzzer).
const SALT: u64 = 0x5eed_0000_0000_0000;

/// Builds a ring from `input` and lets a consumer read every record it finds, checking that
/// each record it hands out lies inside the data area. Returns the number of records read.
///
/// Layout of `input`: byte 0 picks the ring size (2 to 33 lines); then one control byte per
/// line: bits 0-1 say whether the line's stamp is left as given (0, 3), made the stamp of a
/// record (1) or of padding (2) at the position the line has in lap `bit 2` of the ring; the
/// remaining bytes fill the data area (stamps included, where left as given).
///
/// # Panics
/// When the consumer hands out a record reaching past the data area (the defect looked for).
pub fn consume(input: &[u8]) -> usize {
    let Some((&size_byte, rest)) = input.split_first() else {
        return 0;
    };
    let lines = 2 + usize::from(size_byte % 32);
    let size = lines * LINE;
    let (controls, fill) = rest.split_at(rest.len().min(lines));
    let mut area = vec![Line([0; LINE]); lines];
    for (i, b) in fill.iter().take(size).enumerate() {
        area[i / LINE].0[i % LINE] = *b;
    }
    for (i, &c) in controls.iter().enumerate() {
        let pos = (i * LINE) as u64 + if c & 4 != 0 { size as u64 } else { 0 };
        let word = match c & 3 {
            1 => fuzz_stamp(pos, SALT, false),
            2 => fuzz_stamp(pos, SALT, true),
            _ => continue,
        };
        area[i].0[..8].copy_from_slice(&word.to_ne_bytes());
    }
    let control = ConsumerLine {
        tail: Default::default(),
        rendezvous_done: Default::default(),
    };
    let data = NonNull::from(&mut area[..]).cast::<u8>();
    // SAFETY: `data` points to `size` bytes owned by `area` and `control` is a local; both
    // outlive `consumer` (dropped at the end of this function) and nothing else touches them
    // meanwhile: this consumer is the ring's only user.
    let mut consumer = unsafe {
        Consumer::new(
            data,
            size,
            SALT,
            NonNull::from(&control),
            size_byte & 0x80 != 0,
        )
    };
    let start = data.as_ptr() as usize;
    let mut found = 0;
    // Each record advances the position by at least one line, so a ring of valid records is
    // read whole in `2 * lines` steps; the bound keeps a fuzz run finite whatever happens.
    for _ in 0..2 * lines {
        let _ = consumer.ready();
        match consumer.peek() {
            Peek::Record(r) => {
                let off = r.payload.as_ptr() as usize - start;
                let len = r.header.len as usize;
                assert!(
                    off >= RECORD_HEADER && off + len <= size,
                    "record at {} with {len} payload bytes at offset {off} leaves the \
                     {size}-byte data area",
                    r.pos
                );
                assert!(record_bytes(len) <= size);
                // SAFETY: checked just above to lie inside `area`, which nothing writes now.
                let payload = unsafe { std::slice::from_raw_parts(r.payload.as_ptr(), len) };
                std::hint::black_box(payload.iter().fold(0u8, |a, b| a ^ b));
                let _ = consumer.peek_at(r.end());
                consumer.release(&r);
                found += 1;
            }
            Peek::Empty | Peek::Corrupt(_) => break,
        }
    }
    found
}
