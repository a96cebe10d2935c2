//! `alltoall`: n − 1 pairwise blocks; in block k a rank sends its part for rank + k and
//! receives the part of rank − k.

use super::{CollBuffer, bad, finish, start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer::schedule::Schedule;

const TAG: u32 = tag(8);

impl Comm {
    /// Starts an alltoall (`MPI_Ialltoall`): `send` holds one part of `send.len() / size`
    /// bytes for every rank, in rank order; the [`CollBuffer`] gets every rank's part for this
    /// rank, in rank order.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let n = world.size() as usize;
    /// let send: Vec<u8> = (0..n as u8).collect(); // part i (one byte) for rank i
    /// let (mut request, mut out) = world.ialltoall(send)?;
    /// request.wait()?;
    /// assert_eq!(out.take().expect("complete").len(), n);
    /// # Ok(())
    /// # }
    /// ```
    pub fn ialltoall(&self, send: Vec<u8>) -> Result<(Request, CollBuffer), AgentError> {
        let (r, n) = (self.rank() as usize, self.size() as usize);
        if send.len() % n != 0 {
            return Err(bad(
                "alltoall",
                format!("{} bytes do not split into {n} equal parts", send.len()),
            ));
        }
        let c = send.len() / n;
        let part = |i: usize| (i * c, (i + 1) * c);
        let mut recv = vec![0; send.len()];
        recv[r * c..(r + 1) * c].copy_from_slice(&send[r * c..(r + 1) * c]);
        let mut s = Schedule::new(self);
        let out = s.buffer(recv);
        let inp = s.buffer(send);
        for k in 1..n {
            let to = (r + k) % n;
            let from = (r + n - k) % n;
            s.step(TAG);
            s.send(inp, part(to), to as u32);
            s.recv(out, part(from), from as u32);
        }
        start(s, out)
    }

    /// Sends part i of `send` to rank i and receives rank i's part for this rank into part i
    /// of `recv` (`MPI_Alltoall`); both hold `size` equal parts.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let n = world.size() as usize;
    /// let send = vec![world.rank() as u8; 4 * n];
    /// let mut recv = vec![0u8; 4 * n];
    /// world.alltoall(&send, &mut recv)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn alltoall(&self, send: &[u8], recv: &mut [u8]) -> Result<(), AgentError> {
        if recv.len() != send.len() {
            return Err(bad(
                "alltoall",
                format!(
                    "sends {} bytes but receives into {}",
                    send.len(),
                    recv.len()
                ),
            ));
        }
        let started = self.ialltoall(send.to_vec())?;
        finish(started, recv)
    }
}
