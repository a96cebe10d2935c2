//! The MPI-4 large-count functions (`MPI_Send_c`, `MPI_Bcast_c`, `MPI_Type_vector_c`, ...):
//! the same calls with `MPI_Count` counts and `MPI_Aint` displacements.
//!
//! Each one narrows its counts and displacements to the `int` of the function without `_c`
//! and calls it: a value that does not fit is `MPI_ERR_COUNT` (never a truncation), raised
//! through the handler of the call's communicator, file or window. Arrays of counts are
//! narrowed into arrays of this call's own, read at the call (as the `int` forms read theirs):
//! the root's only for the rooted `v` collectives, the neighbourhood's degrees for the
//! neighbourhood ones. Results a count is written to (`MPI_Get_count_c`, `MPI_Type_size_c`,
//! `MPI_Pack_size_c`, positions) are computed in 64 bits.
//!
//! The persistent `v`/`w` collectives (`MPI_Gatherv_init_c`, ...) narrow their arrays at the
//! `_init` call and keep the narrowed copies in the request, whose every start calls the `int`
//! nonblocking form with them.
//!
//! Not here (stubs): the `_c` forms of functions without an `int` form in this library.

use std::ffi::{c_int, c_void};

use crate::abi::{self, Handle, MpiAint, MpiCount, MpiOffset, MpiStatus, err};
use crate::error::{MpiError, quietly};
use crate::state::rt;

/// `v` narrowed to an `int` count, or `MPI_ERR_COUNT` naming argument `what`.
fn narrow(what: &str, v: MpiCount) -> Result<c_int, MpiError> {
    c_int::try_from(v).map_err(|_| {
        MpiError::new(
            err::COUNT,
            format!("{what} = {v} does not fit the 32-bit counts of viaduct's MPI library"),
        )
    })
}

/// The first `n` values of the caller's array `p`, narrowed (`None` for a NULL array or
/// `n == 0`, passed on as NULL).
///
/// # Safety
///
/// `p` is NULL or holds `n` values.
unsafe fn narrow_array(
    what: &str,
    p: *const MpiCount,
    n: usize,
) -> Result<Option<Vec<c_int>>, MpiError> {
    if p.is_null() || n == 0 {
        return Ok(None);
    }
    // SAFETY: the caller's array of `n` values.
    let s = unsafe { std::slice::from_raw_parts(p, n) };
    s.iter()
        .enumerate()
        .map(|(i, &v)| narrow(&format!("{what}[{i}]"), v))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The pointer to pass on for a narrowed array.
fn ptr_of(v: &Option<Vec<c_int>>) -> *const c_int {
    v.as_ref().map_or(std::ptr::null(), |v| v.as_ptr())
}

/// Length of an array of `count` entries (a negative count is left to the `int` form).
fn len(count: c_int) -> Result<usize, MpiError> {
    Ok(usize::try_from(count).unwrap_or(0))
}

/// Entries of the count arrays of an all-to-all collective on `comm`: its group, the remote
/// one on an intercommunicator (whose entry's agent communicator is its remote group).
fn group(comm: Handle) -> Result<usize, MpiError> {
    Ok(rt()?.comm_any(comm)?.comm.size() as usize)
}

/// Entries of `MPI_Reduce_scatter`'s counts: the local group of `comm`.
fn local_group(comm: Handle) -> Result<usize, MpiError> {
    let mut n: c_int = 0;
    // SAFETY: `n` is writable.
    quietly(|| unsafe { crate::comm::PMPI_Comm_size(comm, &mut n) })?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// Entries of a rooted `v` collective's root arrays on this rank: its group at the root
/// (`MPI_ROOT` on an intercommunicator), none elsewhere.
fn at_root(comm: Handle, root: c_int) -> Result<usize, MpiError> {
    let e = rt()?.comm_any(comm)?;
    let is_root = if e.inter.is_some() {
        root == abi::ROOT
    } else {
        root >= 0 && e.comm.rank() == root as u32
    };
    Ok(if is_root { e.comm.size() as usize } else { 0 })
}

/// `(indegree, outdegree)` of the topology of `comm` (for the neighbourhood collectives).
fn degrees(comm: Handle) -> Result<(usize, usize), MpiError> {
    const GRAPH: c_int = 1;
    const CART: c_int = 2;
    const DIST_GRAPH: c_int = 3;
    let mut kind: c_int = abi::UNDEFINED;
    // SAFETY: `kind` is writable.
    quietly(|| unsafe { crate::topo::PMPI_Topo_test(comm, &mut kind) })?;
    let (mut a, mut b, mut c) = (0, 0, 0);
    match kind {
        CART => {
            // SAFETY: `a` is writable.
            quietly(|| unsafe { crate::topo::PMPI_Cartdim_get(comm, &mut a) })?;
            a *= 2;
            b = a;
        }
        GRAPH => {
            let mut me = 0;
            // SAFETY: `me` and `a` are writable.
            quietly(|| unsafe { crate::comm::PMPI_Comm_rank(comm, &mut me) })?;
            // SAFETY: as above.
            quietly(|| unsafe { crate::topo::PMPI_Graph_neighbors_count(comm, me, &mut a) })?;
            b = a;
        }
        DIST_GRAPH => {
            // SAFETY: `a`, `b` and `c` are writable.
            quietly(|| unsafe {
                crate::topo::PMPI_Dist_graph_neighbors_count(comm, &mut a, &mut b, &mut c)
            })?;
        }
        _ => {
            return Err(MpiError::new(
                err::TOPOLOGY,
                "the communicator has no topology",
            ));
        }
    }
    Ok((
        usize::try_from(a).unwrap_or(0),
        usize::try_from(b).unwrap_or(0),
    ))
}

/// Defines `MPI_X_c` calling the `int` form `$int` with the counts named in `counts [...]`
/// narrowed, and the arrays named in each `arrays [...] of LEN` narrowed to `LEN` entries
/// (`LEN` a `Result<usize, MpiError>` expression, evaluated after the counts).
macro_rules! narrowed {
    ($mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) on $comm:expr,
     counts [$($c:ident),*] $(, arrays [$($arr:ident),*] of $n:expr)* => $int:path) => {
        mpi_fn! {
            #[doc = concat!("`", stringify!($mpi), "`: `", stringify!($int), "` with 64-bit counts (`MPI_ERR_COUNT` past 32 bits).")]
            $mpi / $pmpi ( $($a : $t),* ) on $comm => {
                $( let $c = narrow(stringify!($c), $c)?; )*
                $(
                    let n: usize = $n?;
                    // SAFETY: the caller's arrays of `n` values, as the call's contract says.
                    $( let $arr = unsafe { narrow_array(stringify!($arr), $arr, n) }?; )*
                    $( let $arr = ptr_of(&$arr); )*
                )*
                // SAFETY: the caller's arguments, counts narrowed; the narrowed arrays live
                // until the call returned (the `int` form reads them during the call).
                quietly(|| unsafe { $int($($a),*) })
            }
        }
    };
}

/// A datatype made for one call with a count past 32 bits: `count` elements of the caller's
/// datatype as one element; freed when the call returned (an operation still going on keeps
/// its own hold on the layout, as after `MPI_Type_free`).
struct Temporary(Handle);

impl Drop for Temporary {
    fn drop(&mut self) {
        let mut h = self.0;
        // SAFETY: `h` is this frame's handle of a datatype made by `widen`.
        let _ = quietly(|| unsafe { crate::types::PMPI_Type_free(&mut h) });
    }
}

/// `count` elements of `datatype` as an `int` count and a datatype: themselves when the count
/// fits, else 1 element of a datatype made of all of them (kept in `keep` for the call).
fn widen(
    what: &str,
    count: MpiCount,
    datatype: Handle,
    keep: &mut Vec<Temporary>,
) -> Result<(c_int, Handle), MpiError> {
    if let Ok(c) = c_int::try_from(count) {
        return Ok((c, datatype));
    }
    let n = crate::largetypes::large(what, count)?;
    let old = crate::types::layout(datatype)?;
    let h = crate::types::register(crate::types::build(&[(0, n, old, datatype)])?);
    keep.push(Temporary(h));
    Ok((1, h))
}

/// As [`narrowed!`], for calls whose buffers are (count, datatype) pairs: a count past 32
/// bits goes as one element of a datatype made of them all ([`widen`]), so the message or
/// broadcast carries more than 2^31 elements.
macro_rules! widened {
    ($mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) on $comm:expr,
     pairs [$(($c:ident, $d:ident)),*] => $int:path) => {
        mpi_fn! {
            #[doc = concat!("`", stringify!($mpi), "`: `", stringify!($int), "` with 64-bit counts (a count past 32 bits goes as one element of a datatype made of them all).")]
            $mpi / $pmpi ( $($a : $t),* ) on $comm => {
                let mut keep = Vec::new();
                $( let ($c, $d) = widen(stringify!($c), $c, $d, &mut keep)?; )*
                // SAFETY: the caller's arguments, large counts folded into datatypes that live
                // until the call returned.
                let r = quietly(|| unsafe { $int($($a),*) });
                drop(keep);
                r
            }
        }
    };
}

// ---- point to point ----

widened!(MPI_Send_c / PMPI_Send_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Send);
widened!(MPI_Ssend_c / PMPI_Ssend_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Ssend);
widened!(MPI_Rsend_c / PMPI_Rsend_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Rsend);
widened!(MPI_Bsend_c / PMPI_Bsend_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Bsend);
widened!(MPI_Isend_c / PMPI_Isend_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Isend);
widened!(MPI_Issend_c / PMPI_Issend_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Issend);
widened!(MPI_Irsend_c / PMPI_Irsend_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Irsend);
widened!(MPI_Ibsend_c / PMPI_Ibsend_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Ibsend);
widened!(MPI_Send_init_c / PMPI_Send_init_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Send_init);
widened!(MPI_Ssend_init_c / PMPI_Ssend_init_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Ssend_init);
widened!(MPI_Rsend_init_c / PMPI_Rsend_init_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Rsend_init);
widened!(MPI_Bsend_init_c / PMPI_Bsend_init_c(buf: *const c_void, count: MpiCount, datatype: Handle, dest: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Bsend_init);
widened!(MPI_Recv_c / PMPI_Recv_c(buf: *mut c_void, count: MpiCount, datatype: Handle, source: c_int, tag: c_int, comm: Handle, status: *mut MpiStatus) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Recv);
widened!(MPI_Irecv_c / PMPI_Irecv_c(buf: *mut c_void, count: MpiCount, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Irecv);
widened!(MPI_Recv_init_c / PMPI_Recv_init_c(buf: *mut c_void, count: MpiCount, datatype: Handle, source: c_int, tag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Recv_init);
widened!(MPI_Sendrecv_c / PMPI_Sendrecv_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, source: c_int, recvtag: c_int, comm: Handle, status: *mut MpiStatus) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::p2p::PMPI_Sendrecv);
widened!(MPI_Sendrecv_replace_c / PMPI_Sendrecv_replace_c(buf: *mut c_void, count: MpiCount, datatype: Handle, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: Handle, status: *mut MpiStatus) on comm, pairs [(count, datatype)] => crate::p2p::PMPI_Sendrecv_replace);
widened!(MPI_Mrecv_c / PMPI_Mrecv_c(buf: *mut c_void, count: MpiCount, datatype: Handle, message: *mut Handle, status: *mut MpiStatus) on abi::COMM_WORLD, pairs [(count, datatype)] => crate::mprobe::PMPI_Mrecv);
widened!(MPI_Imrecv_c / PMPI_Imrecv_c(buf: *mut c_void, count: MpiCount, datatype: Handle, message: *mut Handle, request: *mut Handle) on abi::COMM_WORLD, pairs [(count, datatype)] => crate::mprobe::PMPI_Imrecv);
widened!(MPI_Isendrecv_c / PMPI_Isendrecv_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, source: c_int, recvtag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::mprobe::PMPI_Isendrecv);
widened!(MPI_Isendrecv_replace_c / PMPI_Isendrecv_replace_c(buf: *mut c_void, count: MpiCount, datatype: Handle, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::mprobe::PMPI_Isendrecv_replace);
narrowed!(MPI_Buffer_attach_c / PMPI_Buffer_attach_c(buffer: *mut c_void, size: MpiCount) on abi::COMM_WORLD, counts [size] => crate::p2p::PMPI_Buffer_attach);

mpi_fn! {
    /// `MPI_Buffer_detach_c`: `MPI_Buffer_detach` with a 64-bit size.
    MPI_Buffer_detach_c / PMPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut MpiCount) on abi::COMM_WORLD => {
        if size.is_null() {
            return Err(MpiError::new(err::ARG, "size is NULL"));
        }
        let mut n: c_int = 0;
        // SAFETY: the caller's pointer; `n` is writable.
        quietly(|| unsafe { crate::p2p::PMPI_Buffer_detach(buffer_addr, &mut n) })?;
        // SAFETY: the caller's size, checked not NULL.
        unsafe { *size = MpiCount::from(n) };
        Ok(())
    }
}

/// `MPI_Get_count` (`elements`: `MPI_Get_elements`) in 64 bits: `MPI_UNDEFINED` when the
/// bytes received are not a whole number of them.
///
/// # Safety
///
/// `status` and `count` are NULL or the caller's.
unsafe fn count_of(
    status: *const MpiStatus,
    datatype: Handle,
    count: *mut MpiCount,
    elements: bool,
) -> Result<(), MpiError> {
    // SAFETY: the caller's status and count.
    let (s, out) = unsafe { (status.as_ref(), count.as_mut()) };
    let (Some(s), Some(out)) = (s, out) else {
        return Err(MpiError::new(err::ARG, "status or count is NULL"));
    };
    *out = crate::p2p::counted(s, datatype, elements)?.unwrap_or(MpiCount::from(abi::UNDEFINED));
    Ok(())
}

mpi_fn! {
    /// `MPI_Get_count_c`: `MPI_Get_count` in 64 bits.
    MPI_Get_count_c / PMPI_Get_count_c(status: *const MpiStatus, datatype: Handle, count: *mut MpiCount) on abi::COMM_WORLD => {
        // SAFETY: the caller's status and count.
        unsafe { count_of(status, datatype, count, false) }
    }
}

mpi_fn! {
    /// `MPI_Get_elements_c`: `MPI_Get_elements` in 64 bits.
    MPI_Get_elements_c / PMPI_Get_elements_c(status: *const MpiStatus, datatype: Handle, count: *mut MpiCount) on abi::COMM_WORLD => {
        // SAFETY: the caller's status and count.
        unsafe { count_of(status, datatype, count, true) }
    }
}

// ---- datatypes and packing ----

narrowed!(MPI_Type_create_resized_c / PMPI_Type_create_resized_c(oldtype: Handle, lb: MpiCount, extent: MpiCount, newtype: *mut Handle) on abi::COMM_WORLD, counts [] => crate::types::PMPI_Type_create_resized);
narrowed!(MPI_Type_get_extent_c / PMPI_Type_get_extent_c(datatype: Handle, lb: *mut MpiCount, extent: *mut MpiCount) on abi::COMM_WORLD, counts [] => crate::types::PMPI_Type_get_extent);
narrowed!(MPI_Type_get_true_extent_c / PMPI_Type_get_true_extent_c(datatype: Handle, true_lb: *mut MpiCount, true_extent: *mut MpiCount) on abi::COMM_WORLD, counts [] => crate::types::PMPI_Type_get_true_extent);
narrowed!(MPI_Type_size_c / PMPI_Type_size_c(datatype: Handle, size: *mut MpiCount) on abi::COMM_WORLD, counts [] => crate::types::PMPI_Type_size_x);

mpi_fn! {
    /// `MPI_Pack_size_c`: `MPI_Pack_size` with 64-bit counts.
    MPI_Pack_size_c / PMPI_Pack_size_c(incount: MpiCount, datatype: Handle, comm: Handle, size: *mut MpiCount) on comm => {
        if size.is_null() {
            return Err(MpiError::new(err::ARG, "size is NULL"));
        }
        if incount < 0 {
            return Err(MpiError::new(err::COUNT, format!("incount {incount} is negative")));
        }
        let one = crate::types::layout(datatype)?.size as i64;
        let total = one.checked_mul(incount).ok_or_else(|| {
            MpiError::new(err::COUNT, format!("{incount} elements of {one} bytes overflow MPI_Count"))
        })?;
        // SAFETY: the caller's size, checked not NULL.
        unsafe { *size = total };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Pack_c`: `MPI_Pack` with 64-bit counts and position (`MPI_ERR_COUNT` past 32 bits).
    MPI_Pack_c / PMPI_Pack_c(inbuf: *const c_void, incount: MpiCount, datatype: Handle, outbuf: *mut c_void, outsize: MpiCount, position: *mut MpiCount, comm: Handle) on comm => {
        if position.is_null() {
            return Err(MpiError::new(err::ARG, "position is NULL"));
        }
        let incount = narrow("incount", incount)?;
        let outsize = narrow("outsize", outsize)?;
        // SAFETY: the caller's position, checked not NULL.
        let mut pos = narrow("position", unsafe { *position })?;
        // SAFETY: the caller's buffers; `pos` is writable.
        quietly(|| unsafe { crate::types::PMPI_Pack(inbuf, incount, datatype, outbuf, outsize, &mut pos, comm) })?;
        // SAFETY: as above.
        unsafe { *position = MpiCount::from(pos) };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Unpack_c`: `MPI_Unpack` with 64-bit counts and position (`MPI_ERR_COUNT` past 32
    /// bits).
    MPI_Unpack_c / PMPI_Unpack_c(inbuf: *const c_void, insize: MpiCount, position: *mut MpiCount, outbuf: *mut c_void, outcount: MpiCount, datatype: Handle, comm: Handle) on comm => {
        if position.is_null() {
            return Err(MpiError::new(err::ARG, "position is NULL"));
        }
        let insize = narrow("insize", insize)?;
        let outcount = narrow("outcount", outcount)?;
        // SAFETY: the caller's position, checked not NULL.
        let mut pos = narrow("position", unsafe { *position })?;
        // SAFETY: the caller's buffers; `pos` is writable.
        quietly(|| unsafe { crate::types::PMPI_Unpack(inbuf, insize, &mut pos, outbuf, outcount, datatype, comm) })?;
        // SAFETY: as above.
        unsafe { *position = MpiCount::from(pos) };
        Ok(())
    }
}

// ---- collectives ----

widened!(MPI_Bcast_c / PMPI_Bcast_c(buffer: *mut c_void, count: MpiCount, datatype: Handle, root: c_int, comm: Handle) on comm, pairs [(count, datatype)] => crate::coll::PMPI_Bcast);
narrowed!(MPI_Reduce_c / PMPI_Reduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, root: c_int, comm: Handle) on comm, counts [count] => crate::coll::PMPI_Reduce);
narrowed!(MPI_Allreduce_c / PMPI_Allreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle) on comm, counts [count] => crate::coll::PMPI_Allreduce);
widened!(MPI_Gather_c / PMPI_Gather_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int, comm: Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::coll::PMPI_Gather);
widened!(MPI_Scatter_c / PMPI_Scatter_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int, comm: Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::coll::PMPI_Scatter);
widened!(MPI_Allgather_c / PMPI_Allgather_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::coll::PMPI_Allgather);
widened!(MPI_Alltoall_c / PMPI_Alltoall_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::coll::PMPI_Alltoall);
widened!(MPI_Ibcast_c / PMPI_Ibcast_c(buffer: *mut c_void, count: MpiCount, datatype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(count, datatype)] => crate::coll::PMPI_Ibcast);
narrowed!(MPI_Ireduce_c / PMPI_Ireduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm, counts [count] => crate::coll::PMPI_Ireduce);
narrowed!(MPI_Iallreduce_c / PMPI_Iallreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm, counts [count] => crate::coll::PMPI_Iallreduce);
widened!(MPI_Igather_c / PMPI_Igather_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::coll::PMPI_Igather);
widened!(MPI_Iscatter_c / PMPI_Iscatter_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::coll::PMPI_Iscatter);
widened!(MPI_Iallgather_c / PMPI_Iallgather_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::coll::PMPI_Iallgather);
widened!(MPI_Ialltoall_c / PMPI_Ialltoall_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::coll::PMPI_Ialltoall);
narrowed!(MPI_Reduce_local_c / PMPI_Reduce_local_c(inbuf: *const c_void, inoutbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle) on abi::COMM_WORLD, counts [count] => crate::op::PMPI_Reduce_local);

narrowed!(MPI_Scan_c / PMPI_Scan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle) on comm, counts [count] => crate::vcoll::PMPI_Scan);
narrowed!(MPI_Iscan_c / PMPI_Iscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm, counts [count] => crate::vcoll::PMPI_Iscan);
narrowed!(MPI_Exscan_c / PMPI_Exscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle) on comm, counts [count] => crate::vcoll::PMPI_Exscan);
narrowed!(MPI_Iexscan_c / PMPI_Iexscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm, counts [count] => crate::vcoll::PMPI_Iexscan);
narrowed!(MPI_Reduce_scatter_block_c / PMPI_Reduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: MpiCount, datatype: Handle, op: Handle, comm: Handle) on comm, counts [recvcount] => crate::vcoll::PMPI_Reduce_scatter_block);
narrowed!(MPI_Ireduce_scatter_block_c / PMPI_Ireduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: MpiCount, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm, counts [recvcount] => crate::vcoll::PMPI_Ireduce_scatter_block);
narrowed!(MPI_Reduce_scatter_c / PMPI_Reduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const MpiCount, datatype: Handle, op: Handle, comm: Handle) on comm, counts [], arrays [recvcounts] of local_group(comm) => crate::vcoll::PMPI_Reduce_scatter);
narrowed!(MPI_Ireduce_scatter_c / PMPI_Ireduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const MpiCount, datatype: Handle, op: Handle, comm: Handle, request: *mut Handle) on comm, counts [], arrays [recvcounts] of local_group(comm) => crate::vcoll::PMPI_Ireduce_scatter);
narrowed!(MPI_Gatherv_c / PMPI_Gatherv_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle, root: c_int, comm: Handle) on comm, counts [sendcount], arrays [recvcounts, displs] of at_root(comm, root) => crate::vcoll::PMPI_Gatherv);
narrowed!(MPI_Igatherv_c / PMPI_Igatherv_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm, counts [sendcount], arrays [recvcounts, displs] of at_root(comm, root) => crate::vcoll::PMPI_Igatherv);
narrowed!(MPI_Scatterv_c / PMPI_Scatterv_c(sendbuf: *const c_void, sendcounts: *const MpiCount, displs: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int, comm: Handle) on comm, counts [recvcount], arrays [sendcounts, displs] of at_root(comm, root) => crate::vcoll::PMPI_Scatterv);
narrowed!(MPI_Iscatterv_c / PMPI_Iscatterv_c(sendbuf: *const c_void, sendcounts: *const MpiCount, displs: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int, comm: Handle, request: *mut Handle) on comm, counts [recvcount], arrays [sendcounts, displs] of at_root(comm, root) => crate::vcoll::PMPI_Iscatterv);
narrowed!(MPI_Allgatherv_c / PMPI_Allgatherv_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle, comm: Handle) on comm, counts [sendcount], arrays [recvcounts, displs] of group(comm) => crate::vcoll::PMPI_Allgatherv);
narrowed!(MPI_Iallgatherv_c / PMPI_Iallgatherv_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle, comm: Handle, request: *mut Handle) on comm, counts [sendcount], arrays [recvcounts, displs] of group(comm) => crate::vcoll::PMPI_Iallgatherv);
narrowed!(MPI_Alltoallv_c / PMPI_Alltoallv_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtype: Handle, comm: Handle) on comm, counts [], arrays [sendcounts, sdispls, recvcounts, rdispls] of group(comm) => crate::vcoll::PMPI_Alltoallv);
narrowed!(MPI_Ialltoallv_c / PMPI_Ialltoallv_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtype: Handle, comm: Handle, request: *mut Handle) on comm, counts [], arrays [sendcounts, sdispls, recvcounts, rdispls] of group(comm) => crate::vcoll::PMPI_Ialltoallv);
narrowed!(MPI_Alltoallw_c / PMPI_Alltoallw_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtypes: *const Handle, comm: Handle) on comm, counts [], arrays [sendcounts, sdispls, recvcounts, rdispls] of group(comm) => crate::vcoll::PMPI_Alltoallw);
narrowed!(MPI_Ialltoallw_c / PMPI_Ialltoallw_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtypes: *const Handle, comm: Handle, request: *mut Handle) on comm, counts [], arrays [sendcounts, sdispls, recvcounts, rdispls] of group(comm) => crate::vcoll::PMPI_Ialltoallw);

widened!(MPI_Neighbor_allgather_c / PMPI_Neighbor_allgather_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::topo::PMPI_Neighbor_allgather);
widened!(MPI_Ineighbor_allgather_c / PMPI_Ineighbor_allgather_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::topo::PMPI_Ineighbor_allgather);
widened!(MPI_Neighbor_alltoall_c / PMPI_Neighbor_alltoall_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::topo::PMPI_Neighbor_alltoall);
widened!(MPI_Ineighbor_alltoall_c / PMPI_Ineighbor_alltoall_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::topo::PMPI_Ineighbor_alltoall);
narrowed!(MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle, comm: Handle) on comm, counts [sendcount], arrays [recvcounts, displs] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Neighbor_allgatherv);
narrowed!(MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle, comm: Handle, request: *mut Handle) on comm, counts [sendcount], arrays [recvcounts, displs] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Ineighbor_allgatherv);
narrowed!(MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtype: Handle, comm: Handle) on comm, counts [], arrays [sendcounts, sdispls] of degrees(comm).map(|d| d.1), arrays [recvcounts, rdispls] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Neighbor_alltoallv);
narrowed!(MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtype: Handle, comm: Handle, request: *mut Handle) on comm, counts [], arrays [sendcounts, sdispls] of degrees(comm).map(|d| d.1), arrays [recvcounts, rdispls] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Ineighbor_alltoallv);
narrowed!(MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtypes: *const Handle, comm: Handle) on comm, counts [], arrays [sendcounts] of degrees(comm).map(|d| d.1), arrays [recvcounts] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Neighbor_alltoallw);
narrowed!(MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtypes: *const Handle, comm: Handle, request: *mut Handle) on comm, counts [], arrays [sendcounts] of degrees(comm).map(|d| d.1), arrays [recvcounts] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Ineighbor_alltoallw);

// Persistent collectives with scalar counts (the `v`/`w` ones stay stubs: see the module doc).
narrowed!(MPI_Bcast_init_c / PMPI_Bcast_init_c(buffer: *mut c_void, count: MpiCount, datatype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut Handle) on comm, counts [count] => crate::pcoll::PMPI_Bcast_init);
narrowed!(MPI_Reduce_init_c / PMPI_Reduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, root: c_int, comm: Handle, info: Handle, request: *mut Handle) on comm, counts [count] => crate::pcoll::PMPI_Reduce_init);
narrowed!(MPI_Allreduce_init_c / PMPI_Allreduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut Handle) on comm, counts [count] => crate::pcoll::PMPI_Allreduce_init);
widened!(MPI_Gather_init_c / PMPI_Gather_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::pcoll::PMPI_Gather_init);
widened!(MPI_Scatter_init_c / PMPI_Scatter_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int, comm: Handle, info: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::pcoll::PMPI_Scatter_init);
widened!(MPI_Allgather_init_c / PMPI_Allgather_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle, info: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::pcoll::PMPI_Allgather_init);
widened!(MPI_Alltoall_init_c / PMPI_Alltoall_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle, info: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::pcoll::PMPI_Alltoall_init);
narrowed!(MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: MpiCount, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut Handle) on comm, counts [recvcount] => crate::pcoll::PMPI_Reduce_scatter_block_init);
narrowed!(MPI_Scan_init_c / PMPI_Scan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut Handle) on comm, counts [count] => crate::pcoll::PMPI_Scan_init);
narrowed!(MPI_Exscan_init_c / PMPI_Exscan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MpiCount, datatype: Handle, op: Handle, comm: Handle, info: Handle, request: *mut Handle) on comm, counts [count] => crate::pcoll::PMPI_Exscan_init);
widened!(MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle, info: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::pcoll::PMPI_Neighbor_allgather_init);
widened!(MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, comm: Handle, info: Handle, request: *mut Handle) on comm, pairs [(sendcount, sendtype), (recvcount, recvtype)] => crate::pcoll::PMPI_Neighbor_alltoall_init);

// ---- files ----

narrowed!(MPI_File_read_c / PMPI_File_read_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read);
narrowed!(MPI_File_write_c / PMPI_File_write_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write);
narrowed!(MPI_File_read_all_c / PMPI_File_read_all_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read_all);
narrowed!(MPI_File_write_all_c / PMPI_File_write_all_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write_all);
narrowed!(MPI_File_read_at_c / PMPI_File_read_at_c(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read_at);
narrowed!(MPI_File_write_at_c / PMPI_File_write_at_c(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write_at);
narrowed!(MPI_File_read_at_all_c / PMPI_File_read_at_all_c(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read_at_all);
narrowed!(MPI_File_write_at_all_c / PMPI_File_write_at_all_c(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write_at_all);
narrowed!(MPI_File_iread_c / PMPI_File_iread_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iread);
narrowed!(MPI_File_iwrite_c / PMPI_File_iwrite_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iwrite);
narrowed!(MPI_File_iread_all_c / PMPI_File_iread_all_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iread_all);
narrowed!(MPI_File_iwrite_all_c / PMPI_File_iwrite_all_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iwrite_all);
narrowed!(MPI_File_iread_at_c / PMPI_File_iread_at_c(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iread_at);
narrowed!(MPI_File_iwrite_at_c / PMPI_File_iwrite_at_c(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iwrite_at);
narrowed!(MPI_File_iread_at_all_c / PMPI_File_iread_at_all_c(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iread_at_all);
narrowed!(MPI_File_iwrite_at_all_c / PMPI_File_iwrite_at_all_c(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iwrite_at_all);
narrowed!(MPI_File_read_shared_c / PMPI_File_read_shared_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read_shared);
narrowed!(MPI_File_write_shared_c / PMPI_File_write_shared_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write_shared);
narrowed!(MPI_File_iread_shared_c / PMPI_File_iread_shared_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iread_shared);
narrowed!(MPI_File_iwrite_shared_c / PMPI_File_iwrite_shared_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle, request: *mut Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_iwrite_shared);
narrowed!(MPI_File_read_ordered_c / PMPI_File_read_ordered_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read_ordered);
narrowed!(MPI_File_write_ordered_c / PMPI_File_write_ordered_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle, status: *mut MpiStatus) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write_ordered);
narrowed!(MPI_File_read_all_begin_c / PMPI_File_read_all_begin_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read_all_begin);
narrowed!(MPI_File_write_all_begin_c / PMPI_File_write_all_begin_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write_all_begin);
narrowed!(MPI_File_read_at_all_begin_c / PMPI_File_read_at_all_begin_c(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: MpiCount, datatype: Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read_at_all_begin);
narrowed!(MPI_File_write_at_all_begin_c / PMPI_File_write_at_all_begin_c(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: MpiCount, datatype: Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write_at_all_begin);
narrowed!(MPI_File_read_ordered_begin_c / PMPI_File_read_ordered_begin_c(fh: *mut c_void, buf: *mut c_void, count: MpiCount, datatype: Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_read_ordered_begin);
narrowed!(MPI_File_write_ordered_begin_c / PMPI_File_write_ordered_begin_c(fh: *mut c_void, buf: *const c_void, count: MpiCount, datatype: Handle) on crate::file::key_of(fh), counts [count] => crate::file::PMPI_File_write_ordered_begin);
narrowed!(MPI_File_get_type_extent_c / PMPI_File_get_type_extent_c(fh: *mut c_void, datatype: Handle, extent: *mut MpiCount) on crate::file::key_of(fh), counts [] => crate::file::PMPI_File_get_type_extent);

// ---- one-sided ----

narrowed!(MPI_Put_c / PMPI_Put_c(origin_addr: *const c_void, origin_count: MpiCount, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: MpiCount, target_datatype: Handle, win: Handle) on win, counts [origin_count, target_count] => crate::win::PMPI_Put);
narrowed!(MPI_Get_c / PMPI_Get_c(origin_addr: *mut c_void, origin_count: MpiCount, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: MpiCount, target_datatype: Handle, win: Handle) on win, counts [origin_count, target_count] => crate::win::PMPI_Get);
narrowed!(MPI_Accumulate_c / PMPI_Accumulate_c(origin_addr: *const c_void, origin_count: MpiCount, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: MpiCount, target_datatype: Handle, op: Handle, win: Handle) on win, counts [origin_count, target_count] => crate::win::PMPI_Accumulate);
narrowed!(MPI_Get_accumulate_c / PMPI_Get_accumulate_c(origin_addr: *const c_void, origin_count: MpiCount, origin_datatype: Handle, result_addr: *mut c_void, result_count: MpiCount, result_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: MpiCount, target_datatype: Handle, op: Handle, win: Handle) on win, counts [origin_count, result_count, target_count] => crate::win::PMPI_Get_accumulate);
narrowed!(MPI_Rput_c / PMPI_Rput_c(origin_addr: *const c_void, origin_count: MpiCount, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: MpiCount, target_datatype: Handle, win: Handle, request: *mut Handle) on win, counts [origin_count, target_count] => crate::winlock::PMPI_Rput);
narrowed!(MPI_Rget_c / PMPI_Rget_c(origin_addr: *mut c_void, origin_count: MpiCount, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: MpiCount, target_datatype: Handle, win: Handle, request: *mut Handle) on win, counts [origin_count, target_count] => crate::winlock::PMPI_Rget);
narrowed!(MPI_Raccumulate_c / PMPI_Raccumulate_c(origin_addr: *const c_void, origin_count: MpiCount, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: MpiCount, target_datatype: Handle, op: Handle, win: Handle, request: *mut Handle) on win, counts [origin_count, target_count] => crate::winlock::PMPI_Raccumulate);
narrowed!(MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c(origin_addr: *const c_void, origin_count: MpiCount, origin_datatype: Handle, result_addr: *mut c_void, result_count: MpiCount, result_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: MpiCount, target_datatype: Handle, op: Handle, win: Handle, request: *mut Handle) on win, counts [origin_count, result_count, target_count] => crate::winlock::PMPI_Rget_accumulate);
narrowed!(MPI_Win_create_c / PMPI_Win_create_c(base: *mut c_void, size: MpiAint, disp_unit: MpiAint, info: Handle, comm: Handle, win: *mut Handle) on comm, counts [disp_unit] => crate::win::PMPI_Win_create);
narrowed!(MPI_Win_allocate_c / PMPI_Win_allocate_c(size: MpiAint, disp_unit: MpiAint, info: Handle, comm: Handle, baseptr: *mut c_void, win: *mut Handle) on comm, counts [disp_unit] => crate::win::PMPI_Win_allocate);
narrowed!(MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c(size: MpiAint, disp_unit: MpiAint, info: Handle, comm: Handle, baseptr: *mut c_void, win: *mut Handle) on comm, counts [disp_unit] => crate::winshm::PMPI_Win_allocate_shared);

mpi_fn! {
    /// `MPI_Win_shared_query_c`: `MPI_Win_shared_query` with an `MPI_Aint` displacement unit.
    MPI_Win_shared_query_c / PMPI_Win_shared_query_c(win: Handle, rank: c_int, size: *mut MpiAint, disp_unit: *mut MpiAint, baseptr: *mut c_void) on win => {
        if disp_unit.is_null() {
            return Err(MpiError::new(err::ARG, "disp_unit is NULL"));
        }
        let mut unit: c_int = 0;
        // SAFETY: the caller's pointers; `unit` is writable.
        quietly(|| unsafe { crate::winshm::PMPI_Win_shared_query(win, rank, size, &mut unit, baseptr) })?;
        // SAFETY: the caller's unit, checked not NULL.
        unsafe { *disp_unit = MpiAint::from(unit) };
        Ok(())
    }
}

// ---- persistent v and w collectives ----

/// An argument of a persistent `_c` collective as kept by its request (see
/// [`persistent_c`]): narrowed arrays are owned, pointers kept as addresses (the caller's
/// buffers and arrays, which MPI leaves to the library while the request lives).
trait Carry {
    /// What the request keeps.
    type Kept: Carried;
    /// The value to keep.
    fn carry(self) -> Self::Kept;
}

/// A kept argument, given back to each start.
trait Carried: Send + Sync + 'static {
    /// The argument of the `int` form.
    type Arg;
    /// The argument back.
    fn arg(&self) -> Self::Arg;
}

/// A kept pointer of type `P`.
struct Addr<P>(usize, std::marker::PhantomData<fn() -> P>);

impl Carry for c_int {
    type Kept = c_int;
    fn carry(self) -> c_int {
        self
    }
}

impl Carried for c_int {
    type Arg = c_int;
    fn arg(&self) -> c_int {
        *self
    }
}

impl<T: 'static> Carry for *const T {
    type Kept = Addr<*const T>;
    fn carry(self) -> Self::Kept {
        Addr(self as usize, std::marker::PhantomData)
    }
}

impl<T: 'static> Carried for Addr<*const T> {
    type Arg = *const T;
    fn arg(&self) -> *const T {
        self.0 as *const T
    }
}

impl<T: 'static> Carry for *mut T {
    type Kept = Addr<*mut T>;
    fn carry(self) -> Self::Kept {
        Addr(self as usize, std::marker::PhantomData)
    }
}

impl<T: 'static> Carried for Addr<*mut T> {
    type Arg = *mut T;
    fn arg(&self) -> *mut T {
        self.0 as *mut T
    }
}

impl Carry for Option<Vec<c_int>> {
    type Kept = Option<Vec<c_int>>;
    fn carry(self) -> Self::Kept {
        self
    }
}

impl Carried for Option<Vec<c_int>> {
    type Arg = *const c_int;
    fn arg(&self) -> *const c_int {
        ptr_of(self)
    }
}

/// Defines the persistent `MPI_X_init_c(args..., comm, info, request)`: the counts named in
/// `counts [...]` and the arrays named in each `arrays [...] of LEN` are narrowed at the call
/// (as in [`narrowed`]) and kept with the other arguments; each `MPI_Start` calls the `int`
/// nonblocking form `$start` with them.
macro_rules! persistent_c {
    ($mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* ; $comm:ident, $info:ident, $request:ident ),
     counts [$($c:ident),*] $(, arrays [$($arr:ident),*] of $n:expr)* => $start:path) => {
        mpi_fn! {
            #[doc = concat!("`", stringify!($mpi), "`: a persistent request; each `MPI_Start` starts `", stringify!($start), "` on these arguments, counts and count arrays narrowed at this call (`MPI_ERR_COUNT` past 32 bits).")]
            $mpi / $pmpi ( $($a : $t,)* $comm: Handle, $info: Handle, $request: *mut Handle) on $comm => {
                let _ = $info;
                $( let $c = narrow(stringify!($c), $c)?; )*
                $(
                    let n: usize = $n?;
                    // SAFETY: the caller's arrays of `n` values, as the call's contract says.
                    $( let $arr = unsafe { narrow_array(stringify!($arr), $arr, n) }?; )*
                )*
                $( let $a = Carry::carry($a); )*
                let start = move || -> Result<Handle, MpiError> {
                    let mut h = abi::REQUEST_NULL;
                    // SAFETY: the arguments given to the `_init` call, which MPI leaves valid
                    // (buffers and arrays included) while the persistent request lives; the
                    // narrowed arrays are the request's own.
                    quietly(|| unsafe { $start($($a.arg(),)* $comm, &mut h) })?;
                    Ok(h)
                };
                // SAFETY: the caller's handle.
                unsafe { crate::pcoll::make($comm, std::sync::Arc::new(start), false, $request) }
            }
        }
    };
}

persistent_c!(MPI_Gatherv_init_c / PMPI_Gatherv_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle, root: c_int; comm, info, request), counts [sendcount], arrays [recvcounts, displs] of at_root(comm, root) => crate::vcoll::PMPI_Igatherv);
persistent_c!(MPI_Scatterv_init_c / PMPI_Scatterv_init_c(sendbuf: *const c_void, sendcounts: *const MpiCount, displs: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcount: MpiCount, recvtype: Handle, root: c_int; comm, info, request), counts [recvcount], arrays [sendcounts, displs] of at_root(comm, root) => crate::vcoll::PMPI_Iscatterv);
persistent_c!(MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle; comm, info, request), counts [sendcount], arrays [recvcounts, displs] of group(comm) => crate::vcoll::PMPI_Iallgatherv);
persistent_c!(MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtype: Handle; comm, info, request), counts [], arrays [sendcounts, sdispls, recvcounts, rdispls] of group(comm) => crate::vcoll::PMPI_Ialltoallv);
persistent_c!(MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtypes: *const Handle; comm, info, request), counts [], arrays [sendcounts, sdispls, recvcounts, rdispls] of group(comm) => crate::vcoll::PMPI_Ialltoallw);
persistent_c!(MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const MpiCount, datatype: Handle, op: Handle; comm, info, request), counts [], arrays [recvcounts] of local_group(comm) => crate::vcoll::PMPI_Ireduce_scatter);
persistent_c!(MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c(sendbuf: *const c_void, sendcount: MpiCount, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, displs: *const MpiAint, recvtype: Handle; comm, info, request), counts [sendcount], arrays [recvcounts, displs] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Ineighbor_allgatherv);
persistent_c!(MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtype: Handle; comm, info, request), counts [], arrays [sendcounts, sdispls] of degrees(comm).map(|d| d.1), arrays [recvcounts, rdispls] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Ineighbor_alltoallv);
persistent_c!(MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const MpiCount, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const MpiCount, rdispls: *const MpiAint, recvtypes: *const Handle; comm, info, request), counts [], arrays [sendcounts] of degrees(comm).map(|d| d.1), arrays [recvcounts] of degrees(comm).map(|d| d.0) => crate::topo::PMPI_Ineighbor_alltoallw);

// ---- datatypes, external32 ----

narrowed!(MPI_Pack_external_c / PMPI_Pack_external_c(datarep: *const std::ffi::c_char, inbuf: *const c_void, incount: MpiCount, datatype: Handle, outbuf: *mut c_void, outsize: MpiCount, position: *mut MpiCount) on abi::COMM_WORLD, counts [incount] => crate::external::PMPI_Pack_external);
narrowed!(MPI_Unpack_external_c / PMPI_Unpack_external_c(datarep: *const std::ffi::c_char, inbuf: *const c_void, insize: MpiCount, position: *mut MpiCount, outbuf: *mut c_void, outcount: MpiCount, datatype: Handle) on abi::COMM_WORLD, counts [outcount] => crate::external::PMPI_Unpack_external);
narrowed!(MPI_Pack_external_size_c / PMPI_Pack_external_size_c(datarep: *const std::ffi::c_char, incount: MpiCount, datatype: Handle, size: *mut MpiCount) on abi::COMM_WORLD, counts [incount] => crate::external::PMPI_Pack_external_size);
narrowed!(MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(ndims: c_int, array_of_sizes: *const MpiCount, array_of_subsizes: *const MpiCount, array_of_starts: *const MpiCount, order: c_int, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD, counts [], arrays [array_of_sizes, array_of_subsizes, array_of_starts] of len(ndims) => crate::types2::PMPI_Type_create_subarray);
narrowed!(MPI_Type_create_darray_c / PMPI_Type_create_darray_c(size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const MpiCount, array_of_distribs: *const c_int, array_of_dargs: *const c_int, array_of_psizes: *const c_int, order: c_int, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD, counts [], arrays [array_of_gsizes] of len(ndims) => crate::types2::PMPI_Type_create_darray);

mpi_fn! {
    /// `MPI_Type_get_envelope_c`: `MPI_Type_get_envelope` with 64-bit numbers, and the large
    /// counts of a type built by a `_c` constructor that keeps them (contiguous, vector,
    /// hvector).
    MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(datatype: Handle, num_integers: *mut MpiCount, num_addresses: *mut MpiCount, num_large_counts: *mut MpiCount, num_datatypes: *mut MpiCount, combiner: *mut c_int) on abi::COMM_WORLD => {
        if num_integers.is_null() || num_addresses.is_null() || num_large_counts.is_null() || num_datatypes.is_null() || combiner.is_null() {
            return Err(MpiError::new(err::ARG, "an output argument is NULL"));
        }
        let (ni, na, nc, nd, comb) = crate::types2::envelope(datatype)?;
        // SAFETY: the caller's outputs, checked not NULL.
        unsafe {
            *num_integers = ni as MpiCount;
            *num_addresses = na as MpiCount;
            *num_large_counts = nc as MpiCount;
            *num_datatypes = nd as MpiCount;
            *combiner = comb;
        }
        Ok(())
    }
}

/// A capacity given as `MPI_Count`, as the `int` of the form without `_c` (a larger one is
/// as large as any `int` array this library writes).
fn capacity(what: &str, v: MpiCount) -> Result<c_int, MpiError> {
    if v < 0 {
        return Err(MpiError::new(err::ARG, format!("{what} = {v} is negative")));
    }
    Ok(c_int::try_from(v).unwrap_or(c_int::MAX))
}

mpi_fn! {
    /// `MPI_Type_get_contents_c`: `MPI_Type_get_contents` with 64-bit array sizes and the
    /// large counts (see `MPI_Type_get_envelope_c`).
    MPI_Type_get_contents_c / PMPI_Type_get_contents_c(datatype: Handle, max_integers: MpiCount, max_addresses: MpiCount, max_large_counts: MpiCount, max_datatypes: MpiCount, array_of_integers: *mut c_int, array_of_addresses: *mut MpiAint, array_of_large_counts: *mut MpiCount, array_of_datatypes: *mut Handle) on abi::COMM_WORLD => {
        capacity("max_large_counts", max_large_counts)?;
        let max = [max_integers, max_addresses, max_large_counts, max_datatypes];
        for (what, v) in ["max_integers", "max_addresses", "max_datatypes"].iter().zip([max_integers, max_addresses, max_datatypes]) {
            capacity(what, v)?;
        }
        // SAFETY: the caller's arrays of at least the given sizes.
        unsafe { crate::types2::contents(datatype, max, array_of_integers, array_of_addresses, array_of_large_counts, array_of_datatypes) }
    }
}
