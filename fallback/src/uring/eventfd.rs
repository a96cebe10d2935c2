//! An eventfd that the kernel signals when completions are posted to a ring.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use super::error::UringError;

/// A nonblocking, close-on-exec eventfd.
///
/// When registered with a ring (see [`super::RingConfig::eventfd`]) the kernel adds to its counter
/// for every completion posted, so a thread can block in `poll`/`epoll` on [`AsFd::as_fd`] until
/// the ring has something to reap. Readiness is level-triggered: call [`EventFd::clear`] before
/// reaping, not after, so that no completion slips between the two.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// Creates a nonblocking eventfd with counter 0.
    pub fn new() -> Result<Self, UringError> {
        // SAFETY: eventfd takes no pointers; it returns a new descriptor or -1.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(UringError::EventFd(io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Self { fd })
    }

    /// Resets the counter to 0 and returns what it was (0 when nothing was signalled).
    pub fn clear(&self) -> u64 {
        let mut value: u64 = 0;
        // SAFETY: reads exactly 8 bytes into the valid, exclusively borrowed `value`.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&raw mut value).cast::<libc::c_void>(),
                size_of::<u64>(),
            )
        };
        if n == size_of::<u64>() as isize {
            value
        } else {
            0
        }
    }

    /// Blocks until the counter is nonzero or `timeout` passes; `Ok(true)` if it is readable.
    pub fn wait(&self, timeout: std::time::Duration) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        loop {
            // SAFETY: one valid pollfd, exclusively borrowed for the call.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc >= 0 {
                return Ok(rc > 0);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
