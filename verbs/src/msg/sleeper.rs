//! Sleeping on a message endpoint's completion channel without holding the endpoint (see
//! [`Endpoint::sleeper`](super::Endpoint::sleeper)).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

use super::error::Error;
use crate::channel::{CompletionChannel, wait_readable};

/// A sleep on one endpoint's completion channel, prepared under the endpoint (its queue
/// armed) and taken without it, so that other threads may use the endpoint meanwhile. It
/// only waits for the channel to become readable; the endpoint reads the event at its next
/// [`Endpoint::sleeper`](super::Endpoint::sleeper). It holds the channel, so the endpoint may
/// go while it sleeps.
#[derive(Debug)]
pub struct Sleeper {
    channel: CompletionChannel,
    longest: Duration,
}

impl Sleeper {
    pub(super) fn new(channel: CompletionChannel, longest: Duration) -> Sleeper {
        Sleeper { channel, longest }
    }

    /// The longest sleep this sleeper takes at once (until the endpoint's next keepalive is
    /// due).
    pub fn longest(&self) -> Duration {
        self.longest
    }

    /// The descriptor to wait on for readability (for a wait on several endpoints at once).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.channel.as_fd()
    }

    /// Sleeps until the armed queue gets a completion, or `timeout` (at most
    /// [`Sleeper::longest`]).
    pub fn sleep(&self, timeout: Duration) -> Result<(), Error> {
        wait_readable(self.fd().as_raw_fd(), Some(timeout.min(self.longest)))
            .map(|_| ())
            .map_err(|e| Error::Verbs {
                step: "waiting on the completion channel",
                source: crate::Error::GetCqEvent(e),
            })
    }
}
