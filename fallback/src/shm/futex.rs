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

/// One entry of `futex_waitv` (`struct futex_waitv` of the kernel's uapi).
#[repr(C)]
struct WaitV {
    val: u64,
    uaddr: u64,
    flags: u32,
    reserved: u32,
}

/// `FUTEX2_SIZE_U32`: a 32-bit futex word, shared between processes (no private flag).
const FUTEX2_SIZE_U32: u32 = 0x02;

/// Sleeps while every `(word, expected)` of `bells` (at most 128) holds its value, at most
/// `timeout`: one `futex_waitv`. Returns normally on a wake-up, a changed value, a timeout or a
/// signal; `ENOSYS` where the kernel lacks `futex_waitv` (before Linux 5.16).
pub(crate) fn wait_any(bells: &[(&AtomicU32, u32)], timeout: Duration) -> io::Result<()> {
    let waiters: Vec<WaitV> = bells
        .iter()
        .map(|(w, v)| WaitV {
            val: u64::from(*v),
            uaddr: w.as_ptr() as u64,
            flags: FUTEX2_SIZE_U32,
            reserved: 0,
        })
        .collect();
    // futex_waitv takes an absolute deadline on the given clock.
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let nanos = now.tv_nsec as u64 + u64::from(timeout.subsec_nanos());
    let deadline = libc::timespec {
        tv_sec: now
            .tv_sec
            .saturating_add(timeout.as_secs().min(i32::MAX as u64) as libc::time_t)
            .saturating_add((nanos / 1_000_000_000) as libc::time_t),
        tv_nsec: (nanos % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `waiters` holds `waiters.len()` valid entries, each naming a valid, aligned u32
    // that lives in a mapping the caller keeps for the call (futex_waitv only reads them);
    // `deadline` is a valid timespec; flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex_waitv,
            waiters.as_ptr(),
            waiters.len() as libc::c_uint,
            0 as libc::c_uint,
            &deadline as *const libc::timespec,
            libc::CLOCK_MONOTONIC,
        )
    };
    if rc >= 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::ETIMEDOUT) | Some(libc::EINTR) => Ok(()),
        _ => Err(err),
    }
}
