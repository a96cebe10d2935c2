//! How the C library's allocator hands out large blocks, for a process that moves large
//! messages.
//!
//! glibc's `malloc` serves a block above its mmap threshold (128 KiB at start, raised
//! dynamically up to 32 MiB as such blocks are freed) with a fresh `mmap` and gives it back
//! with `munmap` when it is freed. A message buffer allocated per message then arrives on
//! fresh pages every time: the copy into it page-faults once per 4 KiB page (and a peer's
//! `process_vm_readv` from it pins fresh pages), and whether a given size is served that way
//! depends on what the process freed before, so the same ping-pong runs at one speed or at
//! two to five times its time from one run to the next. Measured with the agent's ping-pong
//! over shared memory (`viaduct bench latency --transport shm`): 128 KiB 28-66 us and 256 KiB
//! 48-133 us by the default allocator, 14-19 and 27-37 us with the threshold fixed at 64 MiB.
//! [`keep_large_blocks`] fixes the threshold (and the trim threshold above it) so that freed
//! blocks are reused, as MPI libraries' own memory pools do.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The threshold set by [`keep_large_blocks`] (0: never set).
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// Serves allocations up to `threshold` bytes from the heap and keeps up to twice that freed
/// at its top, instead of a fresh `mmap` per large block (glibc's `M_MMAP_THRESHOLD` and
/// `M_TRIM_THRESHOLD`). Process-wide; the first call wins. Does nothing (returns `false`) when
/// `threshold` is 0, when the program set the allocator itself through glibc's
/// `MALLOC_MMAP_THRESHOLD_` or `MALLOC_TRIM_THRESHOLD_` variables, or off glibc.
///
/// ```
/// use viaduct_fallback::memory::{keep_large_blocks, kept_threshold};
/// if keep_large_blocks(64 << 20) {
///     assert!(kept_threshold().is_some());
/// }
/// assert!(!keep_large_blocks(0)); // 0 leaves the allocator alone
/// ```
pub fn keep_large_blocks(threshold: usize) -> bool {
    if threshold == 0
        || std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
        || std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_some()
    {
        return false;
    }
    if KEPT
        .compare_exchange(0, threshold, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    set(threshold)
}

/// The threshold [`keep_large_blocks`] set, if it did.
///
/// ```
/// use viaduct_fallback::memory::{keep_large_blocks, kept_threshold};
/// let set = keep_large_blocks(64 << 20);
/// assert_eq!(kept_threshold().is_some(), set);
/// ```
pub fn kept_threshold() -> Option<usize> {
    match KEPT.load(Ordering::Acquire) {
        0 => None,
        t => Some(t),
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set(threshold: usize) -> bool {
    // glibc caps the mmap threshold at 32 MiB on 64-bit (HEAP_MAX / 2); a larger value is refused.
    let mmap = threshold.min(32 << 20) as libc::c_int;
    let trim = threshold.saturating_mul(2).min(i32::MAX as usize) as libc::c_int;
    // SAFETY: mallopt takes the allocator's own locks; it only changes two tuning parameters.
    let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, mmap) == 1 };
    // SAFETY: as above.
    let ok_trim = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, trim) == 1 };
    ok && ok_trim
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set(_threshold: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_leaves_the_allocator_alone_and_the_first_call_wins() {
        assert!(!keep_large_blocks(0));
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some() {
            eprintln!("skipped: MALLOC_MMAP_THRESHOLD_ is set in this environment");
            return;
        }
        assert!(keep_large_blocks(32 << 20), "glibc refused the thresholds");
        assert_eq!(kept_threshold(), Some(32 << 20));
        assert!(!keep_large_blocks(1 << 20), "a second call changed them");
        assert_eq!(kept_threshold(), Some(32 << 20));
    }
}
