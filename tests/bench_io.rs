//! `viaduct bench io` refuses bad input with errors that name the cause, and never blocks on a
//! file it cannot use.

#[allow(dead_code)]
mod common;
use common::Run;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Upper bound on any one command of these tests (a refusal comes at once).
const LIMIT: Duration = Duration::from_secs(30);

fn bench_io(args: &[&str]) -> Run {
    common::run_limited(
        Command::new(env!("CARGO_BIN_EXE_viaduct"))
            .args(["bench", "io", "--size", "8192", "--seconds", "0.05"])
            .args(args),
        LIMIT,
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("viaduct-bench-io-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_file_that_cannot_be_opened_is_named() {
    let dir = scratch("missing");
    let path = dir.join("no-such-dir").join("data");
    let r = bench_io(&["--file", path.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(path.to_str().unwrap()),
        "the error does not name the file:\n{}",
        r.stderr
    );
}

#[test]
fn a_fifo_is_refused_rather_than_waited_on() {
    let dir = scratch("fifo");
    let fifo = dir.join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // Before, opening the FIFO for writing waited for a reader for ever.
    let r = bench_io(&["--file", fifo.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(fifo.to_str().unwrap()) && r.stderr.contains("not a regular file"),
        "{}",
        r.stderr
    );
}

#[test]
fn depth_zero_is_refused() {
    let r = bench_io(&["--depth", "0"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("--depth"), "{}", r.stderr);
}
