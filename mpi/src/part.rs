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
//! differ. Partitioned messages travel in a context of their own (the communicator's
//! point-to-point context with its top bit set), so they never match other receives and
//! `MPI_ANY_SOURCE`/`MPI_ANY_TAG` receives never see them; among themselves they match in the
//! order the messages go (the sends' last `MPI_Pready*`, the receives' starts). MPI's rule for
//! requests of one (source, tag, communicator) is the order of the init calls; the two differ
//! when a process starts such requests in another order than it made them (docs/MPI.md).
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
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use viaduct_agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{BoxError, CarCounter, ProgressDriver, Request};

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

/// The bit that moves a point-to-point context to its partitioned twin.
const PART_CONTEXT_BIT: u32 = 1 << 31;

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

/// Drives a partitioned send's request: runs the agent's progress, then completes the request
/// when the agent's send of the message completed.
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
        Ok(())
    }
}

impl Part {
    /// The agent and world rank of the peer (`None`: `MPI_PROC_NULL`), in the partitioned
    /// context of the communicator.
    fn route(&self) -> Result<(Agent, Option<u32>, Arc<crate::state::CommEntry>), MpiError> {
        let c = rt()?.comm_any(self.comm)?;
        let agent = c.comm.agent();
        let agent = agent.with_context(agent.context() | PART_CONTEXT_BIT);
        let peer = dest_rank(&c, self.peer)?.map(|r| c.comm.world_rank(r).unwrap_or(r));
        Ok((agent, peer, c))
    }

    /// Completes the current start's request once the agent's send completed.
    fn poll(&self) {
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
        if rt.thread_level >= THREAD_MULTIPLE {
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
        let req = agent.irecv_into(rbuf.clone(), Source::Rank(source), tag)?;
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
        let req = agent.isend_owned(dest, tag, data)?;
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
    let part = Arc::new(Part {
        send,
        buf,
        partitions: partitions as usize,
        total,
        datatype,
        peer,
        tag,
        comm,
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
