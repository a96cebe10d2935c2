//! Reductions by the program's operation on datatypes with holes (a struct with padding such
//! as `{double, int}`, a vector, a resized type): `MPI_Reduce`, `MPI_Allreduce`,
//! `MPI_Reduce_scatter_block`, `MPI_Reduce_scatter`, `MPI_Scan`, `MPI_Exscan` and the
//! nonblocking `MPI_Ireduce` and `MPI_Iallreduce` run their byte form on packed copies of the
//! buffers (as [`crate::holes`] does for the collectives that only move data; the
//! nonblocking `MPI_Iscan`, `MPI_Iexscan`, `MPI_Ireduce_scatter_block` and
//! `MPI_Ireduce_scatter` too, their requests unpacking the result when they complete), with two
//! stand-ins: a contiguous datatype of one packed element's bytes, and an operation
//! ([`crate::op::packed_op`]) that unpacks both sides into the datatype's layout, calls the
//! program's function on them with the program's datatype, and packs the result. The program's
//! function so sees its own datatype and layout, as MPICH calls it. Each function here returns
//! `None` where it does not apply (no holes, or a predefined operation, which the byte form
//! refuses on a derived datatype as MPICH 4.0.2 does; or, for the nonblocking forms, an
//! intercommunicator), else the outcome of the packed call; the byte form's errors are
//! reported once, by its caller.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::abi::{self, Handle, dt};
use crate::error::{MpiError, quietly};
use crate::holes::{Packed, finish, holes, in_place};
use crate::state::rt;
use crate::types::Layout;

/// The stand-ins of one call: the contiguous datatype and the operation, freed when dropped.
struct Stand {
    layout: Arc<Layout>,
    datatype: Handle,
    op: Handle,
}

impl Drop for Stand {
    fn drop(&mut self) {
        crate::op::forget(self.op);
        let mut t = self.datatype;
        // SAFETY: the stand-in datatype this frame made.
        let _ = quietly(|| unsafe { crate::types::PMPI_Type_free(&mut t) });
    }
}

/// The stand-ins for `count` elements of `t` reduced by `op`, where `t` has holes and `op` is
/// the program's.
fn stand(count: c_int, t: Handle, op: Handle) -> Option<Result<Stand, MpiError>> {
    let layout = holes(count, t)?;
    if !crate::op::is_user(op) {
        return None;
    }
    Some((|| {
        let size = c_int::try_from(layout.size).map_err(|_| {
            MpiError::new(
                abi::err::TYPE,
                format!("datatype {t:#x} holds more than 2^31 bytes of data per element"),
            )
        })?;
        let mut datatype = abi::DATATYPE_NULL;
        // SAFETY: this frame's handle.
        quietly(|| unsafe { crate::types::PMPI_Type_contiguous(size, dt::BYTE, &mut datatype) })?;
        // SAFETY: as above.
        quietly(|| unsafe { crate::types::PMPI_Type_commit(&mut datatype) })?;
        let Some(op) = crate::op::packed_op(op, t, Arc::clone(&layout)) else {
            let mut d = datatype;
            // SAFETY: the datatype just made.
            let _ = quietly(|| unsafe { crate::types::PMPI_Type_free(&mut d) });
            return Err(MpiError::new(
                abi::err::OP,
                format!("operation {op:#x} was freed"),
            ));
        };
        Ok(Stand {
            layout,
            datatype,
            op,
        })
    })())
}

/// A packed copy of `elems` elements at `user` (`fill`: with their data), or none.
///
/// # Safety
///
/// With `fill`, `user` holds `elems` readable elements of `s.layout`.
unsafe fn packed(s: &Stand, elems: usize, user: *const c_void, fill: bool) -> Packed {
    // SAFETY: this function's contract.
    unsafe { Packed::new(Arc::clone(&s.layout), elems, user, fill) }
}

/// The packed copy's address for the byte form (`alt` where there is none).
fn addr(p: &mut Option<Packed>, alt: *mut c_void) -> *mut c_void {
    p.as_mut().map_or(alt, |p| p.bytes.as_mut_ptr().cast())
}

/// Packed copies for a call where every rank sends and receives `count` elements: the send
/// buffer's (none in place) and the receive buffer's (with its data when `fill`), and the
/// addresses the byte form takes (`MPI_IN_PLACE` for no send copy). The addresses point into
/// the copies' heap buffers, which stay where they are while the copies live.
///
/// # Safety
///
/// `sendbuf` (unless `MPI_IN_PLACE`) and, with `fill`, `recvbuf` hold `count` readable
/// elements of `s.layout`.
unsafe fn send_and_receive(
    s: &Stand,
    count: c_int,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    fill: bool,
) -> (Option<Packed>, Option<Packed>, *mut c_void, *mut c_void) {
    let n = count as usize;
    // SAFETY: this function's contract.
    let (mut sp, mut rp) = unsafe {
        (
            (!in_place(sendbuf)).then(|| packed(s, n, sendbuf, true)),
            Some(packed(s, n, recvbuf, fill)),
        )
    };
    let sb = addr(&mut sp, abi::IN_PLACE as *mut c_void);
    let rb = addr(&mut rp, std::ptr::null_mut());
    (sp, rp, sb, rb)
}

/// Whether this module takes a call on `datatype` with `op`: a datatype with holes and the
/// program's operation. Checked first, so that every other reduction pays only this.
fn applies(datatype: Handle, op: Handle) -> bool {
    holes(1, datatype).is_some() && crate::op::is_user(op)
}

/// Whether `comm` is an intercommunicator, and this rank's rank in it (or in its local group).
fn shape(comm: Handle) -> Result<(bool, c_int, usize), MpiError> {
    let c = rt()?.comm_any(comm)?;
    Ok((
        c.inter.is_some(),
        c.comm.rank() as c_int,
        c.comm.size() as usize,
    ))
}

/// `MPI_Reduce` (`request` `None`) or `MPI_Ireduce` on a datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Reduce`/`MPI_Ireduce`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    root: c_int,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    if !applies(datatype, op) {
        return None;
    }
    let (inter, me, _) = shape(comm).ok()?;
    if inter && request.is_some() {
        return None;
    }
    let s = match stand(count, datatype, op)? {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        let n = count as usize;
        let (at_root, sends) = if inter {
            (root == abi::ROOT, root >= 0)
        } else {
            (root == me, true)
        };
        let inplace = at_root && in_place(sendbuf);
        // SAFETY: the caller's buffers of `count` elements where they are used.
        let (mut sp, mut rp) = unsafe {
            (
                (sends && !inplace).then(|| packed(&s, n, sendbuf, true)),
                at_root.then(|| packed(&s, n, recvbuf, inplace)),
            )
        };
        let alt = if inplace {
            abi::IN_PLACE as *mut c_void
        } else {
            std::ptr::null_mut()
        };
        let (sb, rb) = (addr(&mut sp, alt), addr(&mut rp, std::ptr::null_mut()));
        // SAFETY: packed buffers of `count` stand-in elements of this frame (a nonblocking
        // call copies its input when it starts).
        quietly(|| unsafe {
            match request {
                None => crate::coll::PMPI_Reduce(sb, rb, count, s.datatype, s.op, root, comm),
                Some(r) => {
                    crate::coll::PMPI_Ireduce(sb, rb, count, s.datatype, s.op, root, comm, r)
                }
            }
        })?;
        // SAFETY: the root's buffer of `count` elements; the handle just written.
        unsafe { finish(rp.as_ref(), request, false) }
    })())
}

/// `MPI_Allreduce` (`request` `None`) or `MPI_Iallreduce` on a datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Allreduce`/`MPI_Iallreduce`.
pub(crate) unsafe fn allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    if !applies(datatype, op) {
        return None;
    }
    let (inter, _, _) = shape(comm).ok()?;
    if inter && request.is_some() {
        return None;
    }
    let s = match stand(count, datatype, op)? {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        // SAFETY: the caller's buffers of `count` elements.
        let (_sp, rp, sb, rb) =
            unsafe { send_and_receive(&s, count, sendbuf, recvbuf, in_place(sendbuf)) };
        // SAFETY: packed buffers of `count` stand-in elements of this frame.
        quietly(|| unsafe {
            match request {
                None => crate::coll::PMPI_Allreduce(sb, rb, count, s.datatype, s.op, comm),
                Some(r) => crate::coll::PMPI_Iallreduce(sb, rb, count, s.datatype, s.op, comm, r),
            }
        })?;
        // SAFETY: the caller's buffer of `count` elements; the handle just written.
        unsafe { finish(rp.as_ref(), request, false) }
    })())
}

/// Hands packed receive copy `p` to the started blocks of request `h` (which were given its
/// bytes' address): they deliver into it and unpack it into the caller's buffer.
fn stage(p: Packed, h: Handle) -> Result<(), MpiError> {
    let rt = rt()?;
    let mut e = rt.take_request(h)?;
    if let crate::request::Meta::Blocks { started, .. } = &mut e.meta {
        let g = started.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(st) = g.take() {
            *g = Some(st.staged(p.into_staged()));
        }
    }
    rt.put_request(h, e);
    Ok(())
}

/// `MPI_Scan` (`exclusive`: `MPI_Exscan`; `request`: `MPI_Iscan`/`MPI_Iexscan`) on a
/// datatype with holes. The receive buffer is packed with its data, so rank 0's buffer of
/// `MPI_Exscan` stays as it was.
///
/// # Safety
///
/// The caller's arguments to `MPI_Scan`/`MPI_Exscan`/`MPI_Iscan`/`MPI_Iexscan`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    comm: Handle,
    exclusive: bool,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    let s = match stand(count, datatype, op)? {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        // SAFETY: the caller's buffers of `count` elements.
        let (_sp, rp, sb, rb) = unsafe { send_and_receive(&s, count, sendbuf, recvbuf, true) };
        // SAFETY: packed buffers of `count` stand-in elements of this frame; a nonblocking
        // call copies its input when it starts and its request owns the receive copy below.
        quietly(|| unsafe {
            match (request, exclusive) {
                (None, true) => crate::vcoll::PMPI_Exscan(sb, rb, count, s.datatype, s.op, comm),
                (None, false) => crate::vcoll::PMPI_Scan(sb, rb, count, s.datatype, s.op, comm),
                (Some(r), true) => {
                    crate::vcoll::PMPI_Iexscan(sb, rb, count, s.datatype, s.op, comm, r)
                }
                (Some(r), false) => {
                    crate::vcoll::PMPI_Iscan(sb, rb, count, s.datatype, s.op, comm, r)
                }
            }
        })?;
        match (request, rp) {
            // SAFETY: the handle just written.
            (Some(r), Some(p)) => stage(p, unsafe { *r }),
            // SAFETY: the caller's buffer of `count` elements.
            (None, rp) => unsafe { finish(rp.as_ref(), None, false) },
            (Some(_), None) => Ok(()),
        }
    })())
}

/// `MPI_Reduce_scatter_block` (`counts` `None`) or `MPI_Reduce_scatter` (`request`: their
/// nonblocking forms) on a datatype with holes, on an intracommunicator.
///
/// # Safety
///
/// The caller's arguments to `MPI_Reduce_scatter_block`/`MPI_Reduce_scatter` (or
/// `MPI_Ireduce_scatter_block`/`MPI_Ireduce_scatter`).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: Option<*const c_int>,
    recvcount: c_int,
    datatype: Handle,
    op: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    if !applies(datatype, op) {
        return None;
    }
    let (inter, me, size) = shape(comm).ok()?;
    if inter {
        return None;
    }
    let (mine, total) = match counts {
        None => (recvcount, recvcount as usize * size),
        Some(c) if !c.is_null() => {
            // SAFETY: the caller's array of `size` ints.
            let all = unsafe { std::slice::from_raw_parts(c, size) };
            if all.iter().any(|&k| k < 0) {
                return None;
            }
            (all[me as usize], all.iter().map(|&k| k as usize).sum())
        }
        Some(_) => return None,
    };
    // Whether anything has holes: the whole input's elements decide.
    let s = match stand(c_int::try_from(total).ok()?.max(mine), datatype, op)? {
        Ok(s) => s,
        Err(e) => return Some(Err(e)),
    };
    Some((|| {
        let inplace = in_place(sendbuf);
        // SAFETY: the caller's buffers: `total` elements to send (the receive buffer in place),
        // this rank's count to receive.
        let (mut sp, mut rp) = unsafe {
            if inplace {
                (None, Some(packed(&s, total, recvbuf, true)))
            } else {
                (
                    Some(packed(&s, total, sendbuf, true)),
                    Some(packed(&s, mine as usize, recvbuf, false)),
                )
            }
        };
        let (sb, rb) = (
            addr(&mut sp, abi::IN_PLACE as *mut c_void),
            addr(&mut rp, std::ptr::null_mut()),
        );
        // SAFETY: packed buffers of stand-in elements of this frame (a nonblocking call copies
        // its input when it starts); `counts` as given.
        quietly(|| unsafe {
            match (counts, request) {
                (None, None) => crate::vcoll::PMPI_Reduce_scatter_block(
                    sb, rb, recvcount, s.datatype, s.op, comm,
                ),
                (Some(c), None) => {
                    crate::vcoll::PMPI_Reduce_scatter(sb, rb, c, s.datatype, s.op, comm)
                }
                (None, Some(r)) => crate::vcoll::PMPI_Ireduce_scatter_block(
                    sb, rb, recvcount, s.datatype, s.op, comm, r,
                ),
                (Some(c), Some(r)) => {
                    crate::vcoll::PMPI_Ireduce_scatter(sb, rb, c, s.datatype, s.op, comm, r)
                }
            }
        })?;
        if request.is_some() {
            // The request delivers this rank's block only: its place in the caller's buffer.
            // SAFETY: the caller's buffer holds this rank's count (writable until completion).
            let out = unsafe { packed(&s, mine as usize, recvbuf, false) };
            // SAFETY: the handle just written.
            return unsafe { finish(Some(&out), request, false) };
        }
        // SAFETY: the caller's buffer of the packed copy's elements.
        unsafe { finish(rp.as_ref(), None, false) }
    })())
}
