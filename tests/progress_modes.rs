//! `VIADUCT_PROGRESS` on real ranks: `auto` picks `yield` when four ranks share one CPU
//! (`taskset -c 0`) and `spin` when two ranks have two CPUs, each mode runs a collective job
//! of four ranks on one CPU to the end, and an unknown mode is refused naming the variable.
//! The mode each rank runs in is read from its `VIADUCT_REPORT=methods` line.

mod common;
use common::Run;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Upper bound on any one job of these tests (a spinning rank on a shared CPU is slow, but
/// sleeps in its method's wait after each spin).
const LIMIT: Duration = Duration::from_secs(100);

fn have_taskset() -> bool {
    let found = Command::new("taskset")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        println!("SKIPPED: taskset (util-linux) is not installed");
    }
    found
}

/// The `collective` example, built now so that it links the agent of this build:
/// [`common::example`] builds only a missing one, and `cargo test --test progress_modes`
/// leaves an old one in place.
fn collective() -> std::path::PathBuf {
    static FRESH: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    let mut fresh = FRESH.lock().unwrap_or_else(|p| p.into_inner());
    let path = common::example("collective");
    if !*fresh {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let profile_dir = path.parent().and_then(std::path::Path::parent).unwrap();
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev".to_owned(),
            Some(other) => other.to_owned(),
        };
        let built = common::run_limited(
            Command::new(cargo)
                .args(["build", "--example", "collective", "--profile", &profile])
                .arg("--manifest-path")
                .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")),
            Duration::from_secs(600),
        );
        assert_eq!(
            built.code,
            Some(0),
            "building collective failed:\n{}",
            built.stderr
        );
        *fresh = true;
    }
    path
}

/// `viaduct launch -n N -- taskset -c CPUS collective` with `VIADUCT_PROGRESS=mode` (unset for
/// `None`) and the methods report.
fn collective_on(cpus: &str, n: u32, mode: Option<&str>) -> Run {
    collective_with(cpus, n, mode, &[])
}

/// [`collective_on`] with more variables in the ranks' environment.
fn collective_with(cpus: &str, n: u32, mode: Option<&str>, vars: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_viaduct"));
    cmd.args(["launch", "-n", &n.to_string(), "--timeout", "90", "--"])
        .args(["taskset", "-c", cpus])
        .arg(collective())
        .env("VIADUCT_REPORT", "methods")
        .env_remove("VIADUCT_PROGRESS");
    if let Some(m) = mode {
        cmd.env("VIADUCT_PROGRESS", m);
    }
    cmd.envs(vars.iter().copied());
    common::run_limited(&mut cmd, LIMIT)
}

/// Asserts every rank finished its collectives and reported progress mode `want`.
fn assert_job(r: &Run, n: u32, want: &str) {
    let all = format!("{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        r.code,
        Some(0),
        "job failed\nstdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    for rank in 0..n {
        let ok = format!("collective: rank {rank} of {n} ok");
        assert!(all.contains(&ok), "no {ok:?} in:\n{all}");
        let head = format!("viaduct: rank {rank} of {n} on ");
        let line = all
            .lines()
            .find(|l| l.contains(&head))
            .unwrap_or_else(|| panic!("no report line of rank {rank} in:\n{all}"));
        assert!(
            line.contains(&format!("; progress {want}")),
            "rank {rank} should run in {want}: {line}"
        );
    }
}

#[test]
fn auto_yields_for_four_ranks_on_one_cpu() {
    if !have_taskset() {
        return;
    }
    let r = collective_on("0", 4, None);
    assert_job(&r, 4, "yield");
}

#[test]
fn every_mode_finishes_four_ranks_on_one_cpu() {
    if !have_taskset() {
        return;
    }
    for mode in ["spin", "yield", "block", "auto"] {
        let r = collective_on("0", 4, Some(mode));
        let want = if mode == "auto" { "yield" } else { mode };
        assert_job(&r, 4, want);
    }
}

#[test]
fn yield_mode_finishes_at_the_edges_of_its_poll_count() {
    if !have_taskset() {
        return;
    }
    // 0 polls: every wait sleeps at once; 1: one pass, no yield, then the sleep; a count far
    // above the default: the yields alone carry the job.
    for polls in ["0", "1", "100000"] {
        let r = collective_with("0", 4, Some("yield"), &[("VIADUCT_YIELD_POLLS", polls)]);
        assert_job(&r, 4, "yield");
    }
}

#[test]
fn a_bad_yield_poll_count_is_refused_naming_the_variable() {
    assert_refused(("VIADUCT_YIELD_POLLS", "some"));
}

#[test]
fn auto_spins_for_two_ranks_on_two_cpus() {
    if !have_taskset() {
        return;
    }
    let cpus = viaduct_fallback::affinity::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        println!("SKIPPED: this process may run on fewer than 2 CPUs ({cpus:?})");
        return;
    }
    let r = collective_on(&format!("{},{}", cpus[0], cpus[1]), 2, None);
    assert_job(&r, 2, "spin");
}

#[test]
fn an_unknown_mode_is_refused_naming_the_variable() {
    assert_refused(("VIADUCT_PROGRESS", "busy"));
}

/// Asserts a 2-rank job with `var` set to `value` fails with an error naming both.
fn assert_refused((var, value): (&str, &str)) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_viaduct"));
    cmd.args(["launch", "-n", "2", "--timeout", "60", "--"])
        .arg(collective())
        .env(var, value);
    let r = common::run_limited(&mut cmd, LIMIT);
    assert_ne!(r.code, Some(0), "a job with {var}={value} succeeded");
    let all = format!("{}\n{}", r.stdout, r.stderr);
    assert!(
        all.contains(var) && all.contains(value),
        "the error does not name the variable and its value:\n{all}"
    );
}
