//! `viaduct bench latency --against-raw`: the raw method's ping-pong and the agent's between
//! the same two launched ranks, over shm and tcp; repeated runs finish (a send left queued in a
//! method while the other variant runs would stop a run).

// The helpers that build examples are not used here.
#[allow(dead_code)]
mod common;

use std::process::Command;
use std::time::Duration;

use common::run_limited;

const LIMIT: Duration = Duration::from_secs(60);

fn paired(transport: &str) -> Vec<serde_json::Value> {
    let run = run_limited(
        Command::new(env!("CARGO_BIN_EXE_viaduct")).args([
            "bench",
            "latency",
            "--transport",
            transport,
            "--against-raw",
            "--sizes",
            "8,4096",
            "--iters",
            "2100",
            "--json",
        ]),
        LIMIT,
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    run.stdout
        .lines()
        .filter_map(|l| l.find('{').map(|i| &l[i..]))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .filter(|v: &serde_json::Value| v["bench"] == "agent-vs-raw")
        .collect()
}

#[test]
fn interleaved_runs_report_both_ping_pongs_and_their_ratio() {
    for transport in ["shm", "tcp"] {
        for _ in 0..4 {
            let lines = paired(transport);
            let sizes: Vec<u64> = lines.iter().map(|v| v["size"].as_u64().unwrap()).collect();
            assert_eq!(sizes, [8, 4096], "{transport}: {lines:?}");
            for v in &lines {
                assert_eq!(v["transport"], transport);
                let (raw, agent) = (
                    v["raw_us"].as_f64().unwrap(),
                    v["agent_us"].as_f64().unwrap(),
                );
                assert!(raw > 0.0 && agent > 0.0, "{v}");
                let ratio = v["ratio"].as_f64().unwrap();
                assert!((ratio - agent / raw).abs() < 0.01, "{v}");
                assert!(v["round_ratio"].as_f64().unwrap() > 0.0, "{v}");
            }
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
