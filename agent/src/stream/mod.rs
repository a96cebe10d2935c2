//! The byte stream of a VC (the agent's VC operations): `write`/`writev`/`write_buffer` on
//! one side; `next`/`nextv` + consume in place, or `reserve_read` + `read`/`readv` into the
//! caller's buffers, on the other.
//!
//! Beside tagged messages, each VC to a peer carries a plain ordered stream of messages, with
//! no envelope and no matching. The operations, what they block on, who owns what, and the
//! copies they make:
//!
//! | operation | blocks on | copies |
//! | --- | --- | --- |
//! | [`Agent::write`] | nothing (queued behind earlier messages when the method is full) | none in the agent: the owned `Vec` is the method's until its completion |
//! | [`Agent::writev`] | nothing | one: the slices are gathered into one message buffer, then sent as by `write` |
//! | [`Agent::write_buffer`] | nothing | none: a [`MethodBuffer`] from [`Agent::get_buffer`] is handed to the method and comes back on completion |
//! | [`Agent::next`] / [`Agent::nextv`] | nothing (one progress pass); `next_timeout` waits | none: the closure sees the bytes in the method's receive memory |
//! | [`Agent::stream_next`] / [`Agent::stream_nextv`] | nothing (one progress pass); [`Agent::stream_next_timeout`] / [`Agent::stream_nextv_timeout`] wait | none: as `next`/`nextv`, with a [`StreamView`] whose `consume` says what is handed back, and the closure's own result returned |
//! | [`Agent::reserve_read`] | nothing | none |
//! | [`Agent::read`] / [`Agent::readv`] | nothing; [`StreamRead::wait_timeout`] waits | one, from the method's receive memory into the caller's buffer |
//!
//! **Order.** Stream messages and tagged messages to one peer leave in the order they were
//! posted; the stream's bytes arrive in that order. Inbound, stream bytes go first to
//! reserved reads, in reservation order, then to `next`/`nextv`: while a reservation of the
//! VC is pending, `next` and `nextv` see nothing.
//!
//! **In place.** [`Agent::next`] shows the unconsumed bytes of the oldest stream message
//! inside the method's receive memory (a shared-memory ring cell, an io_uring receive buffer;
//! a method's reassembly buffer for a message that spans its receive buffers) to a closure
//! that returns how many bytes it consumed. [`Agent::nextv`] shows the unconsumed bytes of
//! several queued stream messages at once, one slice each, as far as the method can hold them
//! in place together (the shared-memory method shows the stream messages already in its ring
//! behind the current one; TCP those lying whole in the same receive buffer; verbs the current
//! one only), and consumes across their boundaries. A message is released to the method once
//! consumed whole.
//!
//! **Locking.** The closures of `next`/`nextv` run with the agent's mutex held (the agent design's
//! `Lock_read`): other threads' calls wait until they return, and tagged traffic behind an
//! unconsumed stream message on the same VC waits until it is consumed. A block of writes made
//! by one call (`writev`, `write_bufferv`) is never interleaved with another thread's
//! messages (the agent design's `Lock_write`).
//!
//! **Limits and failure.** One stream message holds at most `Config::rendezvous_chunk` bytes
//! ([`AgentError::StreamTooLong`]). The self loop has no stream ([`AgentError::SelfStream`]).
//! After finalize every call fails with [`AgentError::Finalized`]. When the peer fails,
//! writes and reads on its VC fail with [`AgentError::PeerFailed`] within the method's
//! failure-detection time; no wait hangs.
//!
//! Reserved reads are in [`read`], method buffers in [`method_buffer`].

pub mod method_buffer;
pub mod read;

pub use method_buffer::{BufferWrite, MethodBuffer};
pub use read::{ReadReservation, StreamRead, StreamReadv};

use std::time::{Duration, Instant};

use crate::agent::Agent;
use crate::engine::{State, peer_failed};
use crate::error::AgentError;
use crate::method::MethodError;
use crate::proto::Failure;
use crate::request::Request;
use crate::vc::Link;
use crate::wire::{self, Kind};

/// Most stream messages [`Agent::nextv`] shows in one call.
pub const MAX_VIEWS: usize = 64;

/// Where `next`/`nextv` stand on a VC: the bytes to show are at the head, or the answer.
enum Head {
    Ready,
    Answer(Result<Option<usize>, AgentError>),
}

fn stream_head(st: &mut State, peer: u32) -> Head {
    if st.finalized {
        return Head::Answer(Err(AgentError::Finalized));
    }
    if !st.vcs[peer as usize].stream_at_head {
        st.progress();
    }
    let vc = &mut st.vcs[peer as usize];
    if matches!(vc.link, Link::SelfLoop) {
        return Head::Answer(Err(AgentError::SelfStream));
    }
    if !vc.stream_at_head || !vc.readers.is_empty() {
        return Head::Answer(match (vc.failure(), vc.drained) {
            (Some(failure), true) => Err(failure.error(peer)),
            _ => Ok(None),
        });
    }
    Head::Ready
}

impl Agent {
    /// Sends `data` (at most `Config::rendezvous_chunk` bytes) as the next message of the
    /// byte stream to `peer` (the agent operation `Write`), without copying it: the method owns the
    /// buffer until its completion. The request completes when the method is done with it.
    /// Stream and tagged messages to one peer leave in the order they were posted. Does not
    /// block.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let mut request = agent.write(peer, b"stream bytes".to_vec())?;
    /// request.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn write(&self, peer: u32, data: Vec<u8>) -> Result<Request, AgentError> {
        self.check_rank(peer)?;
        if peer == self.shared.rank {
            return Err(AgentError::SelfStream);
        }
        let max = self.shared.config.rendezvous_chunk;
        if data.len() > max {
            return Err(AgentError::StreamTooLong {
                len: data.len(),
                max,
            });
        }
        let (request, counter) = Request::message_driven(1, self.shared.driver.clone());
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        if let Some(failure) = st.vcs[peer as usize].failure() {
            let _ = counter.fail_car(failure.error(peer));
            return Ok(request);
        }
        let out = st.book.stream_send(peer, data, counter);
        st.write(peer, out);
        Ok(request)
    }

    /// Sends the concatenation of `parts` as one stream message (the agent operation `Writev`): the
    /// parts are gathered into one message buffer (the one copy), which is then sent as by
    /// [`Agent::write`]; `parts` may be reused as soon as this returns. At most
    /// `Config::rendezvous_chunk` bytes in all. Does not block.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let header = 12u32.to_le_bytes();
    /// agent.writev(peer, &[&header, b"twelve bytes"])?.wait()?; // one stream message
    /// # Ok(())
    /// # }
    /// ```
    pub fn writev(&self, peer: u32, parts: &[&[u8]]) -> Result<Request, AgentError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let max = self.shared.config.rendezvous_chunk;
        if len > max {
            self.check_rank(peer)?;
            return Err(AgentError::StreamTooLong { len, max });
        }
        self.write(peer, parts.concat())
    }

    /// Shows the unconsumed bytes of the oldest stream message from `peer` in place to `f`,
    /// which returns how many of them it consumed (the agent operations `Next` + `Consume`; more than
    /// shown counts as all). `Ok(None)` when no stream message is there after one progress
    /// pass (or reserved reads of the VC come first); `Ok(Some(n))` with the bytes consumed
    /// otherwise. Makes no copy; does not block.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// // Consume up to 4 bytes of the oldest stream message, in place.
    /// if let Some(n) = agent.next(peer, |bytes| bytes.len().min(4))? {
    ///     println!("consumed {n} bytes");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn next<F>(&self, peer: u32, f: F) -> Result<Option<usize>, AgentError>
    where
        F: FnOnce(&[u8]) -> usize,
    {
        self.check_rank(peer)?;
        let mut st = self.shared.lock();
        if let Head::Answer(a) = stream_head(&mut st, peer) {
            return a;
        }
        let Link::Remote(m) = &mut st.vcs[peer as usize].link else {
            return Err(AgentError::SelfStream);
        };
        let (n, whole) = match m.next() {
            Ok(Some((tag, data))) if wire::is_kind(tag, Kind::Stream) => {
                let n = f(data).min(data.len());
                (n, n == data.len())
            }
            Ok(_) => return Ok(None),
            Err(e) => {
                return Err(Failure {
                    reason: e.to_string(),
                    source: Some(crate::error::PeerCause::new(e)),
                }
                .error(peer));
            }
        };
        if let Err(e) = m.consume(n) {
            let failure = Failure {
                reason: e.to_string(),
                source: Some(crate::error::PeerCause::new(e)),
            };
            st.fail_vc(peer, failure.clone());
            return Err(failure.error(peer));
        }
        if whole {
            st.vcs[peer as usize].stream_at_head = false;
        }
        Ok(Some(n))
    }

    /// Shows the unconsumed bytes of the queued stream messages from `peer` in place to `f`,
    /// one slice per message in arrival order (at most [`MAX_VIEWS`], as many as the method
    /// holds in place together: see the [module docs](self)), and consumes the number of bytes
    /// `f` returns across them, front to back (the agent operations `Nextv` + `Consume`; more than shown
    /// counts as all). Messages consumed whole are released to the method. Answers as
    /// [`Agent::next`] does; makes no copy; does not block.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let consumed = agent.nextv(peer, |msgs| msgs.iter().map(|m| m.len()).sum())?;
    /// println!("{consumed:?} bytes");
    /// # Ok(())
    /// # }
    /// ```
    pub fn nextv<F>(&self, peer: u32, f: F) -> Result<Option<usize>, AgentError>
    where
        F: FnOnce(&[&[u8]]) -> usize,
    {
        self.check_rank(peer)?;
        let mut st = self.shared.lock();
        if let Head::Answer(a) = stream_head(&mut st, peer) {
            return a;
        }
        let Link::Remote(m) = &mut st.vcs[peer as usize].link else {
            return Err(AgentError::SelfStream);
        };
        let (n, lens) = match m.next_many(MAX_VIEWS) {
            Ok(views) => {
                let views: Vec<&[u8]> = views
                    .into_iter()
                    .take_while(|(tag, _)| wire::is_kind(*tag, Kind::Stream))
                    .map(|(_, d)| d)
                    .collect();
                if views.is_empty() {
                    return Ok(None);
                }
                let lens: Vec<usize> = views.iter().map(|v| v.len()).collect();
                let total = lens.iter().sum();
                (f(&views).min(total), lens)
            }
            Err(e) => return Err(peer_failed(peer, &e.to_string())),
        };
        let consumed = (|| -> Result<bool, MethodError> {
            let mut left = n;
            for (i, len) in lens.into_iter().enumerate() {
                if i > 0 {
                    // Bring the next message to the head (it is the one shown).
                    m.next()?;
                }
                let k = left.min(len);
                m.consume(k)?;
                left -= k;
                if k < len || left == 0 {
                    return Ok(k == len);
                }
            }
            Ok(true)
        })();
        match consumed {
            Ok(head_gone) => {
                if head_gone {
                    let more = matches!(
                        m.next(),
                        Ok(Some((tag, _))) if wire::is_kind(tag, Kind::Stream)
                    );
                    st.vcs[peer as usize].stream_at_head = more;
                }
                Ok(Some(n))
            }
            Err(e) => {
                let failure = Failure::of(e);
                st.fail_vc(peer, failure.clone());
                Err(failure.error(peer))
            }
        }
    }

    /// Like [`Agent::next`], making progress (and sleeping in the methods) up to `timeout`
    /// until a stream message from `peer` is there; `Ok(None)` at the timeout.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// use std::time::Duration;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let n = agent.next_timeout(peer, Duration::from_secs(5), |bytes| bytes.len())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_timeout<F>(
        &self,
        peer: u32,
        timeout: Duration,
        f: F,
    ) -> Result<Option<usize>, AgentError>
    where
        F: FnOnce(&[u8]) -> usize,
    {
        self.wait_stream(peer, timeout);
        self.next(peer, f)
    }

    /// Like [`Agent::nextv`], waiting up to `timeout` as [`Agent::next_timeout`] does.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// use std::time::Duration;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let n = agent.nextv_timeout(peer, Duration::from_secs(5), |msgs| msgs[0].len())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn nextv_timeout<F>(
        &self,
        peer: u32,
        timeout: Duration,
        f: F,
    ) -> Result<Option<usize>, AgentError>
    where
        F: FnOnce(&[&[u8]]) -> usize,
    {
        self.wait_stream(peer, timeout);
        self.nextv(peer, f)
    }

    /// Shows the oldest stream message from `peer` in place as a [`StreamView`] to `f`, after
    /// one progress pass, and consumes what `f` marked with [`StreamView::consume`]; returns
    /// what `f` returned. The same operation as [`Agent::next`] (`Next` + `Consume` of the VC
    /// stream), named for the stream and with consumption said in words rather than by a
    /// return value. `Ok(None)` when no stream message is there (`f` was not called). Makes no
    /// copy; does not block. `f` runs with the agent's mutex held: it must not call into the
    /// agent.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), viaduct_agent::AgentError> {
    /// # let agent = viaduct_agent::Agent::init()?;
    /// // A length-prefixed record: read the header, consume it only when the body is there.
    /// let body_len = agent.stream_next(1, |view| {
    ///     let len = u32::from_le_bytes(view.data().get(..4)?.try_into().ok()?) as usize;
    ///     view.consume(4);
    ///     Some(len)
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_next<T, F>(&self, peer: u32, f: F) -> Result<Option<T>, AgentError>
    where
        F: FnOnce(&mut StreamView<'_>) -> T,
    {
        let mut out = None;
        let shown = self.next(peer, |data| {
            let mut view = StreamView { data, consumed: 0 };
            out = Some(f(&mut view));
            view.consumed
        })?;
        Ok(shown.and(out))
    }

    /// [`Agent::stream_next`], making progress (and sleeping in the methods) up to `timeout`
    /// until a stream message from `peer` is there; `Ok(None)` at the timeout, without calling
    /// `f`. A failed peer ends the wait at once with [`AgentError::PeerFailed`] once its
    /// remaining stream bytes are consumed.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// use std::time::Duration;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let first = agent.stream_next_timeout(peer, Duration::from_secs(5), |view| {
    ///     view.consume(1);
    ///     view.data()[0]
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_next_timeout<T, F>(
        &self,
        peer: u32,
        timeout: Duration,
        f: F,
    ) -> Result<Option<T>, AgentError>
    where
        F: FnOnce(&mut StreamView<'_>) -> T,
    {
        self.wait_stream(peer, timeout);
        self.stream_next(peer, f)
    }

    /// Shows the queued stream messages from `peer` in place, one slice per message (as
    /// [`Agent::nextv`] does), as a [`StreamViews`] to `f`, after one progress pass, and
    /// consumes what `f` marked with [`StreamViews::consume`], front to back across message
    /// boundaries; returns what `f` returned. `Ok(None)` when no stream message is there.
    /// Makes no copy; does not block.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let total = agent.stream_nextv(peer, |views| {
    ///     let n = views.len();
    ///     views.consume_all();
    ///     n
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_nextv<T, F>(&self, peer: u32, f: F) -> Result<Option<T>, AgentError>
    where
        F: FnOnce(&mut StreamViews<'_, '_>) -> T,
    {
        let mut out = None;
        let shown = self.nextv(peer, |views| {
            let mut view = StreamViews { views, consumed: 0 };
            out = Some(f(&mut view));
            view.consumed
        })?;
        Ok(shown.and(out))
    }

    /// [`Agent::stream_nextv`], waiting up to `timeout` as [`Agent::stream_next_timeout`]
    /// does.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// use std::time::Duration;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let shown = agent.stream_nextv_timeout(peer, Duration::from_secs(5), |views| {
    ///     views.consume_all();
    ///     views.views().len()
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream_nextv_timeout<T, F>(
        &self,
        peer: u32,
        timeout: Duration,
        f: F,
    ) -> Result<Option<T>, AgentError>
    where
        F: FnOnce(&mut StreamViews<'_, '_>) -> T,
    {
        self.wait_stream(peer, timeout);
        self.stream_nextv(peer, f)
    }

    /// Makes progress until a stream message from `peer` is at the head of its VC, the VC
    /// failed, or `timeout` passed.
    fn wait_stream(&self, peer: u32, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = {
                let st = self.shared.lock();
                st.vcs
                    .get(peer as usize)
                    .is_none_or(|v| v.stream_at_head || v.failed.is_some())
            };
            if ready || Instant::now() >= deadline {
                return;
            }
            self.make_progress_blocking(Duration::from_millis(1));
        }
    }
}

/// The unconsumed bytes of one inbound stream message, in the method's receive memory, shown
/// by [`Agent::stream_next`]. Nothing is consumed unless [`StreamView::consume`] says so.
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let peer = 1 - agent.rank(); // a job of two ranks
/// let word = agent.stream_next(peer, |view| {
///     let word = view.data().to_vec();
///     view.consume_all();
///     word
/// })?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct StreamView<'a> {
    data: &'a [u8],
    consumed: usize,
}

impl<'a> StreamView<'a> {
    /// The bytes shown (all of them, whatever was marked consumed).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let copy = agent.stream_next(peer, |view| {
    ///     view.consume_all();
    ///     view.data().to_vec() // still every byte shown
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// Number of bytes shown.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let len = agent.stream_next(peer, |view| view.len())?; // nothing consumed
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the message shown has no bytes left (an empty stream message).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let empty = agent.stream_next(peer, |view| {
    ///     view.consume_all();
    ///     view.is_empty()
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Marks `n` more bytes, from the front, as consumed (at most the bytes shown): they are
    /// handed back to the method when the call returns, and the next call shows what follows.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// // Take the 4-byte length prefix; the body stays for the next call.
    /// let len = agent.stream_next(peer, |view| {
    ///     let prefix: [u8; 4] = view.data()[..4].try_into().unwrap();
    ///     view.consume(4);
    ///     u32::from_le_bytes(prefix)
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn consume(&mut self, n: usize) {
        self.consumed = self.consumed.saturating_add(n).min(self.data.len());
    }

    /// Marks every byte shown as consumed (the message is released to the method).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// agent.stream_next(peer, |view| view.consume_all())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn consume_all(&mut self) {
        self.consumed = self.data.len();
    }

    /// Bytes marked consumed so far.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let taken = agent.stream_next(peer, |view| {
    ///     view.consume(view.len() / 2);
    ///     view.consumed()
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn consumed(&self) -> usize {
        self.consumed
    }
}

/// The unconsumed bytes of several queued inbound stream messages, one slice each in arrival
/// order, shown by [`Agent::stream_nextv`]. Nothing is consumed unless
/// [`StreamViews::consume`] says so.
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let peer = 1 - agent.rank(); // a job of two ranks
/// let bytes = agent.stream_nextv(peer, |views| {
///     let all: Vec<u8> = views.views().concat();
///     views.consume_all();
///     all
/// })?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct StreamViews<'v, 'a> {
    views: &'v [&'a [u8]],
    consumed: usize,
}

impl<'v, 'a> StreamViews<'v, 'a> {
    /// The messages shown, one slice each.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let sizes = agent.stream_nextv(peer, |views| {
    ///     views.views().iter().map(|m| m.len()).collect::<Vec<_>>()
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn views(&self) -> &'v [&'a [u8]] {
        self.views
    }

    /// Number of bytes shown, over every message.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let total = agent.stream_nextv(peer, |views| views.len())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.views.iter().map(|v| v.len()).sum()
    }

    /// Whether no byte is shown (only empty messages).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let nothing = agent.stream_nextv(peer, |views| views.is_empty())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks `n` more bytes as consumed, front to back across message boundaries (at most the
    /// bytes shown). Messages consumed whole are released to the method when the call returns.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// agent.stream_nextv(peer, |views| views.consume(views.len().min(10)))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn consume(&mut self, n: usize) {
        self.consumed = self.consumed.saturating_add(n).min(self.len());
    }

    /// Marks every byte shown as consumed.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// agent.stream_nextv(peer, |views| views.consume_all())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn consume_all(&mut self) {
        self.consumed = self.len();
    }

    /// Bytes marked consumed so far.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let done = agent.stream_nextv(peer, |views| {
    ///     views.consume(1);
    ///     views.consumed()
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn consumed(&self) -> usize {
        self.consumed
    }
}
