//! [`PointToPoint`]: the blocking send and receive the demo's collectives are written on,
//! provided both by the demo's own [`Mesh`] of method endpoints and by the agent's tagged
//! messaging ([`AgentPeers`]).

use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};

use super::error::DemoError;
use super::mesh::{Mesh, STEP_LIMIT};

/// Blocking, tagged, in-order point-to-point messages between the ranks of a job.
pub trait PointToPoint {
    /// This rank.
    fn rank(&self) -> u32;
    /// Ranks in the job.
    fn size(&self) -> u32;
    /// Sends `data` to `peer` with `tag`; `data` may be reused when this returns.
    fn send(&mut self, peer: u32, tag: u64, data: &[u8]) -> Result<(), DemoError>;
    /// Receives the message from `peer` with `tag` into `buf`, which it must fill exactly.
    fn recv_into(&mut self, peer: u32, tag: u64, buf: &mut [u8]) -> Result<(), DemoError>;
}

impl PointToPoint for Mesh {
    fn rank(&self) -> u32 {
        Mesh::rank(self)
    }
    fn size(&self) -> u32 {
        Mesh::size(self)
    }
    fn send(&mut self, peer: u32, tag: u64, data: &[u8]) -> Result<(), DemoError> {
        Mesh::send(self, peer, tag, data)
    }
    fn recv_into(&mut self, peer: u32, tag: u64, buf: &mut [u8]) -> Result<(), DemoError> {
        Mesh::recv_into(self, peer, tag, buf)
    }
}

/// The agent's tagged messaging seen as [`PointToPoint`]. The demo's 64-bit tags (a kind in
/// the bits from 40 up, a sequence number below) are folded into the agent's 32-bit tags: the
/// kind in the top 8 bits, the low 24 bits of the sequence number below.
pub struct AgentPeers {
    /// The agent of this rank.
    pub agent: Agent,
}

fn fold(tag: u64) -> u32 {
    (((tag >> 40) as u32 & 0x7F) << 24) | (tag as u32 & 0x00FF_FFFF)
}

impl AgentPeers {
    fn limit(what: String) -> DemoError {
        DemoError::Timeout {
            what,
            limit: STEP_LIMIT,
        }
    }

    /// A blocking send with the limit every demo step has.
    pub fn send_u32(&self, peer: u32, tag: u32, data: &[u8]) -> Result<(), DemoError> {
        let mut req = self.agent.isend(peer, tag, data)?;
        req.wait_timeout(STEP_LIMIT)?.ok_or_else(|| {
            Self::limit(format!(
                "a send from rank {} to rank {peer}",
                self.agent.rank()
            ))
        })?;
        Ok(())
    }

    /// A blocking receive with the limit every demo step has; returns the byte count.
    pub fn recv_u32(&self, peer: u32, tag: u32, buf: &mut [u8]) -> Result<usize, DemoError> {
        let (mut req, data) =
            self.agent
                .irecv(buf.len(), Source::Rank(peer), TagMatch::Tag(tag))?;
        let status = req.wait_timeout(STEP_LIMIT)?.ok_or_else(|| {
            Self::limit(format!(
                "a message from rank {peer} to rank {}",
                self.agent.rank()
            ))
        })?;
        data.copy_to(buf);
        Ok(status.count() as usize)
    }

    /// Waits a little for progress (used while a handler is awaited).
    pub fn progress(&self) {
        self.agent.make_progress_blocking(Duration::from_millis(1));
    }
}

impl PointToPoint for AgentPeers {
    fn rank(&self) -> u32 {
        self.agent.rank()
    }
    fn size(&self) -> u32 {
        self.agent.size()
    }
    fn send(&mut self, peer: u32, tag: u64, data: &[u8]) -> Result<(), DemoError> {
        self.send_u32(peer, fold(tag), data)
    }
    fn recv_into(&mut self, peer: u32, tag: u64, buf: &mut [u8]) -> Result<(), DemoError> {
        let n = self.recv_u32(peer, fold(tag), buf)?;
        if n != buf.len() {
            return Err(DemoError::Protocol(format!(
                "rank {} expected {} bytes from rank {peer}, got {n}",
                self.agent.rank(),
                buf.len()
            )));
        }
        Ok(())
    }
}
