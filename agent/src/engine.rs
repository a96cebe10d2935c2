//! The agent's state behind its mutex: VCs, matching queues, and the progress engine that
//! drives the protocols (eager: [`crate::proto::eager`], rendezvous by messages:
//! [`crate::proto::rndv`], by RDMA READ: [`read_rndv`], xfer blocks:
//! [`xfer`], with its plans [`xfer_plan`] and the buffers of running blocks
//! [`xfer_buffers`]; the blocks themselves are [`crate::xfer`]).

pub(crate) mod read_rndv;
pub(crate) mod xfer;
pub(crate) mod xfer_buffers;
pub(crate) mod xfer_plan;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use viaduct_fallback::sendbuf::SendBuf;

use crate::error::AgentError;
use crate::liveness::Heard;
use crate::matching::{Envelope, MatchQueues, Pattern, Source};
use crate::method::{Method, MethodError};
use crate::proto::eager;
pub(crate) use crate::proto::recv::{Completions, InPlaceData, PostedRecv, Unexpected};
use crate::proto::rndv::{Cleared, Rendezvous};
use crate::proto::{DescId, Failure, ProtocolError, Route};
use crate::request::CarCounter;
use crate::vc::{Link, Outbound, Vc};
use crate::wire::{self, Kind, RTS_LEN};
use xfer::{Ready, XferEngine};

/// Completes the in-place receive `r` with the current inbound message of `m` (its payload
/// `skip` bytes in): lent in place where the method can (true: the VC waits for the lease
/// back), else copied. A message the method no longer shows is copied out of `next`.
fn lend_to(
    m: &mut Method,
    done: &Completions,
    r: PostedRecv,
    env: &Envelope,
    skip: usize,
    peer: u32,
) -> Result<bool, MethodError> {
    let Some(lease) = m.lend()? else {
        let shown = m
            .next()?
            .map(|(_, data)| (data.len(), data.get(skip..).unwrap_or_default().to_vec()));
        let had = shown.is_some();
        let (n, copy) = shown.unwrap_or_default();
        eager::deliver_owned(done, r, env, copy);
        if had {
            m.consume(n)?;
        }
        return Ok(false);
    };
    let holds = lease.holds();
    let len = lease.len().saturating_sub(skip);
    let data = InPlaceData::Leased { lease, skip, peer };
    eager::deliver_in_place(done, r, env, data, len);
    Ok(holds)
}

/// Everything but the VCs: matching queues and protocol bookkeeping.
#[derive(Debug)]
pub(crate) struct Book {
    pub(crate) rank: u32,
    pub(crate) queues: MatchQueues<PostedRecv, Unexpected>,
    pub(crate) unexpected_bytes: usize,
    next_id: u64,
    /// Descriptor id -> the send request it completes, the payload bytes it carries, and the
    /// peer.
    sends: HashMap<u64, (CarCounter, u64, u32)>,
    /// Rendezvous by messages (`RTS`, `CTS`, `DATA`), both sides.
    rndv: Rendezvous,
    pub(crate) eager_limit: usize,
    pub(crate) chunk: usize,
    pub(crate) max_unexpected: usize,
    /// Messages produced while handling inbound ones, written after the VC borrow ends.
    outbox: Vec<(u32, Outbound)>,
    /// Running xfer blocks.
    pub(crate) xfer: XferEngine,
    /// Fast sends (see [`crate::fast`]) whose method completion has not come, per peer.
    fast_sends: Vec<u64>,
    /// Large buffers kept for the next rendezvous messages.
    pub(crate) spare: crate::spare::Spare,
    /// Rendezvous by RDMA READ on verbs VCs (see [`read_rndv`]).
    pub(crate) rdma: read_rndv::ReadRndv,
    /// The agent's count of completed requests (see [`Completions`]).
    pub(crate) done: Completions,
    /// An in-place receive that the inbound message being handled matched, with its envelope
    /// and where its payload starts: the progress pass lends it the message.
    in_place: Option<(PostedRecv, Envelope, usize)>,
}

/// The agent's whole mutable state.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) vcs: Vec<Vc>,
    pub(crate) book: Book,
    pub(crate) finalized: bool,
    pub(crate) liveness: Liveness,
    /// Of the work the last pass counted, the send completions it reaped: a thread waiting on
    /// its own request keeps polling while passes find other work (its transfer moves), not
    /// while they only complete other threads' sends (see `crate::progress`).
    pub(crate) last_reaped: usize,
}

/// The silence check of the VCs (see [`crate::config`], "Peer liveness").
#[derive(Debug)]
pub(crate) struct Liveness {
    /// Progress passes since the agent started (a check runs every [`PASSES_PER_LOOK`]).
    passes: u32,
    /// When the last check ran.
    last: Instant,
    /// Per VC: since when this rank waits on the peer (`None`: it does not).
    since: Vec<Option<Instant>>,
    /// When each peer's liveness datagrams last arrived (the heartbeat thread's, see
    /// [`crate::liveness`]).
    heard: Arc<Heard>,
}

/// A non-blocking progress pass looks at the clock for a silence check every this many passes
/// (a blocking wait looks at every sleep).
const PASSES_PER_LOOK: u32 = 32;

impl Liveness {
    pub(crate) fn new(vcs: usize, heard: Arc<Heard>) -> Liveness {
        Liveness {
            passes: 0,
            last: Instant::now(),
            since: vec![None; vcs],
            heard,
        }
    }
}

/// The text of `e` and its causes, each once (see [`crate::error::Chain`]).
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    crate::error::Chain(e).to_string()
}

/// The error of a request that `peer`'s failure fails, for a failure seen without an error
/// behind it (see [`Failure::error`] for one with).
pub(crate) fn peer_failed(peer: u32, reason: &str) -> AgentError {
    AgentError::PeerFailed {
        peer,
        reason: reason.to_owned(),
        source: None,
    }
}

impl Book {
    pub(crate) fn new(
        rank: u32,
        eager_limit: usize,
        chunk: usize,
        max_unexpected: usize,
        xfer_chunk: usize,
        verbs_write_min: u64,
        done: Completions,
    ) -> Book {
        Book {
            rank,
            queues: MatchQueues::new(),
            unexpected_bytes: 0,
            next_id: 1,
            sends: HashMap::new(),
            rndv: Rendezvous::new(done.clone()),
            eager_limit,
            chunk,
            max_unexpected,
            outbox: Vec::new(),
            xfer: XferEngine::new(xfer_chunk, done.clone()),
            fast_sends: Vec::new(),
            spare: Default::default(),
            rdma: read_rndv::ReadRndv::new(done.clone(), verbs_write_min),
            done,
            in_place: None,
        }
    }

    /// Whether the agent reads from remote VCs: not while unexpected eager messages and xfer
    /// pieces for blocks not started hold `max_unexpected` bytes or more (back-pressure).
    pub(crate) fn reading(&self) -> bool {
        self.unexpected_bytes + self.xfer.early_bytes() < self.max_unexpected
    }

    pub(crate) fn id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id = (self.next_id + 1) & wire::ID_MASK;
        if self.next_id == 0 {
            self.next_id = 1;
        }
        id
    }

    /// Whether sends are still on their way (queued, awaiting a go-ahead, or in a method).
    pub(crate) fn sends_pending(&self) -> bool {
        !self.sends.is_empty()
            || self.rndv.sends_pending()
            || self.fast_sends.iter().any(|&n| n > 0)
            || self.rdma.sends_pending()
    }

    /// A fast send (see [`crate::fast`]) to `peer` was accepted by its method.
    pub(crate) fn fast_send_posted(&mut self, peer: u32) {
        let i = peer as usize;
        if self.fast_sends.len() <= i {
            self.fast_sends.resize(i + 1, 0);
        }
        self.fast_sends[i] += 1;
    }

    /// Registers a piece of an xfer message as a send whose completion completes one CAR.
    fn xfer_send(&mut self, peer: u32, bytes: u64, counter: CarCounter) -> u64 {
        let id = self.id();
        self.sends.insert(id, (counter, bytes, peer));
        id
    }

    /// A send of `data` from this rank to itself.
    pub(crate) fn self_send(
        &mut self,
        context: u32,
        tag: u32,
        data: Vec<u8>,
        counter: CarCounter,
        sync: bool,
    ) {
        let env = Envelope {
            context,
            source: self.rank,
            tag,
        };
        let len = data.len() as u64;
        match self.queues.arrive(&env) {
            Some((_, r)) => {
                eager::deliver(&self.done, r, &env, &data);
                self.done.note(counter.complete_car(len));
            }
            None => {
                self.unexpected_bytes += data.len();
                let sync = if sync {
                    Some(counter)
                } else {
                    self.done.note(counter.complete_car(len));
                    None
                };
                self.queues
                    .push_unexpected(env, Unexpected::Eager { data, sync });
            }
        }
    }

    /// An eager send to a peer: the message to write, its completion registered.
    pub(crate) fn eager_send(
        &mut self,
        peer: u32,
        context: u32,
        tag: u32,
        data: &[u8],
        counter: CarCounter,
    ) -> Outbound {
        let id = self.id();
        self.sends.insert(id, (counter, data.len() as u64, peer));
        let (tag, buf) = eager::encode(context, tag, data);
        Outbound {
            id,
            tag,
            buf: buf.into(),
        }
    }

    /// A message of the VC's byte stream (`Agent::write`), its completion registered.
    pub(crate) fn stream_send(
        &mut self,
        peer: u32,
        data: Vec<u8>,
        counter: CarCounter,
    ) -> Outbound {
        let id = self.id();
        self.sends.insert(id, (counter, data.len() as u64, peer));
        Outbound {
            id,
            tag: wire::method_tag(Kind::Stream, 0),
            buf: data.into(),
        }
    }

    /// A rendezvous send to a peer: the data is kept in pieces, the `RTS` is returned.
    pub(crate) fn rendezvous_send(
        &mut self,
        peer: u32,
        context: u32,
        tag: u32,
        chunks: Vec<SendBuf>,
        counter: CarCounter,
    ) -> Outbound {
        let sender_id = self.id();
        let buf = self
            .rndv
            .send(sender_id, peer, context, tag, chunks, counter);
        Outbound {
            id: self.id(),
            tag: wire::method_tag(Kind::Rts, sender_id),
            buf: buf.into(),
        }
    }

    /// The data of rendezvous send `sender_id` while it waits for its `CTS`.
    pub(crate) fn rndv_chunks(&self, sender_id: u64) -> Option<&[SendBuf]> {
        self.rndv.chunks(sender_id)
    }

    /// Takes rendezvous send `sender_id` over to another protocol: its data and request.
    pub(crate) fn take_rndv_send(&mut self, sender_id: u64) -> Option<(Vec<SendBuf>, CarCounter)> {
        self.rndv.take_send(sender_id)
    }

    /// Posts a receive: matches the oldest acceptable unexpected message, else queues it.
    pub(crate) fn post_recv(&mut self, pattern: Pattern, r: PostedRecv) {
        if let Some(r) = self.try_match(&pattern, r) {
            self.queues.push_posted(pattern, r);
        }
    }

    /// Matches a receive against the unexpected queue; gives it back when nothing matches.
    pub(crate) fn try_match(&mut self, pattern: &Pattern, r: PostedRecv) -> Option<PostedRecv> {
        match self.queues.take_unexpected(pattern) {
            Some((env, Unexpected::Eager { data, sync })) => {
                self.unexpected_bytes -= data.len();
                let len = data.len() as u64;
                eager::deliver_owned(&self.done, r, &env, data);
                if let Some(s) = sync {
                    self.done.note(s.complete_car(len));
                }
            }
            Some((env, Unexpected::Rts { sender_id, len })) => {
                self.start_rndv_recv(env, sender_id, len, r);
            }
            None => return Some(r),
        }
        None
    }

    /// Starts receiving rendezvous message `sender_id` (announced with `env`, `len` bytes) into
    /// the matched receive `r`: the `CTS` (or the RDMA read) goes out with the next progress pass.
    pub(crate) fn start_rndv_recv(
        &mut self,
        env: Envelope,
        sender_id: u64,
        len: u64,
        r: PostedRecv,
    ) {
        r.counter.set_envelope(r.source_of(env.source), env.tag);
        if self.rdma.is_announced(env.source, sender_id) {
            // No memory prepared: the read lands in a registered buffer, which a buffer of
            // the agent's own memory keeps (`RecvBuffer::land`).
            let rid = self.id();
            self.rdma
                .start_recv(rid, env.source, sender_id, len, r.buf, r.counter);
            return;
        }
        let want = len.min(r.buf.capacity() as u64) as usize;
        r.buf.expect_in(want, &mut self.spare);
        let rid = self.id();
        self.rndv.recv(rid, env.source, r.buf, r.counter, len);
        let id = self.id();
        self.outbox.push((
            env.source,
            Outbound {
                id,
                tag: wire::method_tag(Kind::Cts, sender_id),
                buf: rid.to_le_bytes().to_vec().into(),
            },
        ));
    }

    /// Sends the pieces of a rendezvous send its `CTS` cleared, each a descriptor of its own.
    fn send_data(&mut self, c: Cleared) {
        let extra = c.chunks.len().saturating_sub(1) as u32;
        let _ = c.counter.add_outstanding(extra);
        for chunk in c.chunks {
            let did = self.id();
            self.sends
                .insert(did, (c.counter.clone(), chunk.len() as u64, c.peer));
            self.outbox.push((
                c.peer,
                Outbound {
                    id: did,
                    tag: wire::method_tag(Kind::Data, c.receiver_id),
                    buf: chunk,
                },
            ));
        }
    }

    /// Handles one inbound message from `peer`.
    pub(crate) fn inbound(
        &mut self,
        peer: u32,
        tag: u64,
        data: &[u8],
    ) -> Result<(), ProtocolError> {
        let (kind, id) = wire::split_tag(tag);
        let kind = kind?;
        let envelope = |b: &[u8]| -> Result<Envelope, ProtocolError> {
            match (wire::u32_at(b, 0), wire::u32_at(b, 4)) {
                (Some(context), Some(tag)) => Ok(Envelope {
                    context,
                    source: peer,
                    tag,
                }),
                _ => Err(ProtocolError::TooShort { kind, len: b.len() }),
            }
        };
        match kind {
            Kind::Eager | Kind::EagerPacked => {
                let (env, body) = eager::parse(peer, tag, data)
                    .map_err(|len| ProtocolError::TooShort { kind, len })?;
                let skip = data.len() - body.len();
                if let Some(r) = eager::arrive(
                    &mut self.queues,
                    &mut self.unexpected_bytes,
                    &self.done,
                    env,
                    body,
                ) {
                    self.in_place = Some((r, env, skip));
                }
            }
            Kind::Rts | Kind::RtsRead => {
                let env = envelope(data)?;
                let len = wire::u64_at(data, 8)
                    .filter(|_| data.len() == RTS_LEN || kind == Kind::RtsRead)
                    .ok_or(ProtocolError::MalformedRts)?;
                if kind == Kind::RtsRead {
                    self.rdma
                        .announce(peer, id, &data[RTS_LEN.min(data.len())..])?;
                }
                match self.queues.arrive(&env) {
                    Some((_, r)) => self.start_rndv_recv(env, id, len, r),
                    None => self
                        .queues
                        .push_unexpected(env, Unexpected::Rts { sender_id: id, len }),
                }
            }
            Kind::Cts => {
                let cleared = self.rndv.cts(peer, id, data)?;
                self.send_data(cleared);
            }
            Kind::Data => self.rndv.data(peer, id, data)?,
            Kind::Xfer => self.xfer.inbound(peer, data)?,
            Kind::Fin => self.rdma.fin(peer, id)?,
            Kind::CtsWrite => self.rdma.cts_write(peer, id, data)?,
            Kind::FinWrite => self.rdma.fin_write(peer, id)?,
            Kind::Handshake => {} // the last handshake bytes, if any
            // Stream bytes stop the progress pass before they get here (they are read in
            // place); one that comes anyway has no place in the protocol.
            Kind::Stream => return Err(ProtocolError::OutOfPlace(kind)),
        }
        Ok(())
    }

    /// A descriptor completed: its completion goes to the protocol its id names
    /// ([`DescId::route`]).
    pub(crate) fn completed(
        &mut self,
        peer: u32,
        id: u64,
        result: Result<usize, MethodError>,
    ) -> Option<Failure> {
        match DescId::from_raw(id).route() {
            Route::FastSend => {
                if let Some(n) = self.fast_sends.get_mut(peer as usize) {
                    *n = n.saturating_sub(1);
                }
                result.err().map(Failure::of)
            }
            Route::Read => self.rdma.read_completed(peer, id, result),
            Route::Send => self.send_completed(peer, id, result),
        }
    }

    /// A descriptor of a message with a request completed.
    fn send_completed(
        &mut self,
        peer: u32,
        id: u64,
        result: Result<usize, MethodError>,
    ) -> Option<Failure> {
        match (self.sends.remove(&id), result) {
            (Some((counter, bytes, _)), Ok(_)) => {
                self.done.note(counter.complete_car(bytes));
                None
            }
            (Some((counter, _, _)), Err(e)) => {
                let failure = Failure::of(e);
                self.done.note(counter.fail_car(failure.error(peer)));
                Some(failure)
            }
            (None, Ok(_)) => None,
            (None, Err(e)) => Some(Failure::of(e)),
        }
    }

    /// Whether this rank waits on `peer`: a send to it in flight, a receive naming it, a
    /// rendezvous with it, or an xfer schedule running (a receive from any source waits on no
    /// peer in particular).
    pub(crate) fn waits_on(&self, peer: u32) -> bool {
        self.fast_sends.get(peer as usize).is_some_and(|n| *n > 0)
            || self.sends.values().any(|s| s.2 == peer)
            || self.rndv.waits_on(peer)
            || self
                .queues
                .any_posted(|p, _| p.source == Source::Rank(peer))
            || self.xfer.running()
    }

    /// Fails the request of one message that cannot be sent.
    pub(crate) fn peer_failed_one(&mut self, peer: u32, failure: &Failure, out: Outbound) {
        if let Some((counter, _, _)) = self.sends.remove(&out.id) {
            self.done.note(counter.fail_car(failure.error(peer)));
        }
        let (kind, sid) = wire::split_tag(out.tag);
        if kind == Ok(Kind::Rts) {
            self.rndv.fail_send(sid, failure.error(peer));
        }
    }

    /// Fails what depends on a failed peer: queued messages, rendezvous in either direction,
    /// receives naming it, and announcements of its messages nobody can fetch any more.
    pub(crate) fn peer_failed(&mut self, peer: u32, failure: &Failure, queued: Vec<Outbound>) {
        // Queued messages, and those the method accepted: the request fails now, and a
        // completion the method may still deliver for them later finds nothing to complete.
        drop(queued);
        // Fast sends carry no request; the method may never complete them now.
        if let Some(n) = self.fast_sends.get_mut(peer as usize) {
            *n = 0;
        }
        let ids: Vec<u64> = self
            .sends
            .iter()
            .filter(|(_, s)| s.2 == peer)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some((counter, _, _)) = self.sends.remove(&id) {
                self.done.note(counter.fail_car(failure.error(peer)));
            }
        }
        self.rndv.peer_failed(peer, || failure.error(peer));
        for r in self
            .queues
            .drain_posted(|p, _| p.source == Source::Rank(peer))
        {
            self.done.note(r.counter.fail_car(failure.error(peer)));
        }
        self.queues
            .drain_unexpected(|e, u| e.source == peer && matches!(u, Unexpected::Rts { .. }));
        self.rdma.peer_failed(peer, failure);
        self.xfer.peer_failed(peer, failure);
    }

    /// Completes, as cancelled, every posted receive whose request asked for cancellation.
    pub(crate) fn cancel_requested(&mut self) -> usize {
        if !self.queues.any_posted(|_, r| r.counter.cancel_requested()) {
            return 0;
        }
        let gone = self
            .queues
            .drain_posted(|_, r| r.counter.cancel_requested());
        for r in &gone {
            self.done
                .note(r.counter.complete_cancelled().map(|()| true));
        }
        gone.len()
    }

    /// Fails every request still open (at finalize).
    pub(crate) fn fail_all(&mut self) {
        let err = || AgentError::Finalized;
        for (_, (c, _, _)) in self.sends.drain() {
            self.done.note(c.fail_car(err()));
        }
        self.rndv.fail_all();
        for r in self.queues.drain_posted(|_, _| true) {
            self.done.note(r.counter.fail_car(err()));
        }
        for (_, u) in self.queues.drain_unexpected(|_, _| true) {
            if let Unexpected::Eager { sync: Some(c), .. } = u {
                self.done.note(c.fail_car(err()));
            }
        }
        self.unexpected_bytes = 0;
        self.rdma.fail_all();
        self.xfer.fail_all();
    }

    /// Takes the messages produced while handling inbound ones.
    fn take_outbox(&mut self) -> Vec<(u32, Outbound)> {
        std::mem::take(&mut self.outbox)
    }
}

/// Reaps every completion of `vc`'s method: send buffers the method hands back go to their
/// method-buffer owner or to the kept buffers, each completion to [`Book::completed`]. Returns
/// the completions reaped and the first failure they reported.
pub(crate) fn reap(vc: &mut Vc, book: &mut Book) -> (usize, Option<Failure>) {
    reap_with(vc, book, Method::poll_returning, Method::poll_rest)
}

/// [`reap`] right after the method's `next` made a pass (see [`Method::poll_after_next`]).
pub(crate) fn reap_after_next(vc: &mut Vc, book: &mut Book) -> (usize, Option<Failure>) {
    reap_with(vc, book, Method::poll_after_next, Method::poll_after_next)
}

/// Reaps with `first`, then with `rest` after each completion (the drain ends at the first
/// `None`).
fn reap_with(
    vc: &mut Vc,
    book: &mut Book,
    first: impl FnOnce(&mut Method) -> Option<crate::method::Returned>,
    mut rest: impl FnMut(&mut Method) -> Option<crate::method::Returned>,
) -> (usize, Option<Failure>) {
    let Link::Remote(m) = &mut vc.link else {
        return (0, None);
    };
    let (peer, mut n, mut failed) = (vc.peer, 0, None);
    let mut next = first(m);
    while let Some((id, result, buffer)) = next {
        n += 1;
        if let Some(spare) = buffer.and_then(|b| vc.buffers.returned(id, b)) {
            book.spare.put(spare);
        }
        if let Some(reason) = book.completed(peer, id, result) {
            failed.get_or_insert(reason);
        }
        next = rest(m);
    }
    (n, failed)
}

/// Most inbound messages taken from one VC per progress pass (fairness between VCs).
const INBOUND_BURST: usize = 64;

/// The failure the method of a held VC (its inbound lent, see [`crate::in_place`]) saw:
/// its own liveness check or end of stream, which its `next` does not report while a
/// message is lent. Runs the method's progress first (as `next` does), so that an end of
/// stream is read. Verbs lends nothing.
fn lent_failure(m: &mut Method) -> Option<MethodError> {
    // While a message is lent `next` shows nothing; it only moves the method's progress on.
    if let Err(e) = m.next() {
        return Some(e);
    }
    match m {
        Method::Shm(ep) => ep
            .failure()
            .map(|why| MethodError::Shm(viaduct_fallback::shm::Error::PeerFailed(why))),
        Method::Tcp(ep) => ep
            .failure()
            .map(|why| MethodError::Tcp(viaduct_fallback::tcp::Error::PeerFailed(why))),
        #[cfg(feature = "rdma")]
        Method::Verbs(_) => None,
    }
}

impl State {
    /// Writes `out` on the VC of `peer`; a method error fails the VC.
    pub(crate) fn write(&mut self, peer: u32, out: Outbound) {
        let out = read_rndv::announce(self, peer, out);
        let vc = &mut self.vcs[peer as usize];
        if let Some(failure) = vc.failure() {
            self.book.peer_failed(peer, &failure, vec![out]);
            return;
        }
        if let Err(e) = vc.write(out) {
            self.fail_vc(peer, Failure::of(e));
        }
    }

    /// Marks the VC of `peer` failed and fails what depends on it.
    /// The first failure stays the VC's: what fails now reports it.
    pub(crate) fn fail_vc(&mut self, peer: u32, failure: impl Into<Failure>) {
        let failure = failure.into();
        let queued = self.vcs[peer as usize].fail(failure.clone());
        let failure = self.vcs[peer as usize].failure().unwrap_or(failure);
        self.book.peer_failed(peer, &failure, queued);
    }

    /// One non-blocking pass over every VC: completions, inbound messages, queued sends,
    /// cancellations. Returns the work done (events handled).
    pub(crate) fn progress(&mut self) -> usize {
        self.progress_on(None)
    }

    /// [`State::progress`] restricted to the VC of `only` (all VCs for `None`).
    pub(crate) fn progress_on(&mut self, only: Option<u32>) -> usize {
        let mut work = 0;
        let mut reaped_all = 0;
        let mut failures: Vec<(u32, Failure)> = Vec::new();
        let State { vcs, book, .. } = self;
        for vc in vcs.iter_mut().filter(|v| only.is_none_or(|p| p == v.peer)) {
            let peer = vc.peer;
            let (reaped, failed) = reap(vc, book);
            work += reaped;
            reaped_all += reaped;
            if let Some(reason) = failed {
                failures.push((peer, reason));
            }
            let Link::Remote(m) = &mut vc.link else {
                continue;
            };
            if !vc.drained && !vc.stream_at_head && !vc.held && book.reading() {
                for _ in 0..INBOUND_BURST {
                    let step = match m.next() {
                        Ok(Some((tag, _))) if wire::is_kind(tag, Kind::Stream) => {
                            // Stream bytes are for `Agent::next`, in place: stop here.
                            vc.stream_at_head = true;
                            Ok(false)
                        }
                        Ok(Some((tag, data))) => {
                            let n = data.len();
                            match book.inbound(peer, tag, data) {
                                Ok(()) => match book.in_place.take() {
                                    None => m.consume(n).map(|()| true).map_err(Failure::of),
                                    // An in-place receive matched: the message stays in the
                                    // method's memory, lent to it; the VC waits for it back.
                                    Some((r, env, skip)) => {
                                        match lend_to(m, &book.done, r, &env, skip, peer) {
                                            Ok(true) => {
                                                vc.held = true;
                                                Ok(false)
                                            }
                                            Ok(false) => Ok(true),
                                            Err(e) => Err(Failure::of(e)),
                                        }
                                    }
                                },
                                Err(why) => Err(Failure::protocol(why)),
                            }
                        }
                        Ok(None) => Ok(false),
                        Err(e) => {
                            vc.drained = true;
                            Err(Failure::of(e))
                        }
                    };
                    match step {
                        Ok(true) => work += 1,
                        Ok(false) => break,
                        Err(reason) => {
                            failures.push((peer, reason));
                            break;
                        }
                    }
                }
            }
            if vc.held && vc.failed.is_none() {
                // The inbound is lent to an in-place receive: `next` shows nothing, not even
                // the peer's failure, so the method is asked directly. The VC fails now (its
                // waits end, its sends flush); the lease keeps the lent memory valid.
                if let Some(e) = lent_failure(m) {
                    failures.push((peer, Failure::of(e)));
                }
            }
            if !vc.readers.is_empty() {
                match vc.feed_readers() {
                    Ok(n) => work += n,
                    Err(e) => failures.push((peer, Failure::of(e))),
                }
            }
            if vc.failed.is_none() && vc.has_queued() {
                match vc.flush() {
                    Ok(n) => work += n,
                    Err(e) => failures.push((peer, Failure::of(e))),
                }
            }
        }
        for (peer, out) in self.book.take_outbox() {
            work += 1;
            self.write(peer, out);
        }
        work += read_rndv::drive(self);
        for (peer, reason) in failures {
            work += 1;
            self.fail_vc(peer, reason);
        }
        work += self.drain_xfer();
        self.last_reaped = reaped_all;
        work + self.book.cancel_requested()
    }

    /// Starts an xfer schedule (its blocks checked already) and posts what can leave at once.
    pub(crate) fn start_xfer(
        &mut self,
        ctx: u32,
        steps: Vec<xfer_plan::Step>,
        bufs: Vec<Vec<u8>>,
        counter: CarCounter,
        shared: std::sync::Arc<xfer_buffers::RunShared>,
    ) {
        let mut peers: Vec<u32> = steps
            .iter()
            .flat_map(|s| {
                s.ins
                    .iter()
                    .map(|i| i.peer)
                    .chain(s.outs.iter().map(|o| o.peer))
            })
            .collect();
        peers.sort_unstable();
        peers.dedup();
        self.book.xfer.start(ctx, steps, bufs, counter, shared);
        for p in peers {
            if let Some(failure) = self.vcs.get(p as usize).and_then(|v| v.failure()) {
                self.book.xfer.peer_failed(p, &failure);
            }
        }
        self.drain_xfer();
    }

    /// Drains the xfer ready queue: posts pieces whose data is there, starts the next block of
    /// schedules whose block finished. Returns the work done.
    pub(crate) fn drain_xfer(&mut self) -> usize {
        let mut work = 0;
        while let Some(r) = self.book.xfer.pop_ready() {
            work += 1;
            match r {
                Ready::Emit { run, out } => {
                    for (peer, buf, bytes, counter) in self.book.xfer.emit(run, out) {
                        self.write_xfer(peer, buf, bytes, counter);
                    }
                }
                Ready::StepDone { run } => self.book.xfer.step_done(run),
            }
        }
        while let Some((peer, buf)) = self.book.xfer.pop_notice() {
            work += 1;
            // A request of its own: the failed run's request completed already.
            let (_request, counter) = crate::request::Request::message(1);
            self.write_xfer(peer, buf, 0, counter);
        }
        work
    }

    /// Posts xfer piece `buf` (`bytes` of payload) to `peer`, its completion counted by
    /// `counter`.
    fn write_xfer(&mut self, peer: u32, buf: Vec<u8>, bytes: u64, counter: CarCounter) {
        let id = self.book.xfer_send(peer, bytes, counter);
        self.write(
            peer,
            Outbound {
                id,
                tag: wire::method_tag(Kind::Xfer, 0),
                buf: buf.into(),
            },
        );
    }

    /// Counts a non-blocking pass; every [`PASSES_PER_LOOK`] passes runs
    /// [`State::check_liveness`].
    pub(crate) fn pass_done(&mut self, timeout: Duration) {
        self.liveness.passes = self.liveness.passes.wrapping_add(1);
        if self.liveness.passes % PASSES_PER_LOOK == 0 {
            self.check_liveness(timeout);
        }
    }

    /// Fails the VC of every peer that this rank waits on ([`Book::waits_on`], or a queued
    /// message or stream read on the VC) and from which neither its method
    /// ([`Method::peer_heard`]: heartbeats or data) nor the liveness socket
    /// ([`crate::liveness`]) saw a sign of life for `timeout`, counted from when the
    /// waiting began at the earliest. Runs at most every `timeout / 8` (at most every 100 ms);
    /// returns the VCs failed.
    pub(crate) fn check_liveness(&mut self, timeout: Duration) -> usize {
        let now = Instant::now();
        let every = (timeout / 8).clamp(Duration::from_millis(1), Duration::from_millis(100));
        if now.duration_since(self.liveness.last) < every {
            return 0;
        }
        self.liveness.last = now;
        let State {
            vcs,
            book,
            liveness,
            ..
        } = self;
        // While the agent reads nothing (its unexpected messages are full), a TCP peer's
        // keepalives stay unread: it cannot be judged.
        let reading = book.reading();
        let mut silent = Vec::new();
        for (vc, since) in vcs.iter_mut().zip(liveness.since.iter_mut()) {
            let watched = reading && vc.failed.is_none() && !vc.drained && !vc.stream_at_head;
            let datagram = liveness.heard.last(vc.peer);
            let heard = match &mut vc.link {
                Link::Remote(m) if watched && !vc.held => m.peer_heard(),
                // A held VC's inbound is not read: only signs of life that need no reading
                // judge it, the heartbeat counters of the shared segment, or a TCP peer's
                // liveness datagrams once they arrive.
                Link::Remote(m @ Method::Shm(_)) if watched => m.peer_heard(),
                Link::Remote(m @ Method::Tcp(_)) if watched => {
                    datagram.and_then(|_| m.peer_heard())
                }
                _ => None,
            };
            // The method's signs of life, or the peer's liveness datagrams, whichever is later.
            let heard = heard.map(|h| datagram.map_or(h, |d| h.max(d)));
            let Some(heard) = heard else {
                *since = None;
                continue;
            };
            if !(vc.has_queued() || !vc.readers.is_empty() || book.waits_on(vc.peer)) {
                *since = None;
                continue;
            }
            let from = heard.max(*since.get_or_insert(now));
            if now.duration_since(from) > timeout {
                silent.push((vc.peer, now.duration_since(heard)));
            }
        }
        let n = silent.len();
        for (peer, quiet) in silent {
            self.fail_vc(
                peer,
                format!(
                    "no sign of life (heartbeat or data) for {:.1} s while this rank waited on \
                     it, more than the peer timeout of {:.1} s (VIADUCT_PEER_TIMEOUT): the \
                     process is stopped, dead or hung, or is unreachable",
                    quiet.as_secs_f64(),
                    timeout.as_secs_f64()
                ),
            );
        }
        n
    }

    /// Whether any VC can block in its method's wait.
    pub(crate) fn waitable(&mut self) -> Vec<usize> {
        self.vcs
            .iter()
            .enumerate()
            // A held VC that failed has nothing to wait for until its lease comes back (its
            // method, failed, would end every sleep at once).
            .filter(|(_, v)| {
                matches!(v.link, Link::Remote(_))
                    && !v.drained
                    && !v.stream_at_head
                    && (!v.held || v.failed.is_none())
            })
            .map(|(i, _)| i)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recv_buffer::RecvBuffer;
    use crate::request::Request;

    fn book() -> Book {
        Book::new(
            0,
            1024,
            1 << 20,
            1 << 20,
            1 << 16,
            0,
            Completions::default(),
        )
    }

    /// A receive from rank 1 (context 3, tag 4) of up to `capacity` bytes, matched by an RTS
    /// of `len` bytes from rank 1; returns the request and the receiver's id a DATA names.
    fn rendezvous_recv(b: &mut Book, capacity: usize, len: u64) -> (Request, u64) {
        let (request, counter) = Request::message(1);
        b.post_recv(
            Pattern {
                context: 3,
                source: Source::Rank(1),
                tag: crate::matching::TagMatch::Tag(4),
            },
            PostedRecv {
                buf: RecvBuffer::new(capacity),
                counter,
                ranks: None,
                lease: None,
            },
        );
        b.inbound(1, wire::method_tag(Kind::Rts, 77), &wire::rts(3, 4, len))
            .unwrap();
        let out = b.take_outbox();
        assert_eq!(out.len(), 1, "one CTS");
        let (to, cts) = &out[0];
        assert_eq!((*to, wire::split_tag(cts.tag)), (1, (Ok(Kind::Cts), 77)));
        (request, wire::u64_at(&cts.buf, 0).unwrap())
    }

    #[test]
    fn data_from_a_rank_other_than_the_sender_is_refused() {
        let mut b = book();
        let (mut request, rid) = rendezvous_recv(&mut b, 8, 8);
        let e = b
            .inbound(2, wire::method_tag(Kind::Data, rid), &[9; 8])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("receives from rank 1, not from this peer"),
            "{e}"
        );
        assert!(
            request.test().unwrap().is_none(),
            "completed by a stranger's data"
        );
        b.inbound(1, wire::method_tag(Kind::Data, rid), &[5; 8])
            .unwrap();
        let status = request
            .test()
            .unwrap()
            .expect("completed by its sender's data");
        assert_eq!(status.count(), 8);
    }

    #[test]
    fn data_past_the_announced_length_is_refused() {
        let mut b = book();
        let (mut request, rid) = rendezvous_recv(&mut b, 64, 8);
        b.inbound(1, wire::method_tag(Kind::Data, rid), &[5; 6])
            .unwrap();
        let e = b
            .inbound(1, wire::method_tag(Kind::Data, rid), &[5; 6])
            .unwrap_err()
            .to_string();
        assert!(e.contains("runs past the 8 bytes its RTS announced"), "{e}");
        assert!(request.test().unwrap().is_none());
    }

    #[test]
    fn a_cts_from_a_rank_other_than_the_receiver_is_refused() {
        let mut b = book();
        let (mut request, counter) = Request::message(1);
        let rts = b.rendezvous_send(1, 3, 4, vec![vec![7; 16].into()], counter);
        let (_, sid) = wire::split_tag(rts.tag);
        let e = b
            .inbound(2, wire::method_tag(Kind::Cts, sid), &9u64.to_le_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains("goes to rank 1, not to this peer"), "{e}");
        assert!(b.take_outbox().is_empty(), "data sent on a stranger's CTS");
        b.inbound(1, wire::method_tag(Kind::Cts, sid), &9u64.to_le_bytes())
            .unwrap();
        let out = b.take_outbox();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 1);
        assert_eq!(wire::split_tag(out[0].1.tag), (Ok(Kind::Data), 9));
        assert!(request.test().unwrap().is_none(), "sent, not yet completed");
    }

    #[test]
    fn completions_go_to_the_protocol_their_id_names() {
        let mut b = book();
        let (mut request, counter) = Request::message(1);
        let id = b.id();
        b.sends.insert(id, (counter, 5, 1));
        b.fast_send_posted(1);
        assert!(b.waits_on(1));
        // The fast send's completion, of the same agent id, counts the fast send off only.
        assert!(b.completed(1, DescId::fast(id).raw(), Ok(5)).is_none());
        assert_eq!(b.fast_sends[1], 0);
        assert!(
            request.test().unwrap().is_none(),
            "completed by a fast send"
        );
        // A read completion of that id is the read rendezvous's (which knows no such read).
        assert!(b.completed(1, DescId::read(id).raw(), Ok(5)).is_none());
        assert!(request.test().unwrap().is_none(), "completed by a read");
        // The send's own completion completes its request.
        assert!(b.completed(1, DescId::send(id).raw(), Ok(5)).is_none());
        assert_eq!(request.test().unwrap().expect("completed").count(), 5);
        assert!(!b.sends_pending());
    }

    #[test]
    fn an_unknown_kind_is_refused_with_a_typed_error() {
        let mut b = book();
        let e = b.inbound(1, wire::raw_tag(200, 0), &[]).unwrap_err();
        assert_eq!(e, ProtocolError::Kind(crate::proto::UnknownKind(200)));
        assert_eq!(e.to_string(), "unknown message kind 200");
        // Stream bytes are read in place: one that reaches the matching engine is refused.
        let e = b
            .inbound(1, wire::method_tag(Kind::Stream, 0), b"x")
            .unwrap_err();
        assert_eq!(e, ProtocolError::OutOfPlace(Kind::Stream));
    }

    #[test]
    fn a_protocol_error_fails_the_peers_requests_with_itself_as_source() {
        // The request crate knows the agent's errors once the agent has registered them.
        crate::error::register_error_kinds();
        let mut b = book();
        let (mut request, _) = rendezvous_recv(&mut b, 8, 8);
        let why = b
            .inbound(2, wire::method_tag(Kind::Cts, 99), &9u64.to_le_bytes())
            .unwrap_err();
        b.peer_failed(1, &Failure::protocol(why.clone()), Vec::new());
        let e = request.test().unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("rank 1 failed: protocol error: CTS for unknown send 99"),
            "{text}"
        );
        assert_eq!(text.matches("CTS for unknown send 99").count(), 1, "{text}");
        assert_eq!(e.failed_peer(), Some(1));
        // The PeerFailed inside the request's error has the protocol error as its source.
        let source = crate::error::find_in_chain(&e, |c| match c.downcast_ref::<AgentError>() {
            Some(AgentError::PeerFailed { .. }) => c
                .source()
                .and_then(|s| s.downcast_ref::<ProtocolError>())
                .cloned(),
            _ => None,
        });
        assert_eq!(source, Some(why));
    }

    #[test]
    fn early_xfer_pieces_count_against_the_unexpected_limit() {
        let mut b = Book::new(0, 1024, 1 << 20, 1000, 1 << 16, 0, Completions::default());
        assert!(b.reading());
        // Pieces of a collective this rank has not started (context 3, tag 4).
        for seq in 0..3 {
            b.inbound(
                1,
                wire::method_tag(Kind::Xfer, 0),
                &wire::xfer_piece(3, 4, seq, 400, &[1; 400]),
            )
            .unwrap();
        }
        assert_eq!(b.xfer.early_bytes(), 1200);
        assert!(!b.reading(), "reads on past the limit");
        // A failed peer's early pieces are dropped, and reading resumes.
        b.xfer.peer_failed(1, &"gone".into());
        assert_eq!(b.xfer.early_bytes(), 0);
        assert!(b.reading());
    }
}
