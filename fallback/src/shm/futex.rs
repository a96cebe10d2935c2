//! Futex wait and wake on a word of the shared segment (process-shared, not `FUTEX_PRIVATE`).

use std::io;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` holds `expected`, at most `timeout`. Returns normally on a wake-up, a
/// changed value, a timeout or a signal; the caller re-checks its condition.
pub(crate) fn wait(word: &AtomicU32, expected: u32, timeout: Duration) -> io::Result<()> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call (it lives in a mapping
    // that outlives the endpoint); FUTEX_WAIT only reads it, and `ts` is a valid timespec.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::ETIMEDOUT) | Some(libc::EINTR) => Ok(()),
        _ => Err(err),
    }
}

/// Wakes every waiter sleeping on `word`.
pub(crate) fn wake(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned u32 in a live mapping; FUTEX_WAKE does not touch memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}
