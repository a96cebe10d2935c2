//! [`FileIo`]: positional file reads, writes and syncs on an io_uring ring.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::uring::{Completion, EventFd, Features, OpId, PushError, Ring, RingConfig};

use super::buffer::{Buffers, IoBuffer};
use super::error::{FileError, OpKind};
use super::info::{FileInfo, InfoCache};
use super::op::{DropQueue, FileCompletion, FileOp};
use super::pending::Pending;
use super::retry::RetryStats;

/// Most iovecs in one vectored operation (`IOV_MAX`).
const IOV_MAX: usize = 1024;

/// How to build a [`FileIo`].
#[derive(Debug, Clone)]
pub struct FileIoConfig {
    /// Submission queue depth (operations per `io_uring_enter` at most).
    pub depth: u32,
    /// SQPOLL idle time in ms; `None` (the default) keeps submission in the caller's thread.
    pub sqpoll_idle_ms: Option<u32>,
    /// Register an eventfd for blocking waits elsewhere.
    pub eventfd: bool,
    /// Size of the fixed-file table ([`FileIo::register_file`]); 0 for none.
    pub fixed_files: u32,
}

impl Default for FileIoConfig {
    fn default() -> Self {
        Self {
            depth: 128,
            sqpoll_idle_ms: None,
            eventfd: false,
            fixed_files: 0,
        }
    }
}

#[derive(Debug)]
enum State {
    Free,
    InFlight {
        engine_op: OpId,
        forgotten: bool,
        cancel: bool,
    },
    Done(FileCompletion),
}

#[derive(Debug)]
struct Record {
    generation: u32,
    state: State,
}

/// Positional reads and writes (plain and vectored), `fsync` and `fdatasync` on one io_uring ring.
///
/// Each operation owns its buffers from start to completion and hands them back in a
/// [`FileCompletion`]. Short transfers are continued until the whole buffer is moved or the file
/// ends (a read at end of file reports the bytes it read); errors name their errno. Operations
/// are queued by the `*_at` calls and go to the kernel in batches: when the queue is full, on
/// [`FileIo::submit`], [`FileIo::poll`] or a wait.
///
/// `EINTR` and `EAGAIN` are not errors: an operation answered with `EINTR` is resubmitted, one
/// answered with `EAGAIN` (a descriptor in `O_NONBLOCK` mode that was not ready, on kernels that
/// report it rather than poll themselves) waits in the kernel for readiness
/// (`IORING_OP_POLL_ADD`) and is then resubmitted, and a wait interrupted by a signal is made
/// again with the time left ([`FileIo::retries`] counts all three).
///
/// Progress happens only inside calls on this value: [`FileIo::poll`] reaps without blocking,
/// [`FileIo::wait_any`] blocks (one `io_uring_enter` per wake-up) until one of a set of operations
/// finishes or a timeout passes. The engine is owned by one thread at a time.
#[derive(Debug)]
pub struct FileIo {
    ring: Ring<Pending>,
    records: Vec<Record>,
    free: Vec<u32>,
    outstanding: usize,
    drops: DropQueue,
    dropped: Vec<u64>,
    scratch: Vec<Completion<Pending>>,
    infos: InfoCache,
    fixed: HashMap<usize, (Arc<File>, u32)>,
    fixed_free: Vec<u32>,
    fixed_buffers: bool,
    retries: RetryStats,
    /// The file of the last operation: most batches target one file, and this skips two hash
    /// lookups. The weak reference keeps the address from being reused by another file.
    last: Option<LastFile>,
}

#[derive(Debug)]
struct LastFile {
    file: Weak<File>,
    info: FileInfo,
    fixed: Option<u32>,
}

impl FileIo {
    /// Creates the ring (see [`crate::uring::UringError`] for why that can fail).
    pub fn new(config: &FileIoConfig) -> Result<Self, FileError> {
        let ring_config = RingConfig::new(config.depth.max(1))
            .eventfd(config.eventfd)
            .sqpoll(config.sqpoll_idle_ms);
        let mut ring = Ring::new(&ring_config)?;
        if config.fixed_files > 0 {
            ring.register_files_sparse(config.fixed_files)?;
        }
        Ok(Self {
            ring,
            records: Vec::new(),
            free: Vec::new(),
            outstanding: 0,
            drops: Arc::new(Mutex::new(Vec::new())),
            dropped: Vec::new(),
            scratch: Vec::new(),
            infos: InfoCache::default(),
            fixed: HashMap::new(),
            fixed_free: (0..config.fixed_files).rev().collect(),
            fixed_buffers: false,
            retries: RetryStats::default(),
            last: None,
        })
    }

    /// What the kernel offers.
    pub fn features(&self) -> &Features {
        self.ring.features()
    }

    /// The eventfd signalled on completions, if configured.
    pub fn eventfd(&self) -> Option<&EventFd> {
        self.ring.eventfd()
    }

    /// Operations the kernel has not finished with (their buffers are held by the engine).
    pub fn in_flight(&self) -> usize {
        self.ring.in_flight()
    }

    /// How often the engine retried on its own: `EAGAIN` and `EINTR` answers to operations, and
    /// waits interrupted by signals (counted since the engine was created).
    pub fn retries(&self) -> RetryStats {
        RetryStats {
            interrupted_enters: self.ring.interrupted(),
            ..self.retries
        }
    }

    /// Operations whose buffers the engine still holds: in flight, or finished and not taken.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Allocates `count` page-aligned buffers of `size` bytes and registers them with the ring,
    /// so reads and writes into them skip per-operation page pinning. Once per engine.
    ///
    /// The buffers are carved from one mapping; from 2 MiB in all, it is aligned to 2 MiB and
    /// offered to transparent huge pages (`MADV_HUGEPAGE`), so that each buffer is a few
    /// physically contiguous pieces for the kernel's copies rather than one per 4 KiB page.
    pub fn register_buffers(
        &mut self,
        count: u16,
        size: usize,
    ) -> Result<Vec<IoBuffer>, FileError> {
        if self.fixed_buffers {
            return Err(FileError::InvalidArgument {
                op: OpKind::Read,
                reason: "fixed buffers are already registered on this engine".to_owned(),
            });
        }
        let mut bufs: Vec<IoBuffer> = IoBuffer::carve(usize::from(count), size)?
            .into_iter()
            .zip(0..count)
            .map(|(b, i)| b.with_fixed(self.ring.id(), i))
            .collect();
        let iovecs: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: registered buffers only ever reach the kernel through operations that own the
        // `IoBuffer` (tagged with this ring's id and the index); the kernel pins the pages, so a
        // buffer freed by its owner is never written through the registration afterwards, as no
        // other buffer carries its index.
        unsafe { self.ring.register_buffers(&iovecs) }?;
        self.fixed_buffers = true;
        Ok(bufs)
    }

    /// Puts `file` in the fixed-file table, so operations on it skip the descriptor lookup.
    /// The engine keeps the file open until [`FileIo::unregister_file`].
    pub fn register_file(&mut self, file: &Arc<File>) -> Result<(), FileError> {
        let key = Arc::as_ptr(file) as usize;
        if self.fixed.contains_key(&key) {
            return Ok(());
        }
        let Some(index) = self.fixed_free.pop() else {
            return Err(FileError::InvalidArgument {
                op: OpKind::Read,
                reason: "the fixed-file table is full (see FileIoConfig::fixed_files)".to_owned(),
            });
        };
        if let Err(e) = self.ring.update_files(index, &[file.as_raw_fd()]) {
            self.fixed_free.push(index);
            return Err(e.into());
        }
        self.fixed.insert(key, (Arc::clone(file), index));
        self.last = None;
        Ok(())
    }

    /// Takes `file` out of the fixed-file table. Operations already queued are submitted first.
    pub fn unregister_file(&mut self, file: &Arc<File>) -> Result<(), FileError> {
        let key = Arc::as_ptr(file) as usize;
        if !self.fixed.contains_key(&key) {
            return Ok(());
        }
        self.ring.submit()?;
        self.last = None;
        let (_, index) = self.fixed.remove(&key).expect("checked above");
        self.ring.update_files(index, &[-1])?;
        self.fixed_free.push(index);
        Ok(())
    }

    /// Starts a read of `buf.len()` bytes at `offset`.
    pub fn read_at(&mut self, file: &Arc<File>, buf: IoBuffer, offset: u64) -> FileOp {
        self.start(OpKind::Read, file, Buffers::One(buf), offset)
    }

    /// Starts a write of all of `buf` at `offset`.
    pub fn write_at(&mut self, file: &Arc<File>, buf: IoBuffer, offset: u64) -> FileOp {
        self.start(OpKind::Write, file, Buffers::One(buf), offset)
    }

    /// Starts a vectored read filling `bufs` in order from `offset`.
    pub fn readv_at(&mut self, file: &Arc<File>, bufs: Vec<IoBuffer>, offset: u64) -> FileOp {
        self.start(OpKind::Readv, file, Buffers::Many(bufs), offset)
    }

    /// Starts a vectored write of `bufs` in order at `offset`.
    pub fn writev_at(&mut self, file: &Arc<File>, bufs: Vec<IoBuffer>, offset: u64) -> FileOp {
        self.start(OpKind::Writev, file, Buffers::Many(bufs), offset)
    }

    /// Starts an `fsync`.
    pub fn fsync(&mut self, file: &Arc<File>) -> FileOp {
        self.start(OpKind::Fsync, file, Buffers::None, 0)
    }

    /// Starts an `fdatasync`.
    pub fn fdatasync(&mut self, file: &Arc<File>) -> FileOp {
        self.start(OpKind::Fdatasync, file, Buffers::None, 0)
    }

    /// Sends queued operations to the kernel.
    pub fn submit(&mut self) -> Result<usize, FileError> {
        Ok(self.ring.submit()?)
    }

    /// Submits, reaps what has finished without blocking, continues short transfers; returns how
    /// many operations finished in this call.
    pub fn poll(&mut self) -> Result<usize, FileError> {
        let finished = self.reap_and_process()?;
        self.ring.submit()?;
        Ok(finished)
    }

    /// Reaps without submitting or blocking; returns how many operations finished.
    fn reap_and_process(&mut self) -> Result<usize, FileError> {
        self.collect_dropped();
        let mut scratch = std::mem::take(&mut self.scratch);
        let reaped = self.ring.reap(&mut scratch);
        let finished = self.process(&mut scratch);
        self.scratch = scratch;
        reaped?;
        Ok(finished)
    }

    /// Whether `op` has finished (its result is ready for [`FileIo::take`]).
    pub fn is_done(&self, op: &FileOp) -> bool {
        matches!(self.record(op).map(|r| &r.state), Some(State::Done(_)))
    }

    /// Bytes moved by a finished operation (`None` while in flight or on error).
    pub fn bytes_done(&self, op: &FileOp) -> Option<usize> {
        match self.record(op).map(|r| &r.state) {
            Some(State::Done(c)) => c.result.as_ref().ok().copied(),
            _ => None,
        }
    }

    /// The result and buffers of a finished operation; the handle comes back if it has not
    /// finished (or belongs to another engine).
    pub fn take(&mut self, op: FileOp) -> Result<FileCompletion, FileOp> {
        if !self.is_done(&op) {
            return Err(op);
        }
        let key = op.disarm();
        let record = &mut self.records[(key & 0xffff_ffff) as usize];
        let State::Done(c) = std::mem::replace(&mut record.state, State::Free) else {
            unreachable!("checked done above");
        };
        self.release(key);
        Ok(c)
    }

    /// Blocks until one of `ops` has finished or `timeout` passes (`None`: no limit); returns the
    /// position in `ops` of a finished one, or `None` on timeout (or if none of them is this
    /// engine's). Each wake-up is one `io_uring_enter` that submits and waits.
    pub fn wait_any(
        &mut self,
        ops: &[&FileOp],
        timeout: Option<Duration>,
    ) -> Result<Option<usize>, FileError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        self.collect_dropped();
        loop {
            if let Some(i) = ops.iter().position(|o| self.is_done(o)) {
                return Ok(Some(i));
            }
            if !ops.iter().any(|o| self.record(o).is_some()) {
                return Ok(None);
            }
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if remaining == Some(Duration::ZERO) {
                self.ring.submit()?;
                return Ok(None);
            }
            let mut scratch = std::mem::take(&mut self.scratch);
            let waited = self.ring.wait(1, remaining, &mut scratch);
            self.process(&mut scratch);
            self.scratch = scratch;
            waited?;
        }
    }

    /// Blocks until at least `n` operations have finished during this call, or `timeout` passes,
    /// or nothing is left in flight; returns how many finished. Batches completions the way
    /// `iodepth_batch_complete_min` does in fio.
    pub fn wait_for(&mut self, n: usize, timeout: Option<Duration>) -> Result<usize, FileError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut finished = self.reap_and_process()?;
        if finished >= n || self.ring.in_flight() == 0 {
            self.ring.submit()?;
            return Ok(finished);
        }
        while finished < n && self.ring.in_flight() > 0 {
            let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if remaining == Some(Duration::ZERO) {
                break;
            }
            // Submits what is queued and waits, in one io_uring_enter.
            let mut scratch = std::mem::take(&mut self.scratch);
            let waited = self.ring.wait(n - finished, remaining, &mut scratch);
            finished += self.process(&mut scratch);
            self.scratch = scratch;
            waited?;
        }
        Ok(finished)
    }

    /// Blocks until `op` has finished or `timeout` passes; `true` if it has finished.
    pub fn wait(&mut self, op: &FileOp, timeout: Option<Duration>) -> Result<bool, FileError> {
        Ok(self.wait_any(&[op], timeout)?.is_some())
    }

    /// Asks the kernel to cancel `op` (`IORING_OP_ASYNC_CANCEL`).
    ///
    /// `Ok(false)`: it had already finished, nothing to cancel. `Ok(true)`: the cancel was sent;
    /// the operation still finishes exactly once, with [`FileError::Cancelled`] if the cancel
    /// caught it or with its normal result if it completed first. Its buffers come back either
    /// way.
    pub fn cancel(&mut self, op: &FileOp) -> Result<bool, FileError> {
        let Some(record) = self.record_mut(op) else {
            return Ok(false);
        };
        let State::InFlight {
            engine_op, cancel, ..
        } = &mut record.state
        else {
            return Ok(false);
        };
        *cancel = true;
        let engine_op = *engine_op;
        match self.ring.cancel(engine_op) {
            Ok(()) => {
                self.ring.submit()?;
                Ok(true)
            }
            // Finished in the kernel but not reaped yet: it will complete normally.
            Err(crate::uring::UringError::NotInFlight(_)) => Ok(true),
            Err(e) => Err(e.into()),
        }
    }

    fn record(&self, op: &FileOp) -> Option<&Record> {
        if op.engine != self.ring.id() {
            return None;
        }
        let r = self.records.get((op.key & 0xffff_ffff) as usize)?;
        (u64::from(r.generation) == op.key >> 32 && !matches!(r.state, State::Free)).then_some(r)
    }

    fn record_mut(&mut self, op: &FileOp) -> Option<&mut Record> {
        self.record(op)?;
        self.records.get_mut((op.key & 0xffff_ffff) as usize)
    }

    fn alloc_record(&mut self) -> u64 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.records.push(Record {
                    generation: 0,
                    state: State::Free,
                });
                (self.records.len() - 1) as u32
            }
        };
        self.outstanding += 1;
        (u64::from(self.records[index as usize].generation) << 32) | u64::from(index)
    }

    /// Frees a record whose state is already `Free`.
    fn release(&mut self, key: u64) {
        let index = (key & 0xffff_ffff) as u32;
        let record = &mut self.records[index as usize];
        record.generation = record.generation.wrapping_add(1);
        self.free.push(index);
        self.outstanding -= 1;
    }

    fn start(&mut self, kind: OpKind, file: &Arc<File>, bufs: Buffers, offset: u64) -> FileOp {
        let key = self.alloc_record();
        let handle = FileOp::new(key, self.ring.id(), Arc::clone(&self.drops));
        let (info, fixed_file) = self.file_info(file);
        if let Err(e) = check(kind, &bufs, offset, info) {
            self.finish(key, kind, Err(e), bufs);
            return handle;
        }
        let pending = Pending::new(
            kind,
            Arc::clone(file),
            fixed_file,
            offset,
            bufs,
            info.direct,
        );
        if pending.is_transfer() && pending.total == 0 {
            self.finish(key, kind, Ok(0), pending.bufs);
            return handle;
        }
        self.records[(key & 0xffff_ffff) as usize].state = State::InFlight {
            engine_op: OpId::NONE,
            forgotten: false,
            cancel: false,
        };
        self.push(key, pending);
        handle
    }

    /// `O_DIRECT` facts and fixed-file index of `file`.
    fn file_info(&mut self, file: &Arc<File>) -> (FileInfo, Option<u32>) {
        if let Some(last) = &self.last {
            if last.file.as_ptr() == Arc::as_ptr(file) && last.file.strong_count() > 0 {
                return (last.info, last.fixed);
            }
        }
        let info = self.infos.get(file);
        let fixed = self
            .fixed
            .get(&(Arc::as_ptr(file) as usize))
            .map(|(_, i)| *i);
        self.last = Some(LastFile {
            file: Arc::downgrade(file),
            info,
            fixed,
        });
        (info, fixed)
    }

    /// Queues (the rest of) an operation whose record is in flight.
    fn push(&mut self, key: u64, mut pending: Pending) {
        let entry = pending.entry(self.ring.id());
        // SAFETY: the entry points into `pending`'s buffers and iovecs (heap memory that does not
        // move with `pending`), which the ring owns until the final completion; `pending.file`
        // keeps the descriptor open.
        match unsafe { self.ring.push(entry, key, pending) } {
            Ok(id) => {
                if let State::InFlight { engine_op, .. } =
                    &mut self.records[(key & 0xffff_ffff) as usize].state
                {
                    *engine_op = id;
                }
            }
            Err(PushError { error, payload }) => {
                let kind = payload.kind;
                self.finish(key, kind, Err(error.into()), payload.bufs);
            }
        }
    }

    /// Records a final result, or frees everything if the handle was dropped.
    fn finish(
        &mut self,
        key: u64,
        kind: OpKind,
        result: Result<usize, FileError>,
        buffers: Buffers,
    ) {
        let index = (key & 0xffff_ffff) as usize;
        let forgotten = matches!(
            self.records[index].state,
            State::InFlight {
                forgotten: true,
                ..
            }
        );
        if forgotten {
            self.records[index].state = State::Free;
            drop(buffers);
            self.release(key);
        } else {
            self.records[index].state = State::Done(FileCompletion {
                kind,
                result,
                buffers,
            });
        }
    }

    /// Handles reaped completions; returns how many operations finished.
    fn process(&mut self, completions: &mut Vec<Completion<Pending>>) -> usize {
        let mut finished = 0;
        for c in completions.drain(..) {
            let Some(mut p) = c.payload else {
                continue;
            };
            let key = c.token;
            let cancel = matches!(
                self.records[(key & 0xffff_ffff) as usize].state,
                State::InFlight { cancel: true, .. }
            );
            if p.awaiting_ready {
                // The completion of a readiness poll: move the bytes now, unless cancelled.
                p.awaiting_ready = false;
                let errno = if c.result < 0 { -c.result } else { 0 };
                if errno == 0 && !cancel {
                    self.push(key, p);
                    continue;
                }
                if (errno == libc::EINTR || errno == libc::EAGAIN) && !cancel {
                    p.awaiting_ready = true;
                    self.push(key, p);
                    continue;
                }
                let result = if errno == 0 || errno == libc::ECANCELED {
                    Err(FileError::Cancelled {
                        op: p.kind,
                        offset: p.offset,
                        done: p.done,
                    })
                } else {
                    Err(FileError::os(p.kind, p.offset, p.done, errno, p.direct))
                };
                finished += 1;
                let kind = p.kind;
                self.finish(key, kind, result, p.bufs);
                continue;
            }
            let result = match c.result {
                r if r < 0 => match -r {
                    libc::EAGAIN if !cancel => {
                        // A descriptor in O_NONBLOCK mode that is not ready: wait for it in the
                        // kernel (a poll), then move the bytes; no busy resubmission.
                        self.retries.eagain += 1;
                        p.awaiting_ready = p.is_transfer();
                        self.push(key, p);
                        continue;
                    }
                    libc::EINTR if !cancel => {
                        self.retries.eintr += 1;
                        self.push(key, p);
                        continue;
                    }
                    libc::ECANCELED => Err(FileError::Cancelled {
                        op: p.kind,
                        offset: p.offset,
                        done: p.done,
                    }),
                    errno => Err(FileError::os(p.kind, p.offset, p.done, errno, p.direct)),
                },
                0 if p.kind == OpKind::Write || p.kind == OpKind::Writev => {
                    Err(FileError::WriteZero {
                        offset: p.offset,
                        done: p.done,
                    })
                }
                0 => Ok(p.done),
                r => {
                    p.done += r as usize;
                    if p.is_transfer() && p.done < p.total {
                        if cancel {
                            Err(FileError::Cancelled {
                                op: p.kind,
                                offset: p.offset,
                                done: p.done,
                            })
                        } else {
                            self.push(key, p);
                            continue;
                        }
                    } else {
                        Ok(p.done)
                    }
                }
            };
            finished += 1;
            let kind = p.kind;
            self.finish(key, kind, result, p.bufs);
        }
        finished
    }

    /// Applies handle drops reported since the last call.
    fn collect_dropped(&mut self) {
        {
            let mut q = self.drops.lock().unwrap_or_else(|p| p.into_inner());
            if q.is_empty() {
                return;
            }
            std::mem::swap(&mut *q, &mut self.dropped);
        }
        let dropped = std::mem::take(&mut self.dropped);
        for &key in &dropped {
            let index = (key & 0xffff_ffff) as usize;
            let Some(record) = self.records.get_mut(index) else {
                continue;
            };
            if u64::from(record.generation) != key >> 32 {
                continue;
            }
            match &mut record.state {
                State::Free => {}
                State::InFlight { forgotten, .. } => *forgotten = true,
                State::Done(_) => {
                    record.state = State::Free;
                    self.release(key);
                }
            }
        }
        self.dropped = dropped;
        self.dropped.clear();
    }
}

/// Up-front checks: `O_DIRECT` alignment, iovec count.
fn check(kind: OpKind, bufs: &Buffers, offset: u64, info: FileInfo) -> Result<(), FileError> {
    let list: &[IoBuffer] = match bufs {
        Buffers::None => return Ok(()),
        Buffers::One(b) => std::slice::from_ref(b),
        Buffers::Many(v) => v,
    };
    if list.len() > IOV_MAX {
        return Err(FileError::InvalidArgument {
            op: kind,
            reason: format!("{} buffers, more than IOV_MAX ({IOV_MAX})", list.len()),
        });
    }
    if info.direct {
        let block = u64::from(info.block);
        for b in list {
            if b.addr() % info.mem_align as usize != 0
                || b.len() as u64 % block != 0
                || offset % block != 0
            {
                return Err(FileError::Misaligned {
                    op: kind,
                    addr: b.addr(),
                    len: b.len(),
                    offset,
                    mem_align: info.mem_align,
                    block: info.block,
                });
            }
        }
    }
    Ok(())
}
