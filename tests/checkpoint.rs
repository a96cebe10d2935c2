//! The `checkpoint` example alone (a singleton): errors name the file, and file names do not
//! show the job key.

mod common;
use common::Run;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(90);

fn checkpoint(dir: &Path, key: &str, extra: &[&str]) -> Run {
    let mut cmd = Command::new(common::example("checkpoint"));
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
    cmd.env("VIADUCT_JOB_KEY", key).args(extra).arg(dir);
    common::run_limited(&mut cmd, LIMIT)
}

const KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn checkpoint_files_do_not_carry_the_job_key() {
    let dir = std::env::temp_dir().join(format!("viaduct-ckpt-name-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let r = checkpoint(&dir, KEY, &["--keep"]);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(
        !names[0].contains(&KEY[..8]) && !r.stdout.contains(&KEY[..8]),
        "the checkpoint's name shows the job key: {names:?}"
    );
}

#[test]
fn a_checkpoint_that_cannot_be_written_names_its_file() {
    let dir = std::env::temp_dir()
        .join(format!("viaduct-ckpt-missing-{}", std::process::id()))
        .join("no-such-dir");
    let r = checkpoint(&dir, KEY, &[]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(dir.to_str().unwrap()) && r.stderr.contains("No such file or directory"),
        "the error does not name the file and the cause:\n{}",
        r.stderr
    );
}
