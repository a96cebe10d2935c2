//! One-sided operations: RDMA READ and WRITE between a [`Pooled`] buffer of the endpoint's
//! registration cache and a region of the peer.
//!
//! An operation is split into pieces of at most the endpoint's piece size (the smaller of
//! [`Config::rdma_piece`](super::super::Config::rdma_piece) and the port's largest message),
//! each one signalled work request, and at most
//! [`Config::rdma_ops`](super::super::Config::rdma_ops) pieces are outstanding at once: the
//! queue pair's send queue is sized for them on top of the send slots, so they never take a
//! send's place. The endpoint owns the buffer from the post until every posted piece has
//! completed (the queue pair is destroyed before the buffer when the endpoint drops), so the
//! NIC never touches memory that was handed back. Exactly one [`Completion`] carries the
//! operation's id: success once every piece completed (a read's buffer then waits in
//! [`Endpoint::take_landed`]), or the failure, also when the connection fails with pieces
//! unposted or in flight.

use std::collections::HashMap;

use super::super::completion::{Completion, Op, Posted};
use super::super::error::Error;
use super::Endpoint;
use crate::mr::{Access, RemoteRegion};
use crate::regcache::{CacheStats, Pooled, RegCache};
use crate::wc::Status;
use crate::wr::{RawSendRequest, RawSge, SendOp};

/// Set on the work-request ids of one-sided pieces (the low 32 bits number the operation).
pub(crate) const RDMA_BASE: u64 = 1 << 40;

/// A one-sided operation accepted and not finished.
pub(crate) struct RdmaOp {
    /// The caller's id.
    id: u64,
    buf: Pooled,
    remote: RemoteRegion,
    read: bool,
    len: usize,
    /// Bytes handed to posted pieces so far.
    posted: usize,
    /// Pieces posted and not completed.
    out: u32,
    /// Whether the operation's completion was delivered (a failure is delivered at once).
    done: bool,
}

impl RdmaOp {
    /// Whether its completion is still to come.
    pub(crate) fn is_open(&self) -> bool {
        !self.done
    }
}

/// One-sided operations of an endpoint: the in-flight map and what waits.
#[derive(Default)]
pub(crate) struct Rdma {
    pub(crate) ops: HashMap<u64, RdmaOp>,
    /// Operations with pieces not posted yet, in order.
    pub(crate) queue: std::collections::VecDeque<u64>,
    pub(crate) next_op: u32,
    /// Pieces posted and not completed.
    pub(crate) out: u32,
    /// Buffers of finished reads, by the caller's id.
    pub(crate) landed: HashMap<u64, Pooled>,
}

impl Endpoint {
    /// The endpoint's registration cache (buffers with local-write, remote-read and
    /// remote-write access in this endpoint's protection domain, reused by size class; the
    /// cache is this connection's, so only its peer can be given their keys).
    pub fn cache(&self) -> &RegCache {
        &self.cache
    }

    /// The registration cache's counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Bytes of the largest piece one work request of a one-sided operation moves.
    pub fn rdma_piece(&self) -> usize {
        self.max_piece
    }

    /// Posts an RDMA READ of the whole of `remote` into the front of `buf` (a buffer of this
    /// endpoint's [`cache`](Endpoint::cache)). Accepted: exactly one [`Completion`] with `id`
    /// follows, and on success the buffer waits in [`Endpoint::take_landed`]`(id)`. Refused
    /// for want of resources ([`Posted::NoResources`], the buffer comes back) while an earlier
    /// one-sided operation still waits for room in the send queue.
    pub fn post_read(
        &mut self,
        id: u64,
        buf: Pooled,
        remote: RemoteRegion,
    ) -> Result<Posted<Pooled>, Error> {
        self.post_rdma(id, buf, remote, true)
    }

    /// Posts an RDMA WRITE of the first `remote.len` bytes of `buf` into `remote` (a region of
    /// the peer registered for remote writes). As [`Endpoint::post_read`]; the buffer is given
    /// back to the cache when the write completed.
    pub fn post_write(
        &mut self,
        id: u64,
        buf: Pooled,
        remote: RemoteRegion,
    ) -> Result<Posted<Pooled>, Error> {
        self.post_rdma(id, buf, remote, false)
    }

    /// The buffer of the finished read `id`, once its successful completion was handed out by
    /// `poll` (each buffer is handed out once).
    pub fn take_landed(&mut self, id: u64) -> Option<Pooled> {
        self.rdma.landed.remove(&id)
    }

    fn post_rdma(
        &mut self,
        id: u64,
        buf: Pooled,
        remote: RemoteRegion,
        read: bool,
    ) -> Result<Posted<Pooled>, Error> {
        self.check_open()?;
        let len = usize::try_from(remote.len).unwrap_or(usize::MAX);
        if len > buf.len() {
            return Err(Error::Rdma(format!(
                "the remote region of {len} bytes is longer than the local buffer of {} bytes",
                buf.len()
            )));
        }
        let Some(region) = buf.region() else {
            return Err(Error::Rdma(
                "the local buffer has no registration".to_owned(),
            ));
        };
        if region.pd().as_raw() != self._pd.as_raw() {
            return Err(Error::Rdma(
                "the local buffer is registered in another protection domain".to_owned(),
            ));
        }
        if read && !region.access().contains(Access::LOCAL_WRITE) {
            return Err(Error::Rdma(
                "a read target needs local-write access".to_owned(),
            ));
        }
        if !self.rdma.queue.is_empty() {
            self.progress();
            self.check_open()?;
            if !self.rdma.queue.is_empty() {
                return Ok(Posted::NoResources(buf));
            }
        }
        if len == 0 {
            self.completions.push_back(Completion {
                id,
                op: if read { Op::Read } else { Op::Write },
                result: Ok(0),
                buffer: None,
            });
            if read {
                self.rdma.landed.insert(id, buf);
            }
            return Ok(Posted::InProgress);
        }
        let wr = RDMA_BASE | u64::from(self.rdma.next_op);
        self.rdma.next_op = self.rdma.next_op.wrapping_add(1);
        self.rdma.ops.insert(
            wr,
            RdmaOp {
                id,
                buf,
                remote,
                read,
                len,
                posted: 0,
                out: 0,
                done: false,
            },
        );
        self.rdma.queue.push_back(wr);
        self.pump_rdma();
        Ok(Posted::InProgress)
    }

    /// Posts pieces of waiting operations while the send queue has room for them.
    pub(super) fn pump_rdma(&mut self) {
        while self.failed.is_none() && self.rdma.out < self.config.rdma_ops {
            let Some(&wr) = self.rdma.queue.front() else {
                return;
            };
            let piece = self.max_piece;
            let Some(op) = self.rdma.ops.get_mut(&wr) else {
                self.rdma.queue.pop_front();
                continue;
            };
            let Some(region) = op.buf.region() else {
                self.rdma.queue.pop_front();
                continue;
            };
            let n = (op.len - op.posted).min(piece);
            let sge = [RawSge {
                addr: region.addr() + op.posted as u64,
                len: n as u32,
                lkey: region.lkey(),
            }];
            let remote = RemoteRegion {
                addr: op.remote.addr + op.posted as u64,
                len: n as u64,
                rkey: op.remote.rkey,
            };
            let req = RawSendRequest {
                id: wr,
                op: if op.read {
                    SendOp::Read(remote)
                } else {
                    SendOp::Write(remote)
                },
                sges: &sge,
                signalled: true,
                inline: false,
            };
            // SAFETY: the entry names `n` bytes inside `region` (op.posted + n <= op.len <=
            // the buffer's length, checked at post), a live registration of this queue pair's
            // protection domain (checked at post) with local-write access for reads. The
            // buffer is owned by `op`, which stays in `self.rdma.ops` until every posted piece
            // of it has completed; no safe call lends it out meanwhile, and the endpoint drops
            // its queue pair (destroying it) before `self.rdma`.
            match unsafe { self.qp.post_send_raw(&[req]) } {
                Ok(1) => {
                    op.posted += n;
                    op.out += 1;
                    if op.posted == op.len {
                        self.rdma.queue.pop_front();
                    }
                    self.rdma.out += 1;
                    self.posted_send();
                }
                Ok(_) => {
                    self.fail("posting a one-sided operation posted nothing".to_owned());
                }
                Err(e) => {
                    self.fail(format!("posting a one-sided operation failed: {e}"));
                }
            }
        }
    }

    /// A piece of a one-sided operation completed.
    pub(super) fn rdma_completed(&mut self, wr: u64, status: Status) {
        self.send_completed();
        self.rdma.out = self.rdma.out.saturating_sub(1);
        let failed = !status.is_success();
        let reason = failed.then(|| super::failure_reason("a one-sided operation", status));
        let Some(op) = self.rdma.ops.get_mut(&wr) else {
            if let Some(r) = reason {
                self.fail(r);
            }
            return;
        };
        op.out = op.out.saturating_sub(1);
        if let Some(r) = &reason {
            if !op.done {
                op.done = true;
                self.completions.push_back(Completion {
                    id: op.id,
                    op: if op.read { Op::Read } else { Op::Write },
                    result: Err(Error::PeerFailed(r.clone())),
                    buffer: None,
                });
            }
        }
        let finished = op.out == 0 && (op.posted == op.len || op.done);
        if finished {
            if let Some(op) = self.rdma.ops.remove(&wr) {
                if !op.done {
                    self.completions.push_back(Completion {
                        id: op.id,
                        op: if op.read { Op::Read } else { Op::Write },
                        result: Ok(op.len),
                        buffer: None,
                    });
                    if op.read {
                        self.rdma.landed.insert(op.id, op.buf);
                    }
                }
                // Else (or for a write) the buffer goes back to the cache here: the NIC is
                // done with it.
            }
        }
        if let Some(r) = reason {
            self.fail(r);
        }
    }

    /// On failure: every operation not completed yet completes with the failure; buffers of
    /// operations with no piece in flight go back at once, the others when their flushed
    /// pieces complete (or when the endpoint, queue pair first, drops).
    pub(super) fn fail_rdma(&mut self, reason: &str) {
        self.rdma.queue.clear();
        let mut idle = Vec::new();
        for (wr, op) in self.rdma.ops.iter_mut() {
            if !op.done {
                op.done = true;
                self.completions.push_back(Completion {
                    id: op.id,
                    op: if op.read { Op::Read } else { Op::Write },
                    result: Err(Error::PeerFailed(reason.to_owned())),
                    buffer: None,
                });
            }
            if op.out == 0 {
                idle.push(*wr);
            }
        }
        for wr in idle {
            self.rdma.ops.remove(&wr);
        }
    }
}
