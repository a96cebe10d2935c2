//! `allreduce`: recursive doubling for small buffers (log2 n blocks, each rank exchanging its
//! whole buffer with a partner and combining), reduce-scatter by recursive halving plus
//! allgather by recursive doubling for large ones (each rank sends and combines only the half
//! of the remaining range its partner keeps). A non-power of two folds first: of the first
//! 2·rem ranks (rem = n − 2^⌊log2 n⌋) the even ones hand their buffer to the odd ones and get
//! the result back in the last block.
//!
//! Two ranks with a long buffer take shorter paths in the blocking [`Comm::allreduce`]: over
//! TCP one exchange of the whole buffers in eager pieces; over other methods a reduce-scatter
//! and an allgather of one exchange of halves each, read from and written into the caller's
//! buffer in place. Measured (`viaduct bench collective --op allreduce --ranks 2`, shared
//! memory, 1 MiB): 155-159 us against 188-215 us through xfer blocks, which copy the buffer
//! in and out.

use super::tree::{folded, pof2, unfolded};
use super::{CollBuffer, check_reduction, finish, start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::recv_buffer::RecvBuffer;
use crate::request::Request;
use crate::xfer::schedule::Schedule;
use crate::xfer::{Datatype, ReduceOp, Reduction};

const TAG: u32 = tag(7);
/// Tag of the two-rank exchange (point-to-point messages on the collective context).
const PAIR_TAG: u32 = tag(0x207);

/// Byte range of blocks `lo..hi` when `elems` elements of `size` bytes are split into `p`
/// blocks as evenly as possible (the first `elems % p` blocks one element longer).
fn blocks(lo: u32, hi: u32, elems: usize, p: u32, size: usize) -> (usize, usize) {
    let at = |i: u32| {
        let (q, r) = (elems / p as usize, elems % p as usize);
        let i = i as usize;
        (i * q + i.min(r)) * size
    };
    (at(lo), at(hi))
}

impl Comm {
    /// Starts an allreduce (`MPI_Iallreduce`): every rank's [`CollBuffer`] gets the reduction
    /// of every rank's `buf` (all of one length).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// # use viaduct_agent::coll::{Datatype, ReduceOp, Reduction};
    /// let world = Comm::world(&agent);
    /// let sum = Reduction::Builtin(Datatype::I64, ReduceOp::Sum);
    /// let (mut request, mut out) = world.iallreduce(5i64.to_le_bytes().to_vec(), &sum)?;
    /// request.wait()?;
    /// let total = i64::from_le_bytes(out.take().expect("complete")[..8].try_into()?);
    /// assert_eq!(total, 5 * world.size() as i64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn iallreduce(
        &self,
        buf: Vec<u8>,
        red: &Reduction,
    ) -> Result<(Request, CollBuffer), AgentError> {
        check_reduction("allreduce", red, buf.len())?;
        let (r, n) = (self.rank(), self.size());
        let len = buf.len();
        let all = (0, len);
        let mut s = Schedule::new(self);
        let acc = s.buffer(buf);
        if n == 1 {
            return start(s, acc);
        }
        let p = pof2(n);
        let rem = n - p;
        // Fold: the even rank of each of the first `rem` pairs hands its buffer over.
        if r < 2 * rem {
            s.step(TAG);
            if r % 2 == 0 {
                s.send(acc, all, r + 1);
            } else {
                s.recv_mop(acc, all, red, r - 1);
            }
        }
        if let Some(nr) = folded(r, n) {
            if len >= self.switch_points().allreduce_rsag_min {
                let elems = len / red.elem_size();
                let size = red.elem_size();
                let (mut lo, mut hi) = (0u32, p);
                let mut mask = p / 2;
                // Reduce-scatter by recursive halving.
                let mut ranges = Vec::new();
                while mask > 0 {
                    let partner = unfolded(nr ^ mask, n);
                    let mid = lo + (hi - lo) / 2;
                    let (keep, give) = if nr & mask == 0 {
                        ((lo, mid), (mid, hi))
                    } else {
                        ((mid, hi), (lo, mid))
                    };
                    s.step(TAG);
                    s.send(acc, blocks(give.0, give.1, elems, p, size), partner);
                    s.recv_mop(acc, blocks(keep.0, keep.1, elems, p, size), red, partner);
                    ranges.push((partner, keep, give));
                    (lo, hi) = keep;
                    mask >>= 1;
                }
                // Allgather by recursive doubling, the same pairs in reverse.
                for (partner, keep, give) in ranges.into_iter().rev() {
                    s.step(TAG);
                    s.send(acc, blocks(keep.0, keep.1, elems, p, size), partner);
                    s.recv(acc, blocks(give.0, give.1, elems, p, size), partner);
                }
            } else {
                let mut mask = 1;
                while mask < p {
                    let partner = unfolded(nr ^ mask, n);
                    s.step(TAG);
                    s.send(acc, all, partner);
                    s.recv_mop(acc, all, red, partner);
                    mask <<= 1;
                }
            }
        }
        // Unfold: the result goes back to the even ranks of the pairs.
        if r < 2 * rem {
            s.step(TAG);
            if r % 2 == 0 {
                s.recv(acc, all, r + 1);
            } else {
                s.send(acc, all, r - 1);
            }
        }
        start(s, acc)
    }

    /// Reduces every rank's `buf` with `op` on elements of `dtype`, in place on every rank
    /// (`MPI_Allreduce` with `MPI_IN_PLACE`).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// # use viaduct_agent::coll::{Datatype, ReduceOp, Reduction};
    /// let world = Comm::world(&agent);
    /// let mut max = (world.rank() as f64).to_le_bytes();
    /// world.allreduce(&mut max, Datatype::F64, ReduceOp::Max)?;
    /// assert_eq!(f64::from_le_bytes(max), (world.size() - 1) as f64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn allreduce(
        &self,
        buf: &mut [u8],
        dtype: Datatype,
        op: ReduceOp,
    ) -> Result<(), AgentError> {
        self.allreduce_with(buf, &Reduction::Builtin(dtype, op))
    }

    /// [`Comm::allreduce`] with any [`Reduction`] (a user function included).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// # use viaduct_agent::coll::{Datatype, ReduceOp, Reduction};
    /// let world = Comm::world(&agent);
    /// let mut bits = 0b0101u32.to_le_bytes();
    /// world.allreduce_with(&mut bits, &Reduction::Builtin(Datatype::U32, ReduceOp::Bor))?;
    /// assert_eq!(u32::from_le_bytes(bits), 0b0101);
    /// # Ok(())
    /// # }
    /// ```
    pub fn allreduce_with(&self, buf: &mut [u8], red: &Reduction) -> Result<(), AgentError> {
        let sp = self.switch_points();
        if buf.len() <= sp.small_max {
            check_reduction("allreduce", red, buf.len())?;
            return self.small_allreduce(buf, red);
        }
        if buf.len() >= sp.allreduce_rsag_min && self.pair_over_tcp() {
            // Two ranks over TCP, a long buffer: one exchange of the whole buffers in eager pieces
            // (both directions at once, no rendezvous handshake, no copy into and out of xfer
            // blocks), then the combination, as recursive doubling does. Reduce-scatter and
            // allgather would move as many bytes in two exchanges.
            check_reduction("allreduce", red, buf.len())?;
            let other = 1 - self.rank();
            let mut incoming = vec![0u8; buf.len()];
            self.pieces_exchange("allreduce", PAIR_TAG, other, buf, other, &mut incoming)?;
            red.combine(&incoming, buf);
            return Ok(());
        }
        if self.size() == 2 && buf.len() >= sp.allreduce_rsag_min {
            check_reduction("allreduce", red, buf.len())?;
            return self.pair_allreduce(buf, red);
        }
        let started = self.iallreduce(buf.to_vec(), red)?;
        finish(started, buf)
    }

    /// Two ranks, a long buffer: reduce-scatter then allgather, each one exchange of half
    /// the buffer read and written in place (no copy into and out of xfer blocks). Rank 0
    /// combines the first half, rank 1 the second (the first one element longer for an odd
    /// count), so both halves are computed once and both ranks hold the same bytes.
    fn pair_allreduce(&self, buf: &mut [u8], red: &Reduction) -> Result<(), AgentError> {
        let size = red.elem_size();
        let (_, mid) = blocks(0, 1, buf.len() / size, 2, size);
        let me = self.rank();
        let other = self.world_of(1 - me);
        let agent = self.coll_agent();
        let (lo, hi) = buf.split_at_mut(mid);
        let (mine, theirs) = if me == 0 { (lo, hi) } else { (hi, lo) };
        // Reduce-scatter: the partner's copy of my half arrives in a buffer of the agent's.
        let incoming = RecvBuffer::new(mine.len());
        let got = agent.exchange_from_caller(other, PAIR_TAG, theirs, other, &incoming);
        let combined = got.and_then(|st| {
            pair_length("allreduce", st.count() as usize, mine.len())?;
            incoming.with(|part| red.combine(part, mine));
            Ok(())
        });
        agent.recycle(&incoming);
        if let Err(e) = combined {
            if e.failed_peer().is_none() {
                // The partner may have got its part whole and be waiting for mine: send it,
                // so that it too ends (with an error of its own, or the wrong bytes it asked
                // for), never waits.
                let _ = agent.exchange_in_caller(other, PAIR_TAG, mine, other, theirs);
            }
            return Err(e);
        }
        // Allgather: my half out, the partner's half straight into its place.
        let st = agent.exchange_in_caller(other, PAIR_TAG, mine, other, theirs)?;
        pair_length("allreduce", st.count() as usize, theirs.len())
    }
}

/// The error for a partner's part of `got` bytes where `want` were expected (the ranks passed
/// buffers of different lengths).
fn pair_length(what: &'static str, got: usize, want: usize) -> Result<(), AgentError> {
    if got == want {
        return Ok(());
    }
    Err(super::bad(
        what,
        format!(
            "the partner's part has {got} bytes where {want} were expected (the ranks passed buffers of different lengths)"
        ),
    ))
}
