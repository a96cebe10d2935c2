//! `scatter`: one block along a binomial tree rooted at the root: the root sends each child the
//! parts of the child's whole subtree; a rank keeps its own part and relays the rest to its
//! children, each piece as soon as it arrived.

use super::tree::{binomial, subtree, wrapped};
use super::{CollBuffer, bad, check_root, finish, start_keep, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer::schedule::Schedule;

const TAG: u32 = tag(3);

impl Comm {
    /// Starts a scatter (`MPI_Iscatter`): rank i gets bytes `i·count..(i+1)·count` of the
    /// root's `send` (which must hold `size·count` bytes; other ranks' `send` is ignored).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let n = world.size() as usize;
    /// let send = if world.rank() == 0 { vec![3u8; 2 * n] } else { Vec::new() };
    /// let (mut request, mut out) = world.iscatter(send, 2, 0)?;
    /// request.wait()?;
    /// assert_eq!(out.take().expect("complete"), vec![3u8; 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn iscatter(
        &self,
        send: Vec<u8>,
        count: usize,
        root: u32,
    ) -> Result<(Request, CollBuffer), AgentError> {
        let (r, n) = (self.rank(), self.size());
        check_root("scatter", root, n)?;
        let vr = (r + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let (parent, children) = binomial(vr, n);
        let mut s = Schedule::new(self);
        s.step(TAG);
        let Some(parent) = parent else {
            if send.len() != count * n as usize {
                return Err(bad(
                    "scatter",
                    format!(
                        "the root sends {} bytes, not {n} parts of {count}",
                        send.len()
                    ),
                ));
            }
            let own = send[r as usize * count..(r as usize + 1) * count].to_vec();
            let out = s.buffer(own);
            let all = s.buffer(send);
            for c in children {
                for range in wrapped(real(c), subtree(c, n), n, count) {
                    s.send(all, range, real(c));
                }
            }
            return start_keep(s, out, None);
        };
        // This rank's subtree, in relative rank order: its own part first.
        let mine = subtree(vr, n) as usize;
        let relay = s.buffer(vec![0; mine * count]);
        s.recv(relay, (0, mine * count), real(parent));
        for c in children {
            let at = (c - vr) as usize * count;
            s.send(relay, (at, at + subtree(c, n) as usize * count), real(c));
        }
        start_keep(s, relay, Some(count))
    }

    /// Scatters the root's `send` (`size·recv.len()` bytes) into every rank's `recv`
    /// (`MPI_Scatter`); parts from `DIRECT_MIN` bytes go flat, in place (module `direct`).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let n = world.size() as usize;
    /// let send: Vec<u8> = (0..n as u8).collect();
    /// let mut mine = [0u8; 1];
    /// world.scatter(&send, &mut mine, 0)?;
    /// assert_eq!(mine[0], world.rank() as u8);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scatter(&self, send: &[u8], recv: &mut [u8], root: u32) -> Result<(), AgentError> {
        if self.direct(recv.len()) {
            return self.direct_scatter(send, recv, root);
        }
        let started = self.iscatter(send.to_vec(), recv.len(), root)?;
        finish(started, recv)
    }
}
