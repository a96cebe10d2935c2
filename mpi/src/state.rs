//! The state of the MPI library in this process: the agent, the table of communicators and the
//! table of requests, created by `MPI_Init` and kept until the process ends.

use std::collections::HashMap;
use std::ffi::c_int;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::thread::ThreadId;

use viaduct_agent::agent::Agent;
use viaduct_agent::comm::{Comm, Intercomm};
use viaduct_agent::request::{CompleteHandle, Request};

use crate::abi::{self, Handle, err};
use crate::error::MpiError;
use crate::request::Meta;

/// A communicator of the program.
pub struct CommEntry {
    /// The agent's communicator.
    pub comm: Comm,
    /// World rank -> rank here (`u32::MAX`: not a member).
    pub to_comm: Vec<u32>,
    /// The error handler (`MPI_ERRORS_ARE_FATAL`, `MPI_ERRORS_RETURN`, `MPI_ERRORS_ABORT`, a
    /// user handler), or [`UNSET_HANDLER`] while none was ever set (see [`resolve_handler`]).
    pub errhandler: AtomicI32,
    /// For an intercommunicator, its groups and contexts (`comm` is then its `remote`: the
    /// ranks of point-to-point calls and statuses are the remote group's).
    pub inter: Option<Intercomm>,
}

impl CommEntry {
    /// An entry for `comm` with error handler `errhandler`.
    pub fn new(comm: Comm, errhandler: Handle, world_size: u32) -> Self {
        let mut to_comm = vec![u32::MAX; world_size as usize];
        for r in 0..comm.size() {
            if let Some(w) = comm.world_rank(r) {
                to_comm[w as usize] = r;
            }
        }
        CommEntry {
            comm,
            to_comm,
            errhandler: AtomicI32::new(errhandler),
            inter: None,
        }
    }

    /// An entry for intercommunicator `ic` with error handler `errhandler`.
    pub fn new_inter(ic: Intercomm, errhandler: Handle, world_size: u32) -> Self {
        let mut e = CommEntry::new(ic.remote.clone(), errhandler, world_size);
        e.inter = Some(ic);
        e
    }

    /// The local group's communicator: the communicator itself, or an intercommunicator's
    /// local group (its rank and size are the ones of `MPI_Comm_rank` and `MPI_Comm_size`).
    pub fn local(&self) -> &Comm {
        self.inter.as_ref().map_or(&self.comm, |i| &i.local)
    }

    /// The rank here of world rank `w`, if a member.
    pub fn rank_of_world(&self, w: u32) -> Option<u32> {
        self.to_comm
            .get(w as usize)
            .copied()
            .filter(|&r| r != u32::MAX)
    }
}

/// A communicator's entry as [`Runtime::comm_ref`] gives it: borrowed (`MPI_COMM_WORLD`) or
/// shared.
pub enum CommRef<'a> {
    /// An entry the runtime holds for as long as it lives.
    Borrowed(&'a CommEntry),
    /// An entry of the table (which a concurrent `MPI_Comm_free` may remove).
    Shared(Arc<CommEntry>),
}

impl std::ops::Deref for CommRef<'_> {
    type Target = CommEntry;

    #[inline]
    fn deref(&self) -> &CommEntry {
        match self {
            CommRef::Borrowed(e) => e,
            CommRef::Shared(e) => e,
        }
    }
}

/// A request of the program: the agent's request and what its completion must do.
pub struct ReqEntry {
    /// The agent's request.
    pub req: Request,
    /// What the request is for.
    pub meta: Meta,
    /// The operation of a persistent request (`MPI_Send_init`, `MPI_Recv_init`), started
    /// again by each `MPI_Start`.
    pub persist: Option<crate::p2p::Persist>,
}

impl ReqEntry {
    /// An entry for a request that is not persistent.
    pub fn new(req: Request, meta: Meta) -> Self {
        ReqEntry {
            req,
            meta,
            persist: None,
        }
    }

    /// Whether this is a persistent request not started (or completed since its start).
    pub fn inactive(&self) -> bool {
        matches!(self.meta, Meta::Inactive { .. })
    }
}

/// Hashes a handle by one multiplication (handles are small sequential integers; no input
/// comes from outside the process).
#[derive(Default)]
pub struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_i32(&mut self, v: i32) {
        self.0 = u64::from(v as u32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Shards of a [`HandleTable`]: consecutive handles fall in different shards.
const SHARDS: usize = 16;

/// A table by handle, split into [`SHARDS`] locked maps so that threads working on different
/// requests rarely meet on one lock, with a hash of one multiplication.
pub struct HandleTable<V> {
    shards: [Mutex<HashMap<Handle, V, BuildHasherDefault<HandleHasher>>>; SHARDS],
}

impl<V> Default for HandleTable<V> {
    fn default() -> Self {
        HandleTable {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::default())),
        }
    }
}

impl<V> HandleTable<V> {
    fn shard(
        &self,
        h: Handle,
    ) -> MutexGuard<'_, HashMap<Handle, V, BuildHasherDefault<HandleHasher>>> {
        lock(&self.shards[h as u32 as usize % SHARDS])
    }

    /// Puts `v` under `h` (replacing what was there).
    pub fn insert(&self, h: Handle, v: V) {
        self.shard(h).insert(h, v);
    }

    /// Takes what is under `h` out.
    pub fn remove(&self, h: Handle) -> Option<V> {
        self.shard(h).remove(&h)
    }

    /// Runs `f` on what is under `h`, leaving it in the table (other threads looking it up
    /// meanwhile wait, instead of finding it gone).
    pub fn with<R>(&self, h: Handle, f: impl FnOnce(&V) -> R) -> Option<R> {
        self.shard(h).get(&h).map(f)
    }
}

/// The library's state after `MPI_Init`.
pub struct Runtime {
    /// The agent of this rank.
    pub agent: Agent,
    comms: RwLock<HashMap<Handle, Arc<CommEntry>, BuildHasherDefault<HandleHasher>>>,
    /// `MPI_COMM_WORLD`'s entry (also in `comms`), reached without a lock or a look-up: the
    /// communicator of most calls.
    world: Arc<CommEntry>,
    next_comm: AtomicI32,
    requests: HandleTable<ReqEntry>,
    next_request: AtomicI32,
    /// Completion handles of requests of a class (MPICH's generalized request extensions) not
    /// completed yet, by request handle. (Those of `MPI_Grequest_start` are slots of
    /// [`crate::greq`].)
    pub greqs: HandleTable<CompleteHandle>,
    groups: Mutex<HashMap<Handle, Arc<Vec<u32>>>>,
    next_group: AtomicI32,
    /// The thread level provided.
    pub thread_level: c_int,
    /// The thread that called `MPI_Init`.
    pub main_thread: ThreadId,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static INIT_CALLED: AtomicBool = AtomicBool::new(false);
/// `MPI_Init` completed (the world model).
static WORLD: AtomicBool = AtomicBool::new(false);
/// `MPI_Finalize` completed.
static FINALIZED: AtomicBool = AtomicBool::new(false);
/// The runtime ended (its agent finalized): by `MPI_Finalize` or by the last
/// `MPI_Session_finalize`, whichever came last.
static ENDED: AtomicBool = AtomicBool::new(false);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Marks `MPI_Init` as called; `false` if it was called already.
pub fn claim_init() -> bool {
    !INIT_CALLED.swap(true, Ordering::SeqCst)
}

/// Whether `MPI_Init` (or `MPI_Init_thread`) completed (a session alone does not count).
pub fn initialized() -> bool {
    WORLD.load(Ordering::SeqCst)
}

/// Marks `MPI_Init` as done.
pub fn set_initialized() {
    WORLD.store(true, Ordering::SeqCst);
}

/// Whether `MPI_Finalize` completed.
pub fn finalized() -> bool {
    FINALIZED.load(Ordering::SeqCst)
}

/// Marks `MPI_Finalize` as done.
pub fn set_finalized() {
    FINALIZED.store(true, Ordering::SeqCst);
}

/// Whether the runtime ended (no MPI call works any more).
pub fn ended() -> bool {
    ENDED.load(Ordering::SeqCst)
}

/// Marks the runtime as ended (before its agent is finalized).
pub fn set_ended() {
    ENDED.store(true, Ordering::SeqCst);
}

/// The runtime, started or not, ended or not.
pub fn runtime() -> Option<&'static Runtime> {
    RUNTIME.get()
}

/// Installs the runtime (once, at the end of `MPI_Init`).
pub fn install(rt: Runtime) {
    let _ = RUNTIME.set(rt);
}

/// This rank in `MPI_COMM_WORLD`, once initialized.
pub fn world_rank() -> Option<u32> {
    RUNTIME.get().map(|r| r.agent.rank())
}

/// The agent, between `MPI_Init` (or the first `MPI_Session_init`) and the end.
pub fn live_agent() -> Option<&'static Agent> {
    RUNTIME.get().filter(|_| !ended()).map(|r| &r.agent)
}

/// The runtime, or the error of a call before `MPI_Init` (and any session) or after the end.
#[inline]
pub fn rt() -> Result<&'static Runtime, MpiError> {
    match RUNTIME.get() {
        Some(r) if !ended() => Ok(r),
        _ => Err(not_running()),
    }
}

/// The error of a call before `MPI_Init` or after `MPI_Finalize` (out of the callers' way).
#[cold]
#[inline(never)]
fn not_running() -> MpiError {
    if RUNTIME.get().is_none() {
        MpiError::new(
            err::OTHER,
            "MPI is not initialized (MPI_Init was not called)",
        )
    } else {
        MpiError::new(err::OTHER, "MPI was finalized (MPI_Finalize was called)")
    }
}

/// The error handler an object holds while none was ever set on it, nor on the object it was
/// made from (`MPI_COMM_WORLD` and `MPI_COMM_SELF` start with it, as do windows):
/// `MPI_ERRHANDLER_NULL`, which `MPI_*_set_errhandler` refuses, so no program sets it.
pub const UNSET_HANDLER: Handle = abi::ERRHANDLER_NULL;

/// The error handler that reports the errors of an object holding handler `h`, and the
/// handle the handler is called with: `h` and `obj` themselves, or for [`UNSET_HANDLER`] the
/// handler of `MPI_COMM_WORLD` (as MPICH 4.0.2 does; `MPI_ERRORS_ARE_FATAL` while none was
/// set there either) called with `MPI_COMM_WORLD`.
pub fn resolve_handler(h: Handle, obj: Handle) -> (Handle, Handle) {
    if h != UNSET_HANDLER {
        return (h, obj);
    }
    let world = RUNTIME.get().map_or(UNSET_HANDLER, |rt| {
        rt.world.errhandler.load(Ordering::Relaxed)
    });
    (shown_handler(world), abi::COMM_WORLD)
}

/// The handler `MPI_*_get_errhandler` gives for stored handler `h`: `MPI_ERRORS_ARE_FATAL`
/// for [`UNSET_HANDLER`] (as MPICH does), `h` otherwise.
pub fn shown_handler(h: Handle) -> Handle {
    if h == UNSET_HANDLER {
        abi::ERRORS_ARE_FATAL
    } else {
        h
    }
}

/// The error handler that reports errors of `comm` (a communicator, window, session, file
/// pseudo handle or error handler; `MPI_COMM_WORLD`'s for an invalid handle;
/// `MPI_ERRORS_ARE_FATAL` outside `MPI_Init` .. `MPI_Finalize`) and the handle to call it
/// with (see [`resolve_handler`]).
pub fn errhandler_of(comm: Handle) -> (Handle, Handle) {
    if comm as u32 & 0xff00_0000 == crate::file::FILE_ERR_KIND {
        return (crate::file::errhandler_of_key(comm), comm);
    }
    if comm as u32 & 0xff00_0000 == crate::win::WIN_KIND {
        if let Some(h) = crate::win::errhandler_of_key(comm) {
            return resolve_handler(h, comm);
        }
    }
    if let Some(h) = crate::session::errhandler_of(comm) {
        return (h, comm);
    }
    let Some(rt) = RUNTIME.get() else {
        return (abi::ERRORS_ARE_FATAL, comm);
    };
    let comms = rt.comms.read().unwrap_or_else(|e| e.into_inner());
    match comms.get(&comm) {
        Some(e) => resolve_handler(e.errhandler.load(Ordering::Relaxed), comm),
        None => {
            let world = rt.world.errhandler.load(Ordering::Relaxed);
            (shown_handler(world), abi::COMM_WORLD)
        }
    }
}

impl Runtime {
    /// A runtime over `agent` with `MPI_COMM_WORLD` and `MPI_COMM_SELF`.
    pub fn new(agent: Agent, world: Comm, own: Comm, thread_level: c_int) -> Self {
        let size = agent.size();
        let mut comms = HashMap::default();
        let world = Arc::new(CommEntry::new(world, UNSET_HANDLER, size));
        comms.insert(abi::COMM_WORLD, Arc::clone(&world));
        comms.insert(
            abi::COMM_SELF,
            Arc::new(CommEntry::new(own, UNSET_HANDLER, size)),
        );
        Runtime {
            agent,
            comms: RwLock::new(comms),
            world,
            next_comm: AtomicI32::new(abi::COMM_FIRST_USER),
            requests: HandleTable::default(),
            next_request: AtomicI32::new(1),
            greqs: HandleTable::default(),
            groups: Mutex::new(HashMap::new()),
            next_group: AtomicI32::new(abi::GROUP_FIRST_USER),
            thread_level,
            main_thread: std::thread::current().id(),
        }
    }

    /// Whether MPI calls are never made at once from two threads: the thread level provided is
    /// below `MPI_THREAD_MULTIPLE` (the standard leaves the order between threads of
    /// `MPI_THREAD_SERIALIZED` to the program).
    #[inline]
    pub fn serial(&self) -> bool {
        self.thread_level < abi::THREAD_MULTIPLE
    }

    /// The intracommunicator behind handle `h`: an intercommunicator is
    /// `MPI_ERR_UNSUPPORTED_OPERATION` (calls that take one use [`Runtime::comm_any`]).
    pub fn comm(&self, h: Handle) -> Result<Arc<CommEntry>, MpiError> {
        let c = self.comm_any(h)?;
        if c.inter.is_some() {
            return Err(MpiError::new(
                err::UNSUPPORTED_OPERATION,
                format!(
                    "{h:#x} is an intercommunicator; viaduct's MPI library does not take one in \
                     this call (see docs/MPI.md)"
                ),
            ));
        }
        Ok(c)
    }

    /// The entry of communicator `h`, as `comm`, for a call the standard forbids on an
    /// intercommunicator: an intercommunicator is `MPI_ERR_COMM`.
    pub fn intra(&self, h: Handle) -> Result<Arc<CommEntry>, MpiError> {
        let c = self.comm_any(h)?;
        if c.inter.is_some() {
            return Err(MpiError::new(
                err::COMM,
                format!("{h:#x} is an intercommunicator; this call takes an intracommunicator"),
            ));
        }
        Ok(c)
    }

    /// The entry of communicator `h`, intra- or intercommunicator, as [`Runtime::comm_any`]
    /// (a revoked communicator is `MPIX_ERR_REVOKED`), but `MPI_COMM_WORLD`'s borrowed (no
    /// reference count taken and given back per call).
    #[inline]
    pub fn comm_ref(&self, h: Handle) -> Result<CommRef<'_>, MpiError> {
        if h == abi::COMM_WORLD {
            crate::ulfm::check(&self.world)?;
            return Ok(CommRef::Borrowed(&self.world));
        }
        self.comm_any(h).map(CommRef::Shared)
    }

    /// The entry of communicator `h` (either kind), as [`Runtime::comm_local`], for a call
    /// that communicates: a revoked communicator is `MPIX_ERR_REVOKED`.
    pub fn comm_any(&self, h: Handle) -> Result<Arc<CommEntry>, MpiError> {
        let c = self.comm_local(h)?;
        crate::ulfm::check(&c)?;
        Ok(c)
    }

    /// The entry of communicator `h`, intra- or intercommunicator, revoked or not (for the
    /// local calls: rank, size, free, names, error handlers, ...).
    pub fn comm_local(&self, h: Handle) -> Result<Arc<CommEntry>, MpiError> {
        if h == abi::COMM_NULL {
            return Err(MpiError::new(
                err::COMM,
                "the communicator is MPI_COMM_NULL",
            ));
        }
        if h == abi::COMM_WORLD {
            return Ok(Arc::clone(&self.world));
        }
        let comms = self.comms.read().unwrap_or_else(|e| e.into_inner());
        comms.get(&h).cloned().ok_or_else(|| {
            MpiError::new(
                err::COMM,
                format!("{h:#x} is not a communicator of this process"),
            )
        })
    }

    /// Adds a communicator; returns its new handle.
    pub fn add_comm(&self, entry: CommEntry) -> Handle {
        let h = self.next_comm.fetch_add(1, Ordering::Relaxed);
        let mut comms = self.comms.write().unwrap_or_else(|e| e.into_inner());
        comms.insert(h, Arc::new(entry));
        h
    }

    /// Removes communicator `h` (not the predefined ones).
    pub fn remove_comm(&self, h: Handle) -> Result<(), MpiError> {
        if h == abi::COMM_WORLD || h == abi::COMM_SELF {
            return Err(MpiError::new(
                err::COMM,
                "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
            ));
        }
        self.comm_local(h)?;
        let mut comms = self.comms.write().unwrap_or_else(|e| e.into_inner());
        comms.remove(&h);
        Ok(())
    }

    /// Adds a request; returns its handle (never `MPI_REQUEST_NULL`; handles are not reused).
    pub fn add_request(&self, entry: ReqEntry) -> Handle {
        let h = self.new_request_handle();
        self.requests.insert(h, entry);
        h
    }

    /// A fresh request handle (below `0x4000_0000`: the handles of generalized requests have
    /// that bit).
    pub fn new_request_handle(&self) -> Handle {
        loop {
            let h = self.next_request.fetch_add(1, Ordering::Relaxed) & 0x3fff_ffff;
            if h != abi::REQUEST_NULL && h != 0 {
                return h;
            }
        }
    }

    /// Whether a started request of communicator `comm` is still in the table and not
    /// complete (`MPI_Comm_disconnect` waits until none is).
    pub fn pending_on(&self, comm: Handle) -> bool {
        self.requests.shards.iter().any(|s| {
            lock(s)
                .values()
                .any(|e| !e.inactive() && e.meta.comm() == comm && !e.req.is_complete())
        })
    }

    /// Puts a request back under handle `h`.
    pub fn put_request(&self, h: Handle, entry: ReqEntry) {
        if crate::greq::is_greq(h) {
            return crate::greq::put(entry);
        }
        self.requests.insert(h, entry);
    }

    /// Runs `f` on request `h` in place (`MPI_ERR_REQUEST` when it is not a request in the
    /// table); for calls several threads may make on one request at once (`MPI_Parrived`).
    pub fn with_request<R>(
        &self,
        h: Handle,
        f: impl FnOnce(&ReqEntry) -> R,
    ) -> Result<R, MpiError> {
        self.requests.with(h, f).ok_or_else(|| {
            MpiError::new(
                err::REQUEST,
                format!("{h:#x} is not an active request (freed, completed or never started)"),
            )
        })
    }

    /// Takes request `h` out of the table (`MPI_ERR_REQUEST` when it is not a request).
    pub fn take_request(&self, h: Handle) -> Result<ReqEntry, MpiError> {
        if crate::greq::is_greq(h) {
            return crate::greq::take(h);
        }
        self.requests.remove(h).ok_or_else(|| {
            MpiError::new(
                err::REQUEST,
                format!("{h:#x} is not an active request (freed, completed or never started)"),
            )
        })
    }

    /// The members (world ranks, in group order) of group `h`.
    pub fn group(&self, h: Handle) -> Result<Arc<Vec<u32>>, MpiError> {
        match h {
            abi::GROUP_EMPTY => Ok(Arc::new(Vec::new())),
            abi::GROUP_NULL => Err(MpiError::new(err::GROUP, "the group is MPI_GROUP_NULL")),
            _ => lock(&self.groups).get(&h).cloned().ok_or_else(|| {
                MpiError::new(err::GROUP, format!("{h:#x} is not a group of this process"))
            }),
        }
    }

    /// Adds a group; returns its handle.
    pub fn add_group(&self, members: Vec<u32>) -> Handle {
        let h = self.next_group.fetch_add(1, Ordering::Relaxed);
        lock(&self.groups).insert(h, Arc::new(members));
        h
    }

    /// Removes group `h` (`MPI_GROUP_EMPTY` stays).
    pub fn remove_group(&self, h: Handle) -> Result<(), MpiError> {
        if h == abi::GROUP_EMPTY {
            return Ok(());
        }
        lock(&self.groups).remove(&h).map(|_| ()).ok_or_else(|| {
            MpiError::new(err::GROUP, format!("{h:#x} is not a group of this process"))
        })
    }
}
