//! The launcher's watcher: a small process `viaduct launch` starts beside its ranks, which
//! outlives a launcher killed outright and says so.
//!
//! A launcher killed by `SIGKILL` (or the OOM killer) can neither end its ranks nor say why they
//! end: the kernel ends each rank (its parent-death signal), and the ranks' output went through
//! pipes to the dead launcher. The watcher keeps the launcher's standard error and learns each
//! rank's pid through a pipe from the launcher. When that pipe ends without the launcher's
//! `done`, the launcher died with its job running: the watcher writes which ranks end with it,
//! kills any still running (each checked by its start time, so a reused pid is never hit) and
//! exits.
//!
//! The protocol on the watcher's standard input, one line each: `launcher PID`, `rank R PID
//! START` as each rank starts, and `done` when the launcher ends normally.

use std::io::{self, BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use viaduct_fallback::process::{kill_if_same, start_time};

/// The hidden subcommand that runs the watcher.
pub const SUBCOMMAND: &str = "launch-watch";
/// How long the watcher waits for the ranks it killed to end.
const REAP: Duration = Duration::from_secs(5);

/// Options of the watcher (none: it reads its instructions from standard input).
#[derive(Debug, clap::Args)]
pub struct Args {}

/// The launcher's end of the watcher.
pub struct Watcher {
    child: Child,
    input: Option<ChildStdin>,
}

impl Watcher {
    /// Starts the watcher (this same program, [`SUBCOMMAND`]), sharing this process's standard
    /// error.
    pub fn start() -> io::Result<Self> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .arg(SUBCOMMAND)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        let input = child.stdin.take();
        let mut watcher = Self { child, input };
        watcher.send(&format!("launcher {}", std::process::id()))?;
        Ok(watcher)
    }

    /// Tells the watcher that rank `rank` runs as process `pid`.
    pub fn rank_started(&mut self, rank: u32, pid: u32) -> io::Result<()> {
        // A rank that already ended has nothing left to end.
        let Ok(started) = start_time(pid) else {
            return Ok(());
        };
        self.send(&format!("rank {rank} {pid} {started}"))
    }

    fn send(&mut self, line: &str) -> io::Result<()> {
        match self.input.as_mut() {
            Some(input) => writeln!(input, "{line}"),
            None => Ok(()),
        }
    }
}

impl Drop for Watcher {
    /// The launcher ends normally (also on an error or a panic that unwinds): the watcher is
    /// told and reaped.
    fn drop(&mut self) {
        let _ = self.send("done");
        self.input = None;
        let deadline = Instant::now() + REAP;
        while matches!(self.child.try_wait(), Ok(None)) {
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            thread::sleep(Duration::from_millis(2));
        }
    }
}

/// One rank the watcher knows of.
struct Rank {
    rank: u32,
    pid: u32,
    started: u64,
}

/// Runs the watcher until the launcher says `done` or dies.
pub fn run(_args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut launcher = None;
    let mut ranks = Vec::new();
    for line in BufReader::new(io::stdin().lock()).lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["done"] => return Ok(()),
            ["launcher", pid] => launcher = pid.parse::<u32>().ok(),
            ["rank", rank, pid, started] => {
                if let (Ok(rank), Ok(pid), Ok(started)) =
                    (rank.parse(), pid.parse(), started.parse())
                {
                    ranks.push(Rank { rank, pid, started });
                }
            }
            _ => {}
        }
    }
    // The pipe ended without `done`: the launcher died while its job ran.
    let who = launcher.map_or_else(|| "the launcher".to_owned(), |p| format!("launcher {p}"));
    if ranks.is_empty() {
        eprintln!("viaduct launch: {who} died before it started a rank");
        return Ok(());
    }
    let mut killed = Vec::new();
    for r in &ranks {
        match kill_if_same(r.pid, r.started) {
            Ok(true) => killed.push(r),
            Ok(false) => {}
            Err(e) => eprintln!(
                "viaduct launch: cannot end rank {} (pid {}): {e}",
                r.rank, r.pid
            ),
        }
    }
    let deadline = Instant::now() + REAP;
    let alive = |r: &&Rank| start_time(r.pid).is_ok_and(|t| t == r.started) && !zombie(r.pid);
    while killed.iter().any(alive) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let left: Vec<String> = ranks
        .iter()
        .filter(|r| alive(r))
        .map(|r| format!("{} (pid {})", r.rank, r.pid))
        .collect();
    let all: Vec<String> = ranks
        .iter()
        .map(|r| format!("{} (pid {})", r.rank, r.pid))
        .collect();
    eprintln!(
        "viaduct launch: {who} died (killed?) while its job ran; its rank{} {} ended with it{}",
        if ranks.len() == 1 { "" } else { "s" },
        all.join(", "),
        if left.is_empty() {
            String::new()
        } else {
            format!(
                "; still running after {} s: {}",
                REAP.as_secs(),
                left.join(", ")
            )
        }
    );
    Ok(())
}

/// Whether process `pid` has ended and waits to be reaped by its new parent.
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .and_then(|at| s[at + 1..].split_whitespace().next().map(|st| st == "Z"))
        })
        .unwrap_or(false)
}
