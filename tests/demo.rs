//! `viaduct demo` end to end: 4 ranks through `viaduct launch`, every stage, the summary.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(150);

/// Runs `viaduct demo ARGS`; returns exit code, stdout, stderr.
fn demo(args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_viaduct"))
        .arg("demo")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start viaduct demo");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("viaduct demo did not finish within {LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    (status.code(), o.join().unwrap(), e.join().unwrap())
}

#[test]
fn demo_runs_every_stage_and_prints_the_summary() {
    let dir = std::env::temp_dir().join(format!("viaduct-demo-test-{}", std::process::id()));
    let (code, out, err) = demo(&["--quick", "--no-verbs", "--out", dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    // Without a terminal there is no bar: no control characters on either stream.
    assert!(
        !out.contains('\x1b') && !err.contains('\x1b') && !err.contains('\r'),
        "control characters without a terminal:\nstdout:\n{out}\nstderr:\n{err}"
    );
    for stage in [
        "shm: connecting 4 ranks",
        "shm: ping-pong latency",
        "shm: bandwidth",
        "shm: allreduce",
        "shm: broadcast",
        "tcp: connecting 4 ranks",
        "tcp: broadcast",
        "nonblocking file I/O",
        "handler with a deadline",
        "agent round over shm",
        "agent round over tcp",
    ] {
        assert!(out.contains(stage), "no stage {stage:?} in:\n{out}");
    }
    for row in [
        "ping-pong latency 8 B              shm",
        "bandwidth 1 MiB                    tcp",
        "allreduce 8 KiB x 4 ranks          shm",
        "broadcast 256 KiB to 4 ranks       tcp",
        "read back: ok",
        "missed deadline ran failure fn: yes",
        "tagged ping-pong latency 8 B       agent/shm",
        "allreduce 8 KiB x 4 ranks          agent/tcp",
        "handler on a receive request       agent/shm        on time",
    ] {
        assert!(out.contains(row), "no {row:?} in the summary:\n{out}");
    }
    // The files the summary lists exist and hold what each rank measured.
    for rank in 0..4 {
        let path = dir.join(format!("rank-{rank}.json"));
        assert!(out.contains(&path.display().to_string()), "{out}");
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["rank"], rank);
        assert_eq!(v["methods"].as_array().map(Vec::len), Some(2));
        let state = std::fs::metadata(dir.join(format!("rank-{rank}.state"))).unwrap();
        assert_eq!(state.len(), 8 << 20);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_json_has_every_part() {
    let dir = std::env::temp_dir().join(format!("viaduct-demo-json-{}", std::process::id()));
    let (code, out, err) = demo(&[
        "--quick",
        "--json",
        "--no-verbs",
        "-n",
        "3",
        "--methods",
        "tcp",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is one JSON object");
    assert_eq!(v["ranks"], 3);
    assert_eq!(v["methods"][0]["method"], "tcp");
    assert!(v["methods"][0]["latency"][0]["median_us"].as_f64().unwrap() > 0.0);
    assert_eq!(v["file"]["verified"], true);
    assert_eq!(v["agent"][0]["method"], "tcp");
    assert_eq!(v["agent"][0]["receive_handler_on_time"], true);
    assert_eq!(v["handler"]["missed_deadline_failure_ran"], true);
    assert_eq!(v["verbs_skipped"], "--no-verbs");
    // Progress went to standard error.
    assert!(err.contains("tcp: allreduce"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_option_fails_with_a_clear_message() {
    let (code, _, err) = demo(&["--methods", "carrier-pigeon"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("the demo's rank-to-rank methods are shm and tcp"),
        "{err}"
    );
}
