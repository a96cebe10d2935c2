//! One-sided communication, active target (MPI 4.x chapter 12): windows (`MPI_Win_create`,
//! `MPI_Win_allocate`, `MPI_Win_free`, attributes, group, name, error handler), the
//! operations `MPI_Put`, `MPI_Get`, `MPI_Accumulate`, `MPI_Get_accumulate`,
//! `MPI_Fetch_and_op`, `MPI_Compare_and_swap`, and their synchronisation by `MPI_Win_fence`.
//!
//! An operation is queued at the origin (the data of a put or an accumulate packed at the
//! call; an origin or result buffer of `MPI_BOTTOM` is read or written at the datatype's
//! absolute addresses) in a batch per target. When the epoch closes, each origin sends each
//! target its batch over the window's private communicator (a duplicate of the one it was made
//! from, so window traffic never meets the program's messages); the target applies the batches
//! it receives one at a time (one batch at a time per process, so accumulates to one location
//! are element-wise atomic with respect to each other), checking every access against its
//! window's bounds, and replies with an error code and the data of the gets and fetches, which
//! the origin writes into its result buffers. The windows follow the separate memory model.
//!
//! Post/start/complete/wait is in [`crate::winpscw`], passive-target synchronisation and the
//! request-based operations in [`crate::winlock`] (the same batches, sent at a flush or an
//! unlock and applied by a request handler at the target), accumulates on pair types in
//! [`crate::winacc`], shared-memory windows in [`crate::winshm`]; dynamic windows
//! (`MPI_Win_create_dynamic`, `MPI_Win_attach`, `MPI_Win_detach`) are here: their base is 0, so
//! a displacement is an address, checked against the regions attached at the target.
//!
//! A batch record: kind (u8), operation (i32), base datatype (i32), displacement in the
//! target's units (i64), run count (u32) then `(offset, length)` runs (i64, u64) relative to
//! the displacement, data length (u64) and data.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use viaduct_agent::comm::Comm;
use viaduct_agent::matching::{Source, TagMatch};

use crate::abi::{self, Handle, MpiAint, err, op};
use crate::comm::put;
use crate::error::MpiError;
use crate::state::rt;

/// The kind bits of a window handle (a window's errors are reported through its own handler;
/// see [`crate::state::errhandler_of`]).
pub const WIN_KIND: u32 = 0xa400_0000;
/// `MPI_WIN_NULL`.
const WIN_NULL: Handle = 0x2000_0000;

/// `MPI_ERR_WIN`.
const ERR_WIN: c_int = 45;
/// `MPI_ERR_RMA_SYNC`.
pub(crate) const ERR_RMA_SYNC: c_int = 50;
/// `MPI_ERR_SIZE`.
const ERR_SIZE: c_int = 51;
/// `MPI_ERR_DISP`.
const ERR_DISP: c_int = 52;
/// `MPI_ERR_RMA_RANGE`.
const ERR_RMA_RANGE: c_int = 55;
/// `MPI_ERR_RMA_ATTACH`.
const ERR_RMA_ATTACH: c_int = 56;
/// `MPI_ERR_RMA_FLAVOR`.
const ERR_RMA_FLAVOR: c_int = 58;

/// Predefined window attributes.
const WIN_BASE: c_int = 0x6600_0001;
const WIN_SIZE: c_int = 0x6600_0003;
const WIN_DISP_UNIT: c_int = 0x6600_0005;
const WIN_CREATE_FLAVOR: c_int = 0x6600_0007;
const WIN_MODEL: c_int = 0x6600_0009;
/// `MPI_WIN_FLAVOR_CREATE`, `MPI_WIN_FLAVOR_ALLOCATE`.
const FLAVOR_CREATE: c_int = 1;
const FLAVOR_ALLOCATE: c_int = 2;
/// `MPI_WIN_FLAVOR_DYNAMIC`.
const FLAVOR_DYNAMIC: c_int = 3;
/// `MPI_WIN_FLAVOR_SHARED`.
pub(crate) const FLAVOR_SHARED: c_int = 4;
/// `MPI_WIN_SEPARATE`.
const MODEL_SEPARATE: c_int = 1;
/// Every assert bit a synchronisation call accepts (`MPI_MODE_NOCHECK` .. `NOSUCCEED`).
const ASSERT_BITS: c_int = 1024 | 2048 | 4096 | 8192 | MODE_NOSUCCEED;
/// `MPI_MODE_NOSUCCEED`: no epoch follows the fence.
const MODE_NOSUCCEED: c_int = 16384;

/// Tags on the window's communicator.
pub(crate) const TAG_BATCH: u32 = 1;
pub(crate) const TAG_REPLY: u32 = 2;
pub(crate) const TAG_LEN: u32 = 3;

/// Record kinds.
const K_PUT: u8 = 0;
const K_GET: u8 = 1;
const K_ACC: u8 = 2;
const K_GET_ACC: u8 = 3;
const K_CAS: u8 = 4;

/// Where a reply's result bytes go at the origin.
pub(crate) struct Pending {
    addr: usize,
    count: usize,
    dtype: Handle,
    pub(crate) len: usize,
}

/// The operations queued in the current epoch, per target rank.
#[derive(Default)]
pub(crate) struct Queue {
    pub(crate) batches: Vec<Vec<u8>>,
    pub(crate) pending: Vec<Vec<Pending>>,
}

/// Bytes of queued operations to one target (the batch, or the results its gets and fetches
/// bring back) past which a fence epoch sends them at once, through the target's
/// passive-target service, instead of at the closing fence: so the batch and its reply stay
/// bounded however many operations one epoch queues (100,000 gets of 128 KiB, MPICH's
/// `manyget`, would otherwise bring 12.8 GB back in one reply).
pub(crate) const EARLY_FLUSH: usize = 64 << 20;

/// A window.
pub(crate) struct Win {
    pub(crate) comm: Comm,
    pub(crate) base: usize,
    pub(crate) size: usize,
    pub(crate) disp_unit: usize,
    pub(crate) flavor: c_int,
    errhandler: AtomicI32,
    /// Whether this rank has an access epoch of `MPI_Win_fence` open: set by a fence without
    /// `MPI_MODE_NOSUCCEED`, ended by one with it and (as in MPICH) by `MPI_Win_start`,
    /// `MPI_Win_lock` and `MPI_Win_lock_all`.
    pub(crate) fenced: AtomicBool,
    name: Mutex<String>,
    pub(crate) queue: Mutex<Queue>,
    /// Post/start/complete/wait state.
    pub(crate) pscw: Mutex<crate::winpscw::Pscw>,
    /// Passive-target state (locks held as origin, lock queue and service as target).
    pub(crate) passive: crate::winlock::Passive,
    /// The shared mapping of a window of `MPI_Win_allocate_shared`.
    pub(crate) shm: Option<crate::winshm::Mapping>,
    /// The memory attached to a window of `MPI_Win_create_dynamic`: (address, length), in
    /// attach order.
    attached: Mutex<Vec<(usize, usize)>>,
    /// Stable storage of the attribute values returned by pointer.
    attr_size: Box<MpiAint>,
    attr_disp: Box<c_int>,
    attr_flavor: Box<c_int>,
    attr_model: Box<c_int>,
}

fn table() -> &'static Mutex<HashMap<Handle, Arc<Win>>> {
    static T: OnceLock<Mutex<HashMap<Handle, Arc<Win>>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

static NEXT: AtomicI32 = AtomicI32::new(1);

/// The error handler stored for window `h` (possibly [`crate::state::UNSET_HANDLER`]), if `h`
/// is a window of this process.
pub fn errhandler_of_key(h: Handle) -> Option<Handle> {
    lock(table())
        .get(&h)
        .map(|w| w.errhandler.load(Ordering::Relaxed))
}

pub(crate) fn win(h: Handle) -> Result<Arc<Win>, MpiError> {
    if h == WIN_NULL {
        return Err(MpiError::new(ERR_WIN, "the window is MPI_WIN_NULL").on(abi::COMM_WORLD));
    }
    lock(table()).get(&h).cloned().ok_or_else(|| {
        MpiError::new(ERR_WIN, format!("{h:#x} is not a window of this process"))
            .on(abi::COMM_WORLD)
    })
}

/// Makes a window over `size` bytes at `base` (collective over `comm`), and starts its
/// passive-target service.
fn create(
    base: usize,
    size: MpiAint,
    disp_unit: c_int,
    comm: Handle,
    flavor: c_int,
) -> Result<Handle, MpiError> {
    let c = rt()?.intra(comm)?;
    let dup = c.comm.dup()?;
    create_on(dup, base, size, disp_unit, flavor, None)
}

/// Makes a window over `size` bytes at `base` with private communicator `dup` (a duplicate
/// every member made), and starts its passive-target service.
pub(crate) fn create_on(
    dup: Comm,
    base: usize,
    size: MpiAint,
    disp_unit: c_int,
    flavor: c_int,
    shm: Option<crate::winshm::Mapping>,
) -> Result<Handle, MpiError> {
    let n = dup.size() as usize;
    let mut q = Queue::default();
    q.batches.resize_with(n, Vec::new);
    q.pending.resize_with(n, Vec::new);
    let w = Win {
        comm: dup,
        base,
        size: size as usize,
        disp_unit: disp_unit as usize,
        flavor,
        // Never set: errors go to MPI_COMM_WORLD's handler, as in MPICH 4.0.2.
        errhandler: AtomicI32::new(crate::state::UNSET_HANDLER),
        fenced: AtomicBool::new(false),
        name: Mutex::new(String::new()),
        queue: Mutex::new(q),
        pscw: Mutex::new(crate::winpscw::Pscw::default()),
        passive: crate::winlock::Passive::new(n),
        shm,
        attached: Mutex::new(Vec::new()),
        attr_size: Box::new(size),
        attr_disp: Box::new(disp_unit),
        attr_flavor: Box::new(flavor),
        attr_model: Box::new(MODEL_SEPARATE),
    };
    let h = (WIN_KIND | (NEXT.fetch_add(1, Ordering::Relaxed) as u32 & 0x00ff_ffff)) as Handle;
    let w = Arc::new(w);
    crate::winlock::start_service(&w).map_err(|e| e.on(abi::COMM_WORLD))?;
    lock(table()).insert(h, w);
    Ok(h)
}

pub(crate) fn check_args(size: MpiAint, disp_unit: c_int) -> Result<(), MpiError> {
    if size < 0 {
        return Err(MpiError::new(ERR_SIZE, format!("size {size} is negative")));
    }
    if disp_unit <= 0 {
        return Err(MpiError::new(
            ERR_DISP,
            format!("disp_unit {disp_unit} is not positive"),
        ));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Win_create` (collective): a window over the program's memory.
    MPI_Win_create / PMPI_Win_create(base: *mut c_void, size: MpiAint, disp_unit: c_int, info: Handle, comm: Handle, win: *mut Handle) on comm => {
        let hints = crate::wininfo::known(info)?;
        check_args(size, disp_unit)?;
        if win.is_null() {
            return Err(MpiError::new(err::ARG, "win is NULL"));
        }
        if base.is_null() && size > 0 {
            return Err(MpiError::new(err::BUFFER, "base is NULL and size is not 0"));
        }
        let h = create(base as usize, size, disp_unit, comm, FLAVOR_CREATE)?;
        crate::wininfo::set(h, hints);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(win, h, "win") }
    }
}

mpi_fn! {
    /// `MPI_Win_allocate` (collective): a window over memory of the library (`malloc`), freed
    /// by `MPI_Win_free`.
    MPI_Win_allocate / PMPI_Win_allocate(size: MpiAint, disp_unit: c_int, info: Handle, comm: Handle, baseptr: *mut c_void, win: *mut Handle) on comm => {
        let hints = crate::wininfo::known(info)?;
        check_args(size, disp_unit)?;
        if win.is_null() || baseptr.is_null() {
            return Err(MpiError::new(err::ARG, "baseptr or win is NULL"));
        }
        // SAFETY: malloc of any size; NULL is checked.
        let p = unsafe { libc::malloc((size as usize).max(1)) };
        if p.is_null() {
            return Err(MpiError::new(err::NO_MEM, format!("cannot allocate {size} bytes")));
        }
        let h = match create(p as usize, size, disp_unit, comm, FLAVOR_ALLOCATE) {
            Ok(h) => h,
            Err(e) => {
                // SAFETY: the memory just allocated, not given out.
                unsafe { libc::free(p) };
                return Err(e);
            }
        };
        crate::wininfo::set(h, hints);
        // SAFETY: the caller's `void **` and handle, checked not NULL.
        unsafe {
            put(baseptr.cast::<*mut c_void>(), p, "baseptr")?;
            put(win, h, "win")
        }
    }
}

mpi_fn! {
    /// `MPI_Win_free` (collective): waits for every member, stops the window's passive-target
    /// service, then frees the window (and the memory of `MPI_Win_allocate`, the mapping of
    /// `MPI_Win_allocate_shared`). Operations queued in a fence epoch and not synchronised are
    /// dropped (`MPI_ERR_RMA_SYNC`). With a passive-target, access (`MPI_Win_start`) or
    /// exposure (`MPI_Win_post`) epoch open, it fails at once with `MPI_ERR_RMA_SYNC` through
    /// the window's handler, and the window stays (as in MPICH).
    MPI_Win_free / PMPI_Win_free(win: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's handle.
        let h = unsafe { win.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "win is NULL"))?;
        let w = self::win(*h)?;
        let key = *h;
        // An epoch still open: the call fails before anything happens, the window stays.
        open_epoch(&w).map_err(|e| e.on(key))?;
        // The delete callbacks of its attributes first: one failing fails the call and leaves
        // the window (its attributes gone), as MPI_Comm_free does.
        crate::attr::delete_all(crate::attr::Kind::Win, key).map_err(|e| e.on(key))?;
        let unsynced = lock(&w.queue).batches.iter().any(|b| !b.is_empty());
        w.comm.barrier().map_err(|e| MpiError::from(e).on(key))?;
        crate::winpscw::drop_exposure(&w);
        lock(table()).remove(&key);
        crate::wininfo::forget(key);
        // Every member passed the barrier, so every origin's passive epoch ended (its unlock
        // took its reply): no request for the service comes any more.
        crate::winlock::stop_service(&w);
        if let Some(m) = &w.shm {
            m.unmap();
        }
        if w.flavor == FLAVOR_ALLOCATE {
            // SAFETY: the window's own memory from malloc; the window is gone from the table,
            // and every member passed the barrier, so nothing accesses it any more.
            unsafe { libc::free(w.base as *mut c_void) };
        }
        *h = WIN_NULL;
        if unsynced {
            return Err(MpiError::new(ERR_RMA_SYNC, "operations were queued on the window and not synchronised").on(abi::COMM_WORLD));
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_create_dynamic` (collective): a window with no memory; each rank attaches
    /// memory with `MPI_Win_attach`, and a target displacement is an address of the target
    /// (`MPI_Get_address`), checked against its attached regions.
    MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info: Handle, comm: Handle, win: *mut Handle) on comm => {
        let hints = crate::wininfo::known(info)?;
        if win.is_null() {
            return Err(MpiError::new(err::ARG, "win is NULL"));
        }
        let h = create(0, 0, 1, comm, FLAVOR_DYNAMIC)?;
        crate::wininfo::set(h, hints);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(win, h, "win") }
    }
}

fn dynamic(w: &Win) -> Result<(), MpiError> {
    if w.flavor != FLAVOR_DYNAMIC {
        return Err(MpiError::new(
            ERR_RMA_FLAVOR,
            "the window was not made by MPI_Win_create_dynamic",
        ));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Win_attach`: `size` bytes at `base` become part of the window (local); they must
    /// not overlap memory attached already.
    MPI_Win_attach / PMPI_Win_attach(win: Handle, base: *mut c_void, size: MpiAint) on win => {
        let w = self::win(win)?;
        dynamic(&w)?;
        if size < 0 {
            return Err(MpiError::new(ERR_SIZE, format!("size {size} is negative")));
        }
        if base.is_null() && size > 0 {
            return Err(MpiError::new(err::BUFFER, "base is NULL and size is not 0"));
        }
        let (a, n) = (base as usize, size as usize);
        let mut r = lock(&w.attached);
        if let Some(&(b, m)) = r.iter().find(|&&(b, m)| a < b + m.max(1) && b < a + n.max(1)) {
            return Err(MpiError::new(ERR_RMA_ATTACH, format!("{n} bytes at {a:#x} overlap the {m} bytes at {b:#x} attached already")));
        }
        r.push((a, n));
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_detach`: the memory attached at `base` leaves the window (local).
    MPI_Win_detach / PMPI_Win_detach(win: Handle, base: *const c_void) on win => {
        let w = self::win(win)?;
        dynamic(&w)?;
        let mut r = lock(&w.attached);
        let i = r.iter().position(|&(b, _)| b == base as usize).ok_or_else(|| {
            MpiError::new(ERR_RMA_ATTACH, format!("no memory attached at {:#x}", base as usize))
        })?;
        r.remove(i);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_get_info`: a new info object with the six window hints, as set or their
    /// defaults (see `crate::wininfo`).
    MPI_Win_get_info / PMPI_Win_get_info(win: Handle, info_used: *mut Handle) on win => {
        self::win(win)?;
        if info_used.is_null() {
            return Err(MpiError::new(err::ARG, "info_used is NULL"));
        }
        let h = crate::misc::info_of(crate::wininfo::get(win));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(info_used, h, "info_used") }
    }
}

mpi_fn! {
    /// `MPI_Win_set_info` (collective): the window hints are kept for `MPI_Win_get_info`
    /// (none changes how the window works), other keys ignored.
    MPI_Win_set_info / PMPI_Win_set_info(win: Handle, info: Handle) on win => {
        self::win(win)?;
        crate::wininfo::set(win, crate::wininfo::known(info)?);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_get_group`: the group of the window's communicator.
    MPI_Win_get_group / PMPI_Win_get_group(win: Handle, group: *mut Handle) on win => {
        let w = self::win(win)?;
        if group.is_null() {
            return Err(MpiError::new(err::ARG, "group is NULL"));
        }
        let g = rt()?.add_group(w.comm.world_ranks().to_vec());
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(group, g, "group") }
    }
}

mpi_fn! {
    /// `MPI_Win_get_attr`: the predefined attributes `MPI_WIN_BASE`, `MPI_WIN_SIZE`,
    /// `MPI_WIN_DISP_UNIT`, `MPI_WIN_CREATE_FLAVOR`, `MPI_WIN_MODEL` (`MPI_WIN_SEPARATE`) and
    /// the program's (`MPI_Win_set_attr`).
    MPI_Win_get_attr / PMPI_Win_get_attr(win: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) on win => {
        let w = self::win(win)?;
        let v: *const c_void = match keyval {
            WIN_BASE => w.base as *const c_void,
            WIN_SIZE => &*w.attr_size as *const MpiAint as *const c_void,
            WIN_DISP_UNIT => &*w.attr_disp as *const c_int as *const c_void,
            WIN_CREATE_FLAVOR => &*w.attr_flavor as *const c_int as *const c_void,
            WIN_MODEL => &*w.attr_model as *const c_int as *const c_void,
            _ => match crate::attr::win_attr(win, keyval)? {
                Some(v) => v as *const c_void,
                None => {
                    // SAFETY: the caller's int.
                    return unsafe { put(flag, 0, "flag") };
                }
            },
        };
        if attribute_val.is_null() {
            return Err(MpiError::new(err::ARG, "attribute_val is NULL"));
        }
        // SAFETY: the caller's `void **` (checked not NULL) and int.
        unsafe {
            put(attribute_val.cast::<*const c_void>(), v, "attribute_val")?;
            put(flag, 1, "flag")
        }
    }
}

mpi_fn! {
    /// `MPI_Win_set_errhandler`.
    MPI_Win_set_errhandler / PMPI_Win_set_errhandler(win: Handle, errhandler: Handle) on win => {
        let w = self::win(win)?;
        if !crate::misc::valid_handler(errhandler) {
            return Err(MpiError::new(err::ARG, format!("{errhandler:#x} is not an error handler")));
        }
        w.errhandler.store(errhandler, Ordering::Relaxed);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_get_errhandler` (`MPI_ERRORS_ARE_FATAL` while none was set).
    MPI_Win_get_errhandler / PMPI_Win_get_errhandler(win: Handle, errhandler: *mut Handle) on win => {
        let w = self::win(win)?;
        let h = crate::state::shown_handler(w.errhandler.load(Ordering::Relaxed));
        // The caller gets a new handle to free.
        crate::misc::hold_handler(h);
        // SAFETY: the caller's handle.
        unsafe { put(errhandler, h, "errhandler") }
    }
}

mpi_fn! {
    /// `MPI_Win_create_errhandler`: an error handler for windows (the same table as the
    /// communicators' handlers; the function gets the window's handle).
    MPI_Win_create_errhandler / PMPI_Win_create_errhandler(win_errhandler_fn: Option<crate::misc::CommErrFn>, errhandler: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: forwarded with the caller's arguments; the function types are the same.
        let rc = unsafe { crate::misc::PMPI_Comm_create_errhandler(win_errhandler_fn, errhandler) };
        crate::error::check(rc == abi::SUCCESS, rc, || "the error handler was not created".into())
    }
}

mpi_fn! {
    /// `MPI_Win_call_errhandler`: runs the window's error handler with `errorcode`.
    MPI_Win_call_errhandler / PMPI_Win_call_errhandler(win: Handle, errorcode: c_int) on win => {
        self::win(win)?;
        crate::error::raise_exact("MPI_Win_call_errhandler", win, MpiError::new(errorcode, "raised by MPI_Win_call_errhandler"));
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_set_name`.
    MPI_Win_set_name / PMPI_Win_set_name(win: Handle, win_name: *const c_char) on win => {
        let w = self::win(win)?;
        if win_name.is_null() {
            return Err(MpiError::new(err::ARG, "win_name is NULL"));
        }
        // SAFETY: the caller's NUL-terminated string, checked not NULL.
        let n = unsafe { std::ffi::CStr::from_ptr(win_name) }.to_string_lossy().into_owned();
        *lock(&w.name) = n;
        Ok(())
    }
}

/// `MPI_MAX_OBJECT_NAME`.
const MAX_OBJECT_NAME: usize = 128;

mpi_fn! {
    /// `MPI_Win_get_name` (empty until set).
    MPI_Win_get_name / PMPI_Win_get_name(win: Handle, win_name: *mut c_char, resultlen: *mut c_int) on win => {
        let w = self::win(win)?;
        if win_name.is_null() {
            return Err(MpiError::new(err::ARG, "win_name is NULL"));
        }
        let n = lock(&w.name).clone();
        let len = n.len().min(MAX_OBJECT_NAME - 1);
        // SAFETY: the caller's buffer of MPI_MAX_OBJECT_NAME bytes (checked not NULL) and int.
        unsafe {
            std::ptr::copy_nonoverlapping(n.as_ptr(), win_name.cast::<u8>(), len);
            *win_name.add(len) = 0;
            put(resultlen, len as c_int, "resultlen")
        }
    }
}

/// What the target side of one operation is: runs relative to the displacement, and the
/// predefined type its elements are made of.
pub(crate) struct Target {
    runs: Vec<(i64, u64)>,
    base: Option<Handle>,
    bytes: usize,
}

pub(crate) fn target_runs(count: c_int, t: Handle) -> Result<Target, MpiError> {
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("target_count {count} is negative"),
        ));
    }
    let l = crate::types::layout(t)?;
    let mut runs: Vec<(i64, u64)> = Vec::new();
    if let [(off, len)] = l.runs[..] {
        if len as isize == l.extent {
            // Elements of one run as long as the extent follow each other: one run.
            if count > 0 {
                runs.push((off as i64, len as u64 * count as u64));
            }
            return Ok(Target {
                runs,
                base: l.base,
                bytes: l.size * count as usize,
            });
        }
    }
    for i in 0..count as i64 {
        for &(off, len) in &l.runs {
            let o = i * l.extent as i64 + off as i64;
            match runs.last_mut() {
                Some(last) if last.0 + last.1 as i64 == o => last.1 += len as u64,
                _ => runs.push((o, len as u64)),
            }
        }
    }
    Ok(Target {
        runs,
        base: l.base,
        bytes: l.size * count as usize,
    })
}

/// Packs `count` elements of `t` at `addr`. A null `addr` is `MPI_BOTTOM` (the datatype's
/// displacements are absolute addresses) unless `t` is plain contiguous bytes, whose data would
/// start at address 0 (`MPI_ERR_BUFFER`).
///
/// # Safety
///
/// `addr` holds `count` elements of `t`.
pub(crate) unsafe fn pack(
    addr: *const c_void,
    count: c_int,
    t: Handle,
) -> Result<Vec<u8>, MpiError> {
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("origin_count {count} is negative"),
        ));
    }
    let l = crate::types::layout(t)?;
    let mut out = Vec::new();
    if l.size * count as usize > 0 && addr.is_null() && l.contiguous() {
        return Err(MpiError::new(err::BUFFER, "the origin buffer is NULL"));
    }
    let len = l.size * count as usize;
    if l.contiguous() && len > 0 {
        // Plain bytes: one copy.
        // SAFETY: the caller guarantees `count` elements of `t`, `len` bytes, at `addr`
        // (not NULL: checked above).
        return Ok(unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) }.to_vec());
    }
    // SAFETY: the caller guarantees `count` elements of `t` at `addr`.
    unsafe { l.pack(addr.cast::<u8>(), count as usize, &mut out) };
    Ok(out)
}

/// `MPI_ERR_RMA_SYNC` naming the epoch this rank has open on `w` that `MPI_Win_free` must
/// not cross: passive target, access of `MPI_Win_start`, exposure of `MPI_Win_post`.
fn open_epoch(w: &Win) -> Result<(), MpiError> {
    let why = if crate::winlock::epoch_open(w) {
        "a passive-target epoch (MPI_Win_lock or MPI_Win_lock_all) is open"
    } else if crate::winpscw::access_open(w) {
        "an access epoch (MPI_Win_start) is open"
    } else if crate::winpscw::exposure_open(w) {
        "an exposure epoch (MPI_Win_post) is open"
    } else {
        return Ok(());
    };
    Err(MpiError::new(
        ERR_RMA_SYNC,
        format!("the window cannot be freed: {why}"),
    ))
}

/// `MPI_ERR_RMA_SYNC` unless an access epoch of this rank on `w` covers target `t`: a fence's,
/// an `MPI_Win_start`'s whose group holds `t`, or a passive-target lock on `t` (or all).
fn check_epoch(w: &Win, t: u32) -> Result<(), MpiError> {
    if w.fenced.load(Ordering::Relaxed) || crate::winlock::locked(w, t) {
        return Ok(());
    }
    match crate::winpscw::access_to(w, t) {
        Some(true) => Ok(()),
        Some(false) => Err(MpiError::new(
            ERR_RMA_SYNC,
            format!("target {t} is not in the group of the access epoch (MPI_Win_start)"),
        )),
        None => Err(MpiError::new(
            ERR_RMA_SYNC,
            format!(
                "no access epoch to target {t} is open (MPI_Win_fence, MPI_Win_start, \
                 MPI_Win_lock or MPI_Win_lock_all opens one)"
            ),
        )),
    }
}

/// Checks the rank and the epoch and queues one record for `target` (and where its result
/// goes).
#[allow(clippy::too_many_arguments)]
pub(crate) fn queue(
    w: &Win,
    target: c_int,
    kind: u8,
    opr: Handle,
    disp: MpiAint,
    tg: &Target,
    data: &[u8],
    result: Option<Pending>,
) -> Result<(), MpiError> {
    let n = w.comm.size() as c_int;
    if target == abi::PROC_NULL {
        return Ok(());
    }
    if target < 0 || target >= n {
        return Err(MpiError::new(
            err::RANK,
            format!("target rank {target} is not in the window's group of {n}"),
        ));
    }
    check_epoch(w, target as u32)?;
    if disp < 0 {
        return Err(MpiError::new(
            ERR_DISP,
            format!("target_disp {disp} is negative"),
        ));
    }
    let mut q = lock(&w.queue);
    let b = &mut q.batches[target as usize];
    b.push(kind);
    b.extend_from_slice(&opr.to_le_bytes());
    b.extend_from_slice(&tg.base.unwrap_or(0).to_le_bytes());
    b.extend_from_slice(&disp.to_le_bytes());
    b.extend_from_slice(&(tg.runs.len() as u32).to_le_bytes());
    for &(o, l) in &tg.runs {
        b.extend_from_slice(&o.to_le_bytes());
        b.extend_from_slice(&l.to_le_bytes());
    }
    b.extend_from_slice(&(data.len() as u64).to_le_bytes());
    b.extend_from_slice(data);
    let batch_len = b.len();
    if let Some(p) = result {
        q.pending[target as usize].push(p);
    }
    // The results' bytes are added up only every 1024 operations (and for a batch already
    // past the bound), so queueing stays constant time per operation.
    let ps = &q.pending[target as usize];
    let over = batch_len > EARLY_FLUSH
        || (ps.len() % 1024 == 0 && ps.iter().map(|p| p.len).sum::<usize>() > EARLY_FLUSH);
    drop(q);
    if over && w.fenced.load(Ordering::Relaxed) && !crate::winlock::epoch_open(w) {
        // The opening fence met every rank (an exchange and a barrier), so the target's own
        // accesses before the epoch are done: its service may apply the operations now.
        crate::winlock::flush_early(w, target as u32)?;
    }
    Ok(())
}

pub(crate) fn mismatch(what: &str, a: usize, b: usize) -> MpiError {
    MpiError::new(
        err::TYPE,
        format!("the {what} holds {a} bytes of data but the target datatype {b}"),
    )
}

/// Checks that accumulate operation `o` applies to the elements of the target type (any
/// predefined operation when no data moves: the target type may then have no elements).
pub(crate) fn check_op(o: Handle, tg: &Target, fetch: bool) -> Result<(), MpiError> {
    if o == op::REPLACE || (fetch && o == op::NO_OP) {
        return Ok(());
    }
    if o == op::NO_OP {
        return Err(MpiError::new(
            err::OP,
            "MPI_NO_OP is for MPI_Get_accumulate and MPI_Fetch_and_op only",
        ));
    }
    if tg.bytes == 0 {
        if !(op::MAX..=op::NO_OP).contains(&o) {
            return Err(MpiError::new(
                err::OP,
                format!("{o:#x} is not a predefined operation"),
            ));
        }
        return Ok(());
    }
    let base = tg.base.ok_or_else(|| {
        MpiError::new(
            err::TYPE,
            "the target datatype is not made of one predefined datatype",
        )
    })?;
    crate::datatype::reduction(base, o).map(|_| ())
}

/// Where the result of a get or a fetch goes: `count` elements of `t` at `addr` (null:
/// `MPI_BOTTOM`, as for [`pack`]).
pub(crate) fn pending(addr: *mut c_void, count: c_int, t: Handle) -> Result<Pending, MpiError> {
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("result count {count} is negative"),
        ));
    }
    let l = crate::types::layout(t)?;
    let len = l.size * count as usize;
    if len > 0 && addr.is_null() && l.contiguous() {
        return Err(MpiError::new(err::BUFFER, "the result buffer is NULL"));
    }
    Ok(Pending {
        addr: addr as usize,
        count: count as usize,
        dtype: t,
        len,
    })
}

mpi_fn! {
    /// `MPI_Put`: the origin data is packed at the call and written at the target when the
    /// epoch closes.
    MPI_Put / PMPI_Put(origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: c_int, target_datatype: Handle, win: Handle) on win => {
        let w = self::win(win)?;
        // SAFETY: the caller's buffer.
        unsafe { put_op(&w, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype) }
    }
}

/// Queues a put (`MPI_Put`, `MPI_Rput`).
///
/// # Safety
///
/// `origin_addr` holds `origin_count` elements of `origin_datatype`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn put_op(
    w: &Win,
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MpiAint,
    target_count: c_int,
    target_datatype: Handle,
) -> Result<(), MpiError> {
    let tg = target_runs(target_count, target_datatype)?;
    // SAFETY: the caller's buffer of origin_count elements.
    let data = unsafe { pack(origin_addr, origin_count, origin_datatype) }?;
    if data.len() != tg.bytes {
        return Err(mismatch("origin buffer", data.len(), tg.bytes));
    }
    queue(w, target_rank, K_PUT, 0, target_disp, &tg, &data, None)
}

mpi_fn! {
    /// `MPI_Get`: the origin buffer is written when the epoch closes.
    MPI_Get / PMPI_Get(origin_addr: *mut c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: c_int, target_datatype: Handle, win: Handle) on win => {
        let w = self::win(win)?;
        get_op(&w, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype)
    }
}

/// Queues a get (`MPI_Get`, `MPI_Rget`); the origin buffer is written when the operation
/// completes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn get_op(
    w: &Win,
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MpiAint,
    target_count: c_int,
    target_datatype: Handle,
) -> Result<(), MpiError> {
    let tg = target_runs(target_count, target_datatype)?;
    let p = pending(origin_addr, origin_count, origin_datatype)?;
    if p.len != tg.bytes {
        return Err(mismatch("origin buffer", p.len, tg.bytes));
    }
    queue(w, target_rank, K_GET, 0, target_disp, &tg, &[], Some(p))
}

mpi_fn! {
    /// `MPI_Accumulate`: a predefined operation (or `MPI_REPLACE`) on predefined elements.
    MPI_Accumulate / PMPI_Accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: c_int, target_datatype: Handle, opr: Handle, win: Handle) on win => {
        let w = self::win(win)?;
        // SAFETY: the caller's buffer.
        unsafe { acc_op(&w, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, opr) }
    }
}

/// Queues an accumulate (`MPI_Accumulate`, `MPI_Raccumulate`).
///
/// # Safety
///
/// `origin_addr` holds `origin_count` elements of `origin_datatype`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn acc_op(
    w: &Win,
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MpiAint,
    target_count: c_int,
    target_datatype: Handle,
    opr: Handle,
) -> Result<(), MpiError> {
    let tg = target_runs(target_count, target_datatype)?;
    check_op(opr, &tg, false)?;
    // SAFETY: the caller's buffer of origin_count elements.
    let data = unsafe { pack(origin_addr, origin_count, origin_datatype) }?;
    if data.len() != tg.bytes {
        return Err(mismatch("origin buffer", data.len(), tg.bytes));
    }
    queue(w, target_rank, K_ACC, opr, target_disp, &tg, &data, None)
}

/// `MPI_Get_accumulate` and `MPI_Fetch_and_op`.
///
/// # Safety
///
/// The caller's buffers hold their counts of elements.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn get_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: Handle,
    target_rank: c_int,
    target_disp: MpiAint,
    target_count: c_int,
    target_datatype: Handle,
    opr: Handle,
    win: Handle,
) -> Result<(), MpiError> {
    let w = self::win(win)?;
    let tg = target_runs(target_count, target_datatype)?;
    check_op(opr, &tg, true)?;
    let data = if opr == op::NO_OP {
        Vec::new()
    } else {
        // SAFETY: the caller's buffer of origin_count elements.
        let d = unsafe { pack(origin_addr, origin_count, origin_datatype) }?;
        if d.len() != tg.bytes {
            return Err(mismatch("origin buffer", d.len(), tg.bytes));
        }
        d
    };
    let p = pending(result_addr, result_count, result_datatype)?;
    if p.len != tg.bytes {
        return Err(mismatch("result buffer", p.len, tg.bytes));
    }
    queue(
        &w,
        target_rank,
        K_GET_ACC,
        opr,
        target_disp,
        &tg,
        &data,
        Some(p),
    )
}

mpi_fn! {
    /// `MPI_Get_accumulate`: the target's old contents come back in the result buffer, then
    /// the operation applies (`MPI_NO_OP`: a read).
    MPI_Get_accumulate / PMPI_Get_accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: Handle, result_addr: *mut c_void, result_count: c_int, result_datatype: Handle, target_rank: c_int, target_disp: MpiAint, target_count: c_int, target_datatype: Handle, opr: Handle, win: Handle) on win => {
        // SAFETY: the caller's buffers.
        unsafe { get_accumulate(origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype, target_rank, target_disp, target_count, target_datatype, opr, win) }
    }
}

mpi_fn! {
    /// `MPI_Fetch_and_op`: `MPI_Get_accumulate` of one element.
    MPI_Fetch_and_op / PMPI_Fetch_and_op(origin_addr: *const c_void, result_addr: *mut c_void, datatype: Handle, target_rank: c_int, target_disp: MpiAint, opr: Handle, win: Handle) on win => {
        // SAFETY: the caller's buffers of one element.
        unsafe { get_accumulate(origin_addr, 1, datatype, result_addr, 1, datatype, target_rank, target_disp, 1, datatype, opr, win) }
    }
}

mpi_fn! {
    /// `MPI_Compare_and_swap`: the target element comes back in the result buffer and takes
    /// the origin's value if it equalled the compare value.
    MPI_Compare_and_swap / PMPI_Compare_and_swap(origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void, datatype: Handle, target_rank: c_int, target_disp: MpiAint, win: Handle) on win => {
        let w = self::win(win)?;
        if !crate::datatype::swappable(datatype) {
            return Err(MpiError::new(err::TYPE, format!("MPI_Compare_and_swap takes a predefined integer, logical, byte or multi-language datatype, not {datatype:#x}")));
        }
        let tg = target_runs(1, datatype)?;
        // SAFETY: the caller's buffers of one element.
        let mut data = unsafe { pack(origin_addr, 1, datatype) }?;
        // SAFETY: as above.
        data.extend_from_slice(&unsafe { pack(compare_addr, 1, datatype) }?);
        let p = pending(result_addr, 1, datatype)?;
        queue(&w, target_rank, K_CAS, 0, target_disp, &tg, &data, Some(p))
    }
}

/// Reads little-endian fields of a batch.
struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MpiError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or_else(|| MpiError::new(err::INTERN, "a one-sided batch is cut short"))?;
        let s = &self.data[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, MpiError> {
        Ok(self.take(1)?[0])
    }
    fn i32(&mut self) -> Result<i32, MpiError> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(i32::from_le_bytes(b))
    }
    fn u32(&mut self) -> Result<u32, MpiError> {
        Ok(self.i32()? as u32)
    }
    fn i64(&mut self) -> Result<i64, MpiError> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(b))
    }
}

/// Applies one origin's batch to this rank's window; returns the reply: an error code (i32)
/// and the result bytes of every get and fetch, in order (zeros for an operation refused).
pub(crate) fn apply(w: &Win, batch: &[u8]) -> Vec<u8> {
    // One batch at a time in this process (the handler thread, and the program's thread for
    // a fence or a batch to itself): accumulates stay element-wise atomic.
    static APPLY: Mutex<()> = Mutex::new(());
    let _one = lock(&APPLY);
    let mut code = abi::SUCCESS;
    let mut results = Vec::new();
    let mut r = Reader { data: batch, at: 0 };
    while r.at < batch.len() {
        match apply_one(w, &mut r, &mut results) {
            Ok(()) => {}
            Err(c) => {
                if code == abi::SUCCESS {
                    code = c;
                }
                if c == err::INTERN {
                    break;
                }
            }
        }
    }
    let mut reply = code.to_le_bytes().to_vec();
    reply.extend_from_slice(&results);
    reply
}

fn apply_one(w: &Win, r: &mut Reader<'_>, results: &mut Vec<u8>) -> Result<(), c_int> {
    let bad = |e: MpiError| e.class;
    let kind = r.u8().map_err(bad)?;
    let opr = r.i32().map_err(bad)?;
    let base_t = r.i32().map_err(bad)?;
    let disp = r.i64().map_err(bad)?;
    let nruns = r.u32().map_err(bad)? as usize;
    let mut runs = Vec::with_capacity(nruns.min(1 << 16));
    for _ in 0..nruns {
        let o = r.i64().map_err(bad)?;
        let l = r.i64().map_err(bad)? as u64;
        runs.push((o, l));
    }
    let dlen = r.i64().map_err(bad)? as usize;
    let data = r.take(dlen).map_err(bad)?;
    let total: u64 = runs.iter().map(|x| x.1).sum();
    let fetches = matches!(kind, K_GET | K_GET_ACC | K_CAS);
    // Bounds: every run inside [0, size), or for a dynamic window (base 0, displacements
    // are addresses) inside one attached region.
    let start = (disp as i128) * (w.disp_unit as i128);
    let in_range = if w.flavor == FLAVOR_DYNAMIC {
        let regions = lock(&w.attached);
        runs.iter()
            .all(|&(o, l)| attached(&regions, start + o as i128, l))
    } else {
        runs.iter().all(|&(o, l)| {
            let lo = start + o as i128;
            lo >= 0 && lo + l as i128 <= w.size as i128
        })
    };
    if !in_range {
        if fetches {
            results.resize(results.len() + total as usize, 0);
        }
        return Err(ERR_RMA_RANGE);
    }
    let region = |o: i64, l: u64| -> &mut [u8] {
        if l == 0 {
            return &mut [];
        }
        let lo = (start + o as i128) as usize;
        // SAFETY: `lo .. lo + l` lies inside the window or, for a dynamic window, inside
        // memory the program attached (checked above); that memory is the program's (or the
        // library's) while it is part of the window, and the program does not access it while
        // the epoch closes (the separate model's rule).
        unsafe { std::slice::from_raw_parts_mut((w.base + lo) as *mut u8, l as usize) }
    };
    if fetches {
        for &(o, l) in &runs {
            results.extend_from_slice(region(o, l));
        }
    }
    match kind {
        K_GET => Ok(()),
        K_PUT => {
            let mut at = 0;
            for &(o, l) in &runs {
                region(o, l).copy_from_slice(&data[at..at + l as usize]);
                at += l as usize;
            }
            Ok(())
        }
        K_ACC | K_GET_ACC => {
            if opr == op::NO_OP || total == 0 {
                return Ok(());
            }
            if data.len() as u64 != total {
                return Err(err::INTERN);
            }
            if opr == op::REPLACE {
                let mut at = 0;
                for &(o, l) in &runs {
                    region(o, l).copy_from_slice(&data[at..at + l as usize]);
                    at += l as usize;
                }
                return Ok(());
            }
            let red = crate::datatype::reduction(base_t, opr).map_err(bad)?;
            let bl = crate::types::layout(base_t).map_err(bad)?;
            if !bl.contiguous() {
                // A pair type with a hole between value and index: element by element.
                let pieces: Vec<(usize, usize)> = runs
                    .iter()
                    .filter(|r| r.1 > 0)
                    .map(|&(o, l)| (w.base + (start + o as i128) as usize, l as usize))
                    .collect();
                // SAFETY: the pieces lie inside the window or attached memory (checked above),
                // not accessed by the program while the epoch closes (as `region`).
                unsafe { crate::winacc::combine(&red, &bl, data, &pieces) };
                return Ok(());
            }
            let mut at = 0;
            for &(o, l) in &runs {
                red.combine(&data[at..at + l as usize], region(o, l));
                at += l as usize;
            }
            Ok(())
        }
        K_CAS => {
            let &(o, l) = runs.first().ok_or(err::INTERN)?;
            let n = l as usize;
            if data.len() != 2 * n {
                return Err(err::INTERN);
            }
            let cell = region(o, l);
            if cell == &data[n..] {
                cell.copy_from_slice(&data[..n]);
            }
            Ok(())
        }
        _ => Err(err::INTERN),
    }
}

/// Whether the `l` bytes at address `lo` all lie in the memory attached to a dynamic window
/// (`regions`, which do not overlap): one region, or regions that follow each other without a
/// gap.
fn attached(regions: &[(usize, usize)], lo: i128, l: u64) -> bool {
    let span = |&(a, n): &(usize, usize)| (a as i128, a as i128 + n as i128);
    if l == 0 {
        return regions.iter().map(span).any(|(a, e)| a <= lo && lo <= e);
    }
    let end = lo + l as i128;
    let mut at = lo;
    while at < end {
        match regions.iter().map(span).find(|&(a, e)| a <= at && at < e) {
            Some((_, e)) => at = e,
            None => return false,
        }
    }
    true
}

/// Takes one target's reply of `want` bytes: keeps the first error code of all replies in
/// `code` and writes the result bytes into the origin's result buffers of `pending`.
pub(crate) fn take_reply(
    reply: &[u8],
    want: usize,
    pending: &[Pending],
    code: &mut c_int,
) -> Result<(), MpiError> {
    if reply.len() != want {
        return Err(MpiError::new(
            err::INTERN,
            format!("reply of {} bytes, {want} expected", reply.len()),
        ));
    }
    let c = i32::from_le_bytes([reply[0], reply[1], reply[2], reply[3]]);
    if c != abi::SUCCESS && *code == abi::SUCCESS {
        *code = c;
    }
    deliver(pending, &reply[4..]);
    Ok(())
}

/// Writes a reply's result bytes into the origin's result buffers.
pub(crate) fn deliver(pending: &[Pending], data: &[u8]) {
    let mut at = 0;
    for p in pending {
        let Some(chunk) = data.get(at..at + p.len) else {
            return;
        };
        at += p.len;
        if p.len == 0 {
            continue;
        }
        let Ok(l) = crate::types::layout(p.dtype) else {
            continue;
        };
        if l.contiguous() && p.addr != 0 {
            // SAFETY: the program's result buffer of `count` elements of its plain-bytes
            // datatype (`len` bytes), given at the call and not accessed by the program until
            // the epoch closes.
            unsafe { std::ptr::copy_nonoverlapping(chunk.as_ptr(), p.addr as *mut u8, p.len) };
            continue;
        }
        // SAFETY: the program's result buffer of `count` elements of its datatype, given at
        // the call and not accessed by the program until the epoch closes.
        unsafe { l.unpack(chunk, p.addr as *mut u8, p.count) };
    }
}

/// The error of a failed transfer of the epoch's closing.
pub(crate) fn xfer(e: impl Into<MpiError>) -> MpiError {
    e.into()
}

/// Closes the epoch between this rank and `peers` (window ranks, this rank possibly among
/// them): sends each target in `targets` its batch (a length, then the batch when not empty),
/// applies what every origin of `origins` sends, in rank order, replies, and takes the
/// replies. Returns the first error code of this rank's operations.
fn exchange(w: &Win, targets: &[u32], origins: &[u32]) -> Result<(), MpiError> {
    let me = w.comm.rank();
    let (batches, pendings) = take_queue(w, targets)?;
    let mut sends = Vec::new();
    for &t in targets {
        if t == me {
            continue;
        }
        let b = &batches[t as usize];
        sends.push(
            w.comm
                .isend(t, TAG_LEN, &(b.len() as u64).to_le_bytes())
                .map_err(xfer)?,
        );
        if !b.is_empty() {
            sends.push(w.comm.isend(t, TAG_BATCH, b).map_err(xfer)?);
        }
    }
    let mut own_reply = None;
    for &o in origins {
        let batch = if o == me {
            batches[me as usize].clone()
        } else {
            let mut len = [0u8; 8];
            w.comm
                .recv(&mut len, Source::Rank(o), TagMatch::Tag(TAG_LEN))
                .map_err(xfer)?;
            let len = u64::from_le_bytes(len) as usize;
            let mut b = vec![0u8; len];
            if len > 0 {
                w.comm
                    .recv(&mut b, Source::Rank(o), TagMatch::Tag(TAG_BATCH))
                    .map_err(xfer)?;
            }
            b
        };
        if batch.is_empty() {
            continue;
        }
        let reply = apply(w, &batch);
        if o == me {
            own_reply = Some(reply);
        } else {
            sends.push(w.comm.isend(o, TAG_REPLY, &reply).map_err(xfer)?);
        }
    }
    let mut code = abi::SUCCESS;
    for &t in targets {
        if batches[t as usize].is_empty() {
            continue;
        }
        let want = 4 + pendings[t as usize].iter().map(|p| p.len).sum::<usize>();
        let reply = if t == me {
            own_reply.take().unwrap_or_default()
        } else {
            let mut r = vec![0u8; want];
            w.comm
                .recv(&mut r, Source::Rank(t), TagMatch::Tag(TAG_REPLY))
                .map_err(xfer)?;
            r
        };
        take_reply(&reply, want, &pendings[t as usize], &mut code)?;
    }
    for mut s in sends {
        s.wait().map_err(xfer)?;
    }
    refused(code)
}

/// The batches and result places queued for every target, taken from the queue (which is left
/// empty); `MPI_ERR_RMA_SYNC` if a target outside `targets` has operations queued.
pub(crate) type Taken = (Vec<Vec<u8>>, Vec<Vec<Pending>>);

/// Takes the queue of `w` for an epoch to `targets` (see [`Taken`]).
pub(crate) fn take_queue(w: &Win, targets: &[u32]) -> Result<Taken, MpiError> {
    let (batches, pendings) = {
        let mut q = lock(&w.queue);
        let n = q.batches.len();
        let b = std::mem::replace(&mut q.batches, (0..n).map(|_| Vec::new()).collect());
        let p = std::mem::replace(&mut q.pending, (0..n).map(|_| Vec::new()).collect());
        (b, p)
    };
    if let Some((t, _)) = batches
        .iter()
        .enumerate()
        .find(|(t, b)| !b.is_empty() && !targets.contains(&(*t as u32)))
    {
        return Err(MpiError::new(
            ERR_RMA_SYNC,
            format!("operations on target {t} outside the access epoch's group"),
        ));
    }
    Ok((batches, pendings))
}

/// `Ok` for a reply's `MPI_SUCCESS`, else the error class a target refused an operation with.
pub(crate) fn refused(code: c_int) -> Result<(), MpiError> {
    let why = match code {
        abi::SUCCESS => return Ok(()),
        ERR_RMA_RANGE => "outside the target's window (MPI_ERR_RMA_RANGE)",
        err::OP => "the operation does not apply to the target's elements (MPI_ERR_OP)",
        err::TYPE => "the target datatype does not suit the operation (MPI_ERR_TYPE)",
        _ => "the target could not apply it",
    };
    Err(MpiError::new(
        code,
        format!("a one-sided operation was refused by its target: {why}"),
    ))
}

pub(crate) fn check_assert(a: c_int) -> Result<(), MpiError> {
    if a & !ASSERT_BITS != 0 {
        return Err(MpiError::new(
            53,
            format!("assert {a:#x} has bits no MPI_MODE_ constant has"),
        ));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Win_fence` (collective): closes the epoch (every rank exchanges its batches with
    /// every other, applies what it receives in origin-rank order, takes its replies), then a
    /// barrier. Asserts are accepted and do not change what it does.
    MPI_Win_fence / PMPI_Win_fence(assert: c_int, win: Handle) on win => {
        let w = self::win(win)?;
        check_assert(assert)?;
        if crate::winlock::epoch_open(&w) {
            return Err(MpiError::new(ERR_RMA_SYNC, "MPI_Win_fence inside a passive-target epoch (MPI_Win_lock or MPI_Win_lock_all)"));
        }
        let all: Vec<u32> = (0..w.comm.size()).collect();
        let done = exchange(&w, &all, &all);
        w.comm.barrier()?;
        w.fenced.store(assert & MODE_NOSUCCEED == 0, Ordering::Relaxed);
        done
    }
}
