//! Completion channels: a file descriptor that becomes readable when an armed completion queue
//! gets a completion.
//!
//! Use: [`CompletionQueue::req_notify`] (arm), poll the queue once more, then wait on the
//! channel ([`CompletionChannel::wait`], or the fd via [`AsFd`] in an event loop), then
//! [`CompletionChannel::get_event`]. Events are acknowledged (`ibv_ack_cq_events`) as they are
//! read, so dropping a queue never waits for an unacknowledged event.

use std::collections::HashMap;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rdma_sys as sys;

use crate::cq::{CompletionQueue, CqInner};
use crate::device::{Context, ContextInner};
use crate::error::{Error, Result, last_os_error};

pub(crate) struct ChannelInner {
    ch: *mut sys::ibv_comp_channel,
    cqs: Mutex<HashMap<usize, Weak<CqInner>>>,
    _ctx: Arc<ContextInner>,
}

// SAFETY: the channel is a file descriptor plus a refcount that libibverbs manages under its
// own lock; the CQ map is behind a mutex.
unsafe impl Send for ChannelInner {}
// SAFETY: as above.
unsafe impl Sync for ChannelInner {}

impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: every CQ bound to the channel holds an Arc to it, so none is left; destroyed
        // once, before the context.
        unsafe { sys::ibv_destroy_comp_channel(self.ch) };
    }
}

/// A completion channel (`ibv_comp_channel`). Cheap to clone.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// # let pd = ctx.alloc_pd()?;
/// let channel = ctx.create_channel()?;
/// let cq = ctx.create_cq_with_channel(64, &channel)?;
/// cq.req_notify(false)?;
/// let woken = channel.wait(std::time::Duration::from_secs(1))?; // the queue, when it completed
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct CompletionChannel {
    inner: Arc<ChannelInner>,
}

impl fmt::Debug for CompletionChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionChannel")
            .field("fd", &self.raw_fd())
            .finish()
    }
}

impl Context {
    /// Creates a completion channel (`ibv_create_comp_channel`).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let channel = ctx.create_channel()?;
    /// let cq = ctx.create_cq_with_channel(64, &channel)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_channel(&self) -> Result<CompletionChannel> {
        // SAFETY: live context.
        let ch = unsafe { sys::ibv_create_comp_channel(self.inner.as_ptr()) };
        if ch.is_null() {
            return Err(Error::CreateChannel(last_os_error()));
        }
        Ok(CompletionChannel {
            inner: Arc::new(ChannelInner {
                ch,
                cqs: Mutex::new(HashMap::new()),
                _ctx: self.inner.clone(),
            }),
        })
    }
}

pub(crate) fn set_nonblocking(fd: RawFd, nonblocking: bool) -> Result<()> {
    // SAFETY: fcntl on a descriptor we own; F_GETFL has no pointer arguments.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(Error::SetNonblocking(last_os_error()));
    }
    let new = if nonblocking {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    // SAFETY: as above; F_SETFL takes an int.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, new) } < 0 {
        return Err(Error::SetNonblocking(last_os_error()));
    }
    Ok(())
}

/// Waits until `fd` is readable or `timeout` passes; true when readable.
pub(crate) fn wait_readable(fd: RawFd, timeout: Option<Duration>) -> std::io::Result<bool> {
    let ms = match timeout {
        None => -1,
        Some(t) => libc::c_int::try_from(t.as_millis()).unwrap_or(libc::c_int::MAX),
    };
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(rc > 0);
    }
}

impl CompletionChannel {
    /// The raw `ibv_comp_channel`, owned by this value.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let raw = ctx.create_channel()?.as_raw(); // for a libibverbs call of your own
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_raw(&self) -> *mut sys::ibv_comp_channel {
        self.inner.ch
    }

    fn raw_fd(&self) -> RawFd {
        // SAFETY: the channel is live while self exists.
        unsafe { (*self.inner.ch).fd }
    }

    /// Makes [`get_event`](Self::get_event) return `Ok(None)` instead of blocking when no
    /// event is pending (sets `O_NONBLOCK` on the fd).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let channel = ctx.create_channel()?;
    /// channel.set_nonblocking(true)?;
    /// assert!(channel.get_event()?.is_none()); // nothing pending
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_nonblocking(&self, nonblocking: bool) -> Result<()> {
        set_nonblocking(self.raw_fd(), nonblocking)
    }

    pub(crate) fn remember(&self, cq: *mut sys::ibv_cq, inner: Weak<CqInner>) {
        let mut m = self.inner.cqs.lock().unwrap_or_else(|e| e.into_inner());
        m.insert(cq as usize, inner);
    }

    pub(crate) fn forget(&self, cq: *mut sys::ibv_cq) {
        let mut m = self.inner.cqs.lock().unwrap_or_else(|e| e.into_inner());
        m.remove(&(cq as usize));
    }

    /// Reads one event (`ibv_get_cq_event`), acknowledges it, and returns the queue that
    /// became ready. Blocks unless the channel is nonblocking, in which case `Ok(None)` means
    /// no event was pending. The queue must be armed again to get another event.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let channel = ctx.create_channel()?;
    /// let cq = ctx.create_cq_with_channel(64, &channel)?;
    /// # let pd = ctx.alloc_pd()?;
    /// # let qp = pd.queue_pair(&cq, &cq).build()?;
    /// # let me = qp.endpoint();
    /// # let qp = qp.connect(&me, &ConnectOptions::default())?; // connected to itself
    /// cq.req_notify(false)?;
    /// # qp.post_recv([RecvRequest::new(1, pd.allocate(64, Access::LOCAL_WRITE)?)])?;
    /// # qp.post_send([SendRequest::send(2, pd.allocate(64, Access::empty())?)])?;
    /// if let Some(cq) = channel.get_event()? { // blocks until a completion arrives
    ///     cq.req_notify(false)?; // re-arm, then poll
    ///     let mut done = Completions::default();
    ///     cq.wait(&mut done, 2, std::time::Duration::from_secs(5))?;
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_event(&self) -> Result<Option<CompletionQueue>> {
        loop {
            let mut cq: *mut sys::ibv_cq = std::ptr::null_mut();
            let mut ctx: *mut libc::c_void = std::ptr::null_mut();
            // SAFETY: live channel; valid out-pointers.
            let rc = unsafe { sys::ibv_get_cq_event(self.inner.ch, &mut cq, &mut ctx) };
            if rc != 0 {
                let e = last_os_error();
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    return Ok(None);
                }
                return Err(Error::GetCqEvent(e));
            }
            // SAFETY: the CQ of an unacknowledged event cannot be destroyed (ibv_destroy_cq
            // waits for the acknowledgement), so `cq` is live here.
            unsafe { sys::ibv_ack_cq_events(cq, 1) };
            let found = {
                let m = self.inner.cqs.lock().unwrap_or_else(|e| e.into_inner());
                m.get(&(cq as usize)).and_then(Weak::upgrade)
            };
            if let Some(inner) = found {
                return Ok(Some(CompletionQueue { inner }));
            }
            // The queue is being dropped: its event means nothing now. Try the next one, but
            // never block when the caller asked for nonblocking reads.
            if !wait_readable(self.raw_fd(), Some(Duration::ZERO)).map_err(Error::GetCqEvent)? {
                return Ok(None);
            }
        }
    }

    /// Waits up to `timeout` for an event; `Ok(None)` when none came.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let channel = ctx.create_channel()?;
    /// let cq = ctx.create_cq_with_channel(64, &channel)?;
    /// cq.req_notify(false)?;
    /// let woken = channel.wait(std::time::Duration::from_millis(10))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(&self, timeout: Duration) -> Result<Option<CompletionQueue>> {
        if !wait_readable(self.raw_fd(), Some(timeout)).map_err(Error::GetCqEvent)? {
            return Ok(None);
        }
        self.get_event()
    }
}

impl AsFd for CompletionChannel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd stays open as long as the channel, which outlives the borrow.
        unsafe { BorrowedFd::borrow_raw(self.raw_fd()) }
    }
}
