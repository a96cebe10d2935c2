//! Every rank exchanges numbered messages with every other rank, round after round, for a
//! while, checking that each message from each peer arrives once and in order; for fault
//! tests across nodes (a link taken down, a node's ranks killed).
//!
//! ```text
//! EXCHANGE_SECONDS=10 viaduct launch -n 4 -- target/debug/examples/exchange
//! ```
//!
//! In each round a rank posts one receive from every peer and sends every peer one message,
//! `sender (u32 LE) | round (u64 LE) | time up (u8)`, tagged with the round's low bits, then waits for all of
//! them. A message from peer P must be P's and carry the round this rank expects of P next
//! (any other is a loss, a duplicate or a reordering, and fails the run). Rounds continue until
//! `EXCHANGE_SECONDS` (default 10) have passed, with `EXCHANGE_PAUSE_MS` (default 10) between
//! rounds, then every rank prints
//!
//! ```text
//! exchange: rank R of S ok, N rounds, every message once and in order
//! ```
//!
//! When requests fail (a peer declared failed after `VIADUCT_PEER_TIMEOUT`), the rank goes
//! on with the peers left until `VIADUCT_PEER_TIMEOUT` + 2 s have passed since its first loss
//! (the ranks of a node that goes do not all fail in the same round), then prints every peer
//! whose requests failed and why, and how long after the last round that completed the first
//! of them failed:
//!
//! ```text
//! exchange: rank R: lost ranks 2,3 after 5.3 s: rank 2: ...; rank 3: ...
//! ```
//!
//! and exits 1. No wait is unbounded: one round may take at most `EXCHANGE_ROUND_LIMIT`
//! seconds (default 60).

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};

/// A message: sender, round, and whether the sender's time is up.
const MSG: usize = 4 + 8 + 1;

/// The error's text: the agent's errors carry their whole cause chain in it.
fn error_chain(e: &dyn std::error::Error) -> String {
    e.to_string()
}

fn env_f64(name: &str, default: f64) -> Result<f64, String> {
    match std::env::var(name) {
        Err(_) => Ok(default),
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| format!("{name}={v:?} is not a non-negative number")),
    }
}

fn run() -> Result<String, String> {
    let seconds = env_f64("EXCHANGE_SECONDS", 10.0)?;
    let pause = Duration::from_secs_f64(env_f64("EXCHANGE_PAUSE_MS", 10.0)? / 1000.0);
    let limit = Duration::from_secs_f64(env_f64("EXCHANGE_ROUND_LIMIT", 60.0)?);
    let agent = Agent::init().map_err(|e| error_chain(&e))?;
    let (me, n) = (agent.rank(), agent.size());
    let mut peers: Vec<u32> = (0..n).filter(|p| *p != me).collect();
    // After the first loss, rounds go on with the peers left for this long, so that every
    // peer that failed with it (a node's ranks do not all fail in the same round) is named.
    let grace = agent.config().peer_timeout + Duration::from_secs(2);
    // Every failed peer with its first reason; when the first failed, and after how long
    // since the last round that completed.
    let mut lost_all: BTreeMap<u32, String> = BTreeMap::new();
    let mut first_loss: Option<(Instant, f64)> = None;
    let start = Instant::now();
    let mut last_done = Instant::now();
    let mut round: u64 = 0;
    let mut done = false;
    while !done {
        // Each message says whether its sender's time is up; every rank sees every flag of a
        // round, so all stop after the same round.
        let time_up = start.elapsed().as_secs_f64() >= seconds
            || first_loss.is_some_and(|(t, _)| t.elapsed() >= grace);
        done = time_up;
        let tag = (round & 0xffff) as u32;
        let mut recvs = Vec::new();
        for &p in &peers {
            let (req, buf) = agent
                .irecv(MSG, Source::Rank(p), TagMatch::Tag(tag))
                .map_err(|e| {
                    format!("round {round}: receive from rank {p}: {}", error_chain(&e))
                })?;
            recvs.push((p, req, buf));
        }
        let mut sends = Vec::new();
        for &p in &peers {
            let mut msg = me.to_le_bytes().to_vec();
            msg.extend_from_slice(&round.to_le_bytes());
            msg.push(u8::from(time_up));
            let req = agent
                .isend(p, tag, &msg)
                .map_err(|e| format!("round {round}: send to rank {p}: {}", error_chain(&e)))?;
            sends.push((p, req));
        }
        let deadline = Instant::now() + limit;
        // Every failed peer with its first reason.
        let mut lost: BTreeMap<u32, String> = BTreeMap::new();
        for (p, mut req, buf) in recvs {
            let left = deadline.saturating_duration_since(Instant::now());
            match req.wait_timeout(left) {
                Ok(Some(_)) => {
                    let got = buf.take();
                    let want: Vec<u8> = p
                        .to_le_bytes()
                        .into_iter()
                        .chain(round.to_le_bytes())
                        .collect();
                    if got.len() != MSG || got[..MSG - 1] != want[..] || got[MSG - 1] > 1 {
                        return Err(format!(
                            "round {round}: from rank {p} got {got:02x?}, expected {want:02x?} and a flag (lost, repeated or out of order)"
                        ));
                    }
                    done |= got[MSG - 1] == 1;
                }
                Ok(None) => {
                    return Err(format!(
                        "round {round}: no message from rank {p} within {limit:?}"
                    ));
                }
                Err(e) => {
                    lost.entry(p).or_insert_with(|| error_chain(&e));
                }
            }
        }
        for (p, mut req) in sends {
            let left = deadline.saturating_duration_since(Instant::now());
            match req.wait_timeout(left) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(format!(
                        "round {round}: the send to rank {p} did not leave within {limit:?}"
                    ));
                }
                Err(e) => {
                    lost.entry(p).or_insert_with(|| error_chain(&e));
                }
            }
        }
        if !lost.is_empty() {
            first_loss.get_or_insert((Instant::now(), last_done.elapsed().as_secs_f64()));
            peers.retain(|p| !lost.contains_key(p));
            lost_all.extend(lost);
            if peers.is_empty() {
                break;
            }
        }
        last_done = Instant::now();
        round += 1;
        std::thread::sleep(pause);
    }
    if let Some((_, after)) = first_loss {
        let ranks: Vec<String> = lost_all.keys().map(|p| p.to_string()).collect();
        let why: Vec<String> = lost_all
            .iter()
            .map(|(p, e)| format!("rank {p}: {e}"))
            .collect();
        return Err(format!(
            "lost ranks {} after {after:.1} s: {}",
            ranks.join(","),
            why.join("; ")
        ));
    }
    agent.finalize().map_err(|e| error_chain(&e))?;
    Ok(format!(
        "exchange: rank {me} of {n} ok, {round} rounds, every message once and in order"
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
            let rank = std::env::var("PMI_RANK")
                .or_else(|_| std::env::var("SLURM_PROCID"))
                .unwrap_or_else(|_| "?".into());
            // One write of the whole line: the ranks of a job end at once, and their lines must
            // not interleave in the launcher's output (stderr is unbuffered: `eprintln!` may
            // write a line in pieces).
            let line = format!("exchange: rank {rank}: {e}\n");
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            ExitCode::FAILURE
        }
    }
}
