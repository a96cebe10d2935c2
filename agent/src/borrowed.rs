//! Blocking calls over the caller's own memory: a long `recv` lands straight in the caller's
//! slice and a long `send` is read straight from it, without a copy through a buffer of the
//! agent's.
//!
//! A blocking call waits until its request completed, so the slice it borrows outlives
//! everything the request does with it; [`viaduct_fallback::lend`] turns the borrow into a
//! handle the request's machinery may hold, and the call takes every copy of that handle back
//! before it returns: a receive's memory by [`RecvBuffer::detach_as`] (after which bytes of a
//! message still arriving go nowhere), a send's data by waiting for the protocol to drop its
//! pieces. Measured over shared memory (`scripts/bench-shm-sweep`, agent ping-pong): each of
//! the two copies cost about a fifth of the half round trip from 64 KiB up.

use std::sync::Arc;
use std::time::{Duration, Instant};

use viaduct_fallback::lend::{LentMut, lend, lend_mut};
use viaduct_fallback::sendbuf::SharedBytes;

use crate::agent::Agent;
use crate::error::AgentError;
use crate::matching::{Source, TagMatch};
use crate::recv_buffer::RecvBuffer;
use crate::request::{Request, Status};

/// Receives of at least this capacity land in the caller's slice (smaller ones are copied
/// out of a buffer of the agent's, which the receive fast path avoids anyway).
pub(crate) const IN_PLACE_RECV: usize = 16 << 10;

/// How long a send's data may stay held after the send completed before a warning says so
/// (it never should: the pieces go with the completions that end the request).
const SETTLE_WARNING: Duration = Duration::from_secs(10);

/// Takes the caller's memory back from a receive buffer, also when the wait unwinds.
struct TakeBack<'a>(&'a RecvBuffer);

impl Drop for TakeBack<'_> {
    fn drop(&mut self) {
        drop(self.0.detach_as::<LentMut>());
    }
}

impl Agent {
    /// Posts a receive into `buf` with `post` and waits for it, the message landing in `buf`
    /// itself.
    pub(crate) fn recv_in_caller(
        &self,
        buf: &mut [u8],
        post: impl FnOnce(RecvBuffer) -> Result<Request, AgentError>,
    ) -> Result<Status, AgentError> {
        lend_mut(buf, |mem| {
            let data = RecvBuffer::caller_of(mem);
            let _back = TakeBack(&data);
            Ok(post(data.clone())?.wait()?)
        })
    }

    /// Posts a send of `data` with `post` and waits for it, the protocol reading `data` in
    /// place; returns once the protocol dropped every piece of it.
    pub(crate) fn send_from_caller(
        &self,
        data: &[u8],
        post: impl FnOnce(SharedBytes) -> Result<Request, AgentError>,
    ) -> Result<(), AgentError> {
        lend(data, |lent| {
            let bytes: SharedBytes = Arc::new(lent);
            let result = post(bytes.clone()).and_then(|mut r| Ok(r.wait().map(drop)?));
            self.settle(&bytes);
            result
        })
    }

    /// Sends `data` to world rank `to` and receives from world rank `from` into `into` at
    /// once, with tag `tag` on this agent's context, and waits for both. Returns the receive's
    /// status, or the first error of the two; a send that cannot start is returned at once,
    /// with nothing posted. The send goes first: its announcement then crosses the partner's
    /// (measured, two-rank allgather of 1 MiB over shared memory: 139-146 us, against
    /// 189-197 us with the receive posted first).
    pub(crate) fn exchange_shared(
        &self,
        to: u32,
        tag: u32,
        data: SharedBytes,
        from: u32,
        into: &RecvBuffer,
    ) -> Result<Status, AgentError> {
        let mut send = self.isend_shared(to, tag, data)?;
        let got = self
            .irecv_into(into.clone(), Source::Rank(from), TagMatch::Tag(tag))
            .and_then(|mut recv| Ok(recv.wait()?));
        // The started send is waited for, also after an error.
        let sent = send.wait();
        let st = got?;
        sent?;
        Ok(st)
    }

    /// [`Agent::exchange_shared`] of the caller's `data`, read in place; returns once the
    /// protocol dropped every piece of it.
    pub(crate) fn exchange_from_caller(
        &self,
        to: u32,
        tag: u32,
        data: &[u8],
        from: u32,
        into: &RecvBuffer,
    ) -> Result<Status, AgentError> {
        lend(data, |lent| {
            let bytes: SharedBytes = Arc::new(lent);
            let result = self.exchange_shared(to, tag, bytes.clone(), from, into);
            self.settle(&bytes);
            result
        })
    }

    /// [`Agent::exchange_from_caller`] receiving into the caller's `buf` in place.
    pub(crate) fn exchange_in_caller(
        &self,
        to: u32,
        tag: u32,
        data: &[u8],
        from: u32,
        buf: &mut [u8],
    ) -> Result<Status, AgentError> {
        lend_mut(buf, |mem| {
            let into = RecvBuffer::caller_of(mem);
            let _back = TakeBack(&into);
            self.exchange_from_caller(to, tag, data, from, &into)
        })
    }

    /// Waits until `bytes` is held here only: a completed send's pieces are dropped by the
    /// pass that reaped their completion, a failed one's when its VC's queues are emptied.
    fn settle(&self, bytes: &SharedBytes) {
        let start = Instant::now();
        let mut warned = false;
        while Arc::strong_count(bytes) > 1 {
            self.make_progress();
            if !warned && start.elapsed() > SETTLE_WARNING {
                warned = true;
                tracing::warn!(
                    "viaduct: a completed blocking send's data is still held by the agent after \
                     {SETTLE_WARNING:?}; the call returns once it is dropped"
                );
            }
            if start.elapsed() > Duration::from_millis(1) {
                std::thread::sleep(Duration::from_micros(100));
            } else {
                std::thread::yield_now();
            }
        }
    }
}
