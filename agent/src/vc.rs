//! Virtual connections (VCs): the agent's connection to one peer rank over one method.
//!
//! A VC owns its method connection (or is the self loop, for the own rank) and an ordered
//! queue of outgoing messages. The agent's VC operations, as implemented here:
//!
//! - **write**: [`Vc::write`] hands one message to the method now when nothing is queued
//!   before it, else appends it to the queue; [`Vc::flush`] posts queued messages in order
//!   whenever the method has resources again. Messages leave a VC in the order they were
//!   written, whatever the method's back-pressure.
//! - **reserve_write / set_marker**: [`Vc::reserve_write`] holds a place in the outgoing
//!   order now and returns a marker; [`Vc::set_marker`] binds a message to that place later.
//!   Nothing written after a reserved place leaves before the place is bound, so markers bound
//!   out of order still go out in reservation order.
//! - **next / consume**: inbound messages are borrowed in place from the method's receive
//!   memory ([`crate::method`]) by the progress engine, which matches them and consumes them
//!   whole; the bytes of an eager message are copied once, into the receive buffer (or the
//!   unexpected queue). Messages of the VC's byte stream (`Agent::write`) are left in place
//!   for `Agent::next`, which shows them to the caller without a copy and consumes what the
//!   caller took; until they are consumed, nothing behind them is read.
//! - **reserve_read / read / readv, get_buffer / write_buffer**: reserved reads wait in the
//!   VC's read queue and take stream bytes in reservation order; method buffers come from
//!   the VC's pool and go back to it (see [`crate::stream`]).
//! - **locking**: the agent design's `Lock_read`/`Lock_write` are the agent's state mutex: every VC
//!   operation runs with it held, so a block of writes by one thread is never interleaved
//!   with another thread's (callers that need several writes adjacent make them under one
//!   call).
//! - **failure**: a method error marks the VC failed with the reason; queued messages are
//!   handed back so their requests can be failed, and later writes fail at once.

pub(crate) mod buffers;
pub(crate) mod readers;

use std::collections::VecDeque;

use viaduct_fallback::sendbuf::SendBuf;

use crate::error::PeerCause;
use crate::method::{Method, MethodError};
use crate::proto::Failure;
use buffers::BufferPool;
use readers::ReadQueue;

/// One message waiting to be posted: descriptor id, method tag, payload.
#[derive(Debug)]
pub(crate) struct Outbound {
    pub(crate) id: u64,
    pub(crate) tag: u64,
    pub(crate) buf: SendBuf,
}

#[derive(Debug)]
enum Slot {
    Ready(Outbound),
    Reserved(u64),
}

/// What carries a VC's traffic.
#[derive(Debug)]
pub(crate) enum Link {
    /// The own rank: messages are matched directly.
    SelfLoop,
    /// A peer reached over a method.
    Remote(Method),
    /// The connection was closed at finalize.
    Closed,
}

/// The agent's connection to one peer.
#[derive(Debug)]
pub(crate) struct Vc {
    pub(crate) peer: u32,
    pub(crate) link: Link,
    queue: VecDeque<Slot>,
    /// Why the VC failed, once it did.
    pub(crate) failed: Option<String>,
    /// The error behind [`Vc::failed`], when an error failed the VC.
    failed_source: Option<PeerCause>,
    /// Set once `next` reported the failure: nothing more will arrive.
    pub(crate) drained: bool,
    /// The next inbound message is stream bytes waiting for `Agent::next`: the progress engine
    /// reads nothing more from this VC until they are consumed.
    pub(crate) stream_at_head: bool,
    /// The head message is lent to an in-place receive (`Agent::recv_in_place`): the progress
    /// engine reads nothing more from this VC until the `Received` hands it back.
    pub(crate) held: bool,
    /// Reserved reads of the inbound stream, oldest first (`Agent::reserve_read`).
    pub(crate) readers: ReadQueue,
    /// Method buffers of this VC: the free pool and those the method holds.
    pub(crate) buffers: BufferPool,
}

impl Vc {
    pub(crate) fn new(peer: u32, link: Link) -> Vc {
        Vc {
            peer,
            link,
            queue: VecDeque::new(),
            failed: None,
            failed_source: None,
            drained: false,
            stream_at_head: false,
            held: false,
            readers: ReadQueue::default(),
            buffers: BufferPool::default(),
        }
    }

    /// Writes one message, keeping the VC's order (posts at once when nothing waits before it).
    pub(crate) fn write(&mut self, out: Outbound) -> Result<(), MethodError> {
        if self.queue.is_empty() {
            if let Link::Remote(m) = &mut self.link {
                match m.post(out.id, out.tag, out.buf)? {
                    None => return Ok(()),
                    Some(buf) => {
                        self.queue.push_back(Slot::Ready(Outbound { buf, ..out }));
                        return Ok(());
                    }
                }
            }
        }
        self.queue.push_back(Slot::Ready(out));
        Ok(())
    }

    /// Holds a place in the outgoing order for a message bound later with
    /// [`Vc::set_marker`].
    pub(crate) fn reserve_write(&mut self, marker: u64) {
        self.queue.push_back(Slot::Reserved(marker));
    }

    /// Binds `out` to the place held by `marker`; gives it back when no such place is held
    /// (the VC failed, or the marker was bound already).
    pub(crate) fn set_marker(&mut self, marker: u64, out: Outbound) -> Result<(), Outbound> {
        for slot in self.queue.iter_mut() {
            if matches!(slot, Slot::Reserved(m) if *m == marker) {
                *slot = Slot::Ready(out);
                return Ok(());
            }
        }
        Err(out)
    }

    /// Posts queued messages in order until the method has no resources or a reserved place
    /// is reached; returns how many were posted.
    pub(crate) fn flush(&mut self) -> Result<usize, MethodError> {
        let Link::Remote(m) = &mut self.link else {
            return Ok(0);
        };
        let mut posted = 0;
        while let Some(Slot::Ready(_)) = self.queue.front() {
            let Some(Slot::Ready(out)) = self.queue.pop_front() else {
                break;
            };
            match m.post(out.id, out.tag, out.buf)? {
                None => posted += 1,
                Some(buf) => {
                    self.queue.push_front(Slot::Ready(Outbound { buf, ..out }));
                    break;
                }
            }
        }
        Ok(posted)
    }

    /// Why the VC failed, with the error behind it; `None` while it works.
    pub(crate) fn failure(&self) -> Option<Failure> {
        self.failed.as_ref().map(|reason| Failure {
            reason: reason.clone(),
            source: self.failed_source.clone(),
        })
    }

    /// Whether messages wait in the queue.
    pub(crate) fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Marks the VC failed, fails its reserved reads, and hands back every queued message
    /// (their requests must fail).
    pub(crate) fn fail(&mut self, failure: Failure) -> Vec<Outbound> {
        if self.failed.is_none() {
            self.failed = Some(failure.reason);
            self.failed_source = failure.source;
        }
        let why = self
            .failure()
            .unwrap_or_else(|| Failure::from(String::new()));
        let peer = self.peer;
        self.readers.fail_all(|| why.error(peer));
        self.buffers.clear_in_method();
        self.queue
            .drain(..)
            .filter_map(|s| match s {
                Slot::Ready(o) => Some(o),
                Slot::Reserved(_) => None,
            })
            .collect()
    }
}
