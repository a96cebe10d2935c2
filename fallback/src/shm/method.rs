//! The shared-memory endpoint under the method contract ([`viaduct_method::Endpoint`]): each
//! call forwards to the inherent method of the same meaning.

use std::ops::Range;
use std::time::{Duration, Instant};

use viaduct_method::sendbuf::SendBuf;
use viaduct_method::{Attrs, OneSided};

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
}

impl viaduct_method::Endpoint for Endpoint {
    type Error = Error;
    type Lease = Lease;
    type Sleeper = Sleeper;

    fn attrs(&self) -> Attrs {
        let config = self.config();
        Attrs {
            max_message: config.max_message,
            max_eager: config.eager_limit,
            returns_buffers: true,
            one_sided: OneSided::Emulated,
            registration: true,
            wait_fd: false,
            lend_in_place: true,
            delivered_at_post: true,
            peer_heartbeat: true,
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

    #[inline]
    fn post_buf(&mut self, id: u64, tag: u64, buf: SendBuf) -> Result<Posted<SendBuf>, Error> {
        self.post_send_any(id, tag, buf)
    }

    #[inline]
    fn poll(&mut self) -> Option<Completion> {
        Endpoint::poll(self)
    }

    #[inline]
    fn poll_rest(&mut self) -> Option<Completion> {
        Endpoint::poll_found(self)
    }

    #[inline]
    fn next(&mut self) -> Result<Option<Message<'_>>, Error> {
        Endpoint::next(self)
    }

    #[inline]
    fn next_queued(&mut self, max: usize) -> Result<Vec<Message<'_>>, Error> {
        Endpoint::next_queued(self, max)
    }

    #[inline]
    fn consume(&mut self, n: usize) -> Result<(), Error> {
        Endpoint::consume(self, n)
    }

    #[inline]
    fn lend(&mut self) -> Result<Option<Lease>, Error> {
        Endpoint::lend(self)
    }

    #[inline]
    fn give_back(&mut self, lease: Lease) -> Result<(), Error> {
        Endpoint::give_back(self, lease)
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

    #[inline]
    fn peer_heard(&mut self) -> Option<Instant> {
        Some(Endpoint::peer_heard(self))
    }

    fn receive_buffers(&self) -> Vec<Range<usize>> {
        Endpoint::receive_buffers(self)
    }
}
