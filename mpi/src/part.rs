//! MPI-4 partitioned communication: `MPI_Psend_init`, `MPI_Precv_init`, `MPI_Pready`,
//! `MPI_Pready_range`, `MPI_Pready_list`, `MPI_Parrived`.
//!
//! Both calls make an inactive persistent request, started by `MPI_Start`/`MPI_Startall`,
//! completed by `MPI_Wait*`/`MPI_Test*` and freed by `MPI_Request_free`, as the persistent
//! point-to-point requests. The transfer is **one message per start**, sent when the last
//! partition is marked ready: its data (the `partitions * count` elements) is copied when the
//! last `MPI_Pready*` marks it, so the send buffer may be reused at once after that. The
//! receive side posts one receive of its whole buffer at `MPI_Start`; `MPI_Parrived` is true for
//! every partition once that message is in the receive buffer. The sizes of the two sides must
//! agree (a longer send is `MPI_ERR_TRUNCATE` at the receiver); their partition counts may
//! differ.
//!
//! Matching follows the order of the init calls (MPI-4.0 §4.2): the k-th `MPI_Psend_init` to
//! (dest, tag, comm) pairs with the k-th `MPI_Precv_init` from (that rank, tag, comm), for
//! every start of the two, whatever order the requests are started in. Each send request takes
//! a number of its own (`next_id`) and `MPI_Psend_init` sends it to the peer in a *link
//! message* (control context `context | LINK_CONTEXT_BITS` of the communicator's point-to-point
//! `context`, the request's tag); `MPI_Precv_init` posts the receive of one such message. The
//! agent matches messages of one (context, source, tag) in order, so the k-th receive gets the
//! k-th send's number, also across requests freed and made again (a freed receive's posted
//! link receive still takes its message). The data of every start then travels in the *data
//! context* `PART_CONTEXT_BIT | number`, which only that pair uses: no other receive (an
//! `MPI_ANY_SOURCE`/`MPI_ANY_TAG` one included) and no other partitioned request sees it, and
//! the starts of one pair match in order. A receive started before its link message came is
//! *deferred*: its request is driven here, and the receive of the data (into the same buffer)
//! is posted once the link message is in, by a handler of the link receive (on the agent's
//! handler thread, so also while the process blocks in any other call) and by the progress of
//! any partitioned request (waits and tests on one, `MPI_Start`, `MPI_Pready*`,
//! `MPI_Parrived`); the data waits meanwhile among the agent's unexpected messages.
//!
//! The send request is a message request driven by the agent's progress: a wait on it runs the
//! agent (so a rendezvous send moves) and completes it when the message's send completed. With
//! `MPI_THREAD_MULTIPLE`, other threads may mark partitions while one waits; below it, nothing
//! could mark them during a blocking wait, so a blocking wait on a send with partitions left
//! unmarked fails the request with `MPI_ERR_REQUEST` (the standard makes such a wait
//! erroneous) instead of waiting for ever; tests (`MPI_Test*`) just report it incomplete.
//!
//! Errors: `MPI_Pready*` on a request that is not a partitioned send, or one that is not
//! active (not started, or every partition marked since its start) is `MPI_ERR_REQUEST`; a
//! partition outside `0..partitions`, or one marked already, is `MPI_ERR_ARG`. `MPI_Parrived`
//! on a request that is not a partitioned receive is `MPI_ERR_REQUEST`, on a partition out of
//! range `MPI_ERR_ARG`; on an inactive request it gives true. `MPI_Precv_init` refuses
//! `MPI_ANY_SOURCE` (`MPI_ERR_RANK`) and `MPI_ANY_TAG` (`MPI_ERR_TAG`), as the standard does.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use viaduct_agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{
    BoxError, CarCounter, Condition, Deadline, HandlerFn, ProgressDriver, Request,
};

use crate::abi::{self, Handle, MpiCount, err};
use crate::error::MpiError;
use crate::p2p::{Data, Persist, UserMem, data_of, dest_rank, send_tag};
use crate::request::Meta;
use crate::state::{ReqEntry, rt};

/// `MPI_THREAD_MULTIPLE`.
const THREAD_MULTIPLE: c_int = 3;

/// The failure of a blocking wait on a partitioned send with `.0` partitions not marked ready,
/// in a process where no other thread could mark them (class `MPI_ERR_REQUEST`).
#[derive(Debug)]
struct Stuck(usize);

/// The class carried by [`Stuck`].
const STUCK_CLASS: crate::error::CallbackCode = crate::error::CallbackCode(err::REQUEST);

impl std::fmt::Display for Stuck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a wait on a partitioned send with {} partitions not marked ready, below \
             MPI_THREAD_MULTIPLE (no other thread could mark them)",
            self.0
        )
    }
}

impl std::error::Error for Stuck {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&STUCK_CLASS)
    }
}

/// An [`MpiError`] failing a request: its message, and its class as the source.
#[derive(Debug)]
struct Failed(String, crate::error::CallbackCode);

impl From<MpiError> for Failed {
    fn from(e: MpiError) -> Self {
        Failed(e.message, crate::error::CallbackCode(e.class))
    }
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.1)
    }
}

/// The bit of every partitioned context. A message of a partitioned send travels in the data
/// context `PART_CONTEXT_BIT | id` (bit 30 clear), `id` being the send request's own number;
/// the number goes to the receiver in a link message in the control context
/// `context | LINK_CONTEXT_BITS` of the communicator's point-to-point `context`.
const PART_CONTEXT_BIT: u32 = 1 << 31;

/// The bits that move a communicator's point-to-point context (below `1 << 30`) to its
/// partitioned control context, where the link messages go.
const LINK_CONTEXT_BITS: u32 = 3 << 30;

/// The send request numbers (data contexts) fit 30 bits; they wrap after `1 << 30` inits.
const ID_MASK: u32 = (1 << 30) - 1;

/// Bytes of a link message: the send request's number, little-endian.
const LINK_LEN: usize = 4;

/// The number of this process's next partitioned send request.
fn next_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed) & ID_MASK
}

/// The partitioned control context of a communicator's point-to-point context.
fn link_context(context: u32) -> Result<u32, MpiError> {
    if context > ID_MASK {
        return Err(MpiError::new(
            err::INTERN,
            format!(
                "the communicator's context id {context:#x} is past {ID_MASK:#x}, the last one \
                 partitioned communication can use"
            ),
        ));
    }
    Ok(context | LINK_CONTEXT_BITS)
}

/// How a request's messages find their data context (see the module's notes).
enum Link {
    /// The data context's number is known: a send's own, or the one a receive's link message
    /// brought.
    Known(u32),
    /// A receive waiting for its link message (the posted receive of it, and its buffer).
    Waiting(Request, RecvBuffer),
    /// The link message could not be received (the message of the error).
    Failed(String),
    /// A request with `MPI_PROC_NULL`: no messages.
    Null,
}

/// A receive started before its link message came: the receive of the data is posted once
/// it does, and completes the start's request.
struct Deferred {
    /// Completes the start's request.
    cars: CarCounter,
    /// Where the data goes (the one of the start's table entry).
    buf: RecvBuffer,
    /// The communicator's agent.
    agent: Agent,
    /// The sender's world rank.
    source: u32,
    /// The receive of the data, once posted.
    inner: Option<Request>,
    /// `MPI_Cancel` was passed on.
    cancelling: bool,
}

/// One partitioned request, for the life of its handle.
pub(crate) struct Part {
    send: bool,
    buf: usize,
    partitions: usize,
    /// Elements of all partitions together.
    total: c_int,
    datatype: Handle,
    peer: c_int,
    tag: c_int,
    comm: Handle,
    /// The data context of the request's messages.
    link: Mutex<Link>,
    /// A handler waits for the link message (receive side, see [`Part::watch_link`]).
    watching: AtomicBool,
    run: Mutex<Run>,
}

/// The state of the current start.
#[derive(Default)]
struct Run {
    /// Started at least once.
    started: bool,
    /// Marked partitions of the current start (send side).
    ready: Vec<bool>,
    /// How many are marked.
    nready: usize,
    /// Completes the send request of the current start.
    cars: Option<CarCounter>,
    /// The agent's send of the message, once every partition is ready.
    sending: Option<Request>,
    /// A receive started before its link message came (receive side).
    deferred: Option<Deferred>,
}

fn lock(m: &Mutex<Run>) -> MutexGuard<'_, Run> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Partitioned requests by handle (`MPI_Pready` and `MPI_Parrived` find theirs here, also
/// while a wait in another thread holds the request's table entry).
fn parts() -> MutexGuard<'static, HashMap<Handle, Arc<Part>>> {
    static PARTS: OnceLock<Mutex<HashMap<Handle, Arc<Part>>>> = OnceLock::new();
    PARTS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Forgets request `h` if it is partitioned (`MPI_Request_free`).
pub(crate) fn forget(h: Handle) {
    parts().remove(&h);
}

fn find(h: Handle) -> Option<Arc<Part>> {
    parts().get(&h).cloned()
}

/// The receives started before their link message came, while their data receive is not
/// posted: every partitioned request's progress (and `MPI_Pready*`, `MPI_Parrived`,
/// `MPI_Start`) posts those whose link message came, so that a wait on another partitioned
/// request does not hold a sender's rendezvous back.
fn deferred() -> MutexGuard<'static, Vec<Weak<Part>>> {
    static DEFERRED: Mutex<Vec<Weak<Part>>> = Mutex::new(Vec::new());
    DEFERRED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Polls the deferred receives (see [`deferred`]); forgets those posted (or gone).
fn poll_deferred() {
    let list: Vec<Weak<Part>> = {
        let d = deferred();
        if d.is_empty() {
            return;
        }
        d.clone()
    };
    for w in &list {
        if let Some(p) = w.upgrade() {
            p.poll_recv();
        }
    }
    deferred().retain(|w| {
        w.upgrade().is_some_and(|p| {
            lock(&p.run)
                .deferred
                .as_ref()
                .is_some_and(|d| d.inner.is_none())
        })
    });
}

/// Drives a partitioned send's request, or a deferred receive's: runs the agent's progress,
/// then completes the request when the agent's send of the message completed (or the deferred
/// receive did, once posted), and posts the deferred receives whose link message came.
struct Driver {
    agent: Agent,
    part: Weak<Part>,
}

impl ProgressDriver for Driver {
    fn progress(&self, timeout: Option<Duration>) -> Result<(), BoxError> {
        match timeout {
            None => {
                self.agent.make_progress();
            }
            Some(t) => {
                if let Some(p) = self.part.upgrade() {
                    p.fail_if_stuck();
                }
                // Short naps: the send's completion is noticed here, not by a wake-up.
                self.agent
                    .make_progress_blocking(t.min(Duration::from_millis(1)));
            }
        }
        if let Some(p) = self.part.upgrade() {
            p.poll();
        }
        poll_deferred();
        Ok(())
    }
}

impl Part {
    /// The communicator's agent and the world rank of the peer (`None`: `MPI_PROC_NULL`).
    fn route(&self) -> Result<(Agent, Option<u32>, Arc<crate::state::CommEntry>), MpiError> {
        let c = rt()?.comm_any(self.comm)?;
        let agent = c.comm.agent().clone();
        let peer = dest_rank(&c, self.peer)?.map(|r| c.comm.world_rank(r).unwrap_or(r));
        Ok((agent, peer, c))
    }

    /// The number of the request's data context: `Ok(None)` while a receive's link message
    /// has not come.
    fn data_id(&self) -> Result<Option<u32>, MpiError> {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *link {
            Link::Known(id) => return Ok(Some(*id)),
            Link::Null => return Ok(None),
            Link::Failed(m) => {
                return Err(MpiError::new(
                    err::OTHER,
                    format!("the partitioned receive was not linked to its send: {m}"),
                ));
            }
            Link::Waiting(req, _) if !req.is_complete() => return Ok(None),
            Link::Waiting(..) => {}
        }
        let Link::Waiting(mut req, buf) = std::mem::replace(&mut *link, Link::Null) else {
            unreachable!("matched above");
        };
        let got = req.wait().map_err(|e| e.to_string()).and_then(|_| {
            let bytes = buf.take();
            <[u8; LINK_LEN]>::try_from(bytes.as_slice())
                .map(|b| u32::from_le_bytes(b) & ID_MASK)
                .map_err(|_| format!("a link message of {} bytes, not {LINK_LEN}", bytes.len()))
        });
        match got {
            Ok(id) => {
                *link = Link::Known(id);
                Ok(Some(id))
            }
            Err(m) => {
                *link = Link::Failed(m.clone());
                Err(MpiError::new(
                    err::OTHER,
                    format!("the partitioned receive was not linked to its send: {m}"),
                ))
            }
        }
    }

    /// Has the link receive, once complete, post the deferred receives from the agent's
    /// handler thread: a process that started a receive before its sender's init and then
    /// blocks in another call (an `MPI_Recv`, a barrier) still lets the sender's data in, so a
    /// sender waiting for its rendezvous goes on. Once per request (the link comes once).
    fn watch_link(&self) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        if let Link::Waiting(req, _) = &*link {
            let posted = req.post_handler(
                Condition::Complete,
                Some(HandlerFn::new(|_, _| poll_deferred())),
                None,
                Deadline::Asap,
            );
            if posted.is_err() {
                // The receive ended otherwise (freed, failed): the request's own progress
                // reports it.
                self.watching.store(false, Ordering::Release);
            }
        }
    }

    /// Completes the current start's request when its message moved: the agent's send
    /// completed (send side), or the deferred receive is posted once its link message came,
    /// and completed (receive side).
    fn poll(&self) {
        if self.send {
            self.poll_send();
        } else {
            self.poll_recv();
        }
    }

    /// Posts the receive of a start deferred for want of its link message once it came;
    /// completes the start's request when that receive completed.
    fn poll_recv(&self) {
        let mut run = lock(&self.run);
        let Some(d) = run.deferred.as_mut() else {
            return;
        };
        if d.cars.cancel_requested() && !d.cancelling {
            d.cancelling = true;
            match &d.inner {
                // Not posted: nothing was received; the data stays for the next start.
                None => {
                    let d = run.deferred.take();
                    drop(run);
                    if let Some(d) = d {
                        let _ = d.cars.complete_cancelled();
                    }
                    return;
                }
                Some(inner) => {
                    let _ = inner.cancel();
                }
            }
        }
        if d.inner.is_none() {
            let posted = match self.data_id() {
                Ok(None) => return,
                Ok(Some(id)) => send_tag(self.tag).and_then(|tag| {
                    d.agent
                        .with_context(PART_CONTEXT_BIT | id)
                        .irecv_into(d.buf.clone(), Source::Rank(d.source), TagMatch::Tag(tag))
                        .map_err(MpiError::from)
                }),
                Err(e) => Err(e),
            };
            match posted {
                Ok(r) => d.inner = Some(r),
                Err(e) => {
                    let d = run.deferred.take();
                    drop(run);
                    if let Some(d) = d {
                        let _ = d.cars.fail_car(Failed::from(e));
                    }
                    return;
                }
            }
        }
        if !d.inner.as_ref().is_some_and(Request::is_complete) {
            return;
        }
        let Some(d) = run.deferred.take() else {
            return;
        };
        drop(run);
        let Some(mut inner) = d.inner else {
            return;
        };
        let _ = match inner.wait() {
            Ok(st) if st.test_cancelled() => d.cars.complete_cancelled().map(|()| true),
            Ok(st) => {
                d.cars.set_envelope(
                    st.source().unwrap_or(d.source),
                    st.tag().unwrap_or(self.tag as u32),
                );
                d.cars.complete_car(st.count())
            }
            Err(e) => d.cars.fail_car(e),
        };
    }

    /// Completes the current start's request once the agent's send completed.
    fn poll_send(&self) {
        let mut run = lock(&self.run);
        let done = match &run.sending {
            Some(r) => r.is_complete(),
            None => false,
        };
        if !done {
            return;
        }
        let (Some(mut r), Some(cars)) = (run.sending.take(), run.cars.take()) else {
            return;
        };
        drop(run);
        let _ = match r.wait() {
            Ok(_) => cars.complete_car(0),
            Err(e) => cars.fail_car(e),
        };
    }

    /// A blocking wait on the send while partitions are still unmarked: below
    /// `MPI_THREAD_MULTIPLE` no other thread may mark them while this one waits, so the wait
    /// would never end; the request fails with `MPI_ERR_REQUEST` instead (and is inactive
    /// after the wait, so the partitions left cannot be marked).
    fn fail_if_stuck(&self) {
        let Ok(rt) = rt() else { return };
        if !self.send || rt.thread_level >= THREAD_MULTIPLE {
            return;
        }
        let mut run = lock(&self.run);
        if run.sending.is_some() || run.nready == self.partitions {
            return;
        }
        let Some(cars) = run.cars.take() else { return };
        let missing = self.partitions - run.nready;
        drop(run);
        let _ = cars.fail_car(Stuck(missing));
    }

    /// Starts the request once more (`MPI_Start`): gives the handle of a table entry holding
    /// the agent's request.
    fn start(self: &Arc<Self>) -> Result<Handle, MpiError> {
        poll_deferred();
        let rt = rt()?;
        let (agent, peer, c) = self.route()?;
        if self.send {
            let (req, cars) = Request::message_driven(
                1,
                Arc::new(Driver {
                    agent: agent.clone(),
                    part: Arc::downgrade(self),
                }),
            );
            {
                let mut run = lock(&self.run);
                run.started = true;
                run.ready = vec![false; self.partitions];
                run.nready = 0;
                run.cars = Some(cars);
                run.sending = None;
            }
            if self.partitions == 0 {
                self.send_now()?;
            }
            return Ok(rt.add_request(ReqEntry::new(req, Meta::Send { comm: self.comm })));
        }
        lock(&self.run).started = true;
        let Some(source) = peer else {
            return Ok(rt.add_request(ReqEntry::new(
                Request::null(),
                Meta::ProcNull { comm: self.comm },
            )));
        };
        let tag = TagMatch::Tag(send_tag(self.tag)?);
        let (cap, unpack) = match data_of(self.total, self.datatype)? {
            Data::Bytes(len) => (len, None),
            Data::Packed(l, n, packed) => (packed, Some((l, n))),
        };
        // A null buffer with a datatype that unpacks is MPI_BOTTOM (absolute addresses).
        if cap > 0 && self.buf == 0 && unpack.is_none() {
            return Err(MpiError::new(err::BUFFER, "the receive buffer is NULL"));
        }
        let rbuf = if unpack.is_none() && cap > 0 {
            // SAFETY: the caller's buffer of `cap` bytes, given to MPI_Precv_init and left to
            // the library while the request is active (MPI's rule for a pending receive);
            // MPI_Request_free detaches it.
            let mem = unsafe { UserMem::new(self.buf as *mut c_void, cap) }?;
            RecvBuffer::caller(Box::new(mem))
        } else {
            RecvBuffer::new(cap)
        };
        let id = match self.data_id()? {
            Some(id) => Some(id),
            None => {
                // The link message may be in and not yet received.
                agent.make_progress();
                self.data_id()?
            }
        };
        let req = match id {
            Some(id) => agent.with_context(PART_CONTEXT_BIT | id).irecv_into(
                rbuf.clone(),
                Source::Rank(source),
                tag,
            )?,
            None => {
                // Posted by the request's progress once the link message came; the data
                // waits meanwhile among the unexpected messages.
                let (req, cars) = Request::message_driven(
                    1,
                    Arc::new(Driver {
                        agent: agent.clone(),
                        part: Arc::downgrade(self),
                    }),
                );
                lock(&self.run).deferred = Some(Deferred {
                    cars,
                    buf: rbuf.clone(),
                    agent,
                    source,
                    inner: None,
                    cancelling: false,
                });
                deferred().push(Arc::downgrade(self));
                self.watch_link();
                req
            }
        };
        let meta = Meta::Recv {
            comm: self.comm,
            buf: rbuf,
            dst: self.buf,
            cap,
            unpack,
            map: Some(c),
        };
        Ok(rt.add_request(ReqEntry::new(req, meta)))
    }

    /// Sends the message of the current start (every partition is ready).
    fn send_now(&self) -> Result<(), MpiError> {
        let (agent, peer, _) = self.route()?;
        let Some(dest) = peer else {
            if let Some(cars) = lock(&self.run).cars.take() {
                let _ = cars.complete_car(0);
            }
            return Ok(());
        };
        let mut data = Vec::new();
        match data_of(self.total, self.datatype)? {
            Data::Bytes(len) => {
                if len > 0 {
                    // SAFETY: the caller's send buffer of `total` elements, given to
                    // MPI_Psend_init; every partition is marked ready, so its data is final.
                    let bytes = unsafe { crate::datatype::input(self.buf as *const c_void, len) }?;
                    data.extend_from_slice(bytes);
                }
            }
            Data::Packed(l, n, packed) => {
                // A null buffer is MPI_BOTTOM: the datatype holds absolute addresses.
                data.reserve(packed);
                // SAFETY: as above, `n` elements of the layout at the caller's buffer.
                unsafe { l.pack((self.buf as *const c_void).cast(), n, &mut data) };
            }
        }
        let tag = send_tag(self.tag)?;
        let id = self.data_id()?.ok_or_else(|| {
            MpiError::new(err::INTERN, "the partitioned send has no data context")
        })?;
        let req = agent
            .with_context(PART_CONTEXT_BIT | id)
            .isend_owned(dest, tag, data)?;
        lock(&self.run).sending = Some(req);
        self.poll();
        Ok(())
    }

    /// Marks `list`'s partitions ready (`MPI_Pready*`); sends when the last one is.
    fn ready(&self, list: impl Iterator<Item = c_int> + Clone) -> Result<(), MpiError> {
        let last = {
            let mut run = lock(&self.run);
            if !run.started || run.cars.is_none() || run.nready == self.partitions {
                return Err(MpiError::new(
                    err::REQUEST,
                    "the partitioned send request is not active",
                ));
            }
            // Check every partition before marking any.
            let mut seen = run.ready.clone();
            for p in list.clone() {
                if p < 0 || p as usize >= self.partitions {
                    return Err(MpiError::new(
                        err::ARG,
                        format!(
                            "partition {p} is outside 0..{} of the request",
                            self.partitions
                        ),
                    ));
                }
                if seen[p as usize] {
                    return Err(MpiError::new(
                        err::ARG,
                        format!("partition {p} is marked ready already"),
                    ));
                }
                seen[p as usize] = true;
            }
            for p in list {
                run.ready[p as usize] = true;
                run.nready += 1;
            }
            run.nready == self.partitions
        };
        if last {
            self.send_now()?;
        }
        poll_deferred();
        Ok(())
    }
}

/// Makes the inactive partitioned request.
///
/// # Safety
///
/// `request` is the caller's writable handle (or NULL, an error).
#[allow(clippy::too_many_arguments)]
unsafe fn init(
    send: bool,
    buf: usize,
    partitions: c_int,
    count: MpiCount,
    datatype: Handle,
    peer: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> Result<(), MpiError> {
    let rt = rt()?;
    let c = rt.comm_any(comm)?;
    if partitions < 0 {
        return Err(MpiError::new(
            err::ARG,
            format!("partitions {partitions} is negative"),
        ));
    }
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("count {count} is negative"),
        ));
    }
    let total = c_int::try_from(i128::from(partitions) * i128::from(count)).map_err(|_| {
        MpiError::new(
            err::COUNT,
            format!("{partitions} partitions of {count} elements do not fit an int"),
        )
    })?;
    data_of(total, datatype)?;
    if send {
        send_tag(tag)?;
        dest_rank(&c, peer)?;
    } else {
        if peer == abi::ANY_SOURCE {
            return Err(MpiError::new(
                err::RANK,
                "MPI_ANY_SOURCE is not allowed in MPI_Precv_init",
            ));
        }
        if tag == abi::ANY_TAG {
            return Err(MpiError::new(
                err::TAG,
                "MPI_ANY_TAG is not allowed in MPI_Precv_init",
            ));
        }
        send_tag(tag)?;
        dest_rank(&c, peer)?;
    }
    // SAFETY: the caller's handle.
    let out =
        unsafe { request.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "request is NULL"))?;
    // Link the request to its partner: the k-th MPI_Psend_init to (peer, tag, comm) sends its
    // number to the peer, where the k-th MPI_Precv_init from this rank (tag, comm) posted the
    // receive of it; the agent matches the two in order.
    let peer_world = dest_rank(&c, peer)?.map(|r| c.comm.world_rank(r).unwrap_or(r));
    let link = match peer_world {
        None => Link::Null,
        Some(world) => {
            let agent = c.comm.agent();
            let ctl = agent.with_context(link_context(agent.context())?);
            let wire_tag = send_tag(tag)?;
            if send {
                let id = next_id();
                // Dropped, the send goes on (and completes on its own).
                drop(ctl.isend_owned(world, wire_tag, id.to_le_bytes().to_vec())?);
                Link::Known(id)
            } else {
                let buf = RecvBuffer::new(LINK_LEN);
                let req =
                    ctl.irecv_into(buf.clone(), Source::Rank(world), TagMatch::Tag(wire_tag))?;
                Link::Waiting(req, buf)
            }
        }
    };
    let part = Arc::new(Part {
        send,
        buf,
        partitions: partitions as usize,
        total,
        datatype,
        peer,
        tag,
        comm,
        link: Mutex::new(link),
        watching: AtomicBool::new(false),
        run: Mutex::new(Run::default()),
    });
    let starter = Arc::clone(&part);
    let start = move || starter.start();
    let h = rt.add_request(ReqEntry {
        req: Request::null(),
        meta: Meta::Inactive { comm },
        persist: Some(Persist::coll(comm, Arc::new(start))),
    });
    parts().insert(h, part);
    *out = h;
    Ok(())
}

/// The partitioned send behind `request` (`MPI_ERR_REQUEST` for another request).
fn send_part(request: Handle) -> Result<Arc<Part>, MpiError> {
    match find(request) {
        Some(p) if p.send => Ok(p),
        _ => Err(MpiError::new(
            err::REQUEST,
            format!("request {request:#x} is not a partitioned send request"),
        )),
    }
}

/// The communicator of a partitioned request, for its error handler (else `MPI_COMM_WORLD`).
fn comm_of(request: Handle) -> Handle {
    find(request).map_or(abi::COMM_WORLD, |p| p.comm)
}

mpi_fn! {
    /// `MPI_Psend_init`: an inactive partitioned send of `partitions` partitions of `count`
    /// elements each (see the module's notes).
    MPI_Psend_init / PMPI_Psend_init(buf: *const c_void, partitions: c_int, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, info: Handle, request: *mut Handle) on comm => {
        let _ = info;
        // SAFETY: the caller's handle.
        unsafe { init(true, buf as usize, partitions, count, datatype, dest, tag, comm, request) }
    }
}

mpi_fn! {
    /// `MPI_Precv_init`: an inactive partitioned receive of `partitions` partitions of `count`
    /// elements each.
    MPI_Precv_init / PMPI_Precv_init(buf: *mut c_void, partitions: c_int, count: MpiCount, datatype: Handle, source: c_int, tag: c_int, comm: Handle, info: Handle, request: *mut Handle) on comm => {
        let _ = info;
        // SAFETY: the caller's handle.
        unsafe { init(false, buf as usize, partitions, count, datatype, source, tag, comm, request) }
    }
}

mpi_fn! {
    /// `MPI_Pready`: marks one partition of an active partitioned send ready.
    MPI_Pready / PMPI_Pready(partition: c_int, request: Handle) on comm_of(request) => {
        send_part(request)?.ready(std::iter::once(partition))
    }
}

mpi_fn! {
    /// `MPI_Pready_range`: marks partitions `partition_low..=partition_high` ready.
    MPI_Pready_range / PMPI_Pready_range(partition_low: c_int, partition_high: c_int, request: Handle) on comm_of(request) => {
        let p = send_part(request)?;
        if partition_low > partition_high {
            return Err(MpiError::new(
                err::ARG,
                format!("partition range {partition_low}..={partition_high} is empty"),
            ));
        }
        p.ready(partition_low..=partition_high)
    }
}

mpi_fn! {
    /// `MPI_Pready_list`: marks the `length` partitions of `array_of_partitions` ready.
    MPI_Pready_list / PMPI_Pready_list(length: c_int, array_of_partitions: *const c_int, request: Handle) on comm_of(request) => {
        let p = send_part(request)?;
        if length < 0 {
            return Err(MpiError::new(err::ARG, format!("length {length} is negative")));
        }
        if length > 0 && array_of_partitions.is_null() {
            return Err(MpiError::new(err::ARG, "array_of_partitions is NULL"));
        }
        let list: &[c_int] = if length == 0 {
            &[]
        } else {
            // SAFETY: the caller's array of `length` partitions.
            unsafe { std::slice::from_raw_parts(array_of_partitions, length as usize) }
        };
        p.ready(list.iter().copied())
    }
}

mpi_fn! {
    /// `MPI_Parrived`: whether a partition of a partitioned receive is in the receive buffer
    /// (all partitions arrive together, with the one message of the start).
    MPI_Parrived / PMPI_Parrived(request: Handle, partition: c_int, flag: *mut c_int) on comm_of(request) => {
        let p = match find(request) {
            Some(p) if !p.send => p,
            _ => {
                return Err(MpiError::new(
                    err::REQUEST,
                    format!("request {request:#x} is not a partitioned receive request"),
                ))
            }
        };
        // SAFETY: the caller's flag.
        let flag = unsafe { flag.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "flag is NULL"))?;
        if partition < 0 || partition as usize >= p.partitions {
            return Err(MpiError::new(
                err::ARG,
                format!("partition {partition} is outside 0..{} of the request", p.partitions),
            ));
        }
        // In place: threads of one process may ask about partitions of one request at once.
        poll_deferred();
        let got = rt()?.with_request(request, |e| {
            if e.inactive() {
                Ok(true)
            } else {
                crate::request::arrived(e)
            }
        })?;
        *flag = c_int::from(got?);
        Ok(())
    }
}
