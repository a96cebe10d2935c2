//! [`Heartbeat`]: proof of life of one side of a connection, from any thread.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::segment::Segment;

/// A cheap handle on one side's background heartbeat counter in a connection's segment
/// (from [`Endpoint::heartbeat`](super::Endpoint::heartbeat)). [`Heartbeat::beat`] is one
/// relaxed atomic add on a line only this side writes; the peer's
/// [`Endpoint::peer_heard`](super::Endpoint::peer_heard) sees it. Beating from a thread
/// that runs independently of the endpoint's user (e.g. every quarter of the peer's timeout)
/// proves that the process is alive while its user computes without polling; a stopped
/// process stops its threads, so its silence still shows.
///
/// The handle keeps the segment mapped: it may outlive the endpoint, and beats after the
/// peer closed reach nobody.
#[derive(Clone)]
pub struct Heartbeat {
    seg: Arc<Segment>,
    side: usize,
}

impl Heartbeat {
    pub(crate) fn new(seg: Arc<Segment>, side: usize) -> Heartbeat {
        Heartbeat { seg, side }
    }

    /// The descriptor of the segment this handle keeps mapped (and closes when it drops the
    /// segment last): a thread that gives itself a descriptor table of its own
    /// ([`crate::fd::own_table_keeping`]) keeps it open there.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.seg.fd().as_fd()
    }

    /// Bumps this side's background heartbeat (never blocks).
    pub fn beat(&self) {
        self.seg.control().beats[self.side]
            .background
            .fetch_add(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heartbeat")
            .field("side", &self.side)
            .finish()
    }
}
