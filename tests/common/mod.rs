//! Helpers shared by the root integration tests: running a command with a time limit, and
//! finding (or building) an example binary.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

/// What a finished command left behind.
pub struct Run {
    /// Exit code, `None` when a signal ended it.
    pub code: Option<i32>,
    /// Everything it wrote to standard output.
    pub stdout: String,
    /// Everything it wrote to standard error.
    pub stderr: String,
}

/// Runs `cmd` to completion, killing it (and failing the test) if it outlives `limit`.
pub fn run_limited(cmd: &mut Command, limit: Duration) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    Run {
        code: status.code(),
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// Builds are serialized: cargo holds a lock anyway, and one build covers every example.
static BUILD: Mutex<()> = Mutex::new(());

/// Bound on building one example when the test was run without its examples.
const BUILD_LIMIT: Duration = Duration::from_secs(600);

/// The example `name`, built next to the running test (built here if `cargo test` was asked for
/// one test alone and skipped the examples).
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let path = profile_dir.join("examples").join(name);
    let _guard = BUILD.lock().unwrap_or_else(|p| p.into_inner());
    if !path.exists() {
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev".to_owned(),
            Some(other) => other.to_owned(),
        };
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = run_limited(
            Command::new(cargo)
                .args(["build", "--example", name, "--profile", &profile])
                .arg("--manifest-path")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")),
            BUILD_LIMIT,
        );
        assert_eq!(
            built.code,
            Some(0),
            "building {name} failed:\n{}",
            built.stderr
        );
    }
    assert!(path.exists(), "{} missing", path.display());
    path
}
