//! Starting a benchmark's ranks under `viaduct launch` from the command the user typed, with a
//! progress bar on a terminal while they run.
//!
//! The ranks print one result line per measured size; each line is passed through to standard
//! output as it comes and advances the bar (drawn on standard error only when that is a
//! terminal, so scripts reading the output see the lines alone).

use std::error::Error;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::progress::Progress;

/// Whether this process was started by a launcher (it is a rank).
pub fn under_launcher() -> bool {
    std::env::var_os("PMI_RANK").is_some() || std::env::var_os("PMI_FD").is_some()
}

/// Runs this same command again as `ranks` ranks under `viaduct launch --transport transport`
/// and waits for them; `steps` result lines are expected (one per size), `what` names the run.
pub fn relaunch(
    ranks: u32,
    transport: &str,
    steps: usize,
    what: &str,
) -> Result<(), Box<dyn Error>> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(&exe)
        .args([
            "launch",
            "-n",
            &ranks.to_string(),
            "--transport",
            transport,
            "--",
        ])
        .arg(&exe)
        .args(std::env::args_os().skip(1))
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or("no output pipe from viaduct launch")?;
    let mut progress = Progress::bar_only(steps + 1);
    progress.step(&format!("{what}: starting {ranks} ranks over {transport}"));
    for (i, line) in BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .enumerate()
    {
        progress.out(&line);
        if i + 1 < steps {
            progress.step(&format!("{what}: {} of {steps} sizes done", i + 1));
        }
    }
    let status = child.wait()?;
    progress.finish();
    if status.success() {
        Ok(())
    } else {
        Err(format!("the benchmark ranks failed ({status})").into())
    }
}
