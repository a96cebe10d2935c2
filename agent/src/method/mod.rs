//! Methods: the transports behind the agent's VCs, and the contract each one keeps.
//!
//! # The method contract
//!
//! Every method the agent drives keeps the method contract on one connection to one peer:
//! post, poll, next / consume, lend / give_back, wait, sleeper and failure detection, as
//! written on the trait [`viaduct_method::Endpoint`] that the shared-memory, TCP and verbs
//! endpoints implement (with their capabilities stated by `Endpoint::attrs`). What the agent
//! adds:
//!
//! - **lend**: the agent lends to in-place receives ([`crate::in_place`]); a lease may outlive
//!   the lock, the connection and the agent.
//! - **sleeper**: the agent's blocking progress sleeps without its mutex on the sleepers of
//!   every VC at once (`sleep_all`: one `futex_waitv` over the shared-memory bells, one `poll`
//!   over the descriptors of TCP and verbs, one io_uring wait over both kinds where a rank has
//!   both).
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
//! Dispatch is a private enum (`Method`), not a trait object: each operation is one generic
//! body over the contract, expanded per method by one macro (`each_method!`), so the hot path
//! is a `match` and a direct call of the method's own code.
//! The verbs method (RC queue pairs, `viaduct_verbs::msg`) is built with the `rdma` feature
//! (on by default) and serves a peer when both ranks have an active RDMA device and
//! `VIADUCT_TRANSPORT` lists `verbs` before the other methods that could serve it (see
//! [`crate::config`]).

use std::time::Duration;

use viaduct_fallback::{shm, tcp};
use viaduct_method::sendbuf::SendBuf;
use viaduct_method::{Endpoint, EndpointError, Posted, Sleeper as MethodSleeper};
#[cfg(feature = "rdma")]
use viaduct_verbs::msg;

#[cfg(feature = "rdma")]
pub(crate) mod verbs;

use crate::config::{Config, MethodKind};

pub use crate::error::method_error::MethodError;

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

/// Runs `$body` with `$ep` bound to the endpoint of whichever method `$method` (a
/// `&mut Method`) holds: one generic body over the method contract, expanded once per method,
/// so each arm is a direct call of that method's own code (no trait object).
macro_rules! each_method {
    ($method:expr, |$ep:ident| $body:expr) => {
        match $method {
            Method::Shm(b) => {
                let $ep = &mut **b;
                $body
            }
            Method::Tcp(b) => {
                let $ep = &mut **b;
                $body
            }
            #[cfg(feature = "rdma")]
            Method::Verbs(b) => {
                let $ep = &mut **b;
                $body
            }
        }
    };
}

/// Posts `buf` through the contract; `Some(buf)` when the method has no resources now.
#[inline]
fn post_on<E: Endpoint>(
    ep: &mut E,
    id: u64,
    tag: u64,
    buf: SendBuf,
) -> Result<Option<SendBuf>, MethodError>
where
    MethodError: From<E::Error>,
{
    Ok(match ep.post_buf(id, tag, buf)? {
        Posted::InProgress => None,
        Posted::NoResources(b) => Some(b),
    })
}

/// A completion with the method's error widened.
#[inline]
fn returned<E: EndpointError>(c: viaduct_method::Completion<E>) -> Returned
where
    MethodError: From<E>,
{
    (c.id, c.result.map_err(MethodError::from), c.buffer)
}

/// The current inbound message and the ones behind it, as (tag, bytes).
fn next_many_on<E: Endpoint>(ep: &mut E, max: usize) -> Result<Vec<(u64, &[u8])>, MethodError>
where
    MethodError: From<E::Error>,
{
    Ok(ep
        .next_queued(max)?
        .into_iter()
        .map(|m| (m.tag, m.data))
        .collect())
}

/// The current inbound message, as (tag, bytes).
#[inline]
fn next_on<E: Endpoint>(ep: &mut E) -> Result<Option<(u64, &[u8])>, MethodError>
where
    MethodError: From<E::Error>,
{
    Ok(ep.next()?.map(|m| (m.tag, m.data)))
}

impl Method {
    /// A verbs connection's receive memory: bytes registered for it alone, and the shared
    /// receive pool it draws from (`None` for other methods).
    #[cfg(feature = "rdma")]
    pub(crate) fn verbs_receive(&self) -> Option<(usize, Option<msg::ReceivePool>)> {
        match self {
            Method::Verbs(ep) => Some((ep.own_receive_bytes(), ep.pool().cloned())),
            _ => None,
        }
    }

    pub(crate) fn kind(&self) -> MethodKind {
        match self {
            Method::Shm(_) => MethodKind::Shm,
            Method::Tcp(_) => MethodKind::Tcp,
            #[cfg(feature = "rdma")]
            Method::Verbs(_) => MethodKind::Verbs,
        }
    }

    /// The largest rendezvous piece for a message of `len` bytes over this method, given the
    /// configured `chunk`. Over shared memory a message up to the method's ring-copy limit
    /// (`shm::Config::ring_copy_max`) goes in pieces of one ring record each
    /// (`shm::Config::eager_limit`), which the ring pipelines: the sender copies a piece in
    /// while the receiver copies the one before straight into the receive buffer. (Longer
    /// pieces would be reassembled in the method's buffer and copied once more: a 4 MiB
    /// ping-pong took 630-720 us that way, 200-225 us in ring pieces.) A longer message keeps
    /// `chunk`, so that the method's single copy lets the receiver pull the data while the
    /// sender computes. Where the peer may read this process, such a message is one piece
    /// (up to the method's longest message): its data then lies in one range, which the
    /// receiver reads in place (`RTS_READ`, see [`crate::engine::read_rndv`]). TCP and verbs
    /// take `chunk` as it is.
    pub(crate) fn rendezvous_piece(&self, len: usize, chunk: usize) -> usize {
        match self {
            // Where the peer may not read this process, ring pieces are the one way without
            // a reassembly copy, whatever the length.
            Method::Shm(ep)
                if len <= ep.config().ring_copy_max
                    || ep.long_messages() != shm::LongMessages::SingleCopy =>
            {
                chunk.min(ep.config().eager_limit)
            }
            Method::Shm(ep) => {
                // Bounded by the method's longest message, which a piece of a send that
                // goes without the announcement (one bound to a marker) must respect.
                len.min(ep.config().max_message).max(chunk)
            }
            _ => chunk,
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
        if let Method::Shm(ep) = self {
            // A rendezvous piece longer than one ring record belongs to a message past the
            // ring-copy limit (see `rendezvous_piece`): it goes by single copy whatever its own
            // length, not as a ring copy reassembled and copied once more.
            if buf.len() > ep.config().eager_limit
                && matches!(crate::wire::split_tag(tag).0, Ok(crate::wire::Kind::Data))
            {
                return Ok(match ep.post_send_single_copy(id, tag, buf)? {
                    Posted::InProgress => None,
                    Posted::NoResources(b) => Some(b),
                });
            }
        }
        each_method!(self, |ep| post_on(ep, id, tag, buf))
    }

    /// Posts a copy of `data` as one message; `Ok(false)` when the method has no resources now.
    #[inline]
    pub(crate) fn post_copy(
        &mut self,
        id: u64,
        tag: u64,
        data: &[u8],
    ) -> Result<bool, MethodError> {
        each_method!(self, |ep| Ok(ep.post_copy(id, tag, data)?.is_posted()))
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
        each_method!(self, |ep| Ok(ep.post_parts(id, tag, parts)?.is_posted()))
    }

    /// The next completion: its id and bytes moved, or the error.
    #[inline]
    pub(crate) fn poll(&mut self) -> Option<(u64, Result<usize, MethodError>)> {
        self.poll_returning().map(|(id, result, _)| (id, result))
    }

    /// Like [`Method::poll`], also handing back the buffer the descriptor was posted with
    /// (shared memory and TCP hand back the owned buffer of a send; verbs copied it into
    /// registered memory and freed it).
    #[inline]
    pub(crate) fn poll_returning(&mut self) -> Option<Returned> {
        each_method!(self, |ep| Endpoint::poll(ep).map(returned))
    }

    /// The rest of the completions after a [`Method::poll_returning`] that returned one (see
    /// `viaduct_method::Endpoint::poll_rest`: shared memory takes them without another pass).
    #[inline]
    pub(crate) fn poll_rest(&mut self) -> Option<Returned> {
        each_method!(self, |ep| ep.poll_rest().map(returned))
    }

    /// Whether the completions that `next`'s pass found can be taken without another pass
    /// ([`Method::poll_after_next`]): true for verbs, whose pass polls the completion queue.
    #[inline]
    pub(crate) fn next_finds_completions(&self) -> bool {
        fn finds<E: Endpoint>(_: &E) -> bool {
            E::NEXT_FINDS_COMPLETIONS
        }
        match self {
            Method::Shm(ep) => finds(&**ep),
            Method::Tcp(ep) => finds(&**ep),
            #[cfg(feature = "rdma")]
            Method::Verbs(ep) => finds(&**ep),
        }
    }

    /// Like [`Method::poll_returning`] right after a `next`: verbs hands out the completions
    /// that `next`'s pass found without polling its completion queue again (one queue poll
    /// per turn of a spinning receive, which counts under emulation); shared memory and TCP
    /// poll as usual.
    #[inline]
    pub(crate) fn poll_after_next(&mut self) -> Option<Returned> {
        each_method!(self, |ep| ep.poll_after_next().map(returned))
    }

    /// The current inbound message in place (as [`Method::next`]), followed by the messages
    /// queued behind it that the method holds in place at the same time, at most `max` in all:
    /// the shared-memory method shows the send records already in its ring, TCP the messages
    /// lying whole in the same receive buffer; verbs shows the current message only. `consume` still applies to the current message; after
    /// it is consumed whole, `next` brings the following one to the head.
    pub(crate) fn next_many(&mut self, max: usize) -> Result<Vec<(u64, &[u8])>, MethodError> {
        each_method!(self, |ep| next_many_on(ep, max))
    }

    /// The next inbound message in place: its method tag and unconsumed bytes.
    #[inline]
    pub(crate) fn next(&mut self) -> Result<Option<(u64, &[u8])>, MethodError> {
        each_method!(self, |ep| next_on(ep))
    }

    /// Gives back `n` bytes shown by `next`.
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) -> Result<(), MethodError> {
        each_method!(self, |ep| Ok(Endpoint::consume(ep, n)?))
    }

    /// The last time the method saw a sign of life from the peer (its heartbeat or its data),
    /// for the agent's silence check; `None` for verbs, which detects a dead peer itself.
    pub(crate) fn peer_heard(&mut self) -> Option<std::time::Instant> {
        each_method!(self, |ep| Endpoint::peer_heard(ep))
    }

    /// Blocks until something may be ready or `timeout` passed.
    pub(crate) fn wait(&mut self, timeout: Duration) -> Result<(), MethodError> {
        each_method!(self, |ep| Ok(Endpoint::wait(ep, timeout)?))
    }
}

/// The current inbound message of a connection lent out of its method ([`Method::lend`]),
/// in place: the connection's inbound waits until it comes back ([`Method::give_back`]).
#[derive(Debug)]
pub(crate) enum Lease {
    /// In place in the inbound ring record (or the reassembly buffer, taken).
    Shm(shm::Lease),
    /// In place in the receive buffer (or the reassembly buffer), taken out of the endpoint.
    Tcp(tcp::Lease),
    /// In place in the registered receive buffer, taken out of the endpoint (a copy while its
    /// shared receive pool runs low, or the reassembly buffer, taken); its credit goes back
    /// to the peer with it.
    #[cfg(feature = "rdma")]
    Verbs(msg::Lease),
}

impl From<shm::Lease> for Lease {
    fn from(l: shm::Lease) -> Lease {
        Lease::Shm(l)
    }
}

impl From<tcp::Lease> for Lease {
    fn from(l: tcp::Lease) -> Lease {
        Lease::Tcp(l)
    }
}

#[cfg(feature = "rdma")]
impl From<msg::Lease> for Lease {
    fn from(l: msg::Lease) -> Lease {
        Lease::Verbs(l)
    }
}

impl std::ops::Deref for Lease {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Lease::Shm(l) => l,
            Lease::Tcp(l) => l,
            #[cfg(feature = "rdma")]
            Lease::Verbs(l) => l,
        }
    }
}

impl Lease {
    /// Whether the method holds the connection's inbound until the lease comes back: every
    /// method does.
    pub(crate) fn holds(&self) -> bool {
        true
    }

    /// Whether the bytes lie in the method's receive memory (the ring record, the receive
    /// buffer, the reassembly buffer of shared memory and TCP; the registered receive buffer
    /// of verbs, not its copy made while the shared receive pool ran low).
    pub(crate) fn in_place(&self) -> bool {
        match self {
            Lease::Shm(_) | Lease::Tcp(_) => true,
            #[cfg(feature = "rdma")]
            Lease::Verbs(l) => l.is_in_place(),
        }
    }
}

impl Method {
    /// Lends the current inbound message out of the method, in place (see [`Lease`]); the
    /// inbound then waits for [`Method::give_back`]. `Ok(None)` when no message is current.
    pub(crate) fn lend(&mut self) -> Result<Option<Lease>, MethodError> {
        each_method!(self, |ep| Ok(Endpoint::lend(ep)?.map(Lease::from)))
    }

    /// Takes back a lease of [`Method::lend`]: the message is consumed and the inbound goes
    /// on. A lease of another connection is dropped (it goes back to its own).
    pub(crate) fn give_back(&mut self, lease: Lease) -> Result<(), MethodError> {
        match (self, lease) {
            (Method::Shm(ep), Lease::Shm(l)) => Ok(Endpoint::give_back(&mut **ep, l)?),
            (Method::Tcp(ep), Lease::Tcp(l)) => Ok(Endpoint::give_back(&mut **ep, l)?),
            #[cfg(feature = "rdma")]
            (Method::Verbs(ep), Lease::Verbs(l)) => Ok(Endpoint::give_back(&mut **ep, l)?),
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

impl From<shm::Sleeper> for Sleeper {
    fn from(s: shm::Sleeper) -> Sleeper {
        Sleeper::Shm(s)
    }
}

impl From<tcp::Sleeper> for Sleeper {
    fn from(s: tcp::Sleeper) -> Sleeper {
        Sleeper::Tcp(s)
    }
}

#[cfg(feature = "rdma")]
impl From<msg::Sleeper> for Sleeper {
    fn from(s: msg::Sleeper) -> Sleeper {
        Sleeper::Verbs(s)
    }
}

impl Method {
    /// Prepares a sleep on this connection: `None` when something is ready (or the peer
    /// failed), so that the caller runs a pass instead of sleeping.
    pub(crate) fn sleeper(&mut self) -> Result<Option<Sleeper>, MethodError> {
        each_method!(self, |ep| Ok(Endpoint::sleeper(ep)?.map(Sleeper::from)))
    }
}

impl Sleeper {
    fn longest(&self) -> Duration {
        match self {
            Sleeper::Shm(s) => MethodSleeper::longest(s),
            Sleeper::Tcp(s) => MethodSleeper::longest(s),
            #[cfg(feature = "rdma")]
            Sleeper::Verbs(s) => MethodSleeper::longest(s),
        }
    }

    fn sleep(&self, timeout: Duration) -> Result<(), MethodError> {
        match self {
            Sleeper::Shm(s) => Ok(MethodSleeper::sleep(s, timeout)?),
            Sleeper::Tcp(s) => Ok(MethodSleeper::sleep(s, timeout)?),
            #[cfg(feature = "rdma")]
            Sleeper::Verbs(s) => Ok(MethodSleeper::sleep(s, timeout)?),
        }
    }
}

/// Sleeps until any of `sleepers` may have work, or `timeout` (at most the shortest
/// [`Sleeper::longest`]). One kernel wait covers them all: one `futex_waitv` over the bells of
/// the shared-memory VCs, or one `poll` over the descriptors of the TCP and verbs VCs
/// (sockets, rings, completion channels), or, for a rank with VCs of both kinds, one io_uring
/// wait with one `FUTEX_WAITV` over the bells and one poll per descriptor
/// ([`viaduct_fallback::wait::sleepers_or_readable`]; Linux 6.7 and later). Where the kernel
/// lacks that, a rank with both kinds takes one turn of at most 0.5 ms
/// ([`viaduct_fallback::wait::MIXED_TURN`]) on each kind and returns (said once at the `debug`
/// level of the log). An error names the index of a sleeper it concerns.
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
    match (bells.is_empty(), fds.is_empty()) {
        (false, false) => {
            if !viaduct_fallback::wait::supported() {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    tracing::debug!(
                        "io_uring lacks IORING_OP_FUTEX_WAITV (Linux 6.7+): a rank with shared-memory and other VCs sleeps in turns of at most {:?} on each kind",
                        viaduct_fallback::wait::MIXED_TURN
                    )
                });
            }
            viaduct_fallback::wait::sleepers_or_readable(&bells, &fds, timeout)
                .map_err(|e| (first_bell, MethodError::Shm(e)))
        }
        (false, true) => {
            shm::sleep_any(&bells, timeout).map_err(|e| (first_bell, MethodError::Shm(e)))
        }
        (true, false) => viaduct_fallback::fd::wait_readable(&fds, timeout)
            .map_err(|e| (first_fd, MethodError::Tcp(tcp::Error::Wait(e)))),
        (true, true) => Ok(()),
    }
}
