//! A ring over the agent's byte stream: every rank writes to rank + 1 and reads from rank - 1
//! with `next`, checking the bytes where they lie in the agent's receive memory.
//!
//! ```text
//! viaduct launch -n 3 -- target/debug/examples/ring
//! mpiexec -n 3 target/debug/examples/ring
//! ```
//!
//! # The byte stream
//!
//! Beside tagged messages, the VC to each peer carries an ordered stream of plain messages.
//! [`Agent::write`] hands a `Vec<u8>` to the method without copying it. On the other side,
//! [`Agent::next`] (or [`Agent::next_timeout`], which keeps making progress until a message is
//! there or the time is up) lends the unconsumed bytes of the oldest stream message to a
//! closure as a `&[u8]` that points into the method's own receive memory: a shared-memory ring
//! cell, an io_uring receive buffer, or the method's reassembly buffer when the message spans
//! several of them. The closure returns how many of those bytes it consumed.
//!
//! The borrow ends when the closure returns: the slice cannot outlive the call. The consumed
//! bytes are dropped from the front of the message; the rest stays where it is, and the next
//! `next` on the same peer shows it again, starting at the first unconsumed byte. Only when
//! the whole message is consumed is its memory given back to the method, to be filled by later
//! traffic; until then, tagged messages behind it on the same VC wait too. The closure runs
//! with the agent's lock held, so it must not call the agent itself.
//!
//! # What the ring checks
//!
//! In each of [`ROUNDS`] rounds, every rank writes one message to rank + 1:
//!
//! ```text
//! origin rank (u32 LE) | round (u32 LE) | payload length (u32 LE) | payload | FNV-1a of payload (u64 LE)
//! ```
//!
//! The payload is a few KiB of bytes derived from the origin and the round. The receiver
//! consumes each message from rank - 1 in two parts (half of it, then the rest), checking
//! every byte inside the closure against what the origin must have sent and hashing the
//! payload as it goes; the hash must equal the trailer. No byte is copied into a buffer of the
//! program. Each rank prints
//!
//! ```text
//! ring: rank R of S ok, B bytes passed in place
//! ```
//!
//! and exits 0; a missing, short or wrong message prints what was wrong and exits 1.

use std::process::ExitCode;
use std::time::Duration;

use viaduct_agent::agent::Agent;

/// Rounds around the ring.
const ROUNDS: u32 = 8;
/// Payload of round 0; each later round adds [`STEP`] bytes.
const BASE: usize = 3 << 10;
/// Growth of the payload per round.
const STEP: usize = 512;
/// Header: origin, round, payload length.
const HEADER: usize = 12;
/// Trailer: the payload's FNV-1a hash.
const TRAILER: usize = 8;
/// The longest wait for one message, or for a write to leave.
const LIMIT: Duration = Duration::from_secs(20);

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Payload length of `round`.
fn payload_len(round: u32) -> usize {
    BASE + STEP * round as usize
}

/// Byte `i` of the payload that `origin` sends in `round`.
fn payload_byte(origin: u32, round: u32, i: usize) -> u8 {
    let seed = origin.wrapping_mul(0x9e37_79b9) ^ round.wrapping_mul(0x85eb_ca6b);
    ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 11) as u8
}

/// One FNV-1a step.
fn fnv(hash: u64, byte: u8) -> u64 {
    (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME)
}

/// The whole message `origin` writes in `round`.
fn message(origin: u32, round: u32) -> Vec<u8> {
    let len = payload_len(round);
    let mut m = Vec::with_capacity(HEADER + len + TRAILER);
    m.extend_from_slice(&origin.to_le_bytes());
    m.extend_from_slice(&round.to_le_bytes());
    m.extend_from_slice(&(len as u32).to_le_bytes());
    let mut hash = FNV_OFFSET;
    for i in 0..len {
        let b = payload_byte(origin, round, i);
        hash = fnv(hash, b);
        m.push(b);
    }
    m.extend_from_slice(&hash.to_le_bytes());
    m
}

/// Checks one incoming message byte by byte as its parts are shown in place.
struct Check {
    origin: u32,
    round: u32,
    /// Bytes of the message checked so far.
    offset: usize,
    /// FNV-1a of the payload bytes seen so far.
    hash: u64,
    /// The trailer as received (eight bytes, gathered to compare with `hash`).
    trailer: [u8; TRAILER],
    /// The first mismatch, if any.
    error: Option<String>,
}

impl Check {
    fn new(origin: u32, round: u32) -> Self {
        Check {
            origin,
            round,
            offset: 0,
            hash: FNV_OFFSET,
            trailer: [0; TRAILER],
            error: None,
        }
    }

    /// Length of the whole message.
    fn total(&self) -> usize {
        HEADER + payload_len(self.round) + TRAILER
    }

    /// Checks `part`, the bytes that follow those already checked, where they lie.
    fn feed(&mut self, part: &[u8]) {
        let len = payload_len(self.round);
        let mut header = [0u8; HEADER];
        header[..4].copy_from_slice(&self.origin.to_le_bytes());
        header[4..8].copy_from_slice(&self.round.to_le_bytes());
        header[8..].copy_from_slice(&(len as u32).to_le_bytes());
        for &b in part {
            let at = self.offset;
            if at >= self.total() {
                self.fail(format!("message longer than {} bytes", self.total()));
                return;
            }
            if at < HEADER {
                if b != header[at] {
                    self.fail(format!(
                        "header byte {at} is {b:#04x}, expected {:#04x}",
                        header[at]
                    ));
                    return;
                }
            } else if at < HEADER + len {
                let want = payload_byte(self.origin, self.round, at - HEADER);
                if b != want {
                    self.fail(format!(
                        "payload byte {} is {b:#04x}, expected {want:#04x}",
                        at - HEADER
                    ));
                    return;
                }
                self.hash = fnv(self.hash, b);
            } else {
                self.trailer[at - HEADER - len] = b;
            }
            self.offset += 1;
        }
    }

    fn fail(&mut self, what: String) {
        if self.error.is_none() {
            self.error = Some(what);
        }
    }

    /// The verdict once the message is consumed whole.
    fn finish(self) -> Result<(), String> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.offset != self.total() {
            return Err(format!(
                "message has {} bytes, expected {}",
                self.offset,
                self.total()
            ));
        }
        let sent = u64::from_le_bytes(self.trailer);
        if sent != self.hash {
            return Err(format!(
                "payload hash {:#018x} does not match the trailer {sent:#018x}",
                self.hash
            ));
        }
        Ok(())
    }
}

/// Receives the message of `round` from `prev` in two parts, checking it in place; returns the
/// bytes consumed.
fn receive(agent: &Agent, prev: u32, round: u32) -> Result<usize, String> {
    let mut check = Check::new(prev, round);
    let total = check.total();
    let mut consumed = 0usize;
    let mut parts = 0u32;
    while consumed < total {
        parts += 1;
        // First the front half, then whatever is left; `shown` is the unconsumed rest of the
        // message, still in the method's receive memory.
        let got = agent
            .next_timeout(prev, LIMIT, |shown: &[u8]| {
                let take = if consumed == 0 {
                    shown.len() / 2
                } else {
                    shown.len()
                };
                check.feed(&shown[..take]);
                take
            })
            .map_err(|e| e.to_string())?;
        match got {
            None => {
                return Err(format!(
                    "no stream message from rank {prev} within {LIMIT:?} (round {round}, {consumed} of {total} bytes consumed)"
                ));
            }
            Some(0) if consumed > 0 => {
                return Err(format!(
                    "stream message from rank {prev} ended after {consumed} of {total} bytes (round {round})"
                ));
            }
            Some(n) => consumed += n,
        }
        if parts > 2 {
            return Err(format!(
                "round {round}: the message from rank {prev} was not consumed in two parts"
            ));
        }
        if let Some(e) = &check.error {
            return Err(format!("round {round}, from rank {prev}: {e}"));
        }
    }
    check
        .finish()
        .map_err(|e| format!("round {round}, from rank {prev}: {e}"))?;
    Ok(consumed)
}

fn run() -> Result<String, String> {
    let agent = Agent::init().map_err(|e| e.to_string())?;
    let (me, n) = (agent.rank(), agent.size());
    if n < 2 {
        return Err(format!(
            "a ring needs at least 2 ranks, the job has {n} (a rank has no byte stream to itself)"
        ));
    }
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    let mut bytes = 0usize;
    for round in 0..ROUNDS {
        let mut sent = agent
            .write(next, message(me, round))
            .map_err(|e| e.to_string())?;
        bytes += receive(&agent, prev, round)?;
        match sent.wait_timeout(LIMIT) {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(format!(
                    "round {round}: the write to rank {next} did not leave within {LIMIT:?}"
                ));
            }
            Err(e) => {
                return Err(format!("round {round}: write to rank {next}: {e}"));
            }
        }
    }
    agent.finalize().map_err(|e| e.to_string())?;
    Ok(format!(
        "ring: rank {me} of {n} ok, {bytes} bytes passed in place"
    ))
}

fn main() -> ExitCode {
    // The library's warnings on stderr, filtered by VIADUCT_LOG (default: warnings).
    viaduct::agent::log::install_subscriber();
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ring: error: {e}");
            ExitCode::FAILURE
        }
    }
}
