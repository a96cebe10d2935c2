//! CPU binding: which CPUs this process may run on, and binding a child process to one before
//! it starts (what `mpiexec -bind-to core` does), for launchers and benchmarks.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The CPUs this process may run on (its affinity mask), in increasing order.
///
/// ```
/// use viaduct_fallback::affinity::allowed_cpus;
/// let cpus = allowed_cpus()?;
/// assert!(!cpus.is_empty() && cpus.windows(2).all(|w| w[0] < w[1]));
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a writable `cpu_set_t` of the size passed; pid 0 is this thread.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the size of the set.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// The number of CPUs online on this node (`sysconf(_SC_NPROCESSORS_ONLN)`), whatever this
/// process's affinity mask; at least 1.
///
/// ```
/// use viaduct_fallback::affinity::{allowed_cpus, online_cpus};
/// assert!(online_cpus() >= 1);
/// # assert!(allowed_cpus().unwrap().len() <= online_cpus().max(1024));
/// ```
pub fn online_cpus() -> usize {
    // SAFETY: `sysconf` only reads a system setting; it takes no pointers.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// Makes the process `cmd` starts run only on CPU `cpu`: the binding is set in the child
/// between `fork` and `exec`, so every thread the program ever starts inherits it. Spawning
/// fails with `EINVAL` when `cpu` is not one the child may use.
///
/// ```
/// use std::process::Command;
/// use viaduct_fallback::affinity::{allowed_cpus, bind_command};
/// let mut cmd = Command::new("true");
/// bind_command(&mut cmd, allowed_cpus()?[0])?;
/// assert!(cmd.status()?.success());
/// assert!(bind_command(&mut Command::new("true"), usize::MAX).is_err());
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn bind_command(cmd: &mut Command, cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond the largest CPU number the kernel interface takes"),
        ));
    }
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE was checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the closure runs in the forked child before exec; it only calls
    // `sched_setaffinity`, a plain system call (async-signal-safe), on a set it owns by value,
    // and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_child_runs_on_its_cpu_only() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        let cpu = *cpus.last().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
        bind_command(&mut cmd, cpu).unwrap();
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.split_whitespace().last(),
            Some(cpu.to_string().as_str()),
            "{text}"
        );
    }

    #[test]
    fn the_online_cpus_cover_the_allowed_ones() {
        let allowed = allowed_cpus().unwrap();
        assert!(online_cpus() >= allowed.len(), "{allowed:?}");
    }

    #[test]
    fn a_cpu_beyond_the_set_is_refused() {
        let mut cmd = Command::new("true");
        assert!(bind_command(&mut cmd, 1 << 20).is_err());
    }
}
