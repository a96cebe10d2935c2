//! The verbs message endpoint under the method contract ([`viaduct_method::Endpoint`]): each
//! call forwards to the inherent method of the same meaning. A lease is a [`Lease`]: the
//! registered receive buffer itself (see [`Endpoint::lease`]), with the inbound held until it
//! comes back; the peer's liveness is the queue pair's own business
//! (keepalive writes), so `peer_heard` is `None`.

use std::ops::Range;
use std::time::{Duration, Instant};

use viaduct_method::sendbuf::SendBuf;
use viaduct_method::{Attrs, OneSided};

use super::header::HEADER_LEN;
use super::{Completion, Endpoint, Error, Lease, Message, Posted, Sleeper};

impl viaduct_method::EndpointError for Error {
    #[inline]
    fn errno(&self) -> i32 {
        Error::errno(self)
    }

    #[inline]
    fn is_peer_failure(&self) -> bool {
        matches!(self, Error::PeerFailed(_))
    }
}

impl viaduct_method::Sleeper for Sleeper {
    type Error = Error;

    #[inline]
    fn longest(&self) -> Duration {
        Sleeper::longest(self)
    }

    #[inline]
    fn sleep(&self, timeout: Duration) -> Result<(), Error> {
        Sleeper::sleep(self, timeout)
    }

    fn fds(&self) -> Vec<std::os::fd::BorrowedFd<'_>> {
        vec![self.fd()]
    }
}

impl viaduct_method::Endpoint for Endpoint {
    type Error = Error;
    type Lease = Lease;
    type Sleeper = Sleeper;

    /// `next` polls the completion queue, so its completions are taken with
    /// [`Endpoint::poll_found`].
    const NEXT_FINDS_COMPLETIONS: bool = true;

    fn attrs(&self) -> Attrs {
        let config = self.config();
        Attrs {
            max_message: config.max_message,
            max_eager: (config.buffer_bytes as usize).saturating_sub(HEADER_LEN),
            returns_buffers: false,
            one_sided: OneSided::Hardware,
            registration: true,
            wait_fd: true,
            lend_in_place: true,
            delivered_at_post: false,
            peer_heartbeat: false,
        }
    }

    #[inline]
    fn post_parts(&mut self, id: u64, tag: u64, parts: &[&[u8]]) -> Result<Posted, Error> {
        self.post_send_parts(id, tag, parts)
    }

    #[inline]
    fn post_copy(&mut self, id: u64, tag: u64, data: &[u8]) -> Result<Posted, Error> {
        self.post_send(id, tag, data)
    }

    /// An owned buffer is handed over (copied into send slots as credits allow); shared memory
    /// is copied when posted.
    #[inline]
    fn post_buf(&mut self, id: u64, tag: u64, buf: SendBuf) -> Result<Posted<SendBuf>, Error> {
        match buf {
            SendBuf::Owned(v) => Ok(match self.post_send_buf(id, tag, v)? {
                Posted::InProgress => Posted::InProgress,
                Posted::NoResources(b) => Posted::NoResources(SendBuf::Owned(b)),
            }),
            shared => Ok(match self.post_send(id, tag, &shared)? {
                Posted::InProgress => Posted::InProgress,
                Posted::NoResources(()) => Posted::NoResources(shared),
            }),
        }
    }

    #[inline]
    fn poll(&mut self) -> Option<Completion> {
        Endpoint::poll(self)
    }

    #[inline]
    fn poll_after_next(&mut self) -> Option<Completion> {
        self.poll_found()
    }

    #[inline]
    fn next(&mut self) -> Result<Option<Message<'_>>, Error> {
        Endpoint::next(self)
    }

    #[inline]
    fn consume(&mut self, n: usize) -> Result<(), Error> {
        Endpoint::consume(self, n)
    }

    /// The current message in its receive buffer ([`Endpoint::lease`]); `next` shows nothing
    /// until the lease comes back (given back, or dropped: then from the next pass on).
    fn lend(&mut self) -> Result<Option<Lease>, Error> {
        self.lend_holding()
    }

    /// The buffer is posted again and the inbound goes on.
    fn give_back(&mut self, lease: Lease) -> Result<(), Error> {
        Endpoint::give_back(self, lease);
        Ok(())
    }

    #[inline]
    fn wait(&mut self, timeout: Duration) -> Result<(), Error> {
        Endpoint::wait(self, timeout)
    }

    #[inline]
    fn sleeper(&mut self) -> Result<Option<Sleeper>, Error> {
        Endpoint::sleeper(self)
    }

    fn failure(&self) -> Option<&str> {
        Endpoint::failure(self)
    }

    fn peer_heard(&mut self) -> Option<Instant> {
        None
    }

    fn receive_buffers(&self) -> Vec<Range<usize>> {
        Endpoint::receive_buffers(self)
    }
}
