//! CPU time of the calling thread, for benchmarks that report what a thread ran rather than
//! how long it waited.

use std::io;
use std::time::Duration;

/// CPU time the calling thread has used so far (`CLOCK_THREAD_CPUTIME_ID`): what it ran, not
/// the time it waited for a CPU or slept.
///
/// ```
/// let before = viaduct_fallback::cputime::thread_cpu_time().unwrap();
/// let mut x = 0u64;
/// for i in 0..1_000_000u64 {
///     x = x.wrapping_add(std::hint::black_box(i));
/// }
/// std::hint::black_box(x);
/// assert!(viaduct_fallback::cputime::thread_cpu_time().unwrap() >= before);
/// ```
pub fn thread_cpu_time() -> io::Result<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer to a local.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    ))
}
