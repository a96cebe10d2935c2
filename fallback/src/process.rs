//! Child-process setup for launchers: making a started program end when its launcher dies.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes the process `cmd` starts receive `SIGKILL` when the thread that spawns it ends (for a
/// launcher that spawns from its main thread: when the launcher dies, even by `SIGKILL`), so
/// its ranks are never left running on their own.
///
/// The parent-death signal (`prctl(PR_SET_PDEATHSIG)`) is set in the child between `fork` and
/// `exec` and survives `exec`. Should the launcher die before the child has set it, the child
/// sees it has been re-parented and does not start the program (spawning fails with `ESRCH`).
/// Processes the program starts itself are not covered: the signal reaches the direct child
/// only.
///
/// ```
/// use std::process::Command;
/// use viaduct_fallback::process::kill_when_parent_dies;
/// let mut cmd = Command::new("true");
/// kill_when_parent_dies(&mut cmd);
/// assert!(cmd.status()?.success());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn kill_when_parent_dies(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec; it only makes plain system
    // calls (`prctl`, `getppid`), which are async-signal-safe, and allocates nothing (the
    // error is built from a raw OS code).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl: then nothing signals us.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// The start time of process `pid` (clock ticks after boot, field 22 of `/proc/PID/stat`): with
/// the pid it names one process for good, since a pid is reused only by a later process.
///
/// ```
/// use viaduct_fallback::process::start_time;
/// let mine = start_time(std::process::id())?;
/// assert_eq!(start_time(std::process::id())?, mine); // the same process, the same start
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn start_time(pid: u32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) is in parentheses and may itself hold spaces and parentheses:
    // the fields after it start behind the last ')'.
    let rest = stat
        .rfind(')')
        .map(|at| &stat[at + 1..])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no ')' in /proc/PID/stat"))?;
    // `rest` starts with field 3 (the state): field 22 is its 20th.
    rest.split_whitespace()
        .nth(19)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "no start time in /proc/PID/stat",
            )
        })
}

/// Sends `SIGKILL` to process `pid` if it is still the process that started at `started` (see
/// [`start_time`]). Returns whether it was signalled: `false` when it has ended (its pid free or
/// taken by another process).
///
/// ```
/// use std::process::Command;
/// use viaduct_fallback::process::{kill_if_same, start_time};
/// let mut child = Command::new("sleep").arg("30").spawn()?;
/// let started = start_time(child.id())?;
/// assert!(kill_if_same(child.id(), started)?);
/// assert!(!child.wait()?.success());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn kill_if_same(pid: u32, started: u64) -> io::Result<bool> {
    match start_time(pid) {
        Ok(t) if t == started => {}
        Ok(_) => return Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; the pid was checked
    // just above to still name the process we mean.
    if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
        Ok(true)
    } else {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ESRCH) {
            Ok(false)
        } else {
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};

    #[test]
    fn the_child_dies_with_the_thread_that_spawned_it() {
        // The parent-death signal follows the spawning thread: a thread that spawns the child
        // and ends stands for a launcher that dies.
        let mut child = std::thread::spawn(|| {
            let mut cmd = Command::new("sleep");
            cmd.arg("30");
            kill_when_parent_dies(&mut cmd);
            cmd.spawn().unwrap()
        })
        .join()
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the child outlived its spawning thread by 10 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    }

    #[test]
    fn kill_if_same_kills_only_the_process_that_started_then() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let started = start_time(child.id()).unwrap();
        // Another start time names another process: left alone.
        assert!(!kill_if_same(child.id(), started + 1).unwrap());
        assert!(child.try_wait().unwrap().is_none());
        assert!(kill_if_same(child.id(), started).unwrap());
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
        // Reaped: its pid no longer names it.
        assert!(!kill_if_same(child.id(), started).unwrap());
    }
}
