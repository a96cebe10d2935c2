//! `gather`: one gather block per rank along a binomial tree rooted at the root: a rank
//! collects the parts of its children's subtrees behind its own and sends the whole to its
//! parent, each piece as soon as it arrived; the root puts every part straight into its place.

use super::tree::{binomial, subtree, wrapped};
use super::{CollBuffer, check_root, finish, start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer::schedule::Schedule;

const TAG: u32 = tag(4);

impl Comm {
    /// Starts a gather (`MPI_Igather`): the root's [`CollBuffer`] gets every rank's `send`
    /// (all of one length) in rank order; other ranks get an empty buffer.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let (mut request, mut out) = world.igather(vec![world.rank() as u8], 0)?;
    /// request.wait()?;
    /// if world.rank() == 0 {
    ///     assert_eq!(out.take().expect("complete").len(), world.size() as usize);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn igather(&self, send: Vec<u8>, root: u32) -> Result<(Request, CollBuffer), AgentError> {
        let (r, n) = (self.rank(), self.size());
        check_root("gather", root, n)?;
        let count = send.len();
        let vr = (r + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let (parent, children) = binomial(vr, n);
        let mut s = Schedule::new(self);
        s.step(TAG);
        let Some(parent) = parent else {
            let mut all = vec![0; count * n as usize];
            all[r as usize * count..(r as usize + 1) * count].copy_from_slice(&send);
            let out = s.buffer(all);
            for c in children {
                for range in wrapped(real(c), subtree(c, n), n, count) {
                    s.recv(out, range, real(c));
                }
            }
            return start(s, out);
        };
        // This rank's subtree, in relative rank order: its own part first.
        let mine = subtree(vr, n) as usize;
        let mut collect = vec![0; mine * count];
        collect[..count].copy_from_slice(&send);
        let relay = s.buffer(collect);
        let out = s.buffer(Vec::new());
        for c in children {
            let at = (c - vr) as usize * count;
            s.recv(relay, (at, at + subtree(c, n) as usize * count), real(c));
        }
        s.send(relay, (0, mine * count), real(parent));
        start(s, out)
    }

    /// Gathers every rank's `send` into the root's `recv` (`size·send.len()` bytes; ignored on
    /// other ranks) (`MPI_Gather`); parts from `DIRECT_MIN` bytes go flat, in place (module
    /// `direct`).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let mut all = vec![0u8; world.size() as usize];
    /// world.gather(&[world.rank() as u8], &mut all, 0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn gather(&self, send: &[u8], recv: &mut [u8], root: u32) -> Result<(), AgentError> {
        let want = send.len() * self.size() as usize;
        if self.rank() == root && recv.len() != want {
            return Err(super::bad(
                "gather",
                format!("the root receives into {} bytes, not {want}", recv.len()),
            ));
        }
        if self.direct(send.len()) {
            return self.direct_gather(send, recv, root);
        }
        let started = self.igather(send.to_vec(), root)?;
        finish(started, recv)
    }
}
