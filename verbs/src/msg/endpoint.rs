//! One end of a message connection over an RC queue pair.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::completion::{Completion, Op};
use super::config::Config;
use super::error::Error;
use super::header::{Header, KIND_CLOSE, TAG_SLOTS};
use super::lease::Returns;
use super::pool::ReceivePool;
use super::sleeper::Sleeper;
use crate::channel::CompletionChannel;
use crate::cq::{CompletionQueue, Completions};
use crate::mr::{MemoryRegion, RemoteRegion};
use crate::pd::ProtectionDomain;
use crate::qp::QueuePair;
use crate::regcache::RegCache;
use crate::wc::{self, Status};
use crate::wr::Segment;

mod rdma;
mod receive;
mod send;

pub(crate) use rdma::Rdma;

/// Set on the work-request ids of receive buffers (the low 32 bits are the buffer's index).
pub(crate) const RECV_BASE: u64 = 1 << 32;
/// Work-request id of the keepalive write.
const KEEPALIVE_ID: u64 = u64::MAX;
/// Most emptied segment vectors kept for reuse (see [`Endpoint::one_segment`]).
const SPARE_SEGMENTS: usize = 64;

/// The inbound message being shown.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Current {
    /// Nothing shown.
    Idle,
    /// The front receive buffer holds the whole message.
    InPlace { consumed: usize },
    /// Fragments are being copied into the reassembly buffer.
    Assembling { tag: u64, total: usize },
    /// The reassembly buffer holds the whole message.
    Assembled { tag: u64, consumed: usize },
}

/// An accepted message not yet completed.
pub(crate) struct OutMsg {
    seq: u64,
    id: u64,
    tag: u64,
    /// The bytes still to be copied into send slots (empty for a message gathered straight
    /// into its slot by `post_send_parts`).
    data: Vec<u8>,
    /// Bytes of the message.
    len: usize,
    /// Bytes handed to send slots so far.
    off: usize,
    started: bool,
    /// Fragments posted and not yet completed.
    unacked: u32,
}

impl OutMsg {
    fn posted_all(&self) -> bool {
        self.started && self.off == self.len
    }
}

/// A data fragment: in its receive buffer, or copied out of a shared pool's buffer.
pub(crate) struct RxBuf {
    /// The receive buffer (its index and region) holding the fragment; `None` when copied.
    buf: Option<(u32, MemoryRegion)>,
    /// The fragment's payload when copied out (see [`ReceivePool`]).
    copy: Vec<u8>,
    header: Header,
    /// Where the payload starts in the buffer (after a full header, or 0 after a compact one
    /// or in a copy).
    at: usize,
    len: usize,
}

impl RxBuf {
    /// The payload.
    fn payload(&self) -> &[u8] {
        match &self.buf {
            Some((_, region)) => &region[self.at..self.at + self.len],
            None => &self.copy[..self.len],
        }
    }
}

/// One end of a message connection: tagged messages to and from one peer over one RC queue
/// pair, with credit-based flow control (see [the module docs](crate::msg)).
///
/// Every accepted descriptor gets exactly one [`Completion`] through [`Endpoint::poll`].
/// `poll`, `next`, `consume` and `wait` drive the connection (reap completions, re-post
/// receive buffers, send queued fragments, return credits, send keepalives); only `wait`
/// blocks.
pub struct Endpoint {
    pub(crate) qp: QueuePair,
    pub(crate) cq: CompletionQueue,
    pub(crate) channel: CompletionChannel,
    pub(crate) _pd: ProtectionDomain,
    pub(crate) config: Config,
    /// SENDs this side may still post (receive buffers the peer has posted for it).
    pub(crate) credits: u32,
    /// Payload bytes of one fragment.
    pub(crate) frag: usize,
    /// Receive buffers re-posted whose credit the peer has not been given yet.
    pub(crate) to_return: u32,
    /// Fragments holding data not consumed yet, in receive buffers or copied out of a shared
    /// pool's (their credits are the peer's only once consumed).
    pub(crate) held: u32,
    pub(crate) free_slots: Vec<(u32, MemoryRegion)>,
    /// Which message each posted send slot carries a fragment of.
    pub(crate) slot_owner: Vec<Option<u64>>,
    pub(crate) outgoing: VecDeque<OutMsg>,
    pub(crate) next_seq: u64,
    pub(crate) rx: VecDeque<RxBuf>,
    /// Tags recently sent with a full header, by slot (see [`super::header`]).
    pub(crate) tx_tags: Box<[Option<u64>; TAG_SLOTS]>,
    /// Tags recently received with a full header, by slot.
    pub(crate) rx_tags: Box<[Option<u64>; TAG_SLOTS]>,
    pub(crate) current: Current,
    pub(crate) assembly: Vec<u8>,
    pub(crate) completions: VecDeque<Completion>,
    pub(crate) polled: Completions,
    /// Emptied one-segment vectors of completed requests, reused by the next posts (a send
    /// and a receive re-posted per message would otherwise allocate one each).
    pub(crate) spare_segments: Vec<Vec<Segment>>,
    pub(crate) failed: Option<String>,
    pub(crate) peer_closed: bool,
    pub(crate) keepalive_to: RemoteRegion,
    pub(crate) keepalive_src: Option<MemoryRegion>,
    pub(crate) _keepalive_dst: MemoryRegion,
    pub(crate) keepalive_count: u64,
    /// When the last send was seen posted (by the clock pass after it: see `timers_to`).
    pub(crate) last_send: Instant,
    /// Send-queue work requests posted and not completed.
    pub(crate) sends_out: u32,
    /// Since when send work requests have been outstanding without any completing.
    pub(crate) waiting_since: Option<Instant>,
    /// A send was posted since the last clock pass.
    pub(crate) sent_since_clock: bool,
    /// A send completed since the last clock pass.
    pub(crate) acked_since_clock: bool,
    /// Decides on which progress passes the clock is read (about every 2 ms of spinning).
    pub(crate) pacer: crate::pacer::ClockPacer,
    pub(crate) recv_ranges: Vec<Range<usize>>,
    /// Where leases go when they end (see [`Lease`](super::Lease)).
    pub(crate) returns: Arc<Returns>,
    /// The lease lent under the method contract (`lend`): until it comes back `next` shows
    /// nothing.
    pub(crate) lent: Option<u64>,
    /// Leases out (not come back yet).
    pub(crate) leases_out: u32,
    /// Serial of the next lease.
    pub(crate) next_lease: u64,
    /// The shared pool the receive buffers come from, if any (else the queue pair's own
    /// ring).
    pub(crate) pool: Option<ReceivePool>,
    /// Registered buffers for one-sided operations, reused by size class.
    pub(crate) cache: RegCache,
    /// Bytes of the largest piece of a one-sided operation.
    pub(crate) max_piece: usize,
    /// One-sided operations in flight; declared after `qp`, so the queue pair is destroyed
    /// before their buffers go.
    pub(crate) rdma: Rdma,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("qp", &self.qp)
            .field("credits", &self.credits)
            .field("to_return", &self.to_return)
            .field("held", &self.held)
            .field("leases_out", &self.leases_out)
            .field("outgoing", &self.outgoing.len())
            .field("rx", &self.rx.len())
            .field("free_slots", &self.free_slots.len())
            .field("keepalives", &self.keepalive_count)
            .field("keepalive_out", &self.keepalive_src.is_none())
            .field("since_send", &self.last_send.elapsed())
            .field("sends_out", &self.sends_out)
            .field("completions", &self.completions.len())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

fn failure_reason(what: &str, status: Status) -> String {
    match status {
        Status::RetryExceeded => {
            "the peer stopped acknowledging (transport retry counter exceeded): it died or is \
             unreachable"
                .to_owned()
        }
        Status::RnrRetryExceeded => {
            "the peer had no receive buffer posted (RNR retry counter exceeded)".to_owned()
        }
        Status::WrFlush => "the connection was shut down".to_owned(),
        s => format!("{what} completed with error: {s}"),
    }
}

impl Endpoint {
    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Why the connection failed, once it has.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// SENDs this side may post now under the peer's credits.
    pub fn credits(&self) -> u32 {
        self.credits
    }

    /// Accepted descriptors not completed yet (their completions may wait in `poll`).
    pub fn outstanding(&self) -> usize {
        self.outgoing.len()
            + self.completions.len()
            + self.rdma.ops.values().filter(|o| o.is_open()).count()
    }

    /// The queue pair.
    pub fn queue_pair(&self) -> &QueuePair {
        &self.qp
    }

    /// The protection domain of the queue pair and of the endpoint's registered buffers.
    pub fn protection_domain(&self) -> &ProtectionDomain {
        &self._pd
    }

    /// Address ranges of this end's registered receive buffers and of its reassembly buffer:
    /// every slice `next` returns lies inside one of them.
    /// With a shared pool, the pool's buffers, and the copies of fragments taken out of it
    /// while it ran low.
    pub fn receive_buffers(&self) -> Vec<Range<usize>> {
        let mut v = match &self.pool {
            Some(pool) => pool.ranges().to_vec(),
            None => self.recv_ranges.clone(),
        };
        let a = self.assembly.as_ptr() as usize;
        v.push(a..a + self.assembly.len());
        for b in self.rx.iter().filter(|b| b.buf.is_none()) {
            let c = b.copy.as_ptr() as usize;
            v.push(c..c + b.copy.len());
        }
        v
    }

    /// Bytes registered for this endpoint's receives alone: its ring, or none with a shared
    /// pool (see [`ReceivePool::registered_bytes`]).
    pub fn own_receive_bytes(&self) -> usize {
        self.recv_ranges.iter().map(|r| r.len()).sum()
    }

    /// The shared receive pool, if the endpoint receives from one.
    pub fn pool(&self) -> Option<&ReceivePool> {
        self.pool.as_ref()
    }

    fn check_open(&self) -> Result<(), Error> {
        match &self.failed {
            Some(why) => Err(Error::PeerFailed(why.clone())),
            None => Ok(()),
        }
    }

    fn check_len(&self, len: usize) -> Result<(), Error> {
        if len > self.config.max_message {
            return Err(Error::TooLong {
                len,
                max: self.config.max_message,
            });
        }
        Ok(())
    }

    // ----- failure -------------------------------------------------------------------------

    /// Marks the connection failed, moves the queue pair to the error state (outstanding work
    /// requests flush) and completes every accepted message with the failure.
    fn fail(&mut self, reason: String) {
        if self.failed.is_some() {
            return;
        }
        let _ = self.qp.set_error();
        for m in self.outgoing.drain(..) {
            self.completions.push_back(Completion {
                id: m.id,
                op: Op::Send,
                result: Err(Error::PeerFailed(reason.clone())),
                buffer: None,
            });
        }
        self.fail_rdma(&reason);
        self.failed = Some(reason);
    }

    fn violation(&mut self, what: &str) {
        self.fail(format!("protocol violation by the peer: {what}"));
        self.return_held();
        self.held = 0;
        self.current = Current::Idle;
    }

    // ----- completions ---------------------------------------------------------------------

    /// Reaps work completions and acts on them, sends what waits, returns credits, sends a
    /// keepalive when due. Returns the work completions handled.
    fn progress(&mut self) -> usize {
        let mut handled = self.take_returns();
        loop {
            match self.cq.poll(&mut self.polled) {
                Ok(0) => break,
                Ok(n) => {
                    handled += n;
                    while let Some(c) = self.polled.pop() {
                        self.on_completion(c);
                    }
                }
                Err(e) => {
                    self.fail(format!("polling the completion queue failed: {e}"));
                    break;
                }
            }
        }
        self.pump();
        self.pump_rdma();
        self.maybe_return_credits();
        // The clock is read about every 2 ms of passes (and on every round of `wait`): timers
        // here are tenths of seconds, and spinning callers pass through very often.
        if let Some(now) = self.pacer.pass() {
            self.maybe_keepalive(now);
        }
        handled
    }

    fn on_completion(&mut self, mut c: wc::Completion) {
        if c.id == KEEPALIVE_ID {
            self.send_completed();
            self.keepalive_src = c.take_region();
            if !c.status.is_success() {
                self.fail(failure_reason("a keepalive write", c.status));
            }
            return;
        }
        if c.id & rdma::RDMA_BASE != 0 {
            self.rdma_completed(c.id, c.status);
            return;
        }
        if c.id & RECV_BASE != 0 {
            let idx = (c.id & 0xffff_ffff) as u32;
            let region = self.take_region(&mut c);
            if !c.status.is_success() {
                // A pool's buffer goes back to the pool (the other endpoints still use it).
                if let (Some(pool), Some(region)) = (&self.pool, region) {
                    let _ = pool.repost(idx, region);
                }
                self.fail(failure_reason("a receive", c.status));
                return;
            }
            match region {
                Some(region) => self.on_receive(idx, region, c.byte_len as usize, c.imm),
                None => self.fail("a receive completed without its buffer".to_owned()),
            }
            return;
        }
        let idx = c.id as u32;
        self.send_completed();
        if let Some(region) = self.take_region(&mut c) {
            self.free_slots.push((idx, region));
        }
        let owner = self.slot_owner.get_mut(idx as usize).and_then(Option::take);
        if !c.status.is_success() {
            self.fail(failure_reason("a send", c.status));
            return;
        }
        if let Some(seq) = owner {
            if let Some(m) = self.outgoing.iter_mut().find(|m| m.seq == seq) {
                m.unacked = m.unacked.saturating_sub(1);
            }
            while self
                .outgoing
                .front()
                .is_some_and(|m| m.posted_all() && m.unacked == 0)
            {
                if let Some(m) = self.outgoing.pop_front() {
                    self.completions.push_back(Completion {
                        id: m.id,
                        op: Op::Send,
                        result: Ok(m.len),
                        buffer: None,
                    });
                }
            }
        }
    }

    /// The region of a completed one-segment request, its emptied vector kept for a later
    /// post.
    #[inline]
    fn take_region(&mut self, c: &mut wc::Completion) -> Option<MemoryRegion> {
        let region = c.segments.pop().map(Segment::into_region);
        if c.segments.is_empty()
            && c.segments.capacity() != 0
            && self.spare_segments.len() < SPARE_SEGMENTS
        {
            self.spare_segments.push(std::mem::take(&mut c.segments));
        }
        region
    }

    /// A vector holding `segment` alone: a kept one (see [`Endpoint::take_region`]) when
    /// there is one.
    #[inline]
    pub(crate) fn one_segment(&mut self, segment: Segment) -> Vec<Segment> {
        match self.spare_segments.pop() {
            Some(mut v) => {
                v.push(segment);
                v
            }
            None => vec![segment],
        }
    }

    /// The next completion an earlier pass of `poll`, `next` or `wait` found, without making
    /// progress (no completion queue poll): for a caller that has just made a pass through
    /// `next` and wants its completions too.
    pub fn poll_found(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// Makes progress and returns the next completion, if any. Never blocks.
    pub fn poll(&mut self) -> Option<Completion> {
        if let Some(c) = self.completions.pop_front() {
            return Some(c);
        }
        self.progress();
        self.completions.pop_front()
    }

    // ----- waiting -------------------------------------------------------------------------

    /// Whether a completion or inbound message is ready (an inbound message only while no
    /// lease of the method contract holds the inbound), or the peer failed.
    fn ready(&self) -> bool {
        !self.completions.is_empty()
            || (self.lent.is_none() && (self.shown() || !self.rx.is_empty()))
            || self.failed.is_some()
    }

    /// Blocks until a completion or inbound message may be ready, something happened on the
    /// connection, the peer failed, or `timeout` passed. Polls the completion queue up to
    /// `config.spin` times, then sleeps on the completion channel (waking for keepalives).
    pub fn wait(&mut self, timeout: Duration) -> Result<(), Error> {
        if self.progress() > 0 || self.ready() {
            return Ok(());
        }
        for _ in 0..self.config.spin {
            if self.progress() > 0 || self.ready() {
                return Ok(());
            }
            std::hint::spin_loop();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            if let Err(e) = self.cq.req_notify(false) {
                self.fail(format!("arming the completion queue failed: {e}"));
                return Ok(());
            }
            // A completion that came before arming does not notify: look once more.
            if self.progress() > 0 || self.ready() {
                return Ok(());
            }
            let now = self.pacer.now();
            self.maybe_keepalive(now);
            let keepalive_due =
                (self.last_send + self.config.keepalive).saturating_duration_since(now);
            let slice = (deadline - now).min(keepalive_due.max(Duration::from_millis(1)));
            if let Err(e) = self.channel.wait(slice) {
                self.fail(format!("waiting on the completion channel failed: {e}"));
                return Ok(());
            }
            if self.progress() > 0 || self.ready() {
                return Ok(());
            }
        }
    }
}

impl Endpoint {
    /// Prepares a sleep that another thread may take without this endpoint (so without the
    /// lock its owner keeps it under): `None` when a completion or inbound message is ready
    /// (or the peer failed); else a [`Sleeper`] on the completion channel, the completion
    /// queue armed. Reads the channel's pending events first, and sends a keepalive that fell
    /// due, as `wait` does.
    pub fn sleeper(&mut self) -> Result<Option<Sleeper>, Error> {
        if self.progress() > 0 || self.ready() {
            return Ok(None);
        }
        // Events of earlier armings (their completions were just taken): read, so that the
        // channel is readable again only for a new one.
        while let Ok(Some(_)) = self.channel.get_event() {}
        if let Err(e) = self.cq.req_notify(false) {
            self.fail(format!("arming the completion queue failed: {e}"));
            return Ok(None);
        }
        // A completion that came before arming does not notify: look once more.
        if self.progress() > 0 || self.ready() {
            return Ok(None);
        }
        let now = self.pacer.now();
        self.maybe_keepalive(now);
        let due = (self.last_send + self.config.keepalive).saturating_duration_since(now);
        Ok(Some(Sleeper::new(
            self.channel.clone(),
            due.max(Duration::from_millis(1)),
        )))
    }
}

impl Endpoint {
    /// Drops the fragments held; a shared pool's buffers go back to the pool.
    fn return_held(&mut self) {
        for b in std::mem::take(&mut self.rx) {
            if let (Some(pool), Some((idx, region))) = (&self.pool, b.buf) {
                let _ = pool.repost(idx, region);
            }
        }
    }

    /// At the end of an endpoint with a shared pool: moves the queue pair to the error state
    /// and hands every pool buffer it took (completed, or still in the completion queue) back
    /// to the pool, bounded in time.
    fn return_to_pool(&mut self) {
        let Some(pool) = self.pool.clone() else {
            return;
        };
        self.current = Current::Idle;
        self.take_returns();
        self.return_held();
        let _ = self.qp.set_error();
        let deadline = Instant::now() + Duration::from_millis(200);
        let mut quiet_since = Instant::now();
        while Instant::now() < deadline && quiet_since.elapsed() < Duration::from_millis(20) {
            match self.cq.poll(&mut self.polled) {
                Ok(0) => std::thread::yield_now(),
                Ok(_) => {
                    quiet_since = Instant::now();
                    while let Some(mut c) = self.polled.pop() {
                        if c.id & RECV_BASE != 0
                            && c.id & rdma::RDMA_BASE == 0
                            && c.id != KEEPALIVE_ID
                        {
                            if let Some(region) = c.take_region() {
                                let _ = pool.repost((c.id & 0xffff_ffff) as u32, region);
                            }
                        }
                    }
                }
                Err(_) => break,
            }
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Accepted messages still go out (bounded), then a close message tells the peer at
        // once; the queue pair's own drop flushes whatever is left before its memory goes.
        let deadline = Instant::now() + Duration::from_millis(500);
        while self.failed.is_none() && !self.outgoing.is_empty() && Instant::now() < deadline {
            let _ = self.wait(Duration::from_millis(10));
        }
        if self.failed.is_none() && self.send_control(KIND_CLOSE) {
            let deadline = Instant::now() + Duration::from_millis(200);
            let slots = self.slot_owner.len();
            while self.failed.is_none()
                && self.free_slots.len() < slots
                && Instant::now() < deadline
            {
                let _ = self.wait(Duration::from_millis(10));
            }
        }
        self.return_to_pool();
    }
}
