//! Collectives: `MPI_Barrier`, `MPI_Bcast`, `MPI_Reduce`, `MPI_Allreduce`, `MPI_Gather`,
//! `MPI_Scatter`, `MPI_Allgather`, `MPI_Alltoall`, with their `MPI_IN_PLACE` forms, on the
//! agent's collectives (predefined datatypes and operations).

use std::ffi::{c_int, c_void};

use crate::abi::{self, Handle, err};
use crate::datatype::{bytes, input, output, reduction};
use crate::error::MpiError;
use crate::state::{CommEntry, rt};

fn in_place(p: *const c_void) -> bool {
    p as usize == abi::IN_PLACE
}

fn root_of(c: &CommEntry, root: c_int) -> Result<u32, MpiError> {
    if root < 0 || root as u32 >= c.comm.size() {
        return Err(MpiError::new(
            err::ROOT,
            format!(
                "root {root} is not in the communicator of {} ranks",
                c.comm.size()
            ),
        ));
    }
    Ok(root as u32)
}

fn same(what: &str, a: usize, b: usize) -> Result<(), MpiError> {
    if a != b {
        return Err(MpiError::new(
            err::TRUNCATE,
            format!("{what}: {a} bytes sent per rank but {b} bytes received per rank"),
        ));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Barrier`.
    MPI_Barrier / PMPI_Barrier(comm: Handle) on comm => {
        rt()?.comm(comm)?.comm.barrier()?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Bcast`.
    MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: Handle, root: c_int, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let root = root_of(&c, root)?;
        let len = bytes(count, datatype)?;
        // SAFETY: the caller's buffer of `count` elements.
        let buf = unsafe { output(buffer, len) }?;
        c.comm.bcast(buf, root)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Reduce` (`MPI_IN_PLACE` as `sendbuf` at the root).
    MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let root = root_of(&c, root)?;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        if c.comm.rank() == root {
            // SAFETY: the root's receive buffer of `count` elements.
            let out = unsafe { output(recvbuf, len) }?;
            if !in_place(sendbuf) {
                // SAFETY: the caller's send buffer of `count` elements.
                let send = unsafe { input(sendbuf, len) }?;
                out.copy_from_slice(send);
            }
            c.comm.reduce_with(out, &red, root)?;
        } else {
            // SAFETY: the caller's send buffer of `count` elements.
            let mut send = unsafe { input(sendbuf, len) }?.to_vec();
            c.comm.reduce_with(&mut send, &red, root)?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Allreduce` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let len = bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        // SAFETY: the caller's receive buffer of `count` elements.
        let out = unsafe { output(recvbuf, len) }?;
        if !in_place(sendbuf) {
            // SAFETY: the caller's send buffer of `count` elements.
            let send = unsafe { input(sendbuf, len) }?;
            out.copy_from_slice(send);
        }
        c.comm.allreduce_with(out, &red)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Gather` (`MPI_IN_PLACE` as `sendbuf` at the root).
    MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let root = root_of(&c, root)?;
        let n = c.comm.size() as usize;
        let me = c.comm.rank() as usize;
        if c.comm.rank() == root {
            let part = bytes(recvcount, recvtype)?;
            // SAFETY: the root's receive buffer of `size * recvcount` elements.
            let out = unsafe { output(recvbuf, part * n) }?;
            let send = if in_place(sendbuf) {
                out[me * part..(me + 1) * part].to_vec()
            } else {
                same("MPI_Gather", bytes(sendcount, sendtype)?, part)?;
                // SAFETY: the caller's send buffer.
                unsafe { input(sendbuf, part) }?.to_vec()
            };
            c.comm.gather(&send, out, root)?;
        } else {
            let len = bytes(sendcount, sendtype)?;
            // SAFETY: the caller's send buffer.
            let send = unsafe { input(sendbuf, len) }?;
            c.comm.gather(send, &mut [], root)?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Scatter` (`MPI_IN_PLACE` as `recvbuf` at the root).
    MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let root = root_of(&c, root)?;
        let n = c.comm.size() as usize;
        if c.comm.rank() == root {
            let part = bytes(sendcount, sendtype)?;
            // SAFETY: the root's send buffer of `size * sendcount` elements.
            let send = unsafe { input(sendbuf, part * n) }?;
            if in_place(recvbuf) {
                let mut scratch = vec![0u8; part];
                c.comm.scatter(send, &mut scratch, root)?;
            } else {
                same("MPI_Scatter", part, bytes(recvcount, recvtype)?)?;
                // SAFETY: the caller's receive buffer.
                let out = unsafe { output(recvbuf, part) }?;
                c.comm.scatter(send, out, root)?;
            }
        } else {
            let len = bytes(recvcount, recvtype)?;
            // SAFETY: the caller's receive buffer.
            let out = unsafe { output(recvbuf, len) }?;
            c.comm.scatter(&[], out, root)?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Allgather` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Allgather / PMPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let n = c.comm.size() as usize;
        let me = c.comm.rank() as usize;
        let part = bytes(recvcount, recvtype)?;
        // SAFETY: the caller's receive buffer of `size * recvcount` elements.
        let out = unsafe { output(recvbuf, part * n) }?;
        let send = if in_place(sendbuf) {
            out[me * part..(me + 1) * part].to_vec()
        } else {
            same("MPI_Allgather", bytes(sendcount, sendtype)?, part)?;
            // SAFETY: the caller's send buffer.
            unsafe { input(sendbuf, part) }?.to_vec()
        };
        c.comm.allgather(&send, out)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Alltoall` (`MPI_IN_PLACE` as `sendbuf`).
    MPI_Alltoall / PMPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle) on comm => {
        let c = rt()?.comm(comm)?;
        let n = c.comm.size() as usize;
        let part = bytes(recvcount, recvtype)?;
        // SAFETY: the caller's receive buffer of `size * recvcount` elements.
        let out = unsafe { output(recvbuf, part * n) }?;
        let send = if in_place(sendbuf) {
            out.to_vec()
        } else {
            same("MPI_Alltoall", bytes(sendcount, sendtype)?, part)?;
            // SAFETY: the caller's send buffer.
            unsafe { input(sendbuf, part * n) }?.to_vec()
        };
        c.comm.alltoall(&send, out)?;
        Ok(())
    }
}
