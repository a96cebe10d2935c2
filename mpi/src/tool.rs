//! The MPI tool information interface (`MPI_T_*`, MPI 4.0 chapter 15), kept minimal: viaduct's
//! settings as read-only control variables in one category, `viaduct`; no performance
//! variables, enumerations, event sources or events (the calls on them work on zero of each).
//!
//! The interface works before `MPI_Init` and after `MPI_Finalize`: `MPI_T_init_thread` and
//! `MPI_T_finalize` are counted, and every other call between them answers;
//! outside, `MPI_T_ERR_NOT_INITIALIZED`. The calls return their error codes and run no error
//! handler, as the standard says. A control variable's value is the one in force: the running
//! agent's settings between `MPI_Init` and `MPI_Finalize`, else the `VIADUCT_*` environment
//! variables as the agent would read them (the defaults where one is not valid). Writing one
//! is `MPI_T_ERR_CVAR_SET_NEVER`: settings are fixed when the agent starts.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use viaduct_agent::Config;

use crate::abi::{self, Handle, MpiCount, dt};

/// The `count` of a string control variable: bytes of its buffer, NUL included (a longer
/// value is cut to fit).
const TEXT_MAX: usize = 256;
/// `MPI_T_ERR_NOT_INITIALIZED`.
const ERR_NOT_INITIALIZED: c_int = 60;
/// `MPI_T_ERR_INVALID_INDEX`.
const ERR_INVALID_INDEX: c_int = 62;
/// `MPI_T_ERR_INVALID_HANDLE`.
const ERR_INVALID_HANDLE: c_int = 64;
/// `MPI_T_ERR_INVALID_SESSION`.
const ERR_INVALID_SESSION: c_int = 67;
/// `MPI_T_ERR_CVAR_SET_NEVER`.
const ERR_CVAR_SET_NEVER: c_int = 69;
/// `MPI_T_ERR_INVALID_NAME`.
const ERR_INVALID_NAME: c_int = 73;
/// `MPI_ERR_ARG`.
const ERR_ARG: c_int = abi::err::ARG;
/// `MPI_T_VERBOSITY_USER_BASIC`.
const VERBOSITY_USER_BASIC: c_int = 221;
/// `MPI_T_BIND_NO_OBJECT`.
const BIND_NO_OBJECT: c_int = 9700;
/// `MPI_T_SCOPE_READONLY`.
const SCOPE_READONLY: c_int = 60439;
/// The one category.
const CATEGORY: &str = "viaduct";

/// `MPI_T_init_thread` calls not yet matched by `MPI_T_finalize`.
static OPEN: AtomicU32 = AtomicU32::new(0);

/// A control variable's value.
enum Value {
    /// `MPI_UNSIGNED_LONG_LONG`.
    Size(u64),
    /// `MPI_UNSIGNED`.
    Unsigned(u32),
    /// `MPI_DOUBLE`.
    Double(f64),
    /// `MPI_CHAR` (a NUL-terminated string).
    Text(String),
}

/// A control variable: its name, description and value.
struct Cvar {
    name: &'static str,
    desc: &'static str,
    value: Value,
}

/// The settings in force.
fn config() -> Config {
    match crate::state::rt() {
        Ok(r) => r.agent.config().clone(),
        Err(_) => Config::from_env().unwrap_or_default(),
    }
}

/// Names of the control variables, in index order (the values come from [`cvars`]).
const NAMES: &[&str] = &[
    "VIADUCT_TRANSPORT",
    "VIADUCT_EAGER_LIMIT",
    "VIADUCT_PEER_TIMEOUT",
    "VIADUCT_CONNECT_TIMEOUT",
    "VIADUCT_MAX_UNEXPECTED_BYTES",
    "VIADUCT_SPIN_MIN",
    "VIADUCT_SPIN_MAX",
    "VIADUCT_PROGRESS",
    "VIADUCT_YIELD_POLLS",
    "VIADUCT_RDMA_DEVICE",
    "VIADUCT_VERBS_WRITE_MIN",
    "VIADUCT_TCP_IFACE",
    "VIADUCT_XFER_CHUNK",
    "VIADUCT_SHM_RING_COPY_MAX",
    "VIADUCT_SHM_RING_COPY_CHUNK",
    "VIADUCT_COLL_BCAST_CHAIN_MIN",
    "VIADUCT_COLL_ALLREDUCE_RSAG_MIN",
    "VIADUCT_COLL_ALLGATHER_RING_MIN",
    "VIADUCT_COLL_SMALL_MAX",
    "VIADUCT_COLL_BCAST_P2P_MAX",
    "VIADUCT_COLL_ALLTOALL_P2P_MIN",
];

/// The control variables with their values in force, in the order of [`NAMES`].
fn cvars() -> Vec<Cvar> {
    let c = config();
    let size = |v: usize| Value::Size(v as u64);
    let text = |v: &Option<String>| Value::Text(v.clone().unwrap_or_default());
    let transports = c
        .transports
        .iter()
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(",");
    let sp = &c.switch_points;
    let v = vec![
        ("methods in order of preference", Value::Text(transports)),
        ("largest message sent eagerly (bytes)", size(c.eager_limit)),
        (
            "seconds after which a silent peer fails",
            Value::Double(c.peer_timeout.as_secs_f64()),
        ),
        (
            "seconds allowed for connection set-up",
            Value::Double(c.connect_timeout.as_secs_f64()),
        ),
        (
            "unexpected bytes held before back-pressure",
            size(c.max_unexpected_bytes),
        ),
        (
            "fewest progress polls before sleeping",
            Value::Unsigned(c.spin_min),
        ),
        (
            "most progress polls before sleeping",
            Value::Unsigned(c.spin_max),
        ),
        (
            "how a blocking wait waits",
            Value::Text(format!("{:?}", c.progress).to_lowercase()),
        ),
        (
            "most polls, yielding the CPU, before sleeping (progress mode yield)",
            Value::Unsigned(c.yield_polls),
        ),
        (
            "RDMA device of the verbs method (empty: the first active)",
            text(&c.rdma_device),
        ),
        (
            "verbs: rendezvous written by the sender from (bytes; 0: always read)",
            size(c.verbs_write_min),
        ),
        (
            "network interface of TCP (empty: chosen at init)",
            text(&c.tcp_iface),
        ),
        ("bytes per piece of an xfer block", size(c.xfer_chunk)),
        (
            "shared memory: longest ring copy (bytes)",
            size(c.shm_ring_copy_max),
        ),
        (
            "shared memory: ring copy chunk (bytes)",
            size(c.shm_ring_copy_chunk),
        ),
        ("bcast: chain from (bytes)", size(sp.bcast_chain_min)),
        (
            "allreduce: reduce-scatter/allgather from (bytes)",
            size(sp.allreduce_rsag_min),
        ),
        ("allgather: ring from (bytes)", size(sp.allgather_ring_min)),
        (
            "collectives by point to point up to (bytes)",
            size(sp.small_max),
        ),
        (
            "bcast on more than two ranks: whole messages up to (bytes)",
            size(sp.bcast_p2p_max),
        ),
        (
            "alltoall: parts by point to point from (bytes)",
            size(sp.alltoall_p2p_min),
        ),
    ];
    NAMES
        .iter()
        .zip(v)
        .map(|(&name, (desc, value))| Cvar { name, desc, value })
        .collect()
}

/// Defines an `MPI_T_` function: `PMPI_T_X` runs `$body` (returning the code), `MPI_T_X`
/// forwards to it. Every call but `MPI_T_init_thread` answers `MPI_T_ERR_NOT_INITIALIZED`
/// outside `MPI_T_init_thread`/`MPI_T_finalize`.
macro_rules! t_fn {
    ($(#[$doc:meta])* $mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) $(open $open:tt)? => $body:block) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// Every pointer argument follows the MPI standard's contract for this call.
        #[unsafe(no_mangle)]
        #[allow(unused_variables)]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> c_int {
            let needs_open = true $(&& $open)?;
            if needs_open && OPEN.load(Ordering::SeqCst) == 0 {
                return ERR_NOT_INITIALIZED;
            }
            #[allow(unused_unsafe, clippy::redundant_closure_call)]
            (|| -> c_int { $body })()
        }

        #[doc = concat!("`", stringify!($mpi), "`: the profiling entry, calls `", stringify!($pmpi), "`.")]
        ///
        /// # Safety
        ///
        /// As for the `PMPI_` function it calls.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $mpi($($a: $t),*) -> c_int {
            // SAFETY: the caller's contract is the one of the function called.
            unsafe { $pmpi($($a),*) }
        }
    };
}

/// Writes `v` to the caller's `p` unless NULL.
///
/// # Safety
///
/// `p` is NULL or writable.
unsafe fn put<T>(p: *mut T, v: T) {
    // SAFETY: the caller's pointer, NULL or writable.
    if let Some(p) = unsafe { p.as_mut() } {
        *p = v;
    }
}

/// Copies `s` into the caller's `buf` of `*len` bytes (truncated, NUL-terminated) and sets
/// `*len` to its full length with the NUL, as the standard's string rules say (`len` NULL:
/// nothing; `buf` NULL or `*len` 0: the length only).
///
/// # Safety
///
/// `len` is NULL or the caller's int; `buf` is NULL or holds `*len` bytes.
unsafe fn put_str(s: &str, buf: *mut c_char, len: *mut c_int) {
    // SAFETY: the caller's int.
    let Some(len) = (unsafe { len.as_mut() }) else {
        return;
    };
    if !buf.is_null() && *len > 0 {
        let n = s.len().min(*len as usize - 1);
        // SAFETY: the caller's buffer of `*len` bytes; `n + 1 <= *len`.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
    }
    *len = c_int::try_from(s.len() + 1).unwrap_or(c_int::MAX);
}

/// The caller's NUL-terminated name (`None`: NULL or not UTF-8).
///
/// # Safety
///
/// `name` is NULL or a NUL-terminated string.
unsafe fn name_of<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: the caller's NUL-terminated string.
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

/// The index of a control variable from its handle (`index + 1` as an address).
fn cvar_of(handle: *mut c_void) -> Option<usize> {
    let h = handle as usize;
    (h >= 1 && h <= NAMES.len()).then(|| h - 1)
}

t_fn! {
    /// `MPI_T_init_thread`: counted; every thread level is provided as asked.
    MPI_T_init_thread / PMPI_T_init_thread(required: c_int, provided: *mut c_int) open false => {
        if provided.is_null() {
            return ERR_ARG;
        }
        let level = required.clamp(abi::THREAD_SINGLE, abi::THREAD_MULTIPLE);
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *provided = level };
        OPEN.fetch_add(1, Ordering::SeqCst);
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_finalize`: matches one `MPI_T_init_thread`.
    MPI_T_finalize / PMPI_T_finalize() => {
        let _ = OPEN.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_cvar_get_num`: viaduct's settings.
    MPI_T_cvar_get_num / PMPI_T_cvar_get_num(num_cvar: *mut c_int) => {
        if num_cvar.is_null() {
            return ERR_ARG;
        }
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *num_cvar = NAMES.len() as c_int };
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_cvar_get_info`.
    MPI_T_cvar_get_info / PMPI_T_cvar_get_info(cvar_index: c_int, name: *mut c_char, name_len: *mut c_int, verbosity: *mut c_int, datatype: *mut Handle, enumtype: *mut *mut c_void, desc: *mut c_char, desc_len: *mut c_int, bind: *mut c_int, scope: *mut c_int) => {
        let Some(v) = usize::try_from(cvar_index).ok().and_then(|i| cvars().into_iter().nth(i)) else {
            return ERR_INVALID_INDEX;
        };
        let t = match v.value {
            Value::Size(_) => dt::UNSIGNED_LONG_LONG,
            Value::Unsigned(_) => dt::UNSIGNED,
            Value::Double(_) => dt::DOUBLE,
            Value::Text(_) => dt::CHAR,
        };
        // SAFETY: the caller's pointers, each NULL or writable (strings: of the lengths given).
        unsafe {
            put_str(v.name, name, name_len);
            put_str(v.desc, desc, desc_len);
            put(verbosity, VERBOSITY_USER_BASIC);
            put(datatype, t);
            put(enumtype, std::ptr::null_mut());
            put(bind, BIND_NO_OBJECT);
            put(scope, SCOPE_READONLY);
        }
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_cvar_get_index`.
    MPI_T_cvar_get_index / PMPI_T_cvar_get_index(name: *const c_char, cvar_index: *mut c_int) => {
        if cvar_index.is_null() {
            return ERR_ARG;
        }
        // SAFETY: the caller's string.
        let Some(i) = unsafe { name_of(name) }.and_then(|n| NAMES.iter().position(|&x| x == n)) else {
            return ERR_INVALID_NAME;
        };
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *cvar_index = i as c_int };
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_cvar_handle_alloc`: every variable is bound to no object; `count` is 1, or 256
    /// for a string (its buffer, NUL included).
    MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc(cvar_index: c_int, obj_handle: *mut c_void, handle: *mut *mut c_void, count: *mut c_int) => {
        if handle.is_null() || count.is_null() {
            return ERR_ARG;
        }
        let Some(v) = usize::try_from(cvar_index).ok().and_then(|i| cvars().into_iter().nth(i)) else {
            return ERR_INVALID_INDEX;
        };
        let n = match &v.value {
            Value::Text(_) => TEXT_MAX as c_int,
            _ => 1,
        };
        // SAFETY: the caller's pointers, checked not NULL.
        unsafe {
            *handle = (cvar_index as usize + 1) as *mut c_void;
            *count = n;
        }
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_cvar_handle_free`: sets the handle to `MPI_T_CVAR_HANDLE_NULL`.
    MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free(handle: *mut *mut c_void) => {
        // SAFETY: the caller's handle.
        let Some(h) = (unsafe { handle.as_mut() }) else {
            return ERR_ARG;
        };
        if cvar_of(*h).is_none() {
            return ERR_INVALID_HANDLE;
        }
        *h = std::ptr::null_mut();
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_cvar_read`: the value in force, as the variable's datatype.
    MPI_T_cvar_read / PMPI_T_cvar_read(handle: *mut c_void, buf: *mut c_void) => {
        let Some(i) = cvar_of(handle) else {
            return ERR_INVALID_HANDLE;
        };
        if buf.is_null() {
            return ERR_ARG;
        }
        let Some(v) = cvars().into_iter().nth(i) else {
            return ERR_INVALID_HANDLE;
        };
        // SAFETY: the caller's buffer, of the count the handle's allocation gave.
        unsafe {
            match v.value {
                Value::Size(x) => *(buf as *mut u64) = x,
                Value::Unsigned(x) => *(buf as *mut u32) = x,
                Value::Double(x) => *(buf as *mut f64) = x,
                Value::Text(s) => {
                    let n = s.len().min(TEXT_MAX - 1);
                    std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
                    *(buf as *mut u8).add(n) = 0;
                }
            }
        }
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_cvar_write`: `MPI_T_ERR_CVAR_SET_NEVER` (the settings are fixed at start).
    MPI_T_cvar_write / PMPI_T_cvar_write(handle: *mut c_void, buf: *const c_void) => {
        if cvar_of(handle).is_none() {
            return ERR_INVALID_HANDLE;
        }
        ERR_CVAR_SET_NEVER
    }
}

t_fn! {
    /// `MPI_T_pvar_get_num`: none.
    MPI_T_pvar_get_num / PMPI_T_pvar_get_num(num_pvar: *mut c_int) => {
        if num_pvar.is_null() {
            return ERR_ARG;
        }
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *num_pvar = 0 };
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_pvar_get_info`: there are no performance variables (`MPI_T_ERR_INVALID_INDEX`).
    MPI_T_pvar_get_info / PMPI_T_pvar_get_info(pvar_index: c_int) => { ERR_INVALID_INDEX }
}

t_fn! {
    /// `MPI_T_pvar_get_index`: there are no performance variables (`MPI_T_ERR_INVALID_NAME`).
    MPI_T_pvar_get_index / PMPI_T_pvar_get_index(name: *const c_char, var_class: c_int, pvar_index: *mut c_int) => { ERR_INVALID_NAME }
}

/// Sessions made and not freed (a session handle is its number as an address).
static SESSIONS: AtomicU32 = AtomicU32::new(0);

t_fn! {
    /// `MPI_T_pvar_session_create`: a session (of no variables).
    MPI_T_pvar_session_create / PMPI_T_pvar_session_create(session: *mut *mut c_void) => {
        if session.is_null() {
            return ERR_ARG;
        }
        let n = SESSIONS.fetch_add(1, Ordering::SeqCst) as usize + 1;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { *session = n as *mut c_void };
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_pvar_session_free`: sets the session to `MPI_T_PVAR_SESSION_NULL`.
    MPI_T_pvar_session_free / PMPI_T_pvar_session_free(session: *mut *mut c_void) => {
        // SAFETY: the caller's handle.
        let Some(s) = (unsafe { session.as_mut() }) else {
            return ERR_ARG;
        };
        if s.is_null() {
            return ERR_INVALID_SESSION;
        }
        *s = std::ptr::null_mut();
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_pvar_handle_alloc`: there are no performance variables.
    MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc(session: *mut c_void, pvar_index: c_int) => {
        if session.is_null() { ERR_INVALID_SESSION } else { ERR_INVALID_INDEX }
    }
}

/// What the calls on a performance variable handle answer: no handle exists.
fn no_pvar(session: *mut c_void) -> c_int {
    if session.is_null() {
        ERR_INVALID_SESSION
    } else {
        ERR_INVALID_HANDLE
    }
}

t_fn! {
    /// `MPI_T_pvar_handle_free`: no handle exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free(session: *mut c_void, handle: *mut *mut c_void) => { no_pvar(session) }
}
t_fn! {
    /// `MPI_T_pvar_start`: no handle exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_pvar_start / PMPI_T_pvar_start(session: *mut c_void, handle: *mut c_void) => { no_pvar(session) }
}
t_fn! {
    /// `MPI_T_pvar_stop`: no handle exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_pvar_stop / PMPI_T_pvar_stop(session: *mut c_void, handle: *mut c_void) => { no_pvar(session) }
}
t_fn! {
    /// `MPI_T_pvar_read`: no handle exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_pvar_read / PMPI_T_pvar_read(session: *mut c_void, handle: *mut c_void, buf: *mut c_void) => { no_pvar(session) }
}
t_fn! {
    /// `MPI_T_pvar_write`: no handle exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_pvar_write / PMPI_T_pvar_write(session: *mut c_void, handle: *mut c_void, buf: *const c_void) => { no_pvar(session) }
}
t_fn! {
    /// `MPI_T_pvar_reset`: no handle exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_pvar_reset / PMPI_T_pvar_reset(session: *mut c_void, handle: *mut c_void) => { no_pvar(session) }
}
t_fn! {
    /// `MPI_T_pvar_readreset`: no handle exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_pvar_readreset / PMPI_T_pvar_readreset(session: *mut c_void, handle: *mut c_void, buf: *mut c_void) => { no_pvar(session) }
}

t_fn! {
    /// `MPI_T_category_get_num`: one category, `viaduct`.
    MPI_T_category_get_num / PMPI_T_category_get_num(num_cat: *mut c_int) => {
        if num_cat.is_null() {
            return ERR_ARG;
        }
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *num_cat = 1 };
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_category_get_info`: category 0, `viaduct`, holds every control variable.
    MPI_T_category_get_info / PMPI_T_category_get_info(cat_index: c_int, name: *mut c_char, name_len: *mut c_int, desc: *mut c_char, desc_len: *mut c_int, num_cvars: *mut c_int, num_pvars: *mut c_int, num_categories: *mut c_int) => {
        if cat_index != 0 {
            return ERR_INVALID_INDEX;
        }
        // SAFETY: the caller's pointers, each NULL or writable (strings: of the lengths given).
        unsafe {
            put_str(CATEGORY, name, name_len);
            put_str("viaduct's settings (VIADUCT_* environment variables)", desc, desc_len);
            put(num_cvars, NAMES.len() as c_int);
            put(num_pvars, 0);
            put(num_categories, 0);
        }
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_category_get_index`.
    MPI_T_category_get_index / PMPI_T_category_get_index(name: *const c_char, cat_index: *mut c_int) => {
        if cat_index.is_null() {
            return ERR_ARG;
        }
        // SAFETY: the caller's string.
        if unsafe { name_of(name) } != Some(CATEGORY) {
            return ERR_INVALID_NAME;
        }
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *cat_index = 0 };
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_category_get_cvars`: the first `len` control variables' indices.
    MPI_T_category_get_cvars / PMPI_T_category_get_cvars(cat_index: c_int, len: c_int, indices: *mut c_int) => {
        if cat_index != 0 {
            return ERR_INVALID_INDEX;
        }
        let n = usize::try_from(len).unwrap_or(0).min(NAMES.len());
        if n > 0 && indices.is_null() {
            return ERR_ARG;
        }
        for i in 0..n {
            // SAFETY: the caller's array of `len >= n` ints.
            unsafe { *indices.add(i) = i as c_int };
        }
        abi::SUCCESS
    }
}

/// The `MPI_T_category_get_*` calls on what the category does not hold.
fn empty_category(cat_index: c_int) -> c_int {
    if cat_index == 0 {
        abi::SUCCESS
    } else {
        ERR_INVALID_INDEX
    }
}

t_fn! {
    /// `MPI_T_category_get_pvars`: none.
    MPI_T_category_get_pvars / PMPI_T_category_get_pvars(cat_index: c_int, len: c_int, indices: *mut c_int) => { empty_category(cat_index) }
}
t_fn! {
    /// `MPI_T_category_get_categories`: none.
    MPI_T_category_get_categories / PMPI_T_category_get_categories(cat_index: c_int, len: c_int, indices: *mut c_int) => { empty_category(cat_index) }
}
t_fn! {
    /// `MPI_T_category_get_events`: none.
    MPI_T_category_get_events / PMPI_T_category_get_events(cat_index: c_int, len: c_int, indices: *mut c_int) => { empty_category(cat_index) }
}

t_fn! {
    /// `MPI_T_category_get_num_events`: none.
    MPI_T_category_get_num_events / PMPI_T_category_get_num_events(cat_index: c_int, num_events: *mut c_int) => {
        let rc = empty_category(cat_index);
        // SAFETY: the caller's int, NULL or writable.
        unsafe { put(num_events, 0) };
        rc
    }
}

t_fn! {
    /// `MPI_T_category_changed`: the categories never change (0).
    MPI_T_category_changed / PMPI_T_category_changed(update_number: *mut c_int) => {
        if update_number.is_null() {
            return ERR_ARG;
        }
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *update_number = 0 };
        abi::SUCCESS
    }
}

t_fn! {
    /// `MPI_T_enum_get_info`: there are no enumerations (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_enum_get_info / PMPI_T_enum_get_info(enumtype: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_enum_get_item`: there are no enumerations (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_enum_get_item / PMPI_T_enum_get_item(enumtype: *mut c_void) => { ERR_INVALID_HANDLE }
}

t_fn! {
    /// `MPI_T_source_get_num`: none.
    MPI_T_source_get_num / PMPI_T_source_get_num(num_sources: *mut c_int) => {
        if num_sources.is_null() {
            return ERR_ARG;
        }
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *num_sources = 0 };
        abi::SUCCESS
    }
}
t_fn! {
    /// `MPI_T_source_get_info`: there are no event sources (`MPI_T_ERR_INVALID_INDEX`).
    MPI_T_source_get_info / PMPI_T_source_get_info(source_index: c_int) => { ERR_INVALID_INDEX }
}
t_fn! {
    /// `MPI_T_source_get_timestamp`: there are no event sources (`MPI_T_ERR_INVALID_INDEX`).
    MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp(source_index: c_int, timestamp: *mut MpiCount) => { ERR_INVALID_INDEX }
}

t_fn! {
    /// `MPI_T_event_get_num`: none.
    MPI_T_event_get_num / PMPI_T_event_get_num(num_events: *mut c_int) => {
        if num_events.is_null() {
            return ERR_ARG;
        }
        // SAFETY: the caller's int, checked not NULL.
        unsafe { *num_events = 0 };
        abi::SUCCESS
    }
}
t_fn! {
    /// `MPI_T_event_get_info`: there are no events (`MPI_T_ERR_INVALID_INDEX`).
    MPI_T_event_get_info / PMPI_T_event_get_info(event_index: c_int) => { ERR_INVALID_INDEX }
}
t_fn! {
    /// `MPI_T_event_get_index`: there are no events (`MPI_T_ERR_INVALID_NAME`).
    MPI_T_event_get_index / PMPI_T_event_get_index(name: *const c_char, event_index: *mut c_int) => { ERR_INVALID_NAME }
}
t_fn! {
    /// `MPI_T_event_handle_alloc`: there are no events (`MPI_T_ERR_INVALID_INDEX`).
    MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc(event_index: c_int) => { ERR_INVALID_INDEX }
}
t_fn! {
    /// `MPI_T_event_handle_free`: no registration exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_handle_free / PMPI_T_event_handle_free(registration: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_handle_get_info`: no registration exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info(registration: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_handle_set_info`: no registration exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info(registration: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_register_callback`: no registration exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_register_callback / PMPI_T_event_register_callback(registration: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_callback_get_info`: no registration exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info(registration: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_callback_set_info`: no registration exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info(registration: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_set_dropped_handler`: no registration exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler(registration: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_copy`: no event instance exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_copy / PMPI_T_event_copy(instance: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_read`: no event instance exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_read / PMPI_T_event_read(instance: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_get_source`: no event instance exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_get_source / PMPI_T_event_get_source(instance: *mut c_void) => { ERR_INVALID_HANDLE }
}
t_fn! {
    /// `MPI_T_event_get_timestamp`: no event instance exists (`MPI_T_ERR_INVALID_HANDLE`).
    MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp(instance: *mut c_void) => { ERR_INVALID_HANDLE }
}
