//! Reserved reads of a VC's byte stream: `reserve_read`, `read`, `readv` (the agent
//! operations `Reserve_read`, `Read`, `Readv`).
//!
//! [`Agent::reserve_read`] holds a place for `len` bytes in the inbound stream order of one VC
//! at once, without a buffer; [`Agent::read`] / [`Agent::readv`] bind the buffer(s) to that
//! place later. Places are served strictly in reservation order: the bytes that arrive go to
//! the oldest reservation until it has its `len` bytes, then to the next, whatever the order
//! in which buffers were bound. A reservation whose buffer is not bound yet holds the stream
//! (the bytes wait in place in the method, nothing behind them is read), which is the agent design's
//! "the buffer is only needed when the first byte is there". Dropping an unbound reservation
//! gives its place up.
//!
//! Each byte is copied once, from the method's receive memory into the caller's buffer, by
//! whichever thread makes progress; message boundaries of the sender do not matter (one read
//! may take bytes of several stream messages, one message may feed several reads). The read
//! completes through the agent's [`Request`] type; [`StreamRead::wait_timeout`] hands the
//! buffer back. While reservations are pending, [`Agent::next`] and [`Agent::nextv`] see no
//! stream bytes of that VC.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::agent::Agent;
use crate::engine::{Completions, chain, peer_failed};
use crate::error::AgentError;
use crate::method::MethodError;
use crate::request::{CarCounter, Request};
use crate::vc::{Link, Vc};
use crate::wire::{self, Kind};

/// Where the buffers of a finished read are handed back to the waiting handle.
type Slot<B> = Arc<Mutex<Option<Vec<B>>>>;

/// The caller's buffers of one bound read, type-erased for the VC's reader queue.
trait Sink: Send {
    fn segment_count(&self) -> usize;
    fn segment(&mut self, i: usize) -> &mut [u8];
    /// Hands the buffers back to the waiting handle.
    fn finish(self: Box<Self>);
}

struct Typed<B> {
    segments: Vec<B>,
    slot: Slot<B>,
}

impl<B: AsMut<[u8]> + Send + 'static> Sink for Typed<B> {
    fn segment_count(&self) -> usize {
        self.segments.len()
    }

    fn segment(&mut self, i: usize) -> &mut [u8] {
        self.segments[i].as_mut()
    }

    fn finish(self: Box<Self>) {
        let Typed { segments, slot } = *self;
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(segments);
    }
}

/// Buffers bound to a reserved place, and where the next byte goes.
struct Bound {
    sink: Box<dyn Sink>,
    segment: usize,
    offset: usize,
    counter: CarCounter,
    /// The agent's count of completed requests.
    done: Completions,
}

/// One reserved place in a VC's inbound stream.
pub(crate) struct Reader {
    id: u64,
    len: usize,
    got: usize,
    bound: Option<Bound>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("id", &self.id)
            .field("len", &self.len)
            .field("got", &self.got)
            .field("bound", &self.bound.is_some())
            .finish()
    }
}

impl Reader {
    /// Copies as much of `data` as this read still wants; returns the bytes taken.
    fn take_from(&mut self, mut data: &[u8]) -> usize {
        let Some(b) = self.bound.as_mut() else {
            return 0;
        };
        let mut taken = 0;
        while self.got < self.len && !data.is_empty() && b.segment < b.sink.segment_count() {
            let seg = b.sink.segment(b.segment);
            let room = seg.len() - b.offset;
            let n = room.min(data.len()).min(self.len - self.got);
            seg[b.offset..b.offset + n].copy_from_slice(&data[..n]);
            b.offset += n;
            self.got += n;
            taken += n;
            data = &data[n..];
            if b.offset == seg.len() {
                b.segment += 1;
                b.offset = 0;
            }
        }
        taken
    }

    fn done(&self) -> bool {
        self.bound.is_some() && self.got == self.len
    }

    /// Completes the read: buffers back to the handle first, then the request.
    fn complete(self) {
        if let Some(b) = self.bound {
            b.sink.finish();
            b.done.note(b.counter.complete_car(self.len as u64));
        }
    }

    fn fail(self, error: AgentError) {
        if let Some(b) = self.bound {
            b.done.note(b.counter.fail_car(error));
        }
    }
}

/// The reserved reads of one VC, oldest first.
#[derive(Debug, Default)]
pub(crate) struct ReadQueue {
    readers: VecDeque<Reader>,
}

impl ReadQueue {
    /// Whether reads are reserved (bound or not).
    pub(crate) fn is_empty(&self) -> bool {
        self.readers.is_empty()
    }

    /// Fails every reserved read (the VC failed or the agent was finalized).
    pub(crate) fn fail_all(&mut self, error: impl Fn() -> AgentError) {
        for r in self.readers.drain(..) {
            r.fail(error());
        }
    }
}

impl Vc {
    /// Copies stream bytes waiting at the head of this VC into the reserved reads, oldest
    /// first, as far as their buffers are bound; completes the reads that have all their
    /// bytes. Returns the work done (messages touched, reads completed).
    pub(crate) fn feed_readers(&mut self) -> Result<usize, MethodError> {
        let fed = self.feed_readers_once();
        if fed.is_err() {
            // The method reported the failure: nothing more comes from this VC.
            self.drained = true;
        }
        fed
    }

    fn feed_readers_once(&mut self) -> Result<usize, MethodError> {
        let mut work = 0;
        let Link::Remote(m) = &mut self.link else {
            return Ok(0);
        };
        let queue = &mut self.readers.readers;
        loop {
            while queue.front().is_some_and(Reader::done) {
                if let Some(r) = queue.pop_front() {
                    r.complete();
                    work += 1;
                }
            }
            let Some(reader) = queue.front_mut() else {
                break;
            };
            if reader.bound.is_none() || !self.stream_at_head {
                break;
            }
            let (taken, whole) = match m.next()? {
                Some((tag, data)) if wire::is_kind(tag, Kind::Stream) => {
                    let n = reader.take_from(data);
                    (n, n == data.len())
                }
                _ => {
                    self.stream_at_head = false;
                    break;
                }
            };
            m.consume(taken)?;
            work += 1;
            if whole {
                // The next message may be stream bytes too: look without reading it.
                self.stream_at_head = matches!(
                    m.next()?,
                    Some((tag, _)) if wire::is_kind(tag, Kind::Stream)
                );
            }
        }
        Ok(work)
    }
}

/// A place held in the inbound stream of one VC by [`Agent::reserve_read`], to be bound to
/// buffers by [`Agent::read`] or [`Agent::readv`]. Dropping it unbound gives the place up.
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let peer = 1 - agent.rank(); // a job of two ranks
/// let reservation = agent.reserve_read(peer, 16)?;
/// assert_eq!((reservation.peer(), reservation.len()), (peer, 16));
/// let bytes = agent.read(reservation, vec![0u8; 16])?.wait()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a reserved read holds back every later stream byte from the peer until it is bound"]
pub struct ReadReservation {
    agent: Agent,
    peer: u32,
    id: u64,
    len: usize,
    bound: bool,
}

impl ReadReservation {
    /// The peer whose stream the place is in.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 8)?;
    /// assert_eq!(reservation.peer(), peer);
    /// # agent.read(reservation, vec![0u8; 8])?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn peer(&self) -> u32 {
        self.peer
    }

    /// The bytes reserved.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 8)?;
    /// assert_eq!(reservation.len(), 8);
    /// # agent.read(reservation, vec![0u8; 8])?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte is reserved.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 0)?;
    /// assert!(reservation.is_empty());
    /// # agent.read(reservation, Vec::<u8>::new())?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for ReadReservation {
    fn drop(&mut self) {
        if self.bound {
            return;
        }
        let mut st = self.agent.shared.lock();
        if let Some(vc) = st.vcs.get_mut(self.peer as usize) {
            vc.readers.readers.retain(|r| r.id != self.id);
        }
        // The bytes held back may now belong to the next reader.
        st.progress_on(Some(self.peer));
    }
}

/// A read started by [`Agent::read`]: its request, and the buffer once it completed.
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let peer = 1 - agent.rank(); // a job of two ranks
/// let reservation = agent.reserve_read(peer, 4)?;
/// let read = agent.read(reservation, [0u8; 4])?;
/// let buf: [u8; 4] = read.wait()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "the buffer comes back only through the read's wait"]
pub struct StreamRead<B> {
    pending: Pending<B>,
}

/// A read started by [`Agent::readv`]: like [`StreamRead`], for several buffers.
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let peer = 1 - agent.rank(); // a job of two ranks
/// let reservation = agent.reserve_read(peer, 12)?;
/// let read = agent.readv(reservation, vec![vec![0u8; 4], vec![0u8; 8]])?;
/// let [head, body]: [Vec<u8>; 2] = read.wait()?.try_into().unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "the buffers come back only through the read's wait"]
pub struct StreamReadv<B> {
    pending: Pending<B>,
}

struct Pending<B> {
    request: Request,
    slot: Slot<B>,
    agent: Agent,
    peer: u32,
    _buffers: PhantomData<fn() -> B>,
}

impl<B> std::fmt::Debug for Pending<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("peer", &self.peer)
            .field("request", &self.request)
            .finish()
    }
}

/// How often a waiting read looks whether the agent was finalized under it.
const FINALIZE_CHECK: Duration = Duration::from_millis(20);

impl<B> Pending<B> {
    fn wait(mut self, timeout: Option<Duration>) -> Result<Vec<B>, AgentError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let step = match deadline {
                Some(d) => d
                    .saturating_duration_since(Instant::now())
                    .min(FINALIZE_CHECK),
                None => FINALIZE_CHECK,
            };
            if self.request.wait_timeout(step)?.is_some() {
                let buffers = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                return Ok(buffers.unwrap_or_default());
            }
            {
                // A finalized agent closes its VCs: nothing will feed this read any more.
                let mut st = self.agent.shared.lock();
                if st.finalized {
                    if let Some(vc) = st.vcs.get_mut(self.peer as usize) {
                        vc.readers.fail_all(|| AgentError::Finalized);
                    }
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(AgentError::Timeout {
                    what: "stream read",
                    seconds: timeout.map_or(0, |t| t.as_secs()),
                });
            }
        }
    }
}

impl<B> StreamRead<B> {
    /// The read's request (it completes when the buffer holds all the reserved bytes, or
    /// fails with the VC); wait on it with others, then call [`StreamRead::wait`] to get the
    /// buffer.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 4)?;
    /// let mut read = agent.read(reservation, vec![0u8; 4])?;
    /// let done = read.request().test()?.is_some();
    /// # read.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn request(&mut self) -> &mut Request {
        &mut self.pending.request
    }

    /// Waits until the read completed and gives the buffer back, holding the reserved bytes
    /// at its start. Ends with [`AgentError::PeerFailed`] (inside [`AgentError::Request`]) when
    /// the peer fails first, within the method's failure-detection time, and with
    /// [`AgentError::Finalized`] when the agent is finalized first.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 4)?;
    /// let buf = agent.read(reservation, vec![0u8; 4])?.wait()?;
    /// assert_eq!(buf.len(), 4);
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait(self) -> Result<B, AgentError> {
        self.finish(None)
    }

    /// Like [`StreamRead::wait`], giving up after `timeout` with [`AgentError::Timeout`]; the
    /// read keeps its place and its bytes are taken and dropped when they come.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// use std::time::Duration;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 4)?;
    /// let buf = agent.read(reservation, vec![0u8; 4])?.wait_timeout(Duration::from_secs(5))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait_timeout(self, timeout: Duration) -> Result<B, AgentError> {
        self.finish(Some(timeout))
    }

    fn finish(self, timeout: Option<Duration>) -> Result<B, AgentError> {
        self.pending
            .wait(timeout)?
            .pop()
            .ok_or(AgentError::Finalized)
    }
}

impl<B> StreamReadv<B> {
    /// The read's request (see [`StreamRead::request`]).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 4)?;
    /// let mut read = agent.readv(reservation, vec![vec![0u8; 2], vec![0u8; 2]])?;
    /// let done = read.request().test()?.is_some();
    /// # read.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn request(&mut self) -> &mut Request {
        &mut self.pending.request
    }

    /// Waits until the read completed and gives the buffers back, in the order given, filled
    /// front to back (see [`StreamRead::wait`]).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 4)?;
    /// let bufs = agent.readv(reservation, vec![vec![0u8; 2], vec![0u8; 2]])?.wait()?;
    /// assert_eq!(bufs.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait(self) -> Result<Vec<B>, AgentError> {
        self.pending.wait(None)
    }

    /// Like [`StreamReadv::wait`], giving up after `timeout` (see [`StreamRead::wait_timeout`]).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// use std::time::Duration;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 4)?;
    /// let read = agent.readv(reservation, vec![vec![0u8; 2], vec![0u8; 2]])?;
    /// let bufs = read.wait_timeout(Duration::from_secs(5))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait_timeout(self, timeout: Duration) -> Result<Vec<B>, AgentError> {
        self.pending.wait(Some(timeout))
    }
}

impl Agent {
    /// Holds a place for the next `len` bytes of the byte stream from `peer` (the agent
    /// operation `Reserve_read`), before any buffer exists; bind the buffer with [`Agent::read`] or
    /// [`Agent::readv`]. Reservations are served in the order they were made. Does not block.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// // The next 8 bytes from the peer are this read's, whatever `next` is called meanwhile.
    /// let reservation = agent.reserve_read(peer, 8)?;
    /// let buf = agent.read(reservation, vec![0u8; 8])?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn reserve_read(&self, peer: u32, len: usize) -> Result<ReadReservation, AgentError> {
        self.check_rank(peer)?;
        if peer == self.shared.rank {
            return Err(AgentError::SelfStream);
        }
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        let id = st.book.id();
        st.vcs[peer as usize].readers.readers.push_back(Reader {
            id,
            len,
            got: 0,
            bound: None,
        });
        Ok(ReadReservation {
            agent: self.clone(),
            peer,
            id,
            len,
            bound: false,
        })
    }

    /// Binds `buf` to a reserved place (the agent operation `Read`): the reserved bytes are copied into
    /// its start as they arrive (one copy, out of the method's receive memory). `buf` must
    /// hold at least the reserved length ([`AgentError::ReadBufferTooSmall`] otherwise). Does
    /// not block; bytes already there are copied before it returns.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 6)?;
    /// let buf = agent.read(reservation, *b"......")?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn read<B>(&self, reservation: ReadReservation, buf: B) -> Result<StreamRead<B>, AgentError>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        Ok(StreamRead {
            pending: self.bind(reservation, vec![buf])?,
        })
    }

    /// Like [`Agent::read`] for several buffers (the agent operation `Readv`), filled front to back;
    /// together they must hold at least the reserved length.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let reservation = agent.reserve_read(peer, 10)?;
    /// let bufs = agent.readv(reservation, vec![[0u8; 5], [0u8; 5]])?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn readv<B>(
        &self,
        reservation: ReadReservation,
        bufs: Vec<B>,
    ) -> Result<StreamReadv<B>, AgentError>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        Ok(StreamReadv {
            pending: self.bind(reservation, bufs)?,
        })
    }

    fn bind<B>(
        &self,
        mut reservation: ReadReservation,
        mut segments: Vec<B>,
    ) -> Result<Pending<B>, AgentError>
    where
        B: AsMut<[u8]> + Send + 'static,
    {
        let capacity: usize = segments.iter_mut().map(|s| s.as_mut().len()).sum();
        if capacity < reservation.len {
            return Err(AgentError::ReadBufferTooSmall {
                len: reservation.len,
                capacity,
            });
        }
        let peer = reservation.peer;
        let (request, counter) = Request::message_driven(1, self.shared.driver.clone());
        let slot: Slot<B> = Arc::new(Mutex::new(None));
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        reservation.bound = true;
        let done = st.book.done.clone();
        let vc = &mut st.vcs[peer as usize];
        if let Some(why) = vc.failure() {
            // Nothing more will arrive: the read fails now (its place goes with it).
            vc.readers.readers.retain(|r| r.id != reservation.id);
            let _ = counter.fail_car(why.error(peer));
        }
        let place = vc
            .readers
            .readers
            .iter_mut()
            .find(|r| r.id == reservation.id);
        match place {
            Some(r) => {
                r.bound = Some(Bound {
                    sink: Box::new(Typed {
                        segments,
                        slot: Arc::clone(&slot),
                    }),
                    segment: 0,
                    offset: 0,
                    counter,
                    done,
                });
            }
            None => {
                // The VC failed since the reservation (its reads were failed then).
                if vc.failed.is_none() {
                    let _ = counter.fail_car(peer_failed(peer, "the VC closed"));
                }
            }
        }
        if vc.stream_at_head {
            if let Err(e) = vc.feed_readers() {
                st.fail_vc(peer, chain(&e));
            }
        }
        st.progress_on(Some(peer));
        Ok(Pending {
            request,
            slot,
            agent: self.clone(),
            peer,
            _buffers: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound_reader(len: usize, segments: Vec<Vec<u8>>) -> (Reader, Slot<Vec<u8>>, Request) {
        let (request, counter) = Request::message(1);
        let slot: Slot<Vec<u8>> = Arc::new(Mutex::new(None));
        let reader = Reader {
            id: 1,
            len,
            got: 0,
            bound: Some(Bound {
                sink: Box::new(Typed {
                    segments,
                    slot: Arc::clone(&slot),
                }),
                segment: 0,
                offset: 0,
                counter,
                done: Completions::default(),
            }),
        };
        (reader, slot, request)
    }

    #[test]
    fn reads_fill_segments_in_order_and_stop_at_their_length() {
        let (mut r, slot, mut request) = bound_reader(6, vec![vec![0; 2], vec![], vec![0; 5]]);
        assert_eq!(r.take_from(b"abc"), 3);
        assert!(!r.done());
        // Only the 3 bytes still reserved are taken from a longer message.
        assert_eq!(r.take_from(b"defgh"), 3);
        assert!(r.done());
        assert_eq!(r.take_from(b"x"), 0);
        r.complete();
        let status = request.test().unwrap().expect("complete");
        assert_eq!(status.count(), 6);
        let segs = slot.lock().unwrap().take().unwrap();
        assert_eq!(segs, vec![b"ab".to_vec(), vec![], b"cdef\0".to_vec()]);
    }

    #[test]
    fn an_unbound_reader_takes_nothing_and_failing_fails_its_request() {
        let mut unbound = Reader {
            id: 2,
            len: 4,
            got: 0,
            bound: None,
        };
        assert_eq!(unbound.take_from(b"abcd"), 0);
        assert!(!unbound.done());
        let (r, slot, mut request) = bound_reader(4, vec![vec![0; 4]]);
        let mut q = ReadQueue::default();
        q.readers.push_back(r);
        q.readers.push_back(unbound);
        q.fail_all(|| AgentError::Finalized);
        assert!(q.is_empty());
        assert!(request.test().is_err());
        assert!(slot.lock().unwrap().is_none());
    }
}
