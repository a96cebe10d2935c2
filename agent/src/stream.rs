//! The byte stream of a VC: `write` on one side, `next`/`consume` in place on the other
//! (seed 002's `Write`, `Next`, `Consume`).
//!
//! Beside tagged messages, each VC to a peer carries a plain ordered stream of messages, with
//! no envelope and no matching: [`Agent::write`] sends one; [`Agent::next`] shows the unconsumed
//! bytes of the oldest one **in place**, inside the method's receive memory (a shared-memory
//! ring cell, an io_uring receive buffer; a method's reassembly buffer for a message that
//! spans its receive buffers), to a closure that returns how many bytes it consumed. The
//! message is released to the method once consumed whole.
//!
//! The closure runs with the agent's mutex held (the seed's `Lock_read`): other threads'
//! calls wait until it returns, and tagged traffic behind an unconsumed stream message on the
//! same VC waits until it is consumed. The self loop has no stream.

use std::time::{Duration, Instant};

use crate::agent::Agent;
use crate::engine::peer_failed;
use crate::error::AgentError;
use crate::request::Request;
use crate::vc::Link;
use crate::wire::{self, STREAM};

impl Agent {
    /// Sends `data` (at most `Config::rendezvous_chunk` bytes) as the next message of the
    /// byte stream to `peer` (`Write` of seed 002), without copying it; the request completes
    /// when the method has it. Stream and tagged messages to one peer
    /// leave in the order they were posted.
    pub fn write(&self, peer: u32, data: Vec<u8>) -> Result<Request, AgentError> {
        self.check_rank(peer)?;
        if peer == self.shared.rank {
            return Err(AgentError::SelfStream);
        }
        let max = self.shared.config.rendezvous_chunk;
        if data.len() > max {
            return Err(AgentError::StreamTooLong {
                len: data.len(),
                max,
            });
        }
        let (request, counter) = Request::message_driven(1, self.shared.driver.clone());
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        if let Some(reason) = &st.vcs[peer as usize].failed {
            let _ = counter.fail_car(peer_failed(peer, reason));
            return Ok(request);
        }
        let out = st.book.stream_send(peer, data, counter);
        st.write(peer, out);
        Ok(request)
    }

    /// Shows the unconsumed bytes of the oldest stream message from `peer` in place to `f`,
    /// which returns how many of them it consumed (`Next` + `Consume` of seed 002; more than
    /// shown counts as all). `Ok(None)` when no stream message is there after one progress
    /// pass; `Ok(Some(n))` with the bytes consumed otherwise.
    pub fn next<F>(&self, peer: u32, f: F) -> Result<Option<usize>, AgentError>
    where
        F: FnOnce(&[u8]) -> usize,
    {
        self.check_rank(peer)?;
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        if !st.vcs[peer as usize].stream_at_head {
            st.progress();
        }
        let vc = &mut st.vcs[peer as usize];
        if !vc.stream_at_head {
            return match (&vc.failed, vc.drained) {
                (Some(reason), true) => Err(peer_failed(peer, reason)),
                _ => Ok(None),
            };
        }
        let Link::Remote(m) = &mut vc.link else {
            return Err(AgentError::SelfStream);
        };
        let (n, whole) = match m.next() {
            Ok(Some((tag, data))) if wire::split_tag(tag).0 == STREAM => {
                let n = f(data).min(data.len());
                (n, n == data.len())
            }
            Ok(_) => return Ok(None),
            Err(e) => return Err(peer_failed(peer, &e.to_string())),
        };
        if let Err(e) = m.consume(n) {
            let reason = e.to_string();
            st.fail_vc(peer, reason.clone());
            return Err(peer_failed(peer, &reason));
        }
        if whole {
            st.vcs[peer as usize].stream_at_head = false;
        }
        Ok(Some(n))
    }

    /// Like [`Agent::next`], making progress (and sleeping in the methods) up to `timeout`
    /// until a stream message from `peer` is there; `Ok(None)` at the timeout.
    pub fn next_timeout<F>(
        &self,
        peer: u32,
        timeout: Duration,
        f: F,
    ) -> Result<Option<usize>, AgentError>
    where
        F: FnOnce(&[u8]) -> usize,
    {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = {
                let st = self.shared.lock();
                st.vcs.get(peer as usize).is_some_and(|v| v.stream_at_head)
            };
            if ready || Instant::now() >= deadline {
                return self.next(peer, f);
            }
            self.make_progress_blocking(Duration::from_millis(1));
        }
    }
}
