//! Collectives: `MPI_Barrier`, `MPI_Bcast`, `MPI_Reduce`, `MPI_Allreduce`, `MPI_Gather`,
//! `MPI_Scatter`, `MPI_Allgather`, `MPI_Alltoall`, with their `MPI_IN_PLACE` forms, on the
//! agent's collectives (predefined datatypes and operations), and the nonblocking forms
//! `MPI_Ibarrier`, `MPI_Ibcast`, `MPI_Ireduce`, `MPI_Iallreduce`, `MPI_Igather`,
//! `MPI_Iscatter`, `MPI_Iallgather`, `MPI_Ialltoall` on the agent's `i*` collectives (xfer
//! blocks), whose result is copied into the caller's buffer when the request completes. The
//! blocking ones also take an intercommunicator (`inter`); the nonblocking ones do not.

use std::ffi::{c_int, c_void};

use std::sync::Mutex;

use viaduct_agent::coll::{CollBuffer, Reduction};
use viaduct_agent::comm::Comm;
use viaduct_agent::request::Request;

use crate::abi::{self, Handle, err};
use crate::datatype::{bytes, input, output};
use crate::error::MpiError;
use crate::op::{commutes, fold, reduction};
use crate::request::{Meta, Post};
use crate::state::ReqEntry;
use crate::state::{CommEntry, rt};

fn in_place(p: *const c_void) -> bool {
    p as usize == abi::IN_PLACE
}

fn root_of(c: &CommEntry, root: c_int) -> Result<u32, MpiError> {
    if root < 0 || root as u32 >= c.comm.size() {
        return Err(MpiError::new(
            err::ROOT,
            format!(
                "root {root} is not in the communicator of {} ranks",
                c.comm.size()
            ),
        ));
    }
    Ok(root as u32)
}

fn same(what: &str, a: usize, b: usize) -> Result<(), MpiError> {
    if a != b {
        return Err(MpiError::new(
            err::TRUNCATE,
            format!("{what}: {a} bytes sent per rank but {b} bytes received per rank"),
        ));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Barrier`.
    MPI_Barrier / PMPI_Barrier(comm: Handle) on comm => {
        let c = rt()?.comm_any(comm)?;
        match &c.inter {
            Some(ic) => crate::inter::barrier(ic)?,
            None => c.comm.barrier()?,
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Bcast`.
    MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: Handle, root: c_int, comm: Handle) on comm => {
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::bcast(buffer, count, datatype, root, comm, None) } {
            return done;
        }
        let c = rt()?.comm_any(comm)?;
        if let Some(ic) = &c.inter {
            let len = bytes(count, datatype)?;
            if root == abi::PROC_NULL {
                return crate::inter::bcast(ic, &mut [], root);
            }
            // SAFETY: the caller's buffer of `count` elements.
            let buf = unsafe { output(buffer, len) }?;
            return crate::inter::bcast(ic, buf, root);
        }
        let root = root_of(&c, root)?;
        let len = bytes(count, datatype)?;
        // In place: the root sends from the caller's buffer, the others receive into it and
        // send on from it.
        // SAFETY: the caller's buffer of `count` elements, the library's until this returns
        // (`bcast_in_place` waits for every message it started).
        let mem = unsafe { crate::p2p::UserMem::new(buffer, len) }?;
        c.comm.bcast_in_place(mem, root)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Reduce` (`MPI_IN_PLACE` as `sendbuf` at the root).
    MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int, comm: Handle) on comm => {
        crate::alias::check(comm, Some(root), crate::alias::Side { ptr: sendbuf, count, datatype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count, datatype, per_rank: false })?;
        // The program's operation on a datatype with holes: on packed copies (`crate::holesred`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::reduce(sendbuf, recvbuf, count, datatype, op, root, comm, None) } {
            return done;
        }
        let c = rt()?.comm_any(comm)?;
        if let Some(ic) = &c.inter {
            let len = bytes(count, datatype)?;
            let red = reduction(datatype, op)?;
            return match crate::inter::role(ic, root)? {
                crate::inter::Role::Idle => Ok(()),
                crate::inter::Role::Root => {
                    // SAFETY: the root's receive buffer of `count` elements.
                    let out = unsafe { output(recvbuf, len) }?;
                    crate::inter::reduce(ic, &[], Some(out), &red, root)
                }
                crate::inter::Role::Remote(_) => {
                    crate::inter::not_in_place(sendbuf)?;
                    // SAFETY: the caller's send buffer of `count` elements.
                    let mine = unsafe { input(sendbuf, len) }?;
                    crate::inter::reduce(ic, mine, None, &red, root)
                }
            };
        }
        let root = root_of(&c, root)?;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        if !commutes(op) {
            // Rank order: gather every contribution to the root, which folds them.
            let n = c.comm.size() as usize;
            let at_root = c.comm.rank() == root;
            let src: *const c_void = if at_root && in_place(sendbuf) { recvbuf } else { sendbuf };
            // SAFETY: the caller's buffer of `count` elements.
            let mine = unsafe { input(src, len) }?.to_vec();
            if !at_root {
                c.comm.gather(&mine, &mut [], root)?;
                return Ok(());
            }
            let mut all = vec![0u8; len * n];
            c.comm.gather(&mine, &mut all, root)?;
            // SAFETY: the root's receive buffer of `count` elements.
            let out = unsafe { output(recvbuf, len) }?;
            fold(&red, &all, out);
            return Ok(());
        }
        if c.comm.rank() == root {
            // SAFETY: the root's receive buffer of `count` elements.
            let out = unsafe { output(recvbuf, len) }?;
            if !in_place(sendbuf) {
                // SAFETY: the caller's send buffer of `count` elements.
                let send = unsafe { input(sendbuf, len) }?;
                out.copy_from_slice(send);
            }
            c.comm.reduce_with(out, &red, root)?;
        } else {
            // SAFETY: the caller's send buffer of `count` elements.
            let mut send = unsafe { input(sendbuf, len) }?.to_vec();
            c.comm.reduce_with(&mut send, &red, root)?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Allreduce` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count, datatype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::allreduce(sendbuf, recvbuf, count, datatype, op, comm, None) } {
            return done;
        }
        let c = rt()?.comm_any(comm)?;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        if let Some(ic) = &c.inter {
            crate::inter::not_in_place(sendbuf)?;
            // SAFETY: the caller's send buffer of `count` elements, copied before the
            // receive buffer is written.
            let mine = unsafe { input(sendbuf, len) }?.to_vec();
            // SAFETY: the caller's receive buffer of `count` elements.
            let out = unsafe { output(recvbuf, len) }?;
            return crate::inter::allreduce(ic, &mine, out, &red);
        }
        // SAFETY: the caller's receive buffer of `count` elements.
        let out = unsafe { output(recvbuf, len) }?;
        if !in_place(sendbuf) {
            // SAFETY: the caller's send buffer of `count` elements.
            let send = unsafe { input(sendbuf, len) }?;
            out.copy_from_slice(send);
        }
        allreduce(&c.comm, out, &red, commutes(op))
    }
}

/// The agent's allreduce of `buf`, or for a non-commutative operation an allgather of every
/// contribution folded in rank order on each rank.
pub fn allreduce(
    c: &Comm,
    buf: &mut [u8],
    red: &Reduction,
    commutative: bool,
) -> Result<(), MpiError> {
    if commutative {
        c.allreduce_with(buf, red)?;
        return Ok(());
    }
    let mut all = vec![0u8; buf.len() * c.size() as usize];
    c.allgather(buf, &mut all)?;
    fold(red, &all, buf);
    Ok(())
}

/// The post step of a nonblocking non-commutative reduction: folds the gathered
/// contributions of `len` bytes each.
fn folding(red: Reduction, len: usize) -> Post {
    Box::new(move |all: &[u8]| {
        let mut out = vec![0u8; len];
        fold(&red, all, &mut out);
        out
    })
}

mpi_fn! {
    /// `MPI_Gather` (`MPI_IN_PLACE` as `sendbuf` at the root).
    MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle) on comm => {
        crate::alias::check(comm, Some(root), crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: true })?;
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, None) } {
            return done;
        }
        let c = rt()?.comm_any(comm)?;
        if let Some(ic) = &c.inter {
            return match crate::inter::role(ic, root)? {
                crate::inter::Role::Idle => Ok(()),
                crate::inter::Role::Root => {
                    let part = bytes(recvcount, recvtype)?;
                    // SAFETY: the root's receive buffer of remote size * `recvcount` elements.
                    let out = unsafe { output(recvbuf, part * ic.remote.size() as usize) }?;
                    crate::inter::gather(ic, &[], Some(out), part, root)
                }
                crate::inter::Role::Remote(_) => {
                    crate::inter::not_in_place(sendbuf)?;
                    let len = bytes(sendcount, sendtype)?;
                    // SAFETY: the caller's send buffer.
                    let mine = unsafe { input(sendbuf, len) }?;
                    crate::inter::gather(ic, mine, None, len, root)
                }
            };
        }
        let root = root_of(&c, root)?;
        let n = c.comm.size() as usize;
        let me = c.comm.rank() as usize;
        if c.comm.rank() == root {
            let part = bytes(recvcount, recvtype)?;
            // SAFETY: the root's receive buffer of `size * recvcount` elements.
            let out = unsafe { output(recvbuf, part * n) }?;
            let send = if in_place(sendbuf) {
                out[me * part..(me + 1) * part].to_vec()
            } else {
                same("MPI_Gather", bytes(sendcount, sendtype)?, part)?;
                // SAFETY: the caller's send buffer.
                unsafe { input(sendbuf, part) }?.to_vec()
            };
            c.comm.gather(&send, out, root)?;
        } else {
            let len = bytes(sendcount, sendtype)?;
            // SAFETY: the caller's send buffer.
            let send = unsafe { input(sendbuf, len) }?;
            c.comm.gather(send, &mut [], root)?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Scatter` (`MPI_IN_PLACE` as `recvbuf` at the root).
    MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle) on comm => {
        crate::alias::check(comm, Some(root), crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: true }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: false })?;
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, None) } {
            return done;
        }
        let c = rt()?.comm_any(comm)?;
        if let Some(ic) = &c.inter {
            return match crate::inter::role(ic, root)? {
                crate::inter::Role::Idle => Ok(()),
                crate::inter::Role::Root => {
                    let part = bytes(sendcount, sendtype)?;
                    // SAFETY: the root's send buffer of remote size * `sendcount` elements.
                    let send = unsafe { input(sendbuf, part * ic.remote.size() as usize) }?;
                    crate::inter::scatter(ic, Some(send), &mut [], part, root)
                }
                crate::inter::Role::Remote(_) => {
                    crate::inter::not_in_place(recvbuf)?;
                    let len = bytes(recvcount, recvtype)?;
                    // SAFETY: the caller's receive buffer.
                    let out = unsafe { output(recvbuf, len) }?;
                    crate::inter::scatter(ic, None, out, len, root)
                }
            };
        }
        let root = root_of(&c, root)?;
        let n = c.comm.size() as usize;
        if c.comm.rank() == root {
            let part = bytes(sendcount, sendtype)?;
            // SAFETY: the root's send buffer of `size * sendcount` elements.
            let send = unsafe { input(sendbuf, part * n) }?;
            if in_place(recvbuf) {
                let mut scratch = vec![0u8; part];
                c.comm.scatter(send, &mut scratch, root)?;
            } else {
                same("MPI_Scatter", part, bytes(recvcount, recvtype)?)?;
                // SAFETY: the caller's receive buffer.
                let out = unsafe { output(recvbuf, part) }?;
                c.comm.scatter(send, out, root)?;
            }
        } else {
            let len = bytes(recvcount, recvtype)?;
            // SAFETY: the caller's receive buffer.
            let out = unsafe { output(recvbuf, len) }?;
            c.comm.scatter(&[], out, root)?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Allgather` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Allgather / PMPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: true })?;
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, None) } {
            return done;
        }
        let c = rt()?.comm_any(comm)?;
        if let Some(ic) = &c.inter {
            crate::inter::not_in_place(sendbuf)?;
            // The two groups' parts may differ: each side's `sendcount` meets the other's
            // `recvcount` (the remote part's length is checked as it arrives).
            let part = bytes(recvcount, recvtype)?;
            // SAFETY: the caller's send buffer, copied before the receive buffer is written.
            let mine = unsafe { input(sendbuf, bytes(sendcount, sendtype)?) }?.to_vec();
            // SAFETY: the caller's receive buffer of remote size * `recvcount` elements.
            let out = unsafe { output(recvbuf, part * ic.remote.size() as usize) }?;
            return crate::inter::allgather(ic, &mine, out);
        }
        let n = c.comm.size() as usize;
        let me = c.comm.rank() as usize;
        let part = bytes(recvcount, recvtype)?;
        // SAFETY: the caller's receive buffer of `size * recvcount` elements.
        let out = unsafe { output(recvbuf, part * n) }?;
        if !in_place(sendbuf) {
            same("MPI_Allgather", bytes(sendcount, sendtype)?, part)?;
            // SAFETY: the caller's send buffer.
            let send = unsafe { input(sendbuf, part) }?;
            out[me * part..(me + 1) * part].copy_from_slice(send);
        }
        // This rank's part is in place: small results go as point-to-point messages.
        c.comm.allgather_in_place(out)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Alltoall` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Alltoall / PMPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: true }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: true })?;
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, None) } {
            return done;
        }
        let c = rt()?.comm_any(comm)?;
        if let Some(ic) = &c.inter {
            crate::inter::not_in_place(sendbuf)?;
            let n = ic.remote.size() as usize;
            // The two groups' parts may differ (as for `MPI_Allgather`).
            let part = bytes(recvcount, recvtype)?;
            let sent = bytes(sendcount, sendtype)?;
            // SAFETY: the caller's send buffer, copied before the receive buffer is written.
            let send = unsafe { input(sendbuf, sent * n) }?.to_vec();
            // SAFETY: the caller's receive buffer of remote size * `recvcount` elements.
            let out = unsafe { output(recvbuf, part * n) }?;
            return crate::inter::alltoall(ic, &send, out, sent, part);
        }
        let n = c.comm.size() as usize;
        let part = bytes(recvcount, recvtype)?;
        if in_place(sendbuf) {
            // SAFETY: the caller's receive buffer of `size * recvcount` elements.
            let out = unsafe { output(recvbuf, part * n) }?;
            let send = out.to_vec();
            c.comm.alltoall(&send, out)?;
            return Ok(());
        }
        same("MPI_Alltoall", bytes(sendcount, sendtype)?, part)?;
        // Checks the buffers as the slices would (NULL with a nonzero length).
        // SAFETY: the caller's send buffer of `size * sendcount` elements.
        unsafe { input(sendbuf, part * n) }?;
        // SAFETY: the caller's receive buffer of `size * recvcount` elements.
        unsafe { output(recvbuf, part * n) }?;
        // Each part straight from the caller's send buffer and into its receive buffer.
        let window = |base: *const c_void, i: usize| {
            let at = base.cast::<u8>().wrapping_add(i * part).cast_mut();
            // SAFETY: part `i` of a buffer of `n` parts of `part` bytes checked above, the
            // library's until `alltoall_into` returns (it waits for every message it started,
            // and detaches every receive, before returning); the send and receive buffers do
            // not overlap (MPI forbids it short of MPI_IN_PLACE), nor do the parts; a send
            // part is only read.
            unsafe { crate::p2p::UserMem::new(at.cast::<c_void>(), part) }
        };
        let mut sends = Vec::with_capacity(n);
        let mut recvs = Vec::with_capacity(n);
        for i in 0..n {
            sends.push(window(sendbuf, i)?);
            recvs.push(window(recvbuf, i)?);
        }
        c.comm.alltoall_into(sends, recvs)?;
        Ok(())
    }
}

/// Registers a started nonblocking collective whose result (if `dst` is not NULL and `len`
/// is not 0) goes to the caller's `dst`; writes the request handle.
///
/// # Safety
///
/// `request` is the caller's writable handle; `dst` holds `len` bytes until completion.
unsafe fn give(
    comm: Handle,
    started: (Request, Option<CollBuffer>),
    dst: *mut c_void,
    len: usize,
    request: *mut Handle,
) -> Result<(), MpiError> {
    // SAFETY: as this function's.
    unsafe { give_with(comm, started, dst, len, request, None) }
}

/// As [`give`], with `post` turning the agent's result into the caller's.
///
/// # Safety
///
/// As for [`give`].
pub(crate) unsafe fn give_with(
    comm: Handle,
    started: (Request, Option<CollBuffer>),
    dst: *mut c_void,
    len: usize,
    request: *mut Handle,
    post: Option<Post>,
) -> Result<(), MpiError> {
    let rt = rt()?;
    let (req, out) = started;
    let meta = Meta::Coll {
        comm,
        out: Mutex::new(out),
        dst: dst as usize,
        len: if dst.is_null() { 0 } else { len },
        post,
        unpack: None,
    };
    let h = rt.add_request(ReqEntry::new(req, meta));
    // SAFETY: the caller's handle.
    unsafe { crate::comm::put(request, h, "request") }
}

mpi_fn! {
    /// `MPI_Ibarrier`.
    MPI_Ibarrier / PMPI_Ibarrier(comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::ibarrier_call(comm, request) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let r = c.comm.ibarrier()?;
        // SAFETY: the caller's handle.
        unsafe { give(comm, (r, None), std::ptr::null_mut(), 0, request) }
    }
}

mpi_fn! {
    /// `MPI_Ibcast`.
    MPI_Ibcast / PMPI_Ibcast(buffer: *mut c_void, count: c_int, datatype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm => {
        // On an intercommunicator: messages between the groups (see `crate::internb`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::ibcast_call(buffer, count, datatype, root, comm, request) } {
            return done;
        }
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::bcast(buffer, count, datatype, root, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let root = root_of(&c, root)?;
        let len = bytes(count, datatype)?;
        // SAFETY: the caller's buffer of `count` elements.
        let data = unsafe { input(buffer, len) }?.to_vec();
        let (r, b) = c.comm.ibcast(data, root)?;
        // SAFETY: the caller's buffer and handle.
        unsafe { give(comm, (r, Some(b)), buffer, len, request) }
    }
}

mpi_fn! {
    /// `MPI_Ireduce` (`MPI_IN_PLACE` as `sendbuf` at the root).
    MPI_Ireduce / PMPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, Some(root), crate::alias::Side { ptr: sendbuf, count, datatype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::ireduce_call(sendbuf, recvbuf, count, datatype, op, root, comm, request) } {
            return done;
        }
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::reduce(sendbuf, recvbuf, count, datatype, op, root, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let root = root_of(&c, root)?;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        let at_root = c.comm.rank() == root;
        let src: *const c_void = if at_root && in_place(sendbuf) { recvbuf } else { sendbuf };
        // SAFETY: the caller's buffer of `count` elements.
        let data = unsafe { input(src, len) }?.to_vec();
        let dst = if at_root { recvbuf } else { std::ptr::null_mut() };
        if !commutes(op) {
            let (r, b) = c.comm.igather(data, root)?;
            // SAFETY: the caller's buffer and handle.
            return unsafe { give_with(comm, (r, Some(b)), dst, len, request, Some(folding(red, len))) };
        }
        let (r, b) = c.comm.ireduce(data, &red, root)?;
        // SAFETY: the caller's buffer and handle.
        unsafe { give(comm, (r, Some(b)), dst, len, request) }
    }
}

mpi_fn! {
    /// `MPI_Iallreduce` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Iallreduce / PMPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count, datatype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count, datatype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::iallreduce_call(sendbuf, recvbuf, count, datatype, op, comm, request) } {
            return done;
        }
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holesred::allreduce(sendbuf, recvbuf, count, datatype, op, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        let src: *const c_void = if in_place(sendbuf) { recvbuf } else { sendbuf };
        // SAFETY: the caller's buffer of `count` elements.
        let data = unsafe { input(src, len) }?.to_vec();
        if !commutes(op) {
            let (r, b) = c.comm.iallgather(data)?;
            // SAFETY: the caller's buffer and handle.
            return unsafe { give_with(comm, (r, Some(b)), recvbuf, len, request, Some(folding(red, len))) };
        }
        let (r, b) = c.comm.iallreduce(data, &red)?;
        // SAFETY: the caller's buffer and handle.
        unsafe { give(comm, (r, Some(b)), recvbuf, len, request) }
    }
}

mpi_fn! {
    /// `MPI_Igather` (`MPI_IN_PLACE` as `sendbuf` at the root).
    MPI_Igather / PMPI_Igather(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, Some(root), crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: true })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::irooted_call(true, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request) } {
            return done;
        }
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let root = root_of(&c, root)?;
        let n = c.comm.size() as usize;
        let me = c.comm.rank() as usize;
        if c.comm.rank() == root {
            let part = bytes(recvcount, recvtype)?;
            let send = if in_place(sendbuf) {
                // SAFETY: the root's receive buffer of `size * recvcount` elements.
                unsafe { input(recvbuf, part * n) }?[me * part..(me + 1) * part].to_vec()
            } else {
                same("MPI_Igather", bytes(sendcount, sendtype)?, part)?;
                // SAFETY: the caller's send buffer.
                unsafe { input(sendbuf, part) }?.to_vec()
            };
            let (r, b) = c.comm.igather(send, root)?;
            // SAFETY: the caller's buffer and handle.
            unsafe { give(comm, (r, Some(b)), recvbuf, part * n, request) }
        } else {
            let len = bytes(sendcount, sendtype)?;
            // SAFETY: the caller's send buffer.
            let send = unsafe { input(sendbuf, len) }?.to_vec();
            let (r, b) = c.comm.igather(send, root)?;
            // SAFETY: the caller's handle.
            unsafe { give(comm, (r, Some(b)), std::ptr::null_mut(), 0, request) }
        }
    }
}

mpi_fn! {
    /// `MPI_Iscatter` (`MPI_IN_PLACE` as `recvbuf` at the root).
    MPI_Iscatter / PMPI_Iscatter(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, Some(root), crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: true }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: false })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::irooted_call(false, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request) } {
            return done;
        }
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let root = root_of(&c, root)?;
        let n = c.comm.size() as usize;
        let (send, part, dst) = if c.comm.rank() == root {
            let part = bytes(sendcount, sendtype)?;
            // SAFETY: the root's send buffer of `size * sendcount` elements.
            let send = unsafe { input(sendbuf, part * n) }?.to_vec();
            if in_place(recvbuf) {
                (send, part, std::ptr::null_mut())
            } else {
                same("MPI_Iscatter", part, bytes(recvcount, recvtype)?)?;
                (send, part, recvbuf)
            }
        } else {
            (Vec::new(), bytes(recvcount, recvtype)?, recvbuf)
        };
        let (r, b) = c.comm.iscatter(send, part, root)?;
        // SAFETY: the caller's buffer and handle.
        unsafe { give(comm, (r, Some(b)), dst, part, request) }
    }
}

mpi_fn! {
    /// `MPI_Iallgather` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Iallgather / PMPI_Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: false }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: true })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::ito_all_call(false, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request) } {
            return done;
        }
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let n = c.comm.size() as usize;
        let me = c.comm.rank() as usize;
        let part = bytes(recvcount, recvtype)?;
        let send = if in_place(sendbuf) {
            // SAFETY: the caller's receive buffer of `size * recvcount` elements.
            unsafe { input(recvbuf, part * n) }?[me * part..(me + 1) * part].to_vec()
        } else {
            same("MPI_Iallgather", bytes(sendcount, sendtype)?, part)?;
            // SAFETY: the caller's send buffer.
            unsafe { input(sendbuf, part) }?.to_vec()
        };
        let (r, b) = c.comm.iallgather(send)?;
        // SAFETY: the caller's buffer and handle.
        unsafe { give(comm, (r, Some(b)), recvbuf, part * n, request) }
    }
}

mpi_fn! {
    /// `MPI_Ialltoall` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Ialltoall / PMPI_Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) on comm => {
        crate::alias::check(comm, None, crate::alias::Side { ptr: sendbuf, count: sendcount, datatype: sendtype, per_rank: true }, crate::alias::Side { ptr: recvbuf, count: recvcount, datatype: recvtype, per_rank: true })?;
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::internb::ito_all_call(true, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request) } {
            return done;
        }
        // A datatype with holes: the byte form on a packed copy (see `crate::holes`).
        // SAFETY: the caller's arguments, as given.
        if let Some(done) = unsafe { crate::holes::alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Some(request)) } {
            return done;
        }
        let c = rt()?.comm(comm)?;
        let n = c.comm.size() as usize;
        let part = bytes(recvcount, recvtype)?;
        let send = if in_place(sendbuf) {
            // SAFETY: the caller's receive buffer of `size * recvcount` elements.
            unsafe { input(recvbuf, part * n) }?.to_vec()
        } else {
            same("MPI_Ialltoall", bytes(sendcount, sendtype)?, part)?;
            // SAFETY: the caller's send buffer.
            unsafe { input(sendbuf, part * n) }?.to_vec()
        };
        let (r, b) = c.comm.ialltoall(send)?;
        // SAFETY: the caller's buffer and handle.
        unsafe { give(comm, (r, Some(b)), recvbuf, part * n, request) }
    }
}
