//! `alltoall`: n − 1 pairwise exchanges; in exchange k a rank sends its part for rank + k and
//! receives the part of rank − k. The blocking forms send each part as one point-to-point
//! message on the collective context from the switch point `SwitchPoints::alltoall_p2p_min`
//! on (every size by default); below it, and always for the nonblocking form, the exchanges
//! are xfer blocks.

use std::sync::Arc;

use super::{CollBuffer, bad, finish, start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::p2p::SharedBytes;
use crate::recv_buffer::RecvBuffer;
use crate::request::Request;
use crate::xfer::schedule::Schedule;

const TAG: u32 = tag(8);
/// Tag of the alltoall as point-to-point messages.
const P2P_TAG: u32 = tag(0x208);

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
        let c = part_of(send.len(), n)?;
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
        let (r, n) = (self.rank() as usize, self.size() as usize);
        let c = part_of(send.len(), n)?;
        if c < self.switch_points().alltoall_p2p_min {
            let started = self.ialltoall(send.to_vec())?;
            return finish(started, recv);
        }
        recv[r * c..(r + 1) * c].copy_from_slice(&send[r * c..(r + 1) * c]);
        // Two ranks over TCP: one exchange in eager pieces, all sends posted first, so that
        // both directions flow at once without a rendezvous handshake each.
        let exchange =
            if n == 2 && c > self.coll_agent().config().eager_limit && self.pair_over_tcp() {
                Comm::pieces_exchange
            } else {
                Comm::small_exchange
            };
        for k in 1..n {
            let (to, from) = ((r + k) % n, (r + n - k) % n);
            exchange(
                self,
                "alltoall",
                P2P_TAG,
                to as u32,
                &send[to * c..(to + 1) * c],
                from as u32,
                &mut recv[from * c..(from + 1) * c],
            )?;
        }
        Ok(())
    }

    /// [`Comm::alltoall`] on the caller's memory, part by part: `send[i]` is the part for rank
    /// i and `recv[i]` receives rank i's part, all of one length. From the switch point
    /// `SwitchPoints::alltoall_p2p_min` on, a part longer than the eager limit is sent
    /// straight from `send[i]` (no copy by the agent) and received straight into `recv[i]`
    /// (no copy out of the agent's memory); shorter parts take the eager fast paths. Both are
    /// consumed: the caller keeps its own way to the memory (MPI's face: pointers into the
    /// caller's buffers, left to the library until the call returns), and nothing reads or
    /// writes them once this returns, failed or not.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let n = world.size() as usize;
    /// let send = vec![vec![1u8; 8]; n]; // one part per rank
    /// let recv = vec![vec![0u8; 8]; n];
    /// world.alltoall_into(send, recv)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn alltoall_into<S, M>(&self, send: Vec<S>, recv: Vec<M>) -> Result<(), AgentError>
    where
        S: AsRef<[u8]> + Send + Sync + 'static,
        M: AsMut<[u8]> + Send + 'static,
    {
        let (r, n) = (self.rank() as usize, self.size() as usize);
        if send.len() != n || recv.len() != n {
            return Err(bad(
                "alltoall",
                format!(
                    "{} send parts and {} receive parts for {n} ranks",
                    send.len(),
                    recv.len()
                ),
            ));
        }
        let mut recv = recv;
        let c = send[0].as_ref().len();
        if let Some(i) =
            (0..n).find(|&i| send[i].as_ref().len() != c || recv[i].as_mut().len() != c)
        {
            return Err(bad(
                "alltoall",
                format!(
                    "part {i} sends {} and receives {} bytes where part 0 sends {c}",
                    send[i].as_ref().len(),
                    recv[i].as_mut().len()
                ),
            ));
        }
        let agent = self.coll_agent();
        if c < self.switch_points().alltoall_p2p_min {
            let all: Vec<u8> = send
                .iter()
                .flat_map(|s| s.as_ref().iter().copied())
                .collect();
            let mut out = vec![0u8; all.len()];
            self.alltoall(&all, &mut out)?;
            for (m, got) in recv.iter_mut().zip(out.chunks_exact(c.max(1))) {
                m.as_mut().copy_from_slice(got);
            }
            return Ok(());
        }
        recv[r].as_mut().copy_from_slice(send[r].as_ref());
        // Two ranks over TCP exchange long parts in eager pieces (as in `alltoall`), copied
        // out of `send[to]` and into `recv[from]` piece by piece.
        let pieces = n == 2 && self.pair_over_tcp();
        if c <= agent.config().eager_limit || pieces {
            let exchange = if pieces && c > agent.config().eager_limit {
                Comm::pieces_exchange
            } else {
                Comm::small_exchange
            };
            for k in 1..n {
                let (to, from) = ((r + k) % n, (r + n - k) % n);
                exchange(
                    self,
                    "alltoall",
                    P2P_TAG,
                    to as u32,
                    send[to].as_ref(),
                    from as u32,
                    recv[from].as_mut(),
                )?;
            }
            return Ok(());
        }
        let mut send: Vec<Option<S>> = send.into_iter().map(Some).collect();
        let mut recv: Vec<Option<M>> = recv.into_iter().map(Some).collect();
        for k in 1..n {
            let (to, from) = ((r + k) % n, (r + n - k) % n);
            let (Some(data), Some(mem)) = (send[to].take(), recv[from].take()) else {
                return Err(bad("alltoall", "a part was used twice".into()));
            };
            self.exchange_into(to as u32, Arc::new(data), from as u32, mem, c)?;
        }
        Ok(())
    }

    /// Sends `data` to `to` from the caller's memory and receives `len` bytes from `from`
    /// straight into `mem`; returns once both completed (also after an error: nothing touches
    /// either afterwards).
    fn exchange_into<M>(
        &self,
        to: u32,
        data: SharedBytes,
        from: u32,
        mem: M,
        len: usize,
    ) -> Result<(), AgentError>
    where
        M: AsMut<[u8]> + Send + 'static,
    {
        let agent = self.coll_agent();
        let buf = RecvBuffer::caller_of(mem);
        // The send first (see `Agent::exchange_shared`); both waited for, also after an error.
        let got =
            agent.exchange_shared(self.world_of(to), P2P_TAG, data, self.world_of(from), &buf);
        // Nothing is written into the caller's memory past here.
        let _ = buf.detach();
        let st = got?;
        if st.count() != len as u64 {
            return Err(bad(
                "alltoall",
                format!(
                    "rank {from} passed parts of {} bytes where this rank passed {len}",
                    st.count()
                ),
            ));
        }
        Ok(())
    }
}

/// Bytes of each of `n` equal parts of `len` bytes.
fn part_of(len: usize, n: usize) -> Result<usize, AgentError> {
    if len % n != 0 {
        return Err(bad(
            "alltoall",
            format!("{len} bytes do not split into {n} equal parts"),
        ));
    }
    Ok(len / n)
}
