//! Completion: `MPI_Wait`, `MPI_Test` and their `any`/`some`/`all` forms, `MPI_Request_free`,
//! `MPI_Request_get_status`, `MPI_Cancel`, `MPI_Test_cancelled`, on the agent's requests.
//!
//! A request handle names an entry of the runtime's table: the agent's [`Request`] and what
//! its completion must do ([`Meta`]): a receive copies the message from the agent's buffer into
//! the caller's, a generalized request reports the status its query function filled. Waits take
//! the entries out of the table and hand the agent's requests to the agent's `wait_*` and
//! `test_*` functions, so message, generalized and file requests mix in one call.

use std::ffi::c_int;
use std::sync::{Arc, Mutex};

use viaduct_agent::coll::CollBuffer;
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{self, AnyOutcome, Request, Status};

use crate::abi::{self, Handle, MpiStatus, err};
use crate::error::{MpiError, request_class};
use crate::state::{ReqEntry, Runtime, rt};

/// What a request is for, and what its completion does.
/// Turns a collective's result into what the caller's buffer receives.
pub type Post = Box<dyn Fn(&[u8]) -> Vec<u8> + Send + Sync>;

pub enum Meta {
    /// A send: nothing to do.
    Send {
        /// The communicator (for its error handler).
        comm: Handle,
    },
    /// A receive: copy the message into the caller's buffer.
    Recv {
        /// The communicator (for its error handler).
        comm: Handle,
        /// Where the agent put the message.
        buf: RecvBuffer,
        /// The caller's buffer.
        dst: usize,
        /// Its size in bytes (of packed data for a datatype with holes).
        cap: usize,
        /// For a datatype with holes: its layout and the number of elements to unpack.
        unpack: Option<(std::sync::Arc<crate::types::Layout>, usize)>,
        /// For a receive posted with world ranks (a pooled buffer): the communicator that maps
        /// the status's source back to its ranks.
        map: Option<Arc<crate::state::CommEntry>>,
    },
    /// A send or receive with `MPI_PROC_NULL`: complete at once.
    ProcNull {
        /// The communicator (for its error handler).
        comm: Handle,
    },
    /// A nonblocking collective: copy its result into the caller's buffer.
    Coll {
        /// The communicator (for its error handler).
        comm: Handle,
        /// The agent's result buffer (`None` once copied, or for a rank without result).
        out: Mutex<Option<CollBuffer>>,
        /// The caller's buffer.
        dst: usize,
        /// Its size in bytes.
        len: usize,
        /// What turns the agent's result into the caller's (the rank-order fold of gathered
        /// contributions for a non-commutative operation); `None`: the result as it is.
        post: Option<Post>,
        /// For a receive datatype with holes: its layout and the elements at `dst` the
        /// (packed) result is unpacked into; `None`: the result is copied as it is.
        unpack: Option<(Arc<crate::types::Layout>, usize)>,
    },
    /// A collective built of xfer blocks (the nonblocking `v` collectives and scans): when
    /// `req` completes, the other blocks' requests are waited for and `post` writes the
    /// result into the caller's buffer.
    Blocks {
        /// The communicator (for its error handler).
        comm: Handle,
        /// The started blocks and what delivers their result.
        started: Mutex<Option<crate::vcoll::Started>>,
    },
    /// A file read or write (`MPI_File_iread_at`, ...): the request is the access's last
    /// piece; completion waits for the other pieces and a read delivers its data into the
    /// caller's buffer.
    File {
        /// The pseudo handle reporting the file's errors.
        comm: Handle,
        /// The access's other pieces and destination.
        access: Arc<crate::file::Access>,
    },
    /// A persistent request not started, or completed since its last start.
    Inactive {
        /// The communicator (for its error handler).
        comm: Handle,
    },
    /// A generalized request of `MPI_Grequest_start` taken out of its slot for a wait or test
    /// of several requests: its completion runs its query and free functions.
    Greq {
        /// Its slot.
        slot: crate::greq::GreqRef,
    },
    /// A request of a class (MPICH's extensions): its status is the one its query function
    /// filled.
    ClassGreq {
        /// The status the last query filled.
        status: Arc<Mutex<MpiStatus>>,
    },
}

impl Meta {
    /// The communicator whose error handler reports errors of this request.
    pub fn comm(&self) -> Handle {
        match self {
            Meta::Send { comm }
            | Meta::Recv { comm, .. }
            | Meta::ProcNull { comm }
            | Meta::Coll { comm, .. }
            | Meta::Blocks { comm, .. }
            | Meta::File { comm, .. }
            | Meta::Inactive { comm } => *comm,
            Meta::Greq { .. } | Meta::ClassGreq { .. } => abi::COMM_WORLD,
        }
    }

    /// Copies a received message into the caller's buffer (receives only).
    pub(crate) fn deliver(&self) {
        match self {
            Meta::Recv {
                buf,
                dst,
                unpack: Some((l, n)),
                ..
            } => {
                // SAFETY: `dst` is the caller's receive buffer of `n` elements of the layout
                // given to the receive call; MPI leaves it to the library until completion.
                buf.with(|data| unsafe { l.unpack(data, *dst as *mut u8, *n) });
            }
            // The agent wrote the message into the caller's buffer itself.
            Meta::Recv { buf, .. } if buf.is_caller_owned() => {}
            Meta::Recv { buf, dst, cap, .. } if *cap > 0 => {
                // SAFETY: `dst` is the caller's receive buffer of `cap` bytes given to the
                // receive call; MPI leaves it to the library until the request completes.
                let out = unsafe { std::slice::from_raw_parts_mut(*dst as *mut u8, *cap) };
                buf.copy_to(out);
            }
            Meta::Coll {
                out,
                dst,
                len,
                post,
                unpack,
                ..
            } if *len > 0 => {
                let taken = out.lock().unwrap_or_else(|e| e.into_inner()).take();
                let taken = taken.and_then(|mut b| b.take());
                let taken = match (taken, post) {
                    (Some(v), Some(p)) => Some(p(&v)),
                    (v, _) => v,
                };
                if let (Some(v), Some((l, n))) = (&taken, unpack) {
                    // SAFETY: `dst` is the caller's result buffer of `n` elements of the layout
                    // given to the collective; MPI leaves it to the library until completion.
                    unsafe { l.unpack(v, *dst as *mut u8, *n) };
                } else if let Some(v) = taken {
                    let n = v.len().min(*len);
                    // SAFETY: `dst` is the caller's result buffer of `len` bytes given to the
                    // collective; MPI leaves it to the library until the request completes.
                    let to = unsafe { std::slice::from_raw_parts_mut(*dst as *mut u8, n) };
                    to.copy_from_slice(&v[..n]);
                }
            }
            // Only where the request failed: its own piece moved nothing.
            Meta::File { access, .. } => crate::file::finish(access, 0),
            Meta::Blocks { started, .. } => {
                if let Some(st) = started.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    // The receiving block completed; a failure of the sending block shows
                    // at the ranks it sends to.
                    let _ = st.deliver();
                }
            }
            _ => {}
        }
    }

    /// The MPI status of the completed request from the agent's status; its error field holds
    /// the request's own error code.
    fn status(&self, st: &Status) -> MpiStatus {
        let code = match (st.error(), self) {
            (None, _) => abi::SUCCESS,
            // An operation of the file engine failed: an I/O error (`MPI_ERR_IO`).
            (Some(e), Meta::File { .. }) if request_class(e) == err::OTHER => err::IO,
            (Some(e), _) => request_class(e),
        };
        let code = match self {
            Meta::File { access, .. } if code == abi::SUCCESS => access.failed(),
            Meta::Recv {
                unpack: Some((l, _)),
                ..
            } if code == abi::SUCCESS && ends_mid_element(l, st.count()) => err::TRUNCATE,
            _ => code,
        };
        let mut m = match self {
            Meta::ProcNull { .. } => MpiStatus {
                source: abi::PROC_NULL,
                tag: abi::ANY_TAG,
                ..MpiStatus::default()
            },
            Meta::Inactive { .. } => MpiStatus::empty(),
            Meta::Greq { slot } => {
                // Query and free ran; their code, if any, is the request's error.
                let s = crate::greq::finish(*slot);
                if s.error != abi::SUCCESS {
                    return s;
                }
                s
            }
            Meta::ClassGreq { status } => *status.lock().unwrap_or_else(|e| e.into_inner()),
            Meta::File { access, .. } => {
                let mut s = MpiStatus::empty();
                s.set_count((st.count() + access.moved()) as i64);
                s.set_cancelled(st.test_cancelled());
                s
            }
            Meta::Send { .. } | Meta::Coll { .. } | Meta::Blocks { .. } => {
                let mut s = MpiStatus::empty();
                s.set_cancelled(st.test_cancelled());
                s
            }
            Meta::Recv { cap, map, .. } => {
                let source = match (st.source(), map) {
                    (Some(w), Some(c)) => c.rank_of_world(w),
                    (s, _) => s,
                };
                let mut s = MpiStatus {
                    source: source.map_or(abi::ANY_SOURCE, |r| r as c_int),
                    tag: st.tag().map_or(abi::ANY_TAG, |t| t as c_int),
                    ..MpiStatus::default()
                };
                s.set_count(st.count().min(*cap as u64) as i64);
                s.set_cancelled(st.test_cancelled());
                s
            }
        };
        m.error = code;
        m
    }
}

/// Whether `bytes` of received data end inside a predefined element of layout `l`, a
/// datatype with holes: the message's type signature does not match the receive's. MPICH
/// 4.0.2 fails such a receive with `MPI_ERR_TRUNCATE` (the data that came is unpacked all the
/// same), and so does viaduct; into a contiguous datatype the receive succeeds and
/// `MPI_Get_count` gives `MPI_UNDEFINED`, in both.
fn ends_mid_element(l: &crate::types::Layout, bytes: u64) -> bool {
    if l.size == 0 || l.sig.is_none() {
        return false;
    }
    let rest = (bytes % l.size as u64) as usize;
    l.elements_in(rest).is_none()
}

/// Writes `s`, all but its `MPI_ERROR`, to the caller's status unless it is
/// `MPI_STATUS_IGNORE` (or NULL).
///
/// # Safety
///
/// `out` is `MPI_STATUS_IGNORE`, NULL or a writable `MPI_Status`.
pub unsafe fn write_status(out: *mut MpiStatus, s: MpiStatus) {
    if out as usize != abi::STATUS_IGNORE && !out.is_null() {
        // The caller's `MPI_ERROR` stays as it was: a call that completes one request reports
        // its error by its return value, and only the calls that fill an array of statuses
        // (`MPI_ERR_IN_STATUS`) write that field, as MPICH does.
        // SAFETY: the caller guarantees `out` is a writable status; each field is written
        // through its own place, none is read.
        unsafe {
            std::ptr::addr_of_mut!((*out).count_lo).write(s.count_lo);
            std::ptr::addr_of_mut!((*out).count_hi_and_cancelled).write(s.count_hi_and_cancelled);
            std::ptr::addr_of_mut!((*out).source).write(s.source);
            std::ptr::addr_of_mut!((*out).tag).write(s.tag);
        }
    }
}

/// Writes `s` to element `i` of the caller's status array unless it is `MPI_STATUSES_IGNORE`.
///
/// # Safety
///
/// `out` is `MPI_STATUSES_IGNORE`, NULL or an array of more than `i` writable statuses.
unsafe fn write_status_at(out: *mut MpiStatus, i: usize, s: MpiStatus) {
    if out as usize != abi::STATUS_IGNORE && !out.is_null() {
        // SAFETY: the caller guarantees an array of more than `i` statuses.
        unsafe { out.add(i).write(s) };
    }
}

/// The caller's array of `n` request handles.
///
/// # Safety
///
/// `p` points to `n` writable handles (any value when `n` is 0).
unsafe fn handles<'a>(p: *mut Handle, n: c_int) -> Result<&'a mut [Handle], MpiError> {
    if n < 0 {
        return Err(MpiError::new(err::COUNT, format!("count {n} is negative")));
    }
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(MpiError::new(err::ARG, "the request array is NULL"));
    }
    // SAFETY: the caller guarantees `n` writable handles at `p`.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n as usize) })
}

/// Completes a request taken out of the table: delivers a received message and returns its
/// MPI status (the error field holding the request's own code).
/// Whether the operation of entry `e` is complete, without completing the request; a
/// complete receive is delivered into the caller's buffer (`MPI_Parrived`).
pub(crate) fn arrived(e: &ReqEntry) -> Result<bool, MpiError> {
    match e.req.get_status() {
        Ok(None) => Ok(false),
        Ok(Some(_)) => {
            e.meta.deliver();
            Ok(true)
        }
        Err(re) => Err(MpiError::new(request_class(&re), re.to_string())),
    }
}

fn complete(meta: &Meta, st: &Status) -> MpiStatus {
    match meta {
        Meta::File { access, .. } => crate::file::finish(access, st.count()),
        _ => meta.deliver(),
    }
    meta.status(st)
}

/// Waits for one request taken out of the table; returns its status.
pub fn wait_entry(e: &mut ReqEntry) -> MpiStatus {
    let st = e.req.wait_with_error();
    complete(&e.meta, &st)
}

/// Tests one request taken out of the table: its status if complete (`None`: not complete,
/// the request is left in `e`).
fn test_entry(e: &mut ReqEntry) -> Option<MpiStatus> {
    let mut one = [std::mem::take(&mut e.req)];
    let mut st = Vec::with_capacity(1);
    match request::test_all(&mut one, Some(&mut st)) {
        Ok(false) => {
            let [req] = one;
            e.req = req;
            None
        }
        _ => Some(complete(&e.meta, &st[0])),
    }
}

/// After completion: a persistent request goes back to the table, inactive, under its handle;
/// any other is gone. Returns the caller's new handle value.
fn retire(rt: &Runtime, h: Handle, mut e: ReqEntry) -> Handle {
    if let Meta::Greq { slot } = e.meta {
        crate::greq::retire(slot);
        return abi::REQUEST_NULL;
    }
    if let Meta::Recv {
        buf, map: Some(_), ..
    } = &e.meta
    {
        crate::p2p::give_back(buf.clone());
    }
    match e.persist.as_ref().map(|p| p.comm()) {
        Some(comm) => {
            e.req = Request::null();
            e.meta = Meta::Inactive { comm };
            rt.put_request(h, e);
            h
        }
        None => abi::REQUEST_NULL,
    }
}

fn status_error(s: &MpiStatus, comm: Handle) -> Result<(), MpiError> {
    code_error(s.error, comm)
}

/// The error of a request that completed with code `code`.
#[inline(always)]
fn code_error(code: c_int, comm: Handle) -> Result<(), MpiError> {
    if code == abi::SUCCESS {
        Ok(())
    } else {
        Err(failed(code, comm))
    }
}

/// The error of a request that failed with code `code`.
#[cold]
#[inline(never)]
fn failed(code: c_int, comm: Handle) -> MpiError {
    MpiError::new(
        code,
        format!("the request failed: {}", crate::error::class_text(code)),
    )
    .on(comm)
}

/// Takes the active requests of `hs` out of the table: (index, handle, entry) for each; null
/// handles and inactive persistent requests are skipped (the latter stay in the table). On an
/// invalid handle, every entry taken goes back.
fn take_all(rt: &Runtime, hs: &[Handle]) -> Result<Vec<(usize, Handle, ReqEntry)>, MpiError> {
    let mut out = Vec::with_capacity(hs.len());
    for (i, &h) in hs.iter().enumerate() {
        match take_one(rt, h) {
            Ok(Some(e)) => out.push((i, h, e)),
            Ok(None) => {}
            Err(e) => {
                for (_, h, entry) in out {
                    rt.put_request(h, entry);
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// Takes request `h` out of the table: `None` for `MPI_REQUEST_NULL` and for an inactive
/// persistent request (which stays in the table).
fn take_one(rt: &Runtime, h: Handle) -> Result<Option<ReqEntry>, MpiError> {
    if h == abi::REQUEST_NULL {
        return Ok(None);
    }
    let e = rt.take_request(h)?;
    if e.inactive() {
        rt.put_request(h, e);
        return Ok(None);
    }
    Ok(Some(e))
}

mpi_fn! {
    /// `MPI_Wait`.
    MPI_Wait / PMPI_Wait(request: *mut Handle, status: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: `request` is the caller's handle.
        let h = unsafe { request.as_mut() }
            .ok_or_else(|| MpiError::new(err::REQUEST, "request is NULL"))?;
        if crate::greq::is_greq(*h) {
            // The query function fills the caller's status itself.
            let mut ignored = MpiStatus::empty();
            let out = if status as usize == abi::STATUS_IGNORE {
                &mut ignored
            } else {
                // SAFETY: `status` is the caller's status (or NULL), not MPI_STATUS_IGNORE.
                unsafe { status.as_mut() }.unwrap_or(&mut ignored)
            };
            let code = crate::greq::wait(*h, out, rt.serial())?;
            *h = abi::REQUEST_NULL;
            return code_error(code, abi::COMM_WORLD);
        }
        let Some(e) = take_one(rt, *h)? else {
            // SAFETY: `status` is the caller's status or MPI_STATUS_IGNORE.
            unsafe { write_status(status, MpiStatus::empty()) };
            return Ok(());
        };
        let mut e = e;
        let comm = e.meta.comm();
        let s = wait_entry(&mut e);
        *h = retire(rt, *h, e);
        // SAFETY: as above.
        unsafe { write_status(status, s) };
        status_error(&s, comm)
    }
}

mpi_fn! {
    /// `MPI_Test`.
    MPI_Test / PMPI_Test(request: *mut Handle, flag: *mut c_int, status: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: `request` and `flag` are the caller's.
        let (h, flag) = unsafe { (request.as_mut(), flag.as_mut()) };
        let (Some(h), Some(flag)) = (h, flag) else {
            return Err(MpiError::new(err::ARG, "request or flag is NULL"));
        };
        if crate::greq::is_greq(*h) {
            match crate::greq::test(*h)? {
                crate::greq::Tested::Pending => {
                    *flag = 0;
                    return Ok(());
                }
                crate::greq::Tested::Done(s) => {
                    *flag = 1;
                    *h = abi::REQUEST_NULL;
                    // SAFETY: the caller's status or MPI_STATUS_IGNORE.
                    unsafe { write_status(status, s) };
                    return status_error(&s, abi::COMM_WORLD);
                }
                crate::greq::Tested::Attached => {}
            }
        }
        let Some(e) = take_one(rt, *h)? else {
            *flag = 1;
            // SAFETY: the caller's status or MPI_STATUS_IGNORE.
            unsafe { write_status(status, MpiStatus::empty()) };
            return Ok(());
        };
        let mut e = e;
        let comm = e.meta.comm();
        match test_entry(&mut e) {
            None => {
                rt.put_request(*h, e);
                *flag = 0;
                Ok(())
            }
            Some(s) => {
                *flag = 1;
                *h = retire(rt, *h, e);
                // SAFETY: as above.
                unsafe { write_status(status, s) };
                status_error(&s, comm)
            }
        }
    }
}

/// Runs `wait_all`/`test_all` on the requests of `hs`; `Ok(false)` when `blocking` is false and
/// not all are complete (the requests stay active).
///
/// # Safety
///
/// `statuses` is `MPI_STATUSES_IGNORE` or an array of `hs.len()` writable statuses.
unsafe fn all(
    rt: &Runtime,
    hs: &mut [Handle],
    statuses: *mut MpiStatus,
    blocking: bool,
) -> Result<bool, MpiError> {
    let taken = take_all(rt, hs)?;
    let mut reqs: Vec<Request> = Vec::with_capacity(taken.len());
    let mut metas = Vec::with_capacity(taken.len());
    for (i, h, mut e) in taken {
        reqs.push(std::mem::take(&mut e.req));
        metas.push((i, h, e));
    }
    let mut sts = Vec::with_capacity(reqs.len());
    if blocking {
        let _ = request::wait_all(&mut reqs, Some(&mut sts));
    } else if let Ok(false) = request::test_all(&mut reqs, Some(&mut sts)) {
        for (req, (_, h, mut e)) in reqs.into_iter().zip(metas) {
            e.req = req;
            rt.put_request(h, e);
        }
        return Ok(false);
    }
    let mut out = vec![MpiStatus::empty(); hs.len()];
    let mut failed: Option<Handle> = None;
    for ((i, h, e), st) in metas.into_iter().zip(&sts) {
        let s = complete(&e.meta, st);
        if s.error != abi::SUCCESS && failed.is_none() {
            failed = Some(e.meta.comm());
        }
        out[i] = s;
        hs[i] = retire(rt, h, e);
    }
    for (i, s) in out.into_iter().enumerate() {
        // SAFETY: the caller guarantees `hs.len()` statuses or MPI_STATUSES_IGNORE.
        unsafe { write_status_at(statuses, i, s) };
    }
    match failed {
        None => Ok(true),
        Some(comm) => Err(MpiError::new(
            err::IN_STATUS,
            "one or more requests failed; see their statuses",
        )
        .on(comm)),
    }
}

mpi_fn! {
    /// `MPI_Waitall`.
    MPI_Waitall / PMPI_Waitall(count: c_int, requests: *mut Handle, statuses: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's array of `count` handles.
        let hs = unsafe { handles(requests, count) }?;
        // SAFETY: the caller's statuses.
        unsafe { all(rt, hs, statuses, true) }.map(|_| ())
    }
}

mpi_fn! {
    /// `MPI_Testall`.
    MPI_Testall / PMPI_Testall(count: c_int, requests: *mut Handle, flag: *mut c_int, statuses: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's array of `count` handles.
        let hs = unsafe { handles(requests, count) }?;
        // SAFETY: the caller's flag.
        let flag = unsafe { flag.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "flag is NULL"))?;
        // SAFETY: the caller's statuses.
        match unsafe { all(rt, hs, statuses, false) } {
            Ok(done) => {
                *flag = c_int::from(done);
                Ok(())
            }
            Err(e) => {
                *flag = 1;
                Err(e)
            }
        }
    }
}

/// What a `*any` call found.
enum Any {
    /// One request completed.
    Completed(Completed),
    /// Active requests remain, none complete (only when not blocking).
    Pending,
    /// No request of the array is active (null or inactive persistent handles only).
    AllNull,
}

/// Waits for (or tests) any one of the requests of `hs`: the one completed,
/// [`Any::AllNull`] when no request is active, or (`blocking == false`) [`Any::Pending`] when
/// none is complete.
fn any(rt: &Runtime, hs: &mut [Handle], blocking: bool) -> Result<Any, MpiError> {
    let mut taken = take_all(rt, hs)?;
    if taken.is_empty() {
        return Ok(Any::AllNull);
    }
    // A request with MPI_PROC_NULL is complete already.
    if let Some(k) = taken
        .iter()
        .position(|(_, _, e)| matches!(e.meta, Meta::ProcNull { .. }))
    {
        let (i, h, e) = taken.remove(k);
        for (_, h, e) in taken {
            rt.put_request(h, e);
        }
        let status = complete(&e.meta, &Status::empty());
        let comm = e.meta.comm();
        hs[i] = retire(rt, h, e);
        return Ok(Any::Completed(Completed {
            index: i,
            status,
            comm,
        }));
    }
    let mut reqs: Vec<Request> = Vec::with_capacity(taken.len());
    let mut metas = Vec::with_capacity(taken.len());
    for (i, h, mut e) in taken {
        reqs.push(std::mem::take(&mut e.req));
        metas.push((i, h, e));
    }
    let got = if blocking {
        request::wait_any(&mut reqs)
    } else {
        request::test_any(&mut reqs)
    };
    let (done, got, mut result) = match got {
        AnyOutcome::Completed(k, result) => (Some(k), Some(result), Any::Pending),
        AnyOutcome::Pending => (None, None, Any::Pending),
        AnyOutcome::AllNull => (None, None, Any::AllNull),
    };
    for (k, (req, (i, h, mut e))) in reqs.into_iter().zip(metas).enumerate() {
        if Some(k) != done {
            e.req = req;
            rt.put_request(h, e);
            continue;
        }
        let status = match &got {
            Some(Ok(st)) => complete(&e.meta, st),
            Some(Err(re)) => {
                e.meta.deliver();
                let mut s = e.meta.status(&Status::empty());
                s.error = request_class(re);
                s
            }
            None => MpiStatus::empty(),
        };
        let comm = e.meta.comm();
        hs[i] = retire(rt, h, e);
        result = Any::Completed(Completed {
            index: i,
            status,
            comm,
        });
    }
    Ok(result)
}

/// The request a `*any` call completed.
struct Completed {
    /// Its index in the caller's array.
    index: usize,
    /// Its status.
    status: MpiStatus,
    /// Its communicator (for the error handler).
    comm: Handle,
}

mpi_fn! {
    /// `MPI_Waitany`.
    MPI_Waitany / PMPI_Waitany(count: c_int, requests: *mut Handle, index: *mut c_int, status: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's array of `count` handles.
        let hs = unsafe { handles(requests, count) }?;
        // SAFETY: the caller's index.
        let index = unsafe { index.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "index is NULL"))?;
        let got = any(rt, hs, true)?;
        match got {
            // A blocking wait returns only once something completed or nothing is active.
            Any::AllNull | Any::Pending => {
                *index = abi::UNDEFINED;
                // SAFETY: the caller's status.
                unsafe { write_status(status, MpiStatus::empty()) };
                Ok(())
            }
            Any::Completed(Completed { index: i, status: s, comm }) => {
                *index = i as c_int;
                // SAFETY: the caller's status.
                unsafe { write_status(status, s) };
                status_error(&s, comm)
            }
        }
    }
}

mpi_fn! {
    /// `MPI_Testany`.
    MPI_Testany / PMPI_Testany(count: c_int, requests: *mut Handle, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's array of `count` handles.
        let hs = unsafe { handles(requests, count) }?;
        // SAFETY: the caller's index and flag.
        let (index, flag) = unsafe { (index.as_mut(), flag.as_mut()) };
        let (Some(index), Some(flag)) = (index, flag) else {
            return Err(MpiError::new(err::ARG, "index or flag is NULL"));
        };
        let got = any(rt, hs, false)?;
        match got {
            Any::Pending => {
                *index = abi::UNDEFINED;
                *flag = 0;
                Ok(())
            }
            // No active request (null or inactive persistent ones only): flag true, index
            // MPI_UNDEFINED, empty status.
            Any::AllNull => {
                *index = abi::UNDEFINED;
                *flag = 1;
                // SAFETY: the caller's status.
                unsafe { write_status(status, MpiStatus::empty()) };
                Ok(())
            }
            Any::Completed(Completed { index: i, status: s, comm }) => {
                *index = i as c_int;
                *flag = 1;
                // SAFETY: the caller's status.
                unsafe { write_status(status, s) };
                status_error(&s, comm)
            }
        }
    }
}

/// `MPI_Waitsome` / `MPI_Testsome`.
///
/// # Safety
///
/// `indices` holds room for `hs.len()` ints; `statuses` as for [`all`].
unsafe fn some(
    rt: &Runtime,
    hs: &mut [Handle],
    outcount: &mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
    blocking: bool,
) -> Result<(), MpiError> {
    let taken = take_all(rt, hs)?;
    if taken.is_empty() {
        *outcount = abi::UNDEFINED;
        return Ok(());
    }
    let mut reqs: Vec<Request> = Vec::with_capacity(taken.len());
    let mut metas = Vec::with_capacity(taken.len());
    let mut any_proc_null = false;
    for (i, h, mut e) in taken {
        any_proc_null |= matches!(e.meta, Meta::ProcNull { .. });
        reqs.push(std::mem::take(&mut e.req));
        metas.push((i, h, e));
    }
    let mut idx = Vec::new();
    let mut sts = Vec::new();
    // Requests with MPI_PROC_NULL are complete already: do not block for the others then.
    let _ = if blocking && !any_proc_null {
        request::wait_some(&mut reqs, &mut idx, Some(&mut sts))
    } else {
        request::test_some(&mut reqs, &mut idx, Some(&mut sts))
    };
    let mut statuses_of: Vec<Option<Status>> = vec![None; metas.len()];
    for (k, st) in idx.into_iter().zip(sts) {
        statuses_of[k] = Some(st);
    }
    for (k, (_, _, e)) in metas.iter().enumerate() {
        if matches!(e.meta, Meta::ProcNull { .. }) {
            statuses_of[k] = Some(Status::empty());
        }
    }
    let mut failed = None;
    let mut n = 0;
    for ((req, (i, h, mut e)), st) in reqs.into_iter().zip(metas).zip(statuses_of) {
        let Some(st) = st else {
            e.req = req;
            rt.put_request(h, e);
            continue;
        };
        let s = complete(&e.meta, &st);
        if s.error != abi::SUCCESS && failed.is_none() {
            failed = Some(e.meta.comm());
        }
        hs[i] = retire(rt, h, e);
        if !indices.is_null() {
            // SAFETY: the caller's array has room for one index per request.
            unsafe { indices.add(n).write(i as c_int) };
        }
        // SAFETY: the caller's statuses, one per request at most.
        unsafe { write_status_at(statuses, n, s) };
        n += 1;
    }
    *outcount = n as c_int;
    match failed {
        None => Ok(()),
        Some(comm) => Err(MpiError::new(
            err::IN_STATUS,
            "one or more requests failed; see their statuses",
        )
        .on(comm)),
    }
}

mpi_fn! {
    /// `MPI_Waitsome`.
    MPI_Waitsome / PMPI_Waitsome(incount: c_int, requests: *mut Handle, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's array of `incount` handles.
        let hs = unsafe { handles(requests, incount) }?;
        // SAFETY: the caller's outcount.
        let outcount = unsafe { outcount.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "outcount is NULL"))?;
        // SAFETY: the caller's arrays.
        unsafe { some(rt, hs, outcount, indices, statuses, true) }
    }
}

mpi_fn! {
    /// `MPI_Testsome`.
    MPI_Testsome / PMPI_Testsome(incount: c_int, requests: *mut Handle, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's array of `incount` handles.
        let hs = unsafe { handles(requests, incount) }?;
        // SAFETY: the caller's outcount.
        let outcount = unsafe { outcount.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "outcount is NULL"))?;
        // SAFETY: the caller's arrays.
        unsafe { some(rt, hs, outcount, indices, statuses, false) }
    }
}

mpi_fn! {
    /// `MPI_Request_free`: the operation goes on; the handle becomes `MPI_REQUEST_NULL`.
    /// A freed receive does not deliver its message into the caller's buffer.
    MPI_Request_free / PMPI_Request_free(request: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's handle.
        let h = unsafe { request.as_mut() }.ok_or_else(|| MpiError::new(err::REQUEST, "request is NULL"))?;
        if *h == abi::REQUEST_NULL {
            return Err(MpiError::new(err::REQUEST, "the request is MPI_REQUEST_NULL"));
        }
        if crate::greq::is_greq(*h) {
            crate::greq::request_free(*h)?;
            *h = abi::REQUEST_NULL;
            return Ok(());
        }
        let e = rt.take_request(*h)?;
        crate::part::forget(*h);
        *h = abi::REQUEST_NULL;
        if let Meta::Recv { buf, .. } = &e.meta {
            // Nothing is written to the caller's buffer after it was freed.
            buf.detach();
        }
        e.req.free().map_err(MpiError::from)
    }
}

mpi_fn! {
    /// `MPI_Request_get_status`: the status of a complete request, which stays active.
    MPI_Request_get_status / PMPI_Request_get_status(request: Handle, flag: *mut c_int, status: *mut MpiStatus) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's flag.
        let flag = unsafe { flag.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "flag is NULL"))?;
        if crate::greq::is_greq(request) {
            let Some(s) = crate::greq::get_status(request)? else {
                *flag = 0;
                return Ok(());
            };
            *flag = 1;
            // SAFETY: the caller's status.
            unsafe { write_status(status, s) };
            return if s.error == abi::SUCCESS {
                Ok(())
            } else {
                Err(MpiError::new(s.error, "the request failed"))
            };
        }
        let Some(e) = take_one(rt, request)? else {
            *flag = 1;
            // SAFETY: the caller's status.
            unsafe { write_status(status, MpiStatus::empty()) };
            return Ok(());
        };
        let got = e.req.get_status();
        let out = match &got {
            Ok(None) => None,
            Ok(Some(st)) => Some(complete(&e.meta, st)),
            Err(re) => {
                e.meta.deliver();
                let mut s = e.meta.status(&Status::empty());
                s.error = request_class(re);
                Some(s)
            }
        };
        rt.put_request(request, e);
        match out {
            None => {
                *flag = 0;
                Ok(())
            }
            Some(s) => {
                *flag = 1;
                // SAFETY: the caller's status.
                unsafe { write_status(status, s) };
                if s.error == abi::SUCCESS {
                    Ok(())
                } else {
                    Err(MpiError::new(s.error, "the request failed"))
                }
            }
        }
    }
}

mpi_fn! {
    /// `MPI_Cancel`: asks the agent to cancel the request (a pending receive, a generalized
    /// request's cancel function); complete it with a wait or test as usual.
    MPI_Cancel / PMPI_Cancel(request: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's handle.
        let h = unsafe { request.as_ref() }.ok_or_else(|| MpiError::new(err::REQUEST, "request is NULL"))?;
        if crate::greq::is_greq(*h) {
            return crate::greq::cancel(*h);
        }
        let e = rt.take_request(*h)?;
        let r = e.req.cancel();
        rt.put_request(*h, e);
        r.map_err(MpiError::from)
    }
}

mpi_fn! {
    /// `MPI_Test_cancelled`.
    MPI_Test_cancelled / PMPI_Test_cancelled(status: *const MpiStatus, flag: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's status and flag.
        let (s, f) = unsafe { (status.as_ref(), flag.as_mut()) };
        let (Some(s), Some(f)) = (s, f) else {
            return Err(MpiError::new(err::ARG, "status or flag is NULL"));
        };
        *f = c_int::from(s.cancelled());
        Ok(())
    }
}
