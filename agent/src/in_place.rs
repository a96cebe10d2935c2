//! Tagged messages received in place: [`Agent::recv_in_place`], [`Agent::try_recv_in_place`]
//! (and the same on [`Comm`](crate::Comm)) return a [`Received`], a borrowed view of the
//! message where the method put it, handed back to the method when dropped. It is the tagged
//! form of the VC stream's `next`/`consume` (see [`crate::stream`]), without a closure.
//!
//! # Where the bytes are
//!
//! - A small (eager) message that arrives while the receive is posted stays in the method's
//!   receive memory: the shared-memory inbound ring record, the TCP endpoint's receive buffer
//!   (the reassembly buffer for a message that spanned receive buffers), the registered verbs
//!   receive buffer it landed in (taken out of the endpoint; re-posted, and its credit returned
//!   to the peer, when the [`Received`] drops). No copy by the agent. Until the [`Received`] is
//!   dropped the VC of its sender is *held*: the progress engine reads nothing more from it
//!   (messages behind it wait in the method, in order; sends and completions on it, and every
//!   other VC, go on). Over verbs with a shared receive pool running low (fewer than a quarter
//!   of its buffers posted), the method lends a copy instead so that held messages cannot
//!   hold the pool empty ([`Received::is_in_place`] is then false; the VC is held all the
//!   same). A held VC is still watched: when its peer dies (end of stream, the method's
//!   liveness check, a verbs keepalive or send that fails) or falls silent past the peer
//!   timeout (judged by the signs of life that need no reading: the shared segment's
//!   heartbeat, TCP liveness datagrams), the VC fails as any other, and the waits on that peer
//!   end with [`AgentError::PeerFailed`]; the [`Received`] still shows its bytes (the lease
//!   owns the memory) and its drop then only frees them (a verbs pool's buffer goes back to
//!   the pool).
//! - A message already in the unexpected queue (the agent copied it there when it came before
//!   its receive) is handed out from that buffer (no further copy); so is a message sent by
//!   this rank to itself.
//! - A large (rendezvous) message is received into a buffer of the agent first (one copy), and
//!   shown from it.
//!
//! Matching follows MPI's order, as for [`Agent::recv`]: the oldest matching message, among
//! posted receives in posting order. The whole message is shown (no truncation). A
//! [`Received`] is `Send`, valid outside the agent's lock, and stays valid if the agent is
//! finalized or dropped meanwhile (its drop then only frees the memory).

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::agent::{Agent, Shared};
use crate::engine::{InPlaceData, PostedRecv};
use crate::error::AgentError;
use crate::matching::{Pattern, Source, TagMatch};
use crate::method::Lease;
use crate::recv_buffer::RecvBuffer;
use crate::request::{Request, Status};
use crate::vc::Link;

/// A tagged message received in place ([`Agent::recv_in_place`]): dereferences to the
/// message's bytes where the method received them (see the [module documentation](self) for
/// where that is); dropping it hands the memory back, and the VC of its sender resumes.
///
/// ```no_run
/// # fn demo(agent: &viaduct_agent::Agent) -> Result<(), viaduct_agent::AgentError> {
/// use std::time::Duration;
/// use viaduct_agent::{Source, TagMatch};
///
/// let msg = agent.recv_in_place(Source::Any, TagMatch::Tag(7), Duration::from_secs(5))?;
/// let status = msg.status();
/// println!("{} bytes from rank {:?}: {:?}", msg.len(), status.source(), &msg[..]);
/// drop(msg); // the method's memory goes back
/// # Ok(()) }
/// ```
pub struct Received {
    data: Data,
    status: Status,
}

enum Data {
    /// In the method's memory of `peer`'s VC, lent; payload from `skip`.
    Leased {
        lease: Option<Lease>,
        skip: usize,
        peer: u32,
        agent: Weak<Shared>,
    },
    /// In the agent's memory.
    Owned(Vec<u8>),
}

impl std::fmt::Debug for Received {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Received")
            .field("source", &self.status.source())
            .field("tag", &self.status.tag())
            .field("len", &self.len())
            .field("in_place", &self.is_in_place())
            .finish()
    }
}

impl std::ops::Deref for Received {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.data {
            Data::Leased {
                lease: Some(l),
                skip,
                ..
            } => l.get(*skip..).unwrap_or_default(),
            Data::Leased { lease: None, .. } => &[],
            Data::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for Received {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Received {
    /// The message's envelope and length: source (the communicator rank when received on a
    /// [`Comm`](crate::Comm)), tag and byte count.
    ///
    /// ```no_run
    /// # fn demo(agent: &viaduct_agent::Agent) -> Result<(), viaduct_agent::AgentError> {
    /// # use std::time::Duration;
    /// # use viaduct_agent::{Source, TagMatch};
    /// let msg = agent.recv_in_place(Source::Rank(0), TagMatch::Any, Duration::from_secs(5))?;
    /// assert_eq!(msg.status().count(), msg.len() as u64);
    /// # Ok(()) }
    /// ```
    pub fn status(&self) -> Status {
        self.status.clone()
    }

    /// Whether the bytes lie in the method's receive memory (lent; the sender's VC is held
    /// until this is dropped), as opposed to the agent's memory (an unexpected or rendezvous
    /// message, a message from this rank) or a copy the verbs method made while its shared
    /// receive pool ran low.
    ///
    /// ```no_run
    /// # fn demo(agent: &viaduct_agent::Agent) -> Result<(), viaduct_agent::AgentError> {
    /// # use std::time::Duration;
    /// # use viaduct_agent::{Source, TagMatch};
    /// let msg = agent.recv_in_place(Source::Any, TagMatch::Any, Duration::from_secs(5))?;
    /// if msg.is_in_place() {
    ///     // Read quickly: the sender's VC waits for this view.
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_in_place(&self) -> bool {
        matches!(
            &self.data,
            Data::Leased { lease: Some(l), .. } if l.in_place()
        )
    }

    /// Copies the bytes out and hands the memory back at once.
    ///
    /// ```no_run
    /// # fn demo(agent: &viaduct_agent::Agent) -> Result<(), viaduct_agent::AgentError> {
    /// # use std::time::Duration;
    /// # use viaduct_agent::{Source, TagMatch};
    /// let bytes: Vec<u8> =
    ///     agent.recv_in_place(Source::Any, TagMatch::Any, Duration::from_secs(5))?.into_vec();
    /// # Ok(()) }
    /// ```
    pub fn into_vec(mut self) -> Vec<u8> {
        match &mut self.data {
            Data::Owned(v) => std::mem::take(v),
            Data::Leased { .. } => self.to_vec(),
        }
    }

    fn from_data(data: Option<InPlaceData>, agent: &Agent, status: Status) -> Received {
        let data = match data {
            Some(InPlaceData::Leased { lease, skip, peer }) => Data::Leased {
                lease: Some(lease),
                skip,
                peer,
                agent: Arc::downgrade(&agent.shared),
            },
            Some(InPlaceData::Owned(v)) => Data::Owned(v),
            None => Data::Owned(Vec::new()),
        };
        Received { data, status }
    }
}

impl Drop for Received {
    fn drop(&mut self) {
        let Data::Leased {
            lease, peer, agent, ..
        } = &mut self.data
        else {
            return;
        };
        let Some(lease) = lease.take() else {
            return;
        };
        if !lease.holds() {
            return;
        }
        // The agent gone or finalized: its method is closed, the lease only frees its memory.
        let Some(shared) = agent.upgrade() else {
            return;
        };
        let mut st = shared.lock();
        if st.finalized {
            return;
        }
        let peer = *peer;
        let Some(vc) = st.vcs.get_mut(peer as usize) else {
            return;
        };
        vc.held = false;
        let back = match &mut vc.link {
            Link::Remote(m) => m.give_back(lease),
            _ => Ok(()),
        };
        if let Err(e) = back {
            st.fail_vc(peer, crate::proto::Failure::of(e));
        }
        // Receives posted meanwhile (another thread's) may wait for the messages behind it:
        // they go to them now, not at the next pass. With none posted the messages stay in
        // the method, where the next in-place receive finds them.
        if st.book.queues.posted_len() > 0 {
            st.progress();
        }
    }
}

impl Agent {
    /// Receives a tagged message from `source` with `tag` and shows it in place, waiting at
    /// most `timeout`: the returned [`Received`] dereferences to the message's bytes in the
    /// method's receive memory (eager messages over shared memory, TCP and verbs; see the
    /// [`in_place`](self) module for the other cases, which are shown from the agent's
    /// memory). Dropping it hands the memory back; until then the sender's VC reads nothing
    /// more (messages behind it wait, in order). Matches as [`Agent::recv`] does; the whole
    /// message is shown (no truncation). Ends with an error that
    /// [`is_timeout`](AgentError::is_timeout) when nothing matched in time (a rendezvous
    /// message matched already is waited for to the end), and with
    /// [`AgentError::PeerFailed`] (inside [`AgentError::Request`]) when the named source failed.
    ///
    /// ```no_run
    /// # fn demo(agent: &viaduct_agent::Agent) -> Result<(), viaduct_agent::AgentError> {
    /// use std::time::Duration;
    /// use viaduct_agent::{Source, TagMatch};
    ///
    /// let ping = agent.recv_in_place(Source::Rank(0), TagMatch::Tag(1), Duration::from_secs(5))?;
    /// agent.send(0, 2, &ping)?; // reply straight from the method's memory
    /// # Ok(()) }
    /// ```
    pub fn recv_in_place(
        &self,
        source: Source,
        tag: TagMatch,
        timeout: Duration,
    ) -> Result<Received, AgentError> {
        match self.in_place_mapped(source, tag, Some(timeout), None)? {
            Some(r) => Ok(r),
            None => Err(AgentError::Timeout {
                what: "in-place receive",
                seconds: timeout.as_secs(),
            }),
        }
    }

    /// Like [`Agent::recv_in_place`] after one progress pass: `Ok(None)` when no message
    /// matched.
    ///
    /// ```no_run
    /// # fn demo(agent: &viaduct_agent::Agent) -> Result<(), viaduct_agent::AgentError> {
    /// use viaduct_agent::{Source, TagMatch};
    ///
    /// if let Some(msg) = agent.try_recv_in_place(Source::Any, TagMatch::Any)? {
    ///     println!("{} bytes", msg.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_recv_in_place(
        &self,
        source: Source,
        tag: TagMatch,
    ) -> Result<Option<Received>, AgentError> {
        self.in_place_mapped(source, tag, None, None)
    }

    /// The address ranges of the receive memory of the method behind `peer`'s VC (shared
    /// memory: the segment mapping; TCP: the receive buffers and the reassembly buffer; verbs:
    /// the registered receive buffers, of the endpoint's ring or of its shared pool, and the
    /// reassembly buffer; the self loop: none), for checks that a [`Received`] lies in it.
    #[doc(hidden)]
    pub fn method_memory(&self, peer: u32) -> Vec<std::ops::Range<usize>> {
        let st = self.shared.lock();
        match st.vcs.get(peer as usize).map(|v| &v.link) {
            Some(Link::Remote(crate::method::Method::Shm(ep))) => vec![ep.segment_range()],
            Some(Link::Remote(crate::method::Method::Tcp(ep))) => ep.receive_buffers(),
            #[cfg(feature = "rdma")]
            Some(Link::Remote(crate::method::Method::Verbs(ep))) => ep.receive_buffers(),
            _ => Vec::new(),
        }
    }

    /// The in-place receive: waits up to `timeout` (`None`: one pass); `Ok(None)` when nothing
    /// matched. `ranks` maps the status's source as for [`Agent::irecv_mapped`].
    pub(crate) fn in_place_mapped(
        &self,
        source: Source,
        tag: TagMatch,
        timeout: Option<Duration>,
        ranks: Option<Arc<[u32]>>,
    ) -> Result<Option<Received>, AgentError> {
        self.check_source(source)?;
        if tag == TagMatch::Tag(u32::MAX) {
            return Err(AgentError::ReservedTag(u32::MAX));
        }
        let shared = &self.shared;
        let (mut request, counter) = Request::message_driven(1, shared.driver.clone());
        let slot: Arc<Mutex<Option<InPlaceData>>> = Arc::default();
        // A rendezvous message lands here (the one copy); capacity unbounded: no truncation.
        let buf = RecvBuffer::new(usize::MAX);
        {
            let mut st = shared.lock();
            if st.finalized {
                return Err(AgentError::Finalized);
            }
            let pattern = Pattern {
                context: self.context,
                source,
                tag,
            };
            let posted = PostedRecv {
                buf: buf.clone(),
                counter,
                ranks,
                lease: Some(slot.clone()),
            };
            let dead = match source {
                Source::Rank(r) => st.vcs[r as usize].failure().map(|why| (r, why)),
                Source::Any => None,
            };
            match dead {
                Some((r, why)) => {
                    if let Some(p) = st.book.try_match(&pattern, posted) {
                        let _ = p.counter.fail_car(why.error(r));
                    }
                }
                None => st.book.post_recv(pattern, posted),
            }
            st.progress();
        }
        let take = |slot: &Mutex<Option<InPlaceData>>| {
            slot.lock().unwrap_or_else(|p| p.into_inner()).take()
        };
        let waited = match timeout {
            None => request.test(),
            Some(t) => request.wait_timeout(t),
        };
        let status = match waited {
            Ok(Some(status)) => status,
            Ok(None) => {
                // Nothing yet: withdraw the receive, unless it matched meanwhile.
                let gone = {
                    let mut st = shared.lock();
                    st.book.queues.drain_posted(|_, r| {
                        r.lease.as_ref().is_some_and(|s| Arc::ptr_eq(s, &slot))
                    })
                };
                if !gone.is_empty() {
                    for r in gone {
                        let _ = r.counter.complete_cancelled();
                    }
                    return Ok(None);
                }
                // Matched meanwhile (say a rendezvous message whose data is on its way).
                match request.wait() {
                    Ok(status) => status,
                    Err(e) => {
                        drop(Received::from_data(take(&slot), self, Status::empty()));
                        return Err(e.into());
                    }
                }
            }
            Err(e) => {
                // Whatever was lent goes back.
                drop(Received::from_data(take(&slot), self, Status::empty()));
                return Err(e.into());
            }
        };
        let data = take(&slot).or_else(|| Some(InPlaceData::Owned(buf.take())));
        Ok(Some(Received::from_data(data, self, status)))
    }
}
