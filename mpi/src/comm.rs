//! Communicators: `MPI_Comm_rank`, `MPI_Comm_size`, `MPI_Comm_dup`, `MPI_Comm_split`,
//! `MPI_Comm_free`, `MPI_Comm_compare`, error handlers and the predefined attributes, on the
//! agent's [`Comm`](viaduct_agent::comm::Comm).

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use crate::abi::{self, Handle, err};
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

mpi_fn! {
    /// `MPI_Comm_rank`.
    MPI_Comm_rank / PMPI_Comm_rank(comm: Handle, rank: *mut c_int) on comm => {
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's int.
        unsafe { put(rank, c.comm.rank() as c_int, "rank") }
    }
}

mpi_fn! {
    /// `MPI_Comm_size`.
    MPI_Comm_size / PMPI_Comm_size(comm: Handle, size: *mut c_int) on comm => {
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's int.
        unsafe { put(size, c.comm.size() as c_int, "size") }
    }
}

mpi_fn! {
    /// `MPI_Comm_dup` (collective): a communicator with the same members, new contexts and
    /// the same error handler.
    MPI_Comm_dup / PMPI_Comm_dup(comm: Handle, newcomm: *mut Handle) on comm => {
        let rt = rt()?;
        let c = rt.comm(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        let d = c.comm.dup()?;
        let h = rt.add_comm(CommEntry::new(d, c.errhandler.load(Ordering::Relaxed), rt.agent.size()));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}

mpi_fn! {
    /// `MPI_Comm_split` (collective): `MPI_UNDEFINED` as color gives `MPI_COMM_NULL`.
    MPI_Comm_split / PMPI_Comm_split(comm: Handle, color: c_int, key: c_int, newcomm: *mut Handle) on comm => {
        let rt = rt()?;
        let c = rt.comm(comm)?;
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
        let h = match c.comm.split(color, key)? {
            None => abi::COMM_NULL,
            Some(n) => rt.add_comm(CommEntry::new(n, c.errhandler.load(Ordering::Relaxed), rt.agent.size())),
        };
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
        rt.remove_comm(*h).map_err(|e| e.on(*h))?;
        *h = abi::COMM_NULL;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_compare`.
    MPI_Comm_compare / PMPI_Comm_compare(comm1: Handle, comm2: Handle, result: *mut c_int) on comm1 => {
        let rt = rt()?;
        let a = rt.comm(comm1)?;
        let b = rt.comm(comm2).map_err(|e| e.on(comm2))?;
        let members = |c: &CommEntry| -> Vec<u32> {
            (0..c.comm.size()).filter_map(|r| c.comm.world_rank(r)).collect()
        };
        let (ma, mb) = (members(&a), members(&b));
        let r = if comm1 == comm2 {
            abi::IDENT
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
        let c = rt()?.comm(comm)?;
        check_errhandler(errhandler)?;
        c.errhandler.store(errhandler, Ordering::Relaxed);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_get_errhandler`.
    MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: Handle, errhandler: *mut Handle) on comm => {
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's handle.
        unsafe { put(errhandler, c.errhandler.load(Ordering::Relaxed), "errhandler") }
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

/// Values of the predefined attributes (`MPI_TAG_UB`, ...): the pointer `MPI_Comm_get_attr`
/// gives back points into this.
struct Attrs {
    tag_ub: c_int,
    host: c_int,
    io: c_int,
    wtime_is_global: c_int,
}

static ATTRS: Attrs = Attrs {
    tag_ub: abi::TAG_UB,
    host: abi::PROC_NULL,
    io: abi::ANY_SOURCE,
    wtime_is_global: 0,
};

mpi_fn! {
    /// `MPI_Comm_get_attr` for the predefined attributes `MPI_TAG_UB`, `MPI_HOST`, `MPI_IO`,
    /// `MPI_WTIME_IS_GLOBAL` (others: flag 0).
    MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) on comm => {
        rt()?.comm(comm)?;
        let v: Option<&'static c_int> = match keyval {
            abi::KEY_TAG_UB => Some(&ATTRS.tag_ub),
            abi::KEY_HOST => Some(&ATTRS.host),
            abi::KEY_IO => Some(&ATTRS.io),
            abi::KEY_WTIME_IS_GLOBAL => Some(&ATTRS.wtime_is_global),
            _ => None,
        };
        // SAFETY: the caller's flag and `void **` attribute value.
        unsafe {
            put(flag, c_int::from(v.is_some()), "flag")?;
            if let Some(v) = v {
                put(attribute_val.cast::<*const c_int>(), v as *const c_int, "attribute_val")?;
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Attr_get` (the MPI-1 name of `MPI_Comm_get_attr`).
    MPI_Attr_get / PMPI_Attr_get(comm: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) on comm => {
        // SAFETY: same contract.
        let code = unsafe { PMPI_Comm_get_attr(comm, keyval, attribute_val, flag) };
        if code == abi::SUCCESS { Ok(()) } else { Err(MpiError::new(code, "MPI_Comm_get_attr failed")) }
    }
}
