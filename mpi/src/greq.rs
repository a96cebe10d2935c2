//! Generalized requests: `MPI_Grequest_start`, `MPI_Grequest_complete`,
//! `MPI_Status_set_elements`, `MPI_Status_set_cancelled`, in a table of slots (below); and
//! MPICH's extensions `MPIX_Grequest_start`,
//! `MPIX_Grequest_class_create`, `MPIX_Grequest_class_allocate` on the agent's request classes
//! ([`RequestClass`]).
//!
//! A generalized request of `MPI_Grequest_start` is a slot of one table: its callbacks, its
//! `extra_state` and a state word (generation and flags). Its handle is the slot's index and
//! generation, so a handle waited for, freed or never issued is found out (`MPI_ERR_REQUEST`)
//! without a look-up in a map, also once the slot serves a newer request. The slot runs the
//! callbacks itself (query and free in the wait or test that completes it, free at
//! `MPI_Grequest_complete` for a request freed before, cancel in `MPI_Cancel`); an agent request
//! ([`Request::generalized`]) is attached only when a wait must block or the request is waited
//! for with others, so start, complete and a wait on a complete request are a few loads and
//! stores, three compare-and-swaps (the free list's two, completion's one) and no allocation.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use viaduct_agent::request::{
    BoxError, ClassOps, ClassRequest, CompleteHandle, GrequestOps, QueryStatus, Request,
    RequestClass,
};

use crate::abi::{self, Handle, MpiCount, MpiStatus, err};
use crate::error::{CallbackCode, MpiError};
use crate::request::Meta;
use crate::state::{ReqEntry, rt};

/// The callbacks of a generalized request (their addresses, never 0) and its `extra_state`.
#[derive(Clone, Copy)]
pub struct Callbacks {
    query: usize,
    free: usize,
    cancel: usize,
    extra: usize,
}

impl Callbacks {
    /// Runs the query function on a status of its own; the status's error field holds the
    /// function's code.
    fn query(&self) -> MpiStatus {
        let mut s = MpiStatus::empty();
        s.error = self.query_into(&mut s);
        s
    }

    /// Runs the query function on `s` (emptied first); the function's code.
    #[inline]
    fn query_into(&self, s: &mut MpiStatus) -> c_int {
        *s = MpiStatus::empty();
        // SAFETY: `query` is the address of the program's query function given to
        // MPI_Grequest_start (a `QueryFn`, checked not NULL there), called with its extra_state
        // and a status to fill, as MPI_Grequest_start specifies.
        unsafe { std::mem::transmute::<usize, QueryFn>(self.query)(self.extra as *mut c_void, s) }
    }

    /// Runs the free function; its code.
    fn free(&self) -> c_int {
        // SAFETY: `free` is the address of the program's free function given to
        // MPI_Grequest_start (a `FreeFn`, checked not NULL there), with its extra_state.
        unsafe { std::mem::transmute::<usize, FreeFn>(self.free)(self.extra as *mut c_void) }
    }

    /// Runs the cancel function; its code.
    fn cancel(&self, complete: bool) -> c_int {
        // SAFETY: `cancel` is the address of the program's cancel function given to
        // MPI_Grequest_start (a `CancelFn`, checked not NULL there), with its extra_state.
        unsafe {
            std::mem::transmute::<usize, CancelFn>(self.cancel)(
                self.extra as *mut c_void,
                c_int::from(complete),
            )
        }
    }

    /// Query then free (the wait or test that completes the request): the query's status,
    /// its error field the free function's code, else the query's.
    fn finish(&self) -> MpiStatus {
        let mut s = MpiStatus::empty();
        s.error = self.finish_into(&mut s);
        s
    }

    /// Query on `s`, then free: the free function's code, else the query's. The status is
    /// written where it is wanted and not read back (a wide read of the narrow writes of the
    /// query function stalls).
    #[inline]
    fn finish_into(&self, s: &mut MpiStatus) -> c_int {
        let q = self.query_into(s);
        let f = self.free();
        if f != abi::SUCCESS { f } else { q }
    }
}

/// Handles of generalized requests: `GREQ_KIND`, then the generation, then the slot index.
/// Bit 31 stays clear (handles are positive) and bit 30 set (message requests never have it).
const GREQ_KIND: u32 = 0x4000_0000;
const KIND_MASK: u32 = 0xc000_0000;
/// Bits of the slot index.
const INDEX_BITS: u32 = 20;
/// Most generalized requests alive at once.
pub const MAX_GREQS: u32 = 1 << INDEX_BITS;
/// Bits of the generation: a slot serves 1024 requests before a handle of it repeats.
const GEN_MASK: u32 = (1 << 10) - 1;
const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;
const CHUNKS: usize = (MAX_GREQS as usize) / CHUNK;

/// Flags of a slot's state word (the generation is above them, from bit 8).
const LIVE: u32 = 1;
/// `MPI_Grequest_complete` was called.
const COMPLETE: u32 = 2;
/// An agent request is attached (`Data::req`, `Data::done`): whoever sets the second of
/// `COMPLETE` and `AGENT` completes it.
const AGENT: u32 = 4;
/// `MPI_Request_free` before completion: `MPI_Grequest_complete` runs free and gives the slot
/// back.
const USER_FREED: u32 = 8;
const GEN_SHIFT: u32 = 8;

/// The agent request of a slot, used when a wait blocks or several requests are waited for.
struct Data {
    /// The attached agent request (taken out while a call waits on it).
    req: Option<Request>,
    /// What completes the attached agent request.
    done: Option<CompleteHandle>,
}

/// One generalized request.
struct Slot {
    /// Generation (from bit 8) and flags.
    state: AtomicU32,
    /// The next free slot + 1 (0: none), while on the free list.
    next: AtomicU32,
    /// [`Callbacks`]: query, free, cancel, extra_state; written by `MPI_Grequest_start` before
    /// the state word says `LIVE` (release), read after reading it (acquire).
    callbacks: [AtomicUsize; 4],
    data: Mutex<Data>,
}

impl Slot {
    const fn new() -> Self {
        Slot {
            state: AtomicU32::new(0),
            next: AtomicU32::new(0),
            callbacks: [const { AtomicUsize::new(0) }; 4],
            data: Mutex::new(Data {
                req: None,
                done: None,
            }),
        }
    }
}

/// The first chunk of slots, reached without a check that it was made (most programs never
/// have more requests alive).
static FIRST: [Slot; CHUNK] = [const { Slot::new() }; CHUNK];

/// The table: chunks of slots made as needed (never moved or freed; the first is [`FIRST`]),
/// and a free list (a stack whose head carries a tag against reuse between a read and its
/// compare-and-swap).
struct Slots {
    chunks: [OnceLock<Box<[Slot]>>; CHUNKS],
    /// Slots handed out so far (those above were never used).
    used: AtomicU32,
    /// Tag (high 32 bits) and free slot + 1 (low 32 bits; 0: empty).
    head: AtomicU64,
}

static SLOTS: Slots = Slots {
    chunks: [const { OnceLock::new() }; CHUNKS],
    used: AtomicU32::new(0),
    head: AtomicU64::new(0),
};

fn lock_data(slot: &Slot) -> MutexGuard<'_, Data> {
    slot.data.lock().unwrap_or_else(|e| e.into_inner())
}

/// The slot of index `i`, if made.
#[inline]
fn slot(i: u32) -> Option<&'static Slot> {
    if (i as usize) < CHUNK {
        return Some(&FIRST[i as usize]);
    }
    let chunk = SLOTS.chunks.get((i >> CHUNK_BITS) as usize)?.get()?;
    chunk.get(i as usize & (CHUNK - 1))
}

/// Sets `a` from `current` to `new` if it holds `current`; else what it holds.
#[inline(always)]
fn swap_state(a: &AtomicU32, current: u32, new: u32) -> Result<(), u32> {
    a.compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
        .map(|_| ())
}

/// As [`swap_state`], for the head of the free list.
#[inline(always)]
fn swap_head(current: u64, new: u64) -> Result<(), u64> {
    SLOTS
        .head
        .compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
        .map(|_| ())
}

/// A free slot's index: from the free list, else a slot never used. `serial`: MPI calls are
/// never made at once from two threads (thread level below `MPI_THREAD_MULTIPLE`), so the
/// list is taken from by a plain load and store (the caller's own order between its threads,
/// which the standard asks of it, orders them), not a compare-and-swap.
#[inline(always)]
fn alloc(serial: bool) -> Option<u32> {
    let mut head = SLOTS.head.load(Ordering::Acquire);
    if serial {
        if head as u32 == 0 {
            return alloc_new();
        }
        let i = head as u32 - 1;
        let next = slot(i).map_or(0, |s| s.next.load(Ordering::Relaxed));
        let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(next);
        SLOTS.head.store(new, Ordering::Release);
        return Some(i);
    }
    while head as u32 != 0 {
        let i = head as u32 - 1;
        let next = slot(i).map_or(0, |s| s.next.load(Ordering::Relaxed));
        let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(next);
        match swap_head(head, new) {
            Ok(()) => return Some(i),
            Err(h) => head = h,
        }
    }
    alloc_new()
}

/// A slot never used (`None`: all are in use).
#[cold]
#[inline(never)]
fn alloc_new() -> Option<u32> {
    let i = SLOTS
        .used
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < MAX_GREQS).then_some(n + 1)
        })
        .ok()?;
    if i as usize >= CHUNK {
        SLOTS.chunks[(i >> CHUNK_BITS) as usize]
            .get_or_init(|| (0..CHUNK).map(|_| Slot::new()).collect());
    }
    Some(i)
}

/// Puts slot `i` on the free list (`serial`: as for [`alloc`]).
#[inline(always)]
fn push_free(i: u32, s: &Slot, serial: bool) {
    let mut head = SLOTS.head.load(Ordering::Acquire);
    if serial {
        s.next.store(head as u32, Ordering::Relaxed);
        let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(i + 1);
        SLOTS.head.store(new, Ordering::Release);
        return;
    }
    loop {
        s.next.store(head as u32, Ordering::Relaxed);
        let new = ((head >> 32).wrapping_add(1) << 32) | u64::from(i + 1);
        match swap_head(head, new) {
            Ok(()) => return,
            Err(h) => head = h,
        }
    }
}

/// Whether `h` names a generalized request of `MPI_Grequest_start` (live or not).
#[inline]
pub fn is_greq(h: Handle) -> bool {
    h as u32 & KIND_MASK == GREQ_KIND
}

/// A generalized request named by its slot and generation.
#[derive(Clone, Copy, Debug)]
pub struct GreqRef {
    index: u32,
    generation: u32,
}

impl GreqRef {
    fn slot(&self) -> &'static Slot {
        // A reference is made only for a slot that exists.
        slot(self.index).unwrap_or_else(|| unreachable!("slot of a checked handle"))
    }
}

#[cold]
#[inline(never)]
fn stale(h: Handle) -> MpiError {
    MpiError::new(
        err::REQUEST,
        format!(
            "{h:#x} is not an active request (a generalized request completed and waited for, \
             freed, or never started)"
        ),
    )
}

/// The request behind `h` and its state word, if `h` names a live request.
#[inline]
fn live(h: Handle) -> Result<(GreqRef, &'static Slot, u32), MpiError> {
    let u = h as u32;
    let index = u & (MAX_GREQS - 1);
    let generation = (u >> INDEX_BITS) & GEN_MASK;
    let s = slot(index).ok_or_else(|| stale(h))?;
    let st = s.state.load(Ordering::Acquire);
    if st & LIVE == 0 || (st >> GEN_SHIFT) & GEN_MASK != generation || st & USER_FREED != 0 {
        return Err(stale(h));
    }
    Ok((GreqRef { index, generation }, s, st))
}

/// Starts a generalized request; its handle (`serial`: as for [`alloc`]).
#[inline(always)]
fn start(cb: Callbacks, serial: bool) -> Result<Handle, MpiError> {
    start_fast(cb, serial).ok_or_else(too_many)
}

/// The error of a start with every slot in use.
#[cold]
#[inline(never)]
fn too_many() -> MpiError {
    MpiError::new(
        err::INTERN,
        format!("{MAX_GREQS} generalized requests are alive; complete and wait for some first"),
    )
}

/// Starts a generalized request; its handle (`None`: every slot is in use).
#[inline(always)]
fn start_fast(cb: Callbacks, serial: bool) -> Option<Handle> {
    let i = alloc(serial)?;
    let Some(s) = slot(i) else {
        unreachable!("a slot handed out exists")
    };
    for (a, v) in s
        .callbacks
        .iter()
        .zip([cb.query, cb.free, cb.cancel, cb.extra])
    {
        a.store(v, Ordering::Relaxed);
    }
    let generation = (s.state.load(Ordering::Relaxed) >> GEN_SHIFT) & GEN_MASK;
    s.state
        .store((generation << GEN_SHIFT) | LIVE, Ordering::Release);
    Some((GREQ_KIND | (generation << INDEX_BITS) | i) as Handle)
}

/// Gives slot `r` back (its request completed, its free function ran or runs no more).
#[inline]
fn release(r: GreqRef, s: &Slot) {
    let st = s.state.load(Ordering::Acquire);
    if st & AGENT != 0 {
        let taken = {
            let mut d = lock_data(s);
            (d.req.take(), d.done.take())
        };
        drop(taken);
    }
    let generation = (r.generation + 1) & GEN_MASK;
    s.state.store(generation << GEN_SHIFT, Ordering::Release);
    push_free(r.index, s, false);
}

#[inline(always)]
fn callbacks(s: &Slot) -> Result<Callbacks, MpiError> {
    let [q, f, c, e] = &s.callbacks;
    let (query, free, cancel, extra) = (
        q.load(Ordering::Relaxed),
        f.load(Ordering::Relaxed),
        c.load(Ordering::Relaxed),
        e.load(Ordering::Relaxed),
    );
    if query == 0 || free == 0 || cancel == 0 {
        return Err(MpiError::new(
            err::REQUEST,
            "the generalized request has no callbacks",
        ));
    }
    Ok(Callbacks {
        query,
        free,
        cancel,
        extra,
    })
}

/// The state word of a live request of generation `generation` with no flag but `LIVE`.
#[inline(always)]
fn live_word(h: Handle) -> u32 {
    ((((h as u32) >> INDEX_BITS) & GEN_MASK) << GEN_SHIFT) | LIVE
}

/// `MPI_Grequest_complete` on `h`.
#[inline]
fn complete(h: Handle) -> Result<(), MpiError> {
    if complete_fast(h) {
        return Ok(());
    }
    complete_slow(h)
}

/// `MPI_Grequest_complete` on `h` in the common case (live, of this generation, not complete,
/// not freed, no agent request: one comparison); `false`: not done, see [`complete`].
#[inline(always)]
fn complete_fast(h: Handle) -> bool {
    let Some(s) = slot(h as u32 & (MAX_GREQS - 1)) else {
        return false;
    };
    let st = live_word(h);
    s.state.load(Ordering::Acquire) == st && swap_state(&s.state, st, st | COMPLETE).is_ok()
}

/// [`complete`] but for the common case.
#[cold]
#[inline(never)]
fn complete_slow(h: Handle) -> Result<(), MpiError> {
    let (r, s, mut st) = match live(h) {
        Ok(x) => x,
        // Freed before completion: still to be completed (then its free function runs).
        Err(e) => {
            let u = h as u32;
            let index = u & (MAX_GREQS - 1);
            let generation = (u >> INDEX_BITS) & GEN_MASK;
            let s = slot(index).ok_or(e)?;
            let st = s.state.load(Ordering::Acquire);
            if st & LIVE == 0 || (st >> GEN_SHIFT) & GEN_MASK != generation {
                return Err(stale(h));
            }
            (GreqRef { index, generation }, s, st)
        }
    };
    loop {
        if st & LIVE == 0 || (st >> GEN_SHIFT) & GEN_MASK != r.generation {
            return Err(stale(h));
        }
        if st & COMPLETE != 0 {
            return Err(MpiError::new(
                err::REQUEST,
                format!("{h:#x} was completed already (MPI_Grequest_complete is called once)"),
            ));
        }
        match swap_state(&s.state, st, st | COMPLETE) {
            Ok(()) => break,
            Err(now) => st = now,
        }
    }
    if st & AGENT != 0 {
        let done = lock_data(s).done.take();
        if let Some(d) = done {
            d.complete()?;
        }
    }
    if st & USER_FREED != 0 {
        let cb = callbacks(s);
        release(r, s);
        let rc = cb?.free();
        if rc != abi::SUCCESS {
            return Err(MpiError::new(
                rc,
                format!("the free function returned error code {rc}"),
            ));
        }
    }
    Ok(())
}

/// Attaches an agent request to `s` (once), completed by whoever sets the second of
/// `COMPLETE` and `AGENT`.
fn attach(s: &Slot) {
    if s.state.load(Ordering::Acquire) & AGENT != 0 {
        return;
    }
    let (req, done) = Request::generalized(());
    {
        let mut d = lock_data(s);
        d.req = Some(req);
        d.done = Some(done);
    }
    let prev = s.state.fetch_or(AGENT, Ordering::AcqRel);
    if prev & COMPLETE != 0 {
        let done = lock_data(s).done.take();
        if let Some(d) = done {
            let _ = d.complete();
        }
    }
}

/// Waits for the attached agent request of `s` (attaching one first if needed).
fn wait_agent(h: Handle, s: &Slot) -> Result<(), MpiError> {
    attach(s);
    let req = lock_data(s).req.take();
    let mut req = req.ok_or_else(|| {
        MpiError::new(
            err::REQUEST,
            format!("{h:#x} is being waited for by another call"),
        )
    })?;
    req.wait_with_error();
    Ok(())
}

/// `MPI_Wait` on generalized request `h`: fills `out` by the query function; the callbacks'
/// code (also in `out`'s error field). `serial`: as for [`alloc`].
#[inline]
pub fn wait(h: Handle, out: &mut MpiStatus, serial: bool) -> Result<c_int, MpiError> {
    match wait_fast(h, out, serial) {
        Some(code) => Ok(code),
        None => wait_slow(h, out),
    }
}

/// [`wait`] in the common case (live, of this generation, complete, not freed, no agent
/// request: one comparison); `None`: nothing done, see [`wait`].
#[inline(always)]
fn wait_fast(h: Handle, out: &mut MpiStatus, serial: bool) -> Option<c_int> {
    let index = h as u32 & (MAX_GREQS - 1);
    let s = slot(index)?;
    let st = live_word(h) | COMPLETE;
    if !is_greq(h) || s.state.load(Ordering::Acquire) != st {
        return None;
    }
    let code = callbacks(s).ok()?.finish_into(out);
    out.error = code;
    let generation = ((st >> GEN_SHIFT) + 1) & GEN_MASK;
    s.state.store(generation << GEN_SHIFT, Ordering::Release);
    push_free(index, s, serial);
    Some(code)
}

/// [`wait`] but for the common case.
#[cold]
#[inline(never)]
fn wait_slow(h: Handle, out: &mut MpiStatus) -> Result<c_int, MpiError> {
    let (r, s, st) = live(h)?;
    if st & (COMPLETE | AGENT) != COMPLETE {
        // Not complete, or an agent request attached (it completes once MPI_Grequest_complete
        // stopped touching the slot).
        wait_agent(h, s)?;
    }
    let cb = callbacks(s)?;
    let code = cb.finish_into(out);
    out.error = code;
    release(r, s);
    Ok(code)
}

/// What `MPI_Test` found on a generalized request.
pub enum Tested {
    /// Complete: its status (the request is gone).
    Done(MpiStatus),
    /// Not complete.
    Pending,
    /// An agent request is attached: test it as any request.
    Attached,
}

/// `MPI_Test` on generalized request `h`.
pub fn test(h: Handle) -> Result<Tested, MpiError> {
    let (r, s, st) = live(h)?;
    if st & AGENT != 0 {
        return Ok(Tested::Attached);
    }
    if st & COMPLETE == 0 {
        return Ok(Tested::Pending);
    }
    let out = callbacks(s)?.finish();
    release(r, s);
    Ok(Tested::Done(out))
}

/// `MPI_Request_get_status` on generalized request `h`: its status if complete (the query
/// runs; the request stays).
pub fn get_status(h: Handle) -> Result<Option<MpiStatus>, MpiError> {
    let (_, s, st) = live(h)?;
    if st & COMPLETE == 0 {
        return Ok(None);
    }
    if st & AGENT != 0 {
        let d = lock_data(s);
        if d.req.as_ref().is_none_or(|q| !q.is_complete()) {
            return Ok(None);
        }
    }
    Ok(Some(callbacks(s)?.query()))
}

/// `MPI_Cancel` on generalized request `h`: its cancel function, told whether
/// `MPI_Grequest_complete` was called.
pub fn cancel(h: Handle) -> Result<(), MpiError> {
    let (_, s, st) = live(h)?;
    let rc = callbacks(s)?.cancel(st & COMPLETE != 0);
    if rc != abi::SUCCESS {
        return Err(MpiError::new(
            rc,
            format!("the cancel function returned error code {rc}"),
        ));
    }
    Ok(())
}

/// `MPI_Request_free` on generalized request `h`: free runs now if it is complete, else at
/// `MPI_Grequest_complete`.
pub fn request_free(h: Handle) -> Result<(), MpiError> {
    let (r, s, mut st) = live(h)?;
    loop {
        if st & COMPLETE != 0 {
            if st & AGENT != 0 {
                wait_agent(h, s)?;
            }
            let cb = callbacks(s)?;
            release(r, s);
            let rc = cb.free();
            if rc != abi::SUCCESS {
                return Err(MpiError::new(
                    rc,
                    format!("the free function returned error code {rc}"),
                ));
            }
            return Ok(());
        }
        match swap_state(&s.state, st, st | USER_FREED) {
            Ok(()) => return Ok(()),
            Err(now) => st = now,
        }
    }
}

/// Takes generalized request `h` out as an entry for the waits and tests of several requests
/// (an agent request attached).
pub fn take(h: Handle) -> Result<ReqEntry, MpiError> {
    let (r, s, _) = live(h)?;
    attach(s);
    let req = lock_data(s).req.take().ok_or_else(|| {
        MpiError::new(
            err::REQUEST,
            format!("{h:#x} is being waited for by another call"),
        )
    })?;
    Ok(ReqEntry::new(req, Meta::Greq { slot: r }))
}

/// Puts an entry of [`take`] back.
pub fn put(e: ReqEntry) {
    if let Meta::Greq { slot } = e.meta {
        lock_data(slot.slot()).req = Some(e.req);
    }
}

/// The status of a request taken by [`take`] whose agent request completed: query then free.
pub fn finish(r: GreqRef) -> MpiStatus {
    match callbacks(r.slot()) {
        Ok(cb) => cb.finish(),
        Err(e) => MpiStatus {
            error: e.class,
            ..MpiStatus::empty()
        },
    }
}

/// Gives back the slot of a request taken by [`take`] and completed.
pub fn retire(r: GreqRef) {
    release(r, r.slot());
}

/// `MPI_Grequest_query_function`.
pub type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
/// `MPI_Grequest_free_function`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
pub type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// The C callbacks of a generalized request and the status its query filled last.
struct CGreq {
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    /// The caller's `extra_state`, handed back to each callback.
    extra: usize,
    status: Arc<Mutex<MpiStatus>>,
}

fn code(rc: c_int) -> Result<(), BoxError> {
    if rc == abi::SUCCESS {
        Ok(())
    } else {
        Err(Box::new(CallbackCode(rc)))
    }
}

impl GrequestOps for CGreq {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        let mut s = MpiStatus::empty();
        let rc = match self.query {
            // SAFETY: the program's query function, called with its extra_state and a status
            // of this frame, as MPI_Grequest_start specifies.
            Some(f) => unsafe { f(self.extra as *mut c_void, &mut s) },
            None => abi::SUCCESS,
        };
        status.set_count(s.count().max(0) as u64);
        status.set_cancelled(s.cancelled());
        status.set_source(u32::try_from(s.source).ok());
        status.set_tag(u32::try_from(s.tag).ok());
        *self.status.lock().unwrap_or_else(|e| e.into_inner()) = s;
        code(rc)
    }

    fn free(&self) -> Result<(), BoxError> {
        match self.free {
            // SAFETY: the program's free function with its extra_state.
            Some(f) => code(unsafe { f(self.extra as *mut c_void) }),
            None => Ok(()),
        }
    }

    fn cancel(&self, complete: bool, _: &CompleteHandle) -> Result<(), BoxError> {
        // The program completes the request itself with MPI_Grequest_complete on its handle.
        match self.cancel {
            // SAFETY: the program's cancel function with its extra_state.
            Some(f) => code(unsafe { f(self.extra as *mut c_void, c_int::from(complete)) }),
            None => Ok(()),
        }
    }
}

mpi_fn! {
    /// `MPI_Grequest_start`: a slot of the table of generalized requests (no allocation once
    /// the table has a free slot); the handle names the slot and its generation.
    MPI_Grequest_start / PMPI_Grequest_start(query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, extra_state: *mut c_void, request: *mut Handle) on abi::COMM_WORLD => {
        let serial = rt()?.serial();
        let (Some(query), Some(free), Some(cancel), false) =
            (query_fn, free_fn, cancel_fn, request.is_null())
        else {
            return Err(bad_start(request.is_null()));
        };
        let h = start(Callbacks {
            query: query as usize,
            free: free as usize,
            cancel: cancel as usize,
            extra: extra_state as usize,
        }, serial)?;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { *request = h };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Grequest_complete`: from any thread, once.
    MPI_Grequest_complete / PMPI_Grequest_complete(request: Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        if is_greq(request) {
            return complete(request);
        }
        // A request of a class (MPICH's extensions).
        let done = rt.greqs.remove(request);
        let done = done.ok_or_else(|| MpiError::new(
            err::REQUEST,
            format!("{request:#x} is not a generalized request waiting for completion"),
        ))?;
        done.complete()?;
        Ok(())
    }
}

/// The error of `MPI_Grequest_start` with a NULL request or function.
#[cold]
#[inline(never)]
fn bad_start(null_request: bool) -> MpiError {
    if null_request {
        MpiError::new(err::ARG, "request is NULL")
    } else {
        MpiError::new(
            err::ARG,
            "the query, free and cancel functions are all required",
        )
    }
}

/// Sets the byte count of `status` to `count` elements of `datatype`.
///
/// # Safety
///
/// `status` is a writable status.
#[inline(always)]
unsafe fn set_elements(
    status: *mut MpiStatus,
    datatype: Handle,
    count: MpiCount,
) -> Result<(), MpiError> {
    // SAFETY: the caller's status.
    let s = unsafe { status.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "status is NULL"))?;
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("count {count} is negative"),
        ));
    }
    let u = datatype as u32;
    // A predefined datatype names its size (bits 8..16); others are looked up.
    let size = if u & 0xff00_0000 == 0x4c00_0000 {
        ((u >> 8) & 0xff) as usize
    } else {
        crate::types::type_size(datatype)?
    };
    let bytes = (size as i64)
        .checked_mul(count)
        .ok_or_else(|| MpiError::new(err::COUNT, format!("{count} elements overflow")))?;
    s.set_count(bytes);
    Ok(())
}

mpi_fn! {
    /// `MPI_Status_set_elements`.
    MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut MpiStatus, datatype: Handle, count: c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's status.
        unsafe { set_elements(status, datatype, MpiCount::from(count)) }
    }
}

mpi_fn! {
    /// `MPI_Status_set_elements_x`.
    MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut MpiStatus, datatype: Handle, count: MpiCount) on abi::COMM_WORLD => {
        // SAFETY: the caller's status.
        unsafe { set_elements(status, datatype, count) }
    }
}

mpi_fn! {
    /// `MPI_Status_set_cancelled`.
    MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's status.
        let s = unsafe { status.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "status is NULL"))?;
        s.set_cancelled(flag != 0);
        Ok(())
    }
}

/// `MPIX_Grequest_poll_function`: advances one request without blocking (it may call
/// `MPI_Grequest_complete`).
pub type PollFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
/// `MPIX_Grequest_wait_function`: blocks at most `timeout` seconds for any of `count`
/// requests (given by their extra states).
pub type WaitFn = unsafe extern "C" fn(c_int, *mut *mut c_void, f64, *mut MpiStatus) -> c_int;

/// The C functions of a request class (MPICH's generalized request extensions), as the agent's
/// [`ClassOps`]: `poll` is called by tests and waits on one request, `wait` once per blocking
/// round with every request of the class in the wait.
#[derive(Clone, Copy)]
struct CClass {
    query: QueryFn,
    free: FreeFn,
    cancel: CancelFn,
    poll: Option<PollFn>,
    wait: Option<WaitFn>,
}

/// One request of a [`CClass`]: the program's extra state and the status its query filled.
struct CState {
    extra: usize,
    status: Arc<Mutex<MpiStatus>>,
}

impl CClass {
    /// The functions' addresses: requests started with the same functions share a class.
    fn key(&self) -> [usize; 5] {
        [
            self.query as usize,
            self.free as usize,
            self.cancel as usize,
            self.poll.map_or(0, |f| f as usize),
            self.wait.map_or(0, |f| f as usize),
        ]
    }
}

impl ClassOps for CClass {
    type State = CState;

    fn query(&self, state: &CState, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        CGreq {
            query: Some(self.query),
            free: None,
            cancel: None,
            extra: state.extra,
            status: Arc::clone(&state.status),
        }
        .query(status)
    }

    fn free(&self, state: &CState) -> Result<(), BoxError> {
        // SAFETY: the program's free function with its extra_state.
        code(unsafe { (self.free)(state.extra as *mut c_void) })
    }

    fn cancel(&self, state: &CState, complete: bool) -> Result<(), BoxError> {
        // SAFETY: the program's cancel function with its extra_state.
        code(unsafe { (self.cancel)(state.extra as *mut c_void, c_int::from(complete)) })
    }

    fn poll(&self, request: &ClassRequest<'_, CState>) -> Result<(), BoxError> {
        let Some(p) = self.poll else { return Ok(()) };
        let mut s = MpiStatus::empty();
        // SAFETY: the program's poll function with its extra_state and a status of this frame.
        code(unsafe { p(request.state().extra as *mut c_void, &mut s) })
    }

    fn wait(
        &self,
        requests: &[ClassRequest<'_, CState>],
        timeout: Duration,
    ) -> Result<(), BoxError> {
        let Some(w) = self.wait else { return Ok(()) };
        let mut states: Vec<*mut c_void> = requests
            .iter()
            .filter(|r| !r.is_complete())
            .map(|r| r.state().extra as *mut c_void)
            .collect();
        if states.is_empty() {
            return Ok(());
        }
        let mut s = MpiStatus::empty();
        // SAFETY: the program's wait function with an array of `states.len()` extra states and
        // a status of this frame.
        code(unsafe {
            w(
                states.len() as c_int,
                states.as_mut_ptr(),
                timeout.as_secs_f64(),
                &mut s,
            )
        })
    }
}

/// The request classes: those of `MPIX_Grequest_class_create` by handle, and those of
/// `MPIX_Grequest_start` by their functions (requests started with the same functions share a
/// class, so one wait round hands them all to the wait function).
struct Classes {
    by_handle: HashMap<Handle, RequestClass<CClass>>,
    by_fns: HashMap<[usize; 5], RequestClass<CClass>>,
    next: Handle,
}

fn classes() -> &'static Mutex<Classes> {
    static CLASSES: OnceLock<Mutex<Classes>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        Mutex::new(Classes {
            by_handle: HashMap::new(),
            by_fns: HashMap::new(),
            next: 1,
        })
    })
}

fn class_fns(
    query: Option<QueryFn>,
    free: Option<FreeFn>,
    cancel: Option<CancelFn>,
    poll: Option<PollFn>,
    wait: Option<WaitFn>,
) -> Result<CClass, MpiError> {
    match (query, free, cancel) {
        (Some(query), Some(free), Some(cancel)) => Ok(CClass {
            query,
            free,
            cancel,
            poll,
            wait,
        }),
        _ => Err(MpiError::new(
            err::ARG,
            "the query, free and cancel functions are all required",
        )),
    }
}

/// Starts a request of `class` with `extra_state`; writes its handle.
///
/// # Safety
///
/// `request` is the caller's writable handle.
unsafe fn start_in(
    class: &RequestClass<CClass>,
    extra_state: *mut c_void,
    request: *mut Handle,
) -> Result<(), MpiError> {
    let rt = rt()?;
    if request.is_null() {
        return Err(MpiError::new(err::ARG, "request is NULL"));
    }
    let status = Arc::new(Mutex::new(MpiStatus::empty()));
    let (req, done) = class.start(CState {
        extra: extra_state as usize,
        status: Arc::clone(&status),
    });
    let h = rt.new_request_handle();
    rt.greqs.insert(h, done);
    rt.put_request(h, ReqEntry::new(req, Meta::ClassGreq { status }));
    // SAFETY: the caller's handle, checked not NULL.
    unsafe { *request = h };
    Ok(())
}

mpi_fn! {
    /// `MPIX_Grequest_start` (MPICH's extension): a generalized request with a poll function
    /// (called by tests and waits) and a wait function (called by blocking waits with every
    /// request started with the same functions).
    MPIX_Grequest_start / PMPIX_Grequest_start(query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, poll_fn: Option<PollFn>, wait_fn: Option<WaitFn>, extra_state: *mut c_void, request: *mut Handle) on abi::COMM_WORLD => {
        let fns = class_fns(query_fn, free_fn, cancel_fn, poll_fn, wait_fn)?;
        let class = {
            let mut c = classes().lock().unwrap_or_else(|e| e.into_inner());
            c.by_fns.entry(fns.key()).or_insert_with(|| RequestClass::new(fns)).clone()
        };
        // SAFETY: the caller's handle.
        unsafe { start_in(&class, extra_state, request) }
    }
}

mpi_fn! {
    /// `MPIX_Grequest_class_create` (MPICH's extension).
    MPIX_Grequest_class_create / PMPIX_Grequest_class_create(query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, poll_fn: Option<PollFn>, wait_fn: Option<WaitFn>, greq_class: *mut Handle) on abi::COMM_WORLD => {
        let fns = class_fns(query_fn, free_fn, cancel_fn, poll_fn, wait_fn)?;
        if greq_class.is_null() {
            return Err(MpiError::new(err::ARG, "greq_class is NULL"));
        }
        let mut c = classes().lock().unwrap_or_else(|e| e.into_inner());
        let h = c.next;
        c.next += 1;
        c.by_handle.insert(h, RequestClass::new(fns));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { *greq_class = h };
        Ok(())
    }
}

mpi_fn! {
    /// `MPIX_Grequest_class_allocate` (MPICH's extension): a request of the class.
    MPIX_Grequest_class_allocate / PMPIX_Grequest_class_allocate(greq_class: Handle, extra_state: *mut c_void, request: *mut Handle) on abi::COMM_WORLD => {
        let class = classes().lock().unwrap_or_else(|e| e.into_inner()).by_handle.get(&greq_class).cloned();
        let class = class.ok_or_else(|| MpiError::new(err::ARG, format!("{greq_class} is not a request class")))?;
        // SAFETY: the caller's handle.
        unsafe { start_in(&class, extra_state, request) }
    }
}

/// The Fortran callbacks of a generalized request started from Fortran and its
/// `extra_state` (the address of the program's `INTEGER(KIND=MPI_ADDRESS_KIND)`). The request's
/// C callbacks become the `f77_*` callers below, with the address of this as their
/// `extra_state`; `f77_free`, the last callback of every request, frees it.
struct FortranGreq {
    query: usize,
    free: usize,
    cancel: usize,
    extra: usize,
}

/// `SUBROUTINE QUERY_FN(EXTRA_STATE, STATUS, IERROR)`.
type FQueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus, *mut c_int);
/// `SUBROUTINE FREE_FN(EXTRA_STATE, IERROR)`.
type FFreeFn = unsafe extern "C" fn(*mut c_void, *mut c_int);
/// `SUBROUTINE CANCEL_FN(EXTRA_STATE, COMPLETE, IERROR)` (`COMPLETE` a `LOGICAL`).
type FCancelFn = unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_int);

/// The query function of a request started from Fortran.
///
/// # Safety
///
/// `g` is the `FortranGreq` of a live request; `status` a writable status.
unsafe extern "C" fn f77_query(g: *mut c_void, status: *mut MpiStatus) -> c_int {
    // SAFETY: the request's `FortranGreq`, alive until its free function ran.
    let g = unsafe { &*(g as *const FortranGreq) };
    let mut ierr: c_int = abi::SUCCESS;
    // SAFETY: the program's Fortran query subroutine (checked not NULL at the start), every
    // argument by reference; a Fortran status is MPICH's C status.
    unsafe {
        std::mem::transmute::<usize, FQueryFn>(g.query)(g.extra as *mut c_void, status, &mut ierr)
    };
    ierr
}

/// The free function of a request started from Fortran; frees its `FortranGreq`.
///
/// # Safety
///
/// `g` is the `FortranGreq` of a request whose free function runs now, once.
unsafe extern "C" fn f77_free(g: *mut c_void) -> c_int {
    // SAFETY: made by `MPII_Grequest_set_lang_f77` with `Box::into_raw`; the free function
    // is the last callback of a request and runs once.
    let g = unsafe { Box::from_raw(g as *mut FortranGreq) };
    let mut ierr: c_int = abi::SUCCESS;
    // SAFETY: the program's Fortran free subroutine, every argument by reference.
    unsafe { std::mem::transmute::<usize, FFreeFn>(g.free)(g.extra as *mut c_void, &mut ierr) };
    ierr
}

/// The cancel function of a request started from Fortran.
///
/// # Safety
///
/// `g` is the `FortranGreq` of a live request.
unsafe extern "C" fn f77_cancel(g: *mut c_void, complete: c_int) -> c_int {
    // SAFETY: the request's `FortranGreq`, alive until its free function ran.
    let g = unsafe { &*(g as *const FortranGreq) };
    let (mut ierr, mut logical) = (abi::SUCCESS, complete);
    // SAFETY: the program's Fortran cancel subroutine, every argument by reference (gfortran's
    // .TRUE. is 1, as C's true).
    unsafe {
        std::mem::transmute::<usize, FCancelFn>(g.cancel)(
            g.extra as *mut c_void,
            &mut logical,
            &mut ierr,
        )
    };
    ierr
}

/// `MPII_Grequest_set_lang_f77`: MPICH's Fortran library calls this right after
/// `MPI_Grequest_start` from Fortran, before the handle reaches the program, so that the
/// request's callbacks are called as Fortran subroutines (every argument by reference, the
/// error code in a last argument).
///
/// # Safety
///
/// `greq` was just started with Fortran subroutines as its callbacks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Grequest_set_lang_f77(greq: Handle) {
    if !is_greq(greq) {
        return;
    }
    let Ok((_, s, _)) = live(greq) else { return };
    let Ok(cb) = callbacks(s) else { return };
    let g = Box::into_raw(Box::new(FortranGreq {
        query: cb.query,
        free: cb.free,
        cancel: cb.cancel,
        extra: cb.extra,
    }));
    let ours: [usize; 4] = [
        f77_query as *const () as usize,
        f77_free as *const () as usize,
        f77_cancel as *const () as usize,
        g as usize,
    ];
    for (a, v) in s.callbacks.iter().zip(ours) {
        a.store(v, Ordering::Release);
    }
}
