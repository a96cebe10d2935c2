//! The test bodies shared by every method. Each runs on every rank of a job with that rank's
//! agent and the method's [`Scale`](super::scale::Scale). Two-rank bodies also run on one rank
//! where that makes sense: rank 0 then plays both sides and talks to itself, posting its sends
//! without waiting, receiving, then waiting for the sends.

pub mod matching;
pub mod order;
pub mod p2p;
pub mod stream;
pub mod unexpected;

use viaduct_agent::agent::Agent;
use viaduct_agent::request::{Request, RequestError, wait_all};

/// Length of the block [`pattern`] repeats: prime, so a buffer shifted by a power of two (a
/// page, a chunk, a slot) shows.
const BLOCK: usize = 65_521;

/// `len` bytes that differ with `seed` and with the position, so a shifted, mixed-up or
/// partly stale buffer shows: a block of [`BLOCK`] bytes repeated (cheap even for 64 MiB in
/// an unoptimized build), each copy starting with its own index.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let block: Vec<u8> = (0..BLOCK.min(len))
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect();
    let mut out = Vec::with_capacity(len);
    for k in 0..len.div_ceil(BLOCK) {
        let start = out.len();
        out.extend_from_slice(&block[..(len - start).min(BLOCK)]);
        let mark = (k as u32 ^ seed).to_le_bytes();
        let n = mark.len().min(out.len() - start);
        out[start..start + n].copy_from_slice(&mark[..n]);
    }
    out
}

/// Asserts that `e` is a truncation of a `len`-byte message into `capacity` bytes.
pub fn assert_truncated(e: &RequestError, len: u64, capacity: u64) {
    assert!(e.is_truncated(), "expected a truncation, got {e:?}");
    let sizes =
        format!("message of {len} bytes truncated to the receive buffer of {capacity} bytes");
    assert!(e.to_string().contains(&sizes), "expected {sizes:?} in {e}");
}

/// Who does what in a one-way body of two ranks: rank 0 sends, rank 1 receives; on one rank,
/// rank 0 does both.
#[derive(Clone, Copy, Debug)]
pub struct Roles {
    /// This rank sends.
    pub sender: bool,
    /// This rank receives.
    pub receiver: bool,
    /// The other side: the receiver for the sender, the sender for the receiver (this rank
    /// itself on one rank).
    pub peer: u32,
    /// The job has two ranks (so the sides can only meet through messages).
    pub two: bool,
}

/// The roles of this rank in a job of one or two ranks.
pub fn roles(agent: &Agent) -> Roles {
    let (me, n) = (agent.rank(), agent.size());
    assert!(n <= 2, "a one-way body runs on one or two ranks, not {n}");
    Roles {
        sender: me == 0,
        receiver: n == 1 || me == 1,
        peer: if n == 1 { 0 } else { 1 - me },
        two: n == 2,
    }
}

/// Runs `send` (given the destination; it must not wait for the receiver) on the sender and
/// `receive` (given the source) on the receiver, then waits for the sends.
pub fn one_way(agent: &Agent, send: impl FnOnce(u32) -> Vec<Request>, receive: impl FnOnce(u32)) {
    let r = roles(agent);
    let mut sends = if r.sender { send(r.peer) } else { Vec::new() };
    if r.receiver {
        receive(r.peer);
    }
    wait_all(&mut sends, None).unwrap();
}
