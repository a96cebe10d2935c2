//! Collectives on datatypes with holes (a vector, a struct with gaps, a pair type with
//! padding): `MPI_Bcast`, `MPI_Gather`, `MPI_Scatter`, `MPI_Allgather` and `MPI_Alltoall`
//! and their nonblocking forms move bytes, so a buffer of such a datatype is packed into a
//! contiguous copy, the collective runs on the copy as `MPI_BYTE`, and a receiving buffer is
//! unpacked from it afterwards (a nonblocking call's request unpacks its result when it
//! completes; its inputs were copied when it started). Each
//! function here returns `None` when no buffer of the call has holes (the byte form then runs
//! as it is), else the outcome of the packed call. The byte form reports errors as its own
//! (run [`quietly`]): its caller reports them once, through its error handler.
//!
//! Type signatures match byte for byte when MPI's rule holds (the sender's `count` elements
//! of its type carry as many bytes of data as the receiver's), so a packed side meets a plain
//! one.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::abi::{self, Handle, dt, err};
use crate::error::{MpiError, quietly};
use crate::p2p::{Data, data_of};
use crate::state::rt;
use crate::types::Layout;

/// The layout of `t` when `count` elements of it have holes (`None` for a datatype without,
/// or one the byte form will refuse with its own error).
pub(crate) fn holes(count: c_int, t: Handle) -> Option<Arc<Layout>> {
    match data_of(count, t) {
        Ok(Data::Packed(l, _, _)) if count > 0 => Some(l),
        _ => None,
    }
}

pub(crate) fn in_place(p: *const c_void) -> bool {
    p as usize == abi::IN_PLACE
}

/// A byte count as the `int` of the byte form.
pub(crate) fn int_len(len: usize) -> Result<c_int, MpiError> {
    c_int::try_from(len).map_err(|_| {
        MpiError::new(
            err::COUNT,
            format!("{len} packed bytes do not fit the 32-bit counts of viaduct's MPI library"),
        )
    })
}

/// One buffer of a collective as the byte form sees it: a packed copy of `elems` elements of
/// `layout` at the caller's `user` buffer.
pub(crate) struct Packed {
    layout: Arc<Layout>,
    elems: usize,
    user: *mut c_void,
    /// The packed copy.
    pub(crate) bytes: Vec<u8>,
}

impl Packed {
    /// A packed copy of `elems` elements at `user` when `fill`, else zeros to receive into.
    ///
    /// # Safety
    ///
    /// With `fill`, `user` holds `elems` readable elements of `layout`.
    pub(crate) unsafe fn new(
        layout: Arc<Layout>,
        elems: usize,
        user: *const c_void,
        fill: bool,
    ) -> Self {
        let mut bytes = Vec::new();
        if fill {
            // SAFETY: the caller's buffer of `elems` elements (this function's contract).
            unsafe { layout.pack(user.cast(), elems, &mut bytes) };
        } else {
            bytes = vec![0; layout.size * elems];
        }
        Packed {
            layout,
            elems,
            user: user.cast_mut(),
            bytes,
        }
    }

    /// Pointer, count and datatype of the byte form.
    fn arg(&mut self) -> Result<(*mut c_void, c_int, Handle), MpiError> {
        Ok((
            self.bytes.as_mut_ptr().cast(),
            int_len(self.bytes.len())?,
            dt::BYTE,
        ))
    }

    /// This copy as the staged result of started blocks (`crate::vcoll::Started::staged`):
    /// they deliver into its bytes, which are then unpacked into the caller's buffer.
    pub(crate) fn into_staged(self) -> crate::vcoll::Staged {
        crate::vcoll::Staged {
            bytes: self.bytes,
            layout: self.layout,
            elems: self.elems,
            user: self.user as usize,
        }
    }

    /// Unpacks the received bytes into the caller's buffer.
    ///
    /// # Safety
    ///
    /// `user` holds `elems` writable elements of the layout.
    unsafe fn unpack(&self) {
        // SAFETY: this function's contract.
        unsafe {
            self.layout
                .unpack(&self.bytes, self.user.cast(), self.elems)
        };
    }
}

/// What a started collective does with a packed receive buffer `p`: a blocking call
/// (`request` `None`) unpacks it now; a nonblocking one has its request unpack the result into
/// the caller's buffer when it completes. With `give_only`, this rank receives nothing (the
/// root of a broadcast): its request then leaves the caller's buffer alone, as the byte form
/// would copy the result into the packed copy, gone by then. Nothing is done for `p` `None`
/// otherwise: the byte form received into the caller's buffer itself.
///
/// # Safety
///
/// `p`'s caller's buffer holds its elements, writable now (blocking) or until the request
/// completes; `request` is the handle the nonblocking byte form wrote.
pub(crate) unsafe fn finish(
    p: Option<&Packed>,
    request: Option<*mut Handle>,
    give_only: bool,
) -> Result<(), MpiError> {
    let Some(request) = request else {
        if let Some(p) = p {
            // SAFETY: this function's contract.
            unsafe { p.unpack() };
        }
        return Ok(());
    };
    if p.is_none() && !give_only {
        return Ok(());
    }
    // SAFETY: the handle the byte form wrote.
    let h = unsafe { *request };
    let rt = rt()?;
    let mut e = rt.take_request(h)?;
    if let crate::request::Meta::Coll {
        dst, len, unpack, ..
    } = &mut e.meta
    {
        match p {
            Some(p) => {
                *dst = p.user as usize;
                *len = p.bytes.len();
                *unpack = Some((Arc::clone(&p.layout), p.elems));
            }
            None => {
                *dst = 0;
                *len = 0;
            }
        }
    }
    rt.put_request(h, e);
    Ok(())
}

/// This rank's place in a rooted collective on `comm`: whether it gives the root's data and
/// whether it receives from the root, and the ranks the root serves.
fn rooted(comm: Handle, root: c_int) -> Result<(bool, bool, usize), MpiError> {
    let c = rt()?.comm_any(comm)?;
    Ok(match &c.inter {
        Some(ic) => (root == abi::ROOT, root >= 0, ic.remote.size() as usize),
        None => {
            let me = c.comm.rank() as c_int;
            (root == me, root >= 0 && root != me, c.comm.size() as usize)
        }
    })
}

/// Ranks whose parts this rank's all-to-all buffers hold.
fn peers(comm: Handle) -> Result<usize, MpiError> {
    let c = rt()?.comm_any(comm)?;
    Ok(match &c.inter {
        Some(ic) => ic.remote.size() as usize,
        None => c.comm.size() as usize,
    })
}

/// `MPI_Bcast` on a datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Bcast`.
pub(crate) unsafe fn bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: Handle,
    root: c_int,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    let l = holes(count, datatype)?;
    Some((|| {
        let (gives, receives, _) = rooted(comm, root)?;
        // SAFETY: the root's buffer holds `count` elements.
        let mut p = unsafe { Packed::new(l, count as usize, buffer, gives) };
        let (b, n, t) = p.arg()?;
        // SAFETY: a buffer of `n` bytes of this frame (a nonblocking call copies it).
        quietly(|| unsafe {
            match request {
                None => crate::coll::PMPI_Bcast(b, n, t, root, comm),
                Some(r) => crate::coll::PMPI_Ibcast(b, n, t, root, comm, r),
            }
        })?;
        // SAFETY: the caller's buffer of `count` elements; the handle just written.
        unsafe { finish(receives.then_some(&p), request, !receives) }
    })())
}

/// `MPI_Gather` with a send or receive datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Gather`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    root: c_int,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    let sl = holes(sendcount, sendtype).filter(|_| !in_place(sendbuf));
    let rl = holes(recvcount, recvtype);
    if sl.is_none() && rl.is_none() {
        return None;
    }
    Some((|| {
        let (is_root, _, n) = rooted(comm, root)?;
        let mut send = None;
        let (mut sb, mut sc, mut st) = (sendbuf.cast_mut(), sendcount, sendtype);
        if let Some(l) = sl {
            if root != abi::ROOT && root != abi::PROC_NULL {
                // SAFETY: the caller's send buffer of `sendcount` elements.
                let p = send.insert(unsafe { Packed::new(l, sendcount as usize, sendbuf, true) });
                (sb, sc, st) = p.arg()?;
            } else {
                // Not read here: a type without holes, so the byte form does not come back.
                st = dt::BYTE;
            }
        }
        let mut recv = None;
        let (mut rb, mut rc, mut rty) = (recvbuf, recvcount, recvtype);
        if let Some(l) = rl {
            if is_root {
                let elems = n * recvcount as usize;
                // In place, the root's own part is in its receive buffer already.
                // SAFETY: the root's receive buffer of `n * recvcount` elements.
                let p = recv.insert(unsafe { Packed::new(l, elems, recvbuf, in_place(sendbuf)) });
                (rb, rc, rty) = p.arg()?;
                rc /= n as c_int;
            } else {
                // Not written here (as above).
                rty = dt::BYTE;
            }
        }
        // SAFETY: the caller's buffers, or packed copies of this frame.
        quietly(|| unsafe {
            match request {
                None => crate::coll::PMPI_Gather(sb, sc, st, rb, rc, rty, root, comm),
                Some(r) => crate::coll::PMPI_Igather(sb, sc, st, rb, rc, rty, root, comm, r),
            }
        })?;
        // SAFETY: the caller's receive buffer; the handle just written.
        unsafe { finish(recv.as_ref(), request, false) }
    })())
}

/// `MPI_Scatter` with a send or receive datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Scatter`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    root: c_int,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    let sl = holes(sendcount, sendtype);
    let rl = holes(recvcount, recvtype).filter(|_| !in_place(recvbuf));
    if sl.is_none() && rl.is_none() {
        return None;
    }
    Some((|| {
        let (is_root, _, n) = rooted(comm, root)?;
        let mut send = None;
        let (mut sb, mut sc, mut st) = (sendbuf.cast_mut(), sendcount, sendtype);
        if let Some(l) = sl {
            if is_root {
                // SAFETY: the root's send buffer of `n * sendcount` elements.
                let p =
                    send.insert(unsafe { Packed::new(l, n * sendcount as usize, sendbuf, true) });
                (sb, sc, st) = p.arg()?;
                sc /= n as c_int;
            } else {
                // Not read here: a type without holes, so the byte form does not come back.
                st = dt::BYTE;
            }
        }
        let mut recv = None;
        let (mut rb, mut rc, mut rty) = (recvbuf, recvcount, recvtype);
        if let Some(l) = rl {
            if root != abi::ROOT && root != abi::PROC_NULL {
                // SAFETY: zeros to receive into; the caller's buffer is written afterwards.
                let p = recv.insert(unsafe { Packed::new(l, recvcount as usize, recvbuf, false) });
                (rb, rc, rty) = p.arg()?;
            } else {
                // Not written here (as above).
                rty = dt::BYTE;
            }
        }
        // SAFETY: the caller's buffers, or packed copies of this frame.
        quietly(|| unsafe {
            match request {
                None => crate::coll::PMPI_Scatter(sb, sc, st, rb, rc, rty, root, comm),
                Some(r) => crate::coll::PMPI_Iscatter(sb, sc, st, rb, rc, rty, root, comm, r),
            }
        })?;
        // SAFETY: the caller's receive buffer; the handle just written.
        unsafe { finish(recv.as_ref(), request, false) }
    })())
}

/// The send and receive sides of an all-to-all pattern (`parts` parts of `sendcount`
/// elements sent; `parts` of `recvcount` received): packed where their datatypes have holes;
/// `MPI_IN_PLACE` packs the receive buffer whole, as it is the send buffer too.
///
/// # Safety
///
/// The caller's buffers of those many elements.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
unsafe fn both_sides(
    sendbuf: *const c_void,
    send_elems: usize,
    sendtype: Handle,
    sl: Option<Arc<Layout>>,
    recvbuf: *mut c_void,
    recv_elems: usize,
    rl: Option<Arc<Layout>>,
    recvtype: Handle,
) -> Result<
    (
        Option<Packed>,
        Option<Packed>,
        (*mut c_void, Handle),
        (*mut c_void, Handle),
    ),
    MpiError,
> {
    let mut send = None;
    let mut s = (sendbuf.cast_mut(), sendtype);
    if let Some(l) = sl {
        // SAFETY: the caller's send buffer (this function's contract).
        let p = send.insert(unsafe { Packed::new(l, send_elems, sendbuf, true) });
        s = (p.arg()?.0, dt::BYTE);
    }
    let mut recv = None;
    let mut r = (recvbuf, recvtype);
    if let Some(l) = rl {
        // SAFETY: the caller's receive buffer (this function's contract).
        let p = recv.insert(unsafe { Packed::new(l, recv_elems, recvbuf, in_place(sendbuf)) });
        r = (p.arg()?.0, dt::BYTE);
    }
    Ok((send, recv, s, r))
}

/// The count of one part of `p` (packed) or `count` (not).
fn part_count(p: &Option<Packed>, parts: usize, count: c_int) -> Result<c_int, MpiError> {
    match p {
        Some(p) => Ok(int_len(p.bytes.len())? / parts.max(1) as c_int),
        None => Ok(count),
    }
}

/// `MPI_Allgather` with a send or receive datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Allgather`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    // SAFETY: passed on as given.
    unsafe {
        to_all(
            false, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
        )
    }
}

/// `MPI_Alltoall` with a send or receive datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Alltoall`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    // SAFETY: passed on as given.
    unsafe {
        to_all(
            true, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request,
        )
    }
}

/// `MPI_Allgather` (`alltoall` false: one part sent to every rank) or `MPI_Alltoall` (a part
/// for each rank), blocking or not, with a send or receive datatype with holes; every rank
/// receives one part from each rank.
///
/// # Safety
///
/// The caller's arguments to the call.
#[allow(clippy::too_many_arguments)]
unsafe fn to_all(
    alltoall: bool,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    let sl = holes(sendcount, sendtype).filter(|_| !in_place(sendbuf));
    let rl = holes(recvcount, recvtype);
    if sl.is_none() && rl.is_none() {
        return None;
    }
    Some((|| {
        let n = peers(comm)?;
        let sent_parts = if alltoall { n } else { 1 };
        let sparts = sent_parts * sendcount.max(0) as usize;
        let rparts = n * recvcount.max(0) as usize;
        // SAFETY: the caller's buffers of those many elements.
        let (send, recv, s, r) =
            unsafe { both_sides(sendbuf, sparts, sendtype, sl, recvbuf, rparts, rl, recvtype) }?;
        let sc = part_count(&send, sent_parts, sendcount)?;
        let rc = part_count(&recv, n, recvcount)?;
        // SAFETY: the caller's buffers, or packed copies of this frame.
        quietly(|| unsafe {
            use crate::coll::{PMPI_Allgather, PMPI_Alltoall, PMPI_Iallgather, PMPI_Ialltoall};
            match (request, alltoall) {
                (None, false) => PMPI_Allgather(s.0, sc, s.1, r.0, rc, r.1, comm),
                (None, true) => PMPI_Alltoall(s.0, sc, s.1, r.0, rc, r.1, comm),
                (Some(q), false) => PMPI_Iallgather(s.0, sc, s.1, r.0, rc, r.1, comm, q),
                (Some(q), true) => PMPI_Ialltoall(s.0, sc, s.1, r.0, rc, r.1, comm, q),
            }
        })?;
        // SAFETY: the caller's receive buffer; the handle just written.
        unsafe { finish(recv.as_ref(), request, false) }
    })())
}
