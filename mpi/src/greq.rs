//! Generalized requests: `MPI_Grequest_start`, `MPI_Grequest_complete`,
//! `MPI_Status_set_elements`, `MPI_Status_set_cancelled`, on the agent's generalized requests
//! ([`Request::generalized`]).

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use viaduct_agent::request::{BoxError, GrequestOps, QueryStatus, Request};

use crate::abi::{self, Handle, MpiCount, MpiStatus, err};
use crate::datatype::size_of;
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

    fn cancel(&self, complete: bool) -> Result<(), BoxError> {
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
        rt.greqs.lock().unwrap_or_else(|e| e.into_inner()).insert(h, done);
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
        let done = rt.greqs.lock().unwrap_or_else(|e| e.into_inner()).remove(&request);
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
    let bytes = (size_of(datatype)? as i64)
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
