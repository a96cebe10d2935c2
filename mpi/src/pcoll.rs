//! MPI-4 persistent collectives (`MPI_Barrier_init`, `MPI_Bcast_init`, ..., the `v` and `w`
//! forms, `MPI_Reduce_scatter_init`, the neighbourhood ones): each makes an inactive
//! persistent request that keeps its arguments; every `MPI_Start`/`MPI_Startall` starts the
//! matching nonblocking collective (`MPI_Ibcast`, ...) on them, reading the send buffer
//! anew, and `MPI_Wait`/`MPI_Test` complete it and leave it inactive, as for persistent
//! point-to-point requests. The info argument is accepted and not read.
//!
//! The arguments are checked at each start (by the nonblocking collective), so an error in
//! them is reported by `MPI_Start`, through the communicator's error handler; the `_init`
//! call checks the communicator and the request pointer.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use viaduct_agent::request::Request;

use crate::abi::{self, Handle, MpiAint, err};
use crate::error::{MpiError, quietly};
use crate::p2p::{CollStart, Persist};
use crate::request::Meta;
use crate::state::{ReqEntry, rt};
use crate::types::HeldType;

/// An argument kept by a persistent collective: pointers are kept as addresses (the
/// caller's buffers and arrays, which MPI leaves to the library while the request lives).
trait Keep: Copy {
    /// What is kept.
    type Kept: Copy + Send + Sync + 'static;
    /// The value to keep.
    fn keep(self) -> Self::Kept;
    /// The argument back.
    fn back(k: Self::Kept) -> Self;
    /// Holds the argument for the request's life where it is a derived datatype (below).
    fn hold(self, held: &mut Vec<(Handle, Arc<HeldType>)>) {
        let _ = held;
    }
    /// The argument to use at a start: itself, but for a derived datatype (below).
    fn at_start(self, held: &[(Handle, Arc<HeldType>)]) -> Self {
        let _ = held;
        self
    }
}

impl Keep for c_int {
    type Kept = c_int;
    fn keep(self) -> c_int {
        self
    }
    fn back(k: c_int) -> Self {
        k
    }
    /// A derived datatype is held under a handle of the request's own: MPI lets the program
    /// free the datatype once the `_init` call returned (and a large-count `_init` frees the
    /// datatype it made for the call). Counts and roots are never such handles (those are
    /// negative as an `int`); a value that is no datatype is left to the start to report.
    fn hold(self, held: &mut Vec<(Handle, Arc<HeldType>)>) {
        if crate::types::is_derived(self) {
            if let Ok(h) = HeldType::new(self) {
                held.push((self, h));
            }
        }
    }
    /// The program's own handle while it still names the datatype given to `_init` (a user
    /// operation sees the handle it was given), else the request's.
    fn at_start(self, held: &[(Handle, Arc<HeldType>)]) -> Self {
        let Some((_, h)) = held.iter().find(|(t, _)| *t == self) else {
            return self;
        };
        let same = match (
            crate::types::derived(self),
            crate::types::derived(h.handle()),
        ) {
            (Ok(a), Ok(b)) => Arc::ptr_eq(&a, &b),
            _ => false,
        };
        if same { self } else { h.handle() }
    }
}

impl<T> Keep for *const T {
    type Kept = usize;
    fn keep(self) -> usize {
        self as usize
    }
    fn back(k: usize) -> Self {
        k as *const T
    }
}

impl<T> Keep for *mut T {
    type Kept = usize;
    fn keep(self) -> usize {
        self as usize
    }
    fn back(k: usize) -> Self {
        k as *mut T
    }
}

/// Makes the inactive persistent request of a collective on `comm` started by `start`
/// (`intra_only`: a collective the standard forbids on an intercommunicator, `MPI_ERR_COMM`
/// there).
///
/// # Safety
///
/// `request` is the caller's writable handle (or NULL, an error).
pub(crate) unsafe fn make(
    comm: Handle,
    start: Arc<CollStart>,
    intra_only: bool,
    request: *mut Handle,
) -> Result<(), MpiError> {
    let rt = rt()?;
    if intra_only {
        // The standard forbids these on an intercommunicator.
        rt.intra(comm)?;
    }
    rt.comm_any(comm)?;
    // SAFETY: the caller's handle.
    let out =
        unsafe { request.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "request is NULL"))?;
    *out = rt.add_request(ReqEntry {
        req: Request::null(),
        meta: Meta::Inactive { comm },
        persist: Some(Persist::coll(comm, start)),
    });
    Ok(())
}

/// Defines `MPI_X_init(args..., comm, info, request)` starting `PMPI_IX(args..., comm,
/// request)` at each `MPI_Start`.
macro_rules! persistent {
    ($mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) => $start:path, $what:literal) => {
        mpi_fn! {
            #[doc = concat!("`", stringify!($mpi), "`: a persistent request; each `MPI_Start` starts `", $what, "` on these arguments.")]
            $mpi / $pmpi($($a: $t,)* comm: Handle, info: Handle, request: *mut Handle) on comm => {
                let _ = info;
                #[allow(unused_mut)] // MPI_Barrier_init has no arguments to hold
                let mut held: Vec<(Handle, Arc<HeldType>)> = Vec::new();
                $(Keep::hold($a, &mut held);)*
                $(let $a = Keep::keep($a);)*
                let start = move || -> Result<Handle, MpiError> {
                    let held: &[(Handle, Arc<HeldType>)] = &held;
                    let _ = held;
                    let mut h = abi::REQUEST_NULL;
                    // SAFETY: the arguments given to the `_init` call, which MPI leaves valid
                    // (buffers and arrays included) while the persistent request lives.
                    quietly(|| unsafe { $start($(<$t as Keep>::back($a).at_start(held),)* comm, &mut h) })?;
                    Ok(h)
                };
                // SAFETY: the caller's handle.
                unsafe { make(comm, Arc::new(start), matches!($what, "MPI_Iscan" | "MPI_Iexscan"), request) }
            }
        }
    };
}

persistent!(MPI_Barrier_init / PMPI_Barrier_init() => crate::coll::PMPI_Ibarrier, "MPI_Ibarrier");
persistent!(MPI_Bcast_init / PMPI_Bcast_init(
    buffer: *mut c_void, count: c_int, datatype: Handle, root: c_int
) => crate::coll::PMPI_Ibcast, "MPI_Ibcast");
persistent!(MPI_Reduce_init / PMPI_Reduce_init(
    sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int
) => crate::coll::PMPI_Ireduce, "MPI_Ireduce");
persistent!(MPI_Allreduce_init / PMPI_Allreduce_init(
    sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle
) => crate::coll::PMPI_Iallreduce, "MPI_Iallreduce");
persistent!(MPI_Gather_init / PMPI_Gather_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int
) => crate::coll::PMPI_Igather, "MPI_Igather");
persistent!(MPI_Scatter_init / PMPI_Scatter_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int
) => crate::coll::PMPI_Iscatter, "MPI_Iscatter");
persistent!(MPI_Allgather_init / PMPI_Allgather_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle
) => crate::coll::PMPI_Iallgather, "MPI_Iallgather");
persistent!(MPI_Alltoall_init / PMPI_Alltoall_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle
) => crate::coll::PMPI_Ialltoall, "MPI_Ialltoall");
persistent!(MPI_Gatherv_init / PMPI_Gatherv_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int
) => crate::vcoll::PMPI_Igatherv, "MPI_Igatherv");
persistent!(MPI_Scatterv_init / PMPI_Scatterv_init(
    sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int
) => crate::vcoll::PMPI_Iscatterv, "MPI_Iscatterv");
persistent!(MPI_Allgatherv_init / PMPI_Allgatherv_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle
) => crate::vcoll::PMPI_Iallgatherv, "MPI_Iallgatherv");
persistent!(MPI_Alltoallv_init / PMPI_Alltoallv_init(
    sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle
) => crate::vcoll::PMPI_Ialltoallv, "MPI_Ialltoallv");
persistent!(MPI_Alltoallw_init / PMPI_Alltoallw_init(
    sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const Handle
) => crate::vcoll::PMPI_Ialltoallw, "MPI_Ialltoallw");
persistent!(MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init(
    sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle, op: Handle
) => crate::vcoll::PMPI_Ireduce_scatter_block, "MPI_Ireduce_scatter_block");
persistent!(MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init(
    sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Handle, op: Handle
) => crate::vcoll::PMPI_Ireduce_scatter, "MPI_Ireduce_scatter");
persistent!(MPI_Scan_init / PMPI_Scan_init(
    sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle
) => crate::vcoll::PMPI_Iscan, "MPI_Iscan");
persistent!(MPI_Exscan_init / PMPI_Exscan_init(
    sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle
) => crate::vcoll::PMPI_Iexscan, "MPI_Iexscan");
persistent!(MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle
) => crate::topo::PMPI_Ineighbor_allgather, "MPI_Ineighbor_allgather");
persistent!(MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle
) => crate::topo::PMPI_Ineighbor_alltoall, "MPI_Ineighbor_alltoall");
persistent!(MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init(
    sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle
) => crate::topo::PMPI_Ineighbor_allgatherv, "MPI_Ineighbor_allgatherv");
persistent!(MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init(
    sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle
) => crate::topo::PMPI_Ineighbor_alltoallv, "MPI_Ineighbor_alltoallv");
persistent!(MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init(
    sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const MpiAint, recvtypes: *const Handle
) => crate::topo::PMPI_Ineighbor_alltoallw, "MPI_Ineighbor_alltoallw");
