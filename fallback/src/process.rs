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
}
