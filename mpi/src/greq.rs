//! Generalized requests: `MPI_Grequest_start`, `MPI_Grequest_complete`,
//! `MPI_Status_set_elements`, `MPI_Status_set_cancelled`, on the agent's generalized requests
//! ([`Request::generalized`]); and MPICH's extensions `MPIX_Grequest_start`,
//! `MPIX_Grequest_class_create`, `MPIX_Grequest_class_allocate` on the agent's request classes
//! ([`RequestClass`]).

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use viaduct_agent::request::{
    BoxError, ClassOps, ClassRequest, CompleteHandle, GrequestOps, QueryStatus, Request,
    RequestClass,
};

use crate::abi::{self, Handle, MpiCount, MpiStatus, err};
use crate::error::{CallbackCode, MpiError};
use crate::request::Meta;
use crate::state::{ReqEntry, rt};

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
    /// `MPI_Grequest_start`.
    MPI_Grequest_start / PMPI_Grequest_start(query_fn: Option<QueryFn>, free_fn: Option<FreeFn>, cancel_fn: Option<CancelFn>, extra_state: *mut c_void, request: *mut Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        if request.is_null() {
            return Err(MpiError::new(err::ARG, "request is NULL"));
        }
        if query_fn.is_none() || free_fn.is_none() || cancel_fn.is_none() {
            return Err(MpiError::new(
                err::ARG,
                "the query, free and cancel functions are all required",
            ));
        }
        let status = Arc::new(Mutex::new(MpiStatus::empty()));
        let ops = CGreq {
            query: query_fn,
            free: free_fn,
            cancel: cancel_fn,
            extra: extra_state as usize,
            status: Arc::clone(&status),
        };
        let (req, done) = Request::generalized(ops);
        let h = rt.new_request_handle();
        rt.greqs.insert(h, done);
        rt.put_request(h, ReqEntry::new(req, Meta::Greq { status }));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { *request = h };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Grequest_complete`: from any thread, once.
    MPI_Grequest_complete / PMPI_Grequest_complete(request: Handle) on abi::COMM_WORLD => {
        let rt = rt()?;
        let done = rt.greqs.remove(request);
        let done = done.ok_or_else(|| MpiError::new(
            err::REQUEST,
            format!("{request:#x} is not a generalized request waiting for completion"),
        ))?;
        done.complete()?;
        Ok(())
    }
}

/// Sets the byte count of `status` to `count` elements of `datatype`.
///
/// # Safety
///
/// `status` is a writable status.
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
    let bytes = (crate::types::type_size(datatype)? as i64)
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
    rt.put_request(h, ReqEntry::new(req, Meta::Greq { status }));
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
