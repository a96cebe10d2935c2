//! Groups: `MPI_Comm_group`, `MPI_Group_size`, `MPI_Group_rank`, `MPI_Group_incl`,
//! `MPI_Group_translate_ranks`, `MPI_Group_free`, and `MPI_Comm_create` (a split of the agent's
//! communicator in which the group's members take the group's order).

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use crate::abi::{self, Handle, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::state::{CommEntry, rt};

mpi_fn! {
    /// `MPI_Comm_group` (of an intercommunicator: its local group).
    MPI_Comm_group / PMPI_Comm_group(comm: Handle, group: *mut Handle) on comm => {
        let rt = rt()?;
        let c = rt.comm_local(comm)?;
        let members = c.local().world_ranks().to_vec();
        if group.is_null() {
            return Err(MpiError::new(err::ARG, "group is NULL"));
        }
        let h = rt.add_group(members);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(group, h, "group") }
    }
}

mpi_fn! {
    /// `MPI_Group_size`.
    MPI_Group_size / PMPI_Group_size(group: Handle, size: *mut c_int) on abi::COMM_WORLD => {
        let g = rt()?.group(group)?;
        // SAFETY: the caller's int.
        unsafe { put(size, g.len() as c_int, "size") }
    }
}

mpi_fn! {
    /// `MPI_Group_rank`: `MPI_UNDEFINED` when this process is not a member.
    MPI_Group_rank / PMPI_Group_rank(group: Handle, rank: *mut c_int) on abi::COMM_WORLD => {
        let rt = rt()?;
        let g = rt.group(group)?;
        let me = rt.agent.rank();
        let r = g.iter().position(|&w| w == me).map_or(abi::UNDEFINED, |p| p as c_int);
        // SAFETY: the caller's int.
        unsafe { put(rank, r, "rank") }
    }
}

/// The caller's array of `n` ints.
///
/// # Safety
///
/// `p` points to `n` readable ints.
unsafe fn ints<'a>(p: *const c_int, n: c_int) -> Result<&'a [c_int], MpiError> {
    if n < 0 {
        return Err(MpiError::new(err::COUNT, format!("count {n} is negative")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiError::new(err::ARG, "the rank array is NULL"));
    }
    // SAFETY: the caller guarantees `n` ints at `p`.
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

mpi_fn! {
    /// `MPI_Group_incl`.
    MPI_Group_incl / PMPI_Group_incl(group: Handle, n: c_int, ranks: *const c_int, newgroup: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        let g = rt.group(group)?;
        // SAFETY: the caller's array of `n` ranks.
        let ranks = unsafe { ints(ranks, n) }?;
        let mut members = Vec::with_capacity(ranks.len());
        for &r in ranks {
            let w = usize::try_from(r).ok().and_then(|i| g.get(i)).ok_or_else(|| {
                MpiError::new(err::RANK, format!("rank {r} is not in the group of {} ranks", g.len()))
            })?;
            if members.contains(w) {
                return Err(MpiError::new(err::RANK, format!("rank {r} is given twice")));
            }
            members.push(*w);
        }
        if newgroup.is_null() {
            return Err(MpiError::new(err::ARG, "newgroup is NULL"));
        }
        let h = if members.is_empty() { abi::GROUP_EMPTY } else { rt.add_group(members) };
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newgroup, h, "newgroup") }
    }
}

mpi_fn! {
    /// `MPI_Group_translate_ranks`.
    MPI_Group_translate_ranks / PMPI_Group_translate_ranks(group1: Handle, n: c_int, ranks1: *const c_int, group2: Handle, ranks2: *mut c_int) on abi::COMM_WORLD => {
        let rt = rt()?;
        let (a, b) = (rt.group(group1)?, rt.group(group2)?);
        // SAFETY: the caller's array of `n` ranks.
        let ranks = unsafe { ints(ranks1, n) }?;
        if n > 0 && ranks2.is_null() {
            return Err(MpiError::new(err::ARG, "ranks2 is NULL"));
        }
        for (i, &r) in ranks.iter().enumerate() {
            let t = if r == abi::PROC_NULL {
                abi::PROC_NULL
            } else {
                let w = usize::try_from(r).ok().and_then(|k| a.get(k)).ok_or_else(|| {
                    MpiError::new(err::RANK, format!("rank {r} is not in group1 of {} ranks", a.len()))
                })?;
                b.iter().position(|x| x == w).map_or(abi::UNDEFINED, |p| p as c_int)
            };
            // SAFETY: the caller's output array of `n` ints.
            unsafe { ranks2.add(i).write(t) };
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Group_free`.
    MPI_Group_free / PMPI_Group_free(group: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's handle.
        let h = unsafe { group.as_mut() }.ok_or_else(|| MpiError::new(err::GROUP, "group is NULL"))?;
        rt.remove_group(*h)?;
        *h = abi::GROUP_NULL;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_create` (collective over `comm`, every member giving the same group): the
    /// members of `group` get a communicator in the group's order, the others `MPI_COMM_NULL`.
    MPI_Comm_create / PMPI_Comm_create(comm: Handle, group: Handle, newcomm: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        let rt = rt()?;
        let c = rt.comm_any(comm)?;
        let g = rt.group(group)?;
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        if let Some(ic) = &c.inter {
            // On an intercommunicator each side gives a subgroup of its own group: the new
            // intercommunicator joins the two (`MPI_COMM_NULL` where either is empty), in
            // group order, as an intercommunicator's split (`crate::inter::split`).
            let local = ic.local.world_ranks();
            if let Some(w) = g.iter().find(|w| !local.contains(w)) {
                return Err(MpiError::new(
                    err::GROUP,
                    format!("world rank {w} of the group is not in the local group"),
                ));
            }
            let me = rt.agent.rank();
            let pos = g.iter().position(|&w| w == me);
            let h = match crate::inter::split(ic, pos.map(|_| 0), pos.unwrap_or(0) as i32)? {
                None => abi::COMM_NULL,
                Some(n) => rt.add_comm(CommEntry::new_inter(n, c.errhandler.load(Ordering::Relaxed), rt.agent.size())),
            };
            // SAFETY: the caller's handle, checked not NULL.
            return unsafe { put(newcomm, h, "newcomm") };
        }
        if let Some(w) = g.iter().find(|&&w| c.rank_of_world(w).is_none()) {
            return Err(MpiError::new(
                err::GROUP,
                format!("world rank {w} of the group is not in the communicator"),
            ));
        }
        let me = rt.agent.rank();
        let pos = g.iter().position(|&w| w == me);
        // Processes may give different, disjoint groups (MPI-2.2): each group's lowest world
        // rank names it, so each becomes a communicator of its own.
        let color = pos.and_then(|_| g.iter().min().copied());
        let h = match c.comm.split(color, pos.unwrap_or(0) as i32)? {
            None => abi::COMM_NULL,
            Some(n) => rt.add_comm(CommEntry::new(n, c.errhandler.load(Ordering::Relaxed), rt.agent.size())),
        };
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}

/// Registers `members` as a new group (`MPI_GROUP_EMPTY` when empty) and writes its handle.
///
/// # Safety
///
/// `newgroup` is NULL or the caller's writable handle.
unsafe fn give_group(members: Vec<u32>, newgroup: *mut Handle) -> Result<(), MpiError> {
    let rt = rt()?;
    if newgroup.is_null() {
        return Err(MpiError::new(err::ARG, "newgroup is NULL"));
    }
    let h = if members.is_empty() {
        abi::GROUP_EMPTY
    } else {
        rt.add_group(members)
    };
    // SAFETY: the caller's handle, checked not NULL.
    unsafe { put(newgroup, h, "newgroup") }
}

/// The group's positions named by `ranks`, each in range and given once.
fn positions(g: &[u32], ranks: &[c_int]) -> Result<Vec<usize>, MpiError> {
    let mut seen = vec![false; g.len()];
    let mut v = Vec::with_capacity(ranks.len());
    for &r in ranks {
        let i = usize::try_from(r)
            .ok()
            .filter(|&i| i < g.len())
            .ok_or_else(|| {
                MpiError::new(
                    err::RANK,
                    format!("rank {r} is not in the group of {} ranks", g.len()),
                )
            })?;
        if seen[i] {
            return Err(MpiError::new(err::RANK, format!("rank {r} is given twice")));
        }
        seen[i] = true;
        v.push(i);
    }
    Ok(v)
}

mpi_fn! {
    /// `MPI_Group_excl`: the group without the ranks given, in the group's order.
    MPI_Group_excl / PMPI_Group_excl(group: Handle, n: c_int, ranks: *const c_int, newgroup: *mut Handle) on abi::COMM_WORLD => {
        let g = rt()?.group(group)?;
        // SAFETY: the caller's array of `n` ranks.
        let ranks = unsafe { ints(ranks, n) }?;
        let out = positions(&g, ranks)?;
        let members = g.iter().enumerate().filter(|(i, _)| !out.contains(i)).map(|(_, &w)| w).collect();
        // SAFETY: the caller's handle.
        unsafe { give_group(members, newgroup) }
    }
}

/// The ranks of `n` triplets `(first, last, stride)`, in order.
///
/// # Safety
///
/// `ranges` points to `n` triplets of ints.
unsafe fn range_ranks(
    ranges: *const [c_int; 3],
    n: c_int,
    size: usize,
) -> Result<Vec<c_int>, MpiError> {
    if n < 0 {
        return Err(MpiError::new(err::ARG, format!("count {n} is negative")));
    }
    if n > 0 && ranges.is_null() {
        return Err(MpiError::new(err::ARG, "ranges is NULL"));
    }
    let mut v = Vec::new();
    for k in 0..n as usize {
        // SAFETY: the caller's `n` triplets.
        let [first, last, stride] = unsafe { *ranges.add(k) };
        if stride == 0 {
            return Err(MpiError::new(err::ARG, format!("range {k} has stride 0")));
        }
        for end in [first, last] {
            if end < 0 || end as usize >= size {
                return Err(MpiError::new(
                    err::ARG,
                    format!("rank {end} of range {k} is not in the group of {size} ranks"),
                ));
            }
        }
        if (stride > 0 && first > last) || (stride < 0 && first < last) {
            continue;
        }
        let mut r = first as i64;
        while (stride > 0 && r <= last as i64) || (stride < 0 && r >= last as i64) {
            v.push(r as c_int);
            r += stride as i64;
        }
    }
    Ok(v)
}

mpi_fn! {
    /// `MPI_Group_range_incl`.
    MPI_Group_range_incl / PMPI_Group_range_incl(group: Handle, n: c_int, ranges: *const [c_int; 3], newgroup: *mut Handle) on abi::COMM_WORLD => {
        let g = rt()?.group(group)?;
        // SAFETY: the caller's `n` triplets.
        let ranks = unsafe { range_ranks(ranges, n, g.len()) }?;
        let members = positions(&g, &ranks)?.into_iter().map(|i| g[i]).collect();
        // SAFETY: the caller's handle.
        unsafe { give_group(members, newgroup) }
    }
}

mpi_fn! {
    /// `MPI_Group_range_excl`.
    MPI_Group_range_excl / PMPI_Group_range_excl(group: Handle, n: c_int, ranges: *const [c_int; 3], newgroup: *mut Handle) on abi::COMM_WORLD => {
        let g = rt()?.group(group)?;
        // SAFETY: the caller's `n` triplets.
        let ranks = unsafe { range_ranks(ranges, n, g.len()) }?;
        let out = positions(&g, &ranks)?;
        let members = g.iter().enumerate().filter(|(i, _)| !out.contains(i)).map(|(_, &w)| w).collect();
        // SAFETY: the caller's handle.
        unsafe { give_group(members, newgroup) }
    }
}

mpi_fn! {
    /// `MPI_Group_union`: the first group, then the members of the second not in it.
    MPI_Group_union / PMPI_Group_union(group1: Handle, group2: Handle, newgroup: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        let (a, b) = (rt.group(group1)?, rt.group(group2)?);
        let mut members = a.to_vec();
        members.extend(b.iter().filter(|w| !a.contains(w)));
        // SAFETY: the caller's handle.
        unsafe { give_group(members, newgroup) }
    }
}

mpi_fn! {
    /// `MPI_Group_intersection`: the members of the first group also in the second, in the
    /// first's order.
    MPI_Group_intersection / PMPI_Group_intersection(group1: Handle, group2: Handle, newgroup: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        let (a, b) = (rt.group(group1)?, rt.group(group2)?);
        let members = a.iter().copied().filter(|w| b.contains(w)).collect();
        // SAFETY: the caller's handle.
        unsafe { give_group(members, newgroup) }
    }
}

mpi_fn! {
    /// `MPI_Group_difference`: the members of the first group not in the second, in the
    /// first's order.
    MPI_Group_difference / PMPI_Group_difference(group1: Handle, group2: Handle, newgroup: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        let (a, b) = (rt.group(group1)?, rt.group(group2)?);
        let members = a.iter().copied().filter(|w| !b.contains(w)).collect();
        // SAFETY: the caller's handle.
        unsafe { give_group(members, newgroup) }
    }
}

mpi_fn! {
    /// `MPI_Group_compare`: `MPI_IDENT` (same members, same order), `MPI_SIMILAR` (same
    /// members) or `MPI_UNEQUAL`.
    MPI_Group_compare / PMPI_Group_compare(group1: Handle, group2: Handle, result: *mut c_int) on abi::COMM_WORLD => {
        let rt = rt()?;
        let (a, b) = (rt.group(group1)?, rt.group(group2)?);
        let r = if a == b {
            abi::IDENT
        } else {
            let (mut sa, mut sb) = (a.to_vec(), b.to_vec());
            sa.sort_unstable();
            sb.sort_unstable();
            if sa == sb { abi::SIMILAR } else { abi::UNEQUAL }
        };
        // SAFETY: the caller's int.
        unsafe { put(result, r, "result") }
    }
}

mpi_fn! {
    /// `MPI_Comm_create_group`: collective over the members of `group` only (a subset of
    /// `comm`), which get a communicator in the group's order; `tag` tells concurrent calls
    /// apart. A caller outside the group gets `MPI_COMM_NULL`.
    MPI_Comm_create_group / PMPI_Comm_create_group(comm: Handle, group: Handle, tag: c_int, newcomm: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        let rt = rt()?;
        let c = rt.intra(comm)?;
        let g = rt.group(group)?;
        if tag < 0 {
            return Err(MpiError::new(err::TAG, format!("tag {tag} is negative")));
        }
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        let mut ranks = Vec::with_capacity(g.len());
        for &w in g.iter() {
            ranks.push(c.rank_of_world(w).ok_or_else(|| {
                MpiError::new(err::GROUP, format!("world rank {w} of the group is not in the communicator"))
            })?);
        }
        let h = match c.comm.create_group(&ranks, tag as u32)? {
            None => abi::COMM_NULL,
            Some(n) => rt.add_comm(CommEntry::new(n, c.errhandler.load(Ordering::Relaxed), rt.agent.size())),
        };
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}
