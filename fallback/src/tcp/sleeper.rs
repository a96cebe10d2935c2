//! Sleeping on a TCP endpoint's descriptors without holding the endpoint (see
//! [`Endpoint::sleeper`](super::Endpoint::sleeper)).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use super::error::Error;

/// Duplicates of an endpoint's socket and ring descriptors, made once per endpoint.
#[derive(Debug)]
pub(crate) struct WakeFds {
    pub(crate) socket: OwnedFd,
    pub(crate) ring: OwnedFd,
}

/// A sleep on one TCP endpoint, prepared under the endpoint and taken without it, so that
/// other threads may use the endpoint meanwhile: it wakes when the socket has bytes (or the
/// end of the stream, or an error) or the endpoint's ring has completions. It holds
/// duplicates of both descriptors, so the endpoint may go while it sleeps.
#[derive(Debug)]
pub struct Sleeper {
    fds: Arc<WakeFds>,
    /// Whether inbound bytes are read by plain socket calls (so the socket's readability
    /// means work); else the ring's receive reports them.
    socket: bool,
    longest: Duration,
}

impl Sleeper {
    pub(crate) fn new(fds: Arc<WakeFds>, socket: bool, longest: Duration) -> Sleeper {
        Sleeper {
            fds,
            socket,
            longest,
        }
    }

    /// The longest sleep this sleeper takes at once: the keepalive interval, and 1 ms while
    /// operations are in flight in the ring (their completions may wait for task work that
    /// only a call into the endpoint runs).
    pub fn longest(&self) -> Duration {
        self.longest
    }

    /// The descriptors to wait on for readability (for a wait on several endpoints at once).
    pub fn fds(&self) -> Vec<BorrowedFd<'_>> {
        if self.socket {
            vec![self.fds.socket.as_fd(), self.fds.ring.as_fd()]
        } else {
            vec![self.fds.ring.as_fd()]
        }
    }

    /// Sleeps until the endpoint may have work, a signal, or `timeout` (at most
    /// [`Sleeper::longest`]).
    pub fn sleep(&self, timeout: Duration) -> Result<(), Error> {
        crate::fd::wait_readable(&self.fds(), timeout.min(self.longest)).map_err(Error::Wait)
    }
}
