//! `VIADUCT_LOG`: the `viaduct` command installs the subscriber that shows the library's
//! `tracing` warnings on stderr; a value that is not a filter is named in a warning, and the
//! command goes on.

#[allow(dead_code)]
mod common;
use std::process::Command;
use std::time::Duration;

/// Upper bound on `viaduct info` (it answers at once).
const LIMIT: Duration = Duration::from_secs(60);

fn info(log: Option<&str>) -> common::Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_viaduct"));
    cmd.arg("info");
    match log {
        Some(v) => cmd.env("VIADUCT_LOG", v),
        None => cmd.env_remove("VIADUCT_LOG"),
    };
    common::run_limited(&mut cmd, LIMIT)
}

#[test]
fn a_log_filter_that_is_not_one_is_named_in_a_warning() {
    let run = info(Some("viaduct_agent=loud"));
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    assert!(
        run.stderr.contains("WARN")
            && run
                .stderr
                .contains("VIADUCT_LOG=\"viaduct_agent=loud\" is not a log filter"),
        "no warning naming the bad VIADUCT_LOG:\n{}",
        run.stderr
    );
}

#[test]
fn good_or_absent_log_filters_add_nothing_to_a_quiet_run() {
    let plain = info(None);
    assert_eq!(plain.code, Some(0), "stderr:\n{}", plain.stderr);
    for log in ["", "off", "warn", "debug", "viaduct_agent=debug,warn"] {
        let run = info(Some(log));
        assert_eq!(run.code, Some(0), "VIADUCT_LOG={log:?}: {}", run.stderr);
        assert!(
            !run.stderr.contains("not a log filter"),
            "VIADUCT_LOG={log:?} was refused:\n{}",
            run.stderr
        );
        assert_eq!(run.stdout.lines().count(), plain.stdout.lines().count());
    }
}
