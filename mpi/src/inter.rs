//! Intercommunicators: `MPI_Intercomm_create`, `MPI_Intercomm_merge`, `MPI_Comm_remote_size`,
//! `MPI_Comm_remote_group`, and the collectives on an intercommunicator (`MPI_Barrier`,
//! `MPI_Bcast`, `MPI_Reduce`, `MPI_Allreduce`, `MPI_Gather`, `MPI_Scatter`, `MPI_Allgather`,
//! `MPI_Alltoall`), on the agent's [`Intercomm`].
//!
//! The collectives are simple algorithms: the rooted ones go straight between the root and
//! each remote rank; the reductions and `MPI_Allgather` gather within each group to its rank 0,
//! whose leaders swap the results, then spread them in their group. Their messages travel on
//! the intercommunicator's collective context, never matching point-to-point messages.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::Ordering;

use viaduct_agent::coll::Reduction;
use viaduct_agent::comm::{Comm, Intercomm};
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, wait_all};

use crate::abi::{self, Handle, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::op::fold;
use crate::state::{CommEntry, rt};

/// Tag of the collectives' messages on the collective context (collectives are called in
/// the same order by every member, and messages between two ranks do not overtake).
const TAG: u32 = 1;

mpi_fn! {
    /// `MPI_Intercomm_create` (collective over both groups): the leaders swap their groups
    /// over `peer_comm` with `tag`; the new intercommunicator has the error handler of
    /// `local_comm`.
    MPI_Intercomm_create / PMPI_Intercomm_create(local_comm: Handle, local_leader: c_int, peer_comm: Handle, remote_leader: c_int, tag: c_int, newintercomm: *mut Handle) on local_comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newintercomm) };
        let rt = rt()?;
        let c = rt.intra(local_comm)?;
        if newintercomm.is_null() {
            return Err(MpiError::new(err::ARG, "newintercomm is NULL"));
        }
        if local_leader < 0 || local_leader as u32 >= c.comm.size() {
            return Err(MpiError::new(
                err::RANK,
                format!("local_leader {local_leader} is not a rank of local_comm of {} ranks", c.comm.size()),
            ));
        }
        let leader = local_leader as u32;
        let peer = if c.comm.rank() == leader {
            let checked = leader_args(peer_comm, remote_leader, tag);
            match checked {
                Ok(p) => Some(p),
                Err(e) => {
                    // The other members of the local group are released with an error.
                    let _ = c.comm.intercomm_create(leader, None, 0, 0);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let ic = c.comm.intercomm_create(
            leader,
            peer.as_ref().map(|p| &p.comm),
            remote_leader.max(0) as u32,
            tag.max(0) as u32,
        )?;
        let h = rt.add_comm(CommEntry::new_inter(ic, c.errhandler.load(Ordering::Relaxed), rt.agent.size()));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newintercomm, h, "newintercomm") }
    }
}

mpi_fn! {
    /// `MPI_Intercomm_create_from_groups` (collective over both groups, MPI-4): an
    /// intercommunicator of `local_group` (this process is in it) and `remote_group`, whose
    /// leaders are `local_leader` and `remote_leader` (ranks in their groups); both sides give
    /// the same `stringtag`. The union of the groups first agrees a communicator of its own
    /// (ordered by world rank, the string tag hashed into its tag, as
    /// `MPI_Comm_create_from_group`), which is split into the two groups and carries the
    /// leaders' exchange, so no message of the program can match it. The new
    /// intercommunicator takes `errhandler`, through which the call's own errors go too; the
    /// info is accepted and not read.
    MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(local_group: Handle, local_leader: c_int, remote_group: Handle, remote_leader: c_int, stringtag: *const c_char, info: Handle, errhandler: Handle, newintercomm: *mut Handle) on errhandler => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newintercomm) };
        let _ = info;
        let rt = rt()?;
        let local = rt.group(local_group)?;
        let remote = rt.group(remote_group)?;
        // SAFETY: the caller's NUL-terminated string.
        let tag = unsafe { crate::misc::string(stringtag, "stringtag") }?;
        if !crate::misc::valid_handler(errhandler) {
            return Err(MpiError::new(err::ARG, format!("{errhandler:#x} is not an error handler")));
        }
        if newintercomm.is_null() {
            return Err(MpiError::new(err::ARG, "newintercomm is NULL"));
        }
        let me = rt.agent.rank();
        let Some(my_index) = local.iter().position(|&w| w == me) else {
            return Err(MpiError::new(err::GROUP, format!("this process (world rank {me}) is not in local_group")));
        };
        for (name, g, leader) in [("local", &local, local_leader), ("remote", &remote, remote_leader)] {
            if leader < 0 || leader as usize >= g.len() {
                return Err(MpiError::new(
                    err::RANK,
                    format!("{name}_leader {leader} is not a rank of {name}_group of {} processes", g.len()),
                ));
            }
        }
        if let Some(w) = remote.iter().find(|w| local.contains(w)) {
            return Err(MpiError::new(
                err::GROUP,
                format!("world rank {w} is in both local_group and remote_group (they must be disjoint)"),
            ));
        }
        let world = rt.comm(abi::COMM_WORLD)?;
        let mut union: Vec<u32> = local.iter().chain(remote.iter()).copied().collect();
        union.sort_unstable();
        let mut ranks = Vec::with_capacity(union.len());
        for &w in &union {
            ranks.push(world.rank_of_world(w).ok_or_else(|| {
                MpiError::new(err::GROUP, format!("world rank {w} of the groups is not a process of this job"))
            })?);
        }
        let both = world.comm.create_group(&ranks, crate::session::tag_of(&tag))?.ok_or_else(|| {
            MpiError::new(err::INTERN, "the groups' union was not made for one of its members")
        })?;
        // The side holding the lower world rank is color 0 on both sides.
        let color = u32::from(local.iter().min() > remote.iter().min());
        let mine = both
            .split(Some(color), my_index as i32)?
            .ok_or_else(|| MpiError::new(err::INTERN, "the local group was not made"))?;
        let remote_world = remote[remote_leader as usize];
        let peer_leader = union.iter().position(|&w| w == remote_world).unwrap_or(0) as u32;
        let ic = mine.intercomm_create(local_leader as u32, Some(&both), peer_leader, 0)?;
        let h = rt.add_comm(CommEntry::new_inter(ic, errhandler, rt.agent.size()));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newintercomm, h, "newintercomm") }
    }
}

/// The leader's arguments of `MPI_Intercomm_create`: the peer communicator's entry.
fn leader_args(
    peer_comm: Handle,
    remote_leader: c_int,
    tag: c_int,
) -> Result<std::sync::Arc<CommEntry>, MpiError> {
    if tag < 0 {
        return Err(MpiError::new(err::TAG, format!("tag {tag} is negative")));
    }
    let rt = rt()?;
    let p = rt.comm(peer_comm)?;
    if remote_leader < 0 || remote_leader as u32 >= p.comm.size() {
        return Err(MpiError::new(
            err::RANK,
            format!(
                "remote_leader {remote_leader} is not a rank of peer_comm of {} ranks",
                p.comm.size()
            ),
        ));
    }
    if p.comm.world_rank(remote_leader as u32) == Some(rt.agent.rank()) {
        return Err(MpiError::new(
            err::RANK,
            format!("remote_leader {remote_leader} is this rank, the local leader"),
        ));
    }
    Ok(p)
}

fn inter_of(c: &CommEntry, h: Handle) -> Result<&Intercomm, MpiError> {
    c.inter
        .as_ref()
        .ok_or_else(|| MpiError::new(err::COMM, format!("{h:#x} is not an intercommunicator")))
}

mpi_fn! {
    /// `MPI_Intercomm_merge` (collective over both groups): the group giving `high` false
    /// first; when both give the same, the group whose leader has the lower rank in
    /// `MPI_COMM_WORLD`.
    MPI_Intercomm_merge / PMPI_Intercomm_merge(intercomm: Handle, high: c_int, newintracomm: *mut Handle) on intercomm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newintracomm) };
        let rt = rt()?;
        let c = rt.comm_any(intercomm)?;
        let ic = inter_of(&c, intercomm)?;
        if newintracomm.is_null() {
            return Err(MpiError::new(err::ARG, "newintracomm is NULL"));
        }
        let m = ic.merge(high != 0)?;
        let h = rt.add_comm(CommEntry::new(m, c.errhandler.load(Ordering::Relaxed), rt.agent.size()));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newintracomm, h, "newintracomm") }
    }
}

mpi_fn! {
    /// `MPI_Comm_remote_size`.
    MPI_Comm_remote_size / PMPI_Comm_remote_size(comm: Handle, size: *mut c_int) on comm => {
        let c = rt()?.comm_any(comm)?;
        let ic = inter_of(&c, comm)?;
        // SAFETY: the caller's int.
        unsafe { put(size, ic.remote.size() as c_int, "size") }
    }
}

mpi_fn! {
    /// `MPI_Comm_remote_group`.
    MPI_Comm_remote_group / PMPI_Comm_remote_group(comm: Handle, group: *mut Handle) on comm => {
        let rt = rt()?;
        let c = rt.comm_any(comm)?;
        let ic = inter_of(&c, comm)?;
        if group.is_null() {
            return Err(MpiError::new(err::ARG, "group is NULL"));
        }
        let h = rt.add_group(ic.remote.world_ranks().to_vec());
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(group, h, "group") }
    }
}

/// The role of this rank in a rooted collective on an intercommunicator.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// The root (`MPI_ROOT`).
    Root,
    /// Another member of the root's group (`MPI_PROC_NULL`).
    Idle,
    /// A member of the other group; the root is this remote rank.
    Remote(u32),
}

/// The role given by `root` on `ic`.
pub fn role(ic: &Intercomm, root: c_int) -> Result<Role, MpiError> {
    match root {
        abi::ROOT => Ok(Role::Root),
        abi::PROC_NULL => Ok(Role::Idle),
        r if r >= 0 && (r as u32) < ic.remote.size() => Ok(Role::Remote(r as u32)),
        r => Err(MpiError::new(
            err::ROOT,
            format!(
                "root {r} is neither MPI_ROOT, MPI_PROC_NULL nor a rank of the remote group of {} ranks",
                ic.remote.size()
            ),
        )),
    }
}

/// Rejects `MPI_IN_PLACE`, which no intercommunicator collective here takes.
pub fn not_in_place(p: *const c_void) -> Result<(), MpiError> {
    if p as usize == abi::IN_PLACE {
        return Err(MpiError::new(
            err::ARG,
            "MPI_IN_PLACE is not valid on an intercommunicator",
        ));
    }
    Ok(())
}

/// Receives exactly `len` bytes from remote rank `src` on the collective context.
fn post_recv(
    ic: &Intercomm,
    src: u32,
    len: usize,
) -> Result<(Request, viaduct_agent::recv_buffer::RecvBuffer), MpiError> {
    Ok(ic.coll.irecv(len, Source::Rank(src), TagMatch::Tag(TAG))?)
}

/// Receives one message from remote rank `src` into `buf`, which it must fill exactly.
fn recv_exact(ic: &Intercomm, src: u32, buf: &mut [u8]) -> Result<(), MpiError> {
    let (r, b) = post_recv(ic, src, buf.len())?;
    wait_all(&mut [r], None)?;
    buf.copy_from_slice(&exact(b.take(), buf.len(), src)?);
    Ok(())
}

fn exact(got: Vec<u8>, len: usize, from: u32) -> Result<Vec<u8>, MpiError> {
    if got.len() != len {
        return Err(MpiError::new(
            err::TRUNCATE,
            format!(
                "{} bytes from remote rank {from}, {len} expected (the two groups' counts and types do not match)",
                got.len()
            ),
        ));
    }
    Ok(got)
}

/// Leaders swap `mine` for the remote leader's `theirs_len` bytes; the result is spread to
/// every member of the local group.
fn swap_and_spread(ic: &Intercomm, mine: &[u8], out: &mut [u8]) -> Result<(), MpiError> {
    if ic.local.rank() == 0 {
        let (r, b) = post_recv(ic, 0, out.len())?;
        let s = ic.coll.isend(0, TAG, mine)?;
        wait_all(&mut [r, s], None)?;
        out.copy_from_slice(&exact(b.take(), out.len(), 0)?);
    }
    ic.local.bcast(out, 0)?;
    Ok(())
}

/// `MPI_Barrier` on an intercommunicator: no rank leaves before every rank of the other
/// group entered.
pub fn barrier(ic: &Intercomm) -> Result<(), MpiError> {
    ic.local.barrier()?;
    swap_and_spread(ic, &[], &mut [])?;
    Ok(())
}

/// `MPI_Bcast` on an intercommunicator: the root sends `buf` to every remote rank.
pub fn bcast(ic: &Intercomm, buf: &mut [u8], root: c_int) -> Result<(), MpiError> {
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let mut reqs = Vec::new();
            for r in 0..ic.remote.size() {
                reqs.push(ic.coll.isend(r, TAG, buf)?);
            }
            wait_all(&mut reqs, None)?;
            Ok(())
        }
        Role::Remote(root) => recv_exact(ic, root, buf),
    }
}

/// The reduction of every local member's `mine`, in local rank order, at local rank 0
/// (`None` elsewhere).
fn reduce_local(local: &Comm, mine: &[u8], red: &Reduction) -> Result<Option<Vec<u8>>, MpiError> {
    let n = local.size() as usize;
    if local.rank() != 0 {
        local.gather(mine, &mut [], 0)?;
        return Ok(None);
    }
    let mut all = vec![0u8; mine.len() * n];
    local.gather(mine, &mut all, 0)?;
    let mut out = vec![0u8; mine.len()];
    fold(red, &all, &mut out);
    Ok(Some(out))
}

/// `MPI_Reduce` on an intercommunicator: the root gets the reduction of the remote group's
/// contributions (`recv`: the root's buffer).
pub fn reduce(
    ic: &Intercomm,
    mine: &[u8],
    recv: Option<&mut [u8]>,
    red: &Reduction,
    root: c_int,
) -> Result<(), MpiError> {
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let out = recv.ok_or_else(|| MpiError::new(err::BUFFER, "recvbuf is NULL"))?;
            recv_exact(ic, 0, out)
        }
        Role::Remote(root) => {
            if let Some(v) = reduce_local(&ic.local, mine, red)? {
                let s = ic.coll.isend(root, TAG, &v)?;
                wait_all(&mut [s], None)?;
            }
            Ok(())
        }
    }
}

/// `MPI_Allreduce` on an intercommunicator: each group gets the reduction of the other
/// group's contributions.
pub fn allreduce(
    ic: &Intercomm,
    mine: &[u8],
    out: &mut [u8],
    red: &Reduction,
) -> Result<(), MpiError> {
    let v = reduce_local(&ic.local, mine, red)?.unwrap_or_default();
    swap_and_spread(ic, &v, out)
}

/// `MPI_Gather` on an intercommunicator: the root gets every remote rank's `mine`, in remote
/// rank order (`recv`: the root's buffer, `len` bytes per rank).
pub fn gather(
    ic: &Intercomm,
    mine: &[u8],
    recv: Option<&mut [u8]>,
    len: usize,
    root: c_int,
) -> Result<(), MpiError> {
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let out = recv.ok_or_else(|| MpiError::new(err::BUFFER, "recvbuf is NULL"))?;
            let mut reqs = Vec::new();
            let mut bufs = Vec::new();
            for r in 0..ic.remote.size() {
                let (q, b) = post_recv(ic, r, len)?;
                reqs.push(q);
                bufs.push(b);
            }
            wait_all(&mut reqs, None)?;
            for (r, b) in bufs.into_iter().enumerate() {
                let got = exact(b.take(), len, r as u32)?;
                out[r * len..(r + 1) * len].copy_from_slice(&got);
            }
            Ok(())
        }
        Role::Remote(root) => {
            let s = ic.coll.isend(root, TAG, mine)?;
            wait_all(&mut [s], None)?;
            Ok(())
        }
    }
}

/// `MPI_Scatter` on an intercommunicator: remote rank `i` gets the root's `i`-th block of
/// `len` bytes (`send`: the root's buffer).
pub fn scatter(
    ic: &Intercomm,
    send: Option<&[u8]>,
    recv: &mut [u8],
    len: usize,
    root: c_int,
) -> Result<(), MpiError> {
    match role(ic, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let send = send.ok_or_else(|| MpiError::new(err::BUFFER, "sendbuf is NULL"))?;
            let mut reqs = Vec::new();
            for r in 0..ic.remote.size() as usize {
                reqs.push(
                    ic.coll
                        .isend(r as u32, TAG, &send[r * len..(r + 1) * len])?,
                );
            }
            wait_all(&mut reqs, None)?;
            Ok(())
        }
        Role::Remote(root) => recv_exact(ic, root, recv),
    }
}

/// `MPI_Allgather` on an intercommunicator: each rank gets every remote rank's `mine`, in
/// remote rank order (`out`: remote size blocks).
pub fn allgather(ic: &Intercomm, mine: &[u8], out: &mut [u8]) -> Result<(), MpiError> {
    let n = ic.local.size() as usize;
    let mut all = if ic.local.rank() == 0 {
        vec![0u8; mine.len() * n]
    } else {
        Vec::new()
    };
    ic.local.gather(mine, &mut all, 0)?;
    swap_and_spread(ic, &all, out)
}

/// `MPI_Alltoall` on an intercommunicator: block `j` of `send` (`sent` bytes) goes to remote
/// rank `j`, block `j` of `recv` (`len` bytes) comes from remote rank `j`.
pub fn alltoall(
    ic: &Intercomm,
    send: &[u8],
    recv: &mut [u8],
    sent: usize,
    len: usize,
) -> Result<(), MpiError> {
    let n = ic.remote.size() as usize;
    let mut reqs = Vec::new();
    let mut bufs = Vec::new();
    for r in 0..n {
        let (q, b) = post_recv(ic, r as u32, len)?;
        reqs.push(q);
        bufs.push(b);
    }
    for r in 0..n {
        reqs.push(
            ic.coll
                .isend(r as u32, TAG, &send[r * sent..(r + 1) * sent])?,
        );
    }
    wait_all(&mut reqs, None)?;
    for (r, b) in bufs.into_iter().enumerate() {
        let got = exact(b.take(), len, r as u32)?;
        recv[r * len..(r + 1) * len].copy_from_slice(&got);
    }
    Ok(())
}

/// `MPI_Comm_split` on an intercommunicator (collective over both groups): the members of
/// each group with one color form the new local group, those of the other group with the
/// same color its remote group, each ordered by `key`, then by rank. A process with
/// `MPI_UNDEFINED` (`color` `None`), or whose color no process of the other group gave, gets
/// `None` (`MPI_COMM_NULL`).
///
/// The two groups are merged into one communicator of their own (the group whose leader has
/// the lower world rank first), over which every member's color and key go to all; it is
/// split by group and color, and each new local group meets its remote one through it, as
/// `MPI_Intercomm_create` over a peer communicator.
pub(crate) fn split(
    ic: &Intercomm,
    color: Option<u32>,
    key: i32,
) -> Result<Option<Intercomm>, MpiError> {
    let both = ic.merge(false)?;
    let (n, me) = (both.size() as usize, both.rank() as usize);
    let mut all = vec![0u8; 8 * n];
    let mine = color.map_or(-1i64, i64::from) as i32;
    all[me * 8..me * 8 + 4].copy_from_slice(&mine.to_le_bytes());
    all[me * 8 + 4..me * 8 + 8].copy_from_slice(&key.to_le_bytes());
    both.allgather_in_place(&mut all)?;
    let at = |r: usize, i: usize| {
        i32::from_le_bytes(all[r * 8 + i..r * 8 + i + 4].try_into().unwrap_or([0; 4]))
    };
    // The merged ranks of this group and of the other (merge's order with both `high` false).
    let (lsize, rsize) = (ic.local.size() as usize, ic.remote.size() as usize);
    let local_first = ic.local.world_ranks()[0] < ic.remote.world_ranks()[0];
    let (side, remote) = if local_first {
        (0, lsize..lsize + rsize)
    } else {
        (1, 0..rsize)
    };
    // Colors told apart by group: `2 * color + side` (a color is below 2^31).
    let part = both.split(color.map(|c| 2 * c + side), key)?;
    let (Some(part), Some(c)) = (part, color) else {
        return Ok(None);
    };
    // The remote leader: the other group's first member of this color, by key then rank.
    let Some(leader) = remote
        .filter(|&r| at(r, 0) == c as i32)
        .min_by_key(|&r| (at(r, 4), r))
    else {
        return Ok(None);
    };
    Ok(Some(part.intercomm_create(
        0,
        Some(&both),
        leader as u32,
        0,
    )?))
}
