//! The `v` and `w` collectives on datatypes with holes (a vector, a struct with gaps, a
//! resized column): `MPI_Gatherv`, `MPI_Scatterv`, `MPI_Allgatherv`, `MPI_Alltoallv`,
//! `MPI_Alltoallw` and their nonblocking (and so persistent) forms move bytes, so a side whose
//! datatype has holes is described as one layout of every rank's part at its displacement,
//! packed into a contiguous copy in rank order; the byte form ([`crate::vcoll`]) runs on the
//! copies with byte counts and displacements, and a receiving copy is unpacked into the
//! caller's buffer when the call (or its request) completes. Each function returns `None`
//! when no buffer of the call has holes (the byte form then runs as it is).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use viaduct_agent::comm::Comm;

use crate::abi::{Handle, dt, err};
use crate::error::MpiError;
use crate::holes::{in_place, int_len};
use crate::types::{Layout, build, count_arg, layout};
use crate::vcoll::{Staged, Started};

/// Whether the byte form cannot take `t` as it is (a datatype with holes or a lower bound
/// other than 0: it moves plain bytes).
fn holey(t: Handle) -> bool {
    layout(t).is_ok_and(|l| !l.contiguous())
}

/// One side of a collective in packed form: every rank's part (or this rank's only) as one
/// layout, the packed bytes, and each part's byte count and offset in them.
struct Side {
    layout: Arc<Layout>,
    bytes: Vec<u8>,
    counts: Vec<c_int>,
    displs: Vec<c_int>,
}

impl Side {
    /// The parts `(byte displacement, count, datatype)` in rank order at `user`: packed from
    /// it when `fill`, else zeros to receive into.
    ///
    /// # Safety
    ///
    /// With `fill`, `user` holds every part's elements, readable.
    unsafe fn new(
        parts: &[(isize, c_int, Handle)],
        user: *const c_void,
        fill: bool,
    ) -> Result<Side, MpiError> {
        let mut blocks = Vec::with_capacity(parts.len());
        let (mut counts, mut displs) = (Vec::new(), Vec::new());
        let mut at = 0usize;
        for &(d, c, t) in parts {
            let l = layout(t)?;
            let n = count_arg(c, "count")?;
            let len = l
                .size
                .checked_mul(n)
                .ok_or_else(|| MpiError::new(err::COUNT, format!("{c} elements overflow")))?;
            counts.push(int_len(len)?);
            displs.push(int_len(at)?);
            at += len;
            blocks.push((d, n, l, t));
        }
        let layout = Arc::new(build(&blocks)?);
        let mut bytes = Vec::new();
        if fill {
            // SAFETY: the caller's buffer of every part (this function's contract).
            unsafe { layout.pack(user.cast(), 1, &mut bytes) };
        } else {
            bytes = vec![0; at];
        }
        Ok(Side {
            layout,
            bytes,
            counts,
            displs,
        })
    }

    /// `count` elements of `t` at `user`, as one part.
    ///
    /// # Safety
    ///
    /// As [`Side::new`].
    unsafe fn one(
        count: c_int,
        t: Handle,
        user: *const c_void,
        fill: bool,
    ) -> Result<Side, MpiError> {
        // SAFETY: passed on.
        unsafe { Side::new(&[(0, count, t)], user, fill) }
    }

    fn ptr(&mut self) -> *mut c_void {
        self.bytes.as_mut_ptr().cast()
    }

    /// The byte count of the whole copy.
    fn len(&self) -> Result<c_int, MpiError> {
        int_len(self.bytes.len())
    }

    /// What unpacks the received copy into the caller's `user` buffer after delivery.
    fn staged(self, user: *mut c_void) -> Staged {
        Staged {
            bytes: self.bytes,
            layout: self.layout,
            elems: 1,
            user: user as usize,
        }
    }
}

/// The parts `(counts[i] elements at displs[i] extents of t)` of `n` ranks.
///
/// # Safety
///
/// `counts` and `displs` hold `n` ints.
unsafe fn parts_v(
    counts: *const c_int,
    displs: *const c_int,
    t: Handle,
    n: usize,
) -> Result<Vec<(isize, c_int, Handle)>, MpiError> {
    if counts.is_null() || displs.is_null() {
        return Err(MpiError::new(err::ARG, "counts or displacements are NULL"));
    }
    let ext = layout(t)?.extent;
    // SAFETY: the caller's arrays of `n` ints.
    Ok((0..n)
        .map(|i| unsafe { (*displs.add(i) as isize * ext, *counts.add(i), t) })
        .collect())
}

/// The parts `(counts[i] elements of types[i] at byte displs[i])` of `n` ranks.
///
/// # Safety
///
/// `counts`, `displs` and `types` hold `n` entries.
unsafe fn parts_w(
    counts: *const c_int,
    displs: *const c_int,
    types: *const Handle,
    n: usize,
) -> Result<Vec<(isize, c_int, Handle)>, MpiError> {
    if counts.is_null() || displs.is_null() || types.is_null() {
        return Err(MpiError::new(
            err::ARG,
            "counts, displacements or types are NULL",
        ));
    }
    // SAFETY: the caller's arrays of `n` entries.
    Ok((0..n)
        .map(|i| unsafe { (*displs.add(i) as isize, *counts.add(i), *types.add(i)) })
        .collect())
}

/// Whether any of `n` datatypes at `types` has holes.
///
/// # Safety
///
/// `types` is NULL or holds `n` handles.
unsafe fn any_holey(types: *const Handle, n: usize) -> bool {
    // SAFETY: the caller's array of `n` handles.
    !types.is_null() && (0..n).any(|i| holey(unsafe { *types.add(i) }))
}

/// `MPI_Gatherv` with a send or (at the root) receive datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Gatherv`.
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
) -> Option<Result<Started, MpiError>> {
    let is_root = root == c.rank() as c_int;
    let send_holes = !in_place(sendbuf) && holey(sendtype);
    let recv_holes = is_root && holey(recvtype);
    if !send_holes && !recv_holes {
        return None;
    }
    Some((|| {
        let mut send = None;
        let (mut sb, mut sc, mut st) = (sendbuf, sendcount, sendtype);
        if send_holes {
            // SAFETY: the caller's send buffer of `sendcount` elements.
            let s = send.insert(unsafe { Side::one(sendcount, sendtype, sendbuf, true) }?);
            (sb, sc, st) = (s.ptr().cast_const(), s.len()?, dt::BYTE);
        }
        if !recv_holes {
            // SAFETY: the caller's arguments, the send side packed.
            return unsafe {
                crate::vcoll::gatherv(c, sb, sc, st, recvbuf, recvcounts, displs, recvtype, root)
            };
        }
        // SAFETY: the root's arrays of `size` ints.
        let ps = unsafe { parts_v(recvcounts, displs, recvtype, c.size() as usize) }?;
        // In place, the root's own part is in its receive buffer already.
        // SAFETY: the root's receive buffer of every part.
        let mut r = unsafe { Side::new(&ps, recvbuf, in_place(sendbuf)) }?;
        let (rb, rc, rd) = (r.ptr(), r.counts.as_ptr(), r.displs.as_ptr());
        // SAFETY: packed copies of this frame (the receiving one kept by the result).
        let started = unsafe { crate::vcoll::gatherv(c, sb, sc, st, rb, rc, rd, dt::BYTE, root) }?;
        Ok(started.staged(r.staged(recvbuf)))
    })())
}

/// `MPI_Scatterv` with a (root's) send or receive datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Scatterv`.
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
) -> Option<Result<Started, MpiError>> {
    let is_root = root == c.rank() as c_int;
    let send_holes = is_root && holey(sendtype);
    let recv_holes = !in_place(recvbuf) && holey(recvtype);
    if !send_holes && !recv_holes {
        return None;
    }
    Some((|| {
        let mut send = None;
        let (mut sb, mut sc, mut sd, mut st) = (sendbuf, sendcounts, displs, sendtype);
        if send_holes {
            // SAFETY: the root's arrays of `size` ints.
            let ps = unsafe { parts_v(sendcounts, displs, sendtype, c.size() as usize) }?;
            // SAFETY: the root's send buffer of every part.
            let s = send.insert(unsafe { Side::new(&ps, sendbuf, true) }?);
            (sb, sc, sd, st) = (
                s.ptr().cast_const(),
                s.counts.as_ptr(),
                s.displs.as_ptr(),
                dt::BYTE,
            );
        }
        if !recv_holes {
            // SAFETY: the caller's arguments, the send side packed.
            return unsafe {
                crate::vcoll::scatterv(c, sb, sc, sd, st, recvbuf, recvcount, recvtype, root)
            };
        }
        // SAFETY: zeros to receive into.
        let mut r = unsafe { Side::one(recvcount, recvtype, recvbuf, false) }?;
        let (rb, rc) = (r.ptr(), r.len()?);
        // SAFETY: packed copies of this frame (the receiving one kept by the result).
        let started = unsafe { crate::vcoll::scatterv(c, sb, sc, sd, st, rb, rc, dt::BYTE, root) }?;
        Ok(started.staged(r.staged(recvbuf)))
    })())
}

/// `MPI_Allgatherv` with a send or receive datatype with holes.
///
/// # Safety
///
/// The caller's arguments to `MPI_Allgatherv`.
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
) -> Option<Result<Started, MpiError>> {
    let send_holes = !in_place(sendbuf) && holey(sendtype);
    if !send_holes && !holey(recvtype) {
        return None;
    }
    Some((|| {
        let mut send = None;
        let (mut sb, mut sc, mut st) = (sendbuf, sendcount, sendtype);
        if send_holes {
            // SAFETY: the caller's send buffer of `sendcount` elements.
            let s = send.insert(unsafe { Side::one(sendcount, sendtype, sendbuf, true) }?);
            (sb, sc, st) = (s.ptr().cast_const(), s.len()?, dt::BYTE);
        }
        if !holey(recvtype) {
            // SAFETY: the caller's arguments, the send side packed.
            return unsafe {
                crate::vcoll::allgatherv(c, sb, sc, st, recvbuf, recvcounts, displs, recvtype)
            };
        }
        // SAFETY: the caller's arrays of `size` ints.
        let ps = unsafe { parts_v(recvcounts, displs, recvtype, c.size() as usize) }?;
        // SAFETY: the caller's receive buffer of every part (this rank's read in place).
        let mut r = unsafe { Side::new(&ps, recvbuf, in_place(sendbuf)) }?;
        let (rb, rc, rd) = (r.ptr(), r.counts.as_ptr(), r.displs.as_ptr());
        // SAFETY: packed copies of this frame (the receiving one kept by the result).
        let started = unsafe { crate::vcoll::allgatherv(c, sb, sc, st, rb, rc, rd, dt::BYTE) }?;
        Ok(started.staged(r.staged(recvbuf)))
    })())
}

/// `MPI_Alltoallv` (`types` `None`) or `MPI_Alltoallw` (the per-rank datatypes, byte
/// displacements) with a send or receive datatype with holes.
///
/// # Safety
///
/// The caller's arguments to the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoall_vw(
    c: &Comm,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: Types,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: Types,
) -> Option<Result<Started, MpiError>> {
    let n = c.size() as usize;
    // SAFETY: the caller's arrays of `size` handles.
    let send_holes = !in_place(sendbuf) && unsafe { sendtypes.holey(n) };
    // SAFETY: as above.
    let recv_holes = unsafe { recvtypes.holey(n) };
    if !send_holes && !recv_holes {
        return None;
    }
    Some((|| {
        let bytes = vec![dt::BYTE; n];
        let mut send = None;
        let (mut sb, mut sc, mut sd) = (sendbuf, sendcounts, sdispls);
        let mut st = sendtypes;
        if send_holes {
            // SAFETY: the caller's arrays of `size` entries.
            let ps = unsafe { sendtypes.parts(sendcounts, sdispls, n) }?;
            // SAFETY: the caller's send buffer of every part.
            let s = send.insert(unsafe { Side::new(&ps, sendbuf, true) }?);
            (sb, sc, sd) = (s.ptr().cast_const(), s.counts.as_ptr(), s.displs.as_ptr());
            st = sendtypes.bytes(&bytes);
        }
        let mut recv = None;
        let (mut rb, mut rc, mut rd) = (recvbuf, recvcounts, rdispls);
        let mut rt = recvtypes;
        if recv_holes {
            // SAFETY: the caller's arrays of `size` entries.
            let ps = unsafe { recvtypes.parts(recvcounts, rdispls, n) }?;
            // In place, the receive buffer is the send buffer too.
            // SAFETY: the caller's receive buffer of every part.
            let r = recv.insert(unsafe { Side::new(&ps, recvbuf, in_place(sendbuf)) }?);
            (rb, rc, rd) = (r.ptr(), r.counts.as_ptr(), r.displs.as_ptr());
            rt = recvtypes.bytes(&bytes);
        }
        // SAFETY: the caller's arguments or packed copies of this frame.
        let started = unsafe {
            match (st, rt) {
                (Types::One(s), Types::One(r)) => {
                    crate::vcoll::alltoallv(c, sb, sc, sd, s, rb, rc, rd, r)
                }
                (s, r) => crate::vcoll::alltoallw(c, sb, sc, sd, s.array(), rb, rc, rd, r.array()),
            }
        }?;
        Ok(match recv {
            Some(r) => started.staged(r.staged(recvbuf)),
            None => started,
        })
    })())
}

/// The datatypes of one side of an all-to-all: one for every rank (`MPI_Alltoallv`, counts
/// and displacements in its extents) or one each (`MPI_Alltoallw`, byte displacements).
#[derive(Clone, Copy)]
pub(crate) enum Types {
    /// `MPI_Alltoallv`'s datatype.
    One(Handle),
    /// `MPI_Alltoallw`'s array of `size` datatypes.
    Each(*const Handle),
}

impl Types {
    /// Whether a datatype has holes.
    ///
    /// # Safety
    ///
    /// An array holds `n` handles.
    unsafe fn holey(self, n: usize) -> bool {
        match self {
            Types::One(t) => holey(t),
            // SAFETY: this function's contract.
            Types::Each(ts) => unsafe { any_holey(ts, n) },
        }
    }

    /// Each rank's part.
    ///
    /// # Safety
    ///
    /// `counts`, `displs` (and an array of types) hold `n` entries.
    unsafe fn parts(
        self,
        counts: *const c_int,
        displs: *const c_int,
        n: usize,
    ) -> Result<Vec<(isize, c_int, Handle)>, MpiError> {
        match self {
            // SAFETY: this function's contract.
            Types::One(t) => unsafe { parts_v(counts, displs, t, n) },
            // SAFETY: this function's contract.
            Types::Each(ts) => unsafe { parts_w(counts, displs, ts, n) },
        }
    }

    /// The same form with `MPI_BYTE` (`bytes`: `size` of them for the array form).
    fn bytes(self, bytes: &[Handle]) -> Types {
        match self {
            Types::One(_) => Types::One(dt::BYTE),
            Types::Each(_) => Types::Each(bytes.as_ptr()),
        }
    }

    /// The array form's pointer (the one-datatype form never gets here with an array).
    fn array(self) -> *const Handle {
        match self {
            Types::Each(ts) => ts,
            Types::One(_) => std::ptr::null(),
        }
    }
}
