//! [`Link`]: one connection of the demo's mesh, over the shared-memory or the TCP method.
//!
//! Both methods keep the method contract ([`viaduct_method::Endpoint`]: post a descriptor, one
//! completion per descriptor, read inbound messages in place with `next`/`consume`); a private
//! enum picks the method and each operation is one generic function over the contract, so the
//! stages of the demo are written once for both.

use std::time::Duration;

use viaduct_fallback::{shm, tcp};
use viaduct_method::Endpoint as Method;

use super::error::DemoError;

/// Runs `$body` on the endpoint `$ep` names, whichever method it is, and tags its error with
/// the method.
macro_rules! on_endpoint {
    ($endpoint:expr, |$ep:ident| $body:expr) => {
        match $endpoint {
            Endpoint::Shm($ep) => $body.map_err(MethodError::Shm),
            Endpoint::Tcp($ep) => $body.map_err(MethodError::Tcp),
        }
    };
}

/// The method behind a [`Link`] (boxed: the endpoints are large and of different sizes).
enum Endpoint {
    Shm(Box<shm::Endpoint>),
    Tcp(Box<tcp::Endpoint>),
}

/// A connection to one peer rank, counting its sends until their completions are seen.
pub struct Link {
    peer: u32,
    endpoint: Endpoint,
    /// Sends posted whose completion has not been polled yet.
    outstanding: usize,
    next_id: u64,
}

impl Link {
    /// A link to `peer` over a shared-memory endpoint.
    pub fn shm(peer: u32, endpoint: shm::Endpoint) -> Self {
        Self::new(peer, Endpoint::Shm(Box::new(endpoint)))
    }

    /// A link to `peer` over a TCP endpoint.
    pub fn tcp(peer: u32, endpoint: tcp::Endpoint) -> Self {
        Self::new(peer, Endpoint::Tcp(Box::new(endpoint)))
    }

    fn new(peer: u32, endpoint: Endpoint) -> Self {
        Self {
            peer,
            endpoint,
            outstanding: 0,
            next_id: 0,
        }
    }

    fn shm_err(&self, source: shm::Error) -> DemoError {
        DemoError::Shm {
            peer: self.peer,
            source,
        }
    }

    fn tcp_err(&self, source: tcp::Error) -> DemoError {
        DemoError::Tcp {
            peer: self.peer,
            source,
        }
    }

    /// Posts a copy of `data` with `tag`; false when the method has no resources now.
    pub fn try_send(&mut self, tag: u64, data: &[u8]) -> Result<bool, DemoError> {
        let id = self.next_id;
        let posted = on_endpoint!(&mut self.endpoint, |ep| ep
            .post_copy(id, tag, data)
            .map(|p| p.is_posted()));
        let posted = posted.map_err(|e| self.method_err(e))?;
        if posted {
            self.next_id += 1;
            self.outstanding += 1;
        }
        Ok(posted)
    }

    /// Reaps the completions of earlier sends; the first failed one is an error.
    pub fn reap(&mut self) -> Result<(), DemoError> {
        while let Some(()) = on_endpoint!(&mut self.endpoint, |ep| reap_one(&mut **ep))
            .map_err(|e| self.method_err(e))?
        {
            self.outstanding = self.outstanding.saturating_sub(1);
        }
        Ok(())
    }

    /// Names the peer once it is known (an accepted connection names it in its first message).
    pub fn set_peer(&mut self, peer: u32) {
        self.peer = peer;
    }

    /// Sends posted and not yet completed.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Hands the next inbound message (tag, bytes) to `f` and consumes it; `None` when no
    /// message is ready.
    pub fn try_recv<R>(
        &mut self,
        f: &mut dyn FnMut(u64, &[u8]) -> R,
    ) -> Result<Option<R>, DemoError> {
        on_endpoint!(&mut self.endpoint, |ep| recv_one(&mut **ep, f))
            .map_err(|e| self.method_err(e))
    }

    /// Sleeps in the method's own wait (futex or io_uring) until something may be ready, at
    /// most `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Result<(), DemoError> {
        on_endpoint!(&mut self.endpoint, |ep| Method::wait(&mut **ep, timeout))
            .map_err(|e| self.method_err(e))
    }

    /// How long messages travel on this link, for the report.
    pub fn note(&self) -> String {
        match &self.endpoint {
            Endpoint::Shm(ep) => match ep.long_messages() {
                shm::LongMessages::SingleCopy => "long messages by process_vm_readv".into(),
                shm::LongMessages::RingChunks => "long messages in ring chunks".into(),
            },
            Endpoint::Tcp(ep) => match ep.config().zero_copy_threshold {
                usize::MAX => "io_uring, copying sends".into(),
                t => format!("io_uring, SEND_ZC from {t} B"),
            },
        }
    }

    fn method_err(&self, e: MethodError) -> DemoError {
        match e {
            MethodError::Shm(e) => self.shm_err(e),
            MethodError::Tcp(e) => self.tcp_err(e),
        }
    }
}

/// Takes one completion, if any: `Some(())` for a send that succeeded.
fn reap_one<E: Method>(ep: &mut E) -> Result<Option<()>, E::Error> {
    ep.poll().map(|c| c.result.map(drop)).transpose()
}

/// Hands the next inbound message to `f` and consumes it whole.
fn recv_one<E: Method, R>(
    ep: &mut E,
    f: &mut dyn FnMut(u64, &[u8]) -> R,
) -> Result<Option<R>, E::Error> {
    let Some((r, len)) = ep.next()?.map(|m| (f(m.tag, m.data), m.data.len())) else {
        return Ok(None);
    };
    ep.consume(len)?;
    Ok(Some(r))
}

/// Either method's error, before the peer is attached.
enum MethodError {
    Shm(shm::Error),
    Tcp(tcp::Error),
}
