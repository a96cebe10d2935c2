//! A connected pair of endpoints in one process over a shared queue: the method contract with
//! no transport under it, for tests of code written over [`Endpoint`](crate::Endpoint) and as
//! the reference the contract suite runs against first.
//!
//! A post puts the message (the owned or shared buffer itself, or one copy of the gathered
//! parts) in the peer's inbound queue; the peer shows it in place from there, and the send
//! completes once the peer consumed it whole (an owned buffer comes back in the completion).
//! At most [`Config::max_queued`] messages per direction wait to be consumed; past that a post
//! answers [`Posted::NoResources`].
//!
//! Failure is injected with [`Endpoint::close`] (or by dropping an endpoint): the peer notices
//! at its next `poll`, `next`, `wait` or post; every descriptor it has outstanding completes
//! with [`Error::PeerFailed`] exactly once, later posts fail, and `next` reports the failure
//! once the messages that arrived before are read. The closed side's own outstanding
//! descriptors complete with [`Error::Closed`].

use std::collections::VecDeque;
use std::ops::{Deref, Range};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::sendbuf::SendBuf;
use crate::{Attrs, OneSided, Op, Posted};

/// The completion of a loopback descriptor.
pub type Completion = crate::Completion<Error>;
/// A message shown by [`Endpoint::next`].
pub type Message<'a> = crate::Message<'a>;

/// Settings of a loopback pair.
///
/// ```
/// use viaduct_method::loopback::{self, Config};
/// let config = Config { max_queued: 4, ..Config::default() };
/// let (a, _b) = loopback::pair(config)?;
/// # let _ = a;
/// # Ok::<(), loopback::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Messages per direction that may wait to be consumed (at least 1).
    pub max_queued: usize,
    /// The largest message accepted.
    pub max_message: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_queued: 256,
            max_message: 64 << 20,
        }
    }
}

/// An error of the loopback method.
///
/// ```
/// use viaduct_method::loopback::{self, Config, Error};
/// let (mut a, _b) = loopback::pair(Config { max_message: 2, ..Config::default() })?;
/// let e = a.post_send_parts(1, 0, &[b"abc"]).unwrap_err();
/// assert_eq!(e, Error::TooLong { len: 3, max: 2 });
/// # Ok::<(), Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The peer closed its endpoint (or dropped it).
    #[error("peer failed: {0}")]
    PeerFailed(&'static str),
    /// This endpoint was closed.
    #[error("endpoint closed")]
    Closed,
    /// A message longer than [`Config::max_message`].
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLong {
        /// The message's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `consume` of more bytes than the current message has left.
    #[error("consume of {n} bytes with {left} left in the current message")]
    ConsumeBeyond {
        /// Bytes asked for.
        n: usize,
        /// Bytes left.
        left: usize,
    },
    /// The current message is lent out; it must come back first.
    #[error("the current message is lent out")]
    Lent,
    /// A lease that this endpoint did not lend.
    #[error("a lease of another endpoint or message")]
    ForeignLease,
    /// Settings that cannot work.
    #[error("invalid loopback configuration: {0}")]
    Config(&'static str),
}

impl crate::EndpointError for Error {
    fn errno(&self) -> i32 {
        match self {
            Error::PeerFailed(_) => 32,  // EPIPE
            Error::Closed => 108,        // ESHUTDOWN
            Error::TooLong { .. } => 90, // EMSGSIZE
            Error::ConsumeBeyond { .. } | Error::Config(_) | Error::ForeignLease => 22, // EINVAL
            Error::Lent => 16,           // EBUSY
        }
    }

    fn is_peer_failure(&self) -> bool {
        matches!(self, Error::PeerFailed(_))
    }
}

/// A message in flight.
struct Record {
    id: u64,
    tag: u64,
    data: SendBuf,
    /// Whether the sender gets the buffer back (an owned buffer it handed over).
    returns: bool,
}

/// One direction: the messages for one side and what that side sent back.
#[derive(Default)]
struct Direction {
    /// Messages waiting for this side.
    inbound: VecDeque<Record>,
    /// Sends of this side that the peer consumed: id, length and the buffer given back.
    done: VecDeque<(u64, usize, Option<Vec<u8>>)>,
}

struct State {
    sides: [Direction; 2],
    closed: [bool; 2],
    /// Bumped at every change a sleeper may wait for.
    generation: u64,
}

struct Shared {
    state: Mutex<State>,
    bell: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A thread that panicked while holding the lock left the state consistent (every
        // change is one step), so the poison is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Makes a connected pair of loopback endpoints.
///
/// ```
/// use viaduct_method::loopback::{self, Config, Error};
/// let (_a, _b) = loopback::pair(Config::default())?;
/// let bad = Config { max_queued: 0, ..Config::default() };
/// assert!(matches!(loopback::pair(bad), Err(Error::Config(_))));
/// # Ok::<(), Error>(())
/// ```
pub fn pair(config: Config) -> Result<(Endpoint, Endpoint), Error> {
    if config.max_queued == 0 {
        return Err(Error::Config("max_queued must be at least 1"));
    }
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            sides: [Direction::default(), Direction::default()],
            closed: [false; 2],
            generation: 0,
        }),
        bell: Condvar::new(),
    });
    let ep = |side| Endpoint {
        shared: shared.clone(),
        side,
        config,
        outstanding: Vec::new(),
        completions: VecDeque::new(),
        current: None,
        lent: None,
        serial: 0,
        failed: None,
        closed: false,
        heard: Instant::now(),
    };
    Ok((ep(0), ep(1)))
}

/// The current inbound message and how much of it was consumed.
struct Current {
    rec: Record,
    consumed: usize,
}

/// This side of a loopback connection.
///
/// ```
/// use viaduct_method::loopback::{self, Config};
/// let (mut a, mut b) = loopback::pair(Config::default())?;
/// assert!(a.post_send_parts(1, 5, &[b"hi"])?.is_posted());
/// assert_eq!(b.next()?.expect("delivered at post").data, b"hi");
/// # Ok::<(), loopback::Error>(())
/// ```
pub struct Endpoint {
    shared: Arc<Shared>,
    side: usize,
    config: Config,
    /// Ids and ops of accepted descriptors not completed yet.
    outstanding: Vec<u64>,
    completions: VecDeque<Completion>,
    current: Option<Current>,
    /// The serial of the lease out, if one is.
    lent: Option<u64>,
    serial: u64,
    failed: Option<Error>,
    closed: bool,
    heard: Instant,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("loopback::Endpoint")
            .field("side", &self.side)
            .field("outstanding", &self.outstanding.len())
            .field("failed", &self.failed)
            .finish()
    }
}

/// The current inbound message lent out of a loopback endpoint ([`Endpoint::lend`]): the
/// sender's buffer itself.
///
/// ```
/// # use viaduct_method::loopback::{self, Config};
/// # let (mut a, mut b) = loopback::pair(Config::default())?;
/// let _ = a.post_send_parts(1, 0, &[b"lent"])?;
/// let lease = b.lend()?.expect("a message is current");
/// assert_eq!(&*lease, b"lent");
/// # b.give_back(lease)?;
/// # Ok::<(), loopback::Error>(())
/// ```
pub struct Lease {
    rec: Record,
    offset: usize,
    serial: u64,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "loopback::Lease({} bytes)", self.len())
    }
}

impl Deref for Lease {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.rec.data[self.offset..]
    }
}

/// A sleep on a loopback endpoint, for a thread that does not hold it.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::loopback::{self, Config};
/// # let (mut a, _b) = loopback::pair(Config::default())?;
/// let sleeper = a.sleeper()?.expect("nothing is ready");
/// std::thread::spawn(move || sleeper.sleep(Duration::from_millis(1))).join().unwrap()?;
/// # Ok::<(), loopback::Error>(())
/// ```
pub struct Sleeper {
    shared: Arc<Shared>,
    generation: u64,
}

impl std::fmt::Debug for Sleeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("loopback::Sleeper")
    }
}

impl Sleeper {
    /// Sleeps until the pair changed since the sleeper was made, or `timeout`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, _b) = loopback::pair(Config::default())?;
    /// let sleeper = a.sleeper()?.expect("nothing is ready");
    /// sleeper.sleep(Duration::from_millis(1))?; // nothing changed: the timeout passes
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn sleep(&self, timeout: Duration) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        while st.generation == self.generation {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self
                .shared
                .bell
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(())
    }
}

impl crate::Sleeper for Sleeper {
    type Error = Error;

    fn longest(&self) -> Duration {
        Duration::MAX
    }

    fn sleep(&self, timeout: Duration) -> Result<(), Error> {
        Sleeper::sleep(self, timeout)
    }
}

impl Endpoint {
    fn peer(&self) -> usize {
        1 - self.side
    }

    /// Closes this side: the peer sees it fail, and this side's outstanding descriptors
    /// complete with [`Error::Closed`]. Closing twice does nothing.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config, Error};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// a.close();
    /// assert!(matches!(b.post_send_parts(1, 0, &[b"x"]), Err(Error::PeerFailed(_))));
    /// # Ok::<(), Error>(())
    /// ```
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        {
            let mut st = self.shared.lock();
            st.closed[self.side] = true;
            st.generation += 1;
        }
        self.shared.bell.notify_all();
        self.fail(Error::Closed);
    }

    /// Completes every outstanding descriptor with `e` and remembers the failure.
    fn fail(&mut self, e: Error) {
        for id in self.outstanding.drain(..) {
            self.completions.push_back(Completion {
                id,
                op: Op::Send,
                result: Err(e.clone()),
                buffer: None,
            });
        }
        if self.failed.is_none() {
            self.failed = Some(e);
        }
    }

    /// Takes the sends the peer finished, then notices a peer that closed.
    fn progress(&mut self) {
        if self.failed.is_some() {
            return;
        }
        let peer_closed;
        {
            let mut st = self.shared.lock();
            let done = std::mem::take(&mut st.sides[self.side].done);
            peer_closed = st.closed[self.peer()];
            drop(st);
            if !done.is_empty() {
                self.heard = Instant::now();
            }
            for (id, len, buffer) in done {
                self.outstanding.retain(|&o| o != id);
                self.completions.push_back(Completion {
                    id,
                    op: Op::Send,
                    result: Ok(len),
                    buffer,
                });
            }
        }
        if peer_closed {
            self.fail(Error::PeerFailed("the peer closed its endpoint"));
        }
    }

    fn check_open(&self) -> Result<(), Error> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Puts `data` in the peer's queue; gives it back when the queue is full.
    fn push(
        &mut self,
        id: u64,
        tag: u64,
        data: SendBuf,
        returns: bool,
    ) -> Result<Posted<SendBuf>, Error> {
        self.progress();
        self.check_open()?;
        if data.len() > self.config.max_message {
            return Err(Error::TooLong {
                len: data.len(),
                max: self.config.max_message,
            });
        }
        {
            let mut st = self.shared.lock();
            let peer = self.peer();
            if st.sides[peer].inbound.len() >= self.config.max_queued {
                return Ok(Posted::NoResources(data));
            }
            st.sides[peer].inbound.push_back(Record {
                id,
                tag,
                data,
                returns,
            });
            st.generation += 1;
        }
        self.shared.bell.notify_all();
        self.outstanding.push(id);
        Ok(Posted::InProgress)
    }

    /// Posts a copy of `parts`, gathered, as one message.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// assert!(a.post_send_parts(1, 0, &[b"head", b"body"])?.is_posted());
    /// assert_eq!(b.next()?.expect("delivered at post").data, b"headbody");
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn post_send_parts(&mut self, id: u64, tag: u64, parts: &[&[u8]]) -> Result<Posted, Error> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.config.max_message {
            return Err(Error::TooLong {
                len,
                max: self.config.max_message,
            });
        }
        let mut copy = Vec::with_capacity(len);
        for p in parts {
            copy.extend_from_slice(p);
        }
        Ok(match self.push(id, tag, SendBuf::Owned(copy), false)? {
            Posted::InProgress => Posted::InProgress,
            Posted::NoResources(_) => Posted::NoResources(()),
        })
    }

    /// Posts `buf` as one message, handed over (an owned buffer comes back in the
    /// completion).
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// assert!(a.post_send_any(1, 0, vec![1, 2].into())?.is_posted());
    /// # b.next()?;
    /// # b.consume(2)?;
    /// assert_eq!(a.poll().expect("consumed").buffer, Some(vec![1, 2]));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn post_send_any(
        &mut self,
        id: u64,
        tag: u64,
        buf: SendBuf,
    ) -> Result<Posted<SendBuf>, Error> {
        let returns = !buf.is_shared();
        self.push(id, tag, buf, returns)
    }

    /// The next completion.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// let _ = a.post_send_parts(1, 0, &[b"x"])?;
    /// assert!(a.poll().is_none()); // not consumed yet
    /// # b.next()?;
    /// b.consume(1)?;
    /// assert_eq!(a.poll().expect("consumed").result, Ok(1));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn poll(&mut self) -> Option<Completion> {
        if self.completions.is_empty() {
            self.progress();
        }
        self.completions.pop_front()
    }

    /// Brings the next inbound message to the head, if none is current.
    fn fetch(&mut self) {
        if self.current.is_some() || self.lent.is_some() {
            return;
        }
        let rec = self.shared.lock().sides[self.side].inbound.pop_front();
        if let Some(rec) = rec {
            self.heard = Instant::now();
            self.current = Some(Current { rec, consumed: 0 });
        }
    }

    /// The current inbound message in place.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// assert!(b.next()?.is_none());
    /// let _ = a.post_send_parts(1, 4, &[b"x"])?;
    /// assert_eq!(b.next()?.expect("delivered at post").tag, 4);
    /// # Ok::<(), loopback::Error>(())
    /// ```
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Message<'_>>, Error> {
        self.progress();
        self.fetch();
        if self.lent.is_some() {
            return Ok(None);
        }
        match &self.current {
            Some(c) => Ok(Some(Message {
                tag: c.rec.tag,
                data: &c.rec.data[c.consumed..],
            })),
            None => match &self.failed {
                Some(e) => Err(e.clone()),
                None => Ok(None),
            },
        }
    }

    /// Tells the sender its message was consumed.
    fn finish(&mut self, rec: Record) {
        let len = rec.data.len();
        let buffer = if rec.returns {
            rec.data.into_owned()
        } else {
            None
        };
        {
            let mut st = self.shared.lock();
            st.sides[self.peer()].done.push_back((rec.id, len, buffer));
            st.generation += 1;
        }
        self.shared.bell.notify_all();
    }

    /// Gives back `n` bytes of the current message.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// let _ = a.post_send_parts(1, 0, &[b"abc"])?;
    /// # b.next()?;
    /// b.consume(1)?;
    /// assert_eq!(b.next()?.expect("the rest").data, b"bc");
    /// assert!(b.consume(3).is_err()); // only 2 left
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn consume(&mut self, n: usize) -> Result<(), Error> {
        if self.lent.is_some() {
            return Err(Error::Lent);
        }
        let left = self
            .current
            .as_ref()
            .map_or(0, |c| c.rec.data.len() - c.consumed);
        if n > left {
            return Err(Error::ConsumeBeyond { n, left });
        }
        let Some(c) = self.current.as_mut() else {
            return Ok(());
        };
        c.consumed += n;
        if c.consumed == c.rec.data.len() {
            let c = self.current.take().expect("current message");
            self.finish(c.rec);
        }
        Ok(())
    }

    /// Lends the current message out, in place (the sender's buffer itself). `Ok(None)` when
    /// no message is current, or one is lent already.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// let _ = a.post_send_parts(1, 0, &[b"abc"])?;
    /// let lease = b.lend()?.expect("a message is current");
    /// assert!(b.next()?.is_none()); // while it is out
    /// # b.give_back(lease)?;
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn lend(&mut self) -> Result<Option<Lease>, Error> {
        if self.lent.is_some() {
            return Ok(None);
        }
        if self.next()?.is_none() {
            return Ok(None);
        }
        let c = self.current.take().expect("current message");
        self.serial += 1;
        self.lent = Some(self.serial);
        Ok(Some(Lease {
            rec: c.rec,
            offset: c.consumed,
            serial: self.serial,
        }))
    }

    /// Takes a lease back: its message is consumed.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// let _ = a.post_send_parts(1, 0, &[b"abc"])?;
    /// let lease = b.lend()?.expect("a message is current");
    /// b.give_back(lease)?;
    /// assert_eq!(a.poll().expect("consumed").result, Ok(3));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn give_back(&mut self, lease: Lease) -> Result<(), Error> {
        if self.lent != Some(lease.serial) {
            return Err(Error::ForeignLease);
        }
        self.lent = None;
        self.finish(lease.rec);
        Ok(())
    }

    /// Whether something is ready for this side, by the shared state.
    fn ready(&self, st: &State) -> bool {
        !self.completions.is_empty()
            || (self.lent.is_none()
                && (self.current.is_some() || !st.sides[self.side].inbound.is_empty()))
            || !st.sides[self.side].done.is_empty()
            || (self.failed.is_none() && st.closed[self.peer()])
    }

    /// Prepares a sleep; `None` when something is ready.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// assert!(b.sleeper()?.is_some());
    /// let _ = a.post_send_parts(1, 0, &[b"x"])?;
    /// assert!(b.sleeper()?.is_none()); // a message is ready
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn sleeper(&mut self) -> Result<Option<Sleeper>, Error> {
        let st = self.shared.lock();
        if self.ready(&st) {
            return Ok(None);
        }
        Ok(Some(Sleeper {
            shared: self.shared.clone(),
            generation: st.generation,
        }))
    }

    /// Blocks until something may be ready or `timeout` passed.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, _b) = loopback::pair(Config::default())?;
    /// a.wait(Duration::from_millis(1))?; // nothing comes: the timeout passes
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn wait(&mut self, timeout: Duration) -> Result<(), Error> {
        if let Some(s) = self.sleeper()? {
            s.sleep(timeout)?;
        }
        self.progress();
        Ok(())
    }

    /// Why the connection failed, once it did.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// assert_eq!(a.failure(), None);
    /// b.close();
    /// let _ = a.poll();
    /// assert_eq!(a.failure(), Some("the peer closed its endpoint"));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn failure(&self) -> Option<&'static str> {
        match &self.failed {
            Some(Error::PeerFailed(why)) => Some(why),
            Some(_) => Some("the endpoint was closed"),
            None => None,
        }
    }

    /// The memory `next` shows messages in: the current message's buffer.
    ///
    /// ```
    /// # use viaduct_method::loopback::{self, Config};
    /// # let (mut a, mut b) = loopback::pair(Config::default())?;
    /// let _ = a.post_send_parts(1, 0, &[b"abc"])?;
    /// let at = b.next()?.expect("delivered at post").data.as_ptr() as usize;
    /// assert!(b.receive_buffers().iter().any(|r| r.contains(&at)));
    /// # Ok::<(), loopback::Error>(())
    /// ```
    pub fn receive_buffers(&self) -> Vec<Range<usize>> {
        self.current
            .iter()
            .map(|c| {
                let start = c.rec.data.as_ptr() as usize;
                start..start + c.rec.data.len()
            })
            .collect()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.close();
    }
}

impl crate::Endpoint for Endpoint {
    type Error = Error;
    type Lease = Lease;
    type Sleeper = Sleeper;

    fn attrs(&self) -> Attrs {
        Attrs {
            max_message: self.config.max_message,
            max_eager: self.config.max_message,
            returns_buffers: true,
            one_sided: OneSided::None,
            registration: false,
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
    fn post_buf(&mut self, id: u64, tag: u64, buf: SendBuf) -> Result<Posted<SendBuf>, Error> {
        self.post_send_any(id, tag, buf)
    }

    #[inline]
    fn poll(&mut self) -> Option<Completion> {
        Endpoint::poll(self)
    }

    #[inline]
    fn next(&mut self) -> Result<Option<Message<'_>>, Error> {
        Endpoint::next(self)
    }

    #[inline]
    fn consume(&mut self, n: usize) -> Result<(), Error> {
        Endpoint::consume(self, n)
    }

    fn lend(&mut self) -> Result<Option<Lease>, Error> {
        Endpoint::lend(self)
    }

    fn give_back(&mut self, lease: Lease) -> Result<(), Error> {
        Endpoint::give_back(self, lease)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), Error> {
        Endpoint::wait(self, timeout)
    }

    fn sleeper(&mut self) -> Result<Option<Sleeper>, Error> {
        Endpoint::sleeper(self)
    }

    fn failure(&self) -> Option<&str> {
        Endpoint::failure(self)
    }

    fn peer_heard(&mut self) -> Option<Instant> {
        self.progress();
        Some(self.heard)
    }

    fn receive_buffers(&self) -> Vec<Range<usize>> {
        Endpoint::receive_buffers(self)
    }
}
