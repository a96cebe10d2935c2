//! Nonblocking collectives on intercommunicators: `MPI_Ibarrier`, `MPI_Ibcast`,
//! `MPI_Ireduce`, `MPI_Iallreduce`, `MPI_Igather`, `MPI_Iscatter`, `MPI_Iallgather`,
//! `MPI_Ialltoall`; and the `v` and `w` forms and the reduce-scatters, blocking (started,
//! then waited for) or not. Each is a set of point-to-point messages between the two groups on the
//! intercommunicator's collective context, started at once (a rank that gives data sends it
//! to every remote rank that needs it; a rank that gets data posts a receive from each remote
//! rank that gives it), so no rank waits for any other to call; the request completes when
//! all of them did, and a receiving rank's result (copied, or folded in remote rank order for
//! a reduction) reaches its buffer then. Straight messages, not trees: `n * m` of them for the
//! all-to-all patterns of groups of `n` and `m` ranks.
//!
//! Their tag differs from the blocking intercommunicator collectives' ([`crate::inter`]), and
//! every member starts a communicator's nonblocking collectives in the same order, so the
//! messages of two of them never match each other's receives.

use std::ffi::{c_int, c_void};

use viaduct_agent::coll::Reduction;
use viaduct_agent::comm::Intercomm;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::Request;

use crate::abi::Handle;
use crate::datatype::{bytes, input, output};
use crate::error::MpiError;
use crate::inter::Role;
use crate::op::{fold, reduction};
use crate::state::rt;
use crate::vcoll::{Started, all_of, parts, parts_w, span};

/// Tag of the nonblocking collectives' messages (the blocking ones use 1).
const TAG: u32 = 2;

/// Every remote rank with the same `data`.
fn to_every<'a>(ic: &Intercomm, data: &'a [u8]) -> Vec<(u32, &'a [u8])> {
    (0..ic.remote.size()).map(|r| (r, data)).collect()
}

/// A started exchange: `sends` (remote rank, bytes) go out, and the message of each of
/// `recvs` (remote rank, offset, length) lands at its offset of the caller's `span` bytes at
/// `dst` when all completed.
fn exchange(
    ic: &Intercomm,
    sends: &[(u32, &[u8])],
    recvs: Vec<(u32, usize, usize)>,
    dst: *mut c_void,
    span: usize,
) -> Result<Started, MpiError> {
    let mut reqs = Vec::new();
    let mut got = Vec::new();
    for &(r, at, len) in &recvs {
        let (q, b) = ic.coll.irecv(len, Source::Rank(r), TagMatch::Tag(TAG))?;
        reqs.push(q);
        got.push((at, len, b));
    }
    for &(r, data) in sends {
        reqs.push(ic.coll.isend(r, TAG, data)?);
    }
    Ok(Started::with_finish(
        all_of(reqs),
        dst,
        span,
        Box::new(move |out: &mut [u8]| {
            for (at, len, b) in got {
                let data = b.take();
                let k = data.len().min(len).min(out.len().saturating_sub(at));
                out[at..at + k].copy_from_slice(&data[..k]);
            }
        }),
    ))
}

/// Each of `n` remote ranks' slot of `len` bytes, one after the other.
fn slots(n: u32, len: usize) -> Vec<(u32, usize, usize)> {
    (0..n).map(|r| (r, r as usize * len, len)).collect()
}

/// A started reduction: the data of `to` goes to its remote ranks; the vectors of `total`
/// bytes every remote rank sends are folded in remote rank order, and the `block` (offset,
/// length) of the result lands in the caller's buffer at `dst`.
fn reduced(
    ic: &Intercomm,
    to: &[(u32, &[u8])],
    total: usize,
    red: Reduction,
    dst: *mut c_void,
    block: (usize, usize),
) -> Result<Started, MpiError> {
    let mut reqs = Vec::new();
    let mut bufs: Vec<RecvBuffer> = Vec::new();
    for r in 0..ic.remote.size() {
        let (q, b) = ic.coll.irecv(total, Source::Rank(r), TagMatch::Tag(TAG))?;
        reqs.push(q);
        bufs.push(b);
    }
    for &(r, data) in to {
        reqs.push(ic.coll.isend(r, TAG, data)?);
    }
    Ok(Started::with_finish(
        all_of(reqs),
        dst,
        block.1,
        Box::new(move |out: &mut [u8]| {
            let mut all = Vec::with_capacity(total * bufs.len());
            for b in bufs {
                let mut got = b.take();
                got.resize(total, 0);
                all.extend_from_slice(&got);
            }
            let mut folded = vec![0u8; total];
            fold(&red, &all, &mut folded);
            out.copy_from_slice(&folded[block.0..block.0 + block.1]);
        }),
    ))
}

/// Nothing to do here (an idle member of the root's group).
fn nothing() -> Started {
    Started::with_finish(Request::null(), std::ptr::null_mut(), 0, Box::new(|_| {}))
}

/// `MPI_Ibarrier`: every rank sends an empty message to each remote rank and waits for one
/// from each, so none completes before every rank of the other group started it.
pub fn ibarrier(ic: &Intercomm) -> Result<Started, MpiError> {
    let n = ic.remote.size();
    exchange(ic, &to_every(ic, &[]), slots(n, 0), std::ptr::null_mut(), 0)
}

/// `MPI_Ibcast`: the root sends `data` to every remote rank; the other group's members
/// receive it into `buf` (`len` bytes).
pub fn ibcast(
    ic: &Intercomm,
    role: Role,
    data: &[u8],
    buf: *mut c_void,
    len: usize,
) -> Result<Started, MpiError> {
    match role {
        Role::Idle => Ok(nothing()),
        Role::Root => exchange(ic, &to_every(ic, data), Vec::new(), std::ptr::null_mut(), 0),
        Role::Remote(root) => exchange(ic, &[], vec![(root, 0, len)], buf, len),
    }
}

/// `MPI_Ireduce`: every member of the other group sends `mine` to the root, which folds them
/// in remote rank order into `out` (`len` bytes).
pub fn ireduce(
    ic: &Intercomm,
    role: Role,
    mine: &[u8],
    out: *mut c_void,
    len: usize,
    red: Reduction,
) -> Result<Started, MpiError> {
    match role {
        Role::Idle => Ok(nothing()),
        Role::Root => reduced(ic, &[], len, red, out, (0, len)),
        Role::Remote(root) => exchange(ic, &[(root, mine)], Vec::new(), std::ptr::null_mut(), 0),
    }
}

/// `MPI_Iallreduce`: every rank sends `mine` to each remote rank and folds what it receives
/// from them, in remote rank order, into `out` (`len` bytes).
pub fn iallreduce(
    ic: &Intercomm,
    mine: &[u8],
    out: *mut c_void,
    len: usize,
    red: Reduction,
) -> Result<Started, MpiError> {
    reduced(ic, &to_every(ic, mine), len, red, out, (0, len))
}

/// `MPI_Igather`: every member of the other group sends `mine` to the root, which places
/// them in remote rank order in `out` (`part` bytes each).
pub fn igather(
    ic: &Intercomm,
    role: Role,
    mine: &[u8],
    out: *mut c_void,
    part: usize,
) -> Result<Started, MpiError> {
    let n = ic.remote.size();
    match role {
        Role::Idle => Ok(nothing()),
        Role::Root => exchange(ic, &[], slots(n, part), out, part * n as usize),
        Role::Remote(root) => exchange(ic, &[(root, mine)], Vec::new(), std::ptr::null_mut(), 0),
    }
}

/// `MPI_Iscatter`: the root sends part `i` of `send` (`part` bytes each) to remote rank `i`;
/// the other group's members receive theirs into `out`.
pub fn iscatter(
    ic: &Intercomm,
    role: Role,
    send: &[u8],
    out: *mut c_void,
    part: usize,
) -> Result<Started, MpiError> {
    match role {
        Role::Idle => Ok(nothing()),
        Role::Root => {
            let sends: Vec<_> = (0..ic.remote.size())
                .map(|r| (r, &send[r as usize * part..(r as usize + 1) * part]))
                .collect();
            exchange(ic, &sends, Vec::new(), std::ptr::null_mut(), 0)
        }
        Role::Remote(root) => exchange(ic, &[], vec![(root, 0, part)], out, part),
    }
}

/// `MPI_Iallgather` (`alltoall` false: `send` goes whole to every remote rank) or
/// `MPI_Ialltoall` (part `i` of `send`, `sent` bytes each, to remote rank `i`); every rank
/// places what each remote rank sent (`part` bytes each) in remote rank order in `out`.
pub fn ito_all(
    ic: &Intercomm,
    alltoall: bool,
    send: &[u8],
    sent: usize,
    out: *mut c_void,
    part: usize,
) -> Result<Started, MpiError> {
    let n = ic.remote.size();
    let sends: Vec<_> = (0..n)
        .map(|r| match alltoall {
            true => (r, &send[r as usize * sent..(r as usize + 1) * sent]),
            false => (r, send),
        })
        .collect();
    exchange(ic, &sends, slots(n, part), out, part * n as usize)
}

/// The intercommunicator behind `comm` (`None`: an intracommunicator, which the caller's
/// own path takes).
fn inter_of(comm: Handle) -> Result<Option<Intercomm>, MpiError> {
    Ok(rt()?.comm_any(comm)?.inter.clone())
}

/// Registers `s` as the caller's request.
///
/// # Safety
///
/// `request` is the caller's writable handle.
unsafe fn give(
    s: Result<Started, MpiError>,
    comm: Handle,
    request: *mut Handle,
) -> Result<(), MpiError> {
    // SAFETY: this function's contract.
    unsafe { s?.give(comm, request) }
}

/// `MPI_Ibarrier` on an intercommunicator (`None` on an intracommunicator).
///
/// # Safety
///
/// The caller's arguments.
pub(crate) unsafe fn ibarrier_call(
    comm: Handle,
    request: *mut Handle,
) -> Option<Result<(), MpiError>> {
    let ic = inter_of(comm).transpose()?;
    // SAFETY: the caller's handle.
    Some(ic.and_then(|ic| unsafe { give(ibarrier(&ic), comm, request) }))
}

/// `MPI_Ibcast` on an intercommunicator (`None` on an intracommunicator).
///
/// # Safety
///
/// The caller's arguments.
pub(crate) unsafe fn ibcast_call(
    buffer: *mut c_void,
    count: c_int,
    datatype: Handle,
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> Option<Result<(), MpiError>> {
    let ic = inter_of(comm).transpose()?;
    Some(ic.and_then(|ic| {
        let role = crate::inter::role(&ic, root)?;
        let len = bytes(count, datatype)?;
        let data = match role {
            // SAFETY: the root's buffer of `count` elements.
            Role::Root => unsafe { input(buffer, len) }?.to_vec(),
            // SAFETY: the receiving buffer (checked now, written at completion).
            Role::Remote(_) => unsafe { output(buffer, len) }.map(|_| Vec::new())?,
            Role::Idle => Vec::new(),
        };
        // SAFETY: the caller's handle; the buffer stays the caller's until completion.
        unsafe { give(ibcast(&ic, role, &data, buffer, len), comm, request) }
    }))
}

/// `MPI_Ireduce` on an intercommunicator (`None` on an intracommunicator).
///
/// # Safety
///
/// The caller's arguments.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ireduce_call(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> Option<Result<(), MpiError>> {
    let ic = inter_of(comm).transpose()?;
    Some(ic.and_then(|ic| {
        let role = crate::inter::role(&ic, root)?;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        let mine = match role {
            Role::Remote(_) => {
                crate::inter::not_in_place(sendbuf)?;
                // SAFETY: the caller's send buffer of `count` elements.
                unsafe { input(sendbuf, len) }?.to_vec()
            }
            Role::Root => {
                // SAFETY: the root's receive buffer (checked now, written at completion).
                unsafe { output(recvbuf, len) }?;
                Vec::new()
            }
            Role::Idle => Vec::new(),
        };
        // SAFETY: the caller's handle; the buffer stays the caller's until completion.
        unsafe { give(ireduce(&ic, role, &mine, recvbuf, len, red), comm, request) }
    }))
}

/// `MPI_Iallreduce` on an intercommunicator (`None` on an intracommunicator).
///
/// # Safety
///
/// The caller's arguments.
pub(crate) unsafe fn iallreduce_call(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
    comm: Handle,
    request: *mut Handle,
) -> Option<Result<(), MpiError>> {
    let ic = inter_of(comm).transpose()?;
    Some(ic.and_then(|ic| {
        crate::inter::not_in_place(sendbuf)?;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        // SAFETY: the caller's buffers of `count` elements.
        let mine = unsafe { input(sendbuf, len) }?.to_vec();
        // SAFETY: as above (checked now, written at completion).
        unsafe { output(recvbuf, len) }?;
        // SAFETY: the caller's handle; the buffer stays the caller's until completion.
        unsafe { give(iallreduce(&ic, &mine, recvbuf, len, red), comm, request) }
    }))
}

/// `MPI_Igather` (`gather` true) or `MPI_Iscatter` on an intercommunicator (`None` on an
/// intracommunicator).
///
/// # Safety
///
/// The caller's arguments.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn irooted_call(
    gather: bool,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    root: c_int,
    comm: Handle,
    request: *mut Handle,
) -> Option<Result<(), MpiError>> {
    let ic = inter_of(comm).transpose()?;
    Some(ic.and_then(|ic| {
        let role = crate::inter::role(&ic, root)?;
        let n = ic.remote.size() as usize;
        let started = match (gather, role) {
            (_, Role::Idle) => Ok(nothing()),
            (true, Role::Root) => {
                let part = bytes(recvcount, recvtype)?;
                // SAFETY: the root's receive buffer (checked now, written at completion).
                unsafe { output(recvbuf, part * n) }?;
                igather(&ic, role, &[], recvbuf, part)
            }
            (true, Role::Remote(_)) => {
                crate::inter::not_in_place(sendbuf)?;
                let len = bytes(sendcount, sendtype)?;
                // SAFETY: the caller's send buffer.
                let mine = unsafe { input(sendbuf, len) }?.to_vec();
                igather(&ic, role, &mine, std::ptr::null_mut(), len)
            }
            (false, Role::Root) => {
                let part = bytes(sendcount, sendtype)?;
                // SAFETY: the root's send buffer of a part per remote rank.
                let send = unsafe { input(sendbuf, part * n) }?.to_vec();
                iscatter(&ic, role, &send, std::ptr::null_mut(), part)
            }
            (false, Role::Remote(_)) => {
                crate::inter::not_in_place(recvbuf)?;
                let part = bytes(recvcount, recvtype)?;
                // SAFETY: the caller's receive buffer (checked now, written at completion).
                unsafe { output(recvbuf, part) }?;
                iscatter(&ic, role, &[], recvbuf, part)
            }
        };
        // SAFETY: the caller's handle; the buffer stays the caller's until completion.
        unsafe { give(started, comm, request) }
    }))
}

/// `MPI_Iallgather` (`alltoall` false) or `MPI_Ialltoall` on an intercommunicator (`None` on
/// an intracommunicator).
///
/// # Safety
///
/// The caller's arguments.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ito_all_call(
    alltoall: bool,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    comm: Handle,
    request: *mut Handle,
) -> Option<Result<(), MpiError>> {
    let ic = inter_of(comm).transpose()?;
    Some(ic.and_then(|ic| {
        crate::inter::not_in_place(sendbuf)?;
        let n = ic.remote.size() as usize;
        let sent = bytes(sendcount, sendtype)?;
        let parts = if alltoall { n } else { 1 };
        // SAFETY: the caller's send buffer.
        let send = unsafe { input(sendbuf, sent * parts) }?.to_vec();
        let part = bytes(recvcount, recvtype)?;
        // SAFETY: the caller's receive buffer (checked now, written at completion).
        unsafe { output(recvbuf, part * n) }?;
        // SAFETY: the caller's handle; the buffer stays the caller's until completion.
        unsafe {
            give(
                ito_all(&ic, alltoall, &send, sent, recvbuf, part),
                comm,
                request,
            )
        }
    }))
}

/// Each part `(offset, length)` of `ps` as a receive from the remote rank of its index.
fn at_parts(ps: &[(usize, usize)]) -> Vec<(u32, usize, usize)> {
    ps.iter()
        .enumerate()
        .map(|(i, &(o, l))| (i as u32, o, l))
        .collect()
}

/// Each part `(offset, length)` of `ps` of `data` as a send to the remote rank of its index.
fn of_parts<'a>(ps: &[(usize, usize)], data: &'a [u8]) -> Vec<(u32, &'a [u8])> {
    ps.iter()
        .enumerate()
        .map(|(i, &(o, l))| (i as u32, &data[o..o + l]))
        .collect()
}

/// One of the `v` and `w` collectives on an intercommunicator: which, and its arguments
/// (the counts, displacements and datatypes of a side indexed by remote rank).
pub(crate) enum VCall {
    /// `MPI_Gatherv` / `MPI_Igatherv`.
    Gatherv {
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Handle,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Handle,
        root: c_int,
    },
    /// `MPI_Scatterv` / `MPI_Iscatterv`.
    Scatterv {
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        displs: *const c_int,
        sendtype: Handle,
        recvbuf: *mut c_void,
        recvcount: c_int,
        recvtype: Handle,
        root: c_int,
    },
    /// `MPI_Allgatherv` / `MPI_Iallgatherv`.
    Allgatherv {
        sendbuf: *const c_void,
        sendcount: c_int,
        sendtype: Handle,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        displs: *const c_int,
        recvtype: Handle,
    },
    /// `MPI_Alltoallv` / `MPI_Ialltoallv` (`w` false) and `MPI_Alltoallw` / `MPI_Ialltoallw`
    /// (`w` true: the datatype arrays, byte displacements).
    Alltoall {
        w: bool,
        sendbuf: *const c_void,
        sendcounts: *const c_int,
        sdispls: *const c_int,
        sendtype: Handle,
        sendtypes: *const Handle,
        recvbuf: *mut c_void,
        recvcounts: *const c_int,
        rdispls: *const c_int,
        recvtype: Handle,
        recvtypes: *const Handle,
    },
}

/// Runs (`request` `None`) or starts a `v` or `w` collective on an intercommunicator
/// (`None` on an intracommunicator, which the caller's own path takes).
///
/// # Safety
///
/// The caller's arguments to the call.
pub(crate) unsafe fn v_call(
    call: VCall,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    let ic = inter_of(comm).transpose()?;
    Some(ic.and_then(|ic| {
        let n = ic.remote.size() as usize;
        let none = || Ok(nothing());
        // SAFETY: the caller's arguments (this function's contract).
        let started = unsafe {
            match call {
                VCall::Gatherv {
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    recvcounts,
                    displs,
                    recvtype,
                    root,
                } => match crate::inter::role(&ic, root)? {
                    Role::Idle => none(),
                    Role::Root => {
                        let ps = parts(recvcounts, displs, recvtype, n)?;
                        output(recvbuf, span(&ps))?;
                        exchange(&ic, &[], at_parts(&ps), recvbuf, span(&ps))
                    }
                    Role::Remote(r) => {
                        crate::inter::not_in_place(sendbuf)?;
                        let data = input(sendbuf, bytes(sendcount, sendtype)?)?;
                        exchange(&ic, &[(r, data)], Vec::new(), std::ptr::null_mut(), 0)
                    }
                },
                VCall::Scatterv {
                    sendbuf,
                    sendcounts,
                    displs,
                    sendtype,
                    recvbuf,
                    recvcount,
                    recvtype,
                    root,
                } => match crate::inter::role(&ic, root)? {
                    Role::Idle => none(),
                    Role::Root => {
                        let ps = parts(sendcounts, displs, sendtype, n)?;
                        let data = input(sendbuf, span(&ps))?;
                        exchange(
                            &ic,
                            &of_parts(&ps, data),
                            Vec::new(),
                            std::ptr::null_mut(),
                            0,
                        )
                    }
                    Role::Remote(r) => {
                        crate::inter::not_in_place(recvbuf)?;
                        let len = bytes(recvcount, recvtype)?;
                        output(recvbuf, len)?;
                        exchange(&ic, &[], vec![(r, 0, len)], recvbuf, len)
                    }
                },
                VCall::Allgatherv {
                    sendbuf,
                    sendcount,
                    sendtype,
                    recvbuf,
                    recvcounts,
                    displs,
                    recvtype,
                } => {
                    crate::inter::not_in_place(sendbuf)?;
                    let data = input(sendbuf, bytes(sendcount, sendtype)?)?;
                    let ps = parts(recvcounts, displs, recvtype, n)?;
                    output(recvbuf, span(&ps))?;
                    exchange(&ic, &to_every(&ic, data), at_parts(&ps), recvbuf, span(&ps))
                }
                VCall::Alltoall {
                    w,
                    sendbuf,
                    sendcounts,
                    sdispls,
                    sendtype,
                    sendtypes,
                    recvbuf,
                    recvcounts,
                    rdispls,
                    recvtype,
                    recvtypes,
                } => {
                    crate::inter::not_in_place(sendbuf)?;
                    let (sps, rps) = if w {
                        (
                            parts_w(sendcounts, sdispls, sendtypes, n)?,
                            parts_w(recvcounts, rdispls, recvtypes, n)?,
                        )
                    } else {
                        (
                            parts(sendcounts, sdispls, sendtype, n)?,
                            parts(recvcounts, rdispls, recvtype, n)?,
                        )
                    };
                    let data = input(sendbuf, span(&sps))?;
                    output(recvbuf, span(&rps))?;
                    exchange(
                        &ic,
                        &of_parts(&sps, data),
                        at_parts(&rps),
                        recvbuf,
                        span(&rps),
                    )
                }
            }
        };
        match request {
            None => started?.run(),
            // SAFETY: the caller's handle; the buffers stay the caller's until completion.
            Some(q) => unsafe { give(started, comm, q) },
        }
    }))
}

/// `MPI_Reduce_scatter` (`counts` of the local group's ranks) or `MPI_Reduce_scatter_block`
/// (`counts` `None`: `recvcount` each) on an intercommunicator, blocking (`request` `None`)
/// or not: every rank sends its whole vector to each remote rank, folds what they sent in
/// remote rank order, and keeps its own block (`None` on an intracommunicator).
///
/// # Safety
///
/// The caller's arguments to the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce_scatter_call(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: Option<*const c_int>,
    recvcount: c_int,
    datatype: Handle,
    op: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Option<Result<(), MpiError>> {
    let ic = inter_of(comm).transpose()?;
    Some(ic.and_then(|ic| {
        crate::inter::not_in_place(sendbuf)?;
        let n = ic.local.size() as usize;
        let me = ic.local.rank() as usize;
        let elems: Vec<c_int> = match counts {
            None => vec![recvcount; n],
            Some(p) if p.is_null() => {
                return Err(MpiError::new(crate::abi::err::ARG, "recvcounts is NULL"));
            }
            // SAFETY: the caller's array of the local group's size.
            Some(p) => (0..n).map(|i| unsafe { *p.add(i) }).collect(),
        };
        let mut at = 0;
        let mut mine = (0, 0);
        for (i, &c) in elems.iter().enumerate() {
            let len = bytes(c, datatype)?;
            if i == me {
                mine = (at, len);
            }
            at += len;
        }
        let total = at;
        let red = reduction(datatype, op)?;
        // SAFETY: the caller's send buffer of the whole vector.
        let data = unsafe { input(sendbuf, total) }?;
        // SAFETY: the caller's receive buffer of this rank's block (written at completion).
        unsafe { output(recvbuf, mine.1) }?;
        let started = reduced(&ic, &to_every(&ic, data), total, red, recvbuf, mine);
        match request {
            None => started?.run(),
            // SAFETY: the caller's handle; the buffer stays the caller's until completion.
            Some(q) => unsafe { give(started, comm, q) },
        }
    }))
}
