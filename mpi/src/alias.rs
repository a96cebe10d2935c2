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

/// Fails with `MPI_ERR_BUFFER` when `send` and `recv` overlap on this rank of intracommunicator
/// `comm`; with `root`, only the root's buffers are checked (the others' receive, or send,
/// buffer is not significant there). Intercommunicators are not checked.
pub(crate) fn check(
    comm: Handle,
    root: Option<c_int>,
    send: Side,
    recv: Side,
) -> Result<(), MpiError> {
    let Ok(rt) = rt() else { return Ok(()) };
    let Ok(c) = rt.comm_any(comm) else {
        return Ok(());
    };
    if c.inter.is_some() || root.is_some_and(|r| r != c.comm.rank() as c_int) {
        return Ok(());
    }
    let ranks = c.comm.size() as usize;
    let (Some(s), Some(r)) = (span(&send, ranks), span(&recv, ranks)) else {
        return Ok(());
    };
    if s.0 < r.1 && r.0 < s.1 {
        return Err(MpiError::new(
            err::BUFFER,
            "the send and receive buffers overlap (aliased arguments; MPI_IN_PLACE shares one \
             buffer)",
        ));
    }
    Ok(())
}
