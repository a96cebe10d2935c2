//! Tagged ping-pong and an all-to-all exchange through the viaduct agent, between the ranks of
//! a job started by `viaduct launch -n N -- pingpong` or MPICH's `mpiexec -n N pingpong`.
//!
//! Pairs of ranks (0 with 1, 2 with 3, ...) play ping-pong with messages from 0 bytes up to
//! `--max BYTES` (default 4 MiB: eager and rendezvous), checking every byte; then every rank
//! sends to every other and receives with any-source. Each rank prints one line:
//!
//! ```text
//! pingpong: rank R of N ok: peer P over M, K round trips, 8-byte round trip X us
//! ```
//!
//! and exits 0; any failure prints the error and exits 1. `VIADUCT_TRANSPORT` picks the methods.

use std::process::ExitCode;
use std::time::Instant;

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

fn parse_max() -> Result<usize, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(4 << 20),
        [flag, v] if flag == "--max" => v.parse().map_err(|_| format!("--max: bad number {v:?}")),
        other => Err(format!("usage: pingpong [--max BYTES], got {other:?}")),
    }
}

fn run() -> Result<String, Box<dyn std::error::Error>> {
    let max = parse_max()?;
    let agent = Agent::init()?;
    let (me, n) = (agent.rank(), agent.size());
    let peer = me ^ 1;
    let mut trips = 0u32;
    let mut latency = None;
    let mut method = "none";
    if peer < n {
        method = agent.method_of(peer).unwrap_or("none");
        let mut len = 0usize;
        let mut sizes = Vec::new();
        while len <= max {
            sizes.push(len);
            len = if len == 0 { 1 } else { len * 4 };
        }
        for (i, len) in sizes.into_iter().enumerate() {
            let data = pattern(len, i as u32);
            let mut buf = vec![0u8; len];
            if me < peer {
                agent.send(peer, i as u32, &data)?;
                agent.recv(&mut buf, Source::Rank(peer), TagMatch::Tag(i as u32))?;
            } else {
                let st = agent.recv(&mut buf, Source::Rank(peer), TagMatch::Any)?;
                if st.tag() != Some(i as u32) || st.count() != len as u64 {
                    return Err(format!("unexpected status {st:?} for {len} bytes").into());
                }
                agent.send(peer, i as u32, &buf)?;
            }
            if buf != data {
                return Err(format!("{len}-byte message is not byte-exact").into());
            }
            trips += 1;
        }
        const ROUNDS: u32 = 1000;
        let mut b = [0u8; 8];
        let start = Instant::now();
        for _ in 0..ROUNDS {
            if me < peer {
                agent.send(peer, 1000, &b)?;
                agent.recv(&mut b, Source::Rank(peer), TagMatch::Tag(1000))?;
            } else {
                agent.recv(&mut b, Source::Rank(peer), TagMatch::Tag(1000))?;
                agent.send(peer, 1000, &b)?;
            }
        }
        trips += ROUNDS;
        latency = Some(start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUNDS));
    }
    // All-to-all with any-source receives.
    let mut sends = Vec::new();
    for p in (0..n).filter(|p| *p != me) {
        sends.push(agent.isend(p, 2000, &me.to_le_bytes())?);
    }
    let mut seen = vec![false; n as usize];
    for _ in 1..n {
        let mut b = [0u8; 4];
        let st = agent.recv(&mut b, Source::Any, TagMatch::Tag(2000))?;
        let from = u32::from_le_bytes(b);
        if st.source() != Some(from) || std::mem::replace(&mut seen[from as usize], true) {
            return Err(format!("all-to-all: bad or repeated message from {from}").into());
        }
    }
    for mut s in sends {
        s.wait()?;
    }
    agent.finalize()?;
    let lat = latency.map_or_else(|| "n/a".to_owned(), |l| format!("{l:.2} us"));
    Ok(format!(
        "pingpong: rank {me} of {n} ok: peer {peer} over {method}, {trips} round trips, 8-byte round trip {lat}"
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
            // The text of an agent error holds its whole cause chain.
            eprintln!("pingpong: error: {e}");
            ExitCode::FAILURE
        }
    }
}
