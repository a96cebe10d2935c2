//! One-sided communication, passive target (MPI 4.x chapter 12.5.3 and 12.5.4):
//! `MPI_Win_lock`/`MPI_Win_unlock`, `MPI_Win_lock_all`/`MPI_Win_unlock_all`, the flushes,
//! `MPI_Win_sync`, and the request-based operations `MPI_Rput`, `MPI_Rget`,
//! `MPI_Raccumulate`, `MPI_Rget_accumulate`.
//!
//! The origin queues its operations as in an active-target epoch (see [`crate::win`]); a flush
//! or an unlock sends the target a control record and the batch over the window's private
//! communicator and waits for the target's reply (error code, then the data of the gets and
//! fetches). So when a flush or an unlock returns, the operations are complete at the target
//! and at the origin.
//!
//! The target side runs on the agent's handler thread: every window keeps one receive posted
//! for control records (tag [`TAG_PT`], any source), with a request handler that serves the
//! record (grants or queues a lock, applies a batch to the window's memory, releases a lock and
//! grants the next ones, replies) and posts the next receive. The handler runs once the receive
//! completes, and the receive completes inside any agent call of the target process (a blocking
//! `MPI_Recv`, `MPI_Barrier`, a wait, or the target's own RMA calls): a target that computes
//! without calling MPI delays the origins until its next call. Batches are applied one at a time
//! by the one handler thread, so accumulates stay element-wise atomic with respect to each
//! other. Locks are granted in arrival order: shared locks together, an exclusive lock alone.
//!
//! Threads (`MPI_THREAD_MULTIPLE`): the operations of all threads go to one queue per target,
//! and the exchanges with one target are serialised in this process by a mutex per target
//! (`Passive::flushing`), held by a flush or an unlock from taking that target's queue until
//! its reply is in, and by a lock request until its grant is in. So at most one control record
//! of this rank is in flight to a target (its batch cannot be mixed up with another thread's,
//! the handler reading the batch that follows each record from the same origin) and the one
//! reply on [`TAG_PT_REPLY`] from that target goes to the thread that waits for it. A flush
//! that finds the queue empty because another thread took the operations waits for the mutex,
//! that is for that thread's reply: when any flush returns, every operation its thread queued
//! before it is complete at the target. One thread alone takes an uncontended mutex per
//! flush: no extra message.
//!
//! A control record: kind (u8: lock or operations), argument (u8: exclusive for a lock, unlock
//! for operations), 6 bytes of padding, batch length (u64). A batch follows its record at once
//! (tag [`TAG_PT_DATA`]) and is read by the handler. Replies go out on tag [`TAG_PT_REPLY`].

use std::collections::VecDeque;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{Ordering, fence};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{Condition, Deadline, HandlerFn, Request, Status};

use crate::abi::{self, Handle, MpiAint, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::request::Meta;
use crate::state::{ReqEntry, rt};
use crate::win::{self, ERR_RMA_SYNC, Win, lock, xfer};

/// Control records of passive-target requests.
const TAG_PT: u32 = 4;
/// Batches following their control record.
const TAG_PT_DATA: u32 = 5;
/// Lock grants and replies to batches.
const TAG_PT_REPLY: u32 = 6;
/// Bytes of a control record.
const CTRL_LEN: usize = 16;
/// Control record kinds.
const C_LOCK: u8 = 1;
const C_OPS: u8 = 2;

/// `MPI_LOCK_EXCLUSIVE`, `MPI_LOCK_SHARED`.
const LOCK_EXCLUSIVE: c_int = 234;
const LOCK_SHARED: c_int = 235;
/// `MPI_MODE_NOCHECK`.
const MODE_NOCHECK: c_int = 1024;
/// `MPI_ERR_LOCKTYPE`.
const ERR_LOCKTYPE: c_int = 47;
/// How long `MPI_Win_free` waits for the service's last handler and replies.
const FREE_WAIT: Duration = Duration::from_secs(10);

/// A lock this rank holds on one target.
#[derive(Clone, Copy)]
struct Held {
    /// Taken without asking the target (`MPI_MODE_NOCHECK`).
    nocheck: bool,
}

/// The origin side: the passive-target epochs this rank has open.
struct OriginSide {
    /// Per target rank: the lock of `MPI_Win_lock`.
    held: Vec<Option<Held>>,
    /// The epoch of `MPI_Win_lock_all` (with `MPI_MODE_NOCHECK` or not).
    all: Option<bool>,
}

/// The target side: the lock and the service's receive.
#[derive(Default)]
struct TargetSide {
    /// The origin holding the exclusive lock.
    exclusive: Option<u32>,
    /// Shared locks held.
    shared: usize,
    /// Lock requests not granted yet, in arrival order: (origin, exclusive).
    waiting: VecDeque<(u32, bool)>,
    /// The posted receive of the next control record.
    posted: Option<Request>,
    /// Set by `MPI_Win_free`: no receive is posted any more.
    closing: bool,
    /// Replies and grants sent and maybe not complete yet.
    sends: Vec<Request>,
}

/// Passive-target state of a window.
pub(crate) struct Passive {
    origin: Mutex<OriginSide>,
    target: Mutex<TargetSide>,
    /// Per target rank: held by the thread exchanging with that target (a flush or an unlock
    /// from taking the queue to the reply, a lock request to the grant); taken in rank order.
    flushing: Vec<Mutex<()>>,
}

impl Passive {
    /// The state of a window of `n` ranks: no epoch, no lock.
    pub(crate) fn new(n: usize) -> Self {
        Passive {
            origin: Mutex::new(OriginSide {
                held: vec![None; n],
                all: None,
            }),
            target: Mutex::new(TargetSide::default()),
            flushing: (0..n).map(|_| Mutex::new(())).collect(),
        }
    }
}

/// Whether this rank has a passive-target epoch open on `w`.
pub(crate) fn epoch_open(w: &Win) -> bool {
    let o = lock(&w.passive.origin);
    o.all.is_some() || o.held.iter().any(Option::is_some)
}

/// Whether this rank holds a lock on target `t` of `w` (its own, or that of
/// `MPI_Win_lock_all`).
pub(crate) fn locked(w: &Win, t: u32) -> bool {
    let o = lock(&w.passive.origin);
    o.all.is_some() || o.held.get(t as usize).is_some_and(Option::is_some)
}

/// Posts the receive of the next control record with the handler that serves it.
pub(crate) fn start_service(w: &Arc<Win>) -> Result<(), MpiError> {
    let mut t = lock(&w.passive.target);
    if t.closing {
        return Ok(());
    }
    let (req, buf) = w
        .comm
        .irecv(CTRL_LEN, Source::Any, TagMatch::Tag(TAG_PT))
        .map_err(xfer)?;
    let me = Arc::clone(w);
    req.post_handler(
        Condition::Complete,
        Some(HandlerFn::new(move |_, st| serve(&me, &buf, st))),
        None,
        Deadline::Asap,
    )?;
    t.posted = Some(req);
    Ok(())
}

/// Stops the service at `MPI_Win_free` (after the window's barrier, so no request comes any
/// more): cancels the posted receive, lets its handler run, waits for the last replies.
pub(crate) fn stop_service(w: &Win) {
    let posted = {
        let mut t = lock(&w.passive.target);
        t.closing = true;
        t.posted.take()
    };
    if let Some(mut r) = posted {
        let _ = r.cancel();
        let _ = r.wait_timeout(FREE_WAIT);
    }
    let _ = viaduct_agent::request::flush_handlers(FREE_WAIT);
    let sends = std::mem::take(&mut lock(&w.passive.target).sends);
    for mut s in sends {
        let _ = s.wait_timeout(FREE_WAIT);
    }
}

/// The handler of the service's receive (on the agent's handler thread).
fn serve(w: &Arc<Win>, buf: &RecvBuffer, st: &Status) {
    if st.test_cancelled() {
        return;
    }
    if let Some(e) = st.error() {
        // The window's communicator failed (a peer is gone): origins waiting on this rank get
        // the failure from their own receives; posting again would fail the same way.
        eprintln!("viaduct MPI: the passive-target service of a window stopped: {e}");
        return;
    }
    let mut c = [0u8; CTRL_LEN];
    if let (Some(src), CTRL_LEN) = (st.source(), buf.copy_to(&mut c)) {
        handle(w, src, &c);
    }
    if let Err(e) = start_service(w) {
        eprintln!(
            "viaduct MPI: the passive-target service of a window stopped: {}",
            e.message
        );
    }
}

/// Sends `data` to origin `dest` on the reply tag, keeping the request in `t`.
fn reply(w: &Win, t: &mut TargetSide, dest: u32, data: &[u8]) {
    t.sends
        .retain_mut(|r| !matches!(r.test(), Ok(Some(_)) | Err(_)));
    match w.comm.isend(dest, TAG_PT_REPLY, data) {
        Ok(r) => t.sends.push(r),
        Err(e) => eprintln!("viaduct MPI: a passive-target reply to rank {dest} failed: {e}"),
    }
}

/// Grants the waiting lock requests that can be granted, in arrival order.
fn grant(w: &Win, t: &mut TargetSide) {
    while let Some(&(o, exclusive)) = t.waiting.front() {
        let ok = if exclusive {
            t.exclusive.is_none() && t.shared == 0
        } else {
            t.exclusive.is_none()
        };
        if !ok {
            break;
        }
        t.waiting.pop_front();
        if exclusive {
            t.exclusive = Some(o);
        } else {
            t.shared += 1;
        }
        reply(w, t, o, &abi::SUCCESS.to_le_bytes());
    }
}

/// Serves one control record of origin `src`.
fn handle(w: &Win, src: u32, c: &[u8; CTRL_LEN]) {
    let mut len = [0u8; 8];
    len.copy_from_slice(&c[8..]);
    let len = u64::from_le_bytes(len) as usize;
    match c[0] {
        C_LOCK => {
            let mut t = lock(&w.passive.target);
            t.waiting.push_back((src, c[1] & 1 != 0));
            grant(w, &mut t);
        }
        C_OPS => {
            let answer = if len == 0 {
                abi::SUCCESS.to_le_bytes().to_vec()
            } else {
                let mut b = vec![0u8; len];
                match w
                    .comm
                    .recv(&mut b, Source::Rank(src), TagMatch::Tag(TAG_PT_DATA))
                {
                    // The window's memory: the program does not touch the parts these
                    // operations update until the origin's flush or unlock returned.
                    Ok(_) => win::apply(w, &b),
                    Err(_) => err::INTERN.to_le_bytes().to_vec(),
                }
            };
            let mut t = lock(&w.passive.target);
            reply(w, &mut t, src, &answer);
            if c[1] & 1 != 0 {
                release(w, &mut t, src);
            }
        }
        _ => {}
    }
}

/// Releases the lock origin `src` holds and grants the next ones.
fn release(w: &Win, t: &mut TargetSide, src: u32) {
    if t.exclusive == Some(src) {
        t.exclusive = None;
    } else {
        t.shared = t.shared.saturating_sub(1);
    }
    grant(w, t);
}

/// Serves this rank's own batch to itself on the calling thread (no message, no handler):
/// applies it, releases its lock with `unlock`, and returns the reply.
fn serve_own(w: &Win, batch: &[u8], unlock: bool) -> Vec<u8> {
    let answer = if batch.is_empty() {
        abi::SUCCESS.to_le_bytes().to_vec()
    } else {
        // The window's memory, as for a batch of another origin.
        win::apply(w, batch)
    };
    if unlock {
        let mut t = lock(&w.passive.target);
        release(w, &mut t, w.comm.rank());
    }
    answer
}

fn ctrl(kind: u8, arg: bool, len: usize) -> [u8; CTRL_LEN] {
    let mut c = [0u8; CTRL_LEN];
    c[0] = kind;
    c[1] = u8::from(arg);
    c[8..].copy_from_slice(&(len as u64).to_le_bytes());
    c
}

/// Takes the exchange mutexes of `targets` (ascending ranks), in rank order: no other thread
/// of this rank exchanges with them until the guards are dropped.
fn exclusive_to<'a>(w: &'a Win, targets: &[u32]) -> Vec<std::sync::MutexGuard<'a, ()>> {
    debug_assert!(targets.windows(2).all(|p| p[0] < p[1]));
    targets
        .iter()
        .map(|&t| lock(&w.passive.flushing[t as usize]))
        .collect()
}

/// Asks `targets` (ascending ranks) for a lock and waits for every grant.
fn acquire(w: &Win, targets: &[u32], exclusive: bool) -> Result<(), MpiError> {
    let _mine = exclusive_to(w, targets);
    let mut sends = Vec::with_capacity(targets.len());
    let me = w.comm.rank();
    for &t in targets {
        if t == me {
            // Queued (and granted when free) here; the grant still comes as a message, from
            // here or from the handler that releases the lock in the way.
            handle(w, me, &ctrl(C_LOCK, exclusive, 0));
            continue;
        }
        sends.push(
            w.comm
                .isend(t, TAG_PT, &ctrl(C_LOCK, exclusive, 0))
                .map_err(xfer)?,
        );
    }
    for &t in targets {
        let mut g = [0u8; 4];
        w.comm
            .recv(&mut g, Source::Rank(t), TagMatch::Tag(TAG_PT_REPLY))
            .map_err(xfer)?;
    }
    for mut s in sends {
        s.wait().map_err(xfer)?;
    }
    Ok(())
}

/// One pass of the agent's progress, so that the lock requests and operation batches other
/// origins sent to this rank are taken in (and served by the window's handler) while the
/// program polls its window with `MPI_Win_sync` or flushes with nothing to send: a rank that
/// waits for a value another rank puts into its window, calling only these, would otherwise
/// never let that rank's lock or operations in (MPI's progress rule for passive target).
fn serve_pending() {
    if let Ok(rt) = rt() {
        rt.agent.make_progress();
    }
}

/// Sends each of `targets` (ascending ranks) its queued operations (and, with `unlock`, the
/// release of its lock), and waits for the replies: the operations queued so far, by any
/// thread, are then complete at the target and at the origin. A target with nothing queued is
/// skipped unless `unlock`.
fn flush_to(w: &Win, targets: &[u32], unlock: bool) -> Result<(), MpiError> {
    let _mine = exclusive_to(w, targets);
    flush_held(w, targets, unlock)
}

/// Sends target `t` the operations queued for it in a fence epoch and waits for the reply
/// (see [`win::EARLY_FLUSH`]): its service applies them as it would a flush's.
pub(crate) fn flush_early(w: &Win, t: u32) -> Result<(), MpiError> {
    flush_to(w, &[t], false)
}

/// [`flush_to`] with the exchange mutexes of `targets` held by the caller.
fn flush_held(w: &Win, targets: &[u32], unlock: bool) -> Result<(), MpiError> {
    let mut sent = Vec::new();
    let mut sends = Vec::new();
    let me = w.comm.rank();
    let mut own = None;
    for &t in targets {
        let (batch, pending) = {
            let mut q = lock(&w.queue);
            (
                std::mem::take(&mut q.batches[t as usize]),
                std::mem::take(&mut q.pending[t as usize]),
            )
        };
        if batch.is_empty() && !unlock {
            continue;
        }
        if t == me {
            own = Some((batch, pending));
            continue;
        }
        sends.push(
            w.comm
                .isend(t, TAG_PT, &ctrl(C_OPS, unlock, batch.len()))
                .map_err(xfer)?,
        );
        if !batch.is_empty() {
            sends.push(w.comm.isend(t, TAG_PT_DATA, &batch).map_err(xfer)?);
        }
        sent.push((t, pending));
    }
    if sent.is_empty() {
        // Nothing to wait for from another rank (whose replies would run the progress).
        serve_pending();
    }
    let mut code = abi::SUCCESS;
    if let Some((batch, pending)) = own {
        let r = serve_own(w, &batch, unlock);
        code = i32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        win::deliver(&pending, &r[4..]);
    }
    for (t, pending) in &sent {
        let want = 4 + pending.iter().map(|p| p.len).sum::<usize>();
        let mut r = vec![0u8; want];
        w.comm
            .recv(&mut r, Source::Rank(*t), TagMatch::Tag(TAG_PT_REPLY))
            .map_err(xfer)?;
        let c = i32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        if c != abi::SUCCESS && code == abi::SUCCESS {
            code = c;
        }
        win::deliver(pending, &r[4..]);
    }
    for mut s in sends {
        s.wait().map_err(xfer)?;
    }
    win::refused(code)
}

/// Checks target rank `rank` of `w` (`None` for `MPI_PROC_NULL`).
fn target_of(w: &Win, rank: c_int) -> Result<Option<u32>, MpiError> {
    if rank == abi::PROC_NULL {
        return Ok(None);
    }
    let n = w.comm.size() as c_int;
    if rank < 0 || rank >= n {
        return Err(MpiError::new(
            err::RANK,
            format!("target rank {rank} is not in the window's group of {n}"),
        ));
    }
    Ok(Some(rank as u32))
}

/// `MPI_ERR_RMA_SYNC` when operations are queued for a target this rank holds no lock on:
/// an active-target (fence) epoch is open.
fn no_fence_epoch(w: &Win, o: &OriginSide, call: &str) -> Result<(), MpiError> {
    let q = lock(&w.queue);
    let fenced = q
        .batches
        .iter()
        .enumerate()
        .any(|(t, b)| !b.is_empty() && o.all.is_none() && o.held[t].is_none());
    if fenced || crate::winpscw::access_open(w) {
        return Err(MpiError::new(
            ERR_RMA_SYNC,
            format!(
                "{call} inside an active-target epoch (operations queued since MPI_Win_fence, \
                 or MPI_Win_start)"
            ),
        ));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Win_lock`: starts a passive-target epoch to `rank` once the target granted the
    /// lock (at once with `MPI_MODE_NOCHECK`).
    MPI_Win_lock / PMPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int, win: Handle) on win => {
        let w = win::win(win)?;
        if lock_type != LOCK_EXCLUSIVE && lock_type != LOCK_SHARED {
            return Err(MpiError::new(ERR_LOCKTYPE, format!("lock_type {lock_type} is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED")));
        }
        win::check_assert(assert)?;
        let Some(t) = target_of(&w, rank)? else { return Ok(()) };
        {
            let o = lock(&w.passive.origin);
            if o.all.is_some() {
                return Err(MpiError::new(ERR_RMA_SYNC, "MPI_Win_lock inside an MPI_Win_lock_all epoch"));
            }
            if o.held[t as usize].is_some() {
                return Err(MpiError::new(ERR_RMA_SYNC, format!("target {t} is locked by this rank already")));
            }
            no_fence_epoch(&w, &o, "MPI_Win_lock")?;
        }
        let nocheck = assert & MODE_NOCHECK != 0;
        if !nocheck {
            acquire(&w, &[t], lock_type == LOCK_EXCLUSIVE)?;
        }
        lock(&w.passive.origin).held[t as usize] = Some(Held { nocheck });
        // A lock ends the fence epoch (as in MPICH).
        w.fenced.store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_unlock`: completes the epoch's operations at `rank` and releases its lock.
    MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, win: Handle) on win => {
        let w = win::win(win)?;
        let Some(t) = target_of(&w, rank)? else { return Ok(()) };
        let held = {
            let o = lock(&w.passive.origin);
            if o.all.is_some() {
                return Err(MpiError::new(ERR_RMA_SYNC, "MPI_Win_unlock inside an MPI_Win_lock_all epoch (MPI_Win_unlock_all ends it)"));
            }
            o.held[t as usize].ok_or_else(|| MpiError::new(ERR_RMA_SYNC, format!("target {t} is not locked by this rank (MPI_Win_lock)")))?
        };
        let done = flush_to(&w, &[t], !held.nocheck);
        lock(&w.passive.origin).held[t as usize] = None;
        done
    }
}

mpi_fn! {
    /// `MPI_Win_lock_all`: a shared lock on every rank of the window.
    MPI_Win_lock_all / PMPI_Win_lock_all(assert: c_int, win: Handle) on win => {
        let w = win::win(win)?;
        win::check_assert(assert)?;
        {
            let o = lock(&w.passive.origin);
            if o.all.is_some() || o.held.iter().any(Option::is_some) {
                return Err(MpiError::new(ERR_RMA_SYNC, "MPI_Win_lock_all inside a passive-target epoch"));
            }
            no_fence_epoch(&w, &o, "MPI_Win_lock_all")?;
        }
        let nocheck = assert & MODE_NOCHECK != 0;
        if !nocheck {
            let all: Vec<u32> = (0..w.comm.size()).collect();
            acquire(&w, &all, false)?;
        }
        lock(&w.passive.origin).all = Some(nocheck);
        // A lock ends the fence epoch (as in MPICH).
        w.fenced.store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_unlock_all`: completes the epoch's operations at every rank and releases the
    /// shared locks.
    MPI_Win_unlock_all / PMPI_Win_unlock_all(win: Handle) on win => {
        let w = win::win(win)?;
        let nocheck = lock(&w.passive.origin).all.ok_or_else(|| MpiError::new(ERR_RMA_SYNC, "no MPI_Win_lock_all epoch is open"))?;
        let all: Vec<u32> = (0..w.comm.size()).collect();
        let done = flush_to(&w, &all, !nocheck);
        lock(&w.passive.origin).all = None;
        done
    }
}

/// The targets of this rank's passive-target epochs, `rank` alone if given (then it must be
/// one of them).
fn epoch_targets(w: &Win, rank: Option<c_int>) -> Result<Vec<u32>, MpiError> {
    let o = lock(&w.passive.origin);
    match rank {
        Some(r) => {
            let Some(t) = target_of(w, r)? else {
                return Ok(Vec::new());
            };
            if o.all.is_none() && o.held[t as usize].is_none() {
                return Err(MpiError::new(
                    ERR_RMA_SYNC,
                    format!(
                        "no passive-target epoch to target {t} is open (MPI_Win_lock or MPI_Win_lock_all)"
                    ),
                ));
            }
            Ok(vec![t])
        }
        None => {
            if o.all.is_some() {
                return Ok((0..w.comm.size()).collect());
            }
            if !o.held.iter().any(Option::is_some) {
                return Err(MpiError::new(
                    ERR_RMA_SYNC,
                    "no passive-target epoch is open (MPI_Win_lock or MPI_Win_lock_all)",
                ));
            }
            Ok((0..o.held.len() as u32)
                .filter(|&t| o.held[t as usize].is_some())
                .collect())
        }
    }
}

mpi_fn! {
    /// `MPI_Win_flush`: the operations to `rank` so far are complete at the target and here.
    MPI_Win_flush / PMPI_Win_flush(rank: c_int, win: Handle) on win => {
        let w = win::win(win)?;
        let t = epoch_targets(&w, Some(rank))?;
        flush_to(&w, &t, false)
    }
}

mpi_fn! {
    /// `MPI_Win_flush_all`: `MPI_Win_flush` to every target of this rank's epochs.
    MPI_Win_flush_all / PMPI_Win_flush_all(win: Handle) on win => {
        let w = win::win(win)?;
        let t = epoch_targets(&w, None)?;
        flush_to(&w, &t, false)
    }
}

/// Flushes those of `targets` with a get or a fetch queued: a put's or an accumulate's data is
/// packed into the batch when it is queued, so only a result still to come keeps an origin
/// buffer busy. The exchange mutexes are held while looking: a result taken by another
/// thread's flush is in when that flush lets go of them.
fn flush_results(w: &Win, targets: &[u32]) -> Result<(), MpiError> {
    let _mine = exclusive_to(w, targets);
    let waiting: Vec<u32> = {
        let q = lock(&w.queue);
        targets
            .iter()
            .copied()
            .filter(|&t| !q.pending[t as usize].is_empty())
            .collect()
    };
    flush_held(w, &waiting, false)
}

mpi_fn! {
    /// `MPI_Win_flush_local`: completes the operations to `rank` at the origin. Puts and
    /// accumulates are complete there when queued (their data is packed), so they stay queued
    /// until a flush or the unlock; a get or a fetch queued makes it flush to `rank` (as
    /// `MPI_Win_flush`) for the data.
    MPI_Win_flush_local / PMPI_Win_flush_local(rank: c_int, win: Handle) on win => {
        let w = win::win(win)?;
        let t = epoch_targets(&w, Some(rank))?;
        flush_results(&w, &t)
    }
}

mpi_fn! {
    /// `MPI_Win_flush_local_all`: as `MPI_Win_flush_local` for every target of the epoch.
    MPI_Win_flush_local_all / PMPI_Win_flush_local_all(win: Handle) on win => {
        let w = win::win(win)?;
        let t = epoch_targets(&w, None)?;
        flush_results(&w, &t)
    }
}

mpi_fn! {
    /// `MPI_Win_sync`: a memory barrier between the program's loads and stores of the window
    /// and the ones of the library (and, on a shared window, of the other ranks).
    MPI_Win_sync / PMPI_Win_sync(win: Handle) on win => {
        win::win(win)?;
        fence(Ordering::SeqCst);
        serve_pending();
        Ok(())
    }
}

/// The end of a request-based operation: checks the epoch, completes the operation at once
/// (a flush to the target) and gives the program a request that is complete.
fn request_done(w: &Win, win: Handle, rank: c_int, request: *mut Handle) -> Result<(), MpiError> {
    if let Some(t) = target_of(w, rank)? {
        flush_to(w, &[t], false)?;
    }
    let h = rt()?.add_request(ReqEntry::new(Request::null(), Meta::ProcNull { comm: win }));
    // SAFETY: the caller's handle, checked not NULL before the operation.
    unsafe { put(request, h, "request") }
}

/// Checks the arguments common to the request-based operations: a request pointer and an
/// open passive-target epoch to `rank`.
fn request_start(w: &Win, rank: c_int, request: *mut Handle) -> Result<(), MpiError> {
    if request.is_null() {
        return Err(MpiError::new(err::ARG, "request is NULL"));
    }
    if let Some(t) = target_of(w, rank)? {
        let o = lock(&w.passive.origin);
        if o.all.is_none() && o.held[t as usize].is_none() {
            return Err(MpiError::new(
                ERR_RMA_SYNC,
                format!(
                    "request-based operations need a passive-target epoch to target {t} (MPI_Win_lock or MPI_Win_lock_all)"
                ),
            ));
        }
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Rput`: `MPI_Put` in a passive-target epoch, complete when the request is returned
    /// (the operation is flushed to its target at once).
    MPI_Rput / PMPI_Rput(origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: c_int, target_datatype: Handle, win: Handle, request: *mut Handle) on win => {
        let w = win::win(win)?;
        request_start(&w, target_rank, request)?;
        // SAFETY: the caller's buffer.
        unsafe { win::put_op(&w, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype) }?;
        request_done(&w, win, target_rank, request)
    }
}

mpi_fn! {
    /// `MPI_Rget`: `MPI_Get` in a passive-target epoch; the origin buffer is written when the
    /// request is returned.
    MPI_Rget / PMPI_Rget(origin_addr: *mut c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: c_int, target_datatype: Handle, win: Handle, request: *mut Handle) on win => {
        let w = win::win(win)?;
        request_start(&w, target_rank, request)?;
        win::get_op(&w, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype)?;
        request_done(&w, win, target_rank, request)
    }
}

mpi_fn! {
    /// `MPI_Raccumulate`: `MPI_Accumulate` in a passive-target epoch, complete when the request
    /// is returned.
    MPI_Raccumulate / PMPI_Raccumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: c_int, target_datatype: Handle, opr: Handle, win: Handle, request: *mut Handle) on win => {
        let w = win::win(win)?;
        request_start(&w, target_rank, request)?;
        // SAFETY: the caller's buffer.
        unsafe { win::acc_op(&w, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, opr) }?;
        request_done(&w, win, target_rank, request)
    }
}

mpi_fn! {
    /// `MPI_Rget_accumulate`: `MPI_Get_accumulate` in a passive-target epoch; the result buffer
    /// is written when the request is returned.
    MPI_Rget_accumulate / PMPI_Rget_accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, result_addr: *mut c_void, result_count: c_int, result_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: c_int, target_datatype: Handle, opr: Handle, win: Handle, request: *mut Handle) on win => {
        let w = win::win(win)?;
        request_start(&w, target_rank, request)?;
        // SAFETY: the caller's buffers.
        unsafe { win::get_accumulate(origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype, target_rank, target_disp, target_count, target_datatype, opr, win) }?;
        request_done(&w, win, target_rank, request)
    }
}
