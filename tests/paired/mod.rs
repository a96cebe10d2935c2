//! What the tests of `viaduct bench latency --against-raw` share: running it, and checking
//! what it prints.

use std::process::Command;
use std::time::Duration;

use crate::common::run_limited;

/// Runs the interleaved benchmark over `transport` and returns its `agent-vs-raw` lines.
pub fn run(transport: &str, sizes: &str, iters: &str, limit: Duration) -> Vec<serde_json::Value> {
    let run = run_limited(
        Command::new(env!("CARGO_BIN_EXE_viaduct")).args([
            "bench",
            "latency",
            "--transport",
            transport,
            "--against-raw",
            "--sizes",
            sizes,
            "--iters",
            iters,
            "--json",
        ]),
        limit,
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    run.stdout
        .lines()
        .filter_map(|l| l.find('{').map(|i| &l[i..]))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .filter(|v: &serde_json::Value| v["bench"] == "agent-vs-raw")
        .collect()
}

/// One line per size in `sizes`, in order, over `transport`: both figures positive, the ratio
/// theirs, the per-round ratio positive.
pub fn check(lines: &[serde_json::Value], transport: &str, sizes: &[u64]) {
    let got: Vec<u64> = lines.iter().map(|v| v["size"].as_u64().unwrap()).collect();
    assert_eq!(got, sizes, "{transport}: {lines:?}");
    for v in lines {
        assert_eq!(v["transport"], transport);
        let (raw, agent) = (
            v["raw_us"].as_f64().unwrap(),
            v["agent_us"].as_f64().unwrap(),
        );
        assert!(raw > 0.0 && agent > 0.0, "{v}");
        assert!(
            (v["ratio"].as_f64().unwrap() - agent / raw).abs() < 0.01,
            "{v}"
        );
        assert!(v["round_ratio"].as_f64().unwrap() > 0.0, "{v}");
    }
}
