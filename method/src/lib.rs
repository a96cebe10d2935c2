//! The method contract of viaduct as a type: what every transport under the agent provides on
//! one connection to one peer.
//!
//! A *method* is a transport between two processes (shared memory and TCP in
//! `viaduct-fallback`, verbs in `viaduct-verbs`); an *endpoint* is this side of one connection.
//! This crate holds what the methods share:
//!
//! - the trait [`Endpoint`] (post, poll, next / consume, lend / give_back, wait, sleeper,
//!   failure) with its contract written on it, and [`Sleeper`] for a sleep prepared on it;
//! - the descriptor vocabulary: [`Posted`], [`Completion`], [`Op`], [`Message`], and the
//!   memory of a send, [`SendBuf`];
//! - [`Attrs`], the capabilities an endpoint states (largest eager message, whether buffers
//!   come back, one-sided operations, registration, a descriptor to wait on, in-place lend);
//! - [`loopback`], a connected pair of endpoints in one process (failure injectable), and
//!   [`contract`], the contract's tests written once over the trait and instantiated per
//!   method ([`contract_tests!`]).
//!
//! Each method keeps its own error type ([`Endpoint::Error`]); [`EndpointError`] asks of it
//! only an errno and whether it reports a failed peer.
//!
//! # Example: one message over a loopback pair, through the trait
//!
//! ```
//! use std::time::Duration;
//! use viaduct_method::{Endpoint, Posted, loopback};
//!
//! fn ping<E: Endpoint>(a: &mut E, b: &mut E) -> Result<Vec<u8>, E::Error> {
//!     assert!(a.post_parts(1, 42, &[b"pi", b"ng"])?.is_posted());
//!     loop {
//!         if let Some(m) = b.next()? {
//!             let got = m.data.to_vec();
//!             b.consume(got.len())?;
//!             while a.poll().is_none() {
//!                 a.wait(Duration::from_millis(10))?;
//!             }
//!             return Ok(got);
//!         }
//!         b.wait(Duration::from_millis(10))?;
//!     }
//! }
//!
//! let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
//! assert_eq!(ping(&mut a, &mut b)?, b"ping");
//! assert!(a.attrs().lend_in_place);
//! # Ok::<(), viaduct_method::loopback::Error>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::ops::{Deref, Range};
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

pub mod contract;
pub mod loopback;
pub mod sendbuf;

use sendbuf::SendBuf;

/// What a descriptor asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A two-sided message.
    Send,
    /// An RDMA write (emulated by the fallback methods).
    Write,
    /// An RDMA read (emulated by the fallback methods).
    Read,
}

/// The status of a post: accepted (its completion comes later through `poll`), or no resources
/// now (try again after progress). Neither is an error.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Posted<B = ()> {
    /// Accepted; exactly one [`Completion`] with its id follows.
    InProgress,
    /// Not accepted: the method has no room now (a ring, a window, the peer's receive buffers
    /// or the table of outstanding operations is full). The buffer handed over, if any, comes
    /// back untouched.
    NoResources(B),
}

impl<B> Posted<B> {
    /// Whether the descriptor was accepted.
    #[inline]
    pub fn is_posted(&self) -> bool {
        matches!(self, Posted::InProgress)
    }
}

/// The one completion of an accepted descriptor, with the method's error type `E`.
#[derive(Debug)]
pub struct Completion<E> {
    /// The id given when the descriptor was posted.
    pub id: u64,
    /// What the descriptor asked for.
    pub op: Op,
    /// Bytes moved, or why the descriptor failed.
    pub result: Result<usize, E>,
    /// The buffer handed over at post time (for reads, filled with the bytes read), where the
    /// method gives it back ([`Attrs::returns_buffers`]).
    pub buffer: Option<Vec<u8>>,
}

/// A message shown by [`Endpoint::next`]: its tag and the bytes not consumed yet, borrowed in
/// place from the method's receive memory (or from its reassembly buffer, for a message that
/// spans receive buffers).
#[derive(Debug)]
pub struct Message<'a> {
    /// The sender's tag.
    pub tag: u64,
    /// Bytes of the message not consumed yet.
    pub data: &'a [u8],
}

/// How an endpoint offers one-sided operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneSided {
    /// None.
    None,
    /// Emulated: requests served by the peer's progress calls (the fallback methods).
    Emulated,
    /// By the hardware (RDMA READ and WRITE of verbs).
    Hardware,
}

/// What an endpoint can do, stated once ([`Endpoint::attrs`]) in the manner of the interface
/// attributes of a transport layer: callers choose a path from these instead of asking which
/// method they hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    /// The largest message the endpoint accepts.
    pub max_message: usize,
    /// The largest message carried eagerly: copied into the method's memory at post and shown
    /// in place at the receiver. Longer ones go by rendezvous or in fragments.
    pub max_eager: usize,
    /// Whether a completion gives back the owned buffer of a send ([`Completion::buffer`]).
    pub returns_buffers: bool,
    /// One-sided write and read.
    pub one_sided: OneSided,
    /// Whether one-sided operations need memory registered first.
    pub registration: bool,
    /// Whether a [`Sleeper`] of the endpoint offers file descriptors to wait on
    /// ([`Sleeper::fds`]), so that it can be polled together with other descriptors.
    pub wait_fd: bool,
    /// Whether [`Endpoint::lend`] lends the message in place (else it lends a copy).
    pub lend_in_place: bool,
    /// Whether a small send is in the receiver's view as soon as the post returns, with no
    /// further progress by the sender.
    pub delivered_at_post: bool,
    /// Whether [`Endpoint::peer_heard`] tells when the peer was last heard from.
    pub peer_heartbeat: bool,
}

/// What the contract asks of a method's error type.
pub trait EndpointError: std::error::Error + Send + Sync + 'static {
    /// The errno behind the error.
    fn errno(&self) -> i32;
    /// Whether the error reports a failed peer (as opposed to a local misuse).
    fn is_peer_failure(&self) -> bool;
}

/// A sleep prepared on an endpoint ([`Endpoint::sleeper`]) for a thread that does not hold it.
pub trait Sleeper {
    /// The method's error.
    type Error: EndpointError;
    /// The longest the sleep may last before the endpoint needs a pass (a method's own
    /// liveness or keepalive interval).
    fn longest(&self) -> Duration;
    /// Sleeps until the endpoint may have work, or `timeout`.
    fn sleep(&self, timeout: Duration) -> Result<(), Self::Error>;
    /// The descriptors that become readable when the endpoint may have work (empty where the
    /// sleep is on something else, such as a futex word; see [`Attrs::wait_fd`]).
    fn fds(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
}

/// One connection to one peer, over one method: the method contract.
///
/// - **post**: [`post_parts`](Endpoint::post_parts) (a copy of gathered parts, say a header
///   and the data, with one copy of each byte straight into the method's send memory) and
///   [`post_buf`](Endpoint::post_buf) (a buffer owned by or shared with the method) post one
///   message. A post answers *accepted* ([`Posted::InProgress`]: exactly one completion
///   carrying `id` follows, success or error) or *no resources* ([`Posted::NoResources`]: the
///   buffer comes back untouched; try again after progress). Neither is an error. Messages
///   posted on one connection arrive in post order.
/// - **poll**: [`poll`](Endpoint::poll) makes progress without blocking and hands out the next
///   completion. After a failure, every accepted descriptor still completes, with the error
///   (flush).
/// - **next / consume**: [`next`](Endpoint::next) borrows the unconsumed bytes of the current
///   inbound message *in place*, in the method's own receive memory (a shared-memory ring
///   cell, a receive buffer of the io_uring provided-buffer ring, a registered verbs receive
///   buffer; a reassembly buffer of the method when a message spans receive buffers: that one
///   copy is the method's, and stated in its docs). [`consume`](Endpoint::consume)`(n)` gives
///   `n` bytes back; the method reuses the memory once the message is consumed whole (the
///   verbs method shows a message in the registered receive buffer it landed in, and re-posts
///   that buffer then). After the peer failed, messages that arrived before still come out,
///   then `next` reports the failure.
/// - **lend / give_back**: [`lend`](Endpoint::lend) hands the current inbound message out of
///   the method as an owned lease that shows it in place ([`Attrs::lend_in_place`]; shared
///   memory: the ring record, kept unreleased, with the segment mapping kept alive; TCP: the
///   receive buffer itself, taken out of the endpoint; either: the reassembly buffer, taken;
///   verbs lends a copy instead and re-posts its receive slot at once) and may outlive the
///   connection; until [`give_back`](Endpoint::give_back) consumes it, `next` shows nothing
///   and `consume` refuses, while sends and completions go on, and a sleeper does not count
///   the waiting inbound bytes as work.
/// - **wait**: [`wait`](Endpoint::wait) blocks until a completion or inbound message may be
///   ready, the peer failed, or the timeout passed (each method spins briefly, then sleeps on
///   its own kernel object: a futex word in the shared segment, `io_uring_enter`, the verbs
///   completion channel).
/// - **sleeper**: [`sleeper`](Endpoint::sleeper) prepares the same sleep for a thread that
///   does not hold the connection: `None` when something is ready (or the peer failed), else a
///   [`Sleeper`] on the futex word, the socket and ring descriptors, or the completion
///   channel.
/// - **failure detection**: a peer that dies or closes is noticed within a bounded time (the
///   shared-memory method's liveness interval; TCP end-of-stream at once, `TCP_USER_TIMEOUT`
///   for a silent peer; for verbs a keepalive RDMA WRITE when idle, so a dead peer shows as
///   transport retry exceeded), after which every outstanding descriptor completes with an
///   error
///   ([`EndpointError::is_peer_failure`]) exactly once and later posts fail;
///   [`failure`](Endpoint::failure) then names the cause.
/// - **heartbeat**: shared memory and TCP show when the peer was last heard from
///   ([`peer_heard`](Endpoint::peer_heard): its heartbeat counters in the segment, its
///   keepalive frames and data on the connection); what silence means is the caller's rule. A
///   stopped process's kernel still acknowledges TCP and its memory still holds the segment,
///   so only this catches it.
/// - **progress**: nothing runs in the background; `next`, `poll` and `wait` make progress,
///   only `wait` blocks. Call one of them regularly, also after the last post.
///
/// The trait is for static dispatch (generics, or an enum over the methods): its hot calls are
/// direct calls of each method's own code.
pub trait Endpoint {
    /// The method's error.
    type Error: EndpointError;
    /// The current inbound message lent out of the endpoint ([`Endpoint::lend`]).
    type Lease: Deref<Target = [u8]>;
    /// A sleep prepared on the endpoint ([`Endpoint::sleeper`]).
    type Sleeper: Sleeper<Error = Self::Error>;

    /// Whether the completions that a `next` found can be taken without another pass
    /// ([`Endpoint::poll_after_next`]).
    const NEXT_FINDS_COMPLETIONS: bool = false;

    /// What the endpoint can do.
    fn attrs(&self) -> Attrs;

    /// Posts a copy of `parts`, gathered, as one message.
    fn post_parts(&mut self, id: u64, tag: u64, parts: &[&[u8]]) -> Result<Posted, Self::Error>;

    /// Posts a copy of `data` as one message.
    #[inline]
    fn post_copy(&mut self, id: u64, tag: u64, data: &[u8]) -> Result<Posted, Self::Error> {
        self.post_parts(id, tag, &[data])
    }

    /// Posts `buf` as one message: an owned buffer handed over (given back in the completion
    /// where [`Attrs::returns_buffers`]) or memory shared with the caller (unchanged until the
    /// completion). [`Posted::NoResources`] gives `buf` back.
    fn post_buf(&mut self, id: u64, tag: u64, buf: SendBuf)
    -> Result<Posted<SendBuf>, Self::Error>;

    /// The next completion, after a pass of progress that does not block.
    fn poll(&mut self) -> Option<Completion<Self::Error>>;

    /// Like [`Endpoint::poll`] right after a `next`: a method whose `next` already looked for
    /// completions ([`Endpoint::NEXT_FINDS_COMPLETIONS`]) hands them out without another pass.
    #[inline]
    fn poll_after_next(&mut self) -> Option<Completion<Self::Error>> {
        self.poll()
    }

    /// The current inbound message in place, its unconsumed bytes; `Ok(None)` when none.
    fn next(&mut self) -> Result<Option<Message<'_>>, Self::Error>;

    /// The current inbound message followed by the messages behind it that the method holds in
    /// place at the same time, at most `max` in all. `consume` still applies to the current
    /// message only.
    fn next_queued(&mut self, max: usize) -> Result<Vec<Message<'_>>, Self::Error> {
        Ok(self.next()?.into_iter().take(max).collect())
    }

    /// Gives back `n` bytes of the current inbound message.
    fn consume(&mut self, n: usize) -> Result<(), Self::Error>;

    /// Lends the current inbound message out of the endpoint; `Ok(None)` when none.
    fn lend(&mut self) -> Result<Option<Self::Lease>, Self::Error>;

    /// Takes back a lease of [`Endpoint::lend`]: the message is consumed and the inbound goes
    /// on.
    fn give_back(&mut self, lease: Self::Lease) -> Result<(), Self::Error>;

    /// Blocks until something may be ready, the peer failed, or `timeout` passed.
    fn wait(&mut self, timeout: Duration) -> Result<(), Self::Error>;

    /// Prepares a sleep for a thread that does not hold the endpoint; `None` when something is
    /// ready.
    fn sleeper(&mut self) -> Result<Option<Self::Sleeper>, Self::Error>;

    /// Why the connection failed, once it did.
    fn failure(&self) -> Option<&str>;

    /// The last time the peer was heard from (its heartbeat or its data), where the method
    /// tracks it ([`Attrs::peer_heartbeat`]); `None` where it detects a dead peer itself.
    fn peer_heard(&mut self) -> Option<Instant>;

    /// The address ranges of the memory `next` shows messages in (receive buffers, ring,
    /// reassembly buffer), for checks that messages are shown in place.
    fn receive_buffers(&self) -> Vec<Range<usize>>;
}
