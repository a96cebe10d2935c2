//! Collectives the agent has no schedule for, each built of the agent's xfer blocks
//! ([`viaduct_agent::xfer`]): `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`,
//! `MPI_Alltoallv` (one scatter block sending this rank's parts, one gather block receiving
//! the others', matched by the blocks' own start order), `MPI_Scan` and `MPI_Exscan` (a chain
//! of gather blocks: a rank combines what its left neighbour sent and forwards each piece as
//! soon as it was combined), and `MPI_Reduce_scatter_block`/`MPI_Reduce_scatter` (the agent's
//! allreduce, then this rank's block). Every `MPI_IN_PLACE` form.
//!
//! The nonblocking forms (`MPI_Igatherv`, `MPI_Iscatterv`, `MPI_Iallgatherv`,
//! `MPI_Ialltoallv`, `MPI_Ialltoallw`, `MPI_Iscan`, `MPI_Iexscan`) start the same blocks and
//! give back the request of the block that receives (a [`Started`]); the result reaches the
//! caller's buffer when that request completes. `MPI_Ireduce_scatter_block` and
//! `MPI_Ireduce_scatter` are the agent's `iallreduce` (an `iallgather` folded in rank order
//! for a non-commutative operation) with this rank's block picked at completion.

use std::ffi::{c_int, c_void};

use std::sync::{Arc, Mutex, OnceLock};

use viaduct_agent::comm::Comm;
use viaduct_agent::request::{
    BoxError, ClassOps, ClassRequest, CompleteHandle, Request, RequestClass, test_all,
};
use viaduct_agent::xfer::{BufId, XferBuffers};

use crate::abi::{self, Handle, err};
use crate::datatype::{bytes, input, output};
use crate::error::MpiError;
use crate::holesv::Types;
use crate::op::reduction;
use crate::request::Meta;
use crate::state::{ReqEntry, rt};

/// Tags of the blocks (below the collectives' reserved bit; blocks use the communicator's
/// collective context, so they never meet point-to-point messages).
const TAG_GATHERV: u32 = 0x7f00_0001;
const TAG_SCATTERV: u32 = 0x7f00_0002;
const TAG_ALLGATHERV: u32 = 0x7f00_0003;
const TAG_ALLTOALLV: u32 = 0x7f00_0004;
const TAG_SCAN: u32 = 0x7f00_0005;
const TAG_EXSCAN: u32 = 0x7f00_0006;
const TAG_ALLTOALLW: u32 = 0x7f00_0007;

fn in_place(p: *const c_void) -> bool {
    p as usize == abi::IN_PLACE
}

/// `(offset, length)` in bytes of each rank's part: `counts[i]` elements of `t` at `displs[i]`
/// extents.
///
/// # Safety
///
/// `counts` and `displs` hold `n` ints.
pub(crate) unsafe fn parts(
    counts: *const c_int,
    displs: *const c_int,
    t: Handle,
    n: usize,
) -> Result<Vec<(usize, usize)>, MpiError> {
    if counts.is_null() || displs.is_null() {
        return Err(MpiError::new(err::ARG, "counts or displacements are NULL"));
    }
    let ext = bytes(1, t)?;
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the caller's arrays of `n` ints.
        let (c, d) = unsafe { (*counts.add(i), *displs.add(i)) };
        let len = bytes(c, t)?;
        if d < 0 {
            return Err(MpiError::new(
                err::ARG,
                format!("displacement {d} is negative"),
            ));
        }
        v.push((d as usize * ext, len));
    }
    Ok(v)
}

pub(crate) fn span(parts: &[(usize, usize)]) -> usize {
    parts.iter().map(|(o, l)| o + l).max().unwrap_or(0)
}

fn root_of(comm: &Comm, root: c_int) -> Result<u32, MpiError> {
    if root < 0 || root as u32 >= comm.size() {
        return Err(MpiError::new(
            err::ROOT,
            format!(
                "root {root} is not in the communicator of {} ranks",
                comm.size()
            ),
        ));
    }
    Ok(root as u32)
}

/// Writes a collective's gathered data into the caller's buffer.
type Deliver = Box<dyn FnOnce(&[u8], &mut [u8]) + Send>;

/// Writes a collective's result into the caller's buffer (the result held by the closure).
pub type Finish = Box<dyn FnOnce(&mut [u8]) + Send>;

/// The state of an [`all_of`] request: the requests it stands for, and the handle that keeps
/// it from being abandoned until it completes.
type AllOfState = (Mutex<Vec<Request>>, Arc<Mutex<Option<CompleteHandle>>>);

/// The request class of [`all_of`]: its poll hook tests the requests it stands for (which
/// drives the agent's progress) and completes when every one did.
struct AllOf;

impl ClassOps for AllOf {
    type State = AllOfState;

    fn poll(&self, request: &ClassRequest<'_, AllOfState>) -> Result<(), BoxError> {
        let done = {
            let mut subs = request.state().0.lock().unwrap_or_else(|e| e.into_inner());
            test_all(&mut subs, None)?
        };
        if done {
            request.complete()?;
        }
        Ok(())
    }

    fn free(&self, state: &AllOfState) -> Result<(), BoxError> {
        state.1.lock().unwrap_or_else(|e| e.into_inner()).take();
        state.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
        Ok(())
    }
}

/// One request that completes when every one of `requests` did (fails when one fails),
/// progressed by the tests and waits that look at it: no thread.
pub fn all_of(requests: Vec<Request>) -> Request {
    static CLASS: OnceLock<RequestClass<AllOf>> = OnceLock::new();
    let class = CLASS.get_or_init(|| RequestClass::new(AllOf));
    let keep = Arc::new(Mutex::new(None));
    let (req, handle) = class.start((Mutex::new(requests), Arc::clone(&keep)));
    *keep.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    req
}

/// A started collective of xfer blocks: the request whose completion brings the result, the
/// other blocks' requests, and what writes the result into the caller's buffer.
pub struct Started {
    req: Request,
    extra: Vec<Request>,
    result: Option<(XferBuffers, BufId)>,
    dst: usize,
    len: usize,
    post: Option<Deliver>,
    finish: Option<Finish>,
    staged: Option<Staged>,
}

/// A packed copy a collective delivers its result into (`dst` points into `bytes`), unpacked
/// afterwards into `elems` elements of `layout` at the caller's `user` buffer (see
/// [`crate::holesv`]).
pub(crate) struct Staged {
    pub(crate) bytes: Vec<u8>,
    pub(crate) layout: Arc<crate::types::Layout>,
    pub(crate) elems: usize,
    pub(crate) user: usize,
}

impl Started {
    /// Nothing to do (this rank neither sends nor receives).
    fn nothing() -> Self {
        Started {
            req: Request::null(),
            extra: Vec::new(),
            result: None,
            dst: 0,
            len: 0,
            post: None,
            finish: None,
            staged: None,
        }
    }

    /// A started operation of `req` whose completion runs `finish` on the caller's `len`
    /// bytes at `dst`.
    pub fn with_finish(req: Request, dst: *mut c_void, len: usize, finish: Finish) -> Self {
        Started {
            req,
            dst: dst as usize,
            len,
            finish: Some(finish),
            ..Started::nothing()
        }
    }

    /// Once `req` completed: waits for the other blocks and writes the result.
    pub fn deliver(mut self) -> Result<(), MpiError> {
        for r in &mut self.extra {
            r.wait()?;
        }
        let out: &mut [u8] = if self.len == 0 || self.dst == 0 {
            &mut []
        } else {
            // SAFETY: `dst` is the caller's result buffer of `len` bytes given to the
            // collective; MPI leaves it to the library until the request completes.
            unsafe { std::slice::from_raw_parts_mut(self.dst as *mut u8, self.len) }
        };
        if let (Some((bufs, id)), Some(post)) = (self.result.take(), self.post.take()) {
            let got = bufs.take(id).unwrap_or_default();
            post(&got, out);
        } else if let Some(finish) = self.finish.take() {
            finish(out);
        }
        if let Some(s) = self.staged.take() {
            // SAFETY: `user` is the caller's result buffer of `elems` elements of the layout,
            // left to the library until the collective completes.
            unsafe { s.layout.unpack(&s.bytes, s.user as *mut u8, s.elems) };
        }
        Ok(())
    }

    /// This collective with its result delivered into the packed copy `s.bytes` (which the
    /// blocks were given as the caller's buffer) and unpacked from it into the caller's.
    pub(crate) fn staged(mut self, s: Staged) -> Self {
        self.staged = Some(s);
        self
    }

    /// The blocking form: waits for the blocks and delivers.
    pub fn run(mut self) -> Result<(), MpiError> {
        self.req.wait()?;
        self.deliver()
    }

    /// The nonblocking form: registers the request and writes its handle.
    ///
    /// # Safety
    ///
    /// `request` is the caller's writable handle.
    pub unsafe fn give(mut self, comm: Handle, request: *mut Handle) -> Result<(), MpiError> {
        if request.is_null() {
            return Err(MpiError::new(err::ARG, "request is NULL"));
        }
        let rt = rt()?;
        let mut req = std::mem::replace(&mut self.req, Request::null());
        if !self.extra.is_empty() {
            // One request for the caller: complete when every block is.
            let mut all = std::mem::take(&mut self.extra);
            all.insert(0, req);
            req = all_of(all);
        }
        let meta = Meta::Blocks {
            comm,
            started: Mutex::new(Some(self)),
        };
        let h = rt.add_request(ReqEntry::new(req, meta));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { crate::comm::put(request, h, "request") }
    }
}

/// Copies the parts `ps` (other than `skip`) of `got` into `out`.
fn copy_parts(ps: &[(usize, usize)], skip: usize, got: &[u8], out: &mut [u8]) {
    for (i, &(o, l)) in ps.iter().enumerate() {
        if i != skip && l > 0 && o + l <= got.len() && o + l <= out.len() {
            out[o..o + l].copy_from_slice(&got[o..o + l]);
        }
    }
}

/// Starts `MPI_Gatherv`.
///
/// # Safety
///
/// The arguments follow `MPI_Gatherv`'s contract.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gatherv(
    c: &Comm,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Handle,
    root: c_int,
) -> Result<Started, MpiError> {
    let root = root_of(c, root)?;
    let (me, n) = (c.rank() as usize, c.size() as usize);
    if c.rank() != root {
        let len = bytes(sendcount, sendtype)?;
        if len == 0 {
            return Ok(Started::nothing());
        }
        // SAFETY: the caller's send buffer.
        let data = unsafe { input(sendbuf, len) }?.to_vec();
        let mut b = c.xfer_gather(Some(root), TAG_GATHERV);
        let id = b.buffer(data);
        b.send_op(id, 0, len);
        let (req, _) = b.start()?;
        return Ok(Started {
            req,
            ..Started::nothing()
        });
    }
    // SAFETY: the root's arrays of `size` ints.
    let ps = unsafe { parts(recvcounts, displs, recvtype, n) }?;
    // SAFETY: the root's receive buffer covering every part.
    let out = unsafe { output(recvbuf, span(&ps)) }?;
    if !in_place(sendbuf) {
        let len = bytes(sendcount, sendtype)?;
        if len != ps[me].1 {
            return Err(MpiError::new(
                err::TRUNCATE,
                format!(
                    "the root sends {len} bytes to itself but receives {}",
                    ps[me].1
                ),
            ));
        }
        // SAFETY: the caller's send buffer.
        let own = unsafe { input(sendbuf, len) }?;
        out[ps[me].0..ps[me].0 + len].copy_from_slice(own);
    }
    // Parts that overlap (an erroneous program, which MPICH runs) arrive in places of their
    // own and are copied in rank order, as in `packed_exchange`.
    let (places, got_len) = if overlapping(&ps) {
        packed(&ps)
    } else {
        (ps.clone(), span(&ps))
    };
    let mut b = c.xfer_gather(None, TAG_GATHERV);
    let id = b.buffer(vec![0; got_len]);
    for (i, &(o, l)) in places.iter().enumerate() {
        if i != me && l > 0 {
            b.recv_op(id, o, o + l, i as u32);
        }
    }
    let (req, bufs) = b.start()?;
    Ok(Started {
        req,
        extra: Vec::new(),
        result: Some((bufs, id)),
        dst: recvbuf as usize,
        len: span(&ps),
        post: Some(Box::new(move |got: &[u8], out: &mut [u8]| {
            copy_placed(&ps, &places, me, got, out)
        })),
        finish: None,
        staged: None,
    })
}

/// Each part `i` of `places` (offset, length) in `packed`: the parts `ps` laid one after the
/// other, and their total length.
fn packed(ps: &[(usize, usize)]) -> (Vec<(usize, usize)>, usize) {
    let mut at = 0;
    let places = ps
        .iter()
        .map(|&(_, l)| {
            let p = (at, l);
            at += l;
            p
        })
        .collect();
    (places, at)
}

/// Copies part `i` (but `skip`) from `places[i]` of `got` to `ps[i]` of `out`, in rank order
/// (where parts overlap, the higher rank's bytes stay).
fn copy_placed(
    ps: &[(usize, usize)],
    places: &[(usize, usize)],
    skip: usize,
    got: &[u8],
    out: &mut [u8],
) {
    for (i, (&(o, l), &(p, _))) in ps.iter().zip(places).enumerate() {
        if i != skip && l > 0 && p + l <= got.len() && o + l <= out.len() {
            out[o..o + l].copy_from_slice(&got[p..p + l]);
        }
    }
}

/// Starts `MPI_Scatterv`.
///
/// # Safety
///
/// The arguments follow `MPI_Scatterv`'s contract.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn scatterv(
    c: &Comm,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    root: c_int,
) -> Result<Started, MpiError> {
    let root = root_of(c, root)?;
    let (me, n) = (c.rank() as usize, c.size() as usize);
    if c.rank() != root {
        let len = bytes(recvcount, recvtype)?;
        if len == 0 {
            return Ok(Started::nothing());
        }
        // SAFETY: the caller's receive buffer (checked now, written at completion).
        unsafe { output(recvbuf, len) }?;
        let mut b = c.xfer_scatter(Some(root), TAG_SCATTERV);
        let id = b.buffer(vec![0; len]);
        b.recv_op(id, 0, len);
        let (req, bufs) = b.start()?;
        return Ok(Started {
            req,
            extra: Vec::new(),
            result: Some((bufs, id)),
            dst: recvbuf as usize,
            len,
            post: Some(Box::new(|got: &[u8], out: &mut [u8]| {
                let k = got.len().min(out.len());
                out[..k].copy_from_slice(&got[..k]);
            })),
            finish: None,
            staged: None,
        });
    }
    // SAFETY: the root's arrays of `size` ints.
    let ps = unsafe { parts(sendcounts, displs, sendtype, n) }?;
    // SAFETY: the root's send buffer covering every part.
    let data = unsafe { input(sendbuf, span(&ps)) }?;
    if !in_place(recvbuf) {
        let len = bytes(recvcount, recvtype)?;
        if len != ps[me].1 {
            return Err(MpiError::new(
                err::TRUNCATE,
                format!(
                    "the root sends {} bytes to itself but receives {len}",
                    ps[me].1
                ),
            ));
        }
        // SAFETY: the caller's receive buffer.
        let out = unsafe { output(recvbuf, len) }?;
        out.copy_from_slice(&data[ps[me].0..ps[me].0 + len]);
    }
    let mut b = c.xfer_scatter(None, TAG_SCATTERV);
    let id = b.buffer(data.to_vec());
    for (i, &(o, l)) in ps.iter().enumerate() {
        if i != me && l > 0 {
            b.send_op(id, o, o + l, i as u32);
        }
    }
    let (req, _) = b.start()?;
    Ok(Started {
        req,
        ..Started::nothing()
    })
}

/// Starts the exchange of `mine[sends[i]]` to each rank i and of each rank's part into the
/// `recvs` ranges of a buffer of `recv_len` bytes: one gather block (the request that brings
/// the result) and one scatter block. `post` writes the gathered buffer into `dst`.
#[allow(clippy::too_many_arguments)]
fn exchange(
    c: &Comm,
    tag: u32,
    mine: Vec<u8>,
    sends: &[(usize, usize)],
    recv_len: usize,
    recvs: &[(usize, usize)],
    dst: *mut c_void,
    post: Deliver,
) -> Result<Started, MpiError> {
    let me = c.rank() as usize;
    let mut g = c.xfer_gather(None, tag);
    let gid = g.buffer(vec![0; recv_len]);
    for (i, &(o, l)) in recvs.iter().enumerate() {
        if i != me && l > 0 {
            g.recv_op(gid, o, o + l, i as u32);
        }
    }
    let mut s = c.xfer_scatter(None, tag);
    let sid = s.buffer(mine);
    for (i, &(o, l)) in sends.iter().enumerate() {
        if i != me && l > 0 {
            s.send_op(sid, o, o + l, i as u32);
        }
    }
    let (req, bufs) = g.start()?;
    let (sent, _) = s.start()?;
    Ok(Started {
        req,
        extra: vec![sent],
        result: Some((bufs, gid)),
        dst: dst as usize,
        len: recv_len,
        post: Some(post),
        finish: None,
        staged: None,
    })
}

/// Starts `MPI_Allgatherv`.
///
/// # Safety
///
/// The arguments follow `MPI_Allgatherv`'s contract.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn allgatherv(
    c: &Comm,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Handle,
) -> Result<Started, MpiError> {
    let (me, n) = (c.rank() as usize, c.size() as usize);
    // SAFETY: the caller's arrays of `size` ints.
    let ps = unsafe { parts(recvcounts, displs, recvtype, n) }?;
    // SAFETY: the caller's receive buffer covering every part.
    let out = unsafe { output(recvbuf, span(&ps)) }?;
    let (o, l) = ps[me];
    let own = if in_place(sendbuf) {
        out[o..o + l].to_vec()
    } else {
        let len = bytes(sendcount, sendtype)?;
        if len != l {
            return Err(MpiError::new(
                err::TRUNCATE,
                format!("this rank sends {len} bytes but its part is {l}"),
            ));
        }
        // SAFETY: the caller's send buffer.
        unsafe { input(sendbuf, len) }?.to_vec()
    };
    out[o..o + l].copy_from_slice(&own);
    let sends: Vec<(usize, usize)> = (0..n).map(|_| (0, l)).collect();
    if overlapping(&ps) {
        return packed_exchange(c, TAG_ALLGATHERV, own, &sends, ps, recvbuf);
    }
    let recv_len = span(&ps);
    let rps = ps.clone();
    let post: Deliver = Box::new(move |got: &[u8], out: &mut [u8]| copy_parts(&ps, me, got, out));
    exchange(
        c,
        TAG_ALLGATHERV,
        own,
        &sends,
        recv_len,
        &rps,
        recvbuf,
        post,
    )
}

/// Blocking `MPI_Allgatherv` of a small result (the parts' lengths add up to at most the
/// agent's small switch point, the same on every rank since the counts are): the agent's
/// point-to-point ring in place. `None`: not small, the caller takes the xfer blocks.
///
/// # Safety
///
/// The arguments follow `MPI_Allgatherv`'s contract.
#[allow(clippy::too_many_arguments)]
unsafe fn small_allgatherv(
    c: &Comm,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Handle,
) -> Option<Result<(), MpiError>> {
    let (me, n) = (c.rank() as usize, c.size() as usize);
    // SAFETY: the caller's arrays of `size` ints.
    let ps = match unsafe { parts(recvcounts, displs, recvtype, n) } {
        Ok(ps) => ps,
        Err(e) => return Some(Err(e)),
    };
    if ps.iter().map(|p| p.1).sum::<usize>() > c.coll_small_max() || overlapping(&ps) {
        return None;
    }
    let run = || -> Result<(), MpiError> {
        // SAFETY: the caller's receive buffer covering every part.
        let out = unsafe { output(recvbuf, span(&ps)) }?;
        let (o, l) = ps[me];
        if !in_place(sendbuf) {
            let len = bytes(sendcount, sendtype)?;
            if len != l {
                return Err(MpiError::new(
                    err::TRUNCATE,
                    format!("this rank sends {len} bytes but its part is {l}"),
                ));
            }
            // SAFETY: the caller's send buffer.
            let send = unsafe { input(sendbuf, len) }?;
            out[o..o + l].copy_from_slice(send);
        }
        c.allgatherv_in_place(out, &ps)?;
        Ok(())
    };
    Some(run())
}

/// Starts an all-to-all exchange of the parts `sps` of the send buffer (or the receive
/// buffer, in place) into the parts `rps` of the receive buffer.
fn alltoall_parts(
    c: &Comm,
    tag: u32,
    sendbuf: *const c_void,
    sps: Option<Vec<(usize, usize)>>,
    recvbuf: *mut c_void,
    rps: Vec<(usize, usize)>,
) -> Result<Started, MpiError> {
    let me = c.rank() as usize;
    // SAFETY: the caller's receive buffer covering every part.
    let out = unsafe { output(recvbuf, span(&rps)) }?;
    let (sps, mine) = match sps {
        None => (rps.clone(), out.to_vec()),
        Some(sps) => {
            // SAFETY: the caller's send buffer covering every part.
            let mine = unsafe { input(sendbuf, span(&sps)) }?.to_vec();
            (sps, mine)
        }
    };
    if sps[me].1 != rps[me].1 {
        return Err(MpiError::new(
            err::TRUNCATE,
            format!(
                "this rank sends {} bytes to itself but receives {}",
                sps[me].1, rps[me].1
            ),
        ));
    }
    let own = mine[sps[me].0..sps[me].0 + sps[me].1].to_vec();
    let recv_len = span(&rps);
    let (ro, rl) = rps[me];
    out[ro..ro + rl].copy_from_slice(&own);
    if overlapping(&rps) {
        return packed_exchange(c, tag, mine, &sps, rps, recvbuf);
    }
    let rps2 = rps.clone();
    let post: Deliver = Box::new(move |got: &[u8], out: &mut [u8]| copy_parts(&rps2, me, got, out));
    exchange(c, tag, mine, &sps, recv_len, &rps, recvbuf, post)
}

/// Whether two non-empty parts of `ps` share a byte.
fn overlapping(ps: &[(usize, usize)]) -> bool {
    let mut v: Vec<(usize, usize)> = ps.iter().copied().filter(|&(_, l)| l > 0).collect();
    v.sort_unstable();
    v.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0)
}

/// [`exchange`] for receive parts that overlap (an erroneous program, which MPICH runs, e.g.
/// `MPI_Alltoallw` displacements given in elements where the standard takes bytes): each part
/// arrives in a place of its own and is copied into the caller's buffer in rank order (after
/// this rank's own part), so where received parts overlap the higher rank's bytes stay.
fn packed_exchange(
    c: &Comm,
    tag: u32,
    mine: Vec<u8>,
    sps: &[(usize, usize)],
    rps: Vec<(usize, usize)>,
    recvbuf: *mut c_void,
) -> Result<Started, MpiError> {
    let me = c.rank() as usize;
    let (places, at) = packed(&rps);
    let out_len = span(&rps);
    let packed = places.clone();
    let post: Deliver =
        Box::new(move |got: &[u8], out: &mut [u8]| copy_placed(&rps, &places, me, got, out));
    let mut st = exchange(c, tag, mine, sps, at, &packed, recvbuf, post)?;
    st.len = out_len;
    Ok(st)
}

/// Starts `MPI_Alltoallv`.
///
/// # Safety
///
/// The arguments follow `MPI_Alltoallv`'s contract.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoallv(
    c: &Comm,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: Handle,
) -> Result<Started, MpiError> {
    let n = c.size() as usize;
    // SAFETY: the caller's arrays of `size` ints.
    let rps = unsafe { parts(recvcounts, rdispls, recvtype, n) }?;
    let sps = if in_place(sendbuf) {
        None
    } else {
        // SAFETY: the caller's arrays of `size` ints.
        Some(unsafe { parts(sendcounts, sdispls, sendtype, n) }?)
    };
    alltoall_parts(c, TAG_ALLTOALLV, sendbuf, sps, recvbuf, rps)
}

/// `(offset, length)` in bytes of each rank's part: `counts[i]` elements of `types[i]` at
/// byte displacement `displs[i]`.
///
/// # Safety
///
/// The three arrays hold `n` entries.
pub(crate) unsafe fn parts_w(
    counts: *const c_int,
    displs: *const c_int,
    types: *const Handle,
    n: usize,
) -> Result<Vec<(usize, usize)>, MpiError> {
    if counts.is_null() || displs.is_null() || types.is_null() {
        return Err(MpiError::new(
            err::ARG,
            "counts, displacements or types are NULL",
        ));
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the caller's arrays of `n` entries.
        let (c, d, t) = unsafe { (*counts.add(i), *displs.add(i), *types.add(i)) };
        let len = bytes(c, t)?;
        if d < 0 {
            return Err(MpiError::new(
                err::ARG,
                format!("displacement {d} is negative"),
            ));
        }
        v.push((d as usize, len));
    }
    Ok(v)
}

/// Starts `MPI_Alltoallw`.
///
/// # Safety
///
/// The arguments follow `MPI_Alltoallw`'s contract.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoallw(
    c: &Comm,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const Handle,
) -> Result<Started, MpiError> {
    let n = c.size() as usize;
    // SAFETY: the caller's arrays of `size` entries.
    let rps = unsafe { parts_w(recvcounts, rdispls, recvtypes, n) }?;
    let sps = if in_place(sendbuf) {
        None
    } else {
        // SAFETY: the caller's arrays of `size` entries.
        Some(unsafe { parts_w(sendcounts, sdispls, sendtypes, n) }?)
    };
    alltoall_parts(c, TAG_ALLTOALLW, sendbuf, sps, recvbuf, rps)
}

/// `MPI_Scan`/`MPI_Exscan` with the program's operation: each rank receives the whole
/// contributions of the ranks below it and folds them in rank order, so the program's function
/// sees whole buffers of `count` elements (the chain of [`scan`] applies it to each piece as it
/// arrives; MPICH calls it once per buffer, and programs rely on that count).
fn whole_scan(
    c: &Comm,
    tag: u32,
    own: Vec<u8>,
    recvbuf: *mut c_void,
    red: viaduct_agent::xfer::Reduction,
    exclusive: bool,
) -> Result<Started, MpiError> {
    let (me, n, len) = (c.rank() as usize, c.size() as usize, own.len());
    let sends: Vec<(usize, usize)> = (0..n)
        .map(|i| if i > me { (0, len) } else { (0, 0) })
        .collect();
    let recvs: Vec<(usize, usize)> = (0..n)
        .map(|i| if i < me { (i * len, len) } else { (0, 0) })
        .collect();
    let mine = own.clone();
    let post: Deliver = Box::new(move |got: &[u8], out: &mut [u8]| {
        let below = |i: usize| got.get(i * len..(i + 1) * len);
        let mut acc = if exclusive {
            match me.checked_sub(1).and_then(below) {
                Some(b) => b.to_vec(),
                // Rank 0 of MPI_Exscan: the receive buffer stays as it was.
                None => return,
            }
        } else {
            own
        };
        let top = if exclusive { me.saturating_sub(1) } else { me };
        for i in (0..top).rev() {
            if let Some(x) = below(i) {
                red.combine(x, &mut acc);
            }
        }
        let k = acc.len().min(out.len());
        out[..k].copy_from_slice(&acc[..k]);
    });
    let mut st = exchange(c, tag, mine, &sends, me * len, &recvs, recvbuf, post)?;
    st.len = len;
    Ok(st)
}

/// Starts `MPI_Scan` (`exclusive`: `MPI_Exscan`): a chain of gather blocks; each rank
/// combines the prefix from its left neighbour into its own data (in rank order: the
/// incoming prefix on the left) and forwards each combined piece. For `MPI_Exscan` each rank
/// receives its left neighbour's prefix twice, once kept (its result) and once combined and
/// forwarded; rank 0's receive buffer is left as it is.
///
/// # Safety
///
/// The arguments follow `MPI_Scan`'s contract.
unsafe fn scan(
    c: &Comm,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    exclusive: bool,
) -> Result<Started, MpiError> {
    let len = bytes(count, datatype)?;
    let red = reduction(datatype, op)?;
    // SAFETY: the caller's receive buffer of `count` elements.
    let out = unsafe { output(recvbuf, len) }?;
    let own = if in_place(sendbuf) {
        out.to_vec()
    } else {
        // SAFETY: the caller's send buffer of `count` elements.
        unsafe { input(sendbuf, len) }?.to_vec()
    };
    if !exclusive {
        out.copy_from_slice(&own);
    }
    let (r, n) = (c.rank(), c.size());
    if len == 0 || n == 1 {
        return Ok(Started::nothing());
    }
    let tag = if exclusive { TAG_EXSCAN } else { TAG_SCAN };
    if matches!(red, viaduct_agent::xfer::Reduction::User { .. }) {
        return whole_scan(c, tag, own, recvbuf, red, exclusive);
    }
    let mut b = c.xfer_gather((r + 1 < n).then_some(r + 1), tag);
    let kept = exclusive.then(|| b.buffer(vec![0; len]));
    let acc = b.buffer(own);
    if r > 0 {
        if let Some(k) = kept {
            b.recv_op(k, 0, len, r - 1);
        }
        b.recv_mop_op(acc, 0, len, red, r - 1);
    }
    if r + 1 < n {
        b.send_op(acc, 0, len);
        if exclusive {
            b.send_op(acc, 0, len);
        }
    }
    let (req, bufs) = b.start()?;
    let result = if r == 0 {
        None
    } else {
        Some((bufs, kept.unwrap_or(acc)))
    };
    Ok(Started {
        req,
        extra: Vec::new(),
        result,
        dst: recvbuf as usize,
        len,
        post: Some(Box::new(|got: &[u8], out: &mut [u8]| {
            let k = got.len().min(out.len());
            out[..k].copy_from_slice(&got[..k]);
        })),
        finish: None,
        staged: None,
    })
}

mpi_fn! {
    /// `MPI_Gatherv` (`MPI_IN_PLACE` as `sendbuf` at the root).
    MPI_Gatherv / PMPI_Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int, comm: Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, Some(root), crate::alias::Arg::Whole(crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: false }), crate::alias::Arg::Parts { ptr: recvbuf, counts: recvcounts, displs, types: crate::alias::PartTypes::One(recvtype) }) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Gatherv { sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root }, comm, None) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_recvbuf = unsafe { crate::displs::rebase(c.comm.rank() as c_int == root, recvbuf as usize, recvcounts, displs, c.comm.size() as usize, crate::displs::unit(recvtype)) }?;
        let (recvbuf, displs) = (rb_recvbuf.0 as *mut c_void, crate::displs::pass(&rb_recvbuf, displs));
        // SAFETY: the caller's arguments.
        if let Some(h) = unsafe { crate::holesv::gatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root) } {
            return h?.run();
        }
        // SAFETY: the caller's arguments.
        unsafe { gatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root) }?.run()
    }
}

mpi_fn! {
    /// `MPI_Igatherv`.
    MPI_Igatherv / PMPI_Igatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, Some(root), crate::alias::Arg::Whole(crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: false }), crate::alias::Arg::Parts { ptr: recvbuf, counts: recvcounts, displs, types: crate::alias::PartTypes::One(recvtype) }) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Gatherv { sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root }, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_recvbuf = unsafe { crate::displs::rebase(c.comm.rank() as c_int == root, recvbuf as usize, recvcounts, displs, c.comm.size() as usize, crate::displs::unit(recvtype)) }?;
        let (recvbuf, displs) = (rb_recvbuf.0 as *mut c_void, crate::displs::pass(&rb_recvbuf, displs));
        // SAFETY: the caller's arguments and handle.
        unsafe {
            if let Some(h) = crate::holesv::gatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root) {
                return h?.give(comm, request);
            }
            gatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root)?.give(comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Scatterv` (`MPI_IN_PLACE` as `recvbuf` at the root).
    MPI_Scatterv / PMPI_Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, Some(root), crate::alias::Arg::Parts { ptr: sendbuf, counts: sendcounts, displs, types: crate::alias::PartTypes::One(sendtype) }, crate::alias::Arg::Whole(crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: false })) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Scatterv { sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root }, comm, None) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_sendbuf = unsafe { crate::displs::rebase(c.comm.rank() as c_int == root, sendbuf as usize, sendcounts, displs, c.comm.size() as usize, crate::displs::unit(sendtype)) }?;
        let (sendbuf, displs) = (rb_sendbuf.0 as *const c_void, crate::displs::pass(&rb_sendbuf, displs));
        // SAFETY: the caller's arguments.
        if let Some(h) = unsafe { crate::holesv::scatterv(&c.comm, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root) } {
            return h?.run();
        }
        // SAFETY: the caller's arguments.
        unsafe { scatterv(&c.comm, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root) }?.run()
    }
}

mpi_fn! {
    /// `MPI_Iscatterv`.
    MPI_Iscatterv / PMPI_Iscatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, Some(root), crate::alias::Arg::Parts { ptr: sendbuf, counts: sendcounts, displs, types: crate::alias::PartTypes::One(sendtype) }, crate::alias::Arg::Whole(crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: false })) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Scatterv { sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root }, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_sendbuf = unsafe { crate::displs::rebase(c.comm.rank() as c_int == root, sendbuf as usize, sendcounts, displs, c.comm.size() as usize, crate::displs::unit(sendtype)) }?;
        let (sendbuf, displs) = (rb_sendbuf.0 as *const c_void, crate::displs::pass(&rb_sendbuf, displs));
        // SAFETY: the caller's arguments and handle.
        unsafe {
            if let Some(h) = crate::holesv::scatterv(&c.comm, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root) {
                return h?.give(comm, request);
            }
            scatterv(&c.comm, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root)?.give(comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Allgatherv` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Allgatherv / PMPI_Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, None, crate::alias::Arg::Whole(crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: false }), crate::alias::Arg::Parts { ptr: recvbuf, counts: recvcounts, displs, types: crate::alias::PartTypes::One(recvtype) }) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Allgatherv { sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype }, comm, None) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_recvbuf = unsafe { crate::displs::rebase(true, recvbuf as usize, recvcounts, displs, c.comm.size() as usize, crate::displs::unit(recvtype)) }?;
        let (recvbuf, displs) = (rb_recvbuf.0 as *mut c_void, crate::displs::pass(&rb_recvbuf, displs));
        // SAFETY: the caller's arguments.
        if let Some(h) = unsafe { crate::holesv::allgatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype) } {
            return h?.run();
        }
        // SAFETY: the caller's arguments.
        if let Some(done) = unsafe { small_allgatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype) } {
            return done;
        }
        // SAFETY: the caller's arguments.
        unsafe { allgatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype) }?.run()
    }
}

mpi_fn! {
    /// `MPI_Iallgatherv`.
    MPI_Iallgatherv / PMPI_Iallgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, None, crate::alias::Arg::Whole(crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: false }), crate::alias::Arg::Parts { ptr: recvbuf, counts: recvcounts, displs, types: crate::alias::PartTypes::One(recvtype) }) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Allgatherv { sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype }, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_recvbuf = unsafe { crate::displs::rebase(true, recvbuf as usize, recvcounts, displs, c.comm.size() as usize, crate::displs::unit(recvtype)) }?;
        let (recvbuf, displs) = (rb_recvbuf.0 as *mut c_void, crate::displs::pass(&rb_recvbuf, displs));
        // SAFETY: the caller's arguments and handle.
        unsafe {
            if let Some(h) = crate::holesv::allgatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype) {
                return h?.give(comm, request);
            }
            allgatherv(&c.comm, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype)?.give(comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Alltoallv` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Alltoallv / PMPI_Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, None, crate::alias::Arg::Parts { ptr: sendbuf, counts: sendcounts, displs: sdispls, types: crate::alias::PartTypes::One(sendtype) }, crate::alias::Arg::Parts { ptr: recvbuf, counts: recvcounts, displs: rdispls, types: crate::alias::PartTypes::One(recvtype) }) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Alltoall { w: false, sendbuf, sendcounts, sdispls, sendtype, sendtypes: std::ptr::null(), recvbuf, recvcounts, rdispls, recvtype, recvtypes: std::ptr::null() }, comm, None) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_sendbuf = unsafe { crate::displs::rebase(true, sendbuf as usize, sendcounts, sdispls, c.comm.size() as usize, crate::displs::unit(sendtype)) }?;
        let (sendbuf, sdispls) = (rb_sendbuf.0 as *const c_void, crate::displs::pass(&rb_sendbuf, sdispls));
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_recvbuf = unsafe { crate::displs::rebase(true, recvbuf as usize, recvcounts, rdispls, c.comm.size() as usize, crate::displs::unit(recvtype)) }?;
        let (recvbuf, rdispls) = (rb_recvbuf.0 as *mut c_void, crate::displs::pass(&rb_recvbuf, rdispls));
        // SAFETY: the caller's arguments.
        if let Some(h) = unsafe { crate::holesv::alltoall_vw(&c.comm, sendbuf, sendcounts, sdispls, Types::One(sendtype), recvbuf, recvcounts, rdispls, Types::One(recvtype)) } {
            return h?.run();
        }
        // SAFETY: the caller's arguments.
        unsafe { alltoallv(&c.comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype) }?.run()
    }
}

mpi_fn! {
    /// `MPI_Ialltoallv`.
    MPI_Ialltoallv / PMPI_Ialltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, None, crate::alias::Arg::Parts { ptr: sendbuf, counts: sendcounts, displs: sdispls, types: crate::alias::PartTypes::One(sendtype) }, crate::alias::Arg::Parts { ptr: recvbuf, counts: recvcounts, displs: rdispls, types: crate::alias::PartTypes::One(recvtype) }) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Alltoall { w: false, sendbuf, sendcounts, sdispls, sendtype, sendtypes: std::ptr::null(), recvbuf, recvcounts, rdispls, recvtype, recvtypes: std::ptr::null() }, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_sendbuf = unsafe { crate::displs::rebase(true, sendbuf as usize, sendcounts, sdispls, c.comm.size() as usize, crate::displs::unit(sendtype)) }?;
        let (sendbuf, sdispls) = (rb_sendbuf.0 as *const c_void, crate::displs::pass(&rb_sendbuf, sdispls));
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_recvbuf = unsafe { crate::displs::rebase(true, recvbuf as usize, recvcounts, rdispls, c.comm.size() as usize, crate::displs::unit(recvtype)) }?;
        let (recvbuf, rdispls) = (rb_recvbuf.0 as *mut c_void, crate::displs::pass(&rb_recvbuf, rdispls));
        // SAFETY: the caller's arguments and handle.
        unsafe {
            if let Some(h) = crate::holesv::alltoall_vw(&c.comm, sendbuf, sendcounts, sdispls, Types::One(sendtype), recvbuf, recvcounts, rdispls, Types::One(recvtype)) {
                return h?.give(comm, request);
            }
            alltoallv(&c.comm, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype)?.give(comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Alltoallw` (`MPI_IN_PLACE` as `sendbuf`): per-rank datatypes, byte displacements.
    MPI_Alltoallw / PMPI_Alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, None, crate::alias::Arg::Parts { ptr: sendbuf, counts: sendcounts, displs: sdispls, types: crate::alias::PartTypes::Each(sendtypes) }, crate::alias::Arg::Parts { ptr: recvbuf, counts: recvcounts, displs: rdispls, types: crate::alias::PartTypes::Each(recvtypes) }) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Alltoall { w: true, sendbuf, sendcounts, sdispls, sendtype: abi::DATATYPE_NULL, sendtypes, recvbuf, recvcounts, rdispls, recvtype: abi::DATATYPE_NULL, recvtypes }, comm, None) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_sendbuf = unsafe { crate::displs::rebase(true, sendbuf as usize, sendcounts, sdispls, c.comm.size() as usize, 1) }?;
        let (sendbuf, sdispls) = (rb_sendbuf.0 as *const c_void, crate::displs::pass(&rb_sendbuf, sdispls));
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_recvbuf = unsafe { crate::displs::rebase(true, recvbuf as usize, recvcounts, rdispls, c.comm.size() as usize, 1) }?;
        let (recvbuf, rdispls) = (rb_recvbuf.0 as *mut c_void, crate::displs::pass(&rb_recvbuf, rdispls));
        // SAFETY: the caller's arguments.
        if let Some(h) = unsafe { crate::holesv::alltoall_vw(&c.comm, sendbuf, sendcounts, sdispls, Types::Each(sendtypes), recvbuf, recvcounts, rdispls, Types::Each(recvtypes)) } {
            return h?.run();
        }
        // SAFETY: the caller's arguments.
        unsafe { alltoallw(&c.comm, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes) }?.run()
    }
}

mpi_fn! {
    /// `MPI_Ialltoallw`.
    MPI_Ialltoallw / PMPI_Ialltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, None, crate::alias::Arg::Parts { ptr: sendbuf, counts: sendcounts, displs: sdispls, types: crate::alias::PartTypes::Each(sendtypes) }, crate::alias::Arg::Parts { ptr: recvbuf, counts: recvcounts, displs: rdispls, types: crate::alias::PartTypes::Each(recvtypes) }) }?;
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::v_call(crate::internb::VCall::Alltoall { w: true, sendbuf, sendcounts, sdispls, sendtype: abi::DATATYPE_NULL, sendtypes, recvbuf, recvcounts, rdispls, recvtype: abi::DATATYPE_NULL, recvtypes }, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_sendbuf = unsafe { crate::displs::rebase(true, sendbuf as usize, sendcounts, sdispls, c.comm.size() as usize, 1) }?;
        let (sendbuf, sdispls) = (rb_sendbuf.0 as *const c_void, crate::displs::pass(&rb_sendbuf, sdispls));
        // SAFETY: the caller's arrays of one int per rank (where significant).
        let rb_recvbuf = unsafe { crate::displs::rebase(true, recvbuf as usize, recvcounts, rdispls, c.comm.size() as usize, 1) }?;
        let (recvbuf, rdispls) = (rb_recvbuf.0 as *mut c_void, crate::displs::pass(&rb_recvbuf, rdispls));
        // SAFETY: the caller's arguments and handle.
        unsafe {
            if let Some(h) = crate::holesv::alltoall_vw(&c.comm, sendbuf, sendcounts, sdispls, Types::Each(sendtypes), recvbuf, recvcounts, rdispls, Types::Each(recvtypes)) {
                return h?.give(comm, request);
            }
            alltoallw(&c.comm, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes)?.give(comm, request)
        }
    }
}

mpi_fn! {
    /// `MPI_Scan` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Scan / PMPI_Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count, datatype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::scan(sendbuf, recvbuf, count, datatype, op, comm, false, None) } {
            return done;
        }
        let c = rt()?.intra(comm)?;
        // SAFETY: the caller's arguments.
        unsafe { scan(&c.comm, sendbuf, recvbuf, count, datatype, op, false) }?.run()
    }
}

mpi_fn! {
    /// `MPI_Iscan`.
    MPI_Iscan / PMPI_Iscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count, datatype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::scan(sendbuf, recvbuf, count, datatype, op, comm, false, Some(request)) } {
            return done;
        }
        let c = rt()?.intra(comm)?;
        // SAFETY: the caller's arguments and handle.
        unsafe { scan(&c.comm, sendbuf, recvbuf, count, datatype, op, false)?.give(comm, request) }
    }
}

mpi_fn! {
    /// `MPI_Exscan` (`MPI_IN_PLACE` as `sendbuf`); rank 0's receive buffer is left as it is.
    MPI_Exscan / PMPI_Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count, datatype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::scan(sendbuf, recvbuf, count, datatype, op, comm, true, None) } {
            return done;
        }
        let c = rt()?.intra(comm)?;
        // SAFETY: the caller's arguments.
        unsafe { scan(&c.comm, sendbuf, recvbuf, count, datatype, op, true) }?.run()
    }
}

mpi_fn! {
    /// `MPI_Iexscan`.
    MPI_Iexscan / PMPI_Iexscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count, datatype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::scan(sendbuf, recvbuf, count, datatype, op, comm, true, Some(request)) } {
            return done;
        }
        let c = rt()?.intra(comm)?;
        // SAFETY: the caller's arguments and handle.
        unsafe { scan(&c.comm, sendbuf, recvbuf, count, datatype, op, true)?.give(comm, request) }
    }
}

/// The agent's allreduce of `all` (`count` elements per rank in total), then this rank's
/// block `first..first + len` into `out`.
fn reduce_then_pick(
    c: &Comm,
    mut all: Vec<u8>,
    datatype: Handle,
    op: Handle,
    first: usize,
    out: &mut [u8],
) -> Result<(), MpiError> {
    let red = reduction(datatype, op)?;
    crate::coll::allreduce(c, &mut all, &red, crate::op::commutes(op))?;
    let len = out.len();
    out.copy_from_slice(&all[first..first + len]);
    Ok(())
}

mpi_fn! {
    /// `MPI_Reduce_scatter_block` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle, op: Handle, comm: Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count: recvcount, datatype, per_rank: true }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::reduce_scatter_call(sendbuf, recvbuf, None, recvcount, datatype, op, comm, None) } {
            return done;
        }
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::reduce_scatter(sendbuf, recvbuf, None, recvcount, datatype, op, comm, None) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
        let (me, n) = (c.rank() as usize, c.size() as usize);
        let part = bytes(recvcount, datatype)?;
        let all = if in_place(sendbuf) {
            // SAFETY: the caller's receive buffer holds every rank's input here.
            unsafe { input(recvbuf, part * n) }?.to_vec()
        } else {
            // SAFETY: the caller's send buffer of `size * recvcount` elements.
            unsafe { input(sendbuf, part * n) }?.to_vec()
        };
        // SAFETY: the caller's receive buffer of `recvcount` elements.
        let out = unsafe { output(recvbuf, part) }?;
        reduce_then_pick(c, all, datatype, op, me * part, out)
    }
}

mpi_fn! {
    /// `MPI_Reduce_scatter` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Reduce_scatter / PMPI_Reduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Handle, op: Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, None, crate::alias::Arg::Packed { ptr: sendbuf, counts: recvcounts, datatype }, crate::alias::Arg::Mine { ptr: recvbuf, counts: recvcounts, datatype }) }?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::reduce_scatter_call(sendbuf, recvbuf, Some(recvcounts), 0, datatype, op, comm, None) } {
            return done;
        }
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::reduce_scatter(sendbuf, recvbuf, Some(recvcounts), 0, datatype, op, comm, None) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
        let (me, n) = (c.rank() as usize, c.size() as usize);
        if recvcounts.is_null() {
            return Err(MpiError::new(err::ARG, "recvcounts is NULL"));
        }
        let mut lens = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: the caller's array of `size` ints.
            lens.push(bytes(unsafe { *recvcounts.add(i) }, datatype)?);
        }
        let total: usize = lens.iter().sum();
        let first: usize = lens[..me].iter().sum();
        let all = if in_place(sendbuf) {
            // SAFETY: the caller's receive buffer holds every rank's input here.
            unsafe { input(recvbuf, total) }?.to_vec()
        } else {
            // SAFETY: the caller's send buffer of the sum of the counts.
            unsafe { input(sendbuf, total) }?.to_vec()
        };
        // SAFETY: the caller's receive buffer of this rank's count.
        let out = unsafe { output(recvbuf, lens[me]) }?;
        reduce_then_pick(c, all, datatype, op, first, out)
    }
}

/// Starts the reduction of `all` (every rank's full input) and registers a request whose
/// completion puts this rank's block `first..first + len` into `recvbuf`.
///
/// # Safety
///
/// `recvbuf` holds `len` bytes until completion; `request` is the caller's handle.
#[allow(clippy::too_many_arguments)]
unsafe fn ireduce_then_pick(
    comm: Handle,
    c: &Comm,
    all: Vec<u8>,
    datatype: Handle,
    op: Handle,
    first: usize,
    recvbuf: *mut c_void,
    len: usize,
    request: *mut Handle,
) -> Result<(), MpiError> {
    let red = reduction(datatype, op)?;
    let total = all.len();
    let (started, post): (_, crate::request::Post) = if crate::op::commutes(op) {
        let s = c.iallreduce(all, &red)?;
        (
            s,
            Box::new(move |v: &[u8]| v[first.min(v.len())..(first + len).min(v.len())].to_vec()),
        )
    } else {
        let s = c.iallgather(all)?;
        (
            s,
            Box::new(move |v: &[u8]| {
                let mut r = vec![0u8; total];
                crate::op::fold(&red, v, &mut r);
                r[first..first + len].to_vec()
            }),
        )
    };
    let (r, b) = started;
    // SAFETY: the caller's buffer and handle.
    unsafe { crate::coll::give_with(comm, (r, Some(b)), recvbuf, len, request, Some(post)) }
}

mpi_fn! {
    /// `MPI_Ireduce_scatter_block` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count: recvcount, datatype, per_rank: true }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::reduce_scatter_call(sendbuf, recvbuf, None, recvcount, datatype, op, comm, Some(request)) } {
            return done;
        }
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::reduce_scatter(sendbuf, recvbuf, None, recvcount, datatype, op, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
        let (me, n) = (c.rank() as usize, c.size() as usize);
        let part = bytes(recvcount, datatype)?;
        let src: *const c_void = if in_place(sendbuf) { recvbuf } else { sendbuf };
        // SAFETY: the caller's buffer of `size * recvcount` elements.
        let all = unsafe { input(src, part * n) }?.to_vec();
        // SAFETY: the caller's receive buffer and handle.
        unsafe { ireduce_then_pick(comm, c, all, datatype, op, me * part, recvbuf, part, request) }
    }
}

mpi_fn! {
    /// `MPI_Ireduce_scatter` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Ireduce_scatter / PMPI_Ireduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arrays of one entry per rank (or NULL).
        unsafe { crate::alias::check_args(comm, None, crate::alias::Arg::Packed { ptr: sendbuf, counts: recvcounts, datatype }, crate::alias::Arg::Mine { ptr: recvbuf, counts: recvcounts, datatype }) }?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::reduce_scatter_call(sendbuf, recvbuf, Some(recvcounts), 0, datatype, op, comm, Some(request)) } {
            return done;
        }
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::reduce_scatter(sendbuf, recvbuf, Some(recvcounts), 0, datatype, op, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
        let (me, n) = (c.rank() as usize, c.size() as usize);
        if recvcounts.is_null() {
            return Err(MpiError::new(err::ARG, "recvcounts is NULL"));
        }
        let mut lens = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: the caller's array of `size` ints.
            lens.push(bytes(unsafe { *recvcounts.add(i) }, datatype)?);
        }
        let total: usize = lens.iter().sum();
        let first: usize = lens[..me].iter().sum();
        let src: *const c_void = if in_place(sendbuf) { recvbuf } else { sendbuf };
        // SAFETY: the caller's buffer of the sum of the counts.
        let all = unsafe { input(src, total) }?.to_vec();
        // SAFETY: the caller's receive buffer and handle.
        unsafe { ireduce_then_pick(comm, c, all, datatype, op, first, recvbuf, lens[me], request) }
    }
}
