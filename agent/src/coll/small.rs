//! Blocking collectives on small buffers as point-to-point messages: `barrier`, `bcast` and
//! `allreduce` below [`SMALL_MAX`] bytes.
//!
//! A schedule of xfer blocks costs a request, a schedule, owned block buffers and a pass of
//! the dependency graph per block; for a few bytes that is most of the time. Below the switch
//! point the blocking calls run the same algorithms (dissemination barrier, binomial-tree
//! broadcast, recursive-doubling allreduce with the same fold for a non-power of two, so a
//! reduction combines in the same order) as plain messages on the communicator's collective
//! context, which take the blocking `send`/`recv` fast paths (`crate::fast`): an eager message
//! is gathered straight into the method and read straight out of it into the caller's buffer.
//!
//! The choice depends only on the length and the switch point, which are the same on every
//! rank (the variable must be set alike on all ranks, as for the other switch points), so all
//! ranks of a call take the same path. These messages are tagged point-to-point messages on
//! the collective context, which xfer blocks never match, so they cannot mix with a
//! nonblocking collective still in flight. An exchange longer than the eager limit posts its
//! send before its receive, so two partners never wait on each other's rendezvous.

use super::tree::{binomial, folded, pof2, unfolded};
use super::{bad, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::matching::{Source, TagMatch};
use crate::xfer::Reduction;

/// Bytes up to which blocking `bcast` and `allreduce` (and every `barrier`) run as
/// point-to-point messages.
pub const SMALL_MAX: usize = 4096;
/// Environment variable overriding [`SMALL_MAX`] (0 sends every size through xfer blocks).
pub const SMALL_MAX_VAR: &str = "VIADUCT_COLL_SMALL_MAX";

const BARRIER: u32 = tag(0x101);
const BCAST: u32 = tag(0x102);
const ALLREDUCE: u32 = tag(0x107);

impl Comm {
    fn world_of(&self, r: u32) -> u32 {
        self.world_ranks()[r as usize]
    }

    /// Receives exactly `buf.len()` bytes from communicator rank `from`.
    fn small_recv(
        &self,
        what: &'static str,
        from: u32,
        t: u32,
        buf: &mut [u8],
    ) -> Result<(), AgentError> {
        let st =
            self.coll_agent()
                .recv(buf, Source::Rank(self.world_of(from)), TagMatch::Tag(t))?;
        if st.count() != buf.len() as u64 {
            return Err(bad(
                what,
                format!(
                    "rank {from} passed {} bytes where this rank passed {}",
                    st.count(),
                    buf.len()
                ),
            ));
        }
        Ok(())
    }

    /// Sends `data` to `to` and receives as many bytes from `from` into `buf`.
    fn small_exchange(
        &self,
        what: &'static str,
        t: u32,
        to: u32,
        data: &[u8],
        from: u32,
        buf: &mut [u8],
    ) -> Result<(), AgentError> {
        let agent = self.coll_agent();
        if data.len() <= agent.config().eager_limit {
            agent.send(self.world_of(to), t, data)?;
            return self.small_recv(what, from, t, buf);
        }
        let mut send = agent.isend(self.world_of(to), t, data)?;
        let got = self.small_recv(what, from, t, buf);
        send.wait()?;
        got
    }

    /// Dissemination barrier of empty messages.
    pub(crate) fn small_barrier(&self) -> Result<(), AgentError> {
        let (r, n) = (self.rank(), self.size());
        let mut dist = 1;
        while dist < n {
            self.small_exchange(
                "barrier",
                BARRIER,
                (r + dist) % n,
                &[],
                (r + n - dist) % n,
                &mut [],
            )?;
            dist <<= 1;
        }
        Ok(())
    }

    /// Binomial-tree broadcast of `buf` from `root`.
    pub(crate) fn small_bcast(&self, buf: &mut [u8], root: u32) -> Result<(), AgentError> {
        let n = self.size();
        let vr = (self.rank() + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let (parent, children) = binomial(vr, n);
        if let Some(p) = parent {
            self.small_recv("bcast", real(p), BCAST, buf)?;
        }
        for c in children {
            self.coll_agent().send(self.world_of(real(c)), BCAST, buf)?;
        }
        Ok(())
    }

    /// Recursive-doubling allreduce of `buf` in place, with the power-of-two fold.
    pub(crate) fn small_allreduce(
        &self,
        buf: &mut [u8],
        red: &Reduction,
    ) -> Result<(), AgentError> {
        let (r, n) = (self.rank(), self.size());
        if n == 1 {
            return Ok(());
        }
        let mut incoming = vec![0u8; buf.len()];
        let rem = n - pof2(n);
        if r < 2 * rem {
            if r % 2 == 0 {
                self.coll_agent()
                    .send(self.world_of(r + 1), ALLREDUCE, buf)?;
            } else {
                self.small_recv("allreduce", r - 1, ALLREDUCE, &mut incoming)?;
                red.combine(&incoming, buf);
            }
        }
        if let Some(nr) = folded(r, n) {
            let mut mask = 1;
            while mask < pof2(n) {
                let partner = unfolded(nr ^ mask, n);
                self.small_exchange("allreduce", ALLREDUCE, partner, buf, partner, &mut incoming)?;
                red.combine(&incoming, buf);
                mask <<= 1;
            }
        }
        if r < 2 * rem {
            if r % 2 == 0 {
                self.small_recv("allreduce", r + 1, ALLREDUCE, buf)?;
            } else {
                self.coll_agent()
                    .send(self.world_of(r - 1), ALLREDUCE, buf)?;
            }
        }
        Ok(())
    }
}
