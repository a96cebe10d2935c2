//! Blocking `scatter` and `gather` of large parts straight between the callers' buffers.
//!
//! The tree algorithms run as xfer schedules over buffers of the agent's: the root's whole
//! buffer is copied into agent memory (and every part out of it again), which for parts of
//! many megabytes costs the copies and doubles the memory the call needs (measured: a scatter
//! of 2^31 + 8 bytes per rank on two ranks peaked at 12.3 GB on the root, against the 4.3 GB
//! of the program's own buffer). From [`DIRECT_MIN`] bytes per part the blocking calls send
//! each part flat, as one point-to-point message on the collective context between the
//! root's buffer and the other rank's, read and written in place (`Agent::send` and
//! `Agent::recv` past the eager limit). The root's link carries the same bytes either way
//! (all parts but its own), so nothing is lost by leaving the tree.
//!
//! The choice depends on the part's length only, which the standard requires to be the same
//! on every rank, so all ranks of a call take the same path.

use super::{bad, check_root, tag};
use crate::comm::Comm;
use crate::error::AgentError;

/// Parts from this many bytes go flat and in place (below it the tree's schedule, whose
/// copies cost less than its pipelining saves).
pub const DIRECT_MIN: usize = 4 << 20;

const SCATTER: u32 = tag(0x103);
const GATHER: u32 = tag(0x104);

impl Comm {
    /// Whether a blocking scatter or gather of `part` bytes per rank goes flat and in place.
    pub(super) fn direct(&self, part: usize) -> bool {
        part >= DIRECT_MIN && self.size() > 1
    }

    /// The scatter of [`Comm::scatter`] for parts of at least [`DIRECT_MIN`] bytes: the root
    /// sends every other rank its part (in rank order from the root's successor) and copies
    /// its own.
    pub(super) fn direct_scatter(
        &self,
        send: &[u8],
        recv: &mut [u8],
        root: u32,
    ) -> Result<(), AgentError> {
        let (r, n) = (self.rank(), self.size());
        check_root("scatter", root, n)?;
        let part = recv.len();
        if r != root {
            return self.small_recv("scatter", root, SCATTER, recv);
        }
        if send.len() != part * n as usize {
            return Err(bad(
                "scatter",
                format!(
                    "the root sends {} bytes, not {n} parts of {part}",
                    send.len()
                ),
            ));
        }
        let agent = self.coll_agent();
        for k in 1..n {
            let to = (root + k) % n;
            let at = to as usize * part;
            agent.send(self.world_of(to), SCATTER, &send[at..at + part])?;
        }
        let at = root as usize * part;
        recv.copy_from_slice(&send[at..at + part]);
        Ok(())
    }

    /// The gather of [`Comm::gather`] for parts of at least [`DIRECT_MIN`] bytes: the root
    /// receives every other rank's part into its place in `recv` (in rank order from the
    /// root's successor) and copies its own.
    pub(super) fn direct_gather(
        &self,
        send: &[u8],
        recv: &mut [u8],
        root: u32,
    ) -> Result<(), AgentError> {
        let (r, n) = (self.rank(), self.size());
        check_root("gather", root, n)?;
        let part = send.len();
        if r != root {
            return self.coll_agent().send(self.world_of(root), GATHER, send);
        }
        for k in 1..n {
            let from = (root + k) % n;
            let at = from as usize * part;
            self.small_recv("gather", from, GATHER, &mut recv[at..at + part])?;
        }
        let at = root as usize * part;
        recv[at..at + part].copy_from_slice(send);
        Ok(())
    }
}
