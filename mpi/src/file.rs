//! File I/O: `MPI_File_open`, `MPI_File_close`, `MPI_File_delete`, `MPI_File_get_size`,
//! `MPI_File_set_size`, `MPI_File_sync`, `MPI_File_read_at`, `MPI_File_write_at`,
//! `MPI_File_iread_at`, `MPI_File_iwrite_at`, `MPI_File_read_at_all`, `MPI_File_write_at_all`,
//! `MPI_File_read`, `MPI_File_write`, `MPI_File_read_all`, `MPI_File_write_all`,
//! `MPI_File_seek`, `MPI_File_get_position`, error handlers of files; on the agent's
//! nonblocking file I/O ([`viaduct_agent::fileio`]): every read and write is a request of the
//! agent's io_uring request class, so `MPI_File_iread_at`/`MPI_File_iwrite_at` requests are
//! waited with `MPI_Wait*` beside message requests, and a blocking wait hands every file request
//! of the wait to one `io_uring_enter`.
//!
//! The view is the default one (displacement 0, etype and filetype `MPI_BYTE`): offsets are in
//! bytes. `MPI_File_set_view` is not supported.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use viaduct_agent::comm::Comm;
use viaduct_agent::fileio::{BufferClaim, File, FileEngine, FileIoError, IoBuffer, OpenOptions};
use viaduct_agent::request::Request;

use crate::abi::{self, Handle, MpiOffset, MpiStatus, err};
use crate::comm::put;
use crate::datatype::{bytes, input, output};
use crate::error::MpiError;
use crate::request::{Meta, write_status};
use crate::state::{ReqEntry, rt};

/// `MPI_MODE_*` (mpio.h).
mod mode {
    use std::ffi::c_int;
    pub const CREATE: c_int = 1;
    pub const RDONLY: c_int = 2;
    pub const WRONLY: c_int = 4;
    pub const RDWR: c_int = 8;
    pub const DELETE_ON_CLOSE: c_int = 16;
    pub const EXCL: c_int = 64;
    pub const SEQUENTIAL: c_int = 256;
}

/// `MPI_SEEK_SET`, `MPI_SEEK_CUR`, `MPI_SEEK_END` (mpio.h).
const SEEK_SET: c_int = 600;
const SEEK_CUR: c_int = 602;
const SEEK_END: c_int = 604;

/// Error classes of files (mpi.h).
mod ferr {
    use std::ffi::c_int;
    pub const ACCESS: c_int = 20;
    pub const AMODE: c_int = 21;
    pub const BAD_FILE: c_int = 22;
    pub const FILE_EXISTS: c_int = 25;
    pub const IO: c_int = crate::abi::err::IO;
    pub const NO_SPACE: c_int = 36;
    pub const NO_SUCH_FILE: c_int = 37;
    pub const READ_ONLY: c_int = 40;
}

/// The kind bits of the pseudo communicator handle that reports a file's errors through the
/// file's error handler.
pub const FILE_ERR_KIND: u32 = 0xa000_0000;

/// An open file.
struct OpenFile {
    file: File,
    comm: Comm,
    path: std::path::PathBuf,
    amode: c_int,
    /// The individual file pointer (bytes).
    pos: Mutex<u64>,
    errhandler: AtomicI32,
    /// The pseudo handle reporting this file's errors.
    key: Handle,
}

struct Files {
    open: HashMap<usize, Arc<OpenFile>>,
    by_key: HashMap<Handle, usize>,
}

fn files() -> &'static Mutex<Files> {
    static FILES: OnceLock<Mutex<Files>> = OnceLock::new();
    FILES.get_or_init(|| {
        Mutex::new(Files {
            open: HashMap::new(),
            by_key: HashMap::new(),
        })
    })
}

static NEXT: AtomicUsize = AtomicUsize::new(1);

/// The `MPI_File` value of the file with id `id` (never NULL; never dereferenced).
pub fn handle_of(id: usize) -> usize {
    (id << 4) | 8
}

/// The id behind an `MPI_File` value (0 for `MPI_FILE_NULL`).
pub fn id_of(fh: usize) -> usize {
    fh >> 4
}
/// The error handler of `MPI_FILE_NULL`: what newly opened files get (`MPI_ERRORS_RETURN`, as
/// the standard says).
static DEFAULT_HANDLER: AtomicI32 = AtomicI32::new(abi::ERRORS_RETURN);

/// The pseudo handle reporting errors of file `fh` (that of `MPI_FILE_NULL` for others).
fn key_of(fh: *mut c_void) -> Handle {
    let files = files().lock().unwrap_or_else(|e| e.into_inner());
    files
        .open
        .get(&(fh as usize))
        .map_or(FILE_ERR_KIND as Handle, |f| f.key)
}

/// The error handler behind pseudo handle `key` (see [`FILE_ERR_KIND`]).
pub fn errhandler_of_key(key: Handle) -> Handle {
    let files = files().lock().unwrap_or_else(|e| e.into_inner());
    files
        .by_key
        .get(&key)
        .and_then(|fh| files.open.get(fh))
        .map_or(DEFAULT_HANDLER.load(Ordering::Relaxed), |f| {
            f.errhandler.load(Ordering::Relaxed)
        })
}

fn file(fh: *mut c_void) -> Result<Arc<OpenFile>, MpiError> {
    if fh.is_null() {
        return Err(
            MpiError::new(err::ARG, "the file is MPI_FILE_NULL").on(FILE_ERR_KIND as Handle)
        );
    }
    let files = files().lock().unwrap_or_else(|e| e.into_inner());
    files.open.get(&(fh as usize)).cloned().ok_or_else(|| {
        MpiError::new(ferr::BAD_FILE, format!("{fh:p} is not an open file"))
            .on(FILE_ERR_KIND as Handle)
    })
}

fn engine() -> Result<&'static FileEngine, MpiError> {
    static ENGINE: OnceLock<Result<FileEngine, String>> = OnceLock::new();
    ENGINE
        .get_or_init(|| FileEngine::new(64).map_err(|e| crate::error::chain(&e)))
        .as_ref()
        .map_err(|e| MpiError::new(ferr::IO, format!("the file I/O engine did not start: {e}")))
}

fn io_class(e: &std::io::Error) -> c_int {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::NotFound => ferr::NO_SUCH_FILE,
        ErrorKind::PermissionDenied => ferr::ACCESS,
        ErrorKind::AlreadyExists => ferr::FILE_EXISTS,
        ErrorKind::StorageFull => ferr::NO_SPACE,
        ErrorKind::ReadOnlyFilesystem => ferr::READ_ONLY,
        _ => ferr::IO,
    }
}

fn open_error(e: FileIoError) -> MpiError {
    let class = match &e {
        FileIoError::Open { source, .. } => io_class(source),
        _ => ferr::IO,
    };
    MpiError::new(class, crate::error::chain(&e))
}

/// The C string at `p`.
///
/// # Safety
///
/// `p` is NULL or a NUL-terminated string.
unsafe fn path(p: *const c_char) -> Result<std::path::PathBuf, MpiError> {
    if p.is_null() {
        return Err(MpiError::new(err::ARG, "the file name is NULL"));
    }
    // SAFETY: the caller's NUL-terminated string.
    let s = unsafe { CStr::from_ptr(p) };
    use std::os::unix::ffi::OsStrExt;
    Ok(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
        s.to_bytes(),
    )))
}

fn check_amode(amode: c_int) -> Result<OpenOptions, MpiError> {
    let access = [mode::RDONLY, mode::WRONLY, mode::RDWR]
        .iter()
        .filter(|&&m| amode & m != 0)
        .count();
    let bad = |why: &str| {
        Err(MpiError::new(
            ferr::AMODE,
            format!("access mode {amode:#x}: {why}"),
        ))
    };
    if access != 1 {
        return bad("exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR is needed");
    }
    if amode & mode::RDONLY != 0 && amode & (mode::CREATE | mode::EXCL) != 0 {
        return bad("MPI_MODE_RDONLY with MPI_MODE_CREATE or MPI_MODE_EXCL");
    }
    if amode & mode::RDWR != 0 && amode & mode::SEQUENTIAL != 0 {
        return bad("MPI_MODE_RDWR with MPI_MODE_SEQUENTIAL");
    }
    Ok(OpenOptions {
        read: amode & (mode::RDONLY | mode::RDWR) != 0,
        write: amode & (mode::WRONLY | mode::RDWR) != 0,
        ..OpenOptions::default()
    })
}

/// Every member learns whether rank 0 succeeded (its class, 0 for success).
fn agree(comm: &Comm, mine: c_int) -> Result<c_int, MpiError> {
    let mut b = mine.to_ne_bytes();
    comm.bcast(&mut b, 0)?;
    Ok(c_int::from_ne_bytes(b))
}

mpi_fn! {
    /// `MPI_File_open` (collective): rank 0 of `comm` creates the file when asked, then every
    /// rank opens it.
    MPI_File_open / PMPI_File_open(comm: Handle, filename: *const c_char, amode: c_int, info: Handle, fh: *mut *mut c_void) on comm => {
        let _ = info;
        let rt = rt()?;
        let c = rt.comm(comm)?;
        // SAFETY: the caller's file name.
        let p = unsafe { path(filename) }?;
        if fh.is_null() {
            return Err(MpiError::new(err::ARG, "fh is NULL"));
        }
        let opts = check_amode(amode).map_err(|e| e.on(FILE_ERR_KIND as Handle))?;
        let engine = engine()?;
        let comm_dup = c.comm.dup()?;
        // Rank 0 creates (exclusively when asked); the others open what it made.
        let first = if comm_dup.rank() == 0 {
            let o = OpenOptions {
                create: amode & mode::CREATE != 0 && amode & mode::EXCL == 0,
                ..opts.clone()
            };
            let made = if amode & mode::EXCL != 0 {
                std::fs::OpenOptions::new().write(true).create_new(true).open(&p)
                    .map(|_| ())
                    .map_err(|e| MpiError::new(io_class(&e), format!("creating {}: {e}", p.display())))
            } else {
                Ok(())
            };
            Some(made.and_then(|()| File::open(engine, &p, &o).map_err(open_error)))
        } else {
            None
        };
        let class0 = match &first {
            Some(Err(e)) => e.class,
            _ => abi::SUCCESS,
        };
        let agreed = agree(&comm_dup, class0)?;
        let opened = match first {
            Some(r) => r,
            None if agreed != abi::SUCCESS => Err(MpiError::new(agreed, format!("rank 0 could not open {}", p.display()))),
            None => File::open(engine, &p, &opts).map_err(open_error),
        };
        let f = opened.map_err(|e| e.on(FILE_ERR_KIND as Handle))?;
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let ptr = handle_of(id);
        let key = (FILE_ERR_KIND | (id as u32 & 0x00ff_ffff)) as Handle;
        let entry = OpenFile {
            file: f,
            comm: comm_dup,
            path: p,
            amode,
            pos: Mutex::new(0),
            errhandler: AtomicI32::new(DEFAULT_HANDLER.load(Ordering::Relaxed)),
            key,
        };
        {
            let mut files = files().lock().unwrap_or_else(|e| e.into_inner());
            files.by_key.insert(key, ptr);
            files.open.insert(ptr, Arc::new(entry));
        }
        // SAFETY: the caller's MPI_File, checked not NULL.
        unsafe { *fh = ptr as *mut c_void };
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_close` (collective): with `MPI_MODE_DELETE_ON_CLOSE`, rank 0 deletes the file
    /// once every rank closed it.
    MPI_File_close / PMPI_File_close(fh: *mut *mut c_void) on abi::COMM_WORLD => {
        // SAFETY: the caller's MPI_File.
        let h = unsafe { fh.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "fh is NULL"))?;
        let f = file(*h)?;
        {
            let mut files = files().lock().unwrap_or_else(|e| e.into_inner());
            files.open.remove(&(*h as usize));
            files.by_key.remove(&f.key);
        }
        *h = std::ptr::null_mut();
        f.comm.barrier().map_err(|e| MpiError::from(e).on(f.key))?;
        if f.amode & mode::DELETE_ON_CLOSE != 0 && f.comm.rank() == 0 {
            std::fs::remove_file(&f.path)
                .map_err(|e| MpiError::new(io_class(&e), format!("deleting {}: {e}", f.path.display())).on(f.key))?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_delete`.
    MPI_File_delete / PMPI_File_delete(filename: *const c_char, info: Handle) on FILE_ERR_KIND as Handle => {
        let _ = info;
        // SAFETY: the caller's file name.
        let p = unsafe { path(filename) }?;
        std::fs::remove_file(&p).map_err(|e| MpiError::new(io_class(&e), format!("deleting {}: {e}", p.display())))
    }
}

mpi_fn! {
    /// `MPI_File_get_size`.
    MPI_File_get_size / PMPI_File_get_size(fh: *mut c_void, size: *mut MpiOffset) on key_of(fh) => {
        let f = file(fh)?;
        let len = f.file.std().metadata().map_err(|e| MpiError::new(io_class(&e), e.to_string()))?.len();
        // SAFETY: the caller's MPI_Offset.
        unsafe { put(size, len as MpiOffset, "size") }
    }
}

mpi_fn! {
    /// `MPI_File_set_size` (collective): after a barrier, rank 0 truncates or extends the file.
    MPI_File_set_size / PMPI_File_set_size(fh: *mut c_void, size: MpiOffset) on key_of(fh) => {
        let f = file(fh)?;
        if size < 0 {
            return Err(MpiError::new(err::ARG, format!("size {size} is negative")));
        }
        // Every rank's earlier accesses end before the size changes.
        f.comm.barrier()?;
        let mine = if f.comm.rank() == 0 {
            f.file.std().set_len(size as u64).map_or_else(|e| io_class(&e), |()| abi::SUCCESS)
        } else {
            abi::SUCCESS
        };
        let agreed = agree(&f.comm, mine)?;
        if agreed != abi::SUCCESS {
            return Err(MpiError::new(agreed, format!("setting the size of {} failed", f.path.display())));
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_sync` (collective): an `fsync` request of the agent, then a barrier.
    MPI_File_sync / PMPI_File_sync(fh: *mut c_void) on key_of(fh) => {
        let f = file(fh)?;
        let r = f.file.isync();
        r.wait()
            .map_err(|e| MpiError::new(ferr::IO, crate::error::chain(e.error())))?;
        f.comm.barrier()?;
        Ok(())
    }
}

/// Starts a read or write of `count` elements of `datatype` at byte `offset`; returns the agent's
/// request and what its completion does.
///
/// # Safety
///
/// `buf` holds `count` elements of `datatype` until the request completes.
unsafe fn start(
    f: &OpenFile,
    offset: MpiOffset,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    write: bool,
) -> Result<(Request, Meta), MpiError> {
    let len = bytes(count, datatype)?;
    if offset < 0 {
        return Err(MpiError::new(
            err::ARG,
            format!("offset {offset} is negative"),
        ));
    }
    let access = if write {
        mode::WRONLY | mode::RDWR
    } else {
        mode::RDONLY | mode::RDWR
    };
    if f.amode & access == 0 {
        return Err(MpiError::new(
            ferr::ACCESS,
            format!(
                "{} is not open for {}",
                f.path.display(),
                if write { "writing" } else { "reading" }
            ),
        ));
    }
    let started = if write {
        // SAFETY: the caller's buffer of `count` elements.
        let data = unsafe { input(buf, len) }?;
        f.file
            .iwrite_at(IoBuffer::from(data.to_vec()), offset as u64)
    } else {
        if len > 0 && buf.is_null() {
            return Err(MpiError::new(err::BUFFER, "the buffer is NULL"));
        }
        f.file
            .iread_at(IoBuffer::from(vec![0u8; len]), offset as u64)
    };
    let (req, claim) = started.into_parts();
    let meta = Meta::File {
        comm: f.key,
        claim,
        dst: if write { 0 } else { buf as usize },
        len: if write { 0 } else { len },
    };
    Ok((req, meta))
}

/// A blocking read or write; writes the status.
///
/// # Safety
///
/// As for [`start`]; `status` is the caller's status or `MPI_STATUS_IGNORE`.
unsafe fn blocking(
    fh: *mut c_void,
    offset: Option<MpiOffset>,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    status: *mut MpiStatus,
    write: bool,
) -> Result<(), MpiError> {
    let f = file(fh)?;
    let mut pos = f.pos.lock().unwrap_or_else(|e| e.into_inner());
    let at = offset.unwrap_or(*pos as MpiOffset);
    // SAFETY: passed on.
    let (req, meta) = unsafe { start(&f, at, buf, count, datatype, write) }?;
    let mut e = ReqEntry::new(req, meta);
    let s = crate::request::wait_entry(&mut e);
    if offset.is_none() {
        *pos += s.count().max(0) as u64;
    }
    drop(pos);
    // SAFETY: the caller's status.
    unsafe { write_status(status, s) };
    if s.error != abi::SUCCESS {
        return Err(MpiError::new(
            s.error,
            format!(
                "{} on {} failed",
                if write { "writing" } else { "reading" },
                f.path.display()
            ),
        ));
    }
    Ok(())
}

/// A nonblocking read or write at `offset`; registers the request.
///
/// # Safety
///
/// As for [`start`]; `request` is the caller's writable handle.
unsafe fn nonblocking(
    fh: *mut c_void,
    offset: MpiOffset,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    request: *mut Handle,
    write: bool,
) -> Result<(), MpiError> {
    let rt = rt()?;
    let f = file(fh)?;
    if request.is_null() {
        return Err(MpiError::new(err::ARG, "request is NULL"));
    }
    // SAFETY: passed on.
    let (req, meta) = unsafe { start(&f, offset, buf, count, datatype, write) }?;
    let h = rt.add_request(ReqEntry::new(req, meta));
    // SAFETY: the caller's handle, checked not NULL.
    unsafe { *request = h };
    Ok(())
}

mpi_fn! {
    /// `MPI_File_read_at`.
    MPI_File_read_at / PMPI_File_read_at(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking(fh, Some(offset), buf, count, datatype, status, false) }
    }
}

mpi_fn! {
    /// `MPI_File_write_at`.
    MPI_File_write_at / PMPI_File_write_at(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking(fh, Some(offset), buf as *mut c_void, count, datatype, status, true) }
    }
}

mpi_fn! {
    /// `MPI_File_read_at_all` (collective; each rank reads its own part).
    MPI_File_read_at_all / PMPI_File_read_at_all(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking(fh, Some(offset), buf, count, datatype, status, false) }
    }
}

mpi_fn! {
    /// `MPI_File_write_at_all` (collective; each rank writes its own part).
    MPI_File_write_at_all / PMPI_File_write_at_all(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking(fh, Some(offset), buf as *mut c_void, count, datatype, status, true) }
    }
}

mpi_fn! {
    /// `MPI_File_read` (at the individual file pointer, which moves past the data read).
    MPI_File_read / PMPI_File_read(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking(fh, None, buf, count, datatype, status, false) }
    }
}

mpi_fn! {
    /// `MPI_File_write` (at the individual file pointer, which moves past the data written).
    MPI_File_write / PMPI_File_write(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking(fh, None, buf as *mut c_void, count, datatype, status, true) }
    }
}

mpi_fn! {
    /// `MPI_File_read_all` (collective; at each rank's individual file pointer).
    MPI_File_read_all / PMPI_File_read_all(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking(fh, None, buf, count, datatype, status, false) }
    }
}

mpi_fn! {
    /// `MPI_File_write_all` (collective; at each rank's individual file pointer).
    MPI_File_write_all / PMPI_File_write_all(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking(fh, None, buf as *mut c_void, count, datatype, status, true) }
    }
}

mpi_fn! {
    /// `MPI_File_iread_at`: a request of the agent's io_uring class.
    MPI_File_iread_at / PMPI_File_iread_at(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, offset, buf, count, datatype, request, false) }
    }
}

mpi_fn! {
    /// `MPI_File_iwrite_at`: a request of the agent's io_uring class.
    MPI_File_iwrite_at / PMPI_File_iwrite_at(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, offset, buf as *mut c_void, count, datatype, request, true) }
    }
}

mpi_fn! {
    /// `MPI_File_seek` (the individual file pointer, in bytes).
    MPI_File_seek / PMPI_File_seek(fh: *mut c_void, offset: MpiOffset, whence: c_int) on key_of(fh) => {
        let f = file(fh)?;
        let mut pos = f.pos.lock().unwrap_or_else(|e| e.into_inner());
        let base = match whence {
            SEEK_SET => 0,
            SEEK_CUR => *pos as i64,
            SEEK_END => f.file.std().metadata().map_err(|e| MpiError::new(io_class(&e), e.to_string()))?.len() as i64,
            _ => return Err(MpiError::new(err::ARG, format!("whence {whence} is not MPI_SEEK_SET, MPI_SEEK_CUR or MPI_SEEK_END"))),
        };
        let to = base.checked_add(offset).filter(|&t| t >= 0).ok_or_else(|| {
            MpiError::new(err::ARG, format!("seeking by {offset} from {base} leaves the file"))
        })?;
        *pos = to as u64;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_position`.
    MPI_File_get_position / PMPI_File_get_position(fh: *mut c_void, offset: *mut MpiOffset) on key_of(fh) => {
        let f = file(fh)?;
        let pos = *f.pos.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the caller's MPI_Offset.
        unsafe { put(offset, pos as MpiOffset, "offset") }
    }
}

mpi_fn! {
    /// `MPI_File_get_amode`.
    MPI_File_get_amode / PMPI_File_get_amode(fh: *mut c_void, amode: *mut c_int) on key_of(fh) => {
        let f = file(fh)?;
        // SAFETY: the caller's int.
        unsafe { put(amode, f.amode, "amode") }
    }
}

fn check_handler(h: Handle) -> Result<(), MpiError> {
    match h {
        abi::ERRORS_ARE_FATAL | abi::ERRORS_RETURN | abi::ERRORS_ABORT => Ok(()),
        _ => Err(MpiError::new(
            err::ARG,
            format!("{h:#x} is not a predefined error handler"),
        )),
    }
}

mpi_fn! {
    /// `MPI_File_set_errhandler` (`MPI_FILE_NULL`: the handler of files opened later).
    MPI_File_set_errhandler / PMPI_File_set_errhandler(fh: *mut c_void, errhandler: Handle) on key_of(fh) => {
        check_handler(errhandler)?;
        if fh.is_null() {
            DEFAULT_HANDLER.store(errhandler, Ordering::Relaxed);
        } else {
            file(fh)?.errhandler.store(errhandler, Ordering::Relaxed);
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_errhandler`.
    MPI_File_get_errhandler / PMPI_File_get_errhandler(fh: *mut c_void, errhandler: *mut Handle) on key_of(fh) => {
        let h = if fh.is_null() {
            DEFAULT_HANDLER.load(Ordering::Relaxed)
        } else {
            file(fh)?.errhandler.load(Ordering::Relaxed)
        };
        // SAFETY: the caller's handle.
        unsafe { put(errhandler, h, "errhandler") }
    }
}

/// Copies a completed read into the caller's buffer (what [`Meta::File`] does at completion).
pub fn deliver(claim: &BufferClaim, dst: usize, len: usize) {
    let Some(bufs) = claim.take() else { return };
    if len == 0 {
        return;
    }
    if let Some(b) = bufs.into_one() {
        let n = b.len().min(len);
        // SAFETY: `dst` is the caller's buffer of `len` bytes given to the read; MPI leaves it
        // to the library until the request completes.
        let to = unsafe { output(dst as *mut c_void, n) };
        if let Ok(to) = to {
            to.copy_from_slice(&b[..n]);
        }
    }
}
