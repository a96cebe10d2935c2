//! `viaduct bench latency --transport verbs --against-raw`: the verbs method's message endpoint
//! and the agent interleaved between two launched ranks on an RDMA device. The test suite runs
//! this in the soft-RoCE VM (`scripts/test`, `scripts/rxe-vm`); without a device it prints that
//! it was skipped, unless `VIADUCT_REQUIRE_RDMA=1` (set inside the VM) makes that a failure.

#![cfg(feature = "rdma")]

// The helpers that build examples are not used here.
#[allow(dead_code)]
mod common;
mod paired;
// The device tests' own skip-or-require rule (and device choice), shared with `viaduct-verbs`.
#[path = "../verbs/tests/common/mod.rs"]
mod verbs_common;

use std::time::Duration;

#[test]
fn interleaved_run_over_verbs_reports_both_ping_pongs() {
    if verbs_common::ctx().is_none() {
        return;
    }
    let lines = paired::run("verbs", "8,4096", "1050", Duration::from_secs(300));
    paired::check(&lines, "verbs", &[8, 4096]);
}
