//! Methods: the transports behind the agent's VCs, and the contract each one keeps.
//!
//! # The method contract
//!
//! Every method the agent drives provides, on one connection to one peer:
//!
//! - **post**: `post(id, tag, buffer)` hands an owned buffer to the method. It answers
//!   *accepted* (exactly one completion carrying `id` follows, success or error) or *no
//!   resources* (the buffer comes back untouched; try again after progress). Neither is an
//!   error. Messages posted on one connection arrive in post order.
//! - **poll**: `poll()` makes progress without blocking and hands out the next completion.
//!   After a failure, every accepted descriptor still completes, with the error (flush).
//! - **next / consume**: `next()` borrows the unconsumed bytes of the current inbound message
//!   *in place*, in the method's own receive memory (a shared-memory ring cell, a receive
//!   buffer of the io_uring provided-buffer ring; a reassembly buffer of the method when a
//!   message spans receive buffers: that one copy is the method's, and stated in its docs).
//!   `consume(n)` gives `n` bytes back; the method reuses the memory once the message is
//!   consumed whole (the verbs method shows a message in the registered receive buffer it
//!   landed in, and re-posts that buffer then). After the peer failed, messages that arrived before still come out, then
//!   `next` reports the failure.
//! - **lend / give_back**: `lend()` hands the current inbound message out of the method as an
//!   owned lease that shows it in place (shared memory: the ring record, kept unreleased, with
//!   the segment mapping kept alive; TCP: the receive buffer itself, taken out of the endpoint;
//!   either: the reassembly buffer, taken) and may outlive the lock, the connection and the
//!   agent; until `give_back(lease)` consumes it, `next` shows nothing and `consume` refuses,
//!   while sends and completions go on, and a sleeper does not count the waiting inbound bytes
//!   as work. Verbs copies the message once instead (its receive slot is re-posted at once).
//!   The agent lends to in-place receives ([`crate::in_place`]).
//! - **wait**: `wait(timeout)` blocks until a completion or inbound message may be ready, the
//!   peer failed, or the timeout passed (each method spins briefly, then sleeps on its own
//!   kernel object: a futex word in the shared segment, `io_uring_enter`).
//! - **sleeper**: `sleeper()` prepares the same sleep for a thread that does not hold the
//!   connection (the agent's blocking progress, which sleeps without its mutex): `None` when
//!   something is ready, else a sleeper on the futex word, the socket and ring descriptors, or
//!   the completion channel; `sleep_all` sleeps on the sleepers of every VC at once.
//! - **failure detection**: a peer that dies or closes is noticed within a bounded time (the
//!   shared-memory method's liveness interval; TCP end-of-stream at once, `TCP_USER_TIMEOUT`
//!   for a silent peer; for verbs a keepalive RDMA WRITE when idle, so a dead peer shows as
//!   transport retry exceeded), after which every outstanding descriptor completes with an
//!   error.
//! - **heartbeat**: shared memory and TCP show whether the peer is alive (`peer_heard`: the
//!   last time its heartbeat counters in the segment, bumped by its progress engine and by its
//!   agent's heartbeat thread, or its keepalive frames and data on the connection, advanced);
//!   for TCP the agent adds the peer's liveness datagrams (see [`crate::config`], "Peer liveness"). The agent
//!   fails a VC whose peer stays silent for `Config::peer_timeout` while it waits on that peer
//!   (see [`crate::config`], "Peer liveness"). A stopped process's kernel still acknowledges
//!   TCP and its memory still holds the segment, so only this catches it.
//!
//! The self loop (a rank sending to itself) has no connection: the agent matches such messages
//! directly (one copy, from the send buffer into the receive buffer or the unexpected queue).
//!
//! Dispatch is a private enum (`Method`), not a trait object: the hot path is a `match`.
//! The verbs method (RC queue pairs, `viaduct_verbs::msg`) is built with the `rdma` feature
//! (on by default) and serves a peer when both ranks have an active RDMA device and
//! `VIADUCT_TRANSPORT` lists `verbs` before the other methods that could serve it (see
//! [`crate::config`]).

use std::time::Duration;

use viaduct_fallback::sendbuf::SendBuf;
use viaduct_fallback::{shm, tcp};
#[cfg(feature = "rdma")]
use viaduct_verbs::msg;

#[cfg(feature = "rdma")]
pub(crate) mod verbs;

pub(crate) mod rndv;

use crate::config::{Config, MethodKind};

/// An error of a method (carries the method's own error and errno).
#[derive(Debug, thiserror::Error)]
pub enum MethodError {
    /// The shared-memory method failed.
    #[error("shared-memory method: {}", crate::error::chain(.0))]
    Shm(#[from] shm::Error),
    /// The TCP method failed.
    #[error("TCP method: {}", crate::error::chain(.0))]
    Tcp(#[from] tcp::Error),
    /// The verbs method failed.
    #[cfg(feature = "rdma")]
    #[error("verbs method: {}", crate::error::chain(.0))]
    Verbs(#[from] msg::Error),
}

impl MethodError {
    /// The errno behind the error.
    pub fn errno(&self) -> i32 {
        match self {
            MethodError::Shm(e) => e.errno(),
            MethodError::Tcp(e) => e.errno(),
            #[cfg(feature = "rdma")]
            MethodError::Verbs(e) => e.errno(),
        }
    }

    /// Whether this error reports a failed peer (as opposed to a local misuse).
    pub fn is_peer_failure(&self) -> bool {
        match self {
            MethodError::Shm(e) => matches!(e, shm::Error::PeerFailed(_)),
            MethodError::Tcp(e) => matches!(e, tcp::Error::PeerFailed(_)),
            #[cfg(feature = "rdma")]
            MethodError::Verbs(e) => matches!(e, msg::Error::PeerFailed(_)),
        }
    }
}

/// A completion with the buffer its descriptor was posted with, if the method hands it back:
/// descriptor id, bytes moved or the error, buffer.
pub(crate) type Returned = (u64, Result<usize, MethodError>, Option<Vec<u8>>);

/// One connection of a VC, over one method.
pub(crate) enum Method {
    Shm(Box<shm::Endpoint>),
    Tcp(Box<tcp::Endpoint>),
    #[cfg(feature = "rdma")]
    Verbs(Box<msg::Endpoint>),
}

impl std::fmt::Debug for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind().name())
    }
}

/// The shared-memory settings the agent uses.
pub(crate) fn shm_config(config: &Config) -> shm::Config {
    shm::Config {
        liveness_interval: config.peer_timeout.min(Duration::from_millis(20)),
        connect_timeout: config.connect_timeout,
        // The agent spins itself (adaptive polling over every VC, see `progress`); a method
        // wait is only entered to sleep.
        spin: 0,
        ring_copy_max: config.shm_ring_copy_max,
        ring_copy_chunk: config.shm_ring_copy_chunk,
        ..shm::Config::default()
    }
}

/// How often the heartbeat thread proves this rank alive to each peer, and how often an idle
/// TCP end sends a keepalive frame: a quarter of the peer timeout (at least 10 ms), so three
/// may be late or lost before the peer gives up on this rank.
pub(crate) fn heartbeat_interval(config: &Config) -> Duration {
    (config.peer_timeout / 4).max(Duration::from_millis(10))
}

/// The TCP settings the agent uses.
pub(crate) fn tcp_config(config: &Config) -> tcp::Config {
    tcp::Config {
        peer_timeout: config.peer_timeout,
        keepalive: Some(heartbeat_interval(config)),
        connect_timeout: config.connect_timeout,
        // As for shared memory: the agent spins, the method only sleeps.
        busy_poll: false,
        ..tcp::Config::default()
    }
}

impl Method {
    pub(crate) fn kind(&self) -> MethodKind {
        match self {
            Method::Shm(_) => MethodKind::Shm,
            Method::Tcp(_) => MethodKind::Tcp,
            #[cfg(feature = "rdma")]
            Method::Verbs(_) => MethodKind::Verbs,
        }
    }

    /// Posts `buf` as one message; `Ok(Some(buf))` gives it back when the method has no
    /// resources now. Shared memory reads a long shared buffer in place (no copy by the
    /// sender); TCP and verbs copy a shared buffer into their send memory when posting it.
    #[inline]
    pub(crate) fn post(
        &mut self,
        id: u64,
        tag: u64,
        buf: SendBuf,
    ) -> Result<Option<SendBuf>, MethodError> {
        match self {
            Method::Shm(ep) => match ep.post_send_any(id, tag, buf)? {
                shm::Posted::InProgress => Ok(None),
                shm::Posted::NoResources(b) => Ok(Some(b)),
            },
            Method::Tcp(ep) => match buf {
                SendBuf::Owned(v) => match ep.post_send_buf(id, tag, v)? {
                    tcp::Posted::InProgress => Ok(None),
                    tcp::Posted::NoResources(b) => Ok(Some(SendBuf::Owned(b))),
                },
                shared => match ep.post_send(id, tag, &shared)? {
                    tcp::Posted::InProgress => Ok(None),
                    tcp::Posted::NoResources(()) => Ok(Some(shared)),
                },
            },
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => match buf {
                SendBuf::Owned(v) => match ep.post_send_buf(id, tag, v)? {
                    msg::Posted::InProgress => Ok(None),
                    msg::Posted::NoResources(b) => Ok(Some(SendBuf::Owned(b))),
                },
                shared => match ep.post_send(id, tag, &shared)? {
                    msg::Posted::InProgress => Ok(None),
                    msg::Posted::NoResources(()) => Ok(Some(shared)),
                },
            },
        }
    }

    /// Posts a copy of `data` as one message; `Ok(false)` when the method has no resources now.
    #[inline]
    pub(crate) fn post_copy(
        &mut self,
        id: u64,
        tag: u64,
        data: &[u8],
    ) -> Result<bool, MethodError> {
        match self {
            Method::Shm(ep) => Ok(ep.post_send(id, tag, data)?.is_posted()),
            Method::Tcp(ep) => Ok(ep.post_send(id, tag, data)?.is_posted()),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => Ok(ep.post_send(id, tag, data)?.is_posted()),
        }
    }

    /// Posts a copy of `parts` (say a header and the data) as one message, gathered with one
    /// copy of each byte straight into the method's send memory: the shared-memory ring cell, the
    /// buffer of an io_uring send, the registered send slot of verbs (a verbs message longer
    /// than one slot goes through an owned buffer, copied into slots as credits allow).
    /// `Ok(false)` when the method has no resources now.
    #[inline]
    pub(crate) fn post_parts(
        &mut self,
        id: u64,
        tag: u64,
        parts: &[&[u8]],
    ) -> Result<bool, MethodError> {
        match self {
            Method::Shm(ep) => Ok(ep.post_send_parts(id, tag, parts)?.is_posted()),
            Method::Tcp(ep) => Ok(ep.post_send_parts(id, tag, parts)?.is_posted()),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => Ok(ep.post_send_parts(id, tag, parts)?.is_posted()),
        }
    }

    /// The next completion: its id and bytes moved, or the error.
    #[inline]
    pub(crate) fn poll(&mut self) -> Option<(u64, Result<usize, MethodError>)> {
        match self {
            Method::Shm(ep) => ep
                .poll()
                .map(|c| (c.id, c.result.map_err(MethodError::from))),
            Method::Tcp(ep) => ep
                .poll()
                .map(|c| (c.id, c.result.map_err(MethodError::from))),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => ep
                .poll()
                .map(|c| (c.id, c.result.map_err(MethodError::from))),
        }
    }

    /// Like [`Method::poll`], also handing back the buffer the descriptor was posted with
    /// (shared memory and TCP hand back the owned buffer of a send; verbs copied it into
    /// registered memory and freed it).
    #[inline]
    pub(crate) fn poll_returning(&mut self) -> Option<Returned> {
        match self {
            Method::Shm(ep) => ep
                .poll()
                .map(|c| (c.id, c.result.map_err(MethodError::from), c.buffer)),
            Method::Tcp(ep) => ep
                .poll()
                .map(|c| (c.id, c.result.map_err(MethodError::from), c.buffer)),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => ep
                .poll()
                .map(|c| (c.id, c.result.map_err(MethodError::from), None)),
        }
    }

    /// Whether the completions that `next`'s pass found can be taken without another pass
    /// ([`Method::poll_after_next`]): true for verbs, whose pass polls the completion queue.
    #[inline]
    pub(crate) fn next_finds_completions(&self) -> bool {
        match self {
            #[cfg(feature = "rdma")]
            Method::Verbs(_) => true,
            _ => false,
        }
    }

    /// Like [`Method::poll_returning`] right after a `next`: verbs hands out the completions
    /// that `next`'s pass found without polling its completion queue again (one queue poll
    /// per turn of a spinning receive, which counts under emulation); shared memory and TCP
    /// poll as usual.
    #[inline]
    pub(crate) fn poll_after_next(&mut self) -> Option<Returned> {
        match self {
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => ep
                .poll_found()
                .map(|c| (c.id, c.result.map_err(MethodError::from), None)),
            _ => self.poll_returning(),
        }
    }

    /// The current inbound message in place (as [`Method::next`]), followed by the messages
    /// queued behind it that the method holds in place at the same time, at most `max` in all:
    /// the shared-memory method shows the send records already in its ring, TCP the messages
    /// lying whole in the same receive buffer; verbs shows the current message only. `consume` still applies to the current message; after
    /// it is consumed whole, `next` brings the following one to the head.
    pub(crate) fn next_many(&mut self, max: usize) -> Result<Vec<(u64, &[u8])>, MethodError> {
        match self {
            Method::Shm(ep) => Ok(ep
                .next_queued(max)?
                .into_iter()
                .map(|m| (m.tag, m.data))
                .collect()),
            Method::Tcp(ep) => Ok(ep
                .next_queued(max)?
                .into_iter()
                .map(|m| (m.tag, m.data))
                .collect()),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => Ok(ep
                .next()?
                .map(|m| (m.tag, m.data))
                .into_iter()
                .take(max)
                .collect()),
        }
    }

    /// The next inbound message in place: its method tag and unconsumed bytes.
    #[inline]
    pub(crate) fn next(&mut self) -> Result<Option<(u64, &[u8])>, MethodError> {
        match self {
            Method::Shm(ep) => Ok(ep.next()?.map(|m| (m.tag, m.data))),
            Method::Tcp(ep) => Ok(ep.next()?.map(|m| (m.tag, m.data))),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => Ok(ep.next()?.map(|m| (m.tag, m.data))),
        }
    }

    /// Gives back `n` bytes shown by `next`.
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) -> Result<(), MethodError> {
        match self {
            Method::Shm(ep) => Ok(ep.consume(n)?),
            Method::Tcp(ep) => Ok(ep.consume(n)?),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => Ok(ep.consume(n)?),
        }
    }

    /// The last time the method saw a sign of life from the peer (its heartbeat or its data),
    /// for the agent's silence check; `None` for verbs, which detects a dead peer itself.
    pub(crate) fn peer_heard(&mut self) -> Option<std::time::Instant> {
        match self {
            Method::Shm(ep) => Some(ep.peer_heard()),
            Method::Tcp(ep) => Some(ep.peer_heard()),
            #[cfg(feature = "rdma")]
            Method::Verbs(_) => None,
        }
    }

    /// Blocks until something may be ready or `timeout` passed.
    pub(crate) fn wait(&mut self, timeout: Duration) -> Result<(), MethodError> {
        match self {
            Method::Shm(ep) => Ok(ep.wait(timeout)?),
            Method::Tcp(ep) => Ok(ep.wait(timeout)?),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => Ok(ep.wait(timeout)?),
        }
    }
}

/// The current inbound message of a connection lent out of its method ([`Method::lend`]):
/// shared memory and TCP show it where it was received, verbs shows a copy.
#[derive(Debug)]
pub(crate) enum Lease {
    /// In place in the inbound ring record (or the reassembly buffer, taken).
    Shm(shm::Lease),
    /// In place in the receive buffer (or the reassembly buffer), taken out of the endpoint.
    Tcp(tcp::Lease),
    /// A copy: the method consumed its message at once (verbs).
    Copy(Vec<u8>),
}

impl std::ops::Deref for Lease {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Lease::Shm(l) => l,
            Lease::Tcp(l) => l,
            Lease::Copy(v) => v,
        }
    }
}

impl Lease {
    /// Whether the method holds the connection's inbound until the lease comes back.
    pub(crate) fn holds(&self) -> bool {
        !matches!(self, Lease::Copy(_))
    }
}

impl Method {
    /// Lends the current inbound message out of the method: shared memory and TCP in place
    /// (their inbound then waits for [`Method::give_back`]), verbs as a copy (its receive slot
    /// is re-posted at once). `Ok(None)` when no message is current.
    pub(crate) fn lend(&mut self) -> Result<Option<Lease>, MethodError> {
        match self {
            Method::Shm(ep) => Ok(ep.lend()?.map(Lease::Shm)),
            Method::Tcp(ep) => Ok(ep.lend()?.map(Lease::Tcp)),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => {
                let Some(copy) = ep.next()?.map(|m| m.data.to_vec()) else {
                    return Ok(None);
                };
                ep.consume(copy.len())?;
                Ok(Some(Lease::Copy(copy)))
            }
        }
    }

    /// Takes back a lease of [`Method::lend`]: the message is consumed and the inbound goes
    /// on. A lease of another connection (or a copy) is dropped.
    pub(crate) fn give_back(&mut self, lease: Lease) -> Result<(), MethodError> {
        match (self, lease) {
            (Method::Shm(ep), Lease::Shm(l)) => Ok(ep.give_back(l)?),
            (Method::Tcp(ep), Lease::Tcp(l)) => Ok(ep.give_back(l)?),
            _ => Ok(()),
        }
    }
}

/// A sleep on one VC's connection, prepared under the agent's lock ([`Method::sleeper`]) and
/// taken without it (see [`crate::progress`], "Threads").
pub(crate) enum Sleeper {
    Shm(shm::Sleeper),
    Tcp(tcp::Sleeper),
    #[cfg(feature = "rdma")]
    Verbs(msg::Sleeper),
}

impl Method {
    /// Prepares a sleep on this connection: `None` when something is ready (or the peer
    /// failed), so that the caller runs a pass instead of sleeping.
    pub(crate) fn sleeper(&mut self) -> Result<Option<Sleeper>, MethodError> {
        match self {
            Method::Shm(ep) => Ok(ep.sleeper()?.map(Sleeper::Shm)),
            Method::Tcp(ep) => Ok(ep.sleeper()?.map(Sleeper::Tcp)),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => Ok(ep.sleeper()?.map(Sleeper::Verbs)),
        }
    }
}

impl Sleeper {
    fn longest(&self) -> Duration {
        match self {
            Sleeper::Shm(s) => s.longest(),
            Sleeper::Tcp(s) => s.longest(),
            #[cfg(feature = "rdma")]
            Sleeper::Verbs(s) => s.longest(),
        }
    }

    fn sleep(&self, timeout: Duration) -> Result<(), MethodError> {
        match self {
            Sleeper::Shm(s) => Ok(s.sleep(timeout)?),
            Sleeper::Tcp(s) => Ok(s.sleep(timeout)?),
            #[cfg(feature = "rdma")]
            Sleeper::Verbs(s) => Ok(s.sleep(timeout)?),
        }
    }
}

/// Longest turn on one kind of kernel object when a rank waits on both kinds (futex words of
/// shared memory, descriptors of TCP and verbs).
const MIXED_TURN: Duration = Duration::from_micros(500);

/// Sleeps until any of `sleepers` may have work, or `timeout` (at most the shortest
/// [`Sleeper::longest`]). One wait covers them all: one `futex_waitv` over the bells of the
/// shared-memory VCs, or one `poll` over the descriptors of the TCP and verbs VCs (sockets,
/// rings, completion channels). A rank with VCs of both kinds takes one turn of at most
/// [`MIXED_TURN`] on each kind and returns. An error names the index of a sleeper it
/// concerns.
pub(crate) fn sleep_all(
    sleepers: &[Sleeper],
    timeout: Duration,
) -> Result<(), (usize, MethodError)> {
    let timeout = sleepers
        .iter()
        .map(Sleeper::longest)
        .fold(timeout, Duration::min);
    if let [one] = sleepers {
        return one.sleep(timeout).map_err(|e| (0, e));
    }
    let mut bells = Vec::new();
    let mut first_bell = 0;
    let mut fds = Vec::new();
    let mut first_fd = 0;
    for (i, s) in sleepers.iter().enumerate() {
        match s {
            Sleeper::Shm(s) => {
                if bells.is_empty() {
                    first_bell = i;
                }
                bells.push(s);
            }
            Sleeper::Tcp(s) => {
                if fds.is_empty() {
                    first_fd = i;
                }
                fds.extend(s.fds());
            }
            #[cfg(feature = "rdma")]
            Sleeper::Verbs(s) => {
                if fds.is_empty() {
                    first_fd = i;
                }
                fds.push(s.fd());
            }
        }
    }
    let turn = if !bells.is_empty() && !fds.is_empty() {
        timeout.min(MIXED_TURN)
    } else {
        timeout
    };
    if !bells.is_empty() {
        shm::sleep_any(&bells, turn).map_err(|e| (first_bell, MethodError::Shm(e)))?;
    }
    if !fds.is_empty() {
        viaduct_fallback::fd::wait_readable(&fds, turn)
            .map_err(|e| (first_fd, MethodError::Tcp(tcp::Error::Wait(e))))?;
    }
    Ok(())
}
