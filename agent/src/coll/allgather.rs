//! `allgather`: recursive doubling (a power of two, small results: log2 n blocks, each rank
//! exchanging everything it has with its partner), or a ring as one pipelined block (each rank
//! sends its part to the right and forwards, piece by piece, the parts arriving from the left).

use super::{CollBuffer, bad, finish, start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer::schedule::Schedule;

const TAG: u32 = tag(5);
/// Tag of the two-rank exchange (point-to-point messages on the collective context).
const PAIR_TAG: u32 = tag(0x205);

impl Comm {
    /// Starts an allgather (`MPI_Iallgather`): every rank's [`CollBuffer`] gets every rank's
    /// `send` (all of one length) in rank order.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let (mut request, mut out) = world.iallgather(vec![world.rank() as u8; 4])?;
    /// request.wait()?;
    /// assert_eq!(out.take().expect("complete"), vec![0u8; 4 * world.size() as usize]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn iallgather(&self, send: Vec<u8>) -> Result<(Request, CollBuffer), AgentError> {
        let (r, n) = (self.rank() as usize, self.size() as usize);
        let c = send.len();
        let mut all = vec![0; c * n];
        all[r * c..(r + 1) * c].copy_from_slice(&send);
        let mut s = Schedule::new(self);
        let b = s.buffer(all);
        let part = |i: usize| (i * c, (i + 1) * c);
        if n.is_power_of_two() && c * n < self.switch_points().allgather_ring_min {
            let mut mask = 1;
            while mask < n {
                let partner = r ^ mask;
                let mine = r / mask * mask;
                let theirs = partner / mask * mask;
                s.step(TAG);
                s.send(b, (part(mine).0, part(mine + mask - 1).1), partner as u32);
                s.recv(
                    b,
                    (part(theirs).0, part(theirs + mask - 1).1),
                    partner as u32,
                );
                mask <<= 1;
            }
        } else if n > 1 {
            let left = ((r + n - 1) % n) as u32;
            let right = ((r + 1) % n) as u32;
            s.step(TAG);
            s.send(b, part(r), right);
            for k in 1..n {
                let from = part((r + n - k) % n);
                if k + 1 < n {
                    s.recv_forward(b, from, left, right);
                } else {
                    s.recv(b, from, left);
                }
            }
        }
        start(s, b)
    }

    /// Gathers every rank's `send` into every rank's `recv` (`size·send.len()` bytes), in rank
    /// order (`MPI_Allgather`).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let mut all = vec![0u8; 2 * world.size() as usize];
    /// world.allgather(&[world.rank() as u8; 2], &mut all)?;
    /// assert_eq!(&all[..2], &[0, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), AgentError> {
        let want = send.len() * self.size() as usize;
        if recv.len() != want {
            return Err(bad(
                "allgather",
                format!("receives into {} bytes, not {want}", recv.len()),
            ));
        }
        let r = self.rank() as usize;
        recv[r * send.len()..(r + 1) * send.len()].copy_from_slice(send);
        self.allgather_in_place(recv)
    }

    /// [`Comm::allgather`] with this rank's part already in place: `buf` holds `size` parts of
    /// `buf.len() / size` bytes, part `rank` this rank's (`MPI_Allgather` with
    /// `MPI_IN_PLACE`). A result of at most the small switch point
    /// ([`Comm::coll_small_max`]) goes as point-to-point messages (recursive doubling for a
    /// power of two, else the ring of [`Comm::allgatherv_in_place`]), a larger one through
    /// xfer blocks, except on two ranks, where every length is one exchange of the two parts as
    /// point-to-point messages (over TCP, parts longer than the eager limit in eager pieces).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let part = 3;
    /// let mut buf = vec![0u8; part * world.size() as usize];
    /// let me = world.rank() as usize;
    /// buf[me * part..(me + 1) * part].fill(9); // this rank's part, in place
    /// world.allgather_in_place(&mut buf)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn allgather_in_place(&self, buf: &mut [u8]) -> Result<(), AgentError> {
        let n = self.size() as usize;
        if buf.len() % n != 0 {
            return Err(bad(
                "allgather",
                format!("{} bytes are not {n} parts of one length", buf.len()),
            ));
        }
        let c = buf.len() / n;
        if buf.len() <= self.switch_points().small_max {
            if n.is_power_of_two() {
                return self.small_allgather(buf, c);
            }
            let parts: Vec<(usize, usize)> = (0..n).map(|i| (i * c, c)).collect();
            return self.allgatherv_in_place(buf, &parts);
        }
        let r = self.rank() as usize;
        if n == 2 {
            // One exchange, nothing to pipeline: this rank's part goes to the other rank as one
            // message, whose part is received straight into its place (no copy into and out of
            // the agent's memory, as the xfer block would make).
            let (first, second) = buf.split_at_mut(c);
            let (mine, theirs): (&[u8], &mut [u8]) = if r == 0 {
                (first, second)
            } else {
                (second, first)
            };
            let other = 1 - r as u32;
            if c > self.coll_agent().config().eager_limit && self.pair_over_tcp() {
                return self.pieces_exchange("allgather", PAIR_TAG, other, mine, other, theirs);
            }
            return self.small_exchange("allgather", PAIR_TAG, other, mine, other, theirs);
        }
        let started = self.iallgather(buf[r * c..(r + 1) * c].to_vec())?;
        finish(started, buf)
    }
}
