//! Completion queues: polled in batches into a reusable [`Completions`] array.
//!
//! A completion queue knows the queue pairs that complete into it, so each polled work
//! completion is matched with the request that was posted (and the memory it owned), and
//! unsignalled send requests are completed when a later signalled one of the same queue pair
//! completes.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdma_sys as sys;

use crate::channel::CompletionChannel;
use crate::device::{Context, ContextInner};
use crate::error::{Error, Result, last_os_error};
use crate::qp::QpShared;
use crate::wc::Completion;

pub(crate) struct CqInner {
    cq: *mut sys::ibv_cq,
    capacity: u32,
    /// Queue pairs completing here, by QP number (a short list: a linear scan beats hashing).
    /// A queue pair removes itself before it is destroyed.
    pub(crate) registry: Mutex<Vec<(u32, Arc<QpShared>)>>,
    channel: Option<CompletionChannel>,
    _ctx: Arc<ContextInner>,
}

// SAFETY: CQ handles may be used from any thread; ibv_poll_cq and ibv_req_notify_cq are thread
// safe in rdma-core providers, and the registry is behind a mutex.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl CqInner {
    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_cq {
        self.cq
    }
}

impl Drop for CqInner {
    fn drop(&mut self) {
        if let Some(ch) = &self.channel {
            ch.forget(self.cq);
        }
        // SAFETY: every QP using this CQ holds an Arc to it, so none is left; events read from
        // the channel were acknowledged when read; destroyed once, before the channel and the
        // context (held by this struct).
        unsafe { sys::ibv_destroy_cq(self.cq) };
    }
}

/// A completion queue. Cheap to clone; destroyed after the last clone and the last queue pair
/// completing into it are dropped.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// let cq = ctx.create_cq(256)?;
/// let mut done = Completions::default();
/// // Nothing was posted: a wait ends at its deadline with what arrived (nothing).
/// match cq.wait(&mut done, 1, std::time::Duration::from_millis(10)) {
///     Err(Error::Timeout { got: 0, .. }) => assert!(done.is_empty()),
///     other => panic!("expected a timeout, got {other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CompletionQueue {
    pub(crate) inner: Arc<CqInner>,
}

impl fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("capacity", &self.inner.capacity)
            .finish_non_exhaustive()
    }
}

impl PartialEq for CompletionQueue {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for CompletionQueue {}

impl Context {
    /// Creates a completion queue of at least `capacity` entries, without a channel.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let cq = ctx.create_cq(256)?;
    /// assert!(cq.capacity() >= 256);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_cq(&self, capacity: u32) -> Result<CompletionQueue> {
        self.create_cq_inner(capacity, None)
    }

    /// Creates a completion queue of at least `capacity` entries whose notifications go to
    /// `channel` (see [`CompletionQueue::req_notify`]).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let channel = ctx.create_channel()?;
    /// let cq = ctx.create_cq_with_channel(256, &channel)?;
    /// assert!(cq.channel().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_cq_with_channel(
        &self,
        capacity: u32,
        channel: &CompletionChannel,
    ) -> Result<CompletionQueue> {
        self.create_cq_inner(capacity, Some(channel.clone()))
    }

    fn create_cq_inner(
        &self,
        capacity: u32,
        channel: Option<CompletionChannel>,
    ) -> Result<CompletionQueue> {
        let ch = channel
            .as_ref()
            .map_or(std::ptr::null_mut(), CompletionChannel::as_raw);
        let cqe = libc::c_int::try_from(capacity.max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: live context; `ch` is null or a live channel of the same context that the CQ
        // keeps alive.
        let cq =
            unsafe { sys::ibv_create_cq(self.inner.as_ptr(), cqe, std::ptr::null_mut(), ch, 0) };
        if cq.is_null() {
            return Err(Error::CreateCq {
                capacity,
                source: last_os_error(),
            });
        }
        let inner = Arc::new(CqInner {
            cq,
            capacity,
            registry: Mutex::new(Vec::new()),
            channel,
            _ctx: self.inner.clone(),
        });
        if let Some(ch) = &inner.channel {
            ch.remember(cq, Arc::downgrade(&inner));
        }
        Ok(CompletionQueue { inner })
    }
}

/// A reusable batch of completions: the raw array handed to `ibv_poll_cq` and the completions
/// made from it. Polling appends; take them out with [`drain`](Self::drain) or
/// [`pop`](Self::pop).
///
/// ```
/// # use viaduct_verbs::*;
/// let mut done = Completions::with_batch(16);
/// assert!(done.is_empty() && done.pop().is_none());
/// ```
pub struct Completions {
    raw: Vec<sys::ibv_wc>,
    done: std::collections::VecDeque<Completion>,
}

impl fmt::Debug for Completions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completions")
            .field("batch", &self.raw.len())
            .field("done", &self.done)
            .finish()
    }
}

impl Completions {
    /// A batch polling at most `batch` work completions per `ibv_poll_cq` call.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let done = Completions::with_batch(64); // up to 64 per ibv_poll_cq
    /// assert_eq!(done.len(), 0);
    /// ```
    pub fn with_batch(batch: usize) -> Self {
        let raw = (0..batch.max(1))
            // SAFETY: ibv_wc is plain old data (integers and an integer union); zero is valid.
            .map(|_| unsafe { std::mem::zeroed::<sys::ibv_wc>() })
            .collect();
        Self {
            raw,
            done: std::collections::VecDeque::new(),
        }
    }

    /// Completions held.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let done = Completions::default();
    /// assert_eq!(done.len(), 0);
    /// ```
    #[inline]
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// True when none is held.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert!(Completions::default().is_empty());
    /// ```
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// Takes the oldest completion.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let mut done = Completions::default();
    /// while let Some(c) = done.pop() {
    ///     println!("{}: {}", c.id, c.status);
    /// }
    /// ```
    #[inline]
    pub fn pop(&mut self) -> Option<Completion> {
        self.done.pop_front()
    }

    /// Takes all completions, oldest first.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let mut done = Completions::default();
    /// for c in done.drain() {
    ///     assert!(c.status.is_success(), "{}", c.status);
    /// }
    /// ```
    pub fn drain(&mut self) -> impl Iterator<Item = Completion> + '_ {
        self.done.drain(..)
    }

    /// The completions held, oldest first.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// let done = Completions::default();
    /// assert_eq!(done.iter().filter(|c| c.ok().is_err()).count(), 0);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = &Completion> {
        self.done.iter()
    }
}

impl Default for Completions {
    fn default() -> Self {
        Self::with_batch(32)
    }
}

impl CompletionQueue {
    /// The raw `ibv_cq`, owned by this queue: do not destroy it or poll it directly (the
    /// buffers of the requests it completes would not be handed back).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let raw = ctx.create_cq(64)?.as_raw(); // for a libibverbs call of your own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_raw(&self) -> *mut sys::ibv_cq {
        self.inner.cq
    }

    /// Entries asked for at creation.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// assert!(ctx.create_cq(100)?.capacity() >= 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(&self) -> u32 {
        self.inner.capacity
    }

    /// The completion channel, if any.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// assert!(ctx.create_cq(64)?.channel().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn channel(&self) -> Option<&CompletionChannel> {
        self.inner.channel.as_ref()
    }

    /// Polls once (`ibv_poll_cq`, at most one batch) and appends what completed to `out`.
    /// Returns how many completions were appended (unsignalled requests completed implicitly
    /// count too). Never blocks.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let cq = ctx.create_cq(64)?;
    /// let mut done = Completions::default();
    /// let n = cq.poll(&mut done)?; // does not block
    /// assert_eq!(n, done.len());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn poll(&self, out: &mut Completions) -> Result<usize> {
        let n = libc::c_int::try_from(out.raw.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: live CQ; `raw` has room for `n` entries.
        let got = unsafe { sys::ibv_poll_cq(self.inner.cq, n, out.raw.as_mut_ptr()) };
        if got < 0 {
            return Err(Error::PollCq(crate::error::from_code(got)));
        }
        if got == 0 {
            return Ok(0);
        }
        let before = out.done.len();
        let registry = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for wc in &out.raw[..got as usize] {
            let Some((_, shared)) = registry.iter().find(|(n, _)| *n == wc.qp_num) else {
                // The queue pair is gone; its requests' memory went with it.
                continue;
            };
            shared.complete(wc, &mut out.done);
        }
        Ok(out.done.len() - before)
    }

    /// Polls until at least `wanted` completions were appended to `out` by this call, or
    /// `timeout` passed ([`Error::Timeout`]; what did arrive stays in `out`). Busy-polls, then
    /// yields the CPU between polls.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let cq = ctx.create_cq(64)?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?; // connected to itself
    /// # qp.post_recv([RecvRequest::new(1, pd.allocate(64, Access::LOCAL_WRITE)?)])?;
    /// # qp.post_send([SendRequest::send(2, pd.allocate(64, Access::empty())?)])?;
    /// let mut done = Completions::default();
    /// // Two completions (a send and its receive), or Error::Timeout with what did arrive.
    /// let n = cq.wait(&mut done, 2, std::time::Duration::from_secs(5))?;
    /// assert_eq!(n, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(&self, out: &mut Completions, wanted: usize, timeout: Duration) -> Result<usize> {
        let start = Instant::now();
        let mut got = 0;
        let mut spins = 0u32;
        while got < wanted {
            let n = self.poll(out)?;
            got += n;
            if got >= wanted {
                break;
            }
            if start.elapsed() >= timeout {
                return Err(Error::Timeout {
                    waited_ms: start.elapsed().as_millis(),
                    wanted,
                    got,
                });
            }
            if n == 0 {
                spins += 1;
                if spins > 1000 {
                    std::thread::yield_now();
                }
            }
        }
        Ok(got)
    }

    /// Asks for one notification on the channel at the next completion (`ibv_req_notify_cq`);
    /// with `solicited_only`, only for solicited receives or error completions.
    ///
    /// Poll once more after arming: a completion that arrived before arming does not notify.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let channel = ctx.create_channel()?;
    /// let cq = ctx.create_cq_with_channel(64, &channel)?;
    /// cq.req_notify(false)?; // the next completion wakes the channel
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        if self.inner.channel.is_none() {
            return Err(Error::NoChannel);
        }
        // SAFETY: live CQ.
        let rc = unsafe { sys::ibv_req_notify_cq(self.inner.cq, i32::from(solicited_only)) };
        if rc != 0 {
            return Err(Error::ReqNotify(crate::error::from_code(rc)));
        }
        Ok(())
    }
}
