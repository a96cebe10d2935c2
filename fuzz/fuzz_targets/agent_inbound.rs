//! The agent's handling of inbound messages (`EAGER`, `EAGER_PACKED`, `RTS`, `CTS`, `DATA`,
//! `STREAM`, `XFER`, `RTS_READ`, `FIN`), as a broken or hostile peer could send them.
//!
//! Input: a list of operations. Each starts with a byte `op`:
//! - `op % 8 == 0`: post a receive (context, source, tag, capacity from the next bytes);
//! - `op % 8 == 1`: start a rendezvous send to peer `op >> 6` waiting for its `CTS` (length
//!   from 2 bytes, pieces of `16 *` the next byte);
//! - otherwise: a message from peer `op >> 6`, of kind `KINDS[next byte % 10]` (or the byte
//!   itself when it is >= 0xf0), id (1 byte, or 8 when the kind byte's bit 4 is set), a 2-byte
//!   length and that many payload bytes.
//!
//! Checks: nothing panics; errors are returned for the VC to fail; no receive buffer takes
//! more than its capacity.
#![no_main]

use libfuzzer_sys::fuzz_target;
use viaduct_agent::fuzzing::{Inbound, KINDS, method_tag};

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn take(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    fn u16(&mut self) -> u16 {
        let b = self.take(2);
        b.iter().fold(0, |a, &x| a << 8 | u16::from(x))
    }
    fn u64(&mut self, n: usize) -> u64 {
        self.take(n).iter().fold(0, |a, &x| a << 8 | u64::from(x))
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Bytes(data);
    let mut agent = Inbound::new();
    while let Some(op) = input.u8() {
        let peer = u32::from(op >> 6);
        match op % 8 {
            0 => {
                let context = u32::from(input.u8().unwrap_or(0) % 4);
                let source = input.u8().unwrap_or(0);
                let tag = input.u8().unwrap_or(0);
                let capacity = usize::from(input.u16());
                agent.post_recv(
                    context,
                    (source < 4).then_some(u32::from(source)),
                    (tag < 0x80).then_some(u32::from(tag)),
                    capacity,
                );
            }
            1 => {
                let len = usize::from(input.u16());
                // Pieces of 16 to 4080 bytes: few enough to keep runs fast.
                let chunk = 16 * usize::from(input.u8().unwrap_or(1).max(1));
                agent.rendezvous_send(peer, len, chunk);
            }
            _ => {
                let k = input.u8().unwrap_or(0);
                let kind = if k >= 0xf0 {
                    k
                } else {
                    KINDS[usize::from(k) % KINDS.len()]
                };
                let id = input.u64(if k & 0x10 != 0 { 8 } else { 1 });
                let len = usize::from(input.u16());
                let payload = input.take(len).to_vec();
                // An error fails the peer's VC; the fuzzer goes on to see that the state
                // stays sound for the other peers.
                let _ = agent.message(peer, method_tag(kind, id), &payload);
            }
        }
        agent.check();
    }
    agent.finish();
});
