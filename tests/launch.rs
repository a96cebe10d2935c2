//! `viaduct launch` and the bootstrap layer end to end: real processes, real PMI servers
//! (viaduct's own and MPICH hydra's `mpiexec`), the `kvs_exchange` example as the ranks.

mod common;
use common::Run;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// Upper bound on any one command of these tests.
const LIMIT: Duration = Duration::from_secs(60);

/// Runs `cmd` to completion within [`LIMIT`].
fn run(cmd: &mut Command) -> Run {
    common::run_limited(cmd, LIMIT)
}

fn viaduct() -> Command {
    Command::new(env!("CARGO_BIN_EXE_viaduct"))
}

/// The `kvs_exchange` example, built next to this test (built here if `cargo test` was asked
/// for this test alone and skipped the examples).
fn kvs_exchange() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| common::example("kvs_exchange"))
}

/// Asserts every rank of an `n`-rank `kvs_exchange` reported success (prefix as the launcher
/// writes it: `[R] ` for viaduct launch, none for mpiexec).
fn assert_exchanged(run: &Run, n: u32, prefixed: bool, protocol: &str) {
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
            "{prefix}kvs_exchange: rank {rank} of {n}: checked {n} entries, {n} on this node, protocol {protocol}"
        );
        assert!(
            run.stdout.lines().any(|l| l.starts_with(&expected)),
            "no line starting {expected:?} in:\n{}\nstderr:\n{}",
            run.stdout,
            run.stderr
        );
    }
    // All ranks agree on the job key.
    let keys: Vec<&str> = run
        .stdout
        .lines()
        .filter_map(|l| l.split("job key ").nth(1))
        .collect();
    assert_eq!(keys.len(), n as usize);
    assert!(keys.windows(2).all(|w| w[0] == w[1]), "{keys:?}");
}

#[test]
fn four_ranks_exchange_through_viaduct_launch() {
    let r = run(viaduct()
        .args(["launch", "-n", "4", "--timeout", "50", "--"])
        .arg(kvs_exchange()));
    assert_exchanged(&r, 4, true, "Pmi1");
}

#[test]
fn a_failing_rank_fails_the_job_and_is_named() {
    let r = run(viaduct().args([
        "launch",
        "-n",
        "3",
        "--timeout",
        "50",
        "--",
        "sh",
        "-c",
        "echo pid $$; if [ \"$PMI_RANK\" = 2 ]; then sleep 0.2; exit 3; fi; exec sleep 30",
    ]));
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    assert!(
        r.stderr.contains("rank 2 exited with code 3"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("job failed"), "{}", r.stderr);
    // The other ranks were killed and reaped before the launcher exited.
    let pids: Vec<u32> = r
        .stdout
        .lines()
        .filter_map(|l| l.split("pid ").nth(1))
        .map(|p| p.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3, "{}", r.stdout);
    for pid in pids {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "rank process {pid} still exists"
        );
    }
}

#[test]
fn a_rank_killed_by_a_signal_is_reported() {
    let r = run(viaduct().args([
        "launch",
        "-n",
        "3",
        "--timeout",
        "50",
        "--",
        "sh",
        "-c",
        "if [ \"$PMI_RANK\" = 1 ]; then kill -9 $$; fi; exec sleep 30",
    ]));
    assert_eq!(r.code, Some(128 + 9), "{}", r.stderr);
    assert!(
        r.stderr.contains("rank 1 was killed by signal 9 (SIGKILL)"),
        "{}",
        r.stderr
    );
}

/// With `VIADUCT_LAUNCH_KEEP_GOING=1` a rank's death leaves the others running: they finish
/// their work (each writes a line after the death) and the launcher exits with the dead rank's
/// status once all have exited.
#[test]
fn keep_going_leaves_the_other_ranks_running() {
    let r = run(viaduct().env("VIADUCT_LAUNCH_KEEP_GOING", "1").args([
        "launch",
        "-n",
        "3",
        "--timeout",
        "50",
        "--",
        "sh",
        "-c",
        "if [ \"$PMI_RANK\" = 1 ]; then kill -9 $$; fi; sleep 1; echo survived $PMI_RANK",
    ]));
    assert_eq!(r.code, Some(128 + 9), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("rank 1 was killed by signal 9 (SIGKILL); the other ranks go on"),
        "{}",
        r.stderr
    );
    for rank in [0, 2] {
        assert!(
            r.stdout.contains(&format!("[{rank}] survived {rank}")),
            "rank {rank} was not kept:\n{}\n{}",
            r.stdout,
            r.stderr
        );
    }
    assert!(!r.stderr.contains("killing rank"), "{}", r.stderr);
}

/// With `VIADUCT_LAUNCH_KEEP_GOING=1` a rank killed while the others wait in a PMI barrier
/// does not leave them waiting: the barrier completes without it (before, the launcher
/// swallowed the broken barrier and the job waited for the `--timeout`).
#[test]
fn keep_going_barriers_complete_without_the_failed_rank() {
    let cmd = format!(
        "if [ \"$PMI_RANK\" = 1 ]; then sleep 1; kill -9 $$; fi; {} ; echo passed $PMI_RANK",
        kvs_exchange().display()
    );
    let r = run(viaduct().env("VIADUCT_LAUNCH_KEEP_GOING", "1").args([
        "launch",
        "-n",
        "3",
        "--timeout",
        "30",
        "--",
        "sh",
        "-c",
        &cmd,
    ]));
    assert!(!r.stderr.contains("timed out"), "{}", r.stderr);
    assert!(!r.stderr.contains("left the job"), "{}", r.stderr);
    for rank in [0, 2] {
        assert!(
            r.stdout.contains(&format!("[{rank}] passed {rank}")),
            "{}\n{}",
            r.stdout,
            r.stderr
        );
    }
    assert_eq!(r.code, Some(128 + 9), "{}", r.stderr);
}

/// With `VIADUCT_LAUNCH_KEEP_GOING=1`, a rank whose PMI connection ends (the server marks it
/// gone, breaking the barrier the others wait in) just before its process is killed counts
/// as failed, not as having left: the barrier completes without it.
#[test]
fn keep_going_a_rank_gone_then_killed_counts_as_failed() {
    let cmd = format!(
        "if [ \"$PMI_RANK\" = 1 ]; then sleep 1; {} --leave 1; kill -9 $$; fi; {}",
        kvs_exchange().display(),
        kvs_exchange().display()
    );
    let r = run(viaduct().env("VIADUCT_LAUNCH_KEEP_GOING", "1").args([
        "launch",
        "-n",
        "3",
        "--timeout",
        "30",
        "--",
        "sh",
        "-c",
        &cmd,
    ]));
    assert!(!r.stderr.contains("timed out"), "{}", r.stderr);
    assert!(!r.stderr.contains("left the job"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("rank 1 was killed by signal 9 (SIGKILL); the other ranks go on"),
        "{}",
        r.stderr
    );
    assert_eq!(r.code, Some(128 + 9), "{}", r.stderr);
}

/// With `VIADUCT_LAUNCH_KEEP_GOING=1` a rank that exits with 0 outside a barrier the others
/// wait in still ends the job: that barrier can never complete.
#[test]
fn keep_going_still_ends_a_job_whose_barrier_broke() {
    let r = run(viaduct()
        .env("VIADUCT_LAUNCH_KEEP_GOING", "1")
        .args(["launch", "-n", "3", "--timeout", "30", "--"])
        .arg(kvs_exchange())
        .args(["--leave", "1"]));
    assert!(
        r.stderr
            .contains("rank 1 left the job without entering the barrier"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("timed out"), "{}", r.stderr);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
}

#[test]
fn a_hung_job_ends_at_the_timeout() {
    let r = run(viaduct().args([
        "launch",
        "-n",
        "2",
        "--timeout",
        "0.5",
        "--",
        "sh",
        "-c",
        "exec sleep 30",
    ]));
    assert_eq!(r.code, Some(124), "{}", r.stderr);
    assert!(r.stderr.contains("timed out after 0.5 s"), "{}", r.stderr);
}

#[test]
fn a_rank_leaving_before_the_fence_does_not_hang_the_others() {
    let r = run(viaduct()
        .args(["launch", "-n", "3", "--timeout", "50", "--"])
        .arg(kvs_exchange())
        .args(["--leave", "1"]));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("rank 1 left the job without entering the barrier"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("timed out"), "{}", r.stderr);
}

#[test]
fn environment_reaches_the_ranks_and_output_is_prefixed() {
    let r = run(viaduct().args([
        "launch",
        "-n",
        "2",
        "--transport",
        "shm",
        "--",
        "sh",
        "-c",
        "echo \"$PMI_RANK/$PMI_SIZE $VIADUCT_TRANSPORT ${#VIADUCT_JOB_KEY}\"; printf partial; echo oops >&2",
    ]));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for rank in 0..2 {
        assert!(
            r.stdout.contains(&format!("[{rank}] {rank}/2 shm 64\n")),
            "{}",
            r.stdout
        );
        assert!(
            r.stdout.contains(&format!("[{rank}] partial\n")),
            "{}",
            r.stdout
        );
        assert!(
            r.stderr.contains(&format!("[{rank}] oops\n")),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn bad_invocations_are_clear_errors() {
    let r = run(viaduct().args(["launch", "-n", "2", "--", "/nonexistent/program"]));
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr
            .contains("cannot start rank 0 (/nonexistent/program)"),
        "{}",
        r.stderr
    );
    let r = run(viaduct().args(["launch", "-n", "0", "--", "true"]));
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("-n must be between 1"), "{}", r.stderr);
}

#[test]
fn half_present_pmi_environment_is_a_clear_error() {
    let r = run(Command::new(kvs_exchange())
        .env_remove("PMI_FD")
        .env_remove("PMI_PORT")
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "2"));
    assert_eq!(r.code, Some(1), "{}", r.stdout);
    assert!(
        r.stderr.contains("incomplete PMI environment"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("PMI_FD or PMI_PORT"), "{}", r.stderr);

    let r = run(Command::new(kvs_exchange())
        .env("PMI_FD", "3")
        .env("PMI_RANK", "0")
        .env("PMI_SIZE", "many"));
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("PMI_SIZE=\"many\""), "{}", r.stderr);
}

#[test]
fn without_a_launcher_the_example_is_a_singleton() {
    let mut cmd = Command::new(kvs_exchange());
    for var in [
        "PMI_FD",
        "PMI_PORT",
        "PMI_ID",
        "PMI_RANK",
        "PMI_SIZE",
        "PMI_JOBID",
        "VIADUCT_PMI",
    ] {
        cmd.env_remove(var);
    }
    let r = run(&mut cmd);
    assert_exchanged(&r, 1, false, "Singleton");
}

fn hydra(extra: &[&str], protocol: &str) {
    let Some(mpiexec) = find_in_path("mpiexec") else {
        println!("SKIPPED: mpiexec not found (apt-get install mpich)");
        return;
    };
    let r = run(Command::new(mpiexec)
        .args(extra)
        .args(["-n", "4"])
        .arg(kvs_exchange()));
    assert_exchanged(&r, 4, false, protocol);
}

#[test]
fn four_ranks_exchange_through_mpiexec_pmi1_fd() {
    hydra(&[], "Pmi1");
}

#[test]
fn four_ranks_exchange_through_mpiexec_pmi1_port() {
    hydra(&["-pmi-port"], "Pmi1");
}

#[test]
fn four_ranks_exchange_through_mpiexec_pmi2() {
    hydra(&["-genv", "VIADUCT_PMI", "2"], "Pmi2");
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// An MPI program built with MPICH runs under `viaduct launch`: MPICH's own PMI-1 client
/// (`PMI_PORT` mode) talks to viaduct's server, and the ranks reduce across the job.
#[test]
fn mpich_programs_run_under_viaduct_launch() {
    let Some(mpicc) = find_in_path("mpicc") else {
        println!("SKIPPED: mpicc not found (apt-get install libmpich-dev)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("viaduct-launch-mpi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("allreduce.c");
    std::fs::write(
        &source,
        r#"#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d: sum %d\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
"#,
    )
    .unwrap();
    let program = dir.join("allreduce");
    let built = run(Command::new(mpicc).arg("-o").arg(&program).arg(&source));
    assert_eq!(built.code, Some(0), "mpicc failed:\n{}", built.stderr);
    let r = run(viaduct()
        .args(["launch", "-n", "3", "--timeout", "50", "--"])
        .arg(&program));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    for rank in 0..3 {
        assert!(
            r.stdout
                .contains(&format!("[{rank}] rank {rank} of 3: sum 3\n")),
            "{}",
            r.stdout
        );
    }
}

/// Voluntary context switches of every thread of process `pid` so far (`None` once it is gone).
fn wake_ups(pid: u32) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let status = std::fs::read_to_string(task.ok()?.path().join("status")).ok()?;
        total += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
            .trim()
            .parse::<u64>()
            .ok()?;
    }
    Some(total)
}

/// Voluntary context switches of the launcher started by `launch` in the 500 ms after
/// `settle`, once it exits successfully.
fn launcher_wake_ups(launch: &mut Command, settle: Duration) -> u64 {
    let mut child = launch.spawn().expect("spawn viaduct launch");
    std::thread::sleep(settle);
    let before = wake_ups(child.id()).expect("launcher threads");
    std::thread::sleep(Duration::from_millis(500));
    let after = wake_ups(child.id()).expect("launcher threads");
    let status = child.wait().expect("wait for the launcher");
    assert!(status.success(), "{status}");
    after - before
}

#[test]
fn the_launcher_sleeps_while_its_ranks_run() {
    // Ranks that spin on every core must not share them with a launcher that polls: its PMI
    // acceptor sleeps in accept, its watch loop on its ranks' output. Before, the acceptor
    // woke every 10 ms and the watch loop every 20 ms: about 75 wake-ups in half a second.
    let n = launcher_wake_ups(
        viaduct().args(["launch", "-n", "2", "--", "sleep", "1.5"]),
        Duration::from_millis(400),
    );
    assert!(
        n <= 25,
        "the launcher woke {n} times in 500 ms beside idle ranks"
    );
}

#[test]
fn the_launcher_sleeps_while_its_ranks_hold_their_pmi_connections() {
    // Ranks connected to the launcher's PMI server and quiet: the connection threads sleep in
    // `read`. Before, each woke every 50 ms to look at a stop flag (two ranks: about 20
    // wake-ups in half a second, besides the watch loop's 5).
    let n = launcher_wake_ups(
        viaduct()
            .args(["launch", "-n", "2", "--"])
            .arg(kvs_exchange())
            .args(["--hold", "1500"])
            .stdout(std::process::Stdio::null()),
        Duration::from_millis(500),
    );
    assert!(
        n <= 12,
        "the launcher woke {n} times in 500 ms beside ranks holding their PMI connections"
    );
}

/// True once process `pid` has ended: gone from /proc, or a zombie nobody reaped yet.
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// Reads lines from `reader` until `n` of them held `pid N`, within `limit`.
fn read_pids(reader: impl std::io::Read + Send + 'static, n: usize, limit: Duration) -> Vec<u32> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(reader).lines() {
            let Ok(line) = line else { break };
            if let Some(pid) = line
                .split("pid ")
                .nth(1)
                .and_then(|p| p.trim().parse().ok())
                && tx.send(pid).is_err()
            {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + limit;
    (0..n)
        .map(|_| {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            rx.recv_timeout(left)
                .expect("the ranks did not print their pids in time")
        })
        .collect()
}

#[test]
fn killing_the_launcher_ends_its_ranks() {
    let mut launcher = viaduct()
        .args([
            "launch",
            "-n",
            "2",
            "--",
            "sh",
            "-c",
            // `exec`: the rank process is the long-running program itself.
            "echo pid $$; exec sleep 60",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn viaduct launch");
    let out = launcher.stdout.take().unwrap();
    let mut err = launcher.stderr.take().unwrap();
    let pids = read_pids(out, 2, LIMIT);
    // SIGKILL: the launcher gets no chance to clean up.
    let launcher_pid = launcher.id();
    launcher.kill().unwrap();
    launcher.wait().unwrap();
    // Its standard error ends when the last process holding it (the watcher) has ended.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        let _ = tx.send(s);
    });
    let said = rx.recv_timeout(LIMIT);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !pids.iter().all(|p| ended(*p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|p| !ended(*p)).collect();
    for pid in &left {
        // Do not leave them behind for the next test run.
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(
        left.is_empty(),
        "ranks {left:?} still run 10 s after their launcher was killed"
    );
    let said = said.expect("the launcher's standard error stayed open: a watcher left behind?");
    // The ranks printed their pids in either order.
    let expected = format!(
        "viaduct launch: launcher {launcher_pid} died (killed?) while its job ran; its ranks 0 \
         (pid "
    );
    let line = said
        .lines()
        .find(|l| l.starts_with(&expected))
        .unwrap_or_else(|| panic!("expected a line starting {expected:?} in {said:?}"));
    for pid in &pids {
        assert!(
            line.contains(&format!("(pid {pid})")),
            "{pid} not named in {line:?}"
        );
    }
    assert!(line.ends_with("ended with it"), "{line:?}");
}

#[test]
fn a_stranger_taking_a_ranks_id_is_reported_when_the_rank_fails() {
    use std::io::{BufRead, BufReader, Read, Write};
    let go = std::env::temp_dir().join(format!("viaduct-launch-stranger-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    // Rank 1 closes its output before it connects, so the launcher does not wake on the end of
    // that output: it sees the refusal and rank 1's exit at its next look, in one go.
    let script = format!(
        "if [ \"$PMI_RANK\" = 1 ]; then while [ ! -e '{}' ]; do sleep 0.05; done; \
         exec \"$0\" >/dev/null 2>&1; fi; echo port $PMI_PORT; exec \"$0\"",
        go.display()
    );
    let mut launcher = viaduct()
        .args([
            "launch",
            "-n",
            "2",
            "--timeout",
            "50",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .arg(kvs_exchange())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn viaduct launch");
    let mut err = launcher.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let out = launcher.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Some(port) = line.strip_prefix("[0] port ") {
                let _ = tx.send(port.to_owned());
            }
        }
    });
    let port = rx
        .recv_timeout(LIMIT)
        .expect("rank 0 did not print PMI_PORT");
    // The stranger claims rank 1's id before rank 1 connects.
    let stranger = std::net::TcpStream::connect(port.trim()).unwrap();
    stranger.set_read_timeout(Some(LIMIT)).unwrap();
    (&stranger).write_all(b"cmd=initack pmiid=1\n").unwrap();
    let mut answer = String::new();
    BufReader::new(&stranger).read_line(&mut answer).unwrap();
    assert_eq!(answer, "cmd=initack\n");
    std::fs::write(&go, b"").unwrap();
    let deadline = std::time::Instant::now() + LIMIT;
    let status = loop {
        if let Some(status) = launcher.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = launcher.kill();
            let _ = launcher.wait();
            panic!("the launcher did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = std::fs::remove_file(&go);
    drop(stranger);
    let stderr = err_reader.join().unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("rank 1 exited with code 1"), "{stderr}");
    assert!(
        stderr.contains("refused a PMI connection")
            && stderr.contains("pmiid 1 is already connected"),
        "the refusal that made rank 1 fail is not reported:\n{stderr}"
    );
}

#[test]
fn bad_pmi_bounds_in_the_environment_are_clear_errors() {
    let r = run(viaduct()
        .env("VIADUCT_PMI_MAX_KEYS", "0")
        .args(["launch", "-n", "1", "--", "true"]));
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("VIADUCT_PMI_MAX_KEYS=\"0\""),
        "{}",
        r.stderr
    );
}
