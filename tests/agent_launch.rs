//! The `pingpong` example through the agent, started by `viaduct launch` (its own PMI-1
//! server) and by MPICH's `mpiexec` (hydra): every rank connects to every other over the
//! chosen method, plays ping-pong with byte-exact checks, and exchanges all-to-all.

mod common;
use common::Run;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Upper bound on any one command of these tests.
const LIMIT: Duration = Duration::from_secs(120);

/// Runs `cmd` to completion within [`LIMIT`].
fn run(cmd: &mut Command) -> Run {
    common::run_limited(cmd, LIMIT)
}

/// The `pingpong` example, built next to this test (built here if `cargo test` was asked for
/// this test alone and skipped the examples).
fn pingpong() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| common::example("pingpong"))
}

/// Asserts every rank of an `n`-rank run reported success over `method`.
fn assert_passed(run: &Run, n: u32, prefixed: bool, method: &str) {
    assert_eq!(
        run.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    for rank in 0..n {
        let prefix = if prefixed {
            format!("[{rank}] ")
        } else {
            String::new()
        };
        let expected = format!(
            "{prefix}pingpong: rank {rank} of {n} ok: peer {} over {method}",
            rank ^ 1
        );
        assert!(
            run.stdout.lines().any(|l| l.starts_with(&expected)),
            "no line starting {expected:?} in:\n{}\nstderr:\n{}",
            run.stdout,
            run.stderr
        );
    }
}

fn launch(n: u32, transport: &str) -> Run {
    run(Command::new(env!("CARGO_BIN_EXE_viaduct"))
        .args([
            "launch",
            "-n",
            &n.to_string(),
            "--transport",
            transport,
            "--timeout",
            "100",
            "--",
        ])
        .arg(pingpong())
        .args(["--max", "1048576"]))
}

#[test]
fn viaduct_launch_two_ranks_shm() {
    assert_passed(&launch(2, "shm"), 2, true, "shm");
}

#[test]
fn viaduct_launch_four_ranks_tcp() {
    assert_passed(&launch(4, "tcp"), 4, true, "tcp");
}

#[test]
fn viaduct_launch_four_ranks_shm() {
    assert_passed(&launch(4, "shm"), 4, true, "shm");
}

#[test]
fn impossible_transport_is_a_clear_error() {
    let r = launch(2, "verbs");
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains("no method can reach rank"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("verbs"), "{}", r.stderr);
}

fn mpiexec() -> Option<&'static str> {
    let found = Command::new("mpiexec")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    found.then_some("mpiexec")
}

#[test]
fn mpiexec_two_and_four_ranks() {
    let Some(mpiexec) = mpiexec() else {
        println!("SKIPPED: mpiexec (Debian package mpich) is not installed");
        return;
    };
    for (n, transport) in [(2u32, "shm"), (4, "tcp")] {
        let r = run(Command::new(mpiexec)
            .args(["-n", &n.to_string()])
            .env("VIADUCT_TRANSPORT", transport)
            .arg(pingpong())
            .args(["--max", "1048576"]));
        assert_passed(&r, n, false, transport);
    }
}
