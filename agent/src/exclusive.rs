//! [`Exclusive`]: one thread holds the agent across its blocking sends and receives.
//!
//! Every call through an [`Agent`] handle takes the agent's mutex and gives it back before it
//! returns: two locked instructions per call, each of which waits until every earlier load of
//! the thread has completed. In a ping-pong this puts a wait between the copy of a message out
//! of the method's memory and the copy of the reply into it, which without the lock overlap
//! (see `docs/perf/agent.md`). A rank that drives the agent from one thread at a time, the
//! usual MPI program (`MPI_THREAD_FUNNELED` or `MPI_THREAD_SERIALIZED`), can instead hold the
//! agent for a stretch of calls: [`Agent::exclusive`] starts a session whose
//! [`Exclusive::send`] and [`Exclusive::recv`] keep the lock between calls.
//!
//! # Contract
//!
//! - Same results as [`Agent::send`] and [`Agent::recv`] (matching, order, errors, truncation,
//!   failed peers): the session runs the same fast paths, only without giving the lock back
//!   in between; anything the fast paths do not take (a rendezvous size, a message that has
//!   not come within the spin, a queued VC) releases the lock and takes the general path of
//!   the handle, which may sleep in the methods.
//! - While the session holds the lock, **other threads' calls into the agent wait** (and the
//!   handler thread's progress with them) until the session releases it:
//!   [`Exclusive::release`], a general path, or the end of the session (drop). A session is
//!   for one thread that owns the agent's traffic for a while, not for sharing.
//! - The session stays on the thread that made it (it is not `Send`). A call through any
//!   `Agent` handle on that thread while the session holds the lock would wait for itself
//!   forever; it panics instead, with a message that says so. Release the session first.

use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use crate::agent::{Agent, thread_token};
use crate::engine::State;
use crate::error::AgentError;
use crate::matching::{Source, TagMatch};
use crate::request::Status;

/// A session in which one thread holds the agent between its blocking sends and receives
/// (see the [module docs](self) for what it saves and what it costs other threads).
pub struct Exclusive<'a> {
    agent: &'a Agent,
    held: Option<MutexGuard<'a, State>>,
}

impl std::fmt::Debug for Exclusive<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exclusive")
            .field("agent", self.agent)
            .field("held", &self.held.is_some())
            .finish()
    }
}

impl Agent {
    /// Starts a session in which this thread keeps the agent locked between its blocking
    /// sends and receives ([`Exclusive`]). The lock is taken at the session's first call, not
    /// here.
    pub fn exclusive(&self) -> Exclusive<'_> {
        Exclusive {
            agent: self,
            held: None,
        }
    }
}

impl<'a> Exclusive<'a> {
    /// The agent's lock, taken now if the session does not hold it.
    fn hold(&mut self) -> &mut MutexGuard<'a, State> {
        let agent = self.agent;
        self.held.get_or_insert_with(|| {
            let guard = agent.shared.lock();
            agent.shared.holder.store(thread_token(), Ordering::Relaxed);
            guard
        })
    }

    /// Gives the agent's lock back, so that other threads (and `Agent` handles on this
    /// thread) may use the agent; the next call of the session takes it again.
    pub fn release(&mut self) {
        if self.held.is_some() {
            self.agent.shared.holder.store(0, Ordering::Relaxed);
            self.held = None;
        }
    }

    /// Whether the session holds the agent's lock now.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// [`Agent::send`] (`MPI_Send`) within the session.
    pub fn send(&mut self, dest: u32, tag: u32, data: &[u8]) -> Result<(), AgentError> {
        if self.agent.fast_target(dest, tag) {
            let context = self.agent.context;
            if self.hold().send_fast(context, dest, tag, data) {
                return Ok(());
            }
        }
        self.release();
        self.agent.send_general(dest, tag, data)
    }

    /// [`Agent::recv`] (`MPI_Recv`) within the session.
    pub fn recv(
        &mut self,
        buf: &mut [u8],
        source: Source,
        tag: TagMatch,
    ) -> Result<Status, AgentError> {
        self.agent.check_source(source)?;
        self.hold();
        if let Some(status) = self
            .agent
            .recv_turns(&mut self.held, true, buf, source, tag)
        {
            return Ok(status);
        }
        self.release();
        self.agent.recv_general(buf, source, tag, None)
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        self.release();
    }
}
