//! Communicators: `MPI_Comm_rank`, `MPI_Comm_size`, `MPI_Comm_dup`, `MPI_Comm_split`,
//! `MPI_Comm_free`, `MPI_Comm_compare`, and error handlers, on the
//! agent's [`Comm`](viaduct_agent::comm::Comm).

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use crate::abi::{self, Handle, err};
use crate::attr::Kind;
use crate::error::MpiError;
use crate::state::{CommEntry, rt};

/// Writes `v` to the caller's `out`.
///
/// # Safety
///
/// `out` is NULL or a writable `T`.
pub unsafe fn put<T>(out: *mut T, v: T, what: &str) -> Result<(), MpiError> {
    // SAFETY: the caller guarantees `out` is NULL or writable.
    match unsafe { out.as_mut() } {
        Some(o) => {
            *o = v;
            Ok(())
        }
        None => Err(MpiError::new(err::ARG, format!("{what} is NULL"))),
    }
}

/// Sets the caller's new-communicator handle `out` to `MPI_COMM_NULL` when `out` is not NULL:
/// the first step of every call that makes a communicator, so that a failed call leaves
/// `MPI_COMM_NULL` there (as MPICH does).
///
/// # Safety
///
/// `out` is NULL or a writable handle.
pub(crate) unsafe fn clear_new_comm(out: *mut Handle) {
    // SAFETY: the caller guarantees `out` is NULL or writable.
    if let Some(o) = unsafe { out.as_mut() } {
        *o = abi::COMM_NULL;
    }
}

mpi_fn! {
    /// `MPI_Comm_rank`.
    MPI_Comm_rank / PMPI_Comm_rank(comm: Handle, rank: *mut c_int) on comm => {
        let c = rt()?.comm_local(comm)?;
        // SAFETY: the caller's int.
        unsafe { put(rank, c.local().rank() as c_int, "rank") }
    }
}

mpi_fn! {
    /// `MPI_Comm_size`.
    MPI_Comm_size / PMPI_Comm_size(comm: Handle, size: *mut c_int) on comm => {
        let c = rt()?.comm_local(comm)?;
        // SAFETY: the caller's int.
        unsafe { put(size, c.local().size() as c_int, "size") }
    }
}

/// Duplicates `comm` (collective): same members, new contexts, the same error handler,
/// topology and hints, and the attributes its copy callbacks copy. With `quick`, on contexts
/// the communicator reserved for duplicates, without messages, while it has some left
/// (`MPI_Comm_idup`; see the agent's `Comm::idup`).
fn dup_as(comm: Handle, quick: bool) -> Result<Handle, MpiError> {
    let rt = rt()?;
    let c = rt.comm_any(comm)?;
    if let Some(ic) = &c.inter {
        let d = match quick.then(|| ic.idup()).flatten() {
            Some(d) => d,
            None => ic.dup()?,
        };
        let h = rt.add_comm(CommEntry::new_inter(
            d,
            c.errhandler.load(Ordering::Relaxed),
            rt.agent.size(),
        ));
        if let Err(e) = crate::attr::copy_all(Kind::Comm, comm, h) {
            let _ = rt.remove_comm(h);
            return Err(e);
        }
        crate::comminfo::copy(comm, h);
        return Ok(h);
    }
    let d = match quick.then(|| c.comm.idup()).flatten() {
        Some(d) => d,
        None => c.comm.dup()?,
    };
    let h = rt.add_comm(CommEntry::new(
        d.clone(),
        c.errhandler.load(Ordering::Relaxed),
        rt.agent.size(),
    ));
    let copied =
        crate::topo::copy(comm, h, &d).and_then(|()| crate::attr::copy_all(Kind::Comm, comm, h));
    if let Err(e) = copied {
        crate::topo::forget(h);
        let _ = rt.remove_comm(h);
        return Err(e);
    }
    crate::comminfo::copy(comm, h);
    Ok(h)
}

/// Duplicates `comm` by an agreement among its members (`MPI_Comm_dup`).
fn dup(comm: Handle) -> Result<Handle, MpiError> {
    dup_as(comm, false)
}

mpi_fn! {
    /// `MPI_Comm_dup` (collective): a communicator with the same members, new contexts, the
    /// same error handler, topology and hints, and the attributes the copy callbacks copy.
    MPI_Comm_dup / PMPI_Comm_dup(comm: Handle, newcomm: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        rt()?.comm_any(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        let h = dup(comm)?;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}

mpi_fn! {
    /// `MPI_Comm_dup_with_info`: as `MPI_Comm_dup`, the new communicator's hints being those
    /// of `info` instead of `comm`'s.
    MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(comm: Handle, info: Handle, newcomm: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        rt()?.comm_any(comm)?;
        let hints = crate::comminfo::known(info)?;
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        let h = dup(comm)?;
        crate::comminfo::replace(h, hints);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}

/// `MPI_Comm_idup`: the duplicate is made at once on contexts the communicator reserved
/// (no message, so no member waits for another), and the request given back is complete;
/// past the communicator's reserved duplicates, by an agreement among the members as
/// `MPI_Comm_dup`. A failure of that agreement (no context ids left) is the request's error,
/// `newcomm` being `MPI_COMM_NULL`.
///
/// # Safety
///
/// `newcomm` and `request` are the caller's writable handles.
unsafe fn idup(
    comm: Handle,
    hints: Option<Handle>,
    newcomm: *mut Handle,
    request: *mut Handle,
) -> Result<(), MpiError> {
    let rt = rt()?;
    rt.comm_any(comm)?;
    let hints = hints.map(crate::comminfo::known).transpose()?;
    if newcomm.is_null() || request.is_null() {
        return Err(MpiError::new(err::ARG, "newcomm or request is NULL"));
    }
    // The duplicate's own failure (no context ids left, a member failed) comes at
    // completion, as a nonblocking call's does; `newcomm` stays MPI_COMM_NULL.
    let (h, req) = match dup_as(comm, true) {
        Ok(h) => (h, viaduct_agent::request::Request::null()),
        Err(e) => (abi::COMM_NULL, failed_request(e)),
    };
    if let Some(p) = hints.filter(|_| h != abi::COMM_NULL) {
        crate::comminfo::replace(h, p);
    }
    let meta = crate::request::Meta::Coll {
        comm,
        out: std::sync::Mutex::new(None),
        dst: 0,
        len: 0,
        post: None,
        unpack: None,
    };
    let r = rt.add_request(crate::state::ReqEntry::new(req, meta));
    // SAFETY: the caller's handles, checked not NULL.
    unsafe {
        put(newcomm, h, "newcomm")?;
        put(request, r, "request")
    }
}

/// A request complete with error `e` (its class is the code its wait gives back).
fn failed_request(e: MpiError) -> viaduct_agent::request::Request {
    let (req, done) = viaduct_agent::request::Request::generalized(());
    // A request just made, complete by nothing else: failing it cannot fail.
    let _ = done.fail(e);
    req
}

mpi_fn! {
    /// `MPI_Comm_idup` (the duplicate is made before the call returns, without messages
    /// while the communicator has reserved duplicates left; the request is complete).
    MPI_Comm_idup / PMPI_Comm_idup(comm: Handle, newcomm: *mut Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        // SAFETY: the caller's handles.
        unsafe { idup(comm, None, newcomm, request) }
    }
}

mpi_fn! {
    /// `MPI_Comm_idup_with_info`: as `MPI_Comm_idup`, with the hints of `info`.
    MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(comm: Handle, info: Handle, newcomm: *mut Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        // SAFETY: the caller's handles.
        unsafe { idup(comm, Some(info), newcomm, request) }
    }
}

/// Splits communicator `c` by `color` (`None`: this member takes no part) and `key`, and
/// registers this member's part with `c`'s error handler: an intercommunicator splits into
/// intercommunicators (see `crate::inter::split`). `MPI_COMM_NULL` for no part.
fn split_by(
    rt: &crate::state::Runtime,
    c: &CommEntry,
    color: Option<u32>,
    key: c_int,
) -> Result<Handle, MpiError> {
    let handler = c.errhandler.load(Ordering::Relaxed);
    Ok(if let Some(ic) = &c.inter {
        match crate::inter::split(ic, color, key)? {
            None => abi::COMM_NULL,
            Some(n) => rt.add_comm(CommEntry::new_inter(n, handler, rt.agent.size())),
        }
    } else {
        match c.comm.split(color, key)? {
            None => abi::COMM_NULL,
            Some(n) => rt.add_comm(CommEntry::new(n, handler, rt.agent.size())),
        }
    })
}

mpi_fn! {
    /// `MPI_Comm_split` (collective): `MPI_UNDEFINED` as color gives `MPI_COMM_NULL`.
    MPI_Comm_split / PMPI_Comm_split(comm: Handle, color: c_int, key: c_int, newcomm: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        let rt = rt()?;
        let c = rt.comm_any(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        let color = if color == abi::UNDEFINED {
            None
        } else if color < 0 {
            return Err(MpiError::new(err::ARG, format!("color {color} is negative and not MPI_UNDEFINED")));
        } else {
            Some(color as u32)
        };
        let h = split_by(rt, &c, color, key)?;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}

mpi_fn! {
    /// `MPI_Comm_free`.
    MPI_Comm_free / PMPI_Comm_free(comm: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's handle.
        let h = unsafe { comm.as_mut() }.ok_or_else(|| MpiError::new(err::COMM, "comm is NULL"))?;
        if *h == abi::COMM_WORLD || *h == abi::COMM_SELF {
            return Err(MpiError::new(err::COMM, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed").on(*h));
        }
        rt.comm_local(*h).map_err(|e| e.on(*h))?;
        crate::attr::delete_all(Kind::Comm, *h).map_err(|e| e.on(*h))?;
        crate::topo::forget(*h);
        crate::comminfo::forget(*h);
        rt.remove_comm(*h).map_err(|e| e.on(*h))?;
        *h = abi::COMM_NULL;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_compare`.
    MPI_Comm_compare / PMPI_Comm_compare(comm1: Handle, comm2: Handle, result: *mut c_int) on comm1 => {
        let rt = rt()?;
        let a = rt.comm_local(comm1)?;
        let b = rt.comm_local(comm2).map_err(|e| e.on(comm2))?;
        let members = |c: &CommEntry| -> Vec<u32> {
            let l = c.local();
            (0..l.size()).filter_map(|r| l.world_rank(r)).collect()
        };
        let (ma, mb) = (members(&a), members(&b));
        let r = if comm1 == comm2 {
            abi::IDENT
        } else if a.inter.is_some() || b.inter.is_some() {
            // Intercommunicators: congruent when both are, with the same local and remote
            // groups in order, unequal otherwise.
            let remote = |c: &CommEntry| c.inter.as_ref().map(|i| i.remote.world_ranks().to_vec());
            if a.inter.is_some() && b.inter.is_some() && ma == mb && remote(&a) == remote(&b) {
                abi::CONGRUENT
            } else {
                abi::UNEQUAL
            }
        } else if ma == mb {
            abi::CONGRUENT
        } else {
            let (mut sa, mut sb) = (ma, mb);
            sa.sort_unstable();
            sb.sort_unstable();
            if sa == sb { abi::SIMILAR } else { abi::UNEQUAL }
        };
        // SAFETY: the caller's int.
        unsafe { put(result, r, "result") }
    }
}

fn check_errhandler(h: Handle) -> Result<(), MpiError> {
    if crate::misc::valid_handler(h) {
        return Ok(());
    }
    Err(MpiError::new(
        err::ARG,
        if h == abi::ERRHANDLER_NULL {
            "the error handler is MPI_ERRHANDLER_NULL".to_string()
        } else {
            format!("{h:#x} is not an error handler")
        },
    ))
}

mpi_fn! {
    /// `MPI_Comm_set_errhandler`: `MPI_ERRORS_ARE_FATAL`, `MPI_ERRORS_ABORT`,
    /// `MPI_ERRORS_RETURN`, or one of `MPI_Comm_create_errhandler`.
    MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: Handle, errhandler: Handle) on comm => {
        let c = rt()?.comm_local(comm)?;
        check_errhandler(errhandler)?;
        c.errhandler.store(errhandler, Ordering::Relaxed);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_get_errhandler` (`MPI_ERRORS_ARE_FATAL` while none was set).
    MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: Handle, errhandler: *mut Handle) on comm => {
        let c = rt()?.comm_local(comm)?;
        let h = crate::state::shown_handler(c.errhandler.load(Ordering::Relaxed));
        // The caller gets a new handle to free.
        crate::misc::hold_handler(h);
        // SAFETY: the caller's handle.
        unsafe { put(errhandler, h, "errhandler") }
    }
}

mpi_fn! {
    /// `MPI_Errhandler_free`: the predefined handlers stay; the handle becomes
    /// `MPI_ERRHANDLER_NULL`.
    MPI_Errhandler_free / PMPI_Errhandler_free(errhandler: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's handle.
        let h = unsafe { errhandler.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "errhandler is NULL"))?;
        if !crate::misc::free_handler(*h) {
            return Err(MpiError::new(err::ARG, format!("{:#x} is not an error handler", *h)));
        }
        *h = abi::ERRHANDLER_NULL;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_get_parent`: `MPI_COMM_NULL`, since no process here is started by
    /// `MPI_Comm_spawn` (not an error, as the standard says for such a process).
    MPI_Comm_get_parent / PMPI_Comm_get_parent(parent: *mut Handle) on abi::COMM_WORLD => {
        rt()?;
        // SAFETY: the caller's handle.
        unsafe { put(parent, abi::COMM_NULL, "parent") }
    }
}

/// Most time `MPI_Comm_disconnect` runs the agent's progress in one go between looks at the
/// communicator's requests.
const DISCONNECT_NAP: std::time::Duration = std::time::Duration::from_millis(1);

mpi_fn! {
    /// `MPI_Comm_disconnect` (collective): waits until every started request of the
    /// communicator still held by the program completed (running the agent's progress), meets
    /// the other members (a barrier of the local group), then frees the communicator as
    /// `MPI_Comm_free` does; the handle becomes `MPI_COMM_NULL`.
    MPI_Comm_disconnect / PMPI_Comm_disconnect(comm: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's handle.
        let h = unsafe { comm.as_mut() }.ok_or_else(|| MpiError::new(err::COMM, "comm is NULL"))?;
        if *h == abi::COMM_WORLD || *h == abi::COMM_SELF {
            return Err(MpiError::new(err::COMM, "MPI_COMM_WORLD and MPI_COMM_SELF cannot be disconnected").on(*h));
        }
        let c = rt.comm_local(*h).map_err(|e| e.on(*h))?;
        while rt.pending_on(*h) {
            rt.agent.make_progress_blocking(DISCONNECT_NAP);
        }
        c.local().barrier().map_err(|e| MpiError::from(e).on(*h))?;
        // SAFETY: the caller's handle, passed on.
        crate::error::quietly(|| unsafe { PMPI_Comm_free(h) })
    }
}

/// `MPI_COMM_TYPE_SHARED`.
const COMM_TYPE_SHARED: c_int = 1;
/// `MPI_COMM_TYPE_HW_GUIDED` (MPI 4.0).
const COMM_TYPE_HW_GUIDED: c_int = 2;
/// `MPI_COMM_TYPE_HW_UNGUIDED` (MPI 4.0).
const COMM_TYPE_HW_UNGUIDED: c_int = 3;
/// `MPIX_COMM_TYPE_NEIGHBORHOOD` (MPICH's extension; see [`crate::neighborhood`]).
const COMM_TYPE_NEIGHBORHOOD: c_int = 4;
/// The info key naming a hardware level (`MPI_COMM_TYPE_HW_GUIDED`/`_UNGUIDED`).
const HW_KEY: &std::ffi::CStr = c"mpi_hw_resource_type";
/// The one hardware level known here: the node, whose processes share memory.
const SHARED_MEMORY: &std::ffi::CStr = c"mpi_shared_memory";
/// Bytes of a host name as exchanged (NUL-padded).
const HOST_LEN: usize = 256;

/// This process's host name, NUL-padded to [`HOST_LEN`] bytes.
fn host_name() -> [u8; HOST_LEN] {
    let mut host = [0u8; HOST_LEN];
    // SAFETY: `host` is a writable buffer of its length less the final NUL.
    unsafe { libc::gethostname(host.as_mut_ptr().cast(), HOST_LEN - 1) };
    host
}

/// Each member's node, as the first entry of `hosts` (one [`HOST_LEN`] block per member) with
/// the same host name, and how many different hosts there are.
fn nodes(hosts: &[u8]) -> (Vec<usize>, usize) {
    let blocks: Vec<&[u8]> = hosts.chunks(HOST_LEN).collect();
    let first: Vec<usize> = blocks
        .iter()
        .map(|h| blocks.iter().position(|o| o == h).unwrap_or(0))
        .collect();
    let distinct = first.iter().enumerate().filter(|&(i, &f)| i == f).count();
    (first, distinct)
}

/// Whether `info` asks `MPI_COMM_TYPE_HW_GUIDED` for the node (`mpi_hw_resource_type` is
/// `mpi_shared_memory`); `MPI_INFO_NULL`, no such key or another value is not.
fn guided_node(info: Handle) -> Result<bool, MpiError> {
    let key = HW_KEY.to_str().unwrap_or_default();
    let want = SHARED_MEMORY.to_str().unwrap_or_default();
    Ok(crate::misc::hints_of(info)?
        .iter()
        .any(|(k, v)| k == key && v == want))
}

/// `MPI_Comm_split_type` (collective): `MPI_COMM_TYPE_SHARED` splits by host name;
/// `MPI_COMM_TYPE_HW_GUIDED` does the same where `info` names `mpi_shared_memory` as
/// `mpi_hw_resource_type` and gives `MPI_COMM_NULL` otherwise; `MPI_COMM_TYPE_HW_UNGUIDED`
/// splits by node where the members span more than one (a strict subset), naming the level
/// in `info`, and gives `MPI_COMM_NULL` to every member otherwise (the node is the only level
/// known). `MPIX_COMM_TYPE_NEIGHBORHOOD` groups the members that see the directory named by
/// `nbhd_common_dirname` (see [`crate::neighborhood`]; on an intercommunicator it gives
/// `MPI_COMM_NULL`). `MPI_UNDEFINED` gives `MPI_COMM_NULL`. On an intercommunicator (as MPICH) the
/// result is an intercommunicator of the local and remote members on each node (see
/// [`crate::inter::split`]).
///
/// # Safety
///
/// `newcomm` is NULL or the caller's writable handle.
pub(crate) unsafe fn split_type(
    comm: Handle,
    split_type: c_int,
    key: c_int,
    info: Handle,
    newcomm: *mut Handle,
) -> Result<(), MpiError> {
    // SAFETY: the caller's handle (or NULL).
    unsafe { clear_new_comm(newcomm) };
    let rt = rt()?;
    let c = rt.comm_any(comm)?;
    if newcomm.is_null() {
        return Err(MpiError::new(err::ARG, "newcomm is NULL"));
    }
    if split_type != abi::UNDEFINED
        && !(COMM_TYPE_SHARED..=COMM_TYPE_NEIGHBORHOOD).contains(&split_type)
    {
        return Err(MpiError::new(
            err::ARG,
            format!("split type {split_type} is not known"),
        ));
    }
    if split_type == COMM_TYPE_NEIGHBORHOOD && c.inter.is_none() {
        let color = crate::neighborhood::color(&c.comm, info)?;
        let h = split_by(rt, &c, color, key)?;
        // SAFETY: the caller's handle, checked not NULL.
        return unsafe { put(newcomm, h, "newcomm") };
    }
    let guided = split_type == COMM_TYPE_HW_GUIDED && guided_node(info)?;
    // Every member's host name (of both groups for an intercommunicator), so that members on
    // one host take the same color: the world rank of the first member on that host.
    let host = host_name();
    let (node, distinct) = if let Some(ic) = &c.inter {
        let (ls, rs) = (ic.local.size() as usize, ic.remote.size() as usize);
        let mut all = vec![0u8; HOST_LEN * (ls + rs)];
        ic.local.allgather(&host, &mut all[..HOST_LEN * ls])?;
        crate::inter::allgather(ic, &host, &mut all[HOST_LEN * ls..])?;
        let world: Vec<u32> = ic
            .local
            .world_ranks()
            .iter()
            .chain(ic.remote.world_ranks())
            .copied()
            .collect();
        let (first, distinct) = nodes(&all);
        let me = ic.local.rank() as usize;
        // The smallest world rank on this host, the same in both groups.
        let node = (0..first.len())
            .filter(|&i| first[i] == first[me])
            .map(|i| world[i])
            .min()
            .unwrap_or(0);
        (node, distinct)
    } else {
        let mut all = vec![0u8; HOST_LEN * c.comm.size() as usize];
        c.comm.allgather(&host, &mut all)?;
        let (first, distinct) = nodes(&all);
        (first[c.comm.rank() as usize] as u32, distinct)
    };
    let color = match split_type {
        COMM_TYPE_SHARED => Some(node),
        COMM_TYPE_HW_GUIDED => guided.then_some(node),
        COMM_TYPE_HW_UNGUIDED => (distinct > 1).then_some(node),
        _ => None,
    };
    let h = split_by(rt, &c, color, key)?;
    if split_type == COMM_TYPE_HW_UNGUIDED && h != abi::COMM_NULL && info != INFO_NULL {
        // SAFETY: two NUL-terminated strings; `info` was read above as an info object.
        let rc =
            unsafe { crate::misc::PMPI_Info_set(info, HW_KEY.as_ptr(), SHARED_MEMORY.as_ptr()) };
        if rc != abi::SUCCESS {
            return Err(MpiError::new(
                err::INTERN,
                "the level could not be set in info",
            ));
        }
    }
    // SAFETY: the caller's handle, checked not NULL.
    unsafe { put(newcomm, h, "newcomm") }
}

/// `MPI_INFO_NULL`.
const INFO_NULL: Handle = 0x1c00_0000;
