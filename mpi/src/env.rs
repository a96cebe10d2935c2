//! The environment: `MPI_Init`, `MPI_Init_thread`, `MPI_Finalize`, `MPI_Initialized`,
//! `MPI_Finalized`, `MPI_Query_thread`, `MPI_Is_thread_main`, `MPI_Abort`, `MPI_Wtime`,
//! `MPI_Wtick`, `MPI_Get_processor_name`, `MPI_Get_version`, `MPI_Get_library_version`,
//! `MPI_Error_string`, `MPI_Error_class`, `MPI_Alloc_mem`, `MPI_Free_mem`.

use std::ffi::{c_char, c_double, c_int, c_void};

use viaduct_agent::agent::Agent;
use viaduct_agent::comm::Comm;

use crate::abi::{self, Handle, MpiAint, err};
use crate::comm::put;
use crate::error::{MpiError, abort_job, class_of_code, code_text, is_valid_code};
use crate::state::{self, Runtime, rt};

/// What `MPI_Get_library_version` reports.
pub fn library_version() -> String {
    format!(
        "viaduct MPI {} (MPICH ABI, libmpich.so.12, MPI {}.{} subset) over the viaduct agent",
        env!("CARGO_PKG_VERSION"),
        abi::VERSION,
        abi::SUBVERSION
    )
}

/// Starts the agent and the predefined communicators; `level` is the thread level provided.
fn init(level: c_int) -> Result<(), MpiError> {
    if !state::claim_init() {
        return Err(MpiError::new(err::OTHER, "MPI_Init was called already"));
    }
    start(level)?;
    state::set_initialized();
    Ok(())
}

/// Starts the runtime (the agent and the predefined communicators) once, for `MPI_Init` or the
/// first `MPI_Session_init`, whichever comes first; later calls find it running. A runtime
/// that ended does not start again.
pub(crate) fn start(level: c_int) -> Result<(), MpiError> {
    static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if state::runtime().is_some() {
        return state::rt().map(|_| ());
    }
    // The agent's diagnostics to stderr, filtered by VIADUCT_LOG (default: warnings).
    viaduct_agent::log::install_subscriber();
    let agent = Agent::init()?;
    let world = Comm::world(&agent);
    let own = world
        .split(Some(agent.rank()), 0)?
        .ok_or_else(|| MpiError::new(err::INTERN, "MPI_COMM_SELF could not be created"))?;
    if std::env::var_os("VIADUCT_MPI_VERBOSE").is_some_and(|v| !v.is_empty() && v != "0") {
        eprintln!(
            "viaduct MPI: rank {} of {}: {}; thread level {level}",
            agent.rank(),
            agent.size(),
            library_version()
        );
    }
    crate::ulfm::listen(&agent);
    state::install(Runtime::new(agent, world, own, level));
    Ok(())
}

mpi_fn! {
    /// `MPI_Init`: starts the agent from the launcher's environment (`viaduct launch`, MPICH's
    /// `mpiexec`, `srun --mpi=pmi2`, or none: a single rank).
    MPI_Init / PMPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) on abi::COMM_WORLD => {
        let _ = (argc, argv);
        init(abi::THREAD_SINGLE)
    }
}

mpi_fn! {
    /// `MPI_Init_thread`: every level is provided as asked (`MPI_THREAD_MULTIPLE` included: the
    /// agent is shared by threads).
    MPI_Init_thread / PMPI_Init_thread(argc: *mut c_int, argv: *mut *mut *mut c_char, required: c_int, provided: *mut c_int) on abi::COMM_WORLD => {
        let _ = (argc, argv);
        let level = required.clamp(abi::THREAD_SINGLE, abi::THREAD_MULTIPLE);
        init(level)?;
        // SAFETY: the caller's int.
        unsafe { put(provided, level, "provided") }
    }
}

mpi_fn! {
    /// `MPI_Finalize`: ends the agent (its sends leave, every rank meets at a fence), or, while
    /// sessions are open, leaves that to the last `MPI_Session_finalize`.
    MPI_Finalize / PMPI_Finalize() on abi::COMM_WORLD => {
        rt()?;
        if !state::initialized() || state::finalized() {
            return Err(MpiError::new(err::OTHER, "MPI_Finalize without MPI_Init (or called twice)"));
        }
        // The standard: MPI_Finalize first deletes the attributes of MPI_COMM_SELF.
        crate::attr::delete_all(crate::attr::Kind::Comm, abi::COMM_SELF)?;
        state::set_finalized();
        // Sessions still open keep the runtime until the last of them ends.
        crate::session::end_unless_in_use()
    }
}

mpi_fn! {
    /// `MPI_Initialized`.
    MPI_Initialized / PMPI_Initialized(flag: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's int.
        unsafe { put(flag, c_int::from(state::initialized()), "flag") }
    }
}

mpi_fn! {
    /// `MPI_Finalized`.
    MPI_Finalized / PMPI_Finalized(flag: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's int.
        unsafe { put(flag, c_int::from(state::finalized()), "flag") }
    }
}

mpi_fn! {
    /// `MPI_Query_thread`.
    MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) on abi::COMM_WORLD => {
        let rt = rt()?;
        // SAFETY: the caller's int.
        unsafe { put(provided, rt.thread_level, "provided") }
    }
}

mpi_fn! {
    /// `MPI_Is_thread_main`.
    MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) on abi::COMM_WORLD => {
        let rt = rt()?;
        let main = std::thread::current().id() == rt.main_thread;
        // SAFETY: the caller's int.
        unsafe { put(flag, c_int::from(main), "flag") }
    }
}

mpi_fn! {
    /// `MPI_Abort`: prints the call and exits with `errorcode` (1 when its low 8 bits are 0), which makes the
    /// launcher end every other rank.
    MPI_Abort / PMPI_Abort(comm: Handle, errorcode: c_int) on abi::COMM_WORLD => {
        abort_job(errorcode, &format!("MPI_Abort(comm {comm:#x}, errorcode {errorcode}) called"))
    }
}

fn now() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec of this frame.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

mpi_raw! {
    /// `MPI_Wtime`: seconds of the monotonic clock.
    MPI_Wtime / PMPI_Wtime() -> c_double => { now() }
}

mpi_raw! {
    /// `MPI_Wtick`: the resolution of `MPI_Wtime`.
    MPI_Wtick / PMPI_Wtick() -> c_double => {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid timespec of this frame.
        let rc = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
        if rc == 0 { ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9 } else { 1e-9 }
    }
}

mpi_raw! {
    /// `MPI_Aint_add`.
    MPI_Aint_add / PMPI_Aint_add(base: MpiAint, disp: MpiAint) -> MpiAint => { base.wrapping_add(disp) }
}

mpi_raw! {
    /// `MPI_Aint_diff`.
    MPI_Aint_diff / PMPI_Aint_diff(addr1: MpiAint, addr2: MpiAint) -> MpiAint => { addr1.wrapping_sub(addr2) }
}

/// Copies `s` (cut to `max - 1` bytes) and a NUL into the caller's `buf`; writes the length.
///
/// # Safety
///
/// `buf` holds `max` writable bytes; `len` is a writable int.
unsafe fn put_string(
    s: &str,
    buf: *mut c_char,
    max: usize,
    len: *mut c_int,
) -> Result<(), MpiError> {
    if buf.is_null() {
        return Err(MpiError::new(err::ARG, "the string buffer is NULL"));
    }
    let n = s.len().min(max - 1);
    // SAFETY: the caller's buffer of `max` bytes; `n + 1 <= max`.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
        put(len, n as c_int, "resultlen")
    }
}

mpi_fn! {
    /// `MPI_Get_processor_name`: the host name.
    MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) on abi::COMM_WORLD => {
        let mut host = [0u8; 256];
        // SAFETY: `host` is a writable buffer of its length.
        let rc = unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len() - 1) };
        let s = if rc == 0 {
            let end = host.iter().position(|&b| b == 0).unwrap_or(host.len());
            String::from_utf8_lossy(&host[..end]).into_owned()
        } else {
            "localhost".to_string()
        };
        // SAFETY: the caller's buffer of MPI_MAX_PROCESSOR_NAME bytes.
        unsafe { put_string(&s, name, abi::MAX_PROCESSOR_NAME, resultlen) }
    }
}

mpi_fn! {
    /// `MPI_Get_version`: the version of the standard in MPICH's `mpi.h` (`MPI_VERSION`,
    /// `MPI_SUBVERSION`).
    MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's ints.
        unsafe {
            put(version, abi::VERSION, "version")?;
            put(subversion, abi::SUBVERSION, "subversion")
        }
    }
}

mpi_fn! {
    /// `MPI_Get_library_version`: says it is viaduct.
    MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) on abi::COMM_WORLD => {
        // SAFETY: the caller's buffer of MPI_MAX_LIBRARY_VERSION_STRING bytes.
        unsafe { put_string(&library_version(), version, abi::MAX_LIBRARY_VERSION_STRING, resultlen) }
    }
}

mpi_fn! {
    /// `MPI_Error_string`.
    MPI_Error_string / PMPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) on abi::COMM_WORLD => {
        if !is_valid_code(errorcode) {
            return Err(MpiError::new(err::ARG, format!("{errorcode} is not an error code")));
        }
        // SAFETY: the caller's buffer of MPI_MAX_ERROR_STRING bytes.
        unsafe { put_string(&code_text(errorcode), string, abi::MAX_ERROR_STRING, resultlen) }
    }
}

mpi_fn! {
    /// `MPI_Error_class`: a code this library returns names its class (see `crate::errcode`);
    /// a user code's class is the one given to `MPI_Add_error_code`.
    MPI_Error_class / PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) on abi::COMM_WORLD => {
        if !is_valid_code(errorcode) {
            return Err(MpiError::new(err::ARG, format!("{errorcode} is not an error code")));
        }
        // SAFETY: the caller's int.
        unsafe { put(errorclass, class_of_code(errorcode), "errorclass") }
    }
}

mpi_fn! {
    /// `MPI_Alloc_mem`: `malloc`.
    MPI_Alloc_mem / PMPI_Alloc_mem(size: MpiAint, info: Handle, baseptr: *mut c_void) on abi::COMM_WORLD => {
        let _ = info;
        if size < 0 {
            return Err(MpiError::new(err::ARG, format!("size {size} is negative")));
        }
        // SAFETY: malloc of any size; NULL is checked.
        let p = unsafe { libc::malloc((size as usize).max(1)) };
        if p.is_null() {
            return Err(MpiError::new(err::NO_MEM, format!("cannot allocate {size} bytes")));
        }
        // SAFETY: `baseptr` is the caller's `void **`.
        unsafe { put(baseptr.cast::<*mut c_void>(), p, "baseptr") }
    }
}

mpi_fn! {
    /// `MPI_Free_mem`: `free`.
    MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) on abi::COMM_WORLD => {
        // SAFETY: `base` came from MPI_Alloc_mem (malloc), or is NULL.
        unsafe { libc::free(base) };
        Ok(())
    }
}

mpi_raw! {
    /// `MPI_Pcontrol`: profiling control, a no-op (the further arguments are not read).
    MPI_Pcontrol / PMPI_Pcontrol(level: c_int) -> c_int => { let _ = level; abi::SUCCESS }
}
