//! One sleep over futex words and descriptors together: [`any`].
//!
//! A process that talks to some peers through shared memory (whose sleeping side waits on a
//! futex word of the segment, its *bell*) and to others through sockets, rings or completion
//! channels (descriptors) must sleep on both kinds at once. `futex_waitv` covers only futex
//! words and `poll` only descriptors; io_uring covers both: one `IORING_OP_FUTEX_WAITV` (Linux
//! 6.7 and later) over every bell and one `IORING_OP_POLL_ADD` per descriptor, submitted
//! together, and one `io_uring_enter` that waits for the first completion or the timeout.
//! What is still armed then is cancelled and reaped before [`any`] returns, so nothing stays in
//! flight between two calls (no stale wake-up, no request left in the kernel).
//!
//! Each thread keeps its own ring for this (made on its first call, grown when a call needs
//! more entries than it has), so a sleep costs no ring set-up. Whether the running kernel has
//! `IORING_OP_FUTEX_WAITV` is probed once per process ([`supported`]); where it lacks it, [`any`]
//! fails with [`io::ErrorKind::Unsupported`] and the caller sleeps in turns on each kind
//! instead (as [`sleepers_or_readable`] does).

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::OnceLock;
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use io_uring::{IoUring, Probe, opcode, types};

use crate::shm;

/// Most futex words one [`any`] waits on (the kernel's `futex_waitv` limit).
pub const MAX_WORDS: usize = 128;

/// Most descriptors one [`any`] waits on (an io_uring holds at most 32768 submission entries,
/// two of which go to the futex wait and the cancellation).
pub const MAX_FDS: usize = 32_766;

/// `FUTEX2_SIZE_U32`: a 32-bit futex word, shared between processes (no private flag).
const FUTEX2_SIZE_U32: u32 = 0x02;

/// The index (low half of `user_data`) of the futex wait.
const FUTEX_INDEX: u64 = 0;
/// The index of the cancellation request.
const CANCEL_INDEX: u64 = u32::MAX as u64;

/// How long the reaping of cancelled requests may take before the ring is given up (closing
/// it ends every request it holds). Cancelling a poll or a futex wait completes at once; this
/// bound only guards against a kernel that does not.
const REAP_BOUND: Duration = Duration::from_secs(2);

/// Whether the running kernel's io_uring offers what [`any`] needs: `IORING_OP_FUTEX_WAITV`,
/// `IORING_OP_POLL_ADD`, `IORING_OP_ASYNC_CANCEL` and timeouts on `io_uring_enter`
/// (`IORING_FEAT_EXT_ARG`). Probed once per process.
///
/// ```
/// // Linux 6.7 and later: true where io_uring is allowed.
/// let _one_sleep = viaduct_fallback::wait::supported();
/// ```
pub fn supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let Ok(ring) = IoUring::new(2) else {
            return false;
        };
        let mut probe = Probe::new();
        if ring.submitter().register_probe(&mut probe).is_err() {
            return false;
        }
        ring.params().is_feature_ext_arg()
            && probe.is_supported(opcode::FutexWaitV::CODE)
            && probe.is_supported(opcode::PollAdd::CODE)
            && probe.is_supported(opcode::AsyncCancel2::CODE)
    })
}

/// A thread's ring for [`any`], with the generation of its last call (the high half of every
/// `user_data`, so that a completion of an earlier call could never be taken for one of this
/// call, although none is left behind).
struct Waiter {
    ring: IoUring,
    generation: u32,
}

thread_local! {
    static WAITER: RefCell<Option<Waiter>> = const { RefCell::new(None) };
}

/// Sleeps until one of `words` no longer holds its expected value (or is woken by a
/// `FUTEX_WAKE`), one of `fds` is readable (`POLLIN`), at end of stream or failed (`POLLRDHUP`,
/// `POLLHUP`, `POLLERR`), a signal arrives, or `timeout` passed: one io_uring wait over both
/// kinds. A word whose value differs at the start ends the sleep at once, as with
/// `futex_waitv`. The words are process-shared (not `FUTEX_PRIVATE`), 32-bit. Returns at once
/// when both lists are empty. The caller re-checks its condition after the return.
///
/// Nothing it armed is left in the kernel when it returns.
///
/// # Errors
/// - [`io::ErrorKind::Unsupported`] where the kernel lacks what it needs ([`supported`]);
/// - [`io::ErrorKind::InvalidInput`] for more than [`MAX_WORDS`] words or [`MAX_FDS`]
///   descriptors;
/// - the error of a poll on a descriptor (say `EBADF`), of the futex wait, or of io_uring.
///
/// ```
/// use std::io::Write;
/// use std::os::fd::AsFd;
/// use std::os::unix::net::UnixStream;
/// use std::sync::atomic::AtomicU32;
/// use std::time::Duration;
/// use viaduct_fallback::wait;
/// if wait::supported() {
///     let word = AtomicU32::new(0);
///     let (mut a, b) = UnixStream::pair()?;
///     a.write_all(b"x")?;
///     // Returns at once: a byte waits on `b`.
///     wait::any(&[(&word, 0)], &[b.as_fd()], Duration::from_secs(10))?;
/// }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn any(
    words: &[(&AtomicU32, u32)],
    fds: &[BorrowedFd<'_>],
    timeout: Duration,
) -> io::Result<()> {
    if words.len() > MAX_WORDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} futex words to wait on: at most {MAX_WORDS}",
                words.len()
            ),
        ));
    }
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} descriptors to wait on: at most {MAX_FDS}", fds.len()),
        ));
    }
    if words.is_empty() && fds.is_empty() {
        return Ok(());
    }
    if !supported() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "io_uring on this kernel lacks IORING_OP_FUTEX_WAITV (Linux 6.7+)",
        ));
    }
    // Entries: the futex wait, one poll per descriptor, the cancellation.
    let need = (fds.len() + 2).next_power_of_two().max(8) as u32;
    WAITER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let waiter = match slot.take() {
            Some(w) if w.ring.params().sq_entries() >= need => slot.insert(w),
            // None yet, or too small: a new one (the old one, closed, held nothing).
            _ => slot.insert(Waiter {
                ring: IoUring::builder()
                    .setup_submit_all()
                    .build(need)
                    .map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!(
                                "cannot set up the io_uring of the sleep ({need} entries): {e}"
                            ),
                        )
                    })?,
                generation: 0,
            }),
        };
        let result = wait_on(waiter, words, fds, timeout);
        if result.is_err() {
            // Closing the ring ends whatever it may still hold; the next call makes a new one.
            *slot = None;
        }
        result.and_then(|woken| woken)
    })
}

/// One wait on `waiter`'s ring. The outer error means the ring is in an unknown state (the
/// caller drops it); the inner one is a failed request, reaped with everything else.
fn wait_on(
    waiter: &mut Waiter,
    words: &[(&AtomicU32, u32)],
    fds: &[BorrowedFd<'_>],
    timeout: Duration,
) -> io::Result<io::Result<()>> {
    waiter.generation = waiter.generation.wrapping_add(1);
    let generation = u64::from(waiter.generation) << 32;
    let ring = &mut waiter.ring;
    let vector: Vec<types::FutexWaitV> = words
        .iter()
        .map(|(w, v)| {
            types::FutexWaitV::new()
                .val(u64::from(*v))
                .uaddr(w.as_ptr() as u64)
                .flags(FUTEX2_SIZE_U32)
        })
        .collect();
    let mut entries = Vec::with_capacity(fds.len() + 1);
    if !vector.is_empty() {
        entries.push(
            opcode::FutexWaitV::new(vector.as_ptr(), vector.len() as u32)
                .build()
                .user_data(generation | FUTEX_INDEX),
        );
    }
    let events = (libc::POLLIN | libc::POLLRDHUP) as u32;
    for (i, fd) in fds.iter().enumerate() {
        entries.push(
            opcode::PollAdd::new(types::Fd(fd.as_raw_fd()), events)
                .build()
                .user_data(generation | (i as u64 + 1)),
        );
    }
    // SAFETY: the ring has room for every entry (at least `fds.len() + 2` entries, and its
    // submission queue is empty: every earlier call submitted all it pushed). The futex
    // vector lives until this function returns, by which time every request was reaped (or
    // the caller closes the ring); the kernel also copies it when it prepares the request
    // (at submission). A poll refers to no memory of this process; the descriptors are
    // borrowed for the call, and a descriptor closed meanwhile only ends its poll.
    unsafe {
        ring.submission()
            .push_multiple(&entries)
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    let mut armed = entries.len();
    let ts = types::Timespec::from(timeout);
    let args = types::SubmitArgs::new().timespec(&ts);
    match ring.submitter().submit_with_args(1, &args) {
        Ok(_) => {}
        Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {}
        Err(e) => return Err(e),
    }
    if !ring.submission().is_empty() {
        return Err(io::Error::other("io_uring left wait requests unsubmitted"));
    }
    let mut failed = None;
    reap(ring, generation, &mut armed, &mut failed, fds);
    if armed > 0 {
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(generation | CANCEL_INDEX);
        // SAFETY: the submission queue is empty (checked above) and the cancellation refers to
        // no memory.
        unsafe {
            ring.submission()
                .push(&cancel)
                .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        }
        // The cancellation completes too: wait for its completion as for the others.
        armed += 1;
        let deadline = Instant::now() + REAP_BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{armed} cancelled io_uring wait requests did not complete"),
                ));
            }
            let ts = types::Timespec::from(left);
            let args = types::SubmitArgs::new().timespec(&ts);
            match ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {}
                Err(e) => return Err(e),
            }
            reap(ring, generation, &mut armed, &mut failed, fds);
            if armed == 0 {
                break;
            }
        }
    }
    Ok(match failed {
        Some(e) => Err(e),
        None => Ok(()),
    })
}

/// Takes the completions of this call's requests (`generation`), counting down `armed`, and
/// keeps the first error of a request in `failed`.
fn reap(
    ring: &mut IoUring,
    generation: u64,
    armed: &mut usize,
    failed: &mut Option<io::Error>,
    fds: &[BorrowedFd<'_>],
) {
    for cqe in ring.completion() {
        let data = cqe.user_data();
        if data & !u64::from(u32::MAX) != generation {
            continue;
        }
        let index = data & u64::from(u32::MAX);
        *armed = armed.saturating_sub(1);
        let res = cqe.result();
        if res >= 0 || index == CANCEL_INDEX {
            // A cancellation reports how many it ended, or that none was left (ENOENT).
            continue;
        }
        let errno = -res;
        let expected = if index == FUTEX_INDEX {
            // EAGAIN: a word no longer held its value (a ring); ECANCELED: cancelled here.
            matches!(
                errno,
                libc::EAGAIN | libc::ECANCELED | libc::EINTR | libc::ETIMEDOUT
            )
        } else {
            matches!(errno, libc::ECANCELED | libc::EINTR)
        };
        if !expected && failed.is_none() {
            let what = if index == FUTEX_INDEX {
                "the futex wait".to_owned()
            } else {
                let fd = fds
                    .get(index as usize - 1)
                    .map(|f| f.as_raw_fd())
                    .unwrap_or(-1);
                format!("the poll on descriptor {fd}")
            };
            let e = io::Error::from_raw_os_error(errno);
            *failed = Some(io::Error::new(e.kind(), format!("{what} failed: {e}")));
        }
    }
}

/// Longest turn on each kind when [`sleepers_or_readable`] sleeps in turns (where the kernel
/// lacks what [`any`] needs).
pub const MIXED_TURN: Duration = Duration::from_micros(500);

/// Sleeps until any of the shared-memory `sleepers` is rung, any of `fds` is readable (as
/// [`crate::fd::wait_readable`]), a signal, or `timeout` (at most the shortest
/// [`shm::Sleeper::longest`]): one kernel wait over both kinds ([`any`]: one
/// `FUTEX_WAITV` over the bells, up to [`shm::MAX_BELLS`], and one poll per descriptor).
/// Each sleeper counts its side asleep in the segment while it lives, so its peer rings the
/// bell; the value the wait expects is the one read when the sleep was prepared, so a ring
/// since then ends the sleep at once (the same protocol as [`shm::sleep_any`]).
///
/// Where the kernel lacks `IORING_OP_FUTEX_WAITV` (before Linux 6.7, see [`supported`]), it
/// takes one turn of at most [`MIXED_TURN`] on the bells, then one on the descriptors, and
/// returns: a caller that sleeps again when nothing came then wakes about 2000 times a second
/// while idle, and a wake-up on the kind it is not sleeping on waits up to one turn.
///
/// # Errors
/// [`shm::Error::Wait`] with the error of the wait (e.g. a poll on a closed descriptor).
///
/// ```
/// use std::io::Write;
/// use std::os::fd::AsFd;
/// use std::os::unix::net::UnixStream;
/// use std::time::Duration;
/// use viaduct_fallback::{shm, wait};
/// let (_a, mut b) = shm::pair(shm::Config::default())?;
/// let sleeper = b.sleeper()?.expect("nothing sent yet");
/// let (mut s, r) = UnixStream::pair()?;
/// s.write_all(b"x")?;
/// // Returns at once: a byte waits on `r`.
/// wait::sleepers_or_readable(&[&sleeper], &[r.as_fd()], Duration::from_secs(10))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn sleepers_or_readable(
    sleepers: &[&shm::Sleeper],
    fds: &[BorrowedFd<'_>],
    timeout: Duration,
) -> Result<(), shm::Error> {
    let timeout = sleepers
        .iter()
        .map(|s| s.longest())
        .fold(timeout, Duration::min);
    if supported() {
        let bells: Vec<(&AtomicU32, u32)> = sleepers
            .iter()
            .take(shm::MAX_BELLS)
            .map(|s| s.bell_and_seen())
            .collect();
        return any(&bells, fds, timeout).map_err(shm::Error::Wait);
    }
    let turn = if !sleepers.is_empty() && !fds.is_empty() {
        timeout.min(MIXED_TURN)
    } else {
        timeout
    };
    shm::sleep_any(sleepers, turn)?;
    if !fds.is_empty() && !sleepers.iter().any(|s| s.rung()) {
        crate::fd::wait_readable(fds, turn).map_err(shm::Error::Wait)?;
    }
    Ok(())
}
