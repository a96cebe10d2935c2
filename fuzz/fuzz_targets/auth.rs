//! The job-key handshake (`viaduct_pmi::auth`, which the agent's method connections run through
//! `handshake.rs`) against a peer sending arbitrary bytes, and the job key's hex decoding
//! (the key rank 0 publishes in the PMI key-value space).
//!
//! Input: byte 0 picks the side played by viaduct (acceptor or connector) and the sizes of
//! the reads the stream serves; the rest is what the peer sends. Checks: nothing panics;
//! a peer without the key is never accepted; a key that decodes from hex encodes back to the
//! same (lowercase) text.
#![no_main]

use std::io::{self, Read, Write};

use libfuzzer_sys::fuzz_target;
use viaduct_pmi::JobKey;
use viaduct_pmi::auth::{accept_with_log, connect};

/// A connection whose peer sends `input` (at most `step` bytes per read) and then closes.
struct Peer<'a> {
    input: &'a [u8],
    step: usize,
    sent: Vec<u8>,
}

impl Read for Peer<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = out.len().min(self.input.len()).min(self.step);
        out[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

impl Write for Peer<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.sent.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    let key = JobKey::from_bytes([0x5a; 32]);
    let mut peer = Peer {
        input,
        step: usize::from(mode >> 1).max(1),
        sent: Vec::new(),
    };
    if mode & 1 == 0 {
        let mut log = |_: &str| {};
        // The acceptor's nonce is fresh, so no fixed input can hold a valid proof.
        let got = accept_with_log(&mut peer, &key, "fuzz peer", &mut log);
        assert!(
            got.is_err(),
            "a peer without the proof was accepted: {got:?}"
        );
    } else {
        // Likewise for the connector's nonce.
        let got = connect(&mut peer, &key, 3);
        assert!(got.is_err(), "an acceptor without the proof was accepted");
    }
    if let Ok(text) = std::str::from_utf8(input)
        && let Ok(k) = JobKey::from_hex(text)
    {
        assert_eq!(
            k.to_hex(),
            text.trim().to_ascii_lowercase(),
            "a job key decoded from text that is not its encoding"
        );
    }
});
