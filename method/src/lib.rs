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
///
/// ```
/// # use viaduct_method::{Op, loopback};
/// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
/// assert!(a.post_send_parts(1, 0, &[b"hi"])?.is_posted());
/// # b.next()?;
/// # b.consume(2)?;
/// assert_eq!(a.poll().expect("consumed").op, Op::Send);
/// # Ok::<(), loopback::Error>(())
/// ```
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
///
/// ```
/// use viaduct_method::{Posted, loopback};
/// let config = loopback::Config { max_queued: 1, ..Default::default() };
/// let (mut a, _b) = loopback::pair(config)?;
/// assert_eq!(a.post_send_parts(1, 0, &[b"one"])?, Posted::InProgress);
/// assert_eq!(a.post_send_parts(2, 0, &[b"two"])?, Posted::NoResources(()));
/// # Ok::<(), loopback::Error>(())
/// ```
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
    ///
    /// ```
    /// use viaduct_method::Posted;
    /// assert!(Posted::<()>::InProgress.is_posted());
    /// assert!(!Posted::NoResources(vec![1u8]).is_posted());
    /// ```
    #[inline]
    pub fn is_posted(&self) -> bool {
        matches!(self, Posted::InProgress)
    }
}

/// The one completion of an accepted descriptor, with the method's error type `E`.
///
/// ```
/// # use viaduct_method::loopback;
/// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
/// let _ = a.post_send_any(7, 0, vec![1, 2, 3].into())?;
/// # b.next()?;
/// # b.consume(3)?;
/// let c = a.poll().expect("the peer consumed it");
/// assert_eq!((c.id, c.result, c.buffer), (7, Ok(3), Some(vec![1, 2, 3])));
/// # Ok::<(), loopback::Error>(())
/// ```
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
///
/// ```
/// # use viaduct_method::loopback;
/// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
/// let _ = a.post_send_parts(1, 5, &[b"hey"])?;
/// let m = b.next()?.expect("delivered at post");
/// assert_eq!((m.tag, m.data), (5, &b"hey"[..]));
/// # Ok::<(), loopback::Error>(())
/// ```
#[derive(Debug)]
pub struct Message<'a> {
    /// The sender's tag.
    pub tag: u64,
    /// Bytes of the message not consumed yet.
    pub data: &'a [u8],
}

/// How an endpoint offers one-sided operations.
///
/// ```
/// use viaduct_method::{Endpoint, OneSided, loopback};
/// let (a, _b) = loopback::pair(loopback::Config::default())?;
/// assert_eq!(a.attrs().one_sided, OneSided::None);
/// # Ok::<(), loopback::Error>(())
/// ```
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
///
/// ```
/// use viaduct_method::{Endpoint, loopback};
/// let (a, _b) = loopback::pair(loopback::Config::default())?;
/// let attrs = a.attrs();
/// assert!(attrs.max_eager <= attrs.max_message && attrs.returns_buffers);
/// # Ok::<(), loopback::Error>(())
/// ```
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
///
/// ```
/// use viaduct_method::{EndpointError, loopback::Error};
/// let e = Error::PeerFailed("gone");
/// assert!(e.is_peer_failure() && e.errno() > 0);
/// ```
pub trait EndpointError: std::error::Error + Send + Sync + 'static {
    /// The errno behind the error.
    ///
    /// ```
    /// use viaduct_method::{EndpointError, loopback::Error};
    /// assert_eq!(Error::TooLong { len: 2, max: 1 }.errno(), 90); // EMSGSIZE
    /// ```
    fn errno(&self) -> i32;
    /// Whether the error reports a failed peer (as opposed to a local misuse).
    ///
    /// ```
    /// use viaduct_method::{EndpointError, loopback::Error};
    /// assert!(!Error::Closed.is_peer_failure());
    /// ```
    fn is_peer_failure(&self) -> bool;
}

/// A sleep prepared on an endpoint ([`Endpoint::sleeper`]) for a thread that does not hold it.
///
/// ```
/// use std::time::Duration;
/// use viaduct_method::{Endpoint, Sleeper, loopback};
/// let (mut a, _b) = loopback::pair(loopback::Config::default())?;
/// let s = Endpoint::sleeper(&mut a)?.expect("nothing is ready");
/// Sleeper::sleep(&s, Duration::from_millis(1))?;
/// # Ok::<(), loopback::Error>(())
/// ```
pub trait Sleeper {
    /// The method's error.
    type Error: EndpointError;
    /// The longest the sleep may last before the endpoint needs a pass (a method's own
    /// liveness or keepalive interval).
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, Sleeper, loopback};
    /// # let (mut a, _b) = loopback::pair(loopback::Config::default())?;
    /// let s = Endpoint::sleeper(&mut a)?.expect("nothing is ready");
    /// assert!(s.longest() > std::time::Duration::ZERO);
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn longest(&self) -> Duration;
    /// Sleeps until the endpoint may have work, or `timeout`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::{Endpoint, Sleeper, loopback};
    /// # let (mut a, _b) = loopback::pair(loopback::Config::default())?;
    /// let s = Endpoint::sleeper(&mut a)?.expect("nothing is ready");
    /// Sleeper::sleep(&s, Duration::from_millis(1))?; // returns after the timeout
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn sleep(&self, timeout: Duration) -> Result<(), Self::Error>;
    /// The descriptors that become readable when the endpoint may have work (empty where the
    /// sleep is on something else, such as a futex word; see [`Attrs::wait_fd`]).
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, Sleeper, loopback};
    /// # let (mut a, _b) = loopback::pair(loopback::Config::default())?;
    /// let s = Endpoint::sleeper(&mut a)?.expect("nothing is ready");
    /// assert_eq!(s.fds().is_empty(), !a.attrs().wait_fd);
    /// # Ok::<(), loopback::Error>(())
    /// ```
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
///   verbs: the registered receive buffer, taken out of the endpoint and re-posted when it
///   comes back, or a copy while a shared receive pool runs low) and may outlive the
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
///
/// ```
/// use viaduct_method::{Endpoint, loopback};
///
/// fn hello<E: Endpoint>(ep: &mut E) -> Result<bool, E::Error> {
///     Ok(ep.post_copy(1, 0, b"hello")?.is_posted())
/// }
/// let (mut a, _b) = loopback::pair(loopback::Config::default())?;
/// assert!(hello(&mut a)?);
/// # Ok::<(), loopback::Error>(())
/// ```
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
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (a, _b) = loopback::pair(loopback::Config::default())?;
    /// assert!(Endpoint::attrs(&a).max_message > 0);
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn attrs(&self) -> Attrs;

    /// Posts a copy of `parts`, gathered, as one message.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// assert!(Endpoint::post_parts(&mut a, 1, 9, &[b"head", b"body"])?.is_posted());
    /// assert_eq!(b.next()?.expect("delivered at post").data, b"headbody");
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn post_parts(&mut self, id: u64, tag: u64, parts: &[&[u8]]) -> Result<Posted, Self::Error>;

    /// Posts a copy of `data` as one message.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// assert!(a.post_copy(1, 0, b"abc")?.is_posted());
    /// # assert_eq!(b.next()?.unwrap().data, b"abc");
    /// # Ok::<(), loopback::Error>(())
    /// ```
    #[inline]
    fn post_copy(&mut self, id: u64, tag: u64, data: &[u8]) -> Result<Posted, Self::Error> {
        self.post_parts(id, tag, &[data])
    }

    /// Posts `buf` as one message: an owned buffer handed over (given back in the completion
    /// where [`Attrs::returns_buffers`]) or memory shared with the caller (unchanged until the
    /// completion). [`Posted::NoResources`] gives `buf` back.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// assert!(Endpoint::post_buf(&mut a, 1, 0, vec![1, 2, 3].into())?.is_posted());
    /// # assert_eq!(b.next()?.unwrap().data, [1, 2, 3]);
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn post_buf(&mut self, id: u64, tag: u64, buf: SendBuf)
    -> Result<Posted<SendBuf>, Self::Error>;

    /// The next completion, after a pass of progress that does not block.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// let _ = a.post_copy(1, 0, b"abc")?;
    /// # b.next()?;
    /// # b.consume(3)?;
    /// assert_eq!(Endpoint::poll(&mut a).expect("consumed").result, Ok(3));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn poll(&mut self) -> Option<Completion<Self::Error>>;

    /// Like [`Endpoint::poll`] right after a `poll` that returned a completion, while the
    /// caller drains them: a method whose `poll` makes its pass before it returns anything
    /// (so that pass found all there was) hands out the rest without another pass, and the
    /// drain ends without a pass that finds nothing. The default polls.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// for id in [1, 2] {
    ///     let _ = a.post_copy(id, 0, b"abc")?;
    /// #   b.next()?;
    /// #   b.consume(3)?;
    /// }
    /// let mut ids = vec![Endpoint::poll(&mut a).expect("one").id];
    /// while let Some(c) = a.poll_rest() {
    ///     ids.push(c.id);
    /// }
    /// assert_eq!(ids, [1, 2]);
    /// # Ok::<(), loopback::Error>(())
    /// ```
    #[inline]
    fn poll_rest(&mut self) -> Option<Completion<Self::Error>> {
        self.poll()
    }

    /// Like [`Endpoint::poll`] right after a `next`: a method whose `next` already looked for
    /// completions ([`Endpoint::NEXT_FINDS_COMPLETIONS`]) hands them out without another pass.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// # let _ = a.post_copy(1, 0, b"abc")?;
    /// # b.next()?;
    /// # b.consume(3)?;
    /// let _ = Endpoint::next(&mut a)?;
    /// assert_eq!(a.poll_after_next().map(|c| c.id), Some(1));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    #[inline]
    fn poll_after_next(&mut self) -> Option<Completion<Self::Error>> {
        self.poll()
    }

    /// The current inbound message in place, its unconsumed bytes; `Ok(None)` when none.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// let _ = a.post_copy(1, 9, b"abc")?;
    /// let m = Endpoint::next(&mut b)?.expect("delivered at post");
    /// assert_eq!((m.tag, m.data), (9, &b"abc"[..]));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn next(&mut self) -> Result<Option<Message<'_>>, Self::Error>;

    /// The current inbound message followed by the messages behind it that the method holds in
    /// place at the same time, at most `max` in all. `consume` still applies to the current
    /// message only.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// let _ = (a.post_copy(1, 0, b"a")?, a.post_copy(2, 0, b"b")?);
    /// let queued = b.next_queued(8)?;
    /// assert_eq!(queued[0].data, b"a"); // then whatever the method holds behind it
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn next_queued(&mut self, max: usize) -> Result<Vec<Message<'_>>, Self::Error> {
        Ok(self.next()?.into_iter().take(max).collect())
    }

    /// Gives back `n` bytes of the current inbound message.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// let _ = a.post_copy(1, 0, b"abc")?;
    /// # Endpoint::next(&mut b)?;
    /// Endpoint::consume(&mut b, 2)?;
    /// assert_eq!(Endpoint::next(&mut b)?.expect("the rest").data, b"c");
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn consume(&mut self, n: usize) -> Result<(), Self::Error>;

    /// Lends the current inbound message out of the endpoint; `Ok(None)` when none.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// let _ = a.post_copy(1, 0, b"abc")?;
    /// let lease = Endpoint::lend(&mut b)?.expect("a message is current");
    /// assert_eq!(&*lease, b"abc");
    /// # Endpoint::give_back(&mut b, lease)?;
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn lend(&mut self) -> Result<Option<Self::Lease>, Self::Error>;

    /// Takes back a lease of [`Endpoint::lend`]: the message is consumed and the inbound goes
    /// on.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// let _ = (a.post_copy(1, 0, b"one")?, a.post_copy(2, 0, b"two")?);
    /// let lease = Endpoint::lend(&mut b)?.expect("a message is current");
    /// Endpoint::give_back(&mut b, lease)?;
    /// assert_eq!(Endpoint::next(&mut b)?.expect("the second").data, b"two");
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn give_back(&mut self, lease: Self::Lease) -> Result<(), Self::Error>;

    /// Blocks until something may be ready, the peer failed, or `timeout` passed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, _b) = loopback::pair(loopback::Config::default())?;
    /// Endpoint::wait(&mut a, Duration::from_millis(1))?; // nothing comes: the timeout passes
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn wait(&mut self, timeout: Duration) -> Result<(), Self::Error>;

    /// Prepares a sleep for a thread that does not hold the endpoint; `None` when something is
    /// ready.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// assert!(Endpoint::sleeper(&mut b)?.is_some());
    /// let _ = a.post_copy(1, 0, b"x")?;
    /// assert!(Endpoint::sleeper(&mut b)?.is_none()); // a message is ready
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn sleeper(&mut self) -> Result<Option<Self::Sleeper>, Self::Error>;

    /// Why the connection failed, once it did.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, b) = loopback::pair(loopback::Config::default())?;
    /// drop(b);
    /// assert!(Endpoint::poll(&mut a).is_none() && Endpoint::failure(&a).is_some());
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn failure(&self) -> Option<&str>;

    /// The last time the peer was heard from (its heartbeat or its data), where the method
    /// tracks it ([`Attrs::peer_heartbeat`]); `None` where it detects a dead peer itself.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, _b) = loopback::pair(loopback::Config::default())?;
    /// assert!(a.peer_heard().is_some()); // the loopback tracks it
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn peer_heard(&mut self) -> Option<Instant>;

    /// The address ranges of the memory `next` shows messages in (receive buffers, ring,
    /// reassembly buffer), for checks that messages are shown in place.
    ///
    /// ```
    /// # use viaduct_method::{Endpoint, loopback};
    /// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
    /// let _ = a.post_copy(1, 0, b"abc")?;
    /// let at = Endpoint::next(&mut b)?.expect("delivered").data.as_ptr() as usize;
    /// assert!(Endpoint::receive_buffers(&b).iter().any(|r| r.contains(&at)));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    fn receive_buffers(&self) -> Vec<Range<usize>>;
}
