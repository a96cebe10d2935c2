//! Aliased buffers in collectives: a send buffer that overlaps the receive buffer is an
//! erroneous program (MPI 4.1 §2.3: no buffer argument may alias another one that the call
//! writes; `MPI_IN_PLACE` is the way to share one). Each rank checks its own arguments before
//! the call moves anything and fails it with `MPI_ERR_BUFFER`, as MPICH does, instead of
//! reducing or copying over data it still has to send. Every rank whose arguments overlap
//! finds it, so a call whose arguments overlap on every rank fails on every rank.

use std::ffi::{c_int, c_void};

use crate::abi::{self, Handle, err};
use crate::error::MpiError;
use crate::state::rt;

/// One buffer argument of a collective: pointer, count and datatype, and whether it holds one
/// part per rank of the communicator (`count` elements each).
#[derive(Clone, Copy)]
pub(crate) struct Side {
    /// The buffer.
    pub ptr: *const c_void,
    /// Elements of `datatype` (per rank when `per_rank`).
    pub count: c_int,
    /// The datatype.
    pub datatype: Handle,
    /// Whether the buffer holds `count` elements for each rank.
    pub per_rank: bool,
}

/// The bytes `s` spans (`None`: nothing to check, or arguments the call itself refuses).
fn span(s: &Side, ranks: usize) -> Option<(usize, usize)> {
    if s.ptr.is_null() || s.ptr as usize == abi::IN_PLACE || s.count <= 0 {
        return None;
    }
    let l = crate::types::layout(s.datatype).ok()?;
    let n = s.count as usize * if s.per_rank { ranks } else { 1 };
    let len = n.checked_mul(usize::try_from(l.extent).ok()?)?;
    let start = (s.ptr as usize).checked_add_signed(l.lb)?;
    (len > 0).then_some((start, start.checked_add(len)?))
}

/// How the datatypes of a per-rank buffer argument are given.
#[derive(Clone, Copy)]
pub(crate) enum PartTypes {
    /// One datatype; displacements count its extents (`MPI_Gatherv`, `MPI_Alltoallv`).
    One(Handle),
    /// An array of one datatype per rank; displacements are bytes (`MPI_Alltoallw`).
    Each(*const Handle),
}

/// A buffer argument of a collective, as the call gives it.
#[derive(Clone, Copy)]
pub(crate) enum Arg {
    /// One buffer of `count` elements (per rank when `per_rank`).
    Whole(Side),
    /// One part per rank: `counts[i]` elements at `displs[i]` (the v and w forms).
    Parts {
        /// The buffer.
        ptr: *const c_void,
        /// Elements of each rank's part.
        counts: *const c_int,
        /// Displacement of each rank's part.
        displs: *const c_int,
        /// The datatypes.
        types: PartTypes,
    },
    /// The packed parts of every rank, one after the other (`MPI_Reduce_scatter`'s send
    /// buffer: the sum of `counts` elements).
    Packed {
        /// The buffer.
        ptr: *const c_void,
        /// Elements of each rank's part.
        counts: *const c_int,
        /// The datatype.
        datatype: Handle,
    },
    /// This rank's part of `counts` only (`MPI_Reduce_scatter`'s receive buffer).
    Mine {
        /// The buffer.
        ptr: *const c_void,
        /// Elements of each rank's part.
        counts: *const c_int,
        /// The datatype.
        datatype: Handle,
    },
}

/// The byte ranges `a` spans on rank `rank` of `ranks` (empty: nothing to check, or
/// arguments the call itself refuses).
///
/// # Safety
///
/// The arrays of `a` hold `ranks` entries (or are NULL).
unsafe fn ranges(a: &Arg, rank: usize, ranks: usize) -> Vec<(usize, usize)> {
    let sum = |counts: *const c_int| -> Option<c_int> {
        let mut n: c_int = 0;
        for i in 0..ranks {
            // SAFETY: the caller's array of `ranks` counts.
            n = n.checked_add(unsafe { *counts.add(i) }.max(0))?;
        }
        Some(n)
    };
    match *a {
        Arg::Whole(s) => span(&s, ranks).into_iter().collect(),
        Arg::Packed {
            ptr,
            counts,
            datatype,
        }
        | Arg::Mine {
            ptr,
            counts,
            datatype,
        } => {
            if counts.is_null() {
                return Vec::new();
            }
            let count = if matches!(a, Arg::Packed { .. }) {
                sum(counts)
            } else {
                // SAFETY: the caller's array of `ranks` counts; `rank < ranks`.
                Some(unsafe { *counts.add(rank) })
            };
            let Some(count) = count else {
                return Vec::new();
            };
            let side = Side {
                ptr,
                count,
                datatype,
                per_rank: false,
            };
            span(&side, ranks).into_iter().collect()
        }
        Arg::Parts {
            ptr,
            counts,
            displs,
            types,
        } => {
            let null_types = matches!(types, PartTypes::Each(t) if t.is_null());
            if ptr.is_null()
                || ptr as usize == abi::IN_PLACE
                || counts.is_null()
                || displs.is_null()
                || null_types
            {
                return Vec::new();
            }
            let mut v = Vec::with_capacity(ranks);
            for i in 0..ranks {
                // SAFETY: the caller's arrays of `ranks` entries.
                let (count, displ) = unsafe { (*counts.add(i), *displs.add(i) as isize) };
                let (datatype, at) = match types {
                    PartTypes::One(t) => {
                        let Ok(l) = crate::types::layout(t) else {
                            return Vec::new();
                        };
                        (t, displ.checked_mul(l.extent))
                    }
                    // SAFETY: the caller's array of `ranks` datatypes, checked not NULL.
                    PartTypes::Each(t) => (unsafe { *t.add(i) }, Some(displ)),
                };
                let Some(at) = at else { return Vec::new() };
                let Some(p) = (ptr as usize).checked_add_signed(at) else {
                    return Vec::new();
                };
                let side = Side {
                    ptr: p as *const c_void,
                    count,
                    datatype,
                    per_rank: false,
                };
                v.extend(span(&side, ranks));
            }
            v
        }
    }
}

/// Whether a range of `a` overlaps a range of `b`.
fn overlap(a: &[(usize, usize)], b: &[(usize, usize)]) -> bool {
    let mut all: Vec<(usize, usize, bool)> = a.iter().map(|&(s, e)| (s, e, true)).collect();
    all.extend(b.iter().map(|&(s, e)| (s, e, false)));
    all.sort_unstable();
    // Sorted by start: a range meets one of the other side that started before it when that
    // side's furthest end seen so far lies past its start.
    let (mut end_a, mut end_b) = (0usize, 0usize);
    for (s, e, in_a) in all {
        let other = if in_a { end_b } else { end_a };
        if other > s {
            return true;
        }
        if in_a {
            end_a = end_a.max(e);
        } else {
            end_b = end_b.max(e);
        }
    }
    false
}

/// Fails with `MPI_ERR_BUFFER` when `send` and `recv` overlap on this rank of intracommunicator
/// `comm`; with `root`, only the root's buffers are checked (the others' receive, or send,
/// buffer is not significant there). Intercommunicators are not checked.
pub(crate) fn check(
    comm: Handle,
    root: Option<c_int>,
    send: Side,
    recv: Side,
) -> Result<(), MpiError> {
    // SAFETY: whole buffers hold no arrays.
    unsafe { check_args(comm, root, Arg::Whole(send), Arg::Whole(recv)) }
}

/// As [`check`], for buffer arguments of any form (the v and w collectives).
///
/// # Safety
///
/// The arrays of `send` and `recv` hold one entry per rank of `comm` (or are NULL).
pub(crate) unsafe fn check_args(
    comm: Handle,
    root: Option<c_int>,
    send: Arg,
    recv: Arg,
) -> Result<(), MpiError> {
    let Ok(rt) = rt() else { return Ok(()) };
    let Ok(c) = rt.comm_any(comm) else {
        return Ok(());
    };
    if c.inter.is_some() || root.is_some_and(|r| r != c.comm.rank() as c_int) {
        return Ok(());
    }
    let (rank, ranks) = (c.comm.rank() as usize, c.comm.size() as usize);
    // SAFETY: the caller's arrays of `ranks` entries.
    let (s, r) = unsafe { (ranges(&send, rank, ranks), ranges(&recv, rank, ranks)) };
    if overlap(&s, &r) {
        return Err(MpiError::new(
            err::BUFFER,
            "the send and receive buffers overlap (aliased arguments; MPI_IN_PLACE shares one \
             buffer)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::overlap;

    #[test]
    fn overlap_finds_a_shared_byte_only() {
        assert!(!overlap(&[(0, 8)], &[(8, 16)]));
        assert!(overlap(&[(0, 9)], &[(8, 16)]));
        assert!(!overlap(&[(0, 4), (8, 12)], &[(4, 8), (12, 20)]));
        assert!(overlap(&[(0, 4), (8, 12)], &[(4, 9)]));
        assert!(overlap(&[(10, 11)], &[(0, 100)]));
        assert!(!overlap(&[], &[(0, 100)]));
        // Overlaps within one side are not this check's business.
        assert!(!overlap(&[(0, 8), (4, 12)], &[(12, 16)]));
    }
}
