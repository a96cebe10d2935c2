//! `viaduct bench latency --against-raw`: the raw method's ping-pong and the agent's between
//! the same two launched ranks, over shm and tcp; repeated runs finish (a send left queued in a
//! method while the other variant runs would stop a run).

// The helpers that build examples are not used here.
#[allow(dead_code)]
mod common;
mod paired;

use std::process::Command;
use std::time::Duration;

use common::run_limited;

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn interleaved_runs_report_both_ping_pongs_and_their_ratio() {
    for transport in ["shm", "tcp"] {
        for _ in 0..4 {
            let lines = paired::run(transport, "8,4096", "2100", LIMIT);
            paired::check(&lines, transport, &[8, 4096]);
        }
    }
}

#[test]
fn against_raw_is_refused_for_bandwidth_with_the_reason() {
    let run = run_limited(
        Command::new(env!("CARGO_BIN_EXE_viaduct")).args([
            "bench",
            "bandwidth",
            "--transport",
            "shm",
            "--against-raw",
        ]),
        LIMIT,
    );
    assert_ne!(run.code, Some(0));
    assert!(
        run.stderr.contains("--against-raw is for the latency test"),
        "{}",
        run.stderr
    );
}
