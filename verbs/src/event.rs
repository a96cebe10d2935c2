//! Asynchronous events of a device (port up/down, QP fatal, CQ error, ...), read from the
//! context's async file descriptor and acknowledged as they are read.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use rdma_sys as sys;

use crate::channel::{set_nonblocking, wait_readable};
use crate::device::Context;
use crate::error::{Error, Result, last_os_error};

/// Kind of an asynchronous event (`ibv_event_type`).
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// ctx.set_async_nonblocking(true)?;
/// if let Some(ev) = ctx.get_async_event()? {
///     if ev.kind == AsyncEventKind::QpFatal { println!("{ev}"); }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AsyncEventKind {
    /// A completion queue overran or failed.
    CqError,
    /// A queue pair hit an error it cannot report through a completion.
    QpFatal,
    /// Invalid request on a queue pair.
    QpRequestError,
    /// Access violation on a queue pair.
    QpAccessError,
    /// First packet arrived on a queue pair in RTR.
    CommunicationEstablished,
    /// Send queue drained.
    SqDrained,
    /// Path migrated.
    PathMigrated,
    /// Path migration failed.
    PathMigrationError,
    /// The device failed.
    DeviceFatal,
    /// A port became active.
    PortActive,
    /// A port went down.
    PortError,
    /// LID changed.
    LidChange,
    /// P_Key table changed.
    PkeyChange,
    /// Subnet manager changed.
    SmChange,
    /// Shared receive queue error.
    SrqError,
    /// Shared receive queue below its limit.
    SrqLimitReached,
    /// Last WQE of a QP attached to an SRQ reached.
    QpLastWqeReached,
    /// Client re-register requested.
    ClientReregister,
    /// GID table changed.
    GidChange,
    /// Work queue fatal error.
    WqFatal,
    /// A value this library does not know.
    Unknown(u32),
}

impl AsyncEventKind {
    fn from_raw(v: u32) -> Self {
        const KINDS: [AsyncEventKind; 20] = [
            AsyncEventKind::CqError,
            AsyncEventKind::QpFatal,
            AsyncEventKind::QpRequestError,
            AsyncEventKind::QpAccessError,
            AsyncEventKind::CommunicationEstablished,
            AsyncEventKind::SqDrained,
            AsyncEventKind::PathMigrated,
            AsyncEventKind::PathMigrationError,
            AsyncEventKind::DeviceFatal,
            AsyncEventKind::PortActive,
            AsyncEventKind::PortError,
            AsyncEventKind::LidChange,
            AsyncEventKind::PkeyChange,
            AsyncEventKind::SmChange,
            AsyncEventKind::SrqError,
            AsyncEventKind::SrqLimitReached,
            AsyncEventKind::QpLastWqeReached,
            AsyncEventKind::ClientReregister,
            AsyncEventKind::GidChange,
            AsyncEventKind::WqFatal,
        ];
        KINDS
            .get(v as usize)
            .copied()
            .unwrap_or(AsyncEventKind::Unknown(v))
    }
}

/// What an asynchronous event is about.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// if let Some(ev) = ctx.wait_async_event(std::time::Duration::from_millis(10))? {
///     if let EventSubject::Qp(qpn) = ev.subject { println!("QP {qpn}: {:?}", ev.kind); }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventSubject {
    /// A completion queue.
    Cq,
    /// A queue pair, by QP number.
    Qp(u32),
    /// A shared receive queue.
    Srq,
    /// A work queue.
    Wq,
    /// A port, by number.
    Port(u8),
    /// The whole device.
    Device,
}

/// One asynchronous event, already acknowledged.
///
/// ```no_run
/// # use viaduct_verbs::*;
/// # let ctx = Context::open_first()?;
/// if let Some(ev) = ctx.wait_async_event(std::time::Duration::from_millis(10))? {
///     println!("{ev}"); // kind and subject
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncEvent {
    /// Its kind.
    pub kind: AsyncEventKind,
    /// What it concerns.
    pub subject: EventSubject,
}

impl fmt::Display for AsyncEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} on {:?}", self.kind, self.subject)
    }
}

impl Context {
    /// Makes [`get_async_event`](Self::get_async_event) return `Ok(None)` instead of blocking.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// ctx.set_async_nonblocking(true)?;
    /// assert!(ctx.get_async_event()?.is_none()); // none pending
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_async_nonblocking(&self, nonblocking: bool) -> Result<()> {
        set_nonblocking(self.async_fd_raw(), nonblocking)
    }

    fn async_fd_raw(&self) -> libc::c_int {
        // SAFETY: the context is live while self exists.
        unsafe { (*self.as_raw()).async_fd }
    }

    /// The async event file descriptor (readable when an event is pending).
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let fd = ctx.async_fd(); // poll it with other descriptors
    /// # let _ = fd;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn async_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the fd lives as long as the context, which outlives the borrow.
        unsafe { BorrowedFd::borrow_raw(self.async_fd_raw()) }
    }

    /// Reads and acknowledges one event (`ibv_get_async_event`, `ibv_ack_async_event`). Blocks
    /// unless set nonblocking, in which case `Ok(None)` means none was pending.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// ctx.set_async_nonblocking(true)?;
    /// while let Some(ev) = ctx.get_async_event()? {
    ///     println!("{ev}");
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_async_event(&self) -> Result<Option<AsyncEvent>> {
        let mut ev = std::mem::MaybeUninit::<sys::ibv_async_event>::zeroed();
        // SAFETY: live context; `ev` is a valid out-pointer.
        let rc = unsafe { sys::ibv_get_async_event(self.as_raw(), ev.as_mut_ptr()) };
        if rc != 0 {
            let e = last_os_error();
            if e.kind() == std::io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(Error::GetAsyncEvent(e));
        }
        // Read the type as an integer: a value newer than this binding must not become an
        // invalid Rust enum.
        // SAFETY: ibv_get_async_event filled the struct; event_type is a C enum (a u32).
        let raw_type = unsafe {
            std::ptr::addr_of!((*ev.as_ptr()).event_type)
                .cast::<u32>()
                .read()
        };
        let kind = AsyncEventKind::from_raw(raw_type);
        // SAFETY: the element union member matching the event type is the valid one; the QP of
        // an unacknowledged event cannot be destroyed, so reading its number is sound.
        let subject = unsafe {
            let el = &(*ev.as_ptr()).element;
            match kind {
                AsyncEventKind::CqError => EventSubject::Cq,
                AsyncEventKind::QpFatal
                | AsyncEventKind::QpRequestError
                | AsyncEventKind::QpAccessError
                | AsyncEventKind::CommunicationEstablished
                | AsyncEventKind::SqDrained
                | AsyncEventKind::PathMigrated
                | AsyncEventKind::PathMigrationError
                | AsyncEventKind::QpLastWqeReached => EventSubject::Qp((*el.qp).qp_num),
                AsyncEventKind::SrqError | AsyncEventKind::SrqLimitReached => EventSubject::Srq,
                AsyncEventKind::WqFatal => EventSubject::Wq,
                AsyncEventKind::PortActive
                | AsyncEventKind::PortError
                | AsyncEventKind::LidChange
                | AsyncEventKind::PkeyChange
                | AsyncEventKind::SmChange
                | AsyncEventKind::ClientReregister
                | AsyncEventKind::GidChange => {
                    EventSubject::Port(u8::try_from(el.port_num).unwrap_or(0))
                }
                _ => EventSubject::Device,
            }
        };
        // SAFETY: acknowledges the event just read, once.
        unsafe { sys::ibv_ack_async_event(ev.as_mut_ptr()) };
        Ok(Some(AsyncEvent { kind, subject }))
    }

    /// Waits up to `timeout` for an event; `Ok(None)` when none came.
    ///
    /// ```no_run
    /// # use viaduct_verbs::*;
    /// # let ctx = Context::open_first()?;
    /// let ev = ctx.wait_async_event(std::time::Duration::from_millis(10))?; // None: nothing came
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_async_event(&self, timeout: Duration) -> Result<Option<AsyncEvent>> {
        if !wait_readable(self.async_fd_raw(), Some(timeout)).map_err(Error::GetAsyncEvent)? {
            return Ok(None);
        }
        self.get_async_event()
    }
}

impl AsFd for Context {
    /// The async event descriptor.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.async_fd()
    }
}
