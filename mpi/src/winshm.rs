//! Shared-memory windows (MPI 4.x chapter 12.2.3): `MPI_Win_allocate_shared` and
//! `MPI_Win_shared_query` (on windows of every flavor, as MPI 4.1 allows).
//!
//! Every rank of the communicator must run on one node (the host names are compared;
//! `MPI_ERR_RMA_SHARED` names the first rank on another host). Rank 0 creates a file in
//! `/dev/shm` of the sum of every rank's size, every rank maps all of it, then rank 0 removes
//! the name. The parts are contiguous (the standard's default): rank r's part starts where rank
//! r-1's ends; the `alloc_shared_noncontig` info key is ignored. The window is an ordinary
//! window over the rank's part, so the one-sided operations and their synchronisation take the
//! same path as on any other window; loads and stores of other ranks' parts go straight to the
//! shared memory (the program synchronises them, e.g. with `MPI_Win_sync` and a barrier).

use std::ffi::{c_int, c_void};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::abi::{self, Handle, MpiAint, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::state::rt;
use crate::win;

/// `MPI_ERR_RMA_SHARED`.
const ERR_RMA_SHARED: c_int = 57;
/// Bytes of a host name compared between ranks.
const HOST: usize = 256;
/// Bytes of the path of the shared file sent by rank 0 (with its status byte).
const PATH: usize = 256;

/// The mapping of a shared window: the whole segment, and each rank's part of it.
pub(crate) struct Mapping {
    addr: usize,
    len: usize,
    /// Per rank: offset in the segment, size in bytes, displacement unit.
    parts: Vec<(usize, usize, c_int)>,
    unmapped: AtomicBool,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        self.unmap();
    }
}

impl Mapping {
    /// Unmaps the segment (once; at `MPI_Win_free`).
    pub(crate) fn unmap(&self) {
        if !self.unmapped.swap(true, Ordering::AcqRel) {
            // SAFETY: the mapping made by `allocate`, of `len` bytes at `addr`, unmapped once;
            // the window is freed, so the library no longer accesses it.
            unsafe { libc::munmap(self.addr as *mut c_void, self.len) };
        }
    }
}

/// This host's name, NUL-padded to [`HOST`] bytes.
fn host() -> [u8; HOST] {
    let mut h = [0u8; HOST];
    // SAFETY: `h` is a writable buffer of its length less the final NUL.
    unsafe { libc::gethostname(h.as_mut_ptr().cast(), HOST - 1) };
    h
}

fn host_str(h: &[u8]) -> String {
    let end = h.iter().position(|&b| b == 0).unwrap_or(h.len());
    String::from_utf8_lossy(&h[..end]).into_owned()
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Creates the segment (collective over `c`): returns the mapping, or the error every rank
/// reports.
fn allocate(
    c: &viaduct_agent::comm::Comm,
    size: usize,
    disp_unit: c_int,
) -> Result<Mapping, MpiError> {
    let n = c.size() as usize;
    let me = c.rank() as usize;
    let mut hosts = vec![0u8; HOST * n];
    c.allgather(&host(), &mut hosts)?;
    if let Some(r) = (1..n).find(|&r| hosts[r * HOST..(r + 1) * HOST] != hosts[..HOST]) {
        return Err(MpiError::new(
            ERR_RMA_SHARED,
            format!(
                "MPI_Win_allocate_shared needs every rank of the communicator on one node, but \
                 rank {r} runs on {} and rank 0 on {} (MPI_Comm_split_type with \
                 MPI_COMM_TYPE_SHARED makes such a communicator)",
                host_str(&hosts[r * HOST..(r + 1) * HOST]),
                host_str(&hosts[..HOST])
            ),
        ));
    }
    let mut mine = [0u8; 12];
    mine[..8].copy_from_slice(&(size as u64).to_le_bytes());
    mine[8..].copy_from_slice(&disp_unit.to_le_bytes());
    let mut all = vec![0u8; 12 * n];
    c.allgather(&mine, &mut all)?;
    let mut parts = Vec::with_capacity(n);
    let mut total = 0usize;
    for r in all.chunks(12) {
        let mut s = [0u8; 8];
        s.copy_from_slice(&r[..8]);
        let s = u64::from_le_bytes(s) as usize;
        let mut d = [0u8; 4];
        d.copy_from_slice(&r[8..]);
        parts.push((total, s, c_int::from_le_bytes(d)));
        total = total.checked_add(s).ok_or_else(|| {
            MpiError::new(
                err::NO_MEM,
                "the parts of the shared window overflow the address space",
            )
        })?;
    }
    let len = total.max(1);
    // Rank 0 creates the file and sends its path (first byte: 1 when created).
    let mut msg = [0u8; PATH];
    let mut created = None;
    let mut cause = String::new();
    if me == 0 {
        let path = format!(
            "/dev/shm/viaduct-win-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let made = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|f| f.set_len(len as u64).map(|()| f));
        match made {
            Ok(f) => {
                msg[0] = 1;
                let b = path.as_bytes();
                msg[1..1 + b.len()].copy_from_slice(b);
                created = Some((f, path));
            }
            Err(e) => cause = format!("cannot create {path} of {len} bytes: {e}"),
        }
    }
    c.bcast(&mut msg, 0)?;
    let path = host_str(&msg[1..]);
    let file = match (msg[0], created) {
        (_, Some((f, _))) => Ok(f),
        (1, None) => std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {path}: {e}")),
        _ => Err(if cause.is_empty() {
            "rank 0 could not create the shared file in /dev/shm".to_string()
        } else {
            cause
        }),
    };
    let addr = match &file {
        Ok(f) => {
            // SAFETY: a new shared mapping of `len` bytes of the file (which is `len` bytes
            // long); the kernel picks the address. Checked for MAP_FAILED below.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    f.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                Err(format!(
                    "cannot map {len} bytes of {path}: {}",
                    std::io::Error::last_os_error()
                ))
            } else {
                Ok(p as usize)
            }
        }
        Err(e) => Err(e.clone()),
    };
    // Every rank learns whether every rank mapped the file; then the name can go.
    let ok = [u8::from(addr.is_ok())];
    let mut oks = vec![0u8; n];
    let gathered = c.allgather(&ok, &mut oks);
    if me == 0 && msg[0] == 1 {
        let _ = std::fs::remove_file(&path);
    }
    gathered?;
    let failed = oks.iter().position(|&b| b == 0);
    match (addr, failed) {
        (Ok(a), None) => Ok(Mapping {
            addr: a,
            len,
            parts,
            unmapped: AtomicBool::new(false),
        }),
        (a, _) => {
            if let Ok(a) = a {
                // SAFETY: the mapping just made, not given out.
                unsafe { libc::munmap(a as *mut c_void, len) };
            }
            let r = failed.unwrap_or(me);
            Err(MpiError::new(
                ERR_RMA_SHARED,
                match &file {
                    Err(e) if r == me => e.clone(),
                    _ => format!("rank {r} could not map the shared window's memory"),
                },
            ))
        }
    }
}

mpi_fn! {
    /// `MPI_Win_allocate_shared` (collective): a window over memory every rank of the
    /// communicator (all on one node) can load and store; parts are contiguous in rank order.
    MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: MpiAint, disp_unit: c_int, info: Handle, comm: Handle, baseptr: *mut c_void, win: *mut Handle) on comm => {
        let hints = crate::wininfo::known(info)?;
        win::check_args(size, disp_unit)?;
        if win.is_null() || baseptr.is_null() {
            return Err(MpiError::new(err::ARG, "baseptr or win is NULL"));
        }
        let c = rt()?.intra(comm)?;
        let dup = c.comm.dup()?;
        let m = allocate(&dup, size as usize, disp_unit)?;
        let me = dup.rank() as usize;
        // A part of size 0 has no memory: its base is NULL (as MPICH gives).
        let base = if m.parts[me].1 == 0 { 0 } else { m.addr + m.parts[me].0 };
        let h = win::create_on(dup, base, size, disp_unit, win::FLAVOR_SHARED, Some(m))?;
        crate::wininfo::set(h, hints);
        // SAFETY: the caller's `void **` and handle, checked not NULL.
        unsafe {
            put(baseptr.cast::<*mut c_void>(), base as *mut c_void, "baseptr")?;
            put(win, h, "win")
        }
    }
}

mpi_fn! {
    /// `MPI_Win_shared_query` (MPI 4.1: windows of every flavor): the size, displacement unit
    /// and address (in this process) of rank `rank`'s part; `MPI_PROC_NULL`: of the first part
    /// that is not empty. A part of size 0 has address NULL. On a window not made by
    /// `MPI_Win_allocate_shared` only the caller's own memory is accessible to it: its own
    /// rank gives its base, size and unit (size 0 and NULL on a dynamic window), every other
    /// rank size 0, unit 0 and NULL (MPICH's answer for memory not shared).
    MPI_Win_shared_query / PMPI_Win_shared_query(win: Handle, rank: c_int, size: *mut MpiAint, disp_unit: *mut c_int, baseptr: *mut c_void) on win => {
        let w = win::win(win)?;
        if size.is_null() || disp_unit.is_null() || baseptr.is_null() {
            return Err(MpiError::new(err::ARG, "size, disp_unit or baseptr is NULL"));
        }
        let n = w.comm.size() as c_int;
        if rank != abi::PROC_NULL && (rank < 0 || rank >= n) {
            return Err(MpiError::new(err::RANK, format!("rank {rank} is not in the window's group of {n}")));
        }
        let (addr, sz, du) = query(&w, rank);
        // SAFETY: the caller's MPI_Aint, int and `void **`, checked not NULL.
        unsafe {
            put(size, sz as MpiAint, "size")?;
            put(disp_unit, du, "disp_unit")?;
            put(baseptr.cast::<*mut c_void>(), addr as *mut c_void, "baseptr")
        }
    }
}

/// The (address, size, displacement unit) of rank `rank`'s part of `w` as this process sees it
/// (`rank` valid or `MPI_PROC_NULL`); a part of size 0, or one not accessible here, is
/// (0, 0, unit) with unit 0 when not known.
fn query(w: &win::Win, rank: c_int) -> (usize, usize, c_int) {
    match &w.shm {
        Some(m) => {
            let part = if rank == abi::PROC_NULL {
                m.parts.iter().find(|p| p.1 > 0).copied()
            } else {
                Some(m.parts[rank as usize])
            };
            match part {
                Some((_, 0, du)) => (0, 0, du),
                Some((off, sz, du)) => (m.addr + off, sz, du),
                None => (0, 0, m.parts.first().map_or(1, |p| p.2)),
            }
        }
        None => {
            let me = w.comm.rank() as c_int;
            let alone = rank == abi::PROC_NULL && w.comm.size() == 1;
            if (rank == me || alone) && w.size > 0 {
                (w.base, w.size, w.disp_unit as c_int)
            } else if rank == me || alone {
                (0, 0, w.disp_unit as c_int)
            } else {
                (0, 0, 0)
            }
        }
    }
}
