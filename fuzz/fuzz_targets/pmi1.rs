//! The PMI-1 line parser and line reader, fed what a PMI server (hydra, Slurm, `viaduct
//! launch`) or a rank could send.
//!
//! Input: byte 0 sets the reader's buffer size (1 to 256 bytes, so lines arrive cut at every
//! place); the rest is the stream. Checks: nothing panics; lines are bounded; a parsed
//! message that can be encoded parses back to itself.
#![no_main]

use std::io::{BufReader, Cursor};

use libfuzzer_sys::fuzz_target;
use viaduct_pmi::wire::MAX_MESSAGE_LEN;
use viaduct_pmi::wire1::{LineRead, encode_line, parse_line, read_line};

fn check_line(line: &[u8]) {
    let Ok(msg) = parse_line(line) else {
        return;
    };
    if let Ok(encoded) = encode_line(&msg) {
        assert!(encoded.ends_with(b"\n"));
        assert_eq!(
            parse_line(&encoded),
            Ok(msg),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cap, stream)) = data.split_first() else {
        return;
    };
    check_line(stream);
    let mut reader = BufReader::with_capacity(usize::from(cap) + 1, Cursor::new(stream));
    let mut partial = Vec::new();
    // Every successful read consumes at least one byte, so this ends.
    for _ in 0..=stream.len() {
        match read_line(&mut reader, &mut partial) {
            Ok(LineRead::Line(line)) => {
                assert!(line.len() <= MAX_MESSAGE_LEN && !line.contains(&b'\n'));
                check_line(&line);
            }
            Ok(LineRead::Eof) | Err(_) => return,
        }
    }
    panic!(
        "read_line did not reach the end of a {}-byte stream",
        stream.len()
    );
});
