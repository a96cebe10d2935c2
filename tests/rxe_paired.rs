//! `viaduct bench latency --transport verbs --against-raw`: the verbs method's message endpoint
//! and the agent interleaved between two launched ranks on an RDMA device. The test suite runs
//! this in the soft-RoCE VM (`scripts/test`, `scripts/rxe-vm`); without a device it prints that
//! it was skipped, unless `VIADUCT_REQUIRE_RDMA=1` (set inside the VM) makes that a failure.

#![cfg(feature = "rdma")]

// The helpers that build examples are not used here.
#[allow(dead_code)]
mod common;

use std::process::Command;
use std::time::Duration;

use common::run_limited;

fn have_rdma() -> bool {
    let names = viaduct_verbs::device::names().unwrap_or_default();
    if names.is_empty() {
        assert!(
            std::env::var("VIADUCT_REQUIRE_RDMA").as_deref() != Ok("1"),
            "VIADUCT_REQUIRE_RDMA=1 but this machine has no RDMA device"
        );
        println!("SKIPPED: no RDMA device (run through scripts/rxe-vm)");
        return false;
    }
    true
}

#[test]
fn interleaved_run_over_verbs_reports_both_ping_pongs() {
    if !have_rdma() {
        return;
    }
    let run = run_limited(
        Command::new(env!("CARGO_BIN_EXE_viaduct")).args([
            "bench",
            "latency",
            "--transport",
            "verbs",
            "--against-raw",
            "--sizes",
            "8,4096",
            "--iters",
            "1050",
            "--json",
        ]),
        Duration::from_secs(300),
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    let lines: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .filter_map(|l| l.find('{').map(|i| &l[i..]))
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["bench"] == "agent-vs-raw")
        .collect();
    let sizes: Vec<u64> = lines.iter().map(|v| v["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, [8, 4096], "{}", run.stdout);
    for v in &lines {
        assert_eq!(v["transport"], "verbs");
        let (raw, agent) = (
            v["raw_us"].as_f64().unwrap(),
            v["agent_us"].as_f64().unwrap(),
        );
        assert!(raw > 0.0 && agent > 0.0, "{v}");
        assert!(
            (v["ratio"].as_f64().unwrap() - agent / raw).abs() < 0.01,
            "{v}"
        );
    }
}
