//! Tagged ping-pong read in place, between ranks 0 and 1 of a job started by
//! `viaduct launch -n 2 -- pingpong_in_place` (or MPICH's `mpiexec -n 2 pingpong_in_place`).
//!
//! Rank 0 sends messages from 0 bytes up to the eager limit; rank 1 receives each with
//! `Agent::recv_in_place`, which shows the bytes where the method put them (the shared-memory
//! ring, the TCP receive buffer, the registered verbs receive buffer), and replies straight from that view; rank 0 reads the reply
//! in place too and checks every byte. Each rank prints one line:
//!
//! ```text
//! pingpong_in_place: rank R of N ok: K round trips over M, I of them read in place
//! ```
//!
//! and exits 0; any failure prints the error and exits 1. `VIADUCT_TRANSPORT` picks the
//! methods.

use std::process::ExitCode;
use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};

const WAIT: Duration = Duration::from_secs(30);

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

fn run() -> Result<String, Box<dyn std::error::Error>> {
    let agent = Agent::init()?;
    let (me, n) = (agent.rank(), agent.size());
    if n < 2 {
        return Err("pingpong_in_place needs two ranks".into());
    }
    let (mut trips, mut in_place) = (0u32, 0u32);
    let mut method = "none";
    if me < 2 {
        let peer = 1 - me;
        method = agent.method_of(peer).unwrap_or("none");
        let eager = agent.config().eager_limit;
        let mut sizes = vec![0usize];
        let mut len = 1;
        while len < eager {
            sizes.push(len);
            len *= 4;
        }
        sizes.push(eager);
        for (i, len) in sizes.into_iter().enumerate() {
            let tag = i as u32;
            let data = pattern(len, tag);
            if me == 0 {
                agent.send(peer, tag, &data)?;
                let reply = agent.recv_in_place(Source::Rank(peer), TagMatch::Tag(tag), WAIT)?;
                if reply[..] != data[..] {
                    return Err(format!("{len}-byte reply is not byte-exact").into());
                }
                in_place += u32::from(reply.is_in_place());
            } else {
                let ping = agent.recv_in_place(Source::Rank(peer), TagMatch::Any, WAIT)?;
                let st = ping.status();
                if st.tag() != Some(tag) || st.count() != len as u64 || ping[..] != data[..] {
                    return Err(format!("unexpected message {st:?} for {len} bytes").into());
                }
                in_place += u32::from(ping.is_in_place());
                // The reply leaves straight from the method's memory; dropping the view
                // afterwards hands that memory back.
                agent.send(peer, tag, &ping)?;
            }
            trips += 1;
        }
    }
    agent.finalize()?;
    Ok(format!(
        "pingpong_in_place: rank {me} of {n} ok: {trips} round trips over {method}, \
         {in_place} of them read in place"
    ))
}

fn main() -> ExitCode {
    viaduct::agent::log::install_subscriber();
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pingpong_in_place: error: {e}");
            ExitCode::FAILURE
        }
    }
}
