//! Collectives on xfer blocks: `barrier`, `bcast`, `scatter`, `gather`, `allgather`,
//! `reduce`, `allreduce`, `alltoall`, blocking and nonblocking (`i*`), as methods of
//! [`Comm`](crate::comm::Comm).
//!
//! Every collective is a schedule of xfer blocks ([`crate::xfer`]) on the communicator's
//! collective context: block k+1 starts when block k completed, by notification inside the
//! agent's progress pass, so a nonblocking collective progresses whenever its agent makes
//! progress. Non-powers of two work everywhere. The element type and operation of reductions
//! are [`Datatype`] and [`ReduceOp`] (re-exported from [`crate::xfer`]), or a user
//! [`Reduction`], which must be associative and commutative.
//!
//! As in MPI, every rank of a communicator starts its collectives in the same order (their
//! blocks match in start order); threads sharing a communicator must agree on that order
//! themselves. Collective messages use the communicator's collective context and reserved tags,
//! so they never match point-to-point messages or user xfer blocks.
//!
//! # Algorithms
//!
//! | collective | algorithm |
//! | --- | --- |
//! | `barrier` | dissemination: ⌈log2 n⌉ blocks of empty messages (blocking: as point-to-point messages, see below) |
//! | `bcast` | binomial tree below [`BCAST_CHAIN_MIN`] bytes, a chain from [`BCAST_CHAIN_MIN`] on; one block either way, pipelined piece by piece (a rank sends piece k on as soon as it arrived) |
//! | `scatter`, `gather` | one block along a binomial tree: a rank relays to (collects from) its children the parts of their subtrees, piece by piece as they arrive |
//! | `allgather` | recursive doubling for a power of two below [`ALLGATHER_RING_MIN`] bytes in all, else a ring, as one pipelined block (each rank forwards what its left neighbour sent) |
//! | `reduce` | binomial tree of gather blocks: a rank combines its children's pieces and sends each combined piece on as soon as every child's piece was combined |
//! | `allreduce` | recursive doubling below [`ALLREDUCE_RSAG_MIN`] bytes, else reduce-scatter (recursive halving) and allgather (recursive doubling); for a non-power of two, the first 2·(n − 2^⌊log2 n⌋) ranks fold pairwise first and get the result back last |
//! | `alltoall` | n − 1 pairwise exchanges: in exchange k a rank sends to rank + k and receives from rank − k; blocking: as point-to-point messages from [`ALLTOALL_P2P_MIN`] bytes per part (every size by default), else (and `ialltoall`) one xfer block per exchange |
//!
//! `Comm::bcast_in_place` (`MPI_Bcast`), past [`SMALL_MAX`] bytes on two ranks, and up to
//! [`BCAST_P2P_MAX`] bytes on more, sends the message whole along the binomial tree as
//! point-to-point messages straight from the caller's memory and into it (no copy into block
//! buffers and back out): a schedule's copies cost more there than pipelining saves. The
//! blocking `Comm::bcast` does the same on two ranks (from and into the agent's memory), where
//! one hop leaves nothing to pipeline, except over TCP below [`BCAST_PAIR_P2P_MIN`] bytes: a
//! message just over the eager limit pays a rendezvous handshake through both kernels that
//! the eager pieces of the xfer broadcast do not. On two ranks over TCP, the blocking
//! `allgather` and `alltoall` (`alltoall_into` included) of parts longer than the eager limit
//! and the blocking `allreduce` from [`ALLREDUCE_RSAG_MIN`] bytes exchange their buffers as
//! eager pieces, all posted before the partner's are received, so both directions flow at
//! once without handshakes (allreduce: one exchange of the whole buffer, then the
//! combination; measured for alltoall at 1 MiB parts between two nodes: 1.32x MPICH by one
//! rendezvous message each way). The blocking `alltoall` sends each part as one
//! point-to-point message; `Comm::alltoall_into` (`MPI_Alltoall`) sends the parts straight
//! from the caller's memory and receives them straight into it.
//!
//! The blocking `barrier`, and blocking `bcast`, `reduce` and `allreduce` of at most [`SMALL_MAX`] bytes,
//! run the same algorithms as plain point-to-point messages on the collective context instead
//! of xfer blocks (module `small`): for a few bytes the schedule machinery costs more than the
//! messages.
//!
//! # Switch points
//!
//! The constants below are the defaults; the environment variables named with them override
//! them (read once per process). They were measured with `viaduct bench collective` (4 ranks
//! over shared memory, pieces of 16360 bytes, median of 7 trials, two alternating rounds per
//! setting) on a 2-core machine shared with other work, so every figure is noisy (4 ranks on 2
//! cores spin against each other; MPICH's own 8-byte allreduce took 10.8 ms there):
//!
//! | forced algorithm | 64 KiB | 256 KiB | 1 MiB | 4 MiB |
//! | --- | --- | --- | --- | --- |
//! | bcast, binomial | 0.49 / 0.67 ms | 2.6 / 3.5 ms | 7.8 / 9.6 ms | 21.1 / 19.4 ms |
//! | bcast, chain | 0.51 / 0.57 ms | 2.8 / 1.9 ms | 8.0 / 5.9 ms | 35.8 / 26.5 ms |
//!
//! | forced algorithm | 4 KiB | 16 KiB | 64 KiB | 256 KiB | 1 MiB |
//! | --- | --- | --- | --- | --- | --- |
//! | allreduce, recursive doubling | 5.1 / 4.0 ms | 5.0 / 3.2 ms | 5.6 / 4.7 ms | 7.1 / 7.4 ms | 15.0 / 19.1 ms |
//! | allreduce, reduce-scatter + allgather | 9.2 / 7.2 ms | 8.3 / 7.8 ms | 8.2 / 7.7 ms | 10.6 / 9.3 ms | 14.5 / 17.3 ms |
//!
//! | forced algorithm (bytes per rank) | 1 KiB | 8 KiB | 64 KiB | 256 KiB |
//! | --- | --- | --- | --- | --- |
//! | allgather, recursive doubling | 4.7 / 3.1 ms | 5.0 / 5.8 ms | 6.7 / 5.9 ms | 8.4 / 11.8 ms |
//! | allgather, ring (one block) | 3.5 / 3.3 ms | 4.6 / 4.5 ms | 3.7 / 3.8 ms | 8.6 / 7.4 ms |
//!
//! Hence: the chain never won clearly up to 4 MiB on 4 ranks (the binomial tree is pipelined
//! too), so it starts at 8 MiB, where the root's sends to ⌈log2 n⌉ children start to cost more
//! than the chain's depth; reduce-scatter + allgather wins only from about 1 MiB; the ring wins
//! from 32 KiB of result on.
//!
//! The point-to-point switch points were measured with `viaduct bench collective --osu` (the
//! OSU procedure: a barrier before every call; figures are the ranks' median call, averaged
//! over the ranks, over shared memory, rounds alternating between the two settings) on the
//! same loaded 2-core machine, so only the large factors count (xfer / point-to-point, range
//! over 2-3 rounds):
//!
//! | 2 ranks | 8 B | 512 B | 4 KiB | 8 KiB | 32 KiB | 256 KiB | 1 MiB |
//! | --- | --- | --- | --- | --- | --- | --- | --- |
//! | bcast (`VIADUCT_COLL_BCAST_P2P_MAX` 0 / default) | | | | 2.4-3.3 / 1.1-1.3 us | 4.8-6.5 / 3.2-4.6 us | 29-34 / 25-34 us | 171-196 / 82-100 us |
//! | alltoall (`VIADUCT_COLL_ALLTOALL_P2P_MIN` 2^40 / 0) | 2.0-2.2 / 0.26-0.28 us | 2.3-2.4 / 0.40-0.42 us | 3.1-3.8 / 1.1-1.2 us | | 13-13.5 / 6.2-7.1 us | 76-84 / 50-53 us | 384-480 / 222-225 us |
//!
//! | 4 ranks (two per core) | 8 B | 4 KiB | 32 KiB | 64 KiB | 256 KiB | 1 MiB |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | bcast (`VIADUCT_COLL_BCAST_P2P_MAX` 0 / 16 MiB) | | | | 27-33 / 60-62 us | 99-111 / 115-128 us | 409-577 / 485-512 us |
//! | alltoall (`VIADUCT_COLL_ALLTOALL_P2P_MIN` 2^40 / 0) | 15-17 / 8.4-8.8 us | 21-29 / 13-30 us | 102-153 / 78-95 us | | 764-970 / 893-933 us | 5229-5782 / 3723-3807 us |
//!
//! Hence: on two ranks a point-to-point broadcast wins at every length (one hop: nothing to
//! pipeline); on more ranks the blocking broadcast keeps the pipelined xfer broadcast past
//! [`SMALL_MAX`] (it won from 64 KiB on 4 ranks), and the broadcast in place keeps its switch
//! point of 256 KiB (measured without the copies into and out of the agent's memory that the
//! blocking broadcast makes). The point-to-point alltoall won or tied at every size on two and
//! four ranks, so it starts at 0.

mod allgather;
mod allreduce;
mod alltoall;
mod barrier;
mod bcast;
mod direct;
mod gather;
mod reduce;
mod scatter;
mod small;
mod tree;

pub use crate::config::coll_switch::{
    ALLGATHER_RING_MIN, ALLGATHER_RING_MIN_VAR, ALLREDUCE_RSAG_MIN, ALLREDUCE_RSAG_MIN_VAR,
    ALLTOALL_P2P_MIN, ALLTOALL_P2P_MIN_VAR, BCAST_CHAIN_MIN, BCAST_CHAIN_MIN_VAR, BCAST_P2P_MAX,
    BCAST_P2P_MAX_VAR, BCAST_PAIR_P2P_MIN, SMALL_MAX, SMALL_MAX_VAR, SwitchPoints,
};
pub use bcast::BCAST_IN_PLACE_MAX;
pub use direct::DIRECT_MIN;

use crate::error::AgentError;
use crate::request::Request;
use crate::xfer::schedule::Schedule;
use crate::xfer::{COLL_TAG_BIT, XferBuffers, XferMonitor};
pub use crate::xfer::{Datatype, ReduceOp, Reduction};

impl crate::comm::Comm {
    /// The switch points in use: those of the agent's settings
    /// ([`Config::switch_points`](crate::config::Config::switch_points)), which
    /// [`Agent::init`](crate::agent::Agent::init) checked to be the same on every rank.
    pub(crate) fn switch_points(&self) -> SwitchPoints {
        self.coll_agent().config().switch_points
    }
}

/// The tag of each collective's blocks (reserved: the high bit is set).
pub(crate) const fn tag(kind: u32) -> u32 {
    COLL_TAG_BIT | kind
}

/// The result buffer of a nonblocking collective: it comes back once the request completed.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// let world = Comm::world(&agent);
/// let (mut request, mut out) = world.iallgather(vec![1, 2])?;
/// request.wait()?;
/// let result: Vec<u8> = out.take().expect("complete");
/// assert_eq!(result.len(), 2 * world.size() as usize);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct CollBuffer {
    bufs: XferBuffers,
    id: usize,
    /// Bytes of the buffer that are the result (the rest is a rank's relay space).
    keep: Option<usize>,
}

impl CollBuffer {
    /// Takes the result out (`None` while the collective runs, or once taken).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let (mut request, mut out) = world.ibcast(vec![5; 8], 0)?;
    /// request.wait()?;
    /// assert_eq!(out.take(), Some(vec![5; 8]));
    /// assert_eq!(out.take(), None); // taken once
    /// # Ok(())
    /// # }
    /// ```
    pub fn take(&mut self) -> Option<Vec<u8>> {
        let mut all = self.bufs.take_all()?;
        let mut v = std::mem::take(all.get_mut(self.id)?);
        if let Some(k) = self.keep {
            v.truncate(k);
        }
        Some(v)
    }

    /// Progress counters of the collective's blocks.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let (mut request, out) = world.ibcast(vec![5; 8], 0)?;
    /// let monitor = out.monitor();
    /// request.wait()?;
    /// println!("{} pieces sent", monitor.pieces_sent());
    /// # Ok(())
    /// # }
    /// ```
    pub fn monitor(&self) -> XferMonitor {
        self.bufs.monitor()
    }
}

/// Starts `sched`; its buffer `out` holds the result.
pub(crate) fn start(sched: Schedule, out: usize) -> Result<(Request, CollBuffer), AgentError> {
    start_keep(sched, out, None)
}

/// Like [`start`], the result being the first `keep` bytes of buffer `out`.
pub(crate) fn start_keep(
    sched: Schedule,
    out: usize,
    keep: Option<usize>,
) -> Result<(Request, CollBuffer), AgentError> {
    let (req, bufs) = sched.start(false)?;
    Ok((
        req,
        CollBuffer {
            bufs,
            id: out,
            keep,
        },
    ))
}

/// Waits for a collective and copies its result into `dst`.
pub(crate) fn finish(
    (mut req, mut buf): (Request, CollBuffer),
    dst: &mut [u8],
) -> Result<(), AgentError> {
    req.wait()?;
    if let Some(v) = buf.take() {
        let n = v.len().min(dst.len());
        dst[..n].copy_from_slice(&v[..n]);
    }
    Ok(())
}

pub(crate) fn bad(what: &'static str, reason: String) -> AgentError {
    AgentError::CollectiveArgs { what, reason }
}

/// Checks that a reduction applies and that `len` is a whole number of its elements.
pub(crate) fn check_reduction(
    what: &'static str,
    red: &Reduction,
    len: usize,
) -> Result<(), AgentError> {
    red.check().map_err(AgentError::Xfer)?;
    if len % red.elem_size() != 0 {
        return Err(bad(
            what,
            format!(
                "{len} bytes are not a whole number of {}-byte elements",
                red.elem_size()
            ),
        ));
    }
    Ok(())
}

pub(crate) fn check_root(what: &'static str, root: u32, size: u32) -> Result<(), AgentError> {
    if root >= size {
        return Err(bad(
            what,
            format!("root {root} is not in the communicator of {size} ranks"),
        ));
    }
    Ok(())
}
