//! MPI-4 sessions: `MPI_Session_init`/`MPI_Session_finalize`, the process sets
//! `mpi://WORLD` and `mpi://SELF` (`MPI_Session_get_num_psets`, `MPI_Session_get_nth_pset`,
//! `MPI_Session_get_pset_info`), `MPI_Group_from_session_pset`, `MPI_Comm_create_from_group`,
//! and the session's error handler and info.
//!
//! A session shares the one runtime of the process with the world model: the first of
//! `MPI_Init` and `MPI_Session_init` starts it (the agent from the launcher's environment),
//! and the last of `MPI_Finalize` and `MPI_Session_finalize` ends it (the agent's finalize,
//! where every process meets), except that a process that never called `MPI_Init` keeps it
//! after its last session ends, for sessions started again later (MPI-4 allows that), and
//! ends it at exit. A runtime that ended does not start again. A communicator of
//! `MPI_Comm_create_from_group` is made by the agent's `Comm::create_group` over the world
//! communicator's members in the group, the string tag hashed into its tag.

use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::abi::{self, Handle, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::misc::{string, valid_handler};
use crate::state::{self, CommEntry, rt};

/// `MPI_SESSION_NULL`.
const SESSION_NULL: Handle = 0x3800_0000;
/// The kind bits of a session handle (MPICH's direct session handles).
const SESSION_KIND: u32 = 0xb800_0000;
/// `MPI_ERR_SESSION`.
const ERR_SESSION: c_int = 75;
/// The process sets every session knows.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// An open session.
struct Session {
    errhandler: Handle,
}

fn sessions() -> MutexGuard<'static, HashMap<Handle, Session>> {
    static S: OnceLock<Mutex<HashMap<Handle, Session>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

static NEXT: AtomicI32 = AtomicI32::new(SESSION_KIND as Handle);

/// The error handler of session `h`, if `h` is an open session (`None` for
/// `MPI_SESSION_NULL` or a session not open: the caller then uses `MPI_COMM_WORLD`'s, as
/// MPICH does); an error handler handle stands for itself (the calls that take an error
/// handler report their errors through it).
pub(crate) fn errhandler_of(h: Handle) -> Option<Handle> {
    let bits = h as u32;
    if bits & 0x3c00_0000 == 0x1400_0000 && valid_handler(h) {
        return Some(h);
    }
    if bits & 0xfc00_0000 != SESSION_KIND && h != SESSION_NULL {
        return None;
    }
    // `MPI_SESSION_NULL` or a session not open: the default handler, as MPICH raises errors
    // on no session (that of `MPI_COMM_WORLD`, where the caller looks next).
    sessions().get(&h).map(|s| s.errhandler)
}

/// Checks that `h` is an open session.
fn check(h: Handle) -> Result<(), MpiError> {
    if sessions().contains_key(&h) {
        Ok(())
    } else if h == SESSION_NULL {
        Err(MpiError::new(
            ERR_SESSION,
            "the session is MPI_SESSION_NULL",
        ))
    } else {
        Err(MpiError::new(
            ERR_SESSION,
            format!("{h:#x} is not an open session"),
        ))
    }
}

/// Ends the runtime unless the world model or a session still uses it (for `MPI_Finalize`
/// and `MPI_Session_finalize`). When the last session of a process that never called
/// `MPI_Init` ends, the runtime stays up for a later `MPI_Session_init` (MPI-4 lets a process
/// start sessions again) or `MPI_Init`, and ends at the process's exit.
pub(crate) fn end_unless_in_use() -> Result<(), MpiError> {
    let world = state::initialized() && !state::finalized();
    if world || !sessions().is_empty() {
        return Ok(());
    }
    if !state::initialized() {
        end_at_exit();
        return Ok(());
    }
    end_now()
}

/// Ends the runtime now (the agent's finalize, where every process meets).
fn end_now() -> Result<(), MpiError> {
    let rt = rt()?;
    let agent = rt.agent.clone();
    state::set_ended();
    agent.finalize()?;
    Ok(())
}

/// Has the runtime end when the process exits, unless it ended before (once per process).
fn end_at_exit() {
    extern "C" fn at_exit() {
        let idle = (!state::initialized() || state::finalized()) && sessions().is_empty();
        if idle && !state::ended() && state::runtime().is_some() {
            let _ = end_now();
        }
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: `at_exit` is an `extern "C"` function without arguments that lives for the
        // whole process, as atexit(3) asks.
        let rc = unsafe { libc::atexit(at_exit) };
        if rc != 0 {
            // Without the hook the runtime ends now, as before sessions could start again.
            let _ = end_now();
        }
    });
}

/// The world ranks of process set `name` (compared without regard to case).
fn members(name: &str) -> Result<Vec<u32>, MpiError> {
    let rt = rt()?;
    if name.eq_ignore_ascii_case(PSETS[0]) {
        Ok((0..rt.agent.size()).collect())
    } else if name.eq_ignore_ascii_case(PSETS[1]) {
        Ok(vec![rt.agent.rank()])
    } else {
        Err(MpiError::new(
            err::ARG,
            format!(
                "process set \"{name}\" does not exist (the sets are {})",
                PSETS.join(", ")
            ),
        ))
    }
}

/// The values of info key `thread_level` of `MPI_Session_init` (the names of the thread
/// support levels).
const THREAD_LEVELS: [&str; 4] = [
    "MPI_THREAD_SINGLE",
    "MPI_THREAD_FUNNELED",
    "MPI_THREAD_SERIALIZED",
    "MPI_THREAD_MULTIPLE",
];

/// Checks the info of `MPI_Session_init`: `MPI_INFO_NULL` or an info object
/// (`MPI_ERR_INFO` otherwise) whose key `thread_level`, when set, names a thread support level
/// (`MPI_ERR_ARG` otherwise, as the standard defines no other value).
fn check_init_info(info: Handle) -> Result<(), MpiError> {
    let pairs = crate::misc::hints_of(info)?;
    match pairs.iter().find(|(k, _)| k == "thread_level") {
        Some((_, v)) if !THREAD_LEVELS.contains(&v.trim()) => Err(MpiError::new(
            err::ARG,
            format!(
                "info key thread_level is \"{v}\", not one of {}",
                THREAD_LEVELS.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

/// The name of thread level `level`.
fn level_name(level: c_int) -> &'static str {
    match level {
        0 => "MPI_THREAD_SINGLE",
        1 => "MPI_THREAD_FUNNELED",
        2 => "MPI_THREAD_SERIALIZED",
        _ => "MPI_THREAD_MULTIPLE",
    }
}

mpi_fn! {
    /// `MPI_Session_init`: starts the runtime if neither `MPI_Init` nor another session did
    /// (at `MPI_THREAD_MULTIPLE`); the info's `thread_level` is checked (see
    /// [`check_init_info`]) and not otherwise read.
    MPI_Session_init / PMPI_Session_init(info: Handle, errhandler: Handle, session: *mut Handle) on errhandler => {
        if !valid_handler(errhandler) {
            return Err(MpiError::new(err::ARG, format!("{errhandler:#x} is not an error handler")));
        }
        check_init_info(info)?;
        if session.is_null() {
            return Err(MpiError::new(err::ARG, "session is NULL"));
        }
        if state::ended() {
            return Err(MpiError::new(err::OTHER, "MPI ended (MPI_Finalize or the last MPI_Session_finalize); it does not start again"));
        }
        crate::env::start(abi::THREAD_MULTIPLE)?;
        let h = NEXT.fetch_add(1, Ordering::Relaxed);
        sessions().insert(h, Session { errhandler });
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(session, h, "session") }
    }
}

mpi_fn! {
    /// `MPI_Session_finalize`: the session's handle becomes `MPI_SESSION_NULL`; the last
    /// session, once `MPI_Finalize` was called or without `MPI_Init`, ends the runtime (every
    /// process meets in the agent's finalize).
    MPI_Session_finalize / PMPI_Session_finalize(session: *mut Handle) on abi::ERRORS_ARE_FATAL => {
        // SAFETY: the caller's handle.
        let h = unsafe { session.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "session is NULL"))?;
        check(*h).map_err(|e| e.on(*h))?;
        sessions().remove(h);
        *h = SESSION_NULL;
        end_unless_in_use()
    }
}

mpi_fn! {
    /// `MPI_Session_get_num_psets`: `mpi://WORLD` and `mpi://SELF`.
    MPI_Session_get_num_psets / PMPI_Session_get_num_psets(session: Handle, info: Handle, npset_names: *mut c_int) on session => {
        let _ = info;
        check(session)?;
        // SAFETY: the caller's int.
        unsafe { put(npset_names, PSETS.len() as c_int, "npset_names") }
    }
}

mpi_fn! {
    /// `MPI_Session_get_nth_pset`: with `*pset_len` 0, the length of the name plus one;
    /// otherwise the name, cut to `*pset_len - 1` bytes, and `*pset_len` set to its length plus
    /// one.
    MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(session: Handle, info: Handle, n: c_int, pset_len: *mut c_int, pset_name: *mut c_char) on session => {
        let _ = info;
        check(session)?;
        let name = usize::try_from(n).ok().and_then(|i| PSETS.get(i)).ok_or_else(|| {
            MpiError::new(err::ARG, format!("n = {n} is not below the {} process sets", PSETS.len()))
        })?;
        // SAFETY: the caller's int.
        let len = unsafe { pset_len.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "pset_len is NULL"))?;
        if *len > 0 {
            if pset_name.is_null() {
                return Err(MpiError::new(err::ARG, "pset_name is NULL"));
            }
            // SAFETY: the caller's buffer of `*len` bytes.
            unsafe { crate::misc::put_c(name, pset_name, *len as usize) };
        }
        *len = name.len() as c_int + 1;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Session_get_pset_info`: a new info object with `mpi_size`, the number of processes
    /// of the set.
    MPI_Session_get_pset_info / PMPI_Session_get_pset_info(session: Handle, pset_name: *const c_char, info: *mut Handle) on session => {
        check(session)?;
        // SAFETY: the caller's NUL-terminated string.
        let name = unsafe { string(pset_name, "pset_name") }?;
        let n = members(&name)?.len();
        if info.is_null() {
            return Err(MpiError::new(err::ARG, "info is NULL"));
        }
        let h = crate::misc::info_with(&[("mpi_size", n.to_string())]);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(info, h, "info") }
    }
}

mpi_fn! {
    /// `MPI_Session_get_info`: a new info object with `thread_level`, the runtime's thread
    /// level.
    MPI_Session_get_info / PMPI_Session_get_info(session: Handle, info_used: *mut Handle) on session => {
        check(session)?;
        if info_used.is_null() {
            return Err(MpiError::new(err::ARG, "info_used is NULL"));
        }
        let h = crate::misc::info_with(&[("thread_level", level_name(rt()?.thread_level).to_string())]);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(info_used, h, "info_used") }
    }
}

mpi_fn! {
    /// `MPI_Session_set_errhandler`.
    MPI_Session_set_errhandler / PMPI_Session_set_errhandler(session: Handle, errhandler: Handle) on session => {
        check(session)?;
        if !valid_handler(errhandler) {
            return Err(MpiError::new(err::ARG, format!("{errhandler:#x} is not an error handler")));
        }
        if let Some(s) = sessions().get_mut(&session) {
            s.errhandler = errhandler;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Session_get_errhandler`.
    MPI_Session_get_errhandler / PMPI_Session_get_errhandler(session: Handle, errhandler: *mut Handle) on session => {
        check(session)?;
        let h = sessions().get(&session).map_or(abi::ERRORS_ARE_FATAL, |s| s.errhandler);
        // The caller gets a new handle to free.
        crate::misc::hold_handler(h);
        // SAFETY: the caller's handle.
        unsafe { put(errhandler, h, "errhandler") }
    }
}

mpi_fn! {
    /// `MPI_Session_create_errhandler`: an error handler for sessions (the same table as the
    /// communicators' handlers; the function gets the session's handle).
    MPI_Session_create_errhandler / PMPI_Session_create_errhandler(session_errhandler_fn: Option<crate::misc::CommErrFn>, errhandler: *mut Handle) on abi::ERRORS_ARE_FATAL => {
        // SAFETY: forwarded with the caller's arguments; the function types are the same.
        let rc = unsafe { crate::misc::PMPI_Comm_create_errhandler(session_errhandler_fn, errhandler) };
        crate::error::check(rc == abi::SUCCESS, rc, || "the error handler was not created".into())
    }
}

mpi_fn! {
    /// `MPI_Session_call_errhandler`: runs the session's error handler with `errorcode`.
    MPI_Session_call_errhandler / PMPI_Session_call_errhandler(session: Handle, errorcode: c_int) on session => {
        check(session)?;
        crate::error::raise_exact("MPI_Session_call_errhandler", session, MpiError::new(errorcode, "raised by MPI_Session_call_errhandler"));
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Group_from_session_pset`: the group of process set `pset_name` (`mpi://WORLD`,
    /// `mpi://SELF`; another is `MPI_ERR_ARG`).
    MPI_Group_from_session_pset / PMPI_Group_from_session_pset(session: Handle, pset_name: *const c_char, newgroup: *mut Handle) on session => {
        check(session)?;
        // SAFETY: the caller's NUL-terminated string.
        let name = unsafe { string(pset_name, "pset_name") }?;
        let m = members(&name)?;
        if newgroup.is_null() {
            return Err(MpiError::new(err::ARG, "newgroup is NULL"));
        }
        let h = rt()?.add_group(m);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newgroup, h, "newgroup") }
    }
}

/// The tag of `MPI_Comm_create_from_group`'s string tag (FNV-1a, 31 bits): concurrent calls
/// with different string tags use different tags.
pub(crate) fn tag_of(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h & 0x7fff_ffff
}

mpi_fn! {
    /// `MPI_Comm_create_from_group` (collective over the group's members): a communicator of
    /// the group, in its order, with error handler `errhandler`; errors of the call go to
    /// `errhandler`. The info is accepted and not read.
    MPI_Comm_create_from_group / PMPI_Comm_create_from_group(group: Handle, stringtag: *const c_char, info: Handle, errhandler: Handle, newcomm: *mut Handle) on errhandler => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        let _ = info;
        let rt = rt()?;
        let g = rt.group(group)?;
        // SAFETY: the caller's NUL-terminated string.
        let tag = unsafe { string(stringtag, "stringtag") }?;
        if !valid_handler(errhandler) {
            return Err(MpiError::new(err::ARG, format!("{errhandler:#x} is not an error handler")));
        }
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        if g.is_empty() {
            // An empty group makes no communicator: MPI_COMM_NULL, at once.
            // SAFETY: the caller's handle, checked not NULL.
            return unsafe { put(newcomm, abi::COMM_NULL, "newcomm") };
        }
        let me = rt.agent.rank();
        if !g.contains(&me) {
            return Err(MpiError::new(err::GROUP, format!("this process (world rank {me}) is not in the group")));
        }
        let world = rt.comm(abi::COMM_WORLD)?;
        let mut ranks = Vec::with_capacity(g.len());
        for &w in g.iter() {
            ranks.push(world.rank_of_world(w).ok_or_else(|| {
                MpiError::new(err::GROUP, format!("world rank {w} of the group is not a process of this job"))
            })?);
        }
        let c = world.comm.create_group(&ranks, tag_of(&tag))?.ok_or_else(|| {
            MpiError::new(err::INTERN, "the group's communicator was not made for one of its members")
        })?;
        let h = rt.add_comm(CommEntry::new(c, errhandler, rt.agent.size()));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}
