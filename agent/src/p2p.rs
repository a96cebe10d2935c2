//! Tagged point-to-point messaging: `isend`, `issend`, `irecv`, `send`, `ssend`, `recv`,
//! `probe`, `iprobe`, and the matched probe `mprobe`, `improbe` with its [`Message`].
//!
//! # Protocols
//!
//! - **Self** (destination is this rank): the message is matched at once; unmatched, it is
//!   copied into the unexpected queue. A synchronous send to self completes when matched.
//! - **Eager** (up to `Config::eager_limit` bytes): the data goes with the envelope in one
//!   method message; the send completes when the method completed the descriptor (the data has
//!   left the caller's buffer); the receiver copies it into the receive buffer, or into the
//!   unexpected queue when no receive matches yet.
//! - **Rendezvous** (longer messages, and every synchronous send to a peer): the sender
//!   announces the message (`RTS`), the receiver answers once a receive matches (`CTS`), and
//!   the data follows in pieces of `Config::rendezvous_chunk` bytes, pipelined by the method
//!   (shared memory: pieces of one ring record up to the method's ring-copy limit, each
//!   copied into the ring by the sender and out of it straight into the receive buffer by
//!   the receiver; longer messages read once straight out of the sender's buffer where
//!   `process_vm_readv` is permitted; TCP: gathered `sendmsg` of the owned pieces). The send
//!   request counts one CAR per piece. The pieces are copies of the caller's data, owned by
//!   the agent, except for a send from shared memory ([`Agent::isend_shared`]) and a
//!   blocking [`Agent::send`] or [`Agent::ssend`] past the eager limit (which waits, so the
//!   caller's slice outlives the transfer), whose pieces refer to the caller's bytes: shared
//!   memory reads them in place, TCP and verbs copy each into their send memory as they post
//!   it.
//!
//! A receive lands in a [`RecvBuffer`]: the agent's memory, or the caller's
//! ([`RecvBuffer::caller`]), which the eager and rendezvous paths write in place; a blocking
//! [`Agent::recv`] into a slice of 16 KiB or more lends the slice itself (no copy out of an
//! agent buffer afterwards). Or it is read where the method received it, without a copy:
//! [`Agent::recv_in_place`] (see [`crate::in_place`]).
//!
//! # Requests and statuses
//!
//! Every operation returns the agent's one [`Request`] type; its status carries the source,
//! tag and byte count of a receive. Failures are the request's error
//! (`RequestError::Operation`, whose cause downcasts to [`AgentError`]): a message longer than
//! the receive buffer gives [`AgentError::Truncated`] (the buffer holds the first bytes, nothing
//! is written beyond it), a dead peer [`AgentError::PeerFailed`]. A pending receive can be
//! cancelled with `Request::cancel` (its status then reports the cancellation); a send cannot
//! (its status never reports one).

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use viaduct_fallback::sendbuf::SharedBytes;
use viaduct_fallback::sendbuf::{SendBuf, SharedPiece};

use crate::agent::Agent;
use crate::engine::{PostedRecv, Unexpected};
use crate::error::AgentError;
use crate::matching::{Envelope, Pattern, Source, TagMatch};
use crate::recv_buffer::RecvBuffer;
use crate::request::{Request, Status};
use crate::vc::Link;

/// What a probe found: the envelope and length of the oldest matching message not received yet.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// agent.send(0, 4, b"four")?;
/// let probed = agent.probe(Source::Any, TagMatch::Any, None)?;
/// assert_eq!((probed.source, probed.tag, probed.len), (0, 4, 4));
/// let mut buf = vec![0; probed.len as usize];
/// agent.recv(&mut buf, Source::Rank(probed.source), TagMatch::Tag(probed.tag))?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    /// The sending rank.
    pub source: u32,
    /// The message tag.
    pub tag: u32,
    /// The message length in bytes.
    pub len: u64,
}

/// A message taken out of matching by a matched probe ([`Agent::mprobe`],
/// [`Agent::improbe`], `MPI_Mprobe`): no later probe or receive can match it; it is received
/// only through this handle ([`Message::recv`], [`Message::irecv_into`]). A small message's
/// data is held here; a rendezvous message's data stays with its sender until the receive
/// answers its announcement. Dropped unreceived, the message is received into nothing (its
/// sender's request completes as if it had been received).
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// agent.send(0, 2, b"mine")?;
/// let msg = agent.mprobe(Source::Any, TagMatch::Tag(2), None)?;
/// let mut buf = vec![0; msg.len() as usize]; // sized to the message
/// let status = msg.recv(&mut buf)?;
/// assert_eq!((status.count(), &buf[..]), (4, &b"mine"[..]));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Message {
    agent: Agent,
    env: Envelope,
    body: Option<Unexpected>,
}

impl Message {
    /// The sending rank (world rank of the agent).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 2, b"x")?;
    /// let msg = agent.mprobe(Source::Any, TagMatch::Any, None)?;
    /// assert_eq!(msg.source(), 0);
    /// # msg.recv(&mut [0u8; 1])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn source(&self) -> u32 {
        self.env.source
    }

    /// The message tag.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 2, b"x")?;
    /// let msg = agent.mprobe(Source::Any, TagMatch::Any, None)?;
    /// assert_eq!(msg.tag(), 2);
    /// # msg.recv(&mut [0u8; 1])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn tag(&self) -> u32 {
        self.env.tag
    }

    /// The message length in bytes.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 2, b"three")?;
    /// let msg = agent.mprobe(Source::Any, TagMatch::Any, None)?;
    /// assert_eq!(msg.len(), 5);
    /// # msg.recv(&mut [0u8; 5])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn len(&self) -> u64 {
        self.body.as_ref().map_or(0, Unexpected::len)
    }

    /// Whether the message has no bytes.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 2, b"")?;
    /// let msg = agent.mprobe(Source::Any, TagMatch::Any, None)?;
    /// assert!(msg.is_empty());
    /// msg.recv(&mut [])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts receiving the message into `buf` (empty; its capacity bounds the message, a
    /// longer message fails the request with [`AgentError::Truncated`]) (`MPI_Imrecv`).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 2, b"into")?;
    /// let msg = agent.mprobe(Source::Rank(0), TagMatch::Tag(2), None)?;
    /// let buf = RecvBuffer::new(msg.len() as usize);
    /// msg.irecv_into(buf.clone())?.wait()?;
    /// assert_eq!(buf.take(), b"into");
    /// # Ok(())
    /// # }
    /// ```
    pub fn irecv_into(mut self, buf: RecvBuffer) -> Result<Request, AgentError> {
        self.deliver(buf)
    }

    /// Starts receiving the message into a new buffer of `capacity` bytes.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 2, b"new")?;
    /// let msg = agent.mprobe(Source::Rank(0), TagMatch::Tag(2), None)?;
    /// let (mut request, buf) = msg.irecv(16)?;
    /// request.wait()?;
    /// assert_eq!(buf.take(), b"new");
    /// # Ok(())
    /// # }
    /// ```
    pub fn irecv(self, capacity: usize) -> Result<(Request, RecvBuffer), AgentError> {
        let buf = RecvBuffer::new(capacity);
        let request = self.irecv_into(buf.clone())?;
        Ok((request, buf))
    }

    /// Receives the message into `buf` and waits for it (`MPI_Mrecv`). A longer message fills
    /// `buf` and fails with [`AgentError::Truncated`] (inside [`AgentError::Request`]).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 2, b"whole")?;
    /// let msg = agent.mprobe(Source::Rank(0), TagMatch::Tag(2), None)?;
    /// let mut buf = [0u8; 8];
    /// let status = msg.recv(&mut buf)?;
    /// assert_eq!(&buf[..status.count() as usize], b"whole");
    /// # Ok(())
    /// # }
    /// ```
    pub fn recv(self, buf: &mut [u8]) -> Result<Status, AgentError> {
        let agent = self.agent.clone();
        if buf.len() >= crate::borrowed::IN_PLACE_RECV {
            return agent.recv_in_caller(buf, |data| self.irecv_into(data));
        }
        let data = RecvBuffer::new(buf.len());
        let result = self.irecv_into(data.clone())?.wait();
        data.copy_to(buf);
        agent.recycle(&data);
        Ok(result?)
    }

    /// Hands the message to a receive into `buf`: completes it at once (small message) or
    /// answers the sender's announcement (rendezvous).
    fn deliver(&mut self, buf: RecvBuffer) -> Result<Request, AgentError> {
        let shared = &self.agent.shared;
        let (request, counter) = Request::message_driven(1, shared.driver.clone());
        let mut st = shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        let Some(body) = self.body.take() else {
            return Err(AgentError::Finalized);
        };
        let env = self.env;
        let r = PostedRecv {
            buf,
            counter,
            ranks: None,
            lease: None,
        };
        match body {
            Unexpected::Eager { data, sync } => {
                crate::proto::eager::deliver(&st.book.done, r, &env, &data);
                if let Some(s) = sync {
                    st.book.done.note(s.complete_car(data.len() as u64));
                }
            }
            Unexpected::Rts { sender_id, len } => {
                match st.vcs[env.source as usize].failure() {
                    // The sender failed after the probe: its data cannot come any more.
                    Some(why) => {
                        r.counter.set_envelope(env.source, env.tag);
                        st.book.done.note(r.counter.fail_car(why.error(env.source)));
                    }
                    None => st.book.start_rndv_recv(env, sender_id, len, r),
                }
                st.progress();
            }
        }
        Ok(request)
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if self.body.is_some() {
            // Received into nothing: the sender's request completes, the data is dropped.
            let _ = self.deliver(RecvBuffer::new(0));
        }
    }
}

/// A place held in the outgoing order of one VC by [`Agent::reserve_write`], to be bound to a
/// message by [`Agent::set_marker`].
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let marker = agent.reserve_write(1)?; // the place in rank 1's order is taken now
/// agent.send(1, 2, b"leaves after the marked one")?;
/// let header = b"computed later";
/// agent.set_marker(marker, 1, header)?.wait()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a reserved place holds back every later message to the peer until it is bound"]
pub struct Marker {
    peer: u32,
    id: u64,
}

impl Marker {
    /// The peer whose VC the place is in.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let marker = agent.reserve_write(1)?;
    /// assert_eq!(marker.peer(), 1);
    /// agent.set_marker(marker, 0, b"bound")?.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn peer(&self) -> u32 {
        self.peer
    }
}

enum Payload<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
    Shared(SharedBytes),
}

impl Payload<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Payload::Borrowed(b) => b,
            Payload::Owned(v) => v,
            Payload::Shared(s) => (**s).as_ref(),
        }
    }

    fn into_vec(self) -> Vec<u8> {
        match self {
            Payload::Borrowed(b) => b.to_vec(),
            Payload::Owned(v) => v,
            Payload::Shared(s) => (*s).as_ref().to_vec(),
        }
    }

    /// The data in pieces of at most `chunk` bytes (one empty piece for an empty message),
    /// copied into kept buffers where the data is borrowed; pieces of shared or owned data
    /// refer to it (no copy).
    fn into_chunks(self, chunk: usize, spare: &mut crate::spare::Spare) -> Vec<SendBuf> {
        let copy = |piece: &[u8], spare: &mut crate::spare::Spare| {
            let mut v = spare.take(piece.len());
            v.extend_from_slice(piece);
            SendBuf::Owned(v)
        };
        match self {
            Payload::Owned(v) if v.len() <= chunk => vec![SendBuf::Owned(v)],
            // Pieces of the one buffer, not copies of them.
            Payload::Owned(v) => Payload::Shared(Arc::new(v)).into_chunks(chunk, spare),
            Payload::Borrowed(b) if b.len() <= chunk => vec![copy(b, spare)],
            Payload::Borrowed(b) => b.chunks(chunk).map(|p| copy(p, spare)).collect(),
            Payload::Shared(s) => {
                let len = (*s).as_ref().len();
                if len <= chunk {
                    return vec![SendBuf::Shared(SharedPiece::whole(s))];
                }
                (0..len)
                    .step_by(chunk)
                    .filter_map(|at| SharedPiece::new(s.clone(), at, chunk.min(len - at)))
                    .map(SendBuf::Shared)
                    .collect()
            }
        }
    }
}

impl Agent {
    fn send_inner(
        &self,
        dest: u32,
        tag: u32,
        data: Payload<'_>,
        sync: bool,
    ) -> Result<Request, AgentError> {
        self.send_at(dest, tag, data, sync, None)
    }

    fn send_at(
        &self,
        dest: u32,
        tag: u32,
        data: Payload<'_>,
        sync: bool,
        marker: Option<u64>,
    ) -> Result<Request, AgentError> {
        self.check_rank(dest)?;
        if tag == u32::MAX {
            return Err(AgentError::ReservedTag(tag));
        }
        let shared = &self.shared;
        let (request, counter) = Request::message_driven(1, shared.driver.clone());
        let mut st = shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        if dest == shared.rank {
            st.book
                .self_send(self.context, tag, data.into_vec(), counter, sync);
            return Ok(request);
        }
        if let Some(failure) = st.vcs[dest as usize].failure() {
            let _ = counter.fail_car(failure.error(dest));
            return Ok(request);
        }
        let len = data.as_slice().len();
        let counter = if !sync && len <= st.book.eager_limit && marker.is_none() {
            match st.eager_now(dest, self.context, tag, data.as_slice(), counter) {
                Ok(()) => return Ok(request),
                Err(counter) => counter,
            }
        } else {
            counter
        };
        let out = if !sync && len <= st.book.eager_limit {
            st.book
                .eager_send(dest, self.context, tag, data.as_slice(), counter)
        } else {
            let chunk = match &st.vcs[dest as usize].link {
                Link::Remote(m) => m.rendezvous_piece(len, st.book.chunk),
                _ => st.book.chunk,
            };
            // Over verbs, borrowed bytes go straight into the registered buffer the receiver
            // reads (one copy, not two). (A send bound to a marker is posted as it is queued,
            // without the read protocol's announcement, so it keeps the usual pieces.)
            #[cfg(feature = "rdma")]
            let registered = match &data {
                Payload::Borrowed(b) if marker.is_none() => {
                    crate::engine::read_rndv::register_copy(&mut st, dest, b)
                }
                _ => None,
            };
            #[cfg(feature = "rdma")]
            if let Some((piece, region)) = registered {
                let out = st
                    .book
                    .rendezvous_send(dest, self.context, tag, vec![piece], counter);
                crate::engine::read_rndv::prepared(&mut st, dest, &out, region);
                return self.write_send(st, dest, out, marker, request);
            }
            let chunks = data.into_chunks(chunk, &mut st.book.spare);
            st.book
                .rendezvous_send(dest, self.context, tag, chunks, counter)
        };
        self.write_send(st, dest, out, marker, request)
    }

    /// Writes the first message of a send (or binds it to its marker).
    fn write_send(
        &self,
        mut st: std::sync::MutexGuard<'_, crate::engine::State>,
        dest: u32,
        out: crate::vc::Outbound,
        marker: Option<u64>,
        request: Request,
    ) -> Result<Request, AgentError> {
        match marker {
            None => st.write(dest, out),
            Some(m) => {
                if let Err(out) = st.vcs[dest as usize].set_marker(m, out) {
                    let why = st.vcs[dest as usize]
                        .failure()
                        .unwrap_or_else(|| "the marker was bound already".into());
                    st.book.peer_failed_one(dest, &why, out);
                }
                st.progress();
            }
        }
        Ok(request)
    }

    /// Holds a place for a message to `dest` in its VC's outgoing order now
    /// (the agent operation `Reserve_write`); bind the message later with [`Agent::set_marker`].
    /// Messages to `dest` posted after the reservation leave after the bound message, so
    /// markers bound out of order still go out in reservation order (and match receives in that
    /// order). Not available on the self loop (`dest` = own rank), whose messages are matched
    /// at once.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// if agent.rank() == 0 {
    ///     let first = agent.reserve_write(1)?;
    ///     let second = agent.reserve_write(1)?;
    ///     let mut b = agent.set_marker(second, 7, b"second")?; // bound first ...
    ///     let mut a = agent.set_marker(first, 7, b"first")?; // ... still leaves second
    ///     a.wait()?;
    ///     b.wait()?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn reserve_write(&self, dest: u32) -> Result<Marker, AgentError> {
        self.check_rank(dest)?;
        if dest == self.shared.rank {
            return Err(AgentError::SelfReservation);
        }
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        let id = st.book.id();
        st.vcs[dest as usize].reserve_write(id);
        Ok(Marker { peer: dest, id })
    }

    /// Binds a tagged message to a place held by [`Agent::reserve_write`] (the agent
    /// operation `Set_marker`) and returns its send request. The data is copied as by [`Agent::isend`].
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let marker = agent.reserve_write(1)?;
    /// let mut request = agent.set_marker(marker, 5, b"payload")?;
    /// request.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_marker(&self, marker: Marker, tag: u32, data: &[u8]) -> Result<Request, AgentError> {
        if tag == u32::MAX {
            return Err(AgentError::ReservedTag(tag));
        }
        self.send_at(
            marker.peer,
            tag,
            Payload::Borrowed(data),
            false,
            Some(marker.id),
        )
    }

    /// Binds a tagged message made of several buffers to a place held by
    /// [`Agent::reserve_write`] (the agent operation `Set_markerv`) and returns its send request. The
    /// parts are gathered into one message buffer (the one copy: an eager message adds its
    /// envelope in front, a rendezvous message of one piece is sent from that buffer), so
    /// they may be reused as soon as this returns. Order as for [`Agent::set_marker`].
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let marker = agent.reserve_write(1)?;
    /// let (header, body) = (&b"head"[..], &b"body"[..]);
    /// agent.set_markerv(marker, 5, &[header, body])?.wait()?; // one message "headbody"
    /// # Ok(())
    /// # }
    /// ```
    pub fn set_markerv(
        &self,
        marker: Marker,
        tag: u32,
        parts: &[&[u8]],
    ) -> Result<Request, AgentError> {
        if tag == u32::MAX {
            return Err(AgentError::ReservedTag(tag));
        }
        self.send_at(
            marker.peer,
            tag,
            Payload::Owned(parts.concat()),
            false,
            Some(marker.id),
        )
    }

    /// Starts a send of `data` to rank `dest` with `tag` (`MPI_Isend`). The data is copied
    /// (eager: into the method; rendezvous: into pieces the agent owns until sent), so `data`
    /// may be reused as soon as this returns; the request completes when the message has left.
    /// An eager message that the method takes at once leaves as this returns: its request is
    /// complete then, as MPICH completes its small eager sends.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let send = agent.isend(0, 1, b"ping")?;
    /// let (recv, buf) = agent.irecv(16, Source::Rank(0), TagMatch::Tag(1))?;
    /// wait_all(&mut [send, recv], None)?;
    /// assert_eq!(buf.take(), b"ping");
    /// # Ok(())
    /// # }
    /// ```
    pub fn isend(&self, dest: u32, tag: u32, data: &[u8]) -> Result<Request, AgentError> {
        self.send_inner(dest, tag, Payload::Borrowed(data), false)
    }

    /// Like [`Agent::isend`], taking the buffer: a rendezvous message no larger than one piece
    /// is sent from it without a copy.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let data = vec![7u8; 100_000];
    /// let send = agent.isend_owned(0, 1, data)?; // no copy of the caller's buffer
    /// let (recv, buf) = agent.irecv(100_000, Source::Rank(0), TagMatch::Tag(1))?;
    /// wait_all(&mut [send, recv], None)?;
    /// assert_eq!(buf.len(), 100_000);
    /// # Ok(())
    /// # }
    /// ```
    pub fn isend_owned(&self, dest: u32, tag: u32, data: Vec<u8>) -> Result<Request, AgentError> {
        self.send_inner(dest, tag, Payload::Owned(data), false)
    }

    /// Like [`Agent::isend`] from memory the caller keeps alive and unchanged until the
    /// request completes (`MPI_Isend`'s rule for its buffer): the agent holds a reference
    /// instead of a copy. A rendezvous message is read in place (over shared memory the
    /// receiver copies it once, straight out of `data`; TCP and verbs copy each piece into
    /// their send memory as it is posted); an eager message is copied at once, as by
    /// [`Agent::isend`]. Nothing reads `data` once the request completed, failed or not; the
    /// agent lets go of its references as it completes the request (a successful send's
    /// before its completion shows).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use std::sync::Arc;
    ///
    /// let data: Arc<Vec<u8>> = Arc::new(vec![1u8; 1 << 20]);
    /// let send = agent.isend_shared(0, 1, data.clone())?; // a reference, not a copy
    /// let (recv, buf) = agent.irecv(1 << 20, Source::Rank(0), TagMatch::Tag(1))?;
    /// wait_all(&mut [send, recv], None)?;
    /// assert_eq!(buf.len(), data.len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn isend_shared(
        &self,
        dest: u32,
        tag: u32,
        data: SharedBytes,
    ) -> Result<Request, AgentError> {
        self.send_inner(dest, tag, Payload::Shared(data), false)
    }

    /// Like [`Agent::issend`], from shared memory as for [`Agent::isend_shared`].
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use std::sync::Arc;
    ///
    /// let data = Arc::new(vec![2u8; 64]);
    /// let (recv, _buf) = agent.irecv(64, Source::Rank(0), TagMatch::Tag(1))?;
    /// let send = agent.issend_shared(0, 1, data)?;
    /// wait_all(&mut [send, recv], None)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn issend_shared(
        &self,
        dest: u32,
        tag: u32,
        data: SharedBytes,
    ) -> Result<Request, AgentError> {
        self.send_inner(dest, tag, Payload::Shared(data), true)
    }

    /// Starts a synchronous send (`MPI_Issend`): the request completes only once a matching
    /// receive took the message (always rendezvous to a peer).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let (recv, _buf) = agent.irecv(8, Source::Rank(0), TagMatch::Tag(3))?;
    /// let send = agent.issend(0, 3, b"sync")?; // completes once the receive matched
    /// wait_all(&mut [send, recv], None)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn issend(&self, dest: u32, tag: u32, data: &[u8]) -> Result<Request, AgentError> {
        self.send_inner(dest, tag, Payload::Borrowed(data), true)
    }

    /// Starts a receive of at most `capacity` bytes from `source` with `tag` (`MPI_Irecv`);
    /// the message lands in the returned buffer once the request completes.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let (mut request, buf) = agent.irecv(64, Source::Any, TagMatch::Any)?;
    /// agent.send(0, 9, b"any")?;
    /// let status = request.wait()?;
    /// assert_eq!((status.source(), status.tag()), (Some(0), Some(9)));
    /// assert_eq!(buf.take(), b"any");
    /// # Ok(())
    /// # }
    /// ```
    pub fn irecv(
        &self,
        capacity: usize,
        source: Source,
        tag: TagMatch,
    ) -> Result<(Request, RecvBuffer), AgentError> {
        let buf = RecvBuffer::new(capacity);
        let request = self.irecv_into(buf.clone(), source, tag)?;
        Ok((request, buf))
    }

    /// Starts a receive into `buf` (which must be empty; its capacity bounds the message).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let buf = RecvBuffer::new(1024);
    /// let mut request = agent.irecv_into(buf.clone(), Source::Rank(0), TagMatch::Tag(1))?;
    /// agent.send(0, 1, b"reused")?;
    /// request.wait()?;
    /// assert_eq!(buf.take(), b"reused");
    /// buf.clear(); // post it again, same memory
    /// # let _ = agent.irecv_into(buf, Source::Rank(0), TagMatch::Tag(2))?.cancel();
    /// # Ok(())
    /// # }
    /// ```
    pub fn irecv_into(
        &self,
        buf: RecvBuffer,
        source: Source,
        tag: TagMatch,
    ) -> Result<Request, AgentError> {
        self.irecv_mapped(buf, source, tag, None)
    }

    /// [`Agent::irecv_into`] whose status reports the source through `ranks` (world rank ->
    /// communicator rank).
    pub(crate) fn irecv_mapped(
        &self,
        buf: RecvBuffer,
        source: Source,
        tag: TagMatch,
        ranks: Option<std::sync::Arc<[u32]>>,
    ) -> Result<Request, AgentError> {
        self.check_source(source)?;
        if tag == TagMatch::Tag(u32::MAX) {
            return Err(AgentError::ReservedTag(u32::MAX));
        }
        let shared = &self.shared;
        let (request, counter) = Request::message_driven(1, shared.driver.clone());
        let mut st = shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        let pattern = Pattern {
            context: self.context,
            source,
            tag,
        };
        let dead = match source {
            Source::Rank(r) => st.vcs[r as usize].failure().map(|why| (r, why)),
            Source::Any => None,
        };
        let posted = PostedRecv {
            buf,
            counter,
            ranks,
            lease: None,
        };
        match dead {
            // Nothing more can come from a failed peer: a receive not matched by a message
            // that arrived before the failure fails now.
            Some((r, why)) => {
                if let Some(p) = st.book.try_match(&pattern, posted) {
                    let _ = p.counter.fail_car(why.error(r));
                }
            }
            None => st.book.post_recv(pattern, posted),
        }
        // Try to make progress at once, so an eager message already in a method is matched.
        st.progress();
        Ok(request)
    }

    /// Sends and waits for the send to complete (`MPI_Send`).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 1, b"blocking")?; // the buffer may be reused at once
    /// # agent.recv(&mut [0u8; 8], Source::Rank(0), TagMatch::Tag(1))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn send(&self, dest: u32, tag: u32, data: &[u8]) -> Result<(), AgentError> {
        if self.send_now(dest, tag, data) {
            return Ok(());
        }
        self.send_general(dest, tag, data)
    }

    /// The general path of [`Agent::send`]: a request and a wait. Kept out of line, so that
    /// the fast path's frame stays small (measured by instruction counts, see
    /// `docs/perf/agent.md`).
    #[cold]
    #[inline(never)]
    fn send_general(&self, dest: u32, tag: u32, data: &[u8]) -> Result<(), AgentError> {
        if data.len() > self.config().eager_limit {
            return self.send_from_caller(data, |bytes| {
                self.send_inner(dest, tag, Payload::Shared(bytes), false)
            });
        }
        self.isend(dest, tag, data)?.wait()?;
        Ok(())
    }

    /// Synchronous send (`MPI_Ssend`): returns once a matching receive took the message.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use std::time::Duration;
    ///
    /// let (mut recv, _buf) = agent.irecv(8, Source::Rank(0), TagMatch::Tag(4))?;
    /// agent.ssend(0, 4, b"synced")?; // the receive above matched it
    /// assert!(recv.wait_timeout(Duration::from_secs(10))?.is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub fn ssend(&self, dest: u32, tag: u32, data: &[u8]) -> Result<(), AgentError> {
        if data.len() >= crate::borrowed::IN_PLACE_RECV {
            return self.send_from_caller(data, |bytes| {
                self.send_inner(dest, tag, Payload::Shared(bytes), true)
            });
        }
        self.issend(dest, tag, data)?.wait()?;
        Ok(())
    }

    /// Receives into `buf` (`MPI_Recv`); the status tells the source, tag and length. A longer
    /// message fills `buf` and fails with [`AgentError::Truncated`] (inside
    /// [`AgentError::Request`]).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 1, b"hello")?;
    /// let mut buf = [0u8; 16];
    /// let status = agent.recv(&mut buf, Source::Rank(0), TagMatch::Tag(1))?;
    /// assert_eq!(&buf[..status.count() as usize], b"hello");
    /// # Ok(())
    /// # }
    /// ```
    pub fn recv(
        &self,
        buf: &mut [u8],
        source: Source,
        tag: TagMatch,
    ) -> Result<Status, AgentError> {
        self.recv_mapped(buf, source, tag, None)
    }

    /// [`Agent::recv`] whose status reports the source through `ranks` (world rank ->
    /// communicator rank).
    pub(crate) fn recv_mapped(
        &self,
        buf: &mut [u8],
        source: Source,
        tag: TagMatch,
        ranks: Option<std::sync::Arc<[u32]>>,
    ) -> Result<Status, AgentError> {
        self.check_source(source)?;
        if let Some(st) = self.recv_now(buf, source, tag) {
            let Some(map) = &ranks else {
                return Ok(st);
            };
            let from = st.source().unwrap_or(u32::MAX);
            let from = map.get(from as usize).copied().unwrap_or(from);
            return Ok(Status::message(
                from,
                st.tag().unwrap_or(u32::MAX),
                st.count(),
            ));
        }
        if buf.len() >= crate::borrowed::IN_PLACE_RECV {
            return self.recv_in_caller(buf, |data| self.irecv_mapped(data, source, tag, ranks));
        }
        let data = RecvBuffer::new(buf.len());
        let result = self.irecv_mapped(data.clone(), source, tag, ranks)?.wait();
        data.copy_to(buf);
        self.recycle(&data);
        Ok(result?)
    }

    /// Looks for a matching message without receiving it (`MPI_Iprobe`), after one progress
    /// pass.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// assert!(agent.iprobe(Source::Any, TagMatch::Tag(6))?.is_none());
    /// agent.send(0, 6, b"probe me")?;
    /// let found = agent.iprobe(Source::Any, TagMatch::Tag(6))?.expect("sent above");
    /// assert_eq!(found.len, 8);
    /// # agent.recv(&mut [0u8; 8], Source::Rank(0), TagMatch::Tag(6))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn iprobe(&self, source: Source, tag: TagMatch) -> Result<Option<Probed>, AgentError> {
        self.check_source(source)?;
        let pattern = Pattern {
            context: self.context,
            source,
            tag,
        };
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        st.progress();
        if let Some((e, u)) = st.book.queues.peek_unexpected(&pattern) {
            return Ok(Some(Probed {
                source: e.source,
                tag: e.tag,
                len: u.len(),
            }));
        }
        if let Source::Rank(r) = source {
            if let (Some(failure), true) =
                (st.vcs[r as usize].failure(), st.vcs[r as usize].drained)
            {
                return Err(failure.error(r));
            }
        }
        Ok(None)
    }

    /// Looks for a matching message and takes it out of matching (`MPI_Improbe`), after one
    /// progress pass: `None` when none is there. The message is then received only through the
    /// returned [`Message`].
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// agent.send(0, 6, b"taken")?;
    /// if let Some(msg) = agent.improbe(Source::Any, TagMatch::Any)? {
    ///     let mut buf = vec![0; msg.len() as usize];
    ///     msg.recv(&mut buf)?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn improbe(&self, source: Source, tag: TagMatch) -> Result<Option<Message>, AgentError> {
        self.check_source(source)?;
        let pattern = Pattern {
            context: self.context,
            source,
            tag,
        };
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        st.progress();
        if let Some((env, body)) = st.book.queues.take_unexpected(&pattern) {
            if let Unexpected::Eager { data, .. } = &body {
                st.book.unexpected_bytes -= data.len();
            }
            return Ok(Some(Message {
                agent: self.clone(),
                env,
                body: Some(body),
            }));
        }
        if let Source::Rank(r) = source {
            if let (Some(failure), true) =
                (st.vcs[r as usize].failure(), st.vcs[r as usize].drained)
            {
                return Err(failure.error(r));
            }
        }
        Ok(None)
    }

    /// Waits until a matching message is there and takes it out of matching (`MPI_Mprobe`), at
    /// most `timeout` (`None`: no limit). A probe naming a failed peer ends with
    /// [`AgentError::PeerFailed`].
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use std::time::Duration;
    ///
    /// agent.send(0, 8, b"m")?;
    /// let msg = agent.mprobe(Source::Rank(0), TagMatch::Tag(8), Some(Duration::from_secs(5)))?;
    /// msg.recv(&mut [0u8; 1])?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn mprobe(
        &self,
        source: Source,
        tag: TagMatch,
        timeout: Option<Duration>,
    ) -> Result<Message, AgentError> {
        self.probe_until("matched probe", timeout, || self.improbe(source, tag))
    }

    /// Waits until a matching message is there (`MPI_Probe`), at most `timeout` (`None`: no
    /// limit). A probe naming a failed peer ends with [`AgentError::PeerFailed`].
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use std::time::Duration;
    ///
    /// let e = agent.probe(Source::Any, TagMatch::Tag(99), Some(Duration::from_millis(10)));
    /// assert!(e.unwrap_err().is_timeout());
    /// # Ok(())
    /// # }
    /// ```
    pub fn probe(
        &self,
        source: Source,
        tag: TagMatch,
        timeout: Option<Duration>,
    ) -> Result<Probed, AgentError> {
        self.probe_until("probe", timeout, || self.iprobe(source, tag))
    }

    /// Runs `attempt` until it finds something, with blocking progress between tries, at most
    /// `timeout` (`None`: no limit); past it, [`AgentError::Timeout`] naming `what`.
    fn probe_until<T>(
        &self,
        what: &'static str,
        timeout: Option<Duration>,
        mut attempt: impl FnMut() -> Result<Option<T>, AgentError>,
    ) -> Result<T, AgentError> {
        let start = Instant::now();
        loop {
            if let Some(found) = attempt()? {
                return Ok(found);
            }
            if let Some(t) = timeout
                && start.elapsed() >= t
            {
                return Err(AgentError::Timeout {
                    what,
                    seconds: t.as_secs(),
                });
            }
            self.shared
                .progress_blocking(Duration::from_millis(1), None);
        }
    }
}
