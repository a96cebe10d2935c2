//! Buffers of a VC's method: `get_buffer`, `release_buffer`, `write_buffer` and their `v`
//! forms (the agent operations `Get_buffer`, `Release_buffer`, `Get_bufferv`, `Release_bufferv`).
//!
//! [`Agent::get_buffer`] hands out a [`MethodBuffer`] for the VC of one peer: memory from that
//! VC's pool, which the method takes as it is when the buffer is written. The caller fills it
//! (by hand, or with [`Agent::read`] from another VC: a `MethodBuffer` is a read target) and
//! gives it to [`Agent::write_buffer`], which posts that very allocation as the next stream
//! message: the agent makes no copy. What each method does with it:
//!
//! - **TCP**: the kernel reads the bytes out of the buffer (`sendmsg` gathers the method's
//!   header and the buffer); no copy in user space.
//! - **shared memory**: a message longer than the method's eager limit is read by the peer
//!   straight out of the buffer (`process_vm_readv`), or, where that is not permitted,
//!   copied in ring-sized pieces; a shorter one is copied once into the ring cell, the only
//!   memory the peer can see without a system call.
//! - **verbs**: the bytes are copied into registered send slots.
//!
//! The method holds the buffer until its completion and hands it back then:
//! [`BufferWrite::wait_timeout`] returns that same allocation to the caller (its address is
//! the one the caller filled, which is what tests check), and a [`BufferWrite`] dropped
//! before that leaves the buffer to go back to the VC's pool. [`Agent::release_buffer`] puts
//! an unused (or returned) buffer back into the pool, where the next `get_buffer` for that VC
//! finds it. The verbs method keeps no buffer after its copy, so over verbs the returned
//! buffer is the agent's own.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::agent::Agent;
use crate::engine::State;
use crate::error::AgentError;
use crate::request::Request;
use crate::vc::buffers::Slot;

/// A buffer of the method of one VC (see the [module docs](self)): fill it, then write it with
/// [`Agent::write_buffer`] without a copy, or give it back with [`Agent::release_buffer`].
/// Dereferences to its bytes.
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let peer = 1 - agent.rank(); // a job of two ranks
/// let mut buf = agent.get_buffer(peer, 5)?; // memory of the peer's method
/// buf.copy_from_slice(b"hello");
/// let buf = agent.write_buffer(buf)?.wait_timeout(std::time::Duration::from_secs(5))?;
/// agent.release_buffer(buf);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct MethodBuffer {
    peer: u32,
    data: Vec<u8>,
}

impl MethodBuffer {
    /// The peer whose VC the buffer belongs to.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let buf = agent.get_buffer(peer, 64)?;
    /// assert_eq!(buf.peer(), peer);
    /// agent.release_buffer(buf);
    /// # Ok(())
    /// # }
    /// ```
    pub fn peer(&self) -> u32 {
        self.peer
    }

    /// Where its bytes start (for checking that a method sent from this memory).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let buf = agent.get_buffer(peer, 64)?;
    /// println!("method memory at {:p}", buf.as_ptr());
    /// agent.release_buffer(buf);
    /// # Ok(())
    /// # }
    /// ```
    pub fn as_ptr(&self) -> *const u8 {
        self.data.as_ptr()
    }

    /// Shortens the buffer to `len` bytes (what a write of it sends); no effect when `len`
    /// is not shorter.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let mut buf = agent.get_buffer(peer, 4096)?;
    /// let n = 100; // the bytes actually filled
    /// buf[..n].fill(1);
    /// buf.truncate(n); // the write sends these only
    /// agent.write_buffer(buf)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn truncate(&mut self, len: usize) {
        self.data.truncate(len);
    }
}

impl Deref for MethodBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl DerefMut for MethodBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl AsRef<[u8]> for MethodBuffer {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl AsMut<[u8]> for MethodBuffer {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

/// A write of a [`MethodBuffer`] started by [`Agent::write_buffer`]: its request, and the
/// buffer once the method handed it back.
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let peer = 1 - agent.rank(); // a job of two ranks
/// let buf = agent.get_buffer(peer, 8)?;
/// let mut write = agent.write_buffer(buf)?;
/// write.request().wait()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "dropping it leaves the buffer to the VC's pool"]
pub struct BufferWrite {
    request: Request,
    slot: Slot,
    agent: Agent,
    peer: u32,
}

impl BufferWrite {
    /// The write's request (complete when the method is done with the buffer).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let mut write = agent.write_buffer(agent.get_buffer(peer, 8)?)?;
    /// let sent = write.request().test()?.is_some();
    /// # Ok(())
    /// # }
    /// ```
    pub fn request(&mut self) -> &mut Request {
        &mut self.request
    }

    /// Waits (at most `timeout`) until the method completed the write and gives back the
    /// buffer it sent from: the same allocation that was filled. Ends with
    /// [`AgentError::PeerFailed`] (inside [`AgentError::Request`]) when the peer fails first,
    /// with [`AgentError::Timeout`] after `timeout` (the buffer then goes back to the VC's
    /// pool when the method is done), and with [`AgentError::BufferNotReturned`] when the
    /// method keeps no buffer (verbs copies and frees it).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let write = agent.write_buffer(agent.get_buffer(peer, 8)?)?;
    /// let buf = write.wait_timeout(std::time::Duration::from_secs(5))?; // back for reuse
    /// agent.release_buffer(buf);
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<MethodBuffer, AgentError> {
        let deadline = Instant::now() + timeout;
        if self
            .request
            .wait_timeout(deadline.saturating_duration_since(Instant::now()))?
            .is_none()
        {
            return Err(AgentError::Timeout {
                what: "method buffer write",
                seconds: timeout.as_secs(),
            });
        }
        let data = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        match data {
            Some(data) => Ok(MethodBuffer {
                peer: self.peer,
                data,
            }),
            None => Err(AgentError::BufferNotReturned { peer: self.peer }),
        }
    }
}

impl Drop for BufferWrite {
    fn drop(&mut self) {
        let mut st = self.agent.shared.lock();
        let back = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let (Some(buf), Some(vc)) = (back, st.vcs.get_mut(self.peer as usize)) {
            vc.buffers.put(buf);
        }
        // Dropping `slot` under the lock: a completion after this sees the count fall to one
        // and keeps the buffer in the pool.
        self.slot = Arc::new(Mutex::new(None));
    }
}

impl Agent {
    fn check_stream_len(&self, peer: u32, len: usize) -> Result<(), AgentError> {
        self.check_rank(peer)?;
        if peer == self.shared.rank {
            return Err(AgentError::SelfStream);
        }
        let max = self.shared.config.rendezvous_chunk;
        if len > max {
            return Err(AgentError::StreamTooLong { len, max });
        }
        Ok(())
    }

    /// A method buffer of `len` bytes for the VC of `peer` (the agent operation `Get_buffer`), from
    /// that VC's pool (allocated when the pool has none large enough; new bytes are zero). At
    /// most `Config::rendezvous_chunk` bytes, the longest stream message. Does not block.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let mut buf = agent.get_buffer(peer, 3)?;
    /// buf.copy_from_slice(b"abc");
    /// agent.write_buffer(buf)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_buffer(&self, peer: u32, len: usize) -> Result<MethodBuffer, AgentError> {
        self.check_stream_len(peer, len)?;
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        let data = st.vcs[peer as usize].buffers.take(len);
        Ok(MethodBuffer { peer, data })
    }

    /// Method buffers holding `len` bytes in all for the VC of `peer` (`Get_bufferv`), each
    /// at most `Config::rendezvous_chunk` bytes; one empty buffer for `len` = 0.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let bufs = agent.get_bufferv(peer, 1 << 20)?; // as many as 1 MiB needs
    /// agent.write_bufferv(bufs)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_bufferv(&self, peer: u32, len: usize) -> Result<Vec<MethodBuffer>, AgentError> {
        let piece = self.shared.config.rendezvous_chunk;
        let mut out = Vec::new();
        let mut left = len;
        loop {
            let n = left.min(piece);
            out.push(self.get_buffer(peer, n)?);
            left -= n;
            if left == 0 {
                return Ok(out);
            }
        }
    }

    /// Gives a method buffer back to its VC's pool unused (the agent operation `Release_buffer`).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let buf = agent.get_buffer(peer, 64)?;
    /// agent.release_buffer(buf); // not needed after all
    /// # Ok(())
    /// # }
    /// ```
    pub fn release_buffer(&self, buf: MethodBuffer) {
        let mut st = self.shared.lock();
        if let Some(vc) = st.vcs.get_mut(buf.peer as usize) {
            vc.buffers.put(buf.data);
        }
    }

    /// Gives several method buffers back to their pools (`Release_bufferv`).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let bufs = agent.get_bufferv(peer, 10_000)?;
    /// agent.release_bufferv(bufs);
    /// # Ok(())
    /// # }
    /// ```
    pub fn release_bufferv(&self, bufs: Vec<MethodBuffer>) {
        for b in bufs {
            self.release_buffer(b);
        }
    }

    /// Writes a method buffer as the next message of the byte stream to its peer, without a
    /// copy: the method is handed this allocation (see the [module docs](self) for what each
    /// method does with it) and hands it back on completion, through the returned
    /// [`BufferWrite`]. Ordered with every other message to the peer as [`Agent::write`] is.
    /// Does not block.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let mut buf = agent.get_buffer(peer, 2)?;
    /// buf.copy_from_slice(b"ok");
    /// let write = agent.write_buffer(buf)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_buffer(&self, buf: MethodBuffer) -> Result<BufferWrite, AgentError> {
        let peer = buf.peer;
        self.check_stream_len(peer, buf.data.len())?;
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        Ok(self.post_buffer(&mut st, buf))
    }

    /// Writes several method buffers of one VC as consecutive stream messages (no other
    /// message to the peer comes between them), each without a copy (see
    /// [`Agent::write_buffer`]); one [`BufferWrite`] per buffer, in order.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let peer = 1 - agent.rank(); // a job of two ranks
    /// let bufs = agent.get_bufferv(peer, 100_000)?;
    /// let writes = agent.write_bufferv(bufs)?; // consecutive, not interleaved
    /// for w in writes {
    ///     agent.release_buffer(w.wait_timeout(std::time::Duration::from_secs(5))?);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_bufferv(&self, bufs: Vec<MethodBuffer>) -> Result<Vec<BufferWrite>, AgentError> {
        let Some(peer) = bufs.first().map(|b| b.peer) else {
            return Ok(Vec::new());
        };
        if let Some(other) = bufs.iter().find(|b| b.peer != peer) {
            return Err(AgentError::MixedBuffers {
                first: peer,
                other: other.peer,
            });
        }
        for b in &bufs {
            self.check_stream_len(peer, b.data.len())?;
        }
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        let writes = bufs
            .into_iter()
            .map(|buf| self.post_buffer(&mut st, buf))
            .collect();
        drop(st);
        Ok(writes)
    }

    /// Posts one method buffer on its VC (the agent's lock held by the caller).
    fn post_buffer(&self, st: &mut State, buf: MethodBuffer) -> BufferWrite {
        let peer = buf.peer;
        let (request, counter) = Request::message_driven(1, self.shared.driver.clone());
        let slot: Slot = Arc::new(Mutex::new(None));
        if let Some(failure) = st.vcs[peer as usize].failure() {
            let _ = counter.fail_car(failure.error(peer));
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(buf.data);
        } else {
            let out = st.book.stream_send(peer, buf.data, counter);
            st.vcs[peer as usize]
                .buffers
                .hold(out.id, Arc::clone(&slot));
            st.write(peer, out);
        }
        BufferWrite {
            request,
            slot,
            agent: self.clone(),
            peer,
        }
    }
}
