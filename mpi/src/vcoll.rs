//! Collectives the agent has no schedule for, each built of the agent's xfer blocks
//! ([`viaduct_agent::xfer`]): `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`,
//! `MPI_Alltoallv` (one scatter block sending this rank's parts, one gather block receiving
//! the others', matched by the blocks' own start order), `MPI_Scan` and `MPI_Exscan` (a chain
//! of gather blocks: a rank combines what its left neighbour sent and forwards each piece as
//! soon as it was combined), and `MPI_Reduce_scatter_block`/`MPI_Reduce_scatter` (the agent's
//! allreduce, then this rank's block). Every `MPI_IN_PLACE` form.

use std::ffi::{c_int, c_void};

use viaduct_agent::comm::Comm;
use viaduct_agent::request::Request;
use viaduct_agent::xfer::XferBuffers;

use crate::abi::{self, Handle, err};
use crate::datatype::{bytes, input, output};
use crate::error::MpiError;
use crate::op::reduction;
use crate::state::rt;

/// Tags of the blocks (below the collectives' reserved bit; blocks use the communicator's
/// collective context, so they never meet point-to-point messages).
const TAG_GATHERV: u32 = 0x7f00_0001;
const TAG_SCATTERV: u32 = 0x7f00_0002;
const TAG_ALLGATHERV: u32 = 0x7f00_0003;
const TAG_ALLTOALLV: u32 = 0x7f00_0004;
const TAG_SCAN: u32 = 0x7f00_0005;
const TAG_EXSCAN: u32 = 0x7f00_0006;

fn in_place(p: *const c_void) -> bool {
    p as usize == abi::IN_PLACE
}

/// Waits for a started block; returns its buffers.
fn finish(started: (Request, XferBuffers)) -> Result<XferBuffers, MpiError> {
    let (mut req, bufs) = started;
    req.wait()?;
    Ok(bufs)
}

/// `(offset, length)` in bytes of each rank's part: `counts[i]` elements of `t` at `displs[i]`
/// extents.
///
/// # Safety
///
/// `counts` and `displs` hold `n` ints.
unsafe fn parts(
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

fn span(parts: &[(usize, usize)]) -> usize {
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

mpi_fn! {
    /// `MPI_Gatherv` (`MPI_IN_PLACE` as `sendbuf` at the root).
    MPI_Gatherv / PMPI_Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
        let root = root_of(c, root)?;
        let (me, n) = (c.rank() as usize, c.size() as usize);
        if c.rank() != root {
            let len = bytes(sendcount, sendtype)?;
            if len > 0 {
                // SAFETY: the caller's send buffer.
                let data = unsafe { input(sendbuf, len) }?.to_vec();
                let mut b = c.xfer_gather(Some(root), TAG_GATHERV);
                let id = b.buffer(data);
                b.send_op(id, 0, len);
                finish(b.start()?)?;
            }
            return Ok(());
        }
        // SAFETY: the root's arrays of `size` ints.
        let ps = unsafe { parts(recvcounts, displs, recvtype, n) }?;
        // SAFETY: the root's receive buffer covering every part.
        let out = unsafe { output(recvbuf, span(&ps)) }?;
        if !in_place(sendbuf) {
            let len = bytes(sendcount, sendtype)?;
            if len != ps[me].1 {
                return Err(MpiError::new(err::TRUNCATE, format!("the root sends {len} bytes to itself but receives {}", ps[me].1)));
            }
            // SAFETY: the caller's send buffer.
            let own = unsafe { input(sendbuf, len) }?;
            out[ps[me].0..ps[me].0 + len].copy_from_slice(own);
        }
        let mut b = c.xfer_gather(None, TAG_GATHERV);
        let id = b.buffer(vec![0; span(&ps)]);
        for (i, &(o, l)) in ps.iter().enumerate() {
            if i != me && l > 0 {
                b.recv_op(id, o, o + l, i as u32);
            }
        }
        let bufs = finish(b.start()?)?;
        let got = bufs.take(id).unwrap_or_default();
        for (i, &(o, l)) in ps.iter().enumerate() {
            if i != me && l > 0 && o + l <= got.len() {
                out[o..o + l].copy_from_slice(&got[o..o + l]);
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Scatterv` (`MPI_IN_PLACE` as `recvbuf` at the root).
    MPI_Scatterv / PMPI_Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
        let root = root_of(c, root)?;
        let (me, n) = (c.rank() as usize, c.size() as usize);
        if c.rank() != root {
            let len = bytes(recvcount, recvtype)?;
            if len > 0 {
                let mut b = c.xfer_scatter(Some(root), TAG_SCATTERV);
                let id = b.buffer(vec![0; len]);
                b.recv_op(id, 0, len);
                let bufs = finish(b.start()?)?;
                let got = bufs.take(id).unwrap_or_default();
                // SAFETY: the caller's receive buffer.
                let out = unsafe { output(recvbuf, len) }?;
                out.copy_from_slice(&got[..len.min(got.len())]);
            }
            return Ok(());
        }
        // SAFETY: the root's arrays of `size` ints.
        let ps = unsafe { parts(sendcounts, displs, sendtype, n) }?;
        // SAFETY: the root's send buffer covering every part.
        let data = unsafe { input(sendbuf, span(&ps)) }?;
        if !in_place(recvbuf) {
            let len = bytes(recvcount, recvtype)?;
            if len != ps[me].1 {
                return Err(MpiError::new(err::TRUNCATE, format!("the root sends {} bytes to itself but receives {len}", ps[me].1)));
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
        finish(b.start()?)?;
        Ok(())
    }
}

/// Sends `mine[part i]` to each rank i (`sends`) and receives each rank's part into `recv`
/// ranges (`recvs`), with one scatter block and one gather block; returns the gathered buffer.
fn exchange(
    c: &Comm,
    tag: u32,
    mine: Vec<u8>,
    sends: &[(usize, usize)],
    recv_len: usize,
    recvs: &[(usize, usize)],
) -> Result<Vec<u8>, MpiError> {
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
    let gathered = g.start()?;
    let sent = s.start()?;
    let bufs = finish(gathered)?;
    finish(sent)?;
    Ok(bufs.take(gid).unwrap_or_default())
}

mpi_fn! {
    /// `MPI_Allgatherv` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Allgatherv / PMPI_Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
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
                return Err(MpiError::new(err::TRUNCATE, format!("this rank sends {len} bytes but its part is {l}")));
            }
            // SAFETY: the caller's send buffer.
            unsafe { input(sendbuf, len) }?.to_vec()
        };
        out[o..o + l].copy_from_slice(&own);
        let sends: Vec<(usize, usize)> = (0..n).map(|_| (0, l)).collect();
        let got = exchange(c, TAG_ALLGATHERV, own, &sends, span(&ps), &ps)?;
        for (i, &(o, l)) in ps.iter().enumerate() {
            if i != me && l > 0 && o + l <= got.len() {
                out[o..o + l].copy_from_slice(&got[o..o + l]);
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Alltoallv` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Alltoallv / PMPI_Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
        let (me, n) = (c.rank() as usize, c.size() as usize);
        // SAFETY: the caller's arrays of `size` ints.
        let rps = unsafe { parts(recvcounts, rdispls, recvtype, n) }?;
        // SAFETY: the caller's receive buffer covering every part.
        let out = unsafe { output(recvbuf, span(&rps)) }?;
        let (sps, mine) = if in_place(sendbuf) {
            (rps.clone(), out.to_vec())
        } else {
            // SAFETY: the caller's arrays of `size` ints.
            let sps = unsafe { parts(sendcounts, sdispls, sendtype, n) }?;
            // SAFETY: the caller's send buffer covering every part.
            let mine = unsafe { input(sendbuf, span(&sps)) }?.to_vec();
            (sps, mine)
        };
        if sps[me].1 != rps[me].1 {
            return Err(MpiError::new(err::TRUNCATE, format!("this rank sends {} bytes to itself but receives {}", sps[me].1, rps[me].1)));
        }
        let own = mine[sps[me].0..sps[me].0 + sps[me].1].to_vec();
        let got = exchange(c, TAG_ALLTOALLV, mine, &sps, span(&rps), &rps)?;
        out[rps[me].0..rps[me].0 + own.len()].copy_from_slice(&own);
        for (i, &(o, l)) in rps.iter().enumerate() {
            if i != me && l > 0 && o + l <= got.len() {
                out[o..o + l].copy_from_slice(&got[o..o + l]);
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Scan` (`MPI_IN_PLACE` as `sendbuf`): a chain of gather blocks; each rank combines
    /// the prefix from its left neighbour into its own data and forwards each combined piece.
    MPI_Scan / PMPI_Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        // SAFETY: the caller's receive buffer of `count` elements.
        let out = unsafe { output(recvbuf, len) }?;
        if !in_place(sendbuf) {
            // SAFETY: the caller's send buffer of `count` elements.
            out.copy_from_slice(unsafe { input(sendbuf, len) }?);
        }
        let (r, n) = (c.rank(), c.size());
        if len == 0 || n == 1 {
            return Ok(());
        }
        let mut b = c.xfer_gather((r + 1 < n).then_some(r + 1), TAG_SCAN);
        let id = b.buffer(out.to_vec());
        if r > 0 {
            b.recv_mop_op(id, 0, len, red, r - 1);
        }
        if r + 1 < n {
            b.send_op(id, 0, len);
        }
        let bufs = finish(b.start()?)?;
        if let Some(v) = bufs.take(id) {
            out.copy_from_slice(&v[..len]);
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Exscan` (`MPI_IN_PLACE` as `sendbuf`): as `MPI_Scan`, each rank receiving its left
    /// neighbour's prefix twice, once kept (its result) and once combined and forwarded. The
    /// receive buffer of rank 0 is left as it is.
    MPI_Exscan / PMPI_Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let c = &c.comm;
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
        let (r, n) = (c.rank(), c.size());
        if len == 0 || n == 1 {
            return Ok(());
        }
        let mut b = c.xfer_gather((r + 1 < n).then_some(r + 1), TAG_EXSCAN);
        let kept = b.buffer(vec![0; len]);
        let acc = b.buffer(own);
        if r > 0 {
            b.recv_op(kept, 0, len, r - 1);
            b.recv_mop_op(acc, 0, len, red, r - 1);
        }
        if r + 1 < n {
            b.send_op(acc, 0, len);
            b.send_op(acc, 0, len);
        }
        let bufs = finish(b.start()?)?;
        if r > 0 {
            if let Some(v) = bufs.take(kept) {
                out.copy_from_slice(&v[..len]);
            }
        }
        Ok(())
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
