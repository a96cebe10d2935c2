//! [`Link`]: one connection of the demo's mesh, over the shared-memory or the TCP method.
//!
//! Both methods have the same shape (post a descriptor, one completion per descriptor, read
//! inbound messages in place with `next`/`consume`); a private enum picks the method, so the
//! stages of the demo are written once for both.

use std::time::Duration;

use viaduct_fallback::{shm, tcp};

use super::error::DemoError;

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
        let posted = match &mut self.endpoint {
            Endpoint::Shm(ep) => ep
                .post_send(id, tag, data)
                .map(|p| p.is_posted())
                .map_err(MethodError::Shm),
            Endpoint::Tcp(ep) => ep
                .post_send(id, tag, data)
                .map(|p| p.is_posted())
                .map_err(MethodError::Tcp),
        };
        let posted = match posted {
            Ok(p) => p,
            Err(e) => return Err(self.method_err(e)),
        };
        if posted {
            self.next_id += 1;
            self.outstanding += 1;
        }
        Ok(posted)
    }

    /// Reaps the completions of earlier sends; the first failed one is an error.
    pub fn reap(&mut self) -> Result<(), DemoError> {
        loop {
            let done = match &mut self.endpoint {
                Endpoint::Shm(ep) => ep
                    .poll()
                    .map(|c| c.result.map(|_| ()).map_err(MethodError::Shm)),
                Endpoint::Tcp(ep) => ep
                    .poll()
                    .map(|c| c.result.map(|_| ()).map_err(MethodError::Tcp)),
            };
            match done {
                None => return Ok(()),
                Some(result) => {
                    self.outstanding = self.outstanding.saturating_sub(1);
                    result.map_err(|e| self.method_err(e))?;
                }
            }
        }
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
        let got = match &mut self.endpoint {
            Endpoint::Shm(ep) => match ep.next() {
                Ok(Some(m)) => Ok(Some((f(m.tag, m.data), m.data.len()))),
                Ok(None) => Ok(None),
                Err(e) => Err(MethodError::Shm(e)),
            },
            Endpoint::Tcp(ep) => match ep.next() {
                Ok(Some(m)) => Ok(Some((f(m.tag, m.data), m.data.len()))),
                Ok(None) => Ok(None),
                Err(e) => Err(MethodError::Tcp(e)),
            },
        };
        let Some((r, len)) = got.map_err(|e| self.method_err(e))? else {
            return Ok(None);
        };
        let consumed = match &mut self.endpoint {
            Endpoint::Shm(ep) => ep.consume(len).map_err(MethodError::Shm),
            Endpoint::Tcp(ep) => ep.consume(len).map_err(MethodError::Tcp),
        };
        consumed.map_err(|e| self.method_err(e))?;
        Ok(Some(r))
    }

    /// Sleeps in the method's own wait (futex or io_uring) until something may be ready, at
    /// most `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Result<(), DemoError> {
        let r = match &mut self.endpoint {
            Endpoint::Shm(ep) => ep.wait(timeout).map_err(MethodError::Shm),
            Endpoint::Tcp(ep) => ep.wait(timeout).map_err(MethodError::Tcp),
        };
        r.map_err(|e| self.method_err(e))
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

/// Either method's error, before the peer is attached.
enum MethodError {
    Shm(shm::Error),
    Tcp(tcp::Error),
}
