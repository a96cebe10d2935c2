//! Point-to-point: `MPI_Send`, `MPI_Ssend`, `MPI_Rsend`, `MPI_Bsend`, their `I` forms,
//! `MPI_Recv`, `MPI_Irecv`, `MPI_Sendrecv`, `MPI_Sendrecv_replace`, `MPI_Probe`,
//! `MPI_Iprobe`, `MPI_Get_count`, `MPI_Get_elements`, on the agent's communicators.
//!
//! Contiguous datatypes move as the caller's bytes; datatypes with holes (derived ones, and the
//! pair types with padding) are packed into their data bytes for the message and unpacked at
//! the receiver.
//!
//! Contiguous data moves without copies at this layer: a send longer than the agent's eager
//! limit (`MPI_Send`, `MPI_Isend`, `MPI_Issend`, `MPI_Rsend`, persistent sends) hands the
//! agent a reference to the caller's buffer ([`UserBytes`]), read in place until the request
//! completes; a receive (`MPI_Irecv`, a long `MPI_Recv`) lands straight in the caller's
//! buffer ([`UserMem`], [`RecvBuffer::caller`]). Both rest on MPI's rule that the buffer of a
//! pending operation is left to the library until the request completes. Short sends, the
//! buffered modes (`MPI_Bsend`, `MPI_Ibsend`, which the caller may reuse at once) and packed
//! datatypes copy.

use std::ffi::{c_int, c_void};

use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::Request;

use crate::abi::{self, Handle, MpiStatus, dt, err};
use std::sync::Arc;

use crate::datatype::{bytes, input, output};
use crate::error::MpiError;
use crate::request::{Meta, write_status};
use crate::state::{CommEntry, ReqEntry, rt};
use crate::types::Layout;

/// The caller's send buffer, shared with the agent until the send request completes.
pub struct UserBytes {
    ptr: *const u8,
    len: usize,
}

// SAFETY: MPI (4.1 §3.7.2, "the sender should not modify any part of the send buffer after a
// nonblocking send operation is called, until the send completes"; a blocking send's buffer is
// the caller's until the call returns, which waits for the request) leaves these bytes unchanged
// and allocated until the request completes. The agent reads them from any thread, only while
// the request is pending (see `Agent::isend_shared`).
unsafe impl Send for UserBytes {}
// SAFETY: as for `Send`: shared reads only, of bytes nothing writes while the request pends.
unsafe impl Sync for UserBytes {}

impl UserBytes {
    /// `len` bytes at `ptr` (not null unless `len` is 0).
    ///
    /// # Safety
    ///
    /// The bytes stay readable and unchanged until the send request made with them
    /// completes (MPI's rule for the send buffer).
    unsafe fn new(ptr: *const c_void, len: usize) -> Result<UserBytes, MpiError> {
        if len > 0 && ptr.is_null() {
            return Err(MpiError::new(err::BUFFER, "the send buffer is NULL"));
        }
        Ok(UserBytes {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl AsRef<[u8]> for UserBytes {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `new`'s contract: `len` readable bytes at the non-null `ptr`, unchanged
        // while the send pends, the only time the agent reads them (MPI 4.1 §3.7.2).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The caller's receive buffer, written in place by the agent until the receive completes.
pub struct UserMem {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: MPI (4.1 §3.7.2, "the receiver should not access any part of the receive buffer
// after a nonblocking receive operation is called, until the receive completes") leaves the
// buffer to the library until the request completes; the agent writes it from any thread
// while the receive pends, and a freed receive detaches it first (`MPI_Request_free`).
unsafe impl Send for UserMem {}
// SAFETY: a shared `&UserMem` only reads (`AsRef`): the broadcast in place sends a rank's buffer
// on to its children from it after the message landed, while the library holds the buffer
// (until `MPI_Bcast` returns) and nothing writes it.
unsafe impl Sync for UserMem {}

impl UserMem {
    /// `len` bytes at `ptr` (not null unless `len` is 0).
    ///
    /// # Safety
    ///
    /// The bytes stay writable, and untouched by anyone else, until the receive made with
    /// them completes or its buffer is detached (MPI's rule for the receive buffer).
    pub(crate) unsafe fn new(ptr: *mut c_void, len: usize) -> Result<UserMem, MpiError> {
        if len > 0 && ptr.is_null() {
            return Err(MpiError::new(err::BUFFER, "the buffer is NULL"));
        }
        Ok(UserMem {
            ptr: ptr.cast(),
            len,
        })
    }
}

impl AsRef<[u8]> for UserMem {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `new`'s contract: `len` bytes at the non-null `ptr`, the library's while the
        // operation pends; read here only while nothing writes them (see `Sync`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl AsMut<[u8]> for UserMem {
    fn as_mut(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: `new`'s contract: `len` writable bytes at the non-null `ptr`, left to the
        // library while the receive pends (MPI 4.1 §3.7.2); `&mut self` makes this the one
        // view of them.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// The destination rank: `None` for `MPI_PROC_NULL`.
pub fn dest_rank(c: &CommEntry, dest: c_int) -> Result<Option<u32>, MpiError> {
    if dest == abi::PROC_NULL {
        return Ok(None);
    }
    if dest < 0 || dest as u32 >= c.comm.size() {
        return Err(MpiError::new(
            err::RANK,
            format!(
                "rank {dest} is not in the communicator of {} ranks",
                c.comm.size()
            ),
        ));
    }
    Ok(Some(dest as u32))
}

/// The source a receive accepts (communicator ranks): `None` for `MPI_PROC_NULL`.
pub fn source_rank(c: &CommEntry, src: c_int) -> Result<Option<Source>, MpiError> {
    if src == abi::ANY_SOURCE {
        return Ok(Some(Source::Any));
    }
    Ok(dest_rank(c, src)?.map(Source::Rank))
}

/// A send tag: `0..=MPI_TAG_UB`.
pub fn send_tag(tag: c_int) -> Result<u32, MpiError> {
    if !(0..=abi::TAG_UB).contains(&tag) {
        return Err(MpiError::new(
            err::TAG,
            format!("tag {tag} is outside 0..={}", abi::TAG_UB),
        ));
    }
    Ok(tag as u32)
}

/// A receive tag: `MPI_ANY_TAG` or `0..=MPI_TAG_UB`.
pub fn recv_tag(tag: c_int) -> Result<TagMatch, MpiError> {
    if tag == abi::ANY_TAG {
        return Ok(TagMatch::Any);
    }
    send_tag(tag).map(TagMatch::Tag)
}

/// The status of an operation with `MPI_PROC_NULL`.
pub(crate) fn proc_null_status() -> MpiStatus {
    MpiStatus {
        source: abi::PROC_NULL,
        tag: abi::ANY_TAG,
        ..MpiStatus::default()
    }
}

/// The protocol of a send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Standard (eager or rendezvous by size).
    Standard,
    /// Synchronous: completes once matched.
    Sync,
    /// Buffered (`MPI_Bsend`, `MPI_Ibsend`): a standard send whose data is copied, so that the
    /// caller may reuse the buffer at once.
    Buffered,
}

/// How `count` elements of a datatype move: as the caller's bytes, or packed.
pub(crate) enum Data {
    /// Contiguous: this many bytes at the caller's buffer.
    Bytes(usize),
    /// With holes: packed into (and unpacked from) this many bytes.
    Packed(Arc<Layout>, usize, usize),
}

pub(crate) fn data_of(count: c_int, datatype: Handle) -> Result<Data, MpiError> {
    let holes = matches!(
        datatype,
        dt::DOUBLE_INT | dt::LONG_INT | dt::SHORT_INT | dt::LONG_DOUBLE_INT
    );
    if !holes && !crate::types::is_derived(datatype) {
        return Ok(Data::Bytes(bytes(count, datatype)?));
    }
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("count {count} is negative"),
        ));
    }
    let l = crate::types::layout(datatype)?;
    let n = count as usize;
    let overflow = || MpiError::new(err::COUNT, format!("{count} elements overflow"));
    if l.contiguous() {
        return Ok(Data::Bytes(
            n.checked_mul(l.extent as usize).ok_or_else(overflow)?,
        ));
    }
    let packed = n.checked_mul(l.size).ok_or_else(overflow)?;
    Ok(Data::Packed(l, n, packed))
}

/// Starts a send; `None` for `MPI_PROC_NULL`.
///
/// # Safety
///
/// `buf` holds `count` elements of `datatype`.
pub(crate) unsafe fn start_send(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    mode: Mode,
) -> Result<Option<Request>, MpiError> {
    let rt = rt()?;
    let c = rt.comm_any(comm)?;
    let data = data_of(count, datatype)?;
    let tag = send_tag(tag)?;
    let Some(dest) = dest_rank(&c, dest)? else {
        return Ok(None);
    };
    let len = match data {
        Data::Bytes(len) => len,
        Data::Packed(l, n, packed) => {
            // A null buffer is MPI_BOTTOM: the datatype holds absolute addresses.
            let mut v = Vec::with_capacity(packed);
            // SAFETY: the caller's buffer of `count` elements of the datatype.
            unsafe { l.pack(buf.cast(), n, &mut v) };
            let w = c.comm.world_rank(dest).unwrap_or(dest);
            let req = match mode {
                Mode::Standard | Mode::Buffered => c.comm.agent().isend_owned(w, tag, v)?,
                Mode::Sync => c.comm.agent().issend(w, tag, &v)?,
            };
            return Ok(Some(req));
        }
    };
    let agent = c.comm.agent();
    if mode != Mode::Buffered && len > agent.config().eager_limit {
        // A rendezvous message: the agent reads the caller's buffer in place.
        // SAFETY: the caller's buffer of `len` bytes, left unchanged until the request
        // completes (MPI's rule for a pending send; a blocking send waits for it).
        let data = Arc::new(unsafe { UserBytes::new(buf, len) }?);
        let w = c.comm.world_rank(dest).unwrap_or(dest);
        let req = match mode {
            Mode::Sync => agent.issend_shared(w, tag, data)?,
            _ => agent.isend_shared(w, tag, data)?,
        };
        return Ok(Some(req));
    }
    // SAFETY: the caller's buffer of `count` elements.
    let data = unsafe { input(buf, len) }?;
    let req = match mode {
        Mode::Standard | Mode::Buffered => c.comm.isend(dest, tag, data)?,
        Mode::Sync => {
            let w = c.comm.world_rank(dest).unwrap_or(dest);
            c.comm.agent().issend(w, tag, data)?
        }
    };
    Ok(Some(req))
}

/// A blocking send.
///
/// # Safety
///
/// As for [`start_send`].
unsafe fn blocking_send(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    mode: Mode,
) -> Result<(), MpiError> {
    let contiguous = matches!(data_of(count, datatype)?, Data::Bytes(_));
    if mode == Mode::Standard && contiguous {
        let rt = rt()?;
        let c = rt.comm_any(comm)?;
        let len = bytes(count, datatype)?;
        if len > c.comm.agent().config().eager_limit {
            // SAFETY: the caller's buffer, unchanged until the wait below returns.
            if let Some(mut r) = unsafe { start_send(buf, count, datatype, dest, tag, comm, mode) }?
            {
                r.wait()?;
            }
            return Ok(());
        }
        let tag = send_tag(tag)?;
        let Some(dest) = dest_rank(&c, dest)? else {
            return Ok(());
        };
        // SAFETY: the caller's buffer of `count` elements.
        let data = unsafe { input(buf, len) }?;
        return c.comm.send(dest, tag, data).map_err(MpiError::from);
    }
    // SAFETY: passed on.
    if let Some(mut r) = unsafe { start_send(buf, count, datatype, dest, tag, comm, mode) }? {
        r.wait()?;
    }
    Ok(())
}

/// The size of an element of `t` when it is a predefined datatype without holes (MPICH's
/// handle names the size in bits 8..16; the pair types with padding are of another kind);
/// `None` for any other datatype (and `MPI_DATATYPE_NULL`).
#[inline(always)]
fn plain_size(t: Handle) -> Option<usize> {
    let u = t as u32;
    (u & 0xff00_0000 == 0x4c00_0000).then_some(((u >> 8) & 0xff) as usize)
}

/// `MPI_Send` in the common case: a predefined datatype, a valid count, tag and rank, a
/// message within the eager limit. `None`: not that case, nothing done (the full checks of
/// [`blocking_send`] then name the error, or take the other paths).
///
/// # Safety
///
/// As for [`start_send`].
#[inline(always)]
unsafe fn send_fast(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> Option<Result<(), MpiError>> {
    let size = plain_size(datatype)?;
    if count < 0 || !(0..=abi::TAG_UB).contains(&tag) {
        return None;
    }
    let c = rt().ok()?.comm_ref(comm).ok()?;
    // At most (2^31 - 1) * 255 bytes: no overflow.
    let len = count as usize * size;
    if dest < 0
        || dest as u32 >= c.comm.size()
        || len > c.comm.agent().config().eager_limit
        || (len > 0 && buf.is_null())
    {
        return None;
    }
    let data = if len == 0 {
        &[][..]
    } else {
        // SAFETY: the caller's buffer of `count` elements of `len` bytes in all, not NULL.
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) }
    };
    Some(match c.comm.send(dest as u32, tag as u32, data) {
        Ok(()) => Ok(()),
        Err(e) => Err(agent_error(e)),
    })
}

/// An agent error as the MPI error it is (out of the way of the fast paths).
#[cold]
#[inline(never)]
fn agent_error(e: AgentError) -> MpiError {
    MpiError::from(e)
}

/// The status of a receive from `source` with `tag` into `cap` bytes that failed with `e`,
/// written to `status` unless ignored; the error, as an MPI error.
///
/// # Safety
///
/// As for [`recv_fast`].
#[cold]
#[inline(never)]
unsafe fn recv_failed(
    e: AgentError,
    source: c_int,
    tag: c_int,
    cap: usize,
    status: *mut MpiStatus,
) -> MpiError {
    let e = MpiError::from(e);
    let mut s = MpiStatus {
        source,
        tag,
        error: e.class,
        ..MpiStatus::default()
    };
    s.set_count(cap as i64);
    // SAFETY: the caller's status, MPI_STATUS_IGNORE or NULL.
    unsafe { write_status(status, s) };
    e
}

/// `MPI_Recv` in the common case: a predefined datatype, a valid count, a given source rank
/// and tag, room within the eager limit; writes the caller's status (also on an error of the
/// receive, as [`blocking_recv`]'s caller does). `None`: not that case, nothing done.
///
/// # Safety
///
/// `buf` holds room for `count` elements of `datatype`; `status` is the caller's status,
/// `MPI_STATUS_IGNORE` or NULL.
#[inline(always)]
unsafe fn recv_fast(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MpiStatus,
) -> Option<Result<(), MpiError>> {
    let size = plain_size(datatype)?;
    if count < 0 || !(0..=abi::TAG_UB).contains(&tag) {
        return None;
    }
    let c = rt().ok()?.comm_ref(comm).ok()?;
    let cap = count as usize * size;
    if source < 0
        || source as u32 >= c.comm.size()
        || cap > c.comm.agent().config().eager_limit
        || (cap > 0 && buf.is_null())
    {
        return None;
    }
    let out = if cap == 0 {
        &mut [][..]
    } else {
        // SAFETY: the caller's buffer of room for `cap` bytes, not NULL.
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) }
    };
    let (r, t) = (source as u32, tag as u32);
    match c.comm.recv(out, Source::Rank(r), TagMatch::Tag(t)) {
        Ok(st) => {
            if status as usize != abi::STATUS_IGNORE && !status.is_null() {
                let mut s = MpiStatus {
                    source: st.source().unwrap_or(r) as c_int,
                    tag: st.tag().unwrap_or(t) as c_int,
                    ..MpiStatus::default()
                };
                s.set_count(st.count() as i64);
                // SAFETY: the caller's status, neither MPI_STATUS_IGNORE nor NULL.
                unsafe { write_status(status, s) };
            }
            Some(Ok(()))
        }
        // SAFETY: the caller's status (or MPI_STATUS_IGNORE or NULL).
        Err(e) => Some(Err(unsafe { recv_failed(e, source, tag, cap, status) })),
    }
}

/// Registers a started send as a request; writes its handle.
///
/// # Safety
///
/// `request` is the caller's writable handle.
unsafe fn give_send(
    req: Option<Request>,
    comm: Handle,
    request: *mut Handle,
) -> Result<(), MpiError> {
    let rt = rt()?;
    // SAFETY: the caller's handle.
    let out =
        unsafe { request.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "request is NULL"))?;
    let (req, meta) = match req {
        Some(r) => (r, Meta::Send { comm }),
        None => (Request::null(), Meta::ProcNull { comm }),
    };
    *out = rt.add_request(ReqEntry::new(req, meta));
    Ok(())
}

mpi_fn! {
    /// `MPI_Send`.
    MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) on comm => {
        // SAFETY: the caller's buffer.
        if let Some(done) = unsafe { send_fast(buf, count, datatype, dest, tag, comm) } {
            return done;
        }
        // SAFETY: the caller's buffer.
        unsafe { blocking_send(buf, count, datatype, dest, tag, comm, Mode::Standard) }
    }
}

mpi_fn! {
    /// `MPI_Rsend` (a standard send: a ready send needs no other protocol here).
    MPI_Rsend / PMPI_Rsend(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) on comm => {
        // SAFETY: the caller's buffer.
        if let Some(done) = unsafe { send_fast(buf, count, datatype, dest, tag, comm) } {
            return done;
        }
        // SAFETY: the caller's buffer.
        unsafe { blocking_send(buf, count, datatype, dest, tag, comm, Mode::Standard) }
    }
}

mpi_fn! {
    /// `MPI_Ssend`: returns once the matching receive took the message.
    MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) on comm => {
        // SAFETY: the caller's buffer.
        unsafe { blocking_send(buf, count, datatype, dest, tag, comm, Mode::Sync) }
    }
}

mpi_fn! {
    /// `MPI_Bsend`: the agent copies the data, so the send is started and its request freed;
    /// no attached buffer is needed.
    MPI_Bsend / PMPI_Bsend(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) on comm => {
        // SAFETY: the caller's buffer.
        if let Some(r) = unsafe { start_send(buf, count, datatype, dest, tag, comm, Mode::Buffered) }? {
            r.free()?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Isend`.
    MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's buffer and handle.
        unsafe {
            let r = start_send(buf, count, datatype, dest, tag, comm, Mode::Standard)?;
            give_send(r, comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Irsend` (as `MPI_Isend`).
    MPI_Irsend / PMPI_Irsend(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's buffer and handle.
        unsafe {
            let r = start_send(buf, count, datatype, dest, tag, comm, Mode::Standard)?;
            give_send(r, comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Ibsend` (as `MPI_Isend`: the data is copied).
    MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's buffer and handle.
        unsafe {
            let r = start_send(buf, count, datatype, dest, tag, comm, Mode::Buffered)?;
            give_send(r, comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Issend`.
    MPI_Issend / PMPI_Issend(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's buffer and handle.
        unsafe {
            let r = start_send(buf, count, datatype, dest, tag, comm, Mode::Sync)?;
            give_send(r, comm, request)
        }
    }
}

/// Posts a receive: the agent's request and what its completion does.
///
/// # Safety
///
/// `buf` holds room for `count` elements of `datatype` until the request completes.
pub(crate) unsafe fn post_recv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
) -> Result<(Request, Meta), MpiError> {
    let rt = rt()?;
    let c = rt.comm_any(comm)?;
    let (cap, unpack) = match data_of(count, datatype)? {
        Data::Bytes(len) => (len, None),
        Data::Packed(l, n, packed) => (packed, Some((l, n))),
    };
    let tag = recv_tag(tag)?;
    let Some(source) = source_rank(&c, source)? else {
        return Ok((Request::null(), Meta::ProcNull { comm }));
    };
    // A null buffer with a datatype that unpacks is MPI_BOTTOM (absolute addresses).
    if cap > 0 && buf.is_null() && unpack.is_none() {
        return Err(MpiError::new(err::BUFFER, "the receive buffer is NULL"));
    }
    let (req, rbuf, map) = if unpack.is_none() && cap > 0 {
        // Contiguous: the message lands straight in the caller's buffer. Posted with world
        // ranks, which the status maps back.
        // SAFETY: the caller's buffer of `cap` bytes, left to the library until the request
        // completes (MPI's rule for a pending receive); `MPI_Request_free` detaches it.
        let mem = unsafe { UserMem::new(buf, cap) }?;
        let rbuf = RecvBuffer::caller(Box::new(mem));
        let world = match source {
            Source::Any => Source::Any,
            Source::Rank(r) => Source::Rank(c.comm.world_rank(r).unwrap_or(r)),
        };
        let req = c.comm.agent().irecv_into(rbuf.clone(), world, tag)?;
        (req, rbuf, Some(Arc::clone(&c)))
    } else if cap >= POOL_MIN {
        // A large receive reuses a buffer of an earlier one (no fresh pages to fault in); it
        // is posted with world ranks, which the status maps back.
        let rbuf = take_pooled(cap);
        let world = match source {
            Source::Any => Source::Any,
            Source::Rank(r) => Source::Rank(c.comm.world_rank(r).unwrap_or(r)),
        };
        let req = c.comm.agent().irecv_into(rbuf.clone(), world, tag)?;
        (req, rbuf, Some(Arc::clone(&c)))
    } else {
        let (req, rbuf) = c.comm.irecv(cap, source, tag)?;
        (req, rbuf, None)
    };
    let meta = Meta::Recv {
        comm,
        buf: rbuf,
        dst: buf as usize,
        cap,
        unpack,
        map,
    };
    Ok((req, meta))
}

/// Receives of at least this many bytes take their agent buffer from a pool.
pub(crate) const POOL_MIN: usize = 64 << 10;
/// Most bytes the pool keeps.
const POOL_MAX_BYTES: usize = 256 << 20;

/// Receive buffers given back after their receive completed, by capacity.
struct Pool {
    by_cap: std::collections::HashMap<usize, Vec<RecvBuffer>>,
    bytes: usize,
}

fn pool() -> &'static std::sync::Mutex<Pool> {
    static POOL: std::sync::OnceLock<std::sync::Mutex<Pool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        std::sync::Mutex::new(Pool {
            by_cap: std::collections::HashMap::new(),
            bytes: 0,
        })
    })
}

/// An empty receive buffer of capacity `cap`, from the pool when one is there.
pub(crate) fn take_pooled(cap: usize) -> RecvBuffer {
    let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
    match p.by_cap.get_mut(&cap).and_then(|v| v.pop()) {
        Some(b) => {
            p.bytes -= cap;
            b
        }
        None => RecvBuffer::new(cap),
    }
}

/// Gives the buffer of a completed receive back to the pool (emptied, its memory kept).
pub fn give_back(buf: RecvBuffer) {
    if buf.is_caller_owned() {
        return;
    }
    let cap = buf.capacity();
    let mut p = pool().lock().unwrap_or_else(|e| e.into_inner());
    if p.bytes + cap > POOL_MAX_BYTES {
        return;
    }
    buf.clear();
    p.bytes += cap;
    p.by_cap.entry(cap).or_default().push(buf);
}

/// Starts a receive and registers it; returns its handle.
///
/// # Safety
///
/// As for [`post_recv`].
unsafe fn start_recv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
) -> Result<Handle, MpiError> {
    // SAFETY: passed on.
    let (req, meta) = unsafe { post_recv(buf, count, datatype, source, tag, comm) }?;
    Ok(rt()?.add_request(ReqEntry::new(req, meta)))
}

/// What starts a persistent collective once more: the nonblocking collective on the saved
/// arguments; gives the handle of the request it added to the table.
pub type CollStart = dyn Fn() -> Result<Handle, MpiError> + Send + Sync;

/// The operation of a persistent request.
#[derive(Clone)]
pub struct Persist {
    /// A persistent collective (`MPI_Bcast_init`, ...): what starts it; the other fields
    /// but `comm` are unused then.
    coll: Option<Arc<CollStart>>,
    send: Option<Mode>,
    buf: usize,
    count: c_int,
    datatype: Handle,
    /// The datatype, held for the request's life (the caller may free its handle first).
    held: Option<Arc<crate::types::HeldType>>,
    peer: c_int,
    tag: c_int,
    comm: Handle,
}

impl Persist {
    /// Starts the operation once more (`MPI_Start`).
    ///
    /// # Safety
    ///
    /// The buffer given at `MPI_Send_init`/`MPI_Recv_init` is valid for the operation.
    pub unsafe fn start(&self) -> Result<(Request, Meta), MpiError> {
        let p = self;
        if let Some(f) = &p.coll {
            let h = f()?;
            let e = rt()?.take_request(h)?;
            return Ok((e.req, e.meta));
        }
        match p.send {
            Some(mode) => {
                // SAFETY: the caller's buffer, given at MPI_Send_init.
                let r = unsafe {
                    start_send(
                        p.buf as *const c_void,
                        p.count,
                        p.datatype,
                        p.peer,
                        p.tag,
                        p.comm,
                        mode,
                    )
                }?;
                Ok(match r {
                    Some(r) => (r, Meta::Send { comm: p.comm }),
                    None => (Request::null(), Meta::ProcNull { comm: p.comm }),
                })
            }
            // SAFETY: the caller's buffer, given at MPI_Recv_init.
            None => unsafe {
                post_recv(
                    p.buf as *mut c_void,
                    p.count,
                    p.datatype,
                    p.peer,
                    p.tag,
                    p.comm,
                )
            },
        }
    }

    /// The communicator (for the error handler).
    pub fn comm(&self) -> Handle {
        self.comm
    }

    /// A persistent collective on `comm`, started by `start`.
    pub fn coll(comm: Handle, start: Arc<CollStart>) -> Self {
        Persist {
            coll: Some(start),
            send: None,
            buf: 0,
            count: 0,
            datatype: abi::DATATYPE_NULL,
            held: None,
            peer: 0,
            tag: 0,
            comm,
        }
    }
}

/// Creates an inactive persistent request after checking its arguments.
///
/// # Safety
///
/// `request` is the caller's writable handle.
unsafe fn persistent(mut p: Persist, request: *mut Handle) -> Result<(), MpiError> {
    let rt = rt()?;
    let c = rt.comm_any(p.comm)?;
    data_of(p.count, p.datatype)?;
    let held = crate::types::HeldType::new(p.datatype)?;
    p.datatype = held.handle();
    p.held = Some(held);
    if p.send.is_some() {
        send_tag(p.tag)?;
        dest_rank(&c, p.peer)?;
    } else {
        recv_tag(p.tag)?;
        source_rank(&c, p.peer)?;
    }
    // SAFETY: the caller's handle.
    let out =
        unsafe { request.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "request is NULL"))?;
    *out = rt.add_request(ReqEntry {
        req: Request::null(),
        meta: Meta::Inactive { comm: p.comm },
        persist: Some(p),
    });
    Ok(())
}

mpi_fn! {
    /// `MPI_Send_init`.
    MPI_Send_init / PMPI_Send_init(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        let p = Persist { coll: None, send: Some(Mode::Standard), buf: buf as usize, count, datatype, held: None, peer: dest, tag, comm };
        // SAFETY: the caller's handle.
        unsafe { persistent(p, request) }
    }
}

mpi_fn! {
    /// `MPI_Ssend_init`.
    MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        let p = Persist { coll: None, send: Some(Mode::Sync), buf: buf as usize, count, datatype, held: None, peer: dest, tag, comm };
        // SAFETY: the caller's handle.
        unsafe { persistent(p, request) }
    }
}

mpi_fn! {
    /// `MPI_Rsend_init` (as `MPI_Send_init`).
    MPI_Rsend_init / PMPI_Rsend_init(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        let p = Persist { coll: None, send: Some(Mode::Standard), buf: buf as usize, count, datatype, held: None, peer: dest, tag, comm };
        // SAFETY: the caller's handle.
        unsafe { persistent(p, request) }
    }
}

mpi_fn! {
    /// `MPI_Bsend_init` (as `MPI_Send_init`: the data is copied).
    MPI_Bsend_init / PMPI_Bsend_init(buf: *const c_void, count: c_int, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        let p = Persist { coll: None, send: Some(Mode::Buffered), buf: buf as usize, count, datatype, held: None, peer: dest, tag, comm };
        // SAFETY: the caller's handle.
        unsafe { persistent(p, request) }
    }
}

mpi_fn! {
    /// `MPI_Recv_init`.
    MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        let p = Persist { coll: None, send: None, buf: buf as usize, count, datatype, held: None, peer: source, tag, comm };
        // SAFETY: the caller's handle.
        unsafe { persistent(p, request) }
    }
}

/// Starts persistent request `h`.
fn start_one(h: Handle) -> Result<(), MpiError> {
    let rt = rt()?;
    let mut e = rt.take_request(h)?;
    let p = if e.inactive() {
        e.persist.clone()
    } else {
        None
    };
    let Some(p) = p else {
        let active = e.persist.is_some();
        // Reported through the handler of the request's communicator, as the request's other
        // errors.
        let comm = e.meta.comm();
        rt.put_request(h, e);
        return Err(MpiError::new(
            err::REQUEST,
            if active {
                format!("persistent request {h:#x} is active already")
            } else {
                format!("request {h:#x} is not persistent")
            },
        )
        .on(comm));
    };
    // SAFETY: the buffer given at MPI_Send_init/MPI_Recv_init, valid while the request lives.
    match unsafe { p.start() } {
        Ok((req, meta)) => {
            e.req = req;
            e.meta = meta;
            rt.put_request(h, e);
            Ok(())
        }
        Err(err) => {
            rt.put_request(h, e);
            Err(err.on(p.comm()))
        }
    }
}

mpi_fn! {
    /// `MPI_Start`.
    MPI_Start / PMPI_Start(request: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's handle.
        let h = unsafe { request.as_ref() }.ok_or_else(|| MpiError::new(err::REQUEST, "request is NULL"))?;
        start_one(*h)
    }
}

mpi_fn! {
    /// `MPI_Startall`.
    MPI_Startall / PMPI_Startall(count: c_int, requests: *mut Handle) on abi::COMM_WORLD => {
        if count < 0 {
            return Err(MpiError::new(err::COUNT, format!("count {count} is negative")));
        }
        if count > 0 && requests.is_null() {
            return Err(MpiError::new(err::ARG, "the request array is NULL"));
        }
        for i in 0..count as usize {
            // SAFETY: the caller's array of `count` handles.
            start_one(unsafe { *requests.add(i) })?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Irecv`.
    MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's handle.
        let out = unsafe { request.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "request is NULL"))?;
        // SAFETY: the caller's buffer, left to the library until the request completes.
        *out = unsafe { start_recv(buf, count, datatype, source, tag, comm) }?;
        Ok(())
    }
}

/// A blocking receive into the caller's buffer; returns the status.
///
/// # Safety
///
/// `buf` holds room for `count` elements of `datatype`.
unsafe fn blocking_recv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
) -> Result<MpiStatus, MpiError> {
    LAST_STATUS.with(|l| l.set(MpiStatus::empty()));
    let rt = rt()?;
    let c = rt.comm_any(comm)?;
    let data = data_of(count, datatype)?;
    let tagm = recv_tag(tag)?;
    let Some(src) = source_rank(&c, source)? else {
        return Ok(proc_null_status());
    };
    if let (Source::Rank(r), TagMatch::Tag(t), Data::Bytes(cap)) = (src, tagm, data) {
        // The envelope is known, so the status of a truncated message is too: receive straight
        // into the caller's buffer.
        let agent = c.comm.agent();
        let got = if cap > agent.config().eager_limit {
            // A long message lands straight in the caller's buffer (no copy at completion).
            // SAFETY: the caller's buffer of `cap` bytes, the library's until this call
            // returns; it is detached below before the return, whatever the outcome.
            let mem = unsafe { UserMem::new(buf, cap) }?;
            let rbuf = RecvBuffer::caller(Box::new(mem));
            let world = Source::Rank(c.comm.world_rank(r).unwrap_or(r));
            let waited = match agent.irecv_into(rbuf.clone(), world, tagm) {
                Ok(mut req) => req.wait().map_err(AgentError::from),
                Err(e) => Err(e),
            };
            rbuf.detach();
            waited.map(|st| (None, st.tag(), st.count()))
        } else {
            // SAFETY: the caller's buffer of `cap` bytes.
            let out = unsafe { output(buf, cap) }?;
            c.comm
                .recv(out, src, tagm)
                .map(|st| (st.source(), st.tag(), st.count()))
        };
        return match got {
            Ok((from, got_tag, count)) => {
                let mut s = MpiStatus {
                    source: from.map_or(r as c_int, |x| x as c_int),
                    tag: got_tag.map_or(t as c_int, |x| x as c_int),
                    ..MpiStatus::default()
                };
                s.set_count(count as i64);
                Ok(s)
            }
            Err(e) => {
                let e = MpiError::from(e);
                let mut s = MpiStatus {
                    source: r as c_int,
                    tag: t as c_int,
                    error: e.class,
                    ..MpiStatus::default()
                };
                s.set_count(cap as i64);
                LAST_STATUS.with(|l| l.set(s));
                Err(e)
            }
        };
    }
    // SAFETY: passed on.
    let h = unsafe { start_recv(buf, count, datatype, source, tag, comm) }?;
    let mut s = MpiStatus::default();
    let mut hh = h;
    // SAFETY: a handle and a status of this frame.
    let code = unsafe { crate::request::PMPI_Wait(&mut hh, &mut s) };
    if code != abi::SUCCESS {
        LAST_STATUS.with(|l| l.set(s));
        return Err(MpiError::new(code, "the receive failed").on(comm));
    }
    Ok(s)
}

thread_local! {
    /// The status of the last failed blocking receive of this thread (source, tag and count of
    /// a truncated message), written to the caller's status before the error is reported.
    static LAST_STATUS: std::cell::Cell<MpiStatus> = const { std::cell::Cell::new(MpiStatus {
        count_lo: 0,
        count_hi_and_cancelled: 0,
        source: 0,
        tag: 0,
        error: 0,
    }) };
}

mpi_fn! {
    /// `MPI_Recv`.
    MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut MpiStatus) on comm => {
        // SAFETY: the caller's buffer and status.
        if let Some(done) = unsafe { recv_fast(buf, count, datatype, source, tag, comm, status) } {
            return done;
        }
        // SAFETY: the caller's buffer.
        match unsafe { blocking_recv(buf, count, datatype, source, tag, comm) } {
            Ok(s) => {
                // SAFETY: the caller's status or MPI_STATUS_IGNORE.
                unsafe { write_status(status, s) };
                Ok(())
            }
            Err(e) => {
                let s = LAST_STATUS.with(|l| l.get());
                // SAFETY: as above.
                unsafe { write_status(status, MpiStatus { error: e.class, ..s }) };
                Err(e)
            }
        }
    }
}

mpi_fn! {
    /// `MPI_Sendrecv`.
    MPI_Sendrecv / PMPI_Sendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, source: c_int, recvtag: c_int, comm: Handle, status: *mut MpiStatus) on comm => {
        // SAFETY: the caller's buffers.
        let h = unsafe { start_recv(recvbuf, recvcount, recvtype, source, recvtag, comm) }?;
        // SAFETY: the caller's buffer.
        let sent = unsafe { start_send(sendbuf, sendcount, sendtype, dest, sendtag, comm, Mode::Standard) };
        let mut hh = h;
        // SAFETY: a handle of this frame; the caller's status.
        let code = unsafe { crate::request::PMPI_Wait(&mut hh, status) };
        if let Some(mut r) = sent? {
            r.wait()?;
        }
        if code != abi::SUCCESS {
            return Err(MpiError::new(code, "the receive failed"));
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Sendrecv_replace`.
    MPI_Sendrecv_replace / PMPI_Sendrecv_replace(buf: *mut c_void, count: c_int, datatype: Handle, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: Handle, status: *mut MpiStatus) on comm => {
        let len = bytes(count, datatype)?;
        // SAFETY: the caller's buffer of `count` elements.
        let copy = unsafe { input(buf, len) }?.to_vec();
        // SAFETY: the receive goes to the caller's buffer, the send reads the copy.
        unsafe {
            let h = start_recv(buf, count, datatype, source, recvtag, comm)?;
            let sent = start_send(copy.as_ptr().cast(), count, datatype, dest, sendtag, comm, Mode::Standard);
            let mut hh = h;
            let code = crate::request::PMPI_Wait(&mut hh, status);
            if let Some(mut r) = sent? {
                r.wait()?;
            }
            if code != abi::SUCCESS {
                return Err(MpiError::new(code, "the receive failed"));
            }
        }
        Ok(())
    }
}

/// One probe: the status of a matching message, if one is there.
fn probe_once(
    c: &CommEntry,
    src: Source,
    tag: TagMatch,
    block: bool,
) -> Result<Option<MpiStatus>, MpiError> {
    let world = match src {
        Source::Any => Source::Any,
        Source::Rank(r) => Source::Rank(c.comm.world_rank(r).unwrap_or(r)),
    };
    let agent = c.comm.agent();
    let found = if block {
        Some(agent.probe(world, tag, None)?)
    } else {
        agent.iprobe(world, tag)?
    };
    Ok(found.map(|p| {
        let mut s = MpiStatus {
            source: c
                .rank_of_world(p.source)
                .map_or(abi::ANY_SOURCE, |r| r as c_int),
            tag: p.tag as c_int,
            ..MpiStatus::default()
        };
        s.set_count(p.len as i64);
        s
    }))
}

mpi_fn! {
    /// `MPI_Probe`.
    MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, comm: Handle, status: *mut MpiStatus) on comm => {
        let rt = rt()?;
        let c = rt.comm_any(comm)?;
        let tag = recv_tag(tag)?;
        let s = match source_rank(&c, source)? {
            None => proc_null_status(),
            Some(src) => probe_once(&c, src, tag, true)?.unwrap_or_else(MpiStatus::empty),
        };
        // SAFETY: the caller's status.
        unsafe { write_status(status, s) };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Iprobe`.
    MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, comm: Handle, flag: *mut c_int, status: *mut MpiStatus) on comm => {
        let rt = rt()?;
        let c = rt.comm_any(comm)?;
        let tag = recv_tag(tag)?;
        // SAFETY: the caller's flag.
        let flag = unsafe { flag.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "flag is NULL"))?;
        let s = match source_rank(&c, source)? {
            None => Some(proc_null_status()),
            Some(src) => probe_once(&c, src, tag, false)?,
        };
        *flag = c_int::from(s.is_some());
        if let Some(s) = s {
            // SAFETY: the caller's status.
            unsafe { write_status(status, s) };
        }
        Ok(())
    }
}

/// Elements of `datatype` in the byte count of `s`, in 64 bits (`None`: not a whole number of
/// them); with `elements`, the predefined elements instead (a partial element of one
/// predefined type counted by its parts). `MPI_Get_count`/`MPI_Get_elements` and their `_c`
/// forms narrow it.
pub(crate) fn counted(
    s: &MpiStatus,
    datatype: Handle,
    elements: bool,
) -> Result<Option<i64>, MpiError> {
    let l = crate::types::layout(datatype)?;
    let size = l.size as i64;
    let n = s.count();
    Ok(if elements && size > 0 && l.elements > 0 {
        let whole = n / size * l.elements as i64;
        let rest = (n % size) as usize;
        l.elements_in(rest).map(|part| whole + part as i64)
    } else if size == 0 {
        (n == 0).then_some(0)
    } else if n % size != 0 {
        None
    } else {
        Some(n / size)
    })
}

/// Elements of `datatype` in the byte count of `status` (`MPI_UNDEFINED` when not whole);
/// with `elements`, the predefined elements instead (a partial element of one predefined
/// type counted by its parts).
///
/// # Safety
///
/// `status` is a readable status, `count` a writable int.
unsafe fn get_count(
    status: *const MpiStatus,
    datatype: Handle,
    count: *mut c_int,
    elements: bool,
) -> Result<(), MpiError> {
    // SAFETY: the caller's status and count.
    let (s, out) = unsafe { (status.as_ref(), count.as_mut()) };
    let (Some(s), Some(out)) = (s, out) else {
        return Err(MpiError::new(err::ARG, "status or count is NULL"));
    };
    *out = counted(s, datatype, elements)?
        .and_then(|v| c_int::try_from(v).ok())
        .unwrap_or(abi::UNDEFINED);
    Ok(())
}

mpi_fn! {
    /// `MPI_Get_count`.
    MPI_Get_count / PMPI_Get_count(status: *const MpiStatus, datatype: Handle, count: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's status and count.
        unsafe { get_count(status, datatype, count, false) }
    }
}

mpi_fn! {
    /// `MPI_Get_elements`: predefined elements (of a derived datatype's parts).
    MPI_Get_elements / PMPI_Get_elements(status: *const MpiStatus, datatype: Handle, count: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's status and count.
        unsafe { get_count(status, datatype, count, true) }
    }
}

mpi_fn! {
    /// `MPI_Buffer_attach`: accepted; buffered sends need no attached buffer here.
    MPI_Buffer_attach / PMPI_Buffer_attach(buffer: *mut c_void, size: c_int) on abi::COMM_WORLD => {
        let _ = buffer;
        if size < 0 {
            return Err(MpiError::new(err::ARG, format!("size {size} is negative")));
        }
        ATTACHED.with(|a| a.set((buffer as usize, size)));
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Buffer_detach`: gives back the buffer attached last.
    MPI_Buffer_detach / PMPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) on abi::COMM_WORLD => {
        let (b, n) = ATTACHED.with(|a| a.replace((0, 0)));
        // SAFETY: `buffer_addr` is the caller's `void **`, `size` its int.
        unsafe {
            if let Some(p) = buffer_addr.cast::<*mut c_void>().as_mut() {
                *p = b as *mut c_void;
            }
            if let Some(s) = size.as_mut() {
                *s = n;
            }
        }
        Ok(())
    }
}

thread_local! {
    static ATTACHED: std::cell::Cell<(usize, c_int)> = const { std::cell::Cell::new((0, 0)) };
}
