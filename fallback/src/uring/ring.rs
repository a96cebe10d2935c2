//! The ring: submission with owned payloads, completion reaping, timed waits, cancellation.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use io_uring::types::{SubmitArgs, Timespec};
use io_uring::{IoUring, cqueue, opcode, squeue};

use super::buf_ring::ProvidedBuffers;
use super::error::UringError;
use super::eventfd::EventFd;
use super::features::Features;
use super::slot::{INTERNAL, OpId, SlotTable};

/// Kinds of the engine's own operations, in bits 56..62 of their `user_data`.
const KIND_SHIFT: u32 = 56;
const KIND_CANCEL: u64 = 1;
const KIND_TIMER: u64 = 2;
const KIND_TIMER_REMOVE: u64 = 3;

/// How long dropping a ring waits for cancelled operations before it leaks their payloads.
const DROP_GRACE: Duration = Duration::from_secs(5);

static NEXT_RING_ID: AtomicU64 = AtomicU64::new(1);

/// How to build a [`Ring`].
#[derive(Debug, Clone)]
pub struct RingConfig {
    entries: u32,
    cq_entries: Option<u32>,
    eventfd: bool,
    sqpoll_idle_ms: Option<u32>,
    timeout_op: bool,
    single_issuer: bool,
}

impl RingConfig {
    /// `entries` submission queue entries (rounded up to a power of two by the kernel); the
    /// completion queue gets twice as many unless [`RingConfig::cq_entries`] says otherwise.
    /// An eventfd is registered; SQPOLL is off.
    pub fn new(entries: u32) -> Self {
        Self {
            entries,
            cq_entries: None,
            eventfd: true,
            sqpoll_idle_ms: None,
            timeout_op: false,
            single_issuer: false,
        }
    }

    /// Completion queue size (at least the submission queue size).
    pub fn cq_entries(mut self, n: u32) -> Self {
        self.cq_entries = Some(n);
        self
    }

    /// Whether to register an eventfd for blocking waits (default on).
    pub fn eventfd(mut self, on: bool) -> Self {
        self.eventfd = on;
        self
    }

    /// Turns on SQPOLL: a kernel thread polls the submission queue, sleeping after `idle_ms`.
    /// Off by default: on a machine with few cores the polling thread competes with the
    /// submitter.
    pub fn sqpoll(mut self, idle_ms: Option<u32>) -> Self {
        self.sqpoll_idle_ms = idle_ms;
        self
    }

    /// Promises that only the thread creating the ring ever uses it
    /// (`IORING_SETUP_SINGLE_ISSUER`), which lets the kernel keep task work for that thread's
    /// next `io_uring_enter` (`IORING_SETUP_DEFER_TASKRUN`): completions of socket operations
    /// cost less to deliver (measured: 3 % of a 64-byte TCP ping-pong). A ring used from another
    /// thread then fails with [`UringError::NotIssuer`] (entering or registering), and dropping
    /// it there leaks the payloads of the operations still in flight. Off by default; ignored with SQPOLL;
    /// kernels without it (before 6.1) get the default setup
    /// ([`crate::uring::Features::defer_taskrun`] tells).
    pub fn single_issuer(mut self, on: bool) -> Self {
        self.single_issuer = on;
        self
    }

    /// Uses an `IORING_OP_TIMEOUT` operation for timed waits even when the kernel could take the
    /// timeout in `io_uring_enter` directly (the path kernels without `EXT_ARG` take).
    pub fn timeout_op(mut self, on: bool) -> Self {
        self.timeout_op = on;
        self
    }
}

/// One completion handed back by [`Ring::reap`] or [`Ring::wait`].
///
/// Every pushed operation yields exactly one *final* completion, which carries its payload back.
/// A multishot operation yields completions with [`Completion::more`] set first; those carry no
/// payload (the operation still owns it).
#[derive(Debug)]
pub struct Completion<P> {
    /// The operation.
    pub op: OpId,
    /// The caller's token given at push time.
    pub token: u64,
    /// The kernel's result: a count or value when nonnegative, `-errno` when negative.
    pub result: i32,
    /// The completion flags (`IORING_CQE_F_*`): buffer id, `MORE`, ...
    pub flags: u32,
    /// The payload, on the final completion only.
    pub payload: Option<P>,
}

impl<P> Completion<P> {
    /// Whether more completions of this operation follow (`IORING_CQE_F_MORE`).
    pub fn more(&self) -> bool {
        cqueue::more(self.flags)
    }

    /// The result as `Ok(value)` or the OS error.
    pub fn io_result(&self) -> io::Result<u32> {
        if self.result < 0 {
            Err(io::Error::from_raw_os_error(-self.result))
        } else {
            Ok(self.result as u32)
        }
    }
}

/// A push that did not reach the ring; the payload comes back unused.
pub struct PushError<P> {
    /// Why.
    pub error: UringError,
    /// The payload that was pushed with the operation.
    pub payload: P,
}

impl<P> std::fmt::Debug for PushError<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<P> std::fmt::Display for PushError<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "submitting to the ring failed")
    }
}

impl<P> std::error::Error for PushError<P> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// How the kernel runs the task work of completions (socket operations complete through it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TaskWork {
    /// `SINGLE_ISSUER | DEFER_TASKRUN`: kept for the issuer's next `io_uring_enter`.
    Deferred,
    /// `COOP_TASKRUN`: run at the task's next kernel entry, without an interrupt.
    Cooperative,
    /// The kernel's default.
    Plain,
}

/// An io_uring instance owned by one thread, with a table of operations in flight.
///
/// The progress contract: nothing happens behind the caller's back. Operations are pushed with
/// [`Ring::push`] (which submits only when the submission queue is full, so many entries go out
/// per `io_uring_enter`), sent with [`Ring::submit`], and their completions are collected by
/// [`Ring::reap`] (never blocks) or [`Ring::wait`] (blocks up to a timeout). A thread that wants to
/// block elsewhere (in `epoll`) can wait on [`Ring::eventfd`] and reap when it is readable.
///
/// Payloads (the buffers an operation reads or writes) are owned by the ring from push to the
/// final completion. Dropping the ring cancels what is still in flight and waits for those
/// completions; payloads whose completion never arrives within a few seconds are leaked rather
/// than freed, since the kernel may still write them.
///
/// `Send` when the payload is, never `Sync`. A single-issuer ring
/// ([`RingConfig::single_issuer`]) may move, but only its creating thread may enter it: elsewhere
/// every call that enters the kernel fails with [`UringError::NotIssuer`], and a drop there
/// cannot wait for the operations in flight, so their payloads are leaked (as for completions
/// that never arrive).
pub struct Ring<P> {
    ring: IoUring,
    slots: SlotTable<P>,
    features: Features,
    eventfd: Option<EventFd>,
    backlog: VecDeque<Completion<P>>,
    buf_rings: Vec<ProvidedBuffers>,
    use_timeout_op: bool,
    sqpoll: bool,
    internal_seq: u64,
    timer_ts: Box<Timespec>,
    live_timer: Option<u64>,
    interrupted: u64,
    id: u64,
    _not_sync: PhantomData<Cell<()>>,
}

impl<P> std::fmt::Debug for Ring<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("fd", &self.ring.as_raw_fd())
            .field("in_flight", &self.slots.busy())
            .field("features", &self.features)
            .finish_non_exhaustive()
    }
}

impl<P> Ring<P> {
    /// Creates a ring, probes the kernel's features and registers the eventfd if asked.
    ///
    /// When io_uring cannot be used the error names the cause (sysctl, seccomp, memlock limit,
    /// kernel without io_uring). Task-work setup flags the kernel rejects step down: from
    /// `SINGLE_ISSUER | DEFER_TASKRUN` (when asked for) to `COOP_TASKRUN`, then to none.
    pub fn new(config: &RingConfig) -> Result<Self, UringError> {
        let build = |task_work: TaskWork| {
            let mut b = IoUring::builder();
            let cq = config
                .cq_entries
                .unwrap_or(config.entries.saturating_mul(2));
            b.setup_cqsize(cq.max(config.entries));
            if let Some(idle) = config.sqpoll_idle_ms {
                b.setup_sqpoll(idle);
            }
            match task_work {
                TaskWork::Deferred => {
                    b.setup_single_issuer()
                        .setup_defer_taskrun()
                        .setup_taskrun_flag();
                }
                TaskWork::Cooperative => {
                    b.setup_coop_taskrun().setup_taskrun_flag();
                }
                TaskWork::Plain => {}
            }
            b.build(config.entries)
        };
        // The preferred setup first; each flag the kernel refuses (EINVAL) drops a step.
        use TaskWork::{Cooperative, Deferred, Plain};
        let steps: &[TaskWork] = match (config.sqpoll_idle_ms.is_some(), config.single_issuer) {
            (true, _) => &[Plain],
            (false, true) => &[Deferred, Cooperative, Plain],
            (false, false) => &[Cooperative, Plain],
        };
        let mut i = 0;
        let (ring, task_work) = loop {
            match build(steps[i]) {
                Ok(r) => break (r, steps[i]),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && i + 1 < steps.len() => i += 1,
                Err(e) => return Err(UringError::diagnose_setup(e, config.entries)),
            }
        };
        let features = Features::of_ring(
            &ring,
            task_work == TaskWork::Cooperative,
            task_work == TaskWork::Deferred,
        );
        let eventfd = if config.eventfd {
            let efd = EventFd::new()?;
            ring.submitter()
                .register_eventfd(efd_raw(&efd))
                .map_err(|source| UringError::Register {
                    what: "eventfd",
                    source,
                })?;
            Some(efd)
        } else {
            None
        };
        Ok(Self {
            use_timeout_op: config.timeout_op || !features.ext_arg,
            sqpoll: config.sqpoll_idle_ms.is_some(),
            ring,
            slots: SlotTable::new(),
            features,
            eventfd,
            backlog: VecDeque::new(),
            buf_rings: Vec::new(),
            internal_seq: 0,
            timer_ts: Box::new(Timespec::new()),
            live_timer: None,
            interrupted: 0,
            id: NEXT_RING_ID.fetch_add(1, Ordering::Relaxed),
            _not_sync: PhantomData,
        })
    }

    /// What the kernel offers (probed when the ring was built).
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The eventfd the kernel signals on every completion, if one was registered.
    pub fn eventfd(&self) -> Option<&EventFd> {
        self.eventfd.as_ref()
    }

    /// A number unique to this ring within the process (to tie registered resources to it).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Operations pushed and not yet finally completed: their payloads are held by the ring.
    pub fn in_flight(&self) -> usize {
        self.slots.busy()
    }

    /// Whether nothing of the caller's can complete: no operation in flight and no completion
    /// held back for the next [`Ring::reap`] (which would then find nothing to hand out).
    pub fn idle(&self) -> bool {
        self.slots.busy() == 0 && self.backlog.is_empty()
    }

    /// A duplicate of the ring's descriptor: readable (`poll`) while its completion queue
    /// holds completions. It keeps the ring's kernel side alive while it is open.
    pub fn dup_fd(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        // SAFETY: the ring's descriptor is open for as long as `self` lives, so borrowing it
        // for the duplication is sound.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.ring.as_raw_fd()) }.try_clone_to_owned()
    }

    /// Entries in the submission queue that the kernel has not taken yet (pushed but not
    /// submitted, or left there by a submission that failed).
    pub fn unsubmitted(&mut self) -> usize {
        self.ring.submission().len()
    }

    /// How many `io_uring_enter` calls a signal interrupted (`EINTR`); each was made again (a
    /// timed wait with the time left).
    pub fn interrupted(&self) -> u64 {
        self.interrupted
    }

    /// The caller's token of an operation in flight.
    pub fn token(&self, op: OpId) -> Option<u64> {
        self.slots.token(op)
    }

    /// The underlying ring, for registrations this type does not wrap.
    pub fn raw(&self) -> &IoUring {
        &self.ring
    }

    /// Queues one operation; `token` and `payload` come back with its final completion.
    ///
    /// The entry's `user_data` is replaced by the engine's. Nothing is submitted unless the
    /// submission queue is full. On error the payload comes back in [`PushError`].
    ///
    /// # Safety
    ///
    /// Every pointer in `entry` must stay valid, and not be used elsewhere in a conflicting way,
    /// until the operation's final completion has been reaped: point only into `payload`'s heap
    /// memory (which does not move when `payload` is moved) or into memory that outlives the ring.
    /// File descriptors in `entry` must stay open until the entry has been submitted.
    pub unsafe fn push(
        &mut self,
        entry: squeue::Entry,
        token: u64,
        payload: P,
    ) -> Result<OpId, PushError<P>> {
        let id = self.slots.insert(token, payload);
        let entry = entry.user_data(id.user_data());
        if let Err(error) = self.push_entry(&entry) {
            let (_, payload) = self
                .slots
                .remove(id)
                .expect("slot inserted above is still live");
            return Err(PushError { error, payload });
        }
        Ok(id)
    }

    /// Pushes an entry whose pointers the caller has vouched for, submitting to make room.
    fn push_entry(&mut self, entry: &squeue::Entry) -> Result<(), UringError> {
        loop {
            // SAFETY: the caller of `push` (or the engine, for its own entries) guarantees the
            // entry's pointers stay valid until its completion.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return Ok(());
            }
            self.submit()?;
            if self.sqpoll && self.ring.submission().is_full() {
                self.ring
                    .submitter()
                    .squeue_wait()
                    .map_err(UringError::enter)?;
            }
        }
    }

    /// Sends everything queued to the kernel; returns how many entries went.
    ///
    /// A kernel that is busy flushing overflowed completions (`EBUSY`) gets its completions
    /// reaped into an internal backlog (handed out by the next [`Ring::reap`]) and the submit is
    /// retried, so nothing is dropped.
    pub fn submit(&mut self) -> Result<usize, UringError> {
        let mut total = 0;
        for _ in 0..1000 {
            let queued = self.ring.submission().len();
            if queued == 0 {
                return Ok(total);
            }
            match self.ring.submit() {
                Ok(n) => {
                    total += n;
                    if self.sqpoll {
                        return Ok(total);
                    }
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EBUSY) | Some(libc::EAGAIN) => self.drain_to_backlog()?,
                    Some(libc::EINTR) => self.interrupted += 1,
                    _ => return Err(UringError::enter(e)),
                },
            }
        }
        Ok(total)
    }

    /// Collects completions without blocking; returns how many were appended to `out`.
    pub fn reap(&mut self, out: &mut Vec<Completion<P>>) -> Result<usize, UringError> {
        let before = out.len();
        if !self.backlog.is_empty() {
            out.extend(self.backlog.drain(..));
        }
        loop {
            self.drain_cq(out);
            let (overflow, taskrun) = {
                let sq = self.ring.submission();
                (sq.cq_overflow(), sq.taskrun())
            };
            if !overflow && !taskrun {
                break;
            }
            // Completions wait in the kernel (overflow list or pending task work): an enter with
            // GETEVENTS moves them into the CQ, which now has room.
            self.enter_getevents()?;
            if self.ring.completion().is_empty() {
                break;
            }
        }
        Ok(out.len() - before)
    }

    /// Submits what is queued and blocks until at least `want` completions are in `out`, or
    /// `timeout` passes (`None`: no limit). Returns how many were appended.
    ///
    /// Never waits for more completions than there are operations in flight, so an idle ring
    /// returns at once; with `timeout` `None` it blocks as long as the operations take. A timeout
    /// that passes is not an error: the count is just short. The timeout goes to the kernel in
    /// `io_uring_enter` itself (`EXT_ARG`), or, on kernels without it, as a timeout operation.
    #[doc(alias = "submit_and_wait")]
    pub fn wait(
        &mut self,
        want: usize,
        timeout: Option<Duration>,
        out: &mut Vec<Completion<P>>,
    ) -> Result<usize, UringError> {
        let before = out.len();
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            self.reap(out)?;
            let got = out.len() - before;
            let missing = want.saturating_sub(got).min(self.slots.busy());
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if missing == 0 || remaining == Some(Duration::ZERO) {
                self.submit()?;
                return Ok(got);
            }
            // Submits what is queued and waits, in one io_uring_enter.
            self.enter_wait(missing, remaining)?;
        }
    }

    /// One `io_uring_enter` that waits for `want` completions or `timeout`.
    fn enter_wait(&mut self, want: usize, timeout: Option<Duration>) -> Result<(), UringError> {
        let result = match timeout {
            None => self.ring.submit_and_wait(want),
            Some(t) if !self.use_timeout_op => {
                let ts = Timespec::new().sec(t.as_secs()).nsec(t.subsec_nanos());
                let args = SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(want, &args)
            }
            Some(t) => {
                // A firing timeout wakes the waiter whatever `want` is.
                self.arm_timer(t)?;
                self.ring.submit_and_wait(want)
            }
        };
        match result {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                Some(libc::ETIME) => Ok(()),
                Some(libc::EINTR) => {
                    self.interrupted += 1;
                    Ok(())
                }
                Some(libc::EBUSY) | Some(libc::EAGAIN) => self.drain_to_backlog(),
                _ => Err(UringError::enter(e)),
            },
        }
    }

    /// Starts (or restarts) the engine's own timer operation, used without `EXT_ARG`.
    fn arm_timer(&mut self, t: Duration) -> Result<(), UringError> {
        if let Some(old) = self.live_timer.take() {
            let remove = opcode::TimeoutRemove::new(old)
                .build()
                .user_data(self.internal_user_data(KIND_TIMER_REMOVE));
            self.push_entry(&remove)?;
        }
        *self.timer_ts = Timespec::new().sec(t.as_secs()).nsec(t.subsec_nanos());
        let ud = self.internal_user_data(KIND_TIMER);
        // The kernel copies the timespec when the entry is submitted; the boxed value lives in the
        // ring anyway.
        let entry = opcode::Timeout::new(&raw const *self.timer_ts)
            .build()
            .user_data(ud);
        self.push_entry(&entry)?;
        self.live_timer = Some(ud);
        Ok(())
    }

    /// Asks the kernel to cancel an operation (`IORING_OP_ASYNC_CANCEL`).
    ///
    /// The operation still completes exactly once, through [`Ring::reap`]/[`Ring::wait`]: with
    /// `-ECANCELED` if the cancel caught it, with its normal result if it finished first. Its
    /// payload stays with the ring until that completion. Fails with
    /// [`UringError::NotInFlight`] when `op` already completed.
    pub fn cancel(&mut self, op: OpId) -> Result<(), UringError> {
        if !self.slots.contains(op) {
            return Err(UringError::NotInFlight(op.user_data()));
        }
        let entry = opcode::AsyncCancel::new(op.user_data())
            .build()
            .user_data(self.internal_user_data(KIND_CANCEL));
        self.push_entry(&entry)
    }

    /// Registers fixed buffers (`IORING_REGISTER_BUFFERS`), replacing none.
    ///
    /// # Safety
    ///
    /// Each iovec must describe memory that stays valid until the buffers are unregistered or
    /// the ring is dropped, and that is not used in a way conflicting with fixed-buffer
    /// operations that name it.
    pub unsafe fn register_buffers(&mut self, iovecs: &[libc::iovec]) -> Result<(), UringError> {
        // SAFETY: forwarded from this function's contract.
        let r = unsafe { self.ring.submitter().register_buffers(iovecs) };
        r.map_err(|source| self.register_error("fixed buffers", source))
    }

    /// The error of a failed `io_uring_register`: on a single-issuer ring, the `EEXIST` of a
    /// call from another thread is [`UringError::NotIssuer`].
    fn register_error(&self, what: &'static str, source: std::io::Error) -> UringError {
        if self.features.defer_taskrun && source.raw_os_error() == Some(libc::EEXIST) {
            UringError::NotIssuer(source)
        } else {
            UringError::Register { what, source }
        }
    }

    /// Registers a sparse table of `n` fixed files (fill it with [`Ring::update_files`]).
    pub fn register_files_sparse(&mut self, n: u32) -> Result<(), UringError> {
        self.ring
            .submitter()
            .register_files_sparse(n)
            .map_err(|source| self.register_error("sparse file table", source))
    }

    /// Registers `fds` as the fixed-file table (`IORING_REGISTER_FILES`).
    pub fn register_files(&mut self, fds: &[RawFd]) -> Result<(), UringError> {
        self.ring
            .submitter()
            .register_files(fds)
            .map_err(|source| self.register_error("fixed files", source))
    }

    /// Replaces fixed-file entries from `offset` on (`-1` clears an entry).
    pub fn update_files(&mut self, offset: u32, fds: &[RawFd]) -> Result<(), UringError> {
        self.ring
            .submitter()
            .register_files_update(offset, fds)
            .map(drop)
            .map_err(|source| self.register_error("fixed file update", source))
    }

    /// Registers a provided-buffer ring of `count` buffers of `size` bytes as group `group`.
    ///
    /// Receives submitted with `IOSQE_BUFFER_SELECT` and this group pick their buffer from it;
    /// turn a completion into the bytes with [`ProvidedBuffers::take`]. `count` is a power of
    /// two up to 32768.
    pub fn register_buf_ring(
        &mut self,
        group: u16,
        count: u16,
        size: u32,
    ) -> Result<ProvidedBuffers, UringError> {
        if !self.features.pbuf_ring {
            return Err(UringError::Unsupported {
                feature: "provided-buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19)",
            });
        }
        let bufs = ProvidedBuffers::register(&self.ring, group, count, size)?;
        self.buf_rings.push(bufs.clone());
        Ok(bufs)
    }

    fn internal_user_data(&mut self, kind: u64) -> u64 {
        self.internal_seq = (self.internal_seq + 1) & ((1 << KIND_SHIFT) - 1);
        INTERNAL | (kind << KIND_SHIFT) | self.internal_seq
    }

    fn enter_getevents(&mut self) -> Result<(), UringError> {
        loop {
            // SAFETY: no submissions, no argument: only asks the kernel to post pending events.
            let r = unsafe {
                self.ring.submitter().enter::<libc::sigset_t>(
                    0, 0, 1, // IORING_ENTER_GETEVENTS
                    None,
                )
            };
            match r {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => self.interrupted += 1,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(()),
                Err(e) => return Err(UringError::enter(e)),
            }
        }
    }

    fn drain_to_backlog(&mut self) -> Result<(), UringError> {
        let mut tmp = Vec::new();
        self.drain_cq(&mut tmp);
        self.backlog.extend(tmp);
        self.enter_getevents()
    }

    fn drain_cq(&mut self, out: &mut Vec<Completion<P>>) {
        let Self {
            ring,
            slots,
            live_timer,
            ..
        } = self;
        let mut cq = ring.completion();
        cq.sync();
        for cqe in cq {
            if let Some(c) = complete(slots, live_timer, &cqe) {
                out.push(c);
            }
        }
    }
}

/// Turns one CQE into a caller's completion (`None` for the engine's own operations).
fn complete<P>(
    slots: &mut SlotTable<P>,
    live_timer: &mut Option<u64>,
    cqe: &cqueue::Entry,
) -> Option<Completion<P>> {
    {
        let ud = cqe.user_data();
        if ud & INTERNAL != 0 {
            if (ud >> KIND_SHIFT) & 0x7f == KIND_TIMER && *live_timer == Some(ud) {
                *live_timer = None;
            }
            return None;
        }
        let op = OpId(ud);
        let flags = cqe.flags();
        if cqueue::more(flags) {
            let token = slots.token(op)?;
            return Some(Completion {
                op,
                token,
                result: cqe.result(),
                flags,
                payload: None,
            });
        }
        let (token, payload) = slots.remove(op)?;
        Some(Completion {
            op,
            token,
            result: cqe.result(),
            flags,
            payload: Some(payload),
        })
    }
}

// A raw fd of an eventfd we own, for registration.
fn efd_raw(efd: &EventFd) -> RawFd {
    use std::os::fd::AsFd;
    efd.as_fd().as_raw_fd()
}

impl<P> Drop for Ring<P> {
    fn drop(&mut self) {
        if self.slots.busy() == 0 {
            return;
        }
        for op in self.slots.live_ids() {
            let entry = opcode::AsyncCancel::new(op.user_data())
                .build()
                .user_data(self.internal_user_data(KIND_CANCEL));
            if self.push_entry(&entry).is_err() {
                break;
            }
        }
        let deadline = Instant::now() + DROP_GRACE;
        let mut out = Vec::new();
        while self.slots.busy() > 0 {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            out.clear();
            if self.wait(1, Some(deadline - now), &mut out).is_err() {
                break;
            }
        }
        // Whatever is left may still be written by the kernel after the ring closes.
        self.slots.leak_all();
    }
}
