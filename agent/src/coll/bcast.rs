//! `bcast`: one block, a binomial tree (small messages) or a chain (large ones), pipelined:
//! each rank sends every piece on to its children as soon as it arrived.

use super::tree::binomial;
use super::{CollBuffer, check_root, finish, start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer::schedule::Schedule;

const TAG: u32 = tag(2);

impl Comm {
    /// Starts a broadcast of `buf` from `root` (`MPI_Ibcast`); every rank passes a buffer of
    /// the same length, and gets the root's bytes back in the [`CollBuffer`].
    pub fn ibcast(&self, buf: Vec<u8>, root: u32) -> Result<(Request, CollBuffer), AgentError> {
        let n = self.size();
        check_root("bcast", root, n)?;
        let vr = (self.rank() + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let len = buf.len();
        let (parent, children) = if len >= self.switch_points().bcast_chain_min {
            (
                (vr > 0).then(|| vr - 1),
                (vr + 1 < n).then_some(vr + 1).into_iter().collect(),
            )
        } else {
            binomial(vr, n)
        };
        let mut s = Schedule::new(self);
        let b = s.buffer(buf);
        s.step(TAG);
        if let Some(p) = parent {
            s.recv(b, (0, len), real(p));
        }
        for c in children {
            s.send(b, (0, len), real(c));
        }
        start(s, b)
    }

    /// Broadcasts `buf` from `root` to every rank (`MPI_Bcast`).
    pub fn bcast(&self, buf: &mut [u8], root: u32) -> Result<(), AgentError> {
        if buf.len() <= self.switch_points().small_max {
            check_root("bcast", root, self.size())?;
            return self.small_bcast(buf, root);
        }
        let started = self.ibcast(buf.to_vec(), root)?;
        finish(started, buf)
    }
}
