//! The two forms of xfer block: [`ScatterBlock`] (0 or 1 source, any number of
//! destinations) and [`GatherBlock`] (any number of sources, 0 or 1 destination).

use super::schedule::{Schedule, user_tag};
use crate::comm::Comm;
use crate::engine::xfer_buffers::XferBuffers;
use crate::engine::xfer_plan::OpKind;
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer_base::{BufId, Reduction, XferError};

fn check_peer(comm: &Comm, peer: Option<u32>) -> Result<(), XferError> {
    match peer {
        Some(r) if r >= comm.size() => Err(XferError::UnknownRank {
            rank: r,
            size: comm.size(),
        }),
        Some(r) if r == comm.rank() => Err(XferError::SelfPeer {
            op: usize::MAX,
            rank: r,
        }),
        _ => Ok(()),
    }
}

/// A one-to-many block: one message from the source (split over the receive-type ops in issue
/// order), one message to each destination (the ops naming it, in issue order).
///
/// Ops are only recorded here; [`ScatterBlock::start`] checks them all and posts nothing when
/// one is invalid.
pub struct ScatterBlock {
    comm: Comm,
    src: Option<u32>,
    tag: u32,
    sched: Schedule,
}

impl std::fmt::Debug for ScatterBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScatterBlock")
            .field("src", &self.src)
            .field("tag", &self.tag)
            .finish()
    }
}

impl ScatterBlock {
    pub(crate) fn new(comm: &Comm, src: Option<u32>, tag: u32) -> ScatterBlock {
        let mut sched = Schedule::new(comm);
        sched.step(tag);
        ScatterBlock {
            comm: comm.clone(),
            src,
            tag,
            sched,
        }
    }

    /// Hands `data` to the block (it comes back through [`XferBuffers`]).
    pub fn buffer(&mut self, data: Vec<u8>) -> BufId {
        BufId(self.sched.buffer(data))
    }

    fn op(
        &mut self,
        kind: OpKind,
        buf: Option<BufId>,
        first: usize,
        last: usize,
        dest: Option<u32>,
    ) -> &mut Self {
        let src = if matches!(kind, OpKind::Send) {
            None
        } else {
            self.src
        };
        self.sched
            .op(kind, buf.map(|b| b.0), (first, last), src, dest);
        self
    }

    /// Receives bytes `first..last` of `buf` from the source.
    pub fn recv_op(&mut self, buf: BufId, first: usize, last: usize) -> &mut Self {
        self.op(OpKind::Recv, Some(buf), first, last, None)
    }

    /// Sends bytes `first..last` of `buf` to `dest`: as they are when the block starts, or,
    /// for bytes that earlier receive ops of this block write, as soon as they arrived.
    pub fn send_op(&mut self, buf: BufId, first: usize, last: usize, dest: u32) -> &mut Self {
        self.op(OpKind::Send, Some(buf), first, last, Some(dest))
    }

    /// Receives bytes `first..last` of `buf` from the source and forwards each piece to
    /// `dest` as soon as it arrived.
    pub fn recv_forward_op(
        &mut self,
        buf: BufId,
        first: usize,
        last: usize,
        dest: u32,
    ) -> &mut Self {
        self.op(OpKind::RecvForward, Some(buf), first, last, Some(dest))
    }

    /// Forwards the next `size` bytes from the source to `dest` without keeping them.
    pub fn forward_op(&mut self, size: usize, dest: u32) -> &mut Self {
        self.op(OpKind::Forward, None, 0, size, Some(dest))
    }

    /// Combines the bytes from the source into `first..last` of `buf` with `op`.
    pub fn recv_mop_op(
        &mut self,
        buf: BufId,
        first: usize,
        last: usize,
        op: Reduction,
    ) -> &mut Self {
        self.op(OpKind::RecvMop(op), Some(buf), first, last, None)
    }

    /// Combines the bytes from the source into `first..last` of `buf` with `op` and forwards
    /// each combined piece to `dest`.
    pub fn recv_mop_forward_op(
        &mut self,
        buf: BufId,
        first: usize,
        last: usize,
        op: Reduction,
        dest: u32,
    ) -> &mut Self {
        self.op(
            OpKind::RecvMopForward(op),
            Some(buf),
            first,
            last,
            Some(dest),
        )
    }

    /// Checks the block and starts it (`Xfer_start`); the request completes when every piece
    /// was received, combined and sent. Nothing is posted when the block is invalid.
    pub fn start(self) -> Result<(Request, XferBuffers), AgentError> {
        user_tag(self.tag).map_err(AgentError::Xfer)?;
        check_peer(&self.comm, self.src).map_err(AgentError::Xfer)?;
        self.sched.start(true)
    }
}

/// A many-to-one block: one message from each source (the ops naming it, in issue order), one
/// message to the destination (the send-type ops, in issue order).
///
/// Ops are only recorded here; [`GatherBlock::start`] checks them all and posts nothing when
/// one is invalid.
pub struct GatherBlock {
    comm: Comm,
    dest: Option<u32>,
    tag: u32,
    sched: Schedule,
}

impl std::fmt::Debug for GatherBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatherBlock")
            .field("dest", &self.dest)
            .field("tag", &self.tag)
            .finish()
    }
}

impl GatherBlock {
    pub(crate) fn new(comm: &Comm, dest: Option<u32>, tag: u32) -> GatherBlock {
        let mut sched = Schedule::new(comm);
        sched.step(tag);
        GatherBlock {
            comm: comm.clone(),
            dest,
            tag,
            sched,
        }
    }

    /// Hands `data` to the block (it comes back through [`XferBuffers`]).
    pub fn buffer(&mut self, data: Vec<u8>) -> BufId {
        BufId(self.sched.buffer(data))
    }

    fn op(
        &mut self,
        kind: OpKind,
        buf: Option<BufId>,
        first: usize,
        last: usize,
        src: Option<u32>,
    ) -> &mut Self {
        let dest = if matches!(kind, OpKind::Recv | OpKind::RecvMop(_)) {
            None
        } else {
            self.dest
        };
        self.sched
            .op(kind, buf.map(|b| b.0), (first, last), src, dest);
        self
    }

    /// Receives bytes `first..last` of `buf` from `src`.
    pub fn recv_op(&mut self, buf: BufId, first: usize, last: usize, src: u32) -> &mut Self {
        self.op(OpKind::Recv, Some(buf), first, last, Some(src))
    }

    /// Sends bytes `first..last` of `buf` to the destination: as they are when the block
    /// starts, or, for bytes that earlier receive ops of this block write, as soon as they
    /// arrived (and were combined).
    pub fn send_op(&mut self, buf: BufId, first: usize, last: usize) -> &mut Self {
        self.op(OpKind::Send, Some(buf), first, last, None)
    }

    /// Receives bytes `first..last` of `buf` from `src` and forwards each piece to the
    /// destination as soon as it arrived (after the bytes issued before it).
    pub fn recv_forward_op(
        &mut self,
        buf: BufId,
        first: usize,
        last: usize,
        src: u32,
    ) -> &mut Self {
        self.op(OpKind::RecvForward, Some(buf), first, last, Some(src))
    }

    /// Forwards `size` bytes from `src` to the destination without keeping them.
    pub fn forward_op(&mut self, size: usize, src: u32) -> &mut Self {
        self.op(OpKind::Forward, None, 0, size, Some(src))
    }

    /// Combines the bytes from `src` into `first..last` of `buf` with `op`.
    pub fn recv_mop_op(
        &mut self,
        buf: BufId,
        first: usize,
        last: usize,
        op: Reduction,
        src: u32,
    ) -> &mut Self {
        self.op(OpKind::RecvMop(op), Some(buf), first, last, Some(src))
    }

    /// Combines the bytes from `src` into `first..last` of `buf` with `op` and forwards each
    /// combined piece to the destination.
    pub fn recv_mop_forward_op(
        &mut self,
        buf: BufId,
        first: usize,
        last: usize,
        op: Reduction,
        src: u32,
    ) -> &mut Self {
        self.op(
            OpKind::RecvMopForward(op),
            Some(buf),
            first,
            last,
            Some(src),
        )
    }

    /// Checks the block and starts it (`Xfer_start`); the request completes when every piece
    /// was received, combined and sent. Nothing is posted when the block is invalid.
    pub fn start(self) -> Result<(Request, XferBuffers), AgentError> {
        user_tag(self.tag).map_err(AgentError::Xfer)?;
        check_peer(&self.comm, self.dest).map_err(AgentError::Xfer)?;
        self.sched.start(true)
    }
}

// The xfer blocks of a communicator: their constructors live here, above `Comm`.
impl Comm {
    /// A scatter-form xfer block (`xfer_scatter_init`): at most one source `src`, any number
    /// of destinations; `tag` below `0x8000_0000`.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let block = world.xfer_scatter(Some(0), 3);
    /// drop(block); // see the `xfer` module for adding and starting its pieces
    /// # Ok(())
    /// # }
    /// ```
    pub fn xfer_scatter(&self, src: Option<u32>, tag: u32) -> ScatterBlock {
        ScatterBlock::new(self, src, tag)
    }

    /// A gather-form xfer block (`xfer_gather_init`): any number of sources, at most one
    /// destination `dest`; `tag` below `0x8000_0000`.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let block = world.xfer_gather(Some(0), 4);
    /// drop(block); // see the `xfer` module for adding and starting its pieces
    /// # Ok(())
    /// # }
    /// ```
    pub fn xfer_gather(&self, dest: Option<u32>, tag: u32) -> GatherBlock {
        GatherBlock::new(self, dest, tag)
    }
}
