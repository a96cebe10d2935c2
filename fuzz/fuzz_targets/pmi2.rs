//! The PMI-2 record parser and reader (length prefix and `cmd=NAME;key=value;` body), fed
//! what a PMI-2 server (Slurm, hydra) could send.
//!
//! Checks: nothing panics; a length prefix beyond the limit is refused before anything is
//! allocated; a parsed body that can be encoded parses back to itself.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use viaduct_pmi::wire::MAX_MESSAGE_LEN;
use viaduct_pmi::wire2::{PREFIX_LEN, encode_record, parse_body, parse_prefix, read_record};

fn check_body(body: &[u8]) {
    let Ok(msg) = parse_body(body) else {
        return;
    };
    if let Ok(encoded) = encode_record(&msg) {
        let prefix: [u8; PREFIX_LEN] = encoded[..PREFIX_LEN].try_into().unwrap();
        assert_eq!(parse_prefix(&prefix), Ok(encoded.len() - PREFIX_LEN));
        assert_eq!(
            parse_body(&encoded[PREFIX_LEN..]),
            Ok(msg),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    check_body(data);
    if let Some(prefix) = data.first_chunk::<PREFIX_LEN>()
        && let Ok(len) = parse_prefix(prefix)
    {
        assert!(len <= MAX_MESSAGE_LEN);
    }
    let mut stream = Cursor::new(data);
    // Every record read consumes at least its prefix, so this ends.
    for _ in 0..=data.len() {
        match read_record(&mut stream) {
            Ok(Some(msg)) => {
                if let Ok(encoded) = encode_record(&msg) {
                    let again = read_record(&mut Cursor::new(&encoded));
                    assert_eq!(again.ok().flatten(), Some(msg));
                }
            }
            Ok(None) | Err(_) => return,
        }
    }
    panic!(
        "read_record did not reach the end of a {}-byte stream",
        data.len()
    );
});
