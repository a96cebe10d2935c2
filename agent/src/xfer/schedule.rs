//! [`Schedule`]: blocks over one set of buffers, each started when the one before completed;
//! what a block's `start` and every collective hand to the engine.

use std::sync::Arc;

use crate::comm::Comm;
use crate::engine::xfer_buffers::{RunShared, XferBuffers};
use crate::engine::xfer_plan::{self as plan, Frame, OpKind, OpSpec, StepSpec};
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer_base::{Reduction, XferError};

/// A sequence of blocks sharing buffers (block k+1 starts when block k completed).
pub(crate) struct Schedule {
    comm: Comm,
    pub(crate) bufs: Vec<Vec<u8>>,
    steps: Vec<StepSpec>,
}

impl Schedule {
    pub(crate) fn new(comm: &Comm) -> Schedule {
        Schedule {
            comm: comm.clone(),
            bufs: Vec::new(),
            steps: Vec::new(),
        }
    }

    /// Adds a buffer; returns its index.
    pub(crate) fn buffer(&mut self, data: Vec<u8>) -> usize {
        self.bufs.push(data);
        self.bufs.len() - 1
    }

    /// Opens the next block, with `tag`.
    pub(crate) fn step(&mut self, tag: u32) {
        self.steps.push(StepSpec {
            tag,
            ops: Vec::new(),
        });
    }

    /// Appends an op to the current block.
    pub(crate) fn op(
        &mut self,
        kind: OpKind,
        buf: Option<usize>,
        range: (usize, usize),
        src: Option<u32>,
        dest: Option<u32>,
    ) {
        if self.steps.is_empty() {
            self.step(0);
        }
        if let Some(s) = self.steps.last_mut() {
            s.ops.push(OpSpec {
                kind,
                buf,
                first: range.0,
                last: range.1,
                src,
                dest,
            });
        }
    }

    /// Sends `buf[range]` to `dest` in the current block.
    pub(crate) fn send(&mut self, buf: usize, range: (usize, usize), dest: u32) {
        self.op(OpKind::Send, Some(buf), range, None, Some(dest));
    }

    /// Receives `buf[range]` from `src` in the current block.
    pub(crate) fn recv(&mut self, buf: usize, range: (usize, usize), src: u32) {
        self.op(OpKind::Recv, Some(buf), range, Some(src), None);
    }

    /// Receives `buf[range]` from `src` and forwards it to `dest`.
    pub(crate) fn recv_forward(&mut self, buf: usize, range: (usize, usize), src: u32, dest: u32) {
        self.op(OpKind::RecvForward, Some(buf), range, Some(src), Some(dest));
    }

    /// Combines what `src` sends into `buf[range]`.
    pub(crate) fn recv_mop(
        &mut self,
        buf: usize,
        range: (usize, usize),
        red: &Reduction,
        src: u32,
    ) {
        self.op(
            OpKind::RecvMop(red.clone()),
            Some(buf),
            range,
            Some(src),
            None,
        );
    }

    /// Checks every block (user tags only when `user`) and starts the schedule.
    pub(crate) fn start(self, user: bool) -> Result<(Request, XferBuffers), AgentError> {
        let comm = self.comm;
        let frame = Frame {
            me: comm.rank(),
            size: comm.size(),
            world: comm.world_ranks(),
        };
        let lens: Vec<usize> = self.bufs.iter().map(Vec::len).collect();
        for s in &self.steps {
            let checked = if user {
                plan::validate(s, &frame, &lens)
            } else {
                plan::validate_ops(&s.ops, &frame, &lens)
            };
            checked.map_err(AgentError::Xfer)?;
        }
        let steps: Vec<_> = self.steps.iter().map(|s| plan::build(s, &frame)).collect();
        let agent = comm.coll_agent();
        let (request, counter) = Request::message_driven(1, agent.shared.driver.clone());
        let shared = Arc::new(RunShared::default());
        let mut st = agent.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        st.start_xfer(
            agent.context(),
            steps,
            self.bufs,
            counter,
            Arc::clone(&shared),
        );
        drop(st);
        Ok((request, XferBuffers::new(shared)))
    }
}

/// Checks a tag given by a user.
pub(crate) fn user_tag(tag: u32) -> Result<u32, XferError> {
    if tag & crate::xfer_base::COLL_TAG_BIT != 0 {
        Err(XferError::ReservedTag(tag))
    } else {
        Ok(tag)
    }
}
