//! The examples as rank programs: each runs under `viaduct launch` and under MPICH's
//! `mpiexec` (hydra, PMI-1), and every rank must report success.

mod common;
use common::Run;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Upper bound on any one command of these tests.
const LIMIT: Duration = Duration::from_secs(90);

/// Runs `cmd` to completion within [`LIMIT`].
fn run(cmd: &mut Command) -> Run {
    common::run_limited(cmd, LIMIT)
}

/// The example `name` (see [`common::example`]).
fn example(name: &str) -> PathBuf {
    common::example(name)
}

fn viaduct_launch(n: u32, program: &Path, args: &[&str]) -> Run {
    run(Command::new(env!("CARGO_BIN_EXE_viaduct"))
        .args(["launch", "-n", &n.to_string(), "--timeout", "80", "--"])
        .arg(program)
        .args(args))
}

/// `mpiexec`, or `None` (and a SKIPPED line) when MPICH is not installed.
fn mpiexec(n: u32, program: &Path, args: &[&str]) -> Option<Run> {
    let found = Command::new("mpiexec")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        println!("SKIPPED: mpiexec (MPICH) is not installed");
        return None;
    }
    Some(run(Command::new("mpiexec")
        .args(["-n", &n.to_string()])
        .arg(program)
        .args(args)))
}

/// Asserts the run succeeded and that each rank in `ranks` printed a line containing
/// `"{name}: rank R of N"` and `needle`.
fn assert_ranks(r: &Run, name: &str, n: u32, ranks: &[u32], needle: &str) {
    assert_eq!(
        r.code,
        Some(0),
        "{name} failed\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    for rank in ranks {
        let head = format!("{name}: rank {rank} of {n}");
        assert!(
            r.stdout
                .lines()
                .any(|l| l.contains(&head) && l.contains(needle)),
            "no line with {head:?} and {needle:?} in:\n{}\nstderr:\n{}",
            r.stdout,
            r.stderr
        );
    }
}

#[test]
fn greq_timer_under_viaduct_launch() {
    let r = viaduct_launch(2, &example("greq_timer"), &[]);
    assert_ranks(&r, "greq_timer", 2, &[0, 1], "4 free callbacks ran");
}

#[test]
fn greq_timer_under_mpiexec() {
    if let Some(r) = mpiexec(2, &example("greq_timer"), &[]) {
        assert_ranks(&r, "greq_timer", 2, &[0, 1], "4 free callbacks ran");
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("viaduct-examples-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn checkpoint_under_viaduct_launch() {
    let dir = scratch("ckpt-launch");
    let r = viaduct_launch(2, &example("checkpoint"), &[dir.to_str().unwrap()]);
    assert_ranks(
        &r,
        "checkpoint",
        2,
        &[0, 1],
        "read back and checked; removed",
    );
    // Each rank removed its own file after checking it.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    let _ = std::fs::remove_dir(&dir);
}

#[test]
fn checkpoint_under_mpiexec() {
    let dir = scratch("ckpt-mpiexec");
    if let Some(r) = mpiexec(2, &example("checkpoint"), &[dir.to_str().unwrap()]) {
        assert_ranks(
            &r,
            "checkpoint",
            2,
            &[0, 1],
            "read back and checked; removed",
        );
    }
    let _ = std::fs::remove_dir(&dir);
}

#[test]
fn handler_repost_under_viaduct_launch() {
    let r = viaduct_launch(3, &example("handler_repost"), &[]);
    assert_ranks(
        &r,
        "handler_repost",
        3,
        &[0],
        "consumed 200 messages in order from 2 ranks",
    );
    assert_ranks(&r, "handler_repost", 3, &[1, 2], "sent 100 messages");
}

#[test]
fn handler_repost_under_mpiexec() {
    if let Some(r) = mpiexec(3, &example("handler_repost"), &[]) {
        assert_ranks(
            &r,
            "handler_repost",
            3,
            &[0],
            "consumed 200 messages in order from 2 ranks",
        );
        assert_ranks(&r, "handler_repost", 3, &[1, 2], "sent 100 messages");
    }
}

/// What every rank of `ring` consumes in place: 8 rounds of a 20-byte frame around a payload
/// of 3 KiB plus 512 bytes per round.
const RING_LINE: &str = "ok, 39072 bytes passed in place";

#[test]
fn ring_under_viaduct_launch() {
    let r = viaduct_launch(3, &example("ring"), &[]);
    assert_ranks(&r, "ring", 3, &[0, 1, 2], RING_LINE);
}

#[test]
fn ring_under_mpiexec() {
    if let Some(r) = mpiexec(3, &example("ring"), &[]) {
        assert_ranks(&r, "ring", 3, &[0, 1, 2], RING_LINE);
    }
}

const COLLECTIVE_LINE: &str = "bcast 1048576 B, allreduce, maxloc, split";

#[test]
fn collective_under_viaduct_launch() {
    let r = viaduct_launch(4, &example("collective"), &[]);
    assert_ranks(&r, "collective", 4, &[0, 1, 2, 3], COLLECTIVE_LINE);
}

#[test]
fn collective_under_mpiexec() {
    // An odd number of ranks: uneven halves after the split, a non-power-of-two allreduce.
    if let Some(r) = mpiexec(3, &example("collective"), &[]) {
        assert_ranks(&r, "collective", 3, &[0, 1, 2], COLLECTIVE_LINE);
    }
}

#[test]
fn class_batch_under_viaduct_launch() {
    let r = viaduct_launch(2, &example("class_batch"), &[]);
    assert_ranks(&r, "class_batch", 2, &[0, 1], "8 jobs and 2 messages");
}

#[test]
fn class_batch_under_mpiexec() {
    if let Some(r) = mpiexec(2, &example("class_batch"), &[]) {
        assert_ranks(&r, "class_batch", 2, &[0, 1], "8 jobs and 2 messages");
    }
}

#[test]
fn io_beside_messages_under_viaduct_launch() {
    let r = viaduct_launch(2, &example("io_beside_messages"), &[]);
    assert_ranks(
        &r,
        "io_beside_messages",
        2,
        &[0, 1],
        "handler ran on time; deadline missed as expected",
    );
}

#[test]
fn io_beside_messages_under_mpiexec() {
    if let Some(r) = mpiexec(2, &example("io_beside_messages"), &[]) {
        assert_ranks(
            &r,
            "io_beside_messages",
            2,
            &[0, 1],
            "handler ran on time; deadline missed as expected",
        );
    }
}

const PINGPONG_IN_PLACE_LINE: &str = "of them read in place";

#[test]
fn pingpong_in_place_under_viaduct_launch() {
    let r = viaduct_launch(2, &example("pingpong_in_place"), &[]);
    assert_ranks(&r, "pingpong_in_place", 2, &[0, 1], PINGPONG_IN_PLACE_LINE);
}

#[test]
fn pingpong_in_place_under_mpiexec() {
    if let Some(r) = mpiexec(2, &example("pingpong_in_place"), &[]) {
        assert_ranks(&r, "pingpong_in_place", 2, &[0, 1], PINGPONG_IN_PLACE_LINE);
    }
}
