//! Errors: MPI error classes, the translation of the agent's errors, and error handlers
//! (`MPI_ERRORS_ARE_FATAL`, the default, and `MPI_ERRORS_RETURN`).

use std::error::Error as StdError;
use std::ffi::c_int;

use viaduct_agent::error::AgentError;
use viaduct_agent::request::Cause;
/// The agent's request error, which [`request_class`] classifies (re-exported so callers name
/// the one type this crate was built with).
pub use viaduct_agent::request::RequestError;

use crate::abi::{self, Handle, err};
use crate::state;

/// An MPI error: its class (the code returned) and what went wrong.
///
/// ```
/// use viaduct_mpi::{abi::err, error::MpiError};
/// let e = MpiError::new(err::COUNT, "count -1 is negative");
/// assert_eq!(e.class, err::COUNT); // the code the MPI function returns
/// ```
#[derive(Debug, Clone)]
pub struct MpiError {
    /// The error class (the code returned to the program names it and the message).
    pub class: c_int,
    /// The cause, for the message of `MPI_ERRORS_ARE_FATAL`.
    pub message: String,
    /// The communicator whose error handler reports it, when not the call's own (the
    /// communicator of a failed request).
    pub comm: Option<Handle>,
}

impl MpiError {
    /// An error of `class` with a message.
    ///
    /// ```
    /// # use viaduct_mpi::{abi::err, error::MpiError};
    /// let e = MpiError::new(err::TAG, format!("tag {} is negative", -5));
    /// assert_eq!(e.message, "tag -5 is negative");
    /// ```
    pub fn new(class: c_int, message: impl Into<String>) -> Self {
        MpiError {
            class,
            message: message.into(),
            comm: None,
        }
    }

    /// The same error, reported through the error handler of `comm`.
    ///
    /// ```
    /// # use viaduct_mpi::{abi::{self, err}, error::MpiError};
    /// let e = MpiError::new(err::OTHER, "a request failed").on(abi::COMM_WORLD);
    /// assert_eq!(e.comm, Some(abi::COMM_WORLD));
    /// ```
    pub fn on(mut self, comm: Handle) -> Self {
        self.comm = Some(comm);
        self
    }
}

impl std::fmt::Display for MpiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (class {})", self.message, self.class)
    }
}

/// An MPI error carried by a request (a nonblocking call's failure reported at completion):
/// its class is the request's.
impl StdError for MpiError {}

/// An error code returned by a C callback (the query, free or cancel function of a generalized
/// request), carried through the agent's requests and given back as the code of the call.
///
/// ```
/// use viaduct_mpi::error::CallbackCode;
/// assert_eq!(CallbackCode(5).to_string(), "callback returned error code 5");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct CallbackCode(pub c_int);

impl std::fmt::Display for CallbackCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "callback returned error code {}", self.0)
    }
}

impl StdError for CallbackCode {}

/// The error and its sources, joined by `: `.
///
/// ```
/// use viaduct_mpi::error::{CallbackCode, chain};
/// assert_eq!(chain(&CallbackCode(3)), "callback returned error code 3");
/// ```
pub fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The MPI class of an error found anywhere in a chain of sources.
fn class_of_chain(e: &(dyn StdError + 'static)) -> Option<c_int> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(code) = c.downcast_ref::<CallbackCode>() {
            return Some(code.0);
        }
        if let Some(e) = c.downcast_ref::<MpiError>() {
            return Some(e.class);
        }
        if let Some(a) = c.downcast_ref::<AgentError>() {
            if let Some(k) = agent_class(a) {
                return Some(k);
            }
        }
        if let Some(RequestError::InStatus { .. }) = c.downcast_ref::<RequestError>() {
            return Some(err::IN_STATUS);
        }
        // A `Cause` reports its wrapped error's sources, not the wrapped error itself.
        cur = match c.downcast_ref::<Cause>() {
            Some(cause) => Some(cause.get_ref()),
            None => c.source(),
        };
    }
    None
}

/// The class of an agent error that has one of its own (not a wrapper).
fn agent_class(e: &AgentError) -> Option<c_int> {
    Some(match e {
        AgentError::BadRank { .. } => err::RANK,
        AgentError::ReservedTag(_) => err::TAG,
        AgentError::Truncated { .. } => err::TRUNCATE,
        AgentError::PeerFailed { .. } => err::PROC_FAILED,
        AgentError::BadColor(_) | AgentError::CollectiveArgs { .. } => err::ARG,
        AgentError::Request(_) | AgentError::Xfer(_) => return None,
        _ => err::OTHER,
    })
}

/// The class of a request error.
///
/// ```
/// use viaduct_mpi::{abi::err, error::{RequestError, request_class}};
/// assert_eq!(request_class(&RequestError::Null), err::REQUEST);
/// ```
pub fn request_class(e: &RequestError) -> c_int {
    match e {
        RequestError::InStatus { .. } => err::IN_STATUS,
        RequestError::Null | RequestError::Freed => err::REQUEST,
        other => class_of_chain(other).unwrap_or(err::OTHER),
    }
}

impl From<AgentError> for MpiError {
    fn from(e: AgentError) -> Self {
        let class = class_of_chain(&e).unwrap_or(err::OTHER);
        MpiError::new(class, chain(&e))
    }
}

impl From<RequestError> for MpiError {
    fn from(e: RequestError) -> Self {
        MpiError::new(request_class(&e), chain(&e))
    }
}

/// What each predefined class means (`MPI_Error_string`).
///
/// ```
/// use viaduct_mpi::{abi::err, error::class_text};
/// assert_eq!(class_text(err::TAG), "Invalid tag argument");
/// ```
pub fn class_text(class: c_int) -> &'static str {
    match class {
        abi::SUCCESS => "No MPI error",
        err::BUFFER => "Invalid buffer pointer",
        err::COUNT => "Invalid count argument",
        err::TYPE => "Invalid datatype argument",
        err::TAG => "Invalid tag argument",
        err::COMM => "Invalid communicator",
        err::RANK => "Invalid rank",
        err::ROOT => "Invalid root",
        err::GROUP => "Invalid group",
        err::OP => "Invalid MPI_Op",
        err::TOPOLOGY => "Invalid topology",
        err::DIMS => "Invalid dimension argument",
        err::ARG => "Invalid argument",
        err::UNKNOWN => "Unknown error",
        err::TRUNCATE => "Message truncated",
        err::OTHER => "Other MPI error",
        err::INTERN => "Internal MPI error",
        err::IN_STATUS => "Error code is in status",
        err::PENDING => "Pending request",
        err::REQUEST => "Invalid MPI_Request",
        err::NO_MEM => "Out of memory",
        err::UNSUPPORTED_OPERATION => "Unsupported operation",
        err::PROC_ABORTED => "Process aborted",
        err::VALUE_TOO_LARGE => "Value too large",
        err::PROC_FAILED => "Process failed",
        102 => "Process failed while a request was pending",
        crate::ulfm::ERR_REVOKED => "Communication object revoked",
        20 => "Permission denied (MPI_ERR_ACCESS)",
        21 => "Invalid file access mode (MPI_ERR_AMODE)",
        22 => "Invalid file name (MPI_ERR_BAD_FILE)",
        23 => "Data conversion failed (MPI_ERR_CONVERSION)",
        24 => "Data representation defined already (MPI_ERR_DUP_DATAREP)",
        25 => "File exists (MPI_ERR_FILE_EXISTS)",
        26 => "File in use by some process (MPI_ERR_FILE_IN_USE)",
        27 => "Invalid file handle (MPI_ERR_FILE)",
        28 => "Invalid info object (MPI_ERR_INFO)",
        29 => "Info key too long (MPI_ERR_INFO_KEY)",
        30 => "Info value too long (MPI_ERR_INFO_VALUE)",
        31 => "Info key not defined (MPI_ERR_INFO_NOKEY)",
        32 => "I/O error (MPI_ERR_IO)",
        33 => "Service name not published (MPI_ERR_NAME)",
        35 => "Collective argument not the same on all processes (MPI_ERR_NOT_SAME)",
        36 => "Not enough space (MPI_ERR_NO_SPACE)",
        37 => "File does not exist (MPI_ERR_NO_SUCH_FILE)",
        38 => "Invalid port name (MPI_ERR_PORT)",
        39 => "Quota exceeded (MPI_ERR_QUOTA)",
        40 => "Read-only file or file system (MPI_ERR_READ_ONLY)",
        41 => "Service name publication failed (MPI_ERR_SERVICE)",
        42 => "Spawning processes failed (MPI_ERR_SPAWN)",
        43 => "Unsupported data representation (MPI_ERR_UNSUPPORTED_DATAREP)",
        45 => "Invalid window (MPI_ERR_WIN)",
        46 => "Invalid base address (MPI_ERR_BASE)",
        47 => "Invalid lock type (MPI_ERR_LOCKTYPE)",
        48 => "Invalid attribute key (MPI_ERR_KEYVAL)",
        49 => "Conflicting accesses to a window (MPI_ERR_RMA_CONFLICT)",
        50 => "Wrong synchronization of one-sided calls (MPI_ERR_RMA_SYNC)",
        51 => "Invalid size (MPI_ERR_SIZE)",
        52 => "Invalid displacement unit (MPI_ERR_DISP)",
        53 => "Invalid assertion (MPI_ERR_ASSERT)",
        55 => "Target memory outside the window (MPI_ERR_RMA_RANGE)",
        56 => "Memory cannot be attached (MPI_ERR_RMA_ATTACH)",
        57 => "Memory cannot be shared (MPI_ERR_RMA_SHARED)",
        58 => "Wrong window flavor (MPI_ERR_RMA_FLAVOR)",
        75 => "Invalid session (MPI_ERR_SESSION)",
        54 | 59..=74 | 78 => "MPI error (see the error class in mpi.h)",
        _ => "Unknown error code",
    }
}

/// Whether `code` is an error code this library can return (a predefined class, or a user
/// class or code of `MPI_Add_error_class`/`MPI_Add_error_code`).
///
/// ```
/// use viaduct_mpi::{abi::err, error::is_valid_code};
/// assert!(is_valid_code(err::COUNT));
/// assert!(!is_valid_code(-1));
/// ```
pub fn is_valid_code(code: c_int) -> bool {
    (0..=err::LAST_CLASS).contains(&code)
        || (101..=105).contains(&code)
        || crate::errclass::class_of(code).is_some()
        || crate::errcode::class_of(code).is_some()
}

/// The class of a valid error code (a predefined class is its own).
///
/// ```
/// use viaduct_mpi::{abi::err, error::class_of_code};
/// assert_eq!(class_of_code(err::TAG), err::TAG); // a predefined class is its own
/// ```
pub fn class_of_code(code: c_int) -> c_int {
    crate::errcode::class_of(code)
        .or_else(|| crate::errclass::class_of(code))
        .unwrap_or(code)
}

/// What `code` means: a user code's string, or the text of a predefined class.
///
/// ```
/// use viaduct_mpi::{abi, error::code_text};
/// assert_eq!(code_text(abi::SUCCESS), "No MPI error");
/// ```
pub fn code_text(code: c_int) -> String {
    crate::errcode::text_of(code)
        .or_else(|| crate::errclass::text_of(code))
        .unwrap_or_else(|| class_text(code).to_string())
}

/// How long a fatal error's message has to reach the launcher before the PMI abort.
const ABORT_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Ends the job after a fatal error: prints `message` and exits with the low 8 bits of `code`
/// (1 when they are 0, so that the launcher ends every other rank).
///
/// Between `MPI_Init` and `MPI_Finalize` the agent asks the launcher, through the PMI `abort`
/// command, to end the job with that status (`viaduct launch` reports the abort and its code,
/// MPICH's `mpiexec` ends the job with it); otherwise the process just exits with it.
///
/// ```no_run
/// use viaduct_mpi::{abi::err, error::abort_job};
/// abort_job(err::OTHER, "the input file is missing"); // never returns
/// ```
pub fn abort_job(code: c_int, message: &str) -> ! {
    let rank = state::world_rank().map_or_else(|| "?".to_string(), |r| r.to_string());
    let text = format!("viaduct MPI: rank {rank}: {message}");
    // An exit status keeps the low 8 bits: a non-zero code whose low bits are 0 (256, ...)
    // would read as success. An error code of 0 is the program's own choice (Fortran
    // coarray runtimes end a `STOP` with `MPI_Abort(MPI_COMM_WORLD, 0)`): it ends the job
    // all the same and exits with 0, as in MPICH.
    let status = code & 0xff;
    let status = if status == 0 && code != 0 { 1 } else { status };
    eprintln!("{text}");
    if let Some(agent) = state::live_agent() {
        // A launcher that forwards standard error (MPICH's hydra) may end the job on the
        // abort before it forwarded the message above: give it a moment first.
        std::thread::sleep(ABORT_GRACE);
        agent.abort(status, message)
    }
    std::process::exit(status)
}

/// Reports the outcome of MPI function `name`: `MPI_SUCCESS`, or the error through the error
/// handler of communicator `comm` (`MPI_COMM_WORLD`'s when `comm` is not a valid
/// communicator or never had one set, as MPICH 4.0.2 does, and
/// `MPI_ERRORS_ARE_FATAL` before `MPI_Init` and after `MPI_Finalize`).
///
/// ```
/// use viaduct_mpi::{abi, error::finish};
/// assert_eq!(finish("MPI_Send", abi::COMM_WORLD, Ok(())), abi::SUCCESS);
/// ```
pub fn finish(name: &str, comm: Handle, result: Result<(), MpiError>) -> c_int {
    match result {
        Ok(()) => abi::SUCCESS,
        Err(e) if QUIET.get() => {
            let class = e.class;
            CAUGHT.set(Some(e));
            class
        }
        Err(e) => raise(name, e.comm.unwrap_or(comm), e),
    }
}

/// Reports error `e` of MPI function `name` as [`finish`] does (the error path of every MPI
/// function, out of the way of its success path).
///
/// ```
/// use viaduct_mpi::{abi::{self, err}, error::{MpiError, fail, quietly}};
/// let e = MpiError::new(err::TAG, "tag -5 is negative");
/// let r = quietly(|| fail("MPI_Send", abi::COMM_WORLD, e));
/// assert_eq!(r.unwrap_err().class, err::TAG);
/// ```
#[cold]
#[inline(never)]
pub fn fail(name: &str, comm: Handle, e: MpiError) -> c_int {
    finish(name, comm, Err(e))
}

thread_local! {
    /// Set while [`quietly`] runs an MPI function: its error is kept, not raised.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// The error an MPI function run by [`quietly`] returned.
    static CAUGHT: std::cell::Cell<Option<MpiError>> = const { std::cell::Cell::new(None) };
}

/// Runs `f`, a call of an exported MPI function, without its error handler: its error comes
/// back as the `Err` for the caller to report (a persistent collective's `MPI_Start` starts
/// the nonblocking collective this way and reports its errors as its own).
///
/// ```
/// use viaduct_mpi::{abi::{self, err}, error::{MpiError, finish, quietly}};
/// let e = MpiError::new(err::TAG, "tag -5 is negative");
/// let r = quietly(|| finish("MPI_Send", abi::COMM_WORLD, Err(e)));
/// assert_eq!(r.unwrap_err().class, err::TAG); // no handler ran
/// ```
pub fn quietly(f: impl FnOnce() -> c_int) -> Result<(), MpiError> {
    let was = QUIET.replace(true);
    CAUGHT.set(None);
    let code = f();
    QUIET.set(was);
    let caught = CAUGHT.take();
    if code == abi::SUCCESS {
        return Ok(());
    }
    Err(caught.unwrap_or_else(|| MpiError::new(code, "the collective could not start")))
}

/// Runs the error handler of `comm` for error `e` of function `name`; returns the code to
/// give back (when the handler returns).
///
/// ```no_run
/// use viaduct_mpi::{abi::{self, err}, error::{MpiError, raise}};
/// // Under `MPI_ERRORS_RETURN` a code of class MPI_ERR_TAG that carries the message
/// // (`crate::errcode`); the end of the job under `MPI_ERRORS_ARE_FATAL`.
/// let code = raise("MPI_Send", abi::COMM_WORLD, MpiError::new(err::TAG, "tag -5"));
/// ```
pub fn raise(name: &str, comm: Handle, e: MpiError) -> c_int {
    let code = crate::errcode::code_for(e.class, name, &e.message);
    handle(name, comm, e, code)
}

/// As [`raise`], handing the error handler `e.class` itself as the code: the code a program
/// gave `MPI_Comm_call_errhandler` (and the file, window and session forms) reaches the
/// handler unchanged.
pub fn raise_exact(name: &str, comm: Handle, e: MpiError) -> c_int {
    let code = e.class;
    handle(name, comm, e, code)
}

/// Runs the error handler of `comm` for error `e` of function `name`, which the program
/// sees as `code`.
fn handle(name: &str, comm: Handle, e: MpiError, code: c_int) -> c_int {
    let (handler, target) = state::errhandler_of(comm);
    if handler == abi::ERRORS_RETURN || handler == abi::ERRORS_THROW_EXCEPTIONS {
        return code;
    }
    if comm as u32 & 0xff00_0000 == crate::file::FILE_ERR_KIND {
        if let Some(f) = crate::misc::file_handler(handler) {
            return crate::misc::call_file_handler(f, handler, crate::file::fh_of_key(comm), code);
        }
    }
    if let Some(f) = crate::misc::user_handler(handler) {
        return crate::misc::call_user_handler(f, handler, target, code);
    }
    abort_job(
        e.class,
        &format!(
            "fatal error in {name}: {} (class {}): {}",
            code_text(e.class),
            e.class,
            e.message
        ),
    )
}

/// `Err` with class `class` unless `cond` holds.
///
/// ```
/// use viaduct_mpi::{abi::err, error::check};
/// let count = -1;
/// let e = check(count >= 0, err::COUNT, || format!("count {count} is negative")).unwrap_err();
/// assert_eq!(e.class, err::COUNT);
/// ```
pub fn check(cond: bool, class: c_int, message: impl FnOnce() -> String) -> Result<(), MpiError> {
    if cond {
        Ok(())
    } else {
        Err(MpiError::new(class, message()))
    }
}

/// What an unimplemented function does: raises `MPI_ERR_UNSUPPORTED_OPERATION` through the
/// error handler of `MPI_COMM_WORLD`, naming the function.
///
/// ```no_run
/// use viaduct_mpi::error::unsupported;
/// // Raises MPI_ERR_UNSUPPORTED_OPERATION through MPI_COMM_WORLD's error handler.
/// let code = unsupported("MPI_Foo");
/// ```
pub fn unsupported(name: &str) -> c_int {
    raise(
        name,
        abi::COMM_WORLD,
        MpiError::new(
            err::UNSUPPORTED_OPERATION,
            format!("{name} is not supported by viaduct's MPI library (see docs/MPI.md)"),
        ),
    )
}
