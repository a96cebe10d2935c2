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

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::agent::Agent;
use crate::engine::{chain, peer_failed};
use crate::error::AgentError;
use crate::request::Request;
use crate::vc::readers::Slot;

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
            vc.readers.remove(self.id);
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
        st.vcs[peer as usize].readers.reserve(id, len);
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
            vc.readers.remove(reservation.id);
            let _ = counter.fail_car(why.error(peer));
        }
        let bound = vc
            .readers
            .bind(reservation.id, segments, Arc::clone(&slot), counter, done);
        if let Err(counter) = bound {
            // The VC failed since the reservation (its reads were failed then).
            if vc.failed.is_none() {
                let _ = counter.fail_car(peer_failed(peer, "the VC closed"));
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
