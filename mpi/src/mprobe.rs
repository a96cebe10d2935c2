//! Matched probe (`MPI_Mprobe`, `MPI_Improbe`, `MPI_Mrecv`, `MPI_Imrecv`) and the
//! nonblocking send-receive (`MPI_Isendrecv`, `MPI_Isendrecv_replace`).
//!
//! A matched probe takes the message out of matching in the agent ([`Agent::mprobe`]): no
//! other probe or receive, of this thread or another, can match it any more; the program
//! receives it through its `MPI_Message` handle. The handles are kept in a table of their own,
//! with the kind bits of MPICH's request handles (`0xac..`, where `MPI_MESSAGE_NULL` is
//! `0x2c000000` and `MPI_MESSAGE_NO_PROC` `0x6c000000`).
//!
//! [`Agent::mprobe`]: viaduct_agent::agent::Agent::mprobe

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use viaduct_agent::matching::Source;
use viaduct_agent::p2p::Message;
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{
    BoxError, ClassOps, ClassRequest, QueryStatus, Request, RequestClass, RequestError, Status,
};

use crate::abi::{self, Handle, MpiStatus, err};
use crate::error::MpiError;
use crate::p2p::{
    Data, Mode, POOL_MIN, UserMem, data_of, proc_null_status, recv_tag, source_rank, start_send,
    take_pooled,
};
use crate::request::{Meta, write_status};
use crate::state::{CommEntry, HandleTable, ReqEntry, rt};

/// `MPI_MESSAGE_NULL`.
pub const MESSAGE_NULL: Handle = 0x2c00_0000;
/// `MPI_MESSAGE_NO_PROC`: the message of a matched probe of `MPI_PROC_NULL`.
pub const MESSAGE_NO_PROC: Handle = 0x6c00_0000;
/// The kind bits of the handles of matched messages.
const MESSAGE_KIND: u32 = 0xac00_0000;

/// A matched message: the agent's handle and its communicator.
struct Matched {
    message: Message,
    comm: Handle,
    entry: Arc<CommEntry>,
}

fn table() -> &'static HandleTable<Matched> {
    static T: OnceLock<HandleTable<Matched>> = OnceLock::new();
    T.get_or_init(HandleTable::default)
}

/// Puts a matched message in the table; returns its handle.
fn add(m: Matched) -> Handle {
    static NEXT: AtomicI32 = AtomicI32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) as u32 & 0x03ff_ffff;
    let h = (MESSAGE_KIND | n) as Handle;
    table().insert(h, m);
    h
}

/// The status of a matched message (ranks of its communicator).
fn status_of(c: &CommEntry, m: &Message) -> MpiStatus {
    let mut s = MpiStatus {
        source: c
            .rank_of_world(m.source())
            .map_or(abi::ANY_SOURCE, |r| r as c_int),
        tag: m.tag() as c_int,
        ..MpiStatus::default()
    };
    s.set_count(m.len() as i64);
    s
}

/// One matched probe; `Ok(None)` when nothing matches (nonblocking) . Writes the message
/// handle and status.
///
/// # Safety
///
/// `message` is writable, `status` is a status or `MPI_STATUS_IGNORE`.
unsafe fn matched_probe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    message: *mut Handle,
    status: *mut MpiStatus,
    block: bool,
) -> Result<bool, MpiError> {
    let rt = rt()?;
    let c = rt.comm_any(comm)?;
    let tag = recv_tag(tag)?;
    let src = source_rank(&c, source)?;
    // SAFETY: the caller's message handle.
    let out = unsafe { message.as_mut() }
        .ok_or_else(|| MpiError::new(err::ARG, "the message argument is NULL"))?;
    let Some(src) = src else {
        *out = MESSAGE_NO_PROC;
        // SAFETY: the caller's status.
        unsafe { write_status(status, proc_null_status()) };
        return Ok(true);
    };
    let world = match src {
        Source::Any => Source::Any,
        Source::Rank(r) => Source::Rank(c.comm.world_rank(r).unwrap_or(r)),
    };
    let agent = c.comm.agent();
    let found = if block {
        Some(agent.mprobe(world, tag, None)?)
    } else {
        agent.improbe(world, tag)?
    };
    let Some(m) = found else {
        return Ok(false);
    };
    let s = status_of(&c, &m);
    *out = add(Matched {
        message: m,
        comm,
        entry: c,
    });
    // SAFETY: the caller's status.
    unsafe { write_status(status, s) };
    Ok(true)
}

mpi_fn! {
    /// `MPI_Mprobe`.
    MPI_Mprobe / PMPI_Mprobe(source: c_int, tag: c_int, comm: Handle, message: *mut Handle, status: *mut MpiStatus) on comm => {
        // SAFETY: the caller's handle and status.
        unsafe { matched_probe(source, tag, comm, message, status, true) }.map(|_| ())
    }
}

mpi_fn! {
    /// `MPI_Improbe`.
    MPI_Improbe / PMPI_Improbe(source: c_int, tag: c_int, comm: Handle, flag: *mut c_int, message: *mut Handle, status: *mut MpiStatus) on comm => {
        if flag.is_null() {
            return Err(MpiError::new(err::ARG, "flag is NULL"));
        }
        // SAFETY: the caller's handle and status.
        let found = unsafe { matched_probe(source, tag, comm, message, status, false) }?;
        // SAFETY: the caller's flag, checked above.
        unsafe { *flag = c_int::from(found) };
        Ok(())
    }
}

/// Starts receiving matched message `*message` into `buf`; sets `*message` to
/// `MPI_MESSAGE_NULL`. Returns the request and what its completion does.
///
/// # Safety
///
/// `message` is writable; `buf` holds room for `count` elements of `datatype` until the
/// request completes.
unsafe fn start_mrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    message: *mut Handle,
) -> Result<(Request, Meta), MpiError> {
    rt()?;
    // SAFETY: the caller's message handle.
    let h = unsafe { message.as_mut() }
        .ok_or_else(|| MpiError::new(err::ARG, "the message argument is NULL"))?;
    let data = data_of(count, datatype)?;
    match *h {
        MESSAGE_NULL => {
            return Err(MpiError::new(
                err::REQUEST,
                "the message is MPI_MESSAGE_NULL (received already, or never matched)",
            ));
        }
        MESSAGE_NO_PROC => {
            *h = MESSAGE_NULL;
            return Ok((
                Request::null(),
                Meta::ProcNull {
                    comm: abi::COMM_WORLD,
                },
            ));
        }
        _ => {}
    }
    let (cap, unpack) = match data {
        Data::Bytes(len) => (len, None),
        Data::Packed(l, n, packed) => (packed, Some((l, n))),
    };
    // A null buffer with a datatype that unpacks is MPI_BOTTOM (absolute addresses).
    if cap > 0 && buf.is_null() && unpack.is_none() {
        return Err(MpiError::new(err::BUFFER, "the receive buffer is NULL"));
    }
    let m = table().remove(*h).ok_or_else(|| {
        MpiError::new(
            err::REQUEST,
            format!("{:#x} is not a matched message of this process", *h),
        )
    })?;
    *h = MESSAGE_NULL;
    let rbuf = if unpack.is_none() && cap > 0 {
        // SAFETY: the caller's buffer of `cap` bytes, left to the library until the request
        // completes (MPI's rule for a pending receive).
        RecvBuffer::caller(Box::new(unsafe { UserMem::new(buf, cap) }?))
    } else if cap >= POOL_MIN {
        take_pooled(cap)
    } else {
        RecvBuffer::new(cap)
    };
    let req = m.message.irecv_into(rbuf.clone())?;
    let meta = Meta::Recv {
        comm: m.comm,
        buf: rbuf,
        dst: buf as usize,
        cap,
        unpack,
        map: Some(m.entry),
    };
    Ok((req, meta))
}

mpi_fn! {
    /// `MPI_Imrecv`.
    MPI_Imrecv / PMPI_Imrecv(buf: *mut c_void, count: c_int, datatype: Handle, message: *mut Handle, request: *mut Handle) on abi::COMM_WORLD => {
        if request.is_null() {
            return Err(MpiError::new(err::ARG, "request is NULL"));
        }
        // SAFETY: the caller's buffer and message handle.
        let (req, meta) = unsafe { start_mrecv(buf, count, datatype, message) }?;
        let h = rt()?.add_request(ReqEntry::new(req, meta));
        // SAFETY: the caller's request handle, checked above.
        unsafe { *request = h };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Mrecv`.
    MPI_Mrecv / PMPI_Mrecv(buf: *mut c_void, count: c_int, datatype: Handle, message: *mut Handle, status: *mut MpiStatus) on abi::COMM_WORLD => {
        // SAFETY: the caller's buffer and message handle.
        let (req, meta) = unsafe { start_mrecv(buf, count, datatype, message) }?;
        let comm = meta.comm();
        let mut h = rt()?.add_request(ReqEntry::new(req, meta));
        // SAFETY: a handle of this frame; the caller's status.
        let code = unsafe { crate::request::PMPI_Wait(&mut h, status) };
        if code != abi::SUCCESS {
            return Err(MpiError::new(code, "the matched receive failed").on(comm));
        }
        Ok(())
    }
}

/// The two halves of a nonblocking send-receive, tested by the class's `poll`.
struct PairState {
    /// The send (null once complete or for `MPI_PROC_NULL`), the receive, and the receive's
    /// status once complete.
    parts: Mutex<Pair>,
}

/// What a nonblocking send-receive sends.
enum Outgoing {
    /// `count` elements of `datatype` in the caller's buffer.
    Caller {
        buf: *const c_void,
        count: c_int,
        datatype: Handle,
    },
    /// Bytes handed to the agent (`MPI_Isendrecv_replace`'s copy), which owns them until sent.
    Owned(Vec<u8>),
}

struct Pair {
    send: Request,
    recv: Request,
    recv_status: Option<Status>,
    failed: Option<RequestError>,
}

/// The request class of nonblocking send-receives: complete when both halves are.
struct PairOps;

impl ClassOps for PairOps {
    type State = PairState;

    fn query(&self, state: &PairState, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        let p = state.parts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(st) = &p.recv_status {
            status.set_source(st.source());
            status.set_tag(st.tag());
            status.set_count(st.count());
        }
        Ok(())
    }

    fn poll(&self, request: &ClassRequest<'_, PairState>) -> Result<(), BoxError> {
        let mut p = request
            .state()
            .parts
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let p = &mut *p;
        for (i, r) in [&mut p.send, &mut p.recv].into_iter().enumerate() {
            if r.is_null() {
                continue;
            }
            match r.test() {
                Ok(None) => {}
                Ok(Some(st)) => {
                    if i == 1 {
                        p.recv_status = Some(st);
                    }
                    *r = Request::null();
                }
                Err(e) => {
                    if p.failed.is_none() {
                        p.failed = Some(e);
                    }
                    *r = Request::null();
                }
            }
        }
        if p.send.is_null() && p.recv.is_null() {
            match p.failed.take() {
                Some(e) => {
                    let _ = request.fail(e);
                }
                None => {
                    let _ = request.complete();
                }
            }
        }
        Ok(())
    }

    fn wait(
        &self,
        requests: &[ClassRequest<'_, PairState>],
        timeout: Duration,
    ) -> Result<(), BoxError> {
        let _ = requests;
        if let Ok(rt) = rt() {
            rt.agent
                .make_progress_blocking(timeout.min(Duration::from_millis(1)));
        }
        Ok(())
    }
}

fn pairs() -> &'static RequestClass<PairOps> {
    static C: OnceLock<RequestClass<PairOps>> = OnceLock::new();
    C.get_or_init(|| RequestClass::new(PairOps))
}

/// Starts a nonblocking send-receive.
///
/// # Safety
///
/// The caller's buffers, valid until the request completes.
#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv(
    out: Outgoing,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> Result<(), MpiError> {
    if request.is_null() {
        return Err(MpiError::new(err::ARG, "request is NULL"));
    }
    let rt = rt()?;
    let c = rt.comm_any(comm)?;
    // Check every argument before anything starts.
    if let Outgoing::Caller {
        count, datatype, ..
    } = &out
    {
        data_of(*count, *datatype)?;
    }
    let tag = crate::p2p::send_tag(sendtag)?;
    let to = crate::p2p::dest_rank(&c, dest)?;
    // SAFETY: the caller's receive buffer.
    let (recv, meta) =
        unsafe { crate::p2p::post_recv(recvbuf, recvcount, recvtype, source, recvtag, comm) }?;
    let sent = match out {
        Outgoing::Caller {
            buf,
            count,
            datatype,
        } => {
            // SAFETY: the caller's send buffer.
            unsafe { start_send(buf, count, datatype, dest, sendtag, comm, Mode::Standard) }
        }
        Outgoing::Owned(v) => match to {
            None => Ok(None),
            Some(d) => {
                let w = c.comm.world_rank(d).unwrap_or(d);
                c.comm
                    .agent()
                    .isend_owned(w, tag, v)
                    .map(Some)
                    .map_err(MpiError::from)
            }
        },
    };
    let send = match sent {
        Ok(s) => s.unwrap_or_else(Request::null),
        Err(e) => {
            let _ = recv.cancel();
            return Err(e);
        }
    };
    let (req, _complete) = pairs().start(PairState {
        parts: Mutex::new(Pair {
            send,
            recv,
            recv_status: None,
            failed: None,
        }),
    });
    let h = rt.add_request(ReqEntry::new(req, meta));
    // SAFETY: the caller's request handle, checked above.
    unsafe { *request = h };
    Ok(())
}

mpi_fn! {
    /// `MPI_Isendrecv`.
    MPI_Isendrecv / PMPI_Isendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, source: c_int, recvtag: c_int, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's buffers and handle.
        unsafe {
            let out = Outgoing::Caller { buf: sendbuf, count: sendcount, datatype: sendtype };
            isendrecv(out, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Isendrecv_replace`: the data sent is copied first, the message received lands in
    /// the buffer.
    MPI_Isendrecv_replace / PMPI_Isendrecv_replace(buf: *mut c_void, count: c_int, datatype: Handle, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: Handle, request: *mut Handle) on comm => {
        // The data sent is copied first (packed for a datatype with holes) and sent as bytes;
        // the receive unpacks into the buffer with the datatype.
        let copy = match data_of(count, datatype)? {
            // SAFETY: the caller's buffer of `count` elements of `datatype`.
            Data::Bytes(len) => unsafe { crate::datatype::input(buf, len) }?.to_vec(),
            Data::Packed(l, n, packed) => {
                // A null buffer is MPI_BOTTOM: the datatype holds absolute addresses.
                let mut v = Vec::with_capacity(packed);
                // SAFETY: the caller's buffer of `count` elements of the datatype.
                unsafe { l.pack(buf.cast(), n, &mut v) };
                v
            }
        };
        // SAFETY: the caller's buffer receives; the agent owns the copy it sends.
        unsafe {
            isendrecv(Outgoing::Owned(copy), dest, sendtag, buf, count, datatype, source, recvtag, comm, request)
        }
    }
}
