//! A small PMI exchange: every rank publishes its rank and host, fences, reads every other
//! rank's entry, checks it, and prints one line. Runs under `viaduct launch`, `mpiexec`,
//! `srun --mpi=pmi2`, or alone.
//!
//! ```text
//! viaduct launch -n 4 -- target/debug/examples/kvs_exchange
//! mpiexec -n 4 target/debug/examples/kvs_exchange
//! srun --mpi=pmi2 -n 4 target/debug/examples/kvs_exchange
//! ```
//!
//! `--leave RANK` makes that rank exit with 0 right after start-up, without taking part in the
//! exchange (the others then wait in a fence that cannot complete: a launcher must notice).
//! `--hold MS` keeps every rank connected and idle for MS milliseconds before it finalizes (to
//! watch what a launcher does meanwhile).

use std::process::ExitCode;
use std::time::Duration;

use viaduct_pmi::{Bootstrap, BootstrapError};

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

fn exchange(leave: Option<u32>, hold: Duration) -> Result<String, BootstrapError> {
    let mut boot = Bootstrap::from_env()?;
    let (rank, size) = (boot.rank(), boot.size());
    if leave == Some(rank) {
        return Ok(format!("rank {rank} of {size}: leaving early"));
    }
    let host = host();
    boot.publish("kvs-exchange", &format!("rank{rank}@{host}"))?;
    boot.fence()?;
    let mut local_checked = 0;
    for peer in 0..size {
        let value = boot.lookup("kvs-exchange", peer)?;
        let expected_prefix = format!("rank{peer}@");
        if !value.starts_with(&expected_prefix) {
            return Err(BootstrapError::Protocol {
                op: "get",
                detail: format!("rank {peer} published {value:?}, expected {expected_prefix}HOST"),
            });
        }
        if boot.is_local(peer) {
            local_checked += 1;
            // Ranks that share this node must also share its host name.
            if value != format!("rank{peer}@{host}") {
                return Err(BootstrapError::Protocol {
                    op: "get",
                    detail: format!("rank {peer} is mapped to this node but published {value:?}"),
                });
            }
        }
    }
    let protocol = boot.protocol();
    let key_prefix: String = boot.job_key().to_hex().chars().take(8).collect();
    std::thread::sleep(hold);
    boot.finalize()?;
    Ok(format!(
        "rank {rank} of {size}: checked {size} entries, {local_checked} on this node, \
         protocol {protocol:?}, job key {key_prefix}..."
    ))
}

fn main() -> ExitCode {
    // The library's warnings on stderr, filtered by VIADUCT_LOG (default: warnings).
    viaduct::agent::log::install_subscriber();
    let mut leave = None;
    let mut hold = Duration::ZERO;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (
            arg.as_str(),
            args.next().and_then(|v| v.parse::<u32>().ok()),
        ) {
            ("--leave", Some(rank)) => leave = Some(rank),
            ("--hold", Some(ms)) => hold = Duration::from_millis(ms.into()),
            _ => {
                eprintln!("usage: kvs_exchange [--leave RANK] [--hold MS]");
                return ExitCode::from(2);
            }
        }
    }
    match exchange(leave, hold) {
        Ok(line) => {
            println!("kvs_exchange: {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The error's text carries its whole cause chain.
            eprintln!("kvs_exchange: error: {e}");
            ExitCode::FAILURE
        }
    }
}
