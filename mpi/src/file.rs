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
//! Split collectives (`MPI_File_read_all_begin`/`_end`, ...) start their access at the begin
//! and wait for it at the end, one at a time per file handle. The shared file pointer
//! (`MPI_File_read_shared`, `MPI_File_write_ordered`, `MPI_File_seek_shared`, ...) is kept by
//! rank 0 of the file's communicator ([`crate::fileptr`]).
//!
//! Views (`MPI_File_set_view`, `MPI_File_get_view`, `MPI_File_get_byte_offset`): the file seen
//! by a rank is its filetype tiled from the view's displacement; offsets and the individual file
//! pointer count etypes. Every access is split into the contiguous file extents it covers
//! (adjacent ones merged), one io_uring request per extent; the memory side goes through the
//! buffer's datatype (packed for a write, unpacked at a read's completion). A nonblocking access
//! is one MPI request that completes when all its pieces did. The default view is displacement
//! 0 with etype and filetype `MPI_BYTE`; the data representation is `"native"`, or a
//! registered one without conversion functions (see `crate::datarep`).
//!
//! Atomic mode (`MPI_File_set_atomicity`): every access, whatever its form, holds a POSIX
//! byte-range lock ([`crate::filelock`]; shared for a read, exclusive for a write) over the
//! file's bytes from the first to the last it touches while its pieces move: [`start`] takes
//! the lock, submits the pieces, waits for all of them and unlocks before it returns, and the
//! access's request is the null (complete) request, whose completion only delivers a read's
//! data and the status. So a nonblocking access in atomic mode is done in its start call, and
//! no lock outlives a call. Non-atomic mode takes no lock.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use viaduct_agent::comm::Comm;
use viaduct_agent::fileio::{BufferClaim, File, FileEngine, FileIoError, IoBuffer, OpenOptions};
use viaduct_agent::request::Request;

use crate::abi::MpiAint;
use crate::abi::{self, Handle, MpiOffset, MpiStatus, err};
use crate::comm::put;
use crate::datatype::{input, output};
use crate::error::MpiError;
use crate::filelock::{LockKind, RangeLock};
use crate::fileptr::SharedPtr;
use crate::request::{Meta, write_status};
use crate::state::{ReqEntry, rt};
use crate::types::Layout;

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
pub(crate) mod ferr {
    use std::ffi::c_int;
    pub const ACCESS: c_int = 20;
    pub const AMODE: c_int = 21;
    pub const BAD_FILE: c_int = 22;
    pub const FILE_EXISTS: c_int = 25;
    pub const IO: c_int = crate::abi::err::IO;
    pub const NO_SPACE: c_int = 36;
    pub const NO_SUCH_FILE: c_int = 37;
    pub const READ_ONLY: c_int = 40;
    pub const UNSUPPORTED_DATAREP: c_int = 43;
}

/// `MPI_DISPLACEMENT_CURRENT` (mpio.h).
const DISPLACEMENT_CURRENT: MpiOffset = -54_278_278;

/// The kind bits of the pseudo communicator handle that reports a file's errors through the
/// file's error handler.
pub const FILE_ERR_KIND: u32 = 0xa000_0000;

/// An open file.
struct OpenFile {
    file: File,
    comm: Comm,
    path: std::path::PathBuf,
    amode: c_int,
    /// The individual file pointer (etypes of the view).
    pos: Mutex<u64>,
    /// The view.
    view: Mutex<Arc<View>>,
    /// Atomic mode (`MPI_File_set_atomicity`): every access holds a byte-range lock over what
    /// it touches (see [`crate::filelock`]).
    atomic: std::sync::atomic::AtomicBool,
    /// The locks this file takes, found when atomic mode was first set.
    locks: OnceLock<LockKind>,
    errhandler: AtomicI32,
    /// The pseudo handle reporting this file's errors.
    key: Handle,
    /// The shared file pointer.
    shared: Arc<SharedPtr>,
    /// The split collective begun and not ended yet.
    split: Mutex<Option<Split>>,
}

/// The kinds of split collectives.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SplitKind {
    ReadAll,
    WriteAll,
    ReadAtAll,
    WriteAtAll,
    ReadOrdered,
    WriteOrdered,
}

impl SplitKind {
    /// The name of the call beginning it.
    fn begin(self) -> &'static str {
        match self {
            SplitKind::ReadAll => "MPI_File_read_all_begin",
            SplitKind::WriteAll => "MPI_File_write_all_begin",
            SplitKind::ReadAtAll => "MPI_File_read_at_all_begin",
            SplitKind::WriteAtAll => "MPI_File_write_at_all_begin",
            SplitKind::ReadOrdered => "MPI_File_read_ordered_begin",
            SplitKind::WriteOrdered => "MPI_File_write_ordered_begin",
        }
    }

    fn write(self) -> bool {
        matches!(
            self,
            SplitKind::WriteAll | SplitKind::WriteAtAll | SplitKind::WriteOrdered
        )
    }
}

/// A split collective in progress: its access, started by the begin call.
struct Split {
    kind: SplitKind,
    entry: ReqEntry,
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
pub(crate) fn key_of(fh: *mut c_void) -> Handle {
    let files = files().lock().unwrap_or_else(|e| e.into_inner());
    files
        .open
        .get(&(fh as usize))
        .map_or(FILE_ERR_KIND as Handle, |f| f.key)
}

/// The file behind pseudo handle `key` (NULL for that of `MPI_FILE_NULL` or a closed file).
pub(crate) fn fh_of_key(key: Handle) -> *mut c_void {
    let files = files().lock().unwrap_or_else(|e| e.into_inner());
    files
        .by_key
        .get(&key)
        .map_or(std::ptr::null_mut(), |&fh| fh as *mut c_void)
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
        let c = rt.intra(comm)?;
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
        let shared = SharedPtr::new(comm_dup.clone())?;
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let ptr = handle_of(id);
        let key = (FILE_ERR_KIND | (id as u32 & 0x00ff_ffff)) as Handle;
        let entry = OpenFile {
            file: f,
            comm: comm_dup,
            path: p,
            amode,
            pos: Mutex::new(0),
            view: Mutex::new(Arc::new(View::default_view()?)),
            atomic: std::sync::atomic::AtomicBool::new(false),
            locks: OnceLock::new(),
            errhandler: AtomicI32::new(DEFAULT_HANDLER.load(Ordering::Relaxed)),
            key,
            shared,
            split: Mutex::new(None),
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
        f.shared.stop();
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

/// A file view: the filetype's byte runs tiled from the displacement, counted in etypes.
struct View {
    /// Displacement (bytes from the start of the file).
    disp: u64,
    /// The etype as given, and its layout.
    etype: (Handle, Arc<Layout>),
    /// The filetype as given, and its layout.
    filetype: (Handle, Arc<Layout>),
    /// Bytes of one etype.
    esize: u64,
    /// The filetype's byte runs (offset from a tile's start, length), in file order.
    runs: Vec<(u64, u64)>,
    /// Bytes from one tile to the next.
    extent: u64,
    /// Bytes of data in one tile.
    size: u64,
    /// Whether the tiles make one contiguous stream from `disp`.
    contiguous: bool,
    /// Whether consecutive tiles overlap in a file open for writing (an access past the first
    /// tile is refused).
    overlapping: bool,
    /// The data representation (`"native"`, or a registered one without conversion).
    datarep: String,
}

/// Most io_uring pieces one access may be split into.
const MAX_PIECES: usize = 1 << 20;

impl View {
    fn default_view() -> Result<Self, MpiError> {
        Self::new(0, abi::dt::BYTE, abi::dt::BYTE, false)
    }

    /// Checks `etype` and `filetype` (MPI 4.1 §14.3: non-negative, monotonically non-decreasing
    /// displacements; no overlapping regions in a file open for writing; the filetype made of
    /// whole etypes) and builds the view. Bad displacements and overlaps are `MPI_ERR_IO`, as
    /// ROMIO reports them.
    fn new(disp: u64, etype: Handle, filetype: Handle, writable: bool) -> Result<Self, MpiError> {
        let el = crate::types::layout(etype)?;
        let fl = crate::types::layout(filetype)?;
        for (what, l) in [("etype", &el), ("filetype", &fl)] {
            let mut last = 0isize;
            let mut end = 0isize;
            for &(off, n) in &l.runs {
                if off < 0 || off < last {
                    return Err(MpiError::new(
                        ferr::IO,
                        format!(
                            "the {what}'s displacements are not non-negative and monotonically \
                             non-decreasing (a piece at byte {off})"
                        ),
                    ));
                }
                if writable && off < end {
                    return Err(MpiError::new(
                        ferr::IO,
                        format!(
                            "the {what} has overlapping regions (at byte {off}), which a file \
                             open for writing does not permit"
                        ),
                    ));
                }
                last = off;
                end = end.max(off + n as isize);
            }
        }
        if el.size == 0 {
            return Err(MpiError::new(err::TYPE, "the etype holds no data"));
        }
        // A filetype without data is allowed: the view then holds no data, and only empty
        // accesses succeed through it.
        if fl.size % el.size != 0 {
            return Err(MpiError::new(
                err::ARG,
                format!(
                    "the filetype's {} bytes of data are not a whole number of etypes of {} bytes",
                    fl.size, el.size
                ),
            ));
        }
        let runs: Vec<(u64, u64)> = fl.runs.iter().map(|&(o, n)| (o as u64, n as u64)).collect();
        let lo = runs.first().map_or(0, |r| r.0);
        let hi = runs.iter().map(|r| r.0 + r.1).max().unwrap_or(0);
        if fl.extent <= 0 {
            return Err(MpiError::new(
                ferr::IO,
                format!(
                    "the filetype's extent {} makes consecutive tiles go backwards (its data spans \
                     bytes {lo} to {hi})",
                    fl.extent
                ),
            ));
        }
        // Tiles that overlap (data spanning more than the extent) are refused only by an
        // access that reaches past the first tile: a filetype used for one tile, as HDF5
        // builds for its collective chunk writes, is a valid view (as in ROMIO).
        let overlapping = writable && hi > fl.extent as u64 + lo;
        let extent = fl.extent as u64;
        let contiguous = runs.len() == 1 && runs[0] == (0, extent);
        Ok(View {
            disp,
            esize: el.size as u64,
            size: fl.size as u64,
            etype: (etype, el),
            filetype: (filetype, fl),
            runs,
            extent,
            contiguous,
            overlapping,
            datarep: "native".to_string(),
        })
    }

    fn overflow() -> MpiError {
        MpiError::new(err::ARG, "the access lies beyond the largest file offset")
    }

    /// The file extents (byte offset, length) holding `len` bytes of the view's data from data
    /// byte `at`, in order, adjacent ones merged.
    fn extents(&self, at: u64, len: u64) -> Result<Vec<(u64, u64)>, MpiError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        if self.size == 0 {
            return Err(MpiError::new(
                err::IO,
                format!(
                    "the view's filetype holds no data: an access of {len} bytes has nowhere to go"
                ),
            ));
        }
        if self.contiguous {
            let from = self.disp.checked_add(at).ok_or_else(Self::overflow)?;
            from.checked_add(len).ok_or_else(Self::overflow)?;
            return Ok(vec![(from, len)]);
        }
        if self.overlapping && at.saturating_add(len) > self.size {
            return Err(MpiError::new(
                ferr::IO,
                format!(
                    "the filetype's extent {} makes consecutive tiles overlap, and an access \
                     of {len} bytes from data byte {at} reaches past the first of its {}-byte \
                     tiles",
                    self.extent, self.size
                ),
            ));
        }
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut tile = at / self.size;
        let mut within = at % self.size;
        let mut left = len;
        while left > 0 {
            let base = tile
                .checked_mul(self.extent)
                .and_then(|b| b.checked_add(self.disp))
                .ok_or_else(Self::overflow)?;
            for &(off, n) in &self.runs {
                if within >= n {
                    within -= n;
                    continue;
                }
                let take = (n - within).min(left);
                let from = base
                    .checked_add(off + within)
                    .filter(|f| f.checked_add(take).is_some())
                    .ok_or_else(Self::overflow)?;
                match out.last_mut() {
                    Some(last) if last.0 + last.1 == from => last.1 += take,
                    _ => {
                        if out.len() >= MAX_PIECES {
                            return Err(MpiError::new(
                                err::ARG,
                                format!(
                                    "the access covers more than {MAX_PIECES} separate extents of \
                                     the file"
                                ),
                            ));
                        }
                        out.push((from, take));
                    }
                }
                within = 0;
                left -= take;
                if left == 0 {
                    break;
                }
            }
            tile += 1;
        }
        Ok(out)
    }

    /// The file byte of data byte `at` of the view.
    fn byte_of(&self, at: u64) -> Result<u64, MpiError> {
        Ok(self.extents(at, 1)?[0].0)
    }

    /// Bytes of the view's data lying below file byte `end`.
    fn data_below(&self, end: u64) -> u64 {
        let Some(rel) = end.checked_sub(self.disp) else {
            return 0;
        };
        if self.contiguous {
            return rel;
        }
        if self.size == 0 {
            return 0;
        }
        let hi = self.runs.iter().map(|r| r.0 + r.1).max().unwrap_or(0);
        // Tiles before `k0` lie wholly below `end`.
        let k0 = if rel >= hi {
            (rel - hi) / self.extent + 1
        } else {
            0
        };
        let mut data = k0.saturating_mul(self.size);
        let mut k = k0;
        while let Some(base) = k.checked_mul(self.extent).filter(|&b| b < rel) {
            for &(off, n) in &self.runs {
                let from = base + off;
                if from < rel {
                    data += n.min(rel - from);
                }
            }
            k += 1;
        }
        data
    }
}

/// A piece of a file access other than its request's own.
enum Piece {
    /// Started: its request, waited at completion.
    Started(Request),
    /// Waited already (an access in atomic mode): the bytes it moved, `None` if it failed.
    Done(Option<u64>),
}

/// The pieces of one file access beyond its request's own, and where a read's data goes.
pub struct Access {
    /// The other pieces and their buffers, in file order.
    rest: Mutex<Vec<(Piece, BufferClaim)>>,
    /// The buffers of the request's own piece (the last one); `None` where the request is the
    /// null request of an access done at its start (atomic mode), all of whose pieces are in
    /// `rest`.
    last: Option<BufferClaim>,
    /// A read's destination: the caller's buffer, its datatype's layout and count.
    read: Option<(usize, Arc<Layout>, usize)>,
    /// The byte-order conversion of a read through an external32 view.
    external: Option<crate::external::SameSize>,
    /// Bytes the other pieces moved.
    moved: std::sync::atomic::AtomicU64,
    /// The class of the first failed other piece (0: none).
    failed: AtomicI32,
    /// Whether [`finish`] ran (it runs once: a later call changes nothing).
    finished: std::sync::atomic::AtomicBool,
}

impl Access {
    /// Bytes the pieces other than the request's own moved (known once it completed).
    pub fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// The error class of the first failed piece other than the request's own (0: none).
    pub fn failed(&self) -> c_int {
        self.failed.load(Ordering::Relaxed)
    }
}

/// Starts a read or write of `count` elements of `datatype` at etype `offset` of `f`'s view;
/// returns the agent's request and what its completion does.
///
/// # Safety
///
/// `buf` holds `count` elements of `datatype` until the request completes.
unsafe fn start(
    f: &OpenFile,
    view: &View,
    offset: MpiOffset,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    write: bool,
) -> Result<(Request, Meta), MpiError> {
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("count {count} is negative"),
        ));
    }
    let l = crate::types::layout(datatype)?;
    let len = (count as usize)
        .checked_mul(l.size)
        .ok_or_else(|| MpiError::new(err::COUNT, format!("{count} elements overflow")))?;
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
    if len > 0 && buf.is_null() {
        return Err(MpiError::new(err::BUFFER, "the buffer is NULL"));
    }
    let at = (offset as u64)
        .checked_mul(view.esize)
        .ok_or_else(View::overflow)?;
    let mut extents = view.extents(at, len as u64)?;
    if extents.is_empty() {
        // Nothing to move: one empty operation still makes the request.
        extents.push((view.disp, 0));
    }
    // An external32 view: the data's byte order converts on the way.
    let external = if view.datarep == "external32" && len > 0 {
        Some(crate::external::SameSize::of(datatype)?)
    } else {
        None
    };
    // The pieces' buffers: a write's data packed (and converted) and cut at the extents, a
    // read's to fill; all made before the file is touched (and locked, in atomic mode).
    let bufs: Vec<IoBuffer> = if write && l.contiguous() && external.is_none() && extents.len() > 1
    {
        // Cut straight from the caller's contiguous buffer: no whole copy besides the pieces.
        // SAFETY: the caller's buffer of `count` contiguous elements.
        cut(unsafe { input(buf, len) }?, &extents)
    } else if write {
        let mut data = if l.contiguous() {
            // SAFETY: the caller's buffer of `count` contiguous elements.
            unsafe { input(buf, len) }?.to_vec()
        } else {
            let mut v = Vec::new();
            // SAFETY: the caller's buffer of `count` elements of this layout, not NULL.
            unsafe { l.pack(buf as *const u8, count as usize, &mut v) };
            v
        };
        if let Some(c) = &external {
            c.convert(&mut data);
        }
        if extents.len() == 1 {
            vec![IoBuffer::from(data)]
        } else {
            cut(&data, &extents)
        }
    } else {
        extents
            .iter()
            .map(|&(_, n)| IoBuffer::from(vec![0u8; n as usize]))
            .collect()
    };
    // Atomic mode: the file's bytes from the first to the last the access touches stay locked
    // while its pieces move (non-atomic mode takes no lock).
    let lock = if len > 0 && f.atomic.load(Ordering::Relaxed) {
        Some(lock_range(f, &extents, write)?)
    } else {
        None
    };
    let mut rest: Vec<(Request, BufferClaim)> = extents
        .iter()
        .zip(bufs)
        .map(|(&(at, _), b)| {
            if write {
                f.file.iwrite_at(b, at)
            } else {
                f.file.iread_at(b, at)
            }
            .into_parts()
        })
        .collect();
    let (req, rest, last) = if let Some(lock) = lock {
        // Done here, under the lock: every piece is waited for, then the range unlocked; the
        // request is the null (complete) request, so that its completion only delivers a
        // read's data and the status. The lock never outlives this call.
        let done: Vec<(Piece, BufferClaim)> = rest
            .into_iter()
            .map(|(mut r, claim)| (Piece::Done(r.wait().ok().map(|st| st.count())), claim))
            .collect();
        lock.release()
            .map_err(|e| lock_error(f, &extents, write, "unlocking", &e))?;
        (Request::null(), done, None)
    } else {
        let (req, last) = rest
            .pop()
            .ok_or_else(|| MpiError::new(err::INTERN, "no file piece"))?;
        let started = rest
            .into_iter()
            .map(|(r, claim)| (Piece::Started(r), claim))
            .collect();
        (req, started, Some(last))
    };
    let meta = Meta::File {
        comm: f.key,
        access: Arc::new(Access {
            rest: Mutex::new(rest),
            last,
            read: (!write && len > 0).then_some((buf as usize, l, count as usize)),
            external,
            moved: std::sync::atomic::AtomicU64::new(0),
            failed: AtomicI32::new(0),
            finished: std::sync::atomic::AtomicBool::new(false),
        }),
    };
    Ok((req, meta))
}

/// `data` cut into one buffer per extent (its length), in order.
fn cut(data: &[u8], extents: &[(u64, u64)]) -> Vec<IoBuffer> {
    let mut from = 0usize;
    extents
        .iter()
        .map(|&(_, n)| {
            let piece = data[from..from + n as usize].to_vec();
            from += n as usize;
            IoBuffer::from(piece)
        })
        .collect()
}

/// The error of a failed lock call of an access in atomic mode over `extents` of `f`.
fn lock_error(
    f: &OpenFile,
    extents: &[(u64, u64)],
    write: bool,
    what: &str,
    e: &std::io::Error,
) -> MpiError {
    let from = extents.first().map_or(0, |x| x.0);
    let end = extents.last().map_or(0, |x| x.0 + x.1);
    MpiError::new(
        ferr::IO,
        format!(
            "atomic mode: {what} bytes {from} to {end} of {} for {} failed: {e}",
            f.path.display(),
            if write { "writing" } else { "reading" }
        ),
    )
}

/// Locks the bytes of `f` from the first to the last of `extents` (not empty, in file order):
/// exclusively for a write, shared for a read; waits while another access holds a conflicting
/// lock.
fn lock_range<'a>(
    f: &'a OpenFile,
    extents: &[(u64, u64)],
    write: bool,
) -> Result<RangeLock<'a>, MpiError> {
    let kind = f
        .locks
        .get()
        .copied()
        .ok_or_else(|| MpiError::new(err::INTERN, "atomic mode without file locks"))?;
    let from = extents.first().map_or(0, |x| x.0);
    let end = extents.last().map_or(0, |x| x.0 + x.1);
    RangeLock::take(f.file.std(), kind, write, from, end - from)
        .map_err(|e| lock_error(f, extents, write, "locking", &e))
}

/// The current view of `f`.
fn view_of(f: &OpenFile) -> Arc<View> {
    Arc::clone(&f.view.lock().unwrap_or_else(|e| e.into_inner()))
}

/// A blocking read or write (at etype `offset`, or at the individual file pointer, which moves
/// past the data moved); writes the status.
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
    let view = view_of(&f);
    let mut pos = f.pos.lock().unwrap_or_else(|e| e.into_inner());
    let at = offset.unwrap_or(*pos as MpiOffset);
    // SAFETY: passed on.
    let (req, meta) = unsafe { start(&f, &view, at, buf, count, datatype, write) }?;
    let mut e = ReqEntry::new(req, meta);
    let s = crate::request::wait_entry(&mut e);
    if offset.is_none() {
        *pos += s.count().max(0) as u64 / view.esize;
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

/// A nonblocking read or write at etype `offset`, or at the individual file pointer (which
/// moves past the data asked for at once); registers the request.
///
/// # Safety
///
/// As for [`start`]; `request` is the caller's writable handle.
unsafe fn nonblocking(
    fh: *mut c_void,
    offset: Option<MpiOffset>,
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
    let entry = unsafe { access_entry(&f, offset, buf, count, datatype, write) }?;
    let h = rt.add_request(entry);
    // SAFETY: the caller's handle, checked not NULL.
    unsafe { *request = h };
    Ok(())
}

/// Starts a read or write at etype `offset`, or at the individual file pointer (which moves
/// past the data asked for at once); gives the request's entry.
///
/// # Safety
///
/// As for [`start`].
unsafe fn access_entry(
    f: &OpenFile,
    offset: Option<MpiOffset>,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    write: bool,
) -> Result<ReqEntry, MpiError> {
    let view = view_of(f);
    let asked = (count.max(0) as u64).saturating_mul(crate::types::type_size(datatype)? as u64);
    let mut pos = f.pos.lock().unwrap_or_else(|e| e.into_inner());
    let at = offset.unwrap_or(*pos as MpiOffset);
    // SAFETY: passed on.
    let (req, meta) = unsafe { start(f, &view, at, buf, count, datatype, write) }?;
    if offset.is_none() {
        *pos += asked / view.esize;
    }
    Ok(ReqEntry::new(req, meta))
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
        unsafe { nonblocking(fh, Some(offset), buf, count, datatype, request, false) }
    }
}

mpi_fn! {
    /// `MPI_File_iwrite_at`: a request of the agent's io_uring class.
    MPI_File_iwrite_at / PMPI_File_iwrite_at(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, Some(offset), buf as *mut c_void, count, datatype, request, true) }
    }
}

mpi_fn! {
    /// `MPI_File_iread`: at the individual file pointer, which moves past the data asked for when the request starts.
    MPI_File_iread / PMPI_File_iread(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, None, buf, count, datatype, request, false) }
    }
}

mpi_fn! {
    /// `MPI_File_iwrite`: at the individual file pointer, which moves past the data asked for when the request starts.
    MPI_File_iwrite / PMPI_File_iwrite(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, None, buf as *mut c_void, count, datatype, request, true) }
    }
}

mpi_fn! {
    /// `MPI_File_iread_all` (collective; each rank's part as an independent request).
    MPI_File_iread_all / PMPI_File_iread_all(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, None, buf, count, datatype, request, false) }
    }
}

mpi_fn! {
    /// `MPI_File_iwrite_all` (collective; each rank's part as an independent request).
    MPI_File_iwrite_all / PMPI_File_iwrite_all(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, None, buf as *mut c_void, count, datatype, request, true) }
    }
}

mpi_fn! {
    /// `MPI_File_iread_at_all` (collective; each rank's part as an independent request).
    MPI_File_iread_at_all / PMPI_File_iread_at_all(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, Some(offset), buf, count, datatype, request, false) }
    }
}

mpi_fn! {
    /// `MPI_File_iwrite_at_all` (collective; each rank's part as an independent request).
    MPI_File_iwrite_at_all / PMPI_File_iwrite_at_all(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking(fh, Some(offset), buf as *mut c_void, count, datatype, request, true) }
    }
}

/// Etypes of `f`'s view that `count` elements of `datatype` take (what an access through the
/// shared file pointer moves it by), after checking the count and the access mode.
fn shared_amount(
    f: &OpenFile,
    count: c_int,
    datatype: Handle,
    write: bool,
) -> Result<u64, MpiError> {
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("count {count} is negative"),
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
    let bytes = (count as u64)
        .checked_mul(crate::types::type_size(datatype)? as u64)
        .ok_or_else(|| MpiError::new(err::COUNT, format!("{count} elements overflow")))?;
    Ok(bytes / view_of(f).esize)
}

/// An etype offset of the shared file pointer as an `MPI_Offset`.
fn offset_of(at: u64) -> Result<MpiOffset, MpiError> {
    MpiOffset::try_from(at).map_err(|_| View::overflow())
}

/// Where an access of `count` elements of `datatype` through the shared file pointer goes:
/// `ordered`, this rank's part of a collective access in rank order, else an atomic share of
/// the pointer of its own.
fn shared_at(
    f: &OpenFile,
    count: c_int,
    datatype: Handle,
    write: bool,
    ordered: bool,
) -> Result<MpiOffset, MpiError> {
    let amount = shared_amount(f, count, datatype, write)?;
    let at = if ordered {
        f.shared.ordered(amount)?
    } else {
        f.shared.fetch_add(amount)?
    };
    offset_of(at)
}

/// A blocking access through the shared file pointer (`ordered`: collective, in rank order).
///
/// # Safety
///
/// As for [`blocking`].
unsafe fn blocking_shared(
    fh: *mut c_void,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    status: *mut MpiStatus,
    write: bool,
    ordered: bool,
) -> Result<(), MpiError> {
    let f = file(fh)?;
    let at = shared_at(&f, count, datatype, write, ordered)?;
    // SAFETY: passed on.
    unsafe { blocking(fh, Some(at), buf, count, datatype, status, write) }
}

/// A nonblocking access through the shared file pointer (its share taken at the call).
///
/// # Safety
///
/// As for [`nonblocking`].
unsafe fn nonblocking_shared(
    fh: *mut c_void,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    request: *mut Handle,
    write: bool,
) -> Result<(), MpiError> {
    let f = file(fh)?;
    if request.is_null() {
        return Err(MpiError::new(err::ARG, "request is NULL"));
    }
    let at = shared_at(&f, count, datatype, write, false)?;
    // SAFETY: passed on.
    unsafe { nonblocking(fh, Some(at), buf, count, datatype, request, write) }
}

mpi_fn! {
    /// `MPI_File_read_shared`: at the shared file pointer, which moves past the data asked for
    /// (an atomic fetch-and-add at rank 0 of the file's communicator).
    MPI_File_read_shared / PMPI_File_read_shared(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking_shared(fh, buf, count, datatype, status, false, false) }
    }
}

mpi_fn! {
    /// `MPI_File_write_shared`: at the shared file pointer, which moves past the data (an
    /// atomic fetch-and-add at rank 0 of the file's communicator).
    MPI_File_write_shared / PMPI_File_write_shared(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking_shared(fh, buf as *mut c_void, count, datatype, status, true, false) }
    }
}

mpi_fn! {
    /// `MPI_File_iread_shared`: the shared file pointer moves at the call; the read is a
    /// request of the agent's io_uring class.
    MPI_File_iread_shared / PMPI_File_iread_shared(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking_shared(fh, buf, count, datatype, request, false) }
    }
}

mpi_fn! {
    /// `MPI_File_iwrite_shared`: the shared file pointer moves at the call; the write is a
    /// request of the agent's io_uring class.
    MPI_File_iwrite_shared / PMPI_File_iwrite_shared(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle, request: *mut Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer and handle.
        unsafe { nonblocking_shared(fh, buf as *mut c_void, count, datatype, request, true) }
    }
}

mpi_fn! {
    /// `MPI_File_read_ordered` (collective): the ranks' parts follow each other in rank order
    /// from the shared file pointer, which moves past all of them.
    MPI_File_read_ordered / PMPI_File_read_ordered(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking_shared(fh, buf, count, datatype, status, false, true) }
    }
}

mpi_fn! {
    /// `MPI_File_write_ordered` (collective): the ranks' parts follow each other in rank order
    /// from the shared file pointer, which moves past all of them.
    MPI_File_write_ordered / PMPI_File_write_ordered(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle, status: *mut MpiStatus) on key_of(fh) => {
        // SAFETY: the caller's buffer and status.
        unsafe { blocking_shared(fh, buf as *mut c_void, count, datatype, status, true, true) }
    }
}

mpi_fn! {
    /// `MPI_File_seek_shared` (collective): once every rank called it, rank 0 moves the shared
    /// file pointer (etypes of the view; `MPI_SEEK_END` counts from the first etype past the
    /// end of the file). A position before the start is `MPI_ERR_ARG` on every rank.
    MPI_File_seek_shared / PMPI_File_seek_shared(fh: *mut c_void, offset: MpiOffset, whence: c_int) on key_of(fh) => {
        let f = file(fh)?;
        let from = match whence {
            SEEK_SET => "the start",
            SEEK_CUR => "the shared file pointer",
            SEEK_END => "the end of the file",
            _ => return Err(MpiError::new(err::ARG, format!("whence {whence} is not MPI_SEEK_SET, MPI_SEEK_CUR or MPI_SEEK_END"))),
        };
        let view = view_of(&f);
        let to = |cur: u64| -> Result<Option<u64>, MpiError> {
            let base = match whence {
                SEEK_SET => 0,
                SEEK_CUR => offset_of(cur)?,
                _ => {
                    let len = f.file.std().metadata().map_err(|e| MpiError::new(io_class(&e), e.to_string()))?.len();
                    offset_of(view.data_below(len).div_ceil(view.esize))?
                }
            };
            Ok(base.checked_add(offset).filter(|&t| t >= 0).map(|t| t as u64))
        };
        f.shared.set_all(to, &format!("seeking the shared file pointer by {offset} etypes from {from} leaves the file"))?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_position_shared` (in etypes of the view; asks rank 0 of the file's
    /// communicator).
    MPI_File_get_position_shared / PMPI_File_get_position_shared(fh: *mut c_void, offset: *mut MpiOffset) on key_of(fh) => {
        let f = file(fh)?;
        if offset.is_null() {
            return Err(MpiError::new(err::ARG, "offset is NULL"));
        }
        let at = offset_of(f.shared.fetch_add(0)?)?;
        // SAFETY: the caller's MPI_Offset.
        unsafe { put(offset, at, "offset") }
    }
}

/// Begins a split collective of `kind` (at etype `offset` for the `_at_all` kinds): starts
/// its access, which the matching end completes. One split collective at a time per file
/// handle (another is `MPI_ERR_IO`, as MPICH's ROMIO gives).
///
/// # Safety
///
/// As for [`start`].
unsafe fn split_begin(
    fh: *mut c_void,
    kind: SplitKind,
    offset: Option<MpiOffset>,
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
) -> Result<(), MpiError> {
    let f = file(fh)?;
    let mut slot = f.split.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = &*slot {
        return Err(MpiError::new(
            err::IO,
            format!(
                "{} is outstanding on this file; a split collective must end before another begins",
                s.kind.begin()
            ),
        ));
    }
    let write = kind.write();
    let at = match kind {
        SplitKind::ReadOrdered | SplitKind::WriteOrdered => {
            Some(shared_at(&f, count, datatype, write, true)?)
        }
        _ => offset,
    };
    // SAFETY: passed on.
    let entry = unsafe { access_entry(&f, at, buf, count, datatype, write) }?;
    *slot = Some(Split { kind, entry });
    Ok(())
}

/// Ends the split collective of `kind`: waits for its access and writes the status. No split
/// collective outstanding, or one of another kind, is `MPI_ERR_IO`.
///
/// # Safety
///
/// `status` is the caller's status or `MPI_STATUS_IGNORE`.
unsafe fn split_end(
    fh: *mut c_void,
    kind: SplitKind,
    status: *mut MpiStatus,
) -> Result<(), MpiError> {
    let f = file(fh)?;
    let end = kind.begin().replace("_begin", "_end");
    let taken = {
        let mut slot = f.split.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            None => {
                return Err(MpiError::new(
                    err::IO,
                    format!(
                        "{end} without {}: no split collective is outstanding on this file",
                        kind.begin()
                    ),
                ));
            }
            Some(s) if s.kind != kind => {
                return Err(MpiError::new(
                    err::IO,
                    format!("{end} does not end the outstanding {}", s.kind.begin()),
                ));
            }
            Some(_) => slot.take(),
        }
    };
    let Some(mut s) = taken else {
        return Err(MpiError::new(err::INTERN, "the split collective vanished"));
    };
    let st = crate::request::wait_entry(&mut s.entry);
    // SAFETY: the caller's status.
    unsafe { write_status(status, st) };
    if st.error != abi::SUCCESS {
        return Err(MpiError::new(
            st.error,
            format!(
                "{} on {} failed",
                if kind.write() { "writing" } else { "reading" },
                f.path.display()
            ),
        ));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_File_read_all_begin`: starts the read at the individual file pointer (which moves
    /// past the data asked for).
    MPI_File_read_all_begin / PMPI_File_read_all_begin(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer, the library's until the end call.
        unsafe { split_begin(fh, SplitKind::ReadAll, None, buf, count, datatype) }
    }
}

mpi_fn! {
    /// `MPI_File_read_all_end`: completes the read begun.
    MPI_File_read_all_end / PMPI_File_read_all_end(fh: *mut c_void, buf: *mut c_void, status: *mut MpiStatus) on key_of(fh) => {
        let _ = buf;
        // SAFETY: the caller's status.
        unsafe { split_end(fh, SplitKind::ReadAll, status) }
    }
}

mpi_fn! {
    /// `MPI_File_write_all_begin`: starts the write at the individual file pointer (which
    /// moves past the data).
    MPI_File_write_all_begin / PMPI_File_write_all_begin(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer.
        unsafe { split_begin(fh, SplitKind::WriteAll, None, buf as *mut c_void, count, datatype) }
    }
}

mpi_fn! {
    /// `MPI_File_write_all_end`: completes the write begun.
    MPI_File_write_all_end / PMPI_File_write_all_end(fh: *mut c_void, buf: *const c_void, status: *mut MpiStatus) on key_of(fh) => {
        let _ = buf;
        // SAFETY: the caller's status.
        unsafe { split_end(fh, SplitKind::WriteAll, status) }
    }
}

mpi_fn! {
    /// `MPI_File_read_at_all_begin`: starts the read at etype `offset`.
    MPI_File_read_at_all_begin / PMPI_File_read_at_all_begin(fh: *mut c_void, offset: MpiOffset, buf: *mut c_void, count: c_int, datatype: Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer, the library's until the end call.
        unsafe { split_begin(fh, SplitKind::ReadAtAll, Some(offset), buf, count, datatype) }
    }
}

mpi_fn! {
    /// `MPI_File_read_at_all_end`: completes the read begun.
    MPI_File_read_at_all_end / PMPI_File_read_at_all_end(fh: *mut c_void, buf: *mut c_void, status: *mut MpiStatus) on key_of(fh) => {
        let _ = buf;
        // SAFETY: the caller's status.
        unsafe { split_end(fh, SplitKind::ReadAtAll, status) }
    }
}

mpi_fn! {
    /// `MPI_File_write_at_all_begin`: starts the write at etype `offset`.
    MPI_File_write_at_all_begin / PMPI_File_write_at_all_begin(fh: *mut c_void, offset: MpiOffset, buf: *const c_void, count: c_int, datatype: Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer.
        unsafe { split_begin(fh, SplitKind::WriteAtAll, Some(offset), buf as *mut c_void, count, datatype) }
    }
}

mpi_fn! {
    /// `MPI_File_write_at_all_end`: completes the write begun.
    MPI_File_write_at_all_end / PMPI_File_write_at_all_end(fh: *mut c_void, buf: *const c_void, status: *mut MpiStatus) on key_of(fh) => {
        let _ = buf;
        // SAFETY: the caller's status.
        unsafe { split_end(fh, SplitKind::WriteAtAll, status) }
    }
}

mpi_fn! {
    /// `MPI_File_read_ordered_begin` (collective): takes this rank's part in rank order from
    /// the shared file pointer and starts the read.
    MPI_File_read_ordered_begin / PMPI_File_read_ordered_begin(fh: *mut c_void, buf: *mut c_void, count: c_int, datatype: Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer, the library's until the end call.
        unsafe { split_begin(fh, SplitKind::ReadOrdered, None, buf, count, datatype) }
    }
}

mpi_fn! {
    /// `MPI_File_read_ordered_end`: completes the read begun.
    MPI_File_read_ordered_end / PMPI_File_read_ordered_end(fh: *mut c_void, buf: *mut c_void, status: *mut MpiStatus) on key_of(fh) => {
        let _ = buf;
        // SAFETY: the caller's status.
        unsafe { split_end(fh, SplitKind::ReadOrdered, status) }
    }
}

mpi_fn! {
    /// `MPI_File_write_ordered_begin` (collective): takes this rank's part in rank order from
    /// the shared file pointer and starts the write.
    MPI_File_write_ordered_begin / PMPI_File_write_ordered_begin(fh: *mut c_void, buf: *const c_void, count: c_int, datatype: Handle) on key_of(fh) => {
        // SAFETY: the caller's buffer.
        unsafe { split_begin(fh, SplitKind::WriteOrdered, None, buf as *mut c_void, count, datatype) }
    }
}

mpi_fn! {
    /// `MPI_File_write_ordered_end`: completes the write begun.
    MPI_File_write_ordered_end / PMPI_File_write_ordered_end(fh: *mut c_void, buf: *const c_void, status: *mut MpiStatus) on key_of(fh) => {
        let _ = buf;
        // SAFETY: the caller's status.
        unsafe { split_end(fh, SplitKind::WriteOrdered, status) }
    }
}

mpi_fn! {
    /// `MPI_File_seek` (the individual file pointer, in etypes of the view; `MPI_SEEK_END`
    /// counts from the first etype of the view past the end of the file).
    MPI_File_seek / PMPI_File_seek(fh: *mut c_void, offset: MpiOffset, whence: c_int) on key_of(fh) => {
        let f = file(fh)?;
        let view = view_of(&f);
        let mut pos = f.pos.lock().unwrap_or_else(|e| e.into_inner());
        let base = match whence {
            SEEK_SET => 0,
            SEEK_CUR => *pos as i64,
            SEEK_END => {
                let len = f.file.std().metadata().map_err(|e| MpiError::new(io_class(&e), e.to_string()))?.len();
                view.data_below(len).div_ceil(view.esize) as i64
            }
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
    /// `MPI_File_get_position` (in etypes of the view).
    MPI_File_get_position / PMPI_File_get_position(fh: *mut c_void, offset: *mut MpiOffset) on key_of(fh) => {
        let f = file(fh)?;
        let pos = *f.pos.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the caller's MPI_Offset.
        unsafe { put(offset, pos as MpiOffset, "offset") }
    }
}

mpi_fn! {
    /// `MPI_File_get_byte_offset`: the file byte of etype `offset` of the view.
    MPI_File_get_byte_offset / PMPI_File_get_byte_offset(fh: *mut c_void, offset: MpiOffset, disp: *mut MpiOffset) on key_of(fh) => {
        let f = file(fh)?;
        if offset < 0 {
            return Err(MpiError::new(err::ARG, format!("offset {offset} is negative")));
        }
        let view = view_of(&f);
        let at = (offset as u64).checked_mul(view.esize).ok_or_else(View::overflow)?;
        let byte = view.byte_of(at)?;
        let byte = MpiOffset::try_from(byte).map_err(|_| View::overflow())?;
        // SAFETY: the caller's MPI_Offset.
        unsafe { put(disp, byte, "disp") }
    }
}

mpi_fn! {
    /// `MPI_File_set_view` (collective; each rank's view is its own): checks the types and
    /// the data representation (`"native"`, or a registered one without conversion), takes
    /// `MPI_DISPLACEMENT_CURRENT` on a sequential file as the shared file pointer's byte,
    /// then sets the view and moves the individual
    /// file pointer to 0, and, once every rank set its view, the shared file pointer.
    MPI_File_set_view / PMPI_File_set_view(fh: *mut c_void, disp: MpiOffset, etype: Handle, filetype: Handle, datarep: *const c_char, info: Handle) on key_of(fh) => {
        let _ = info;
        let f = file(fh)?;
        if datarep.is_null() {
            return Err(MpiError::new(err::ARG, "datarep is NULL"));
        }
        // SAFETY: the caller's NUL-terminated string, checked not NULL.
        let rep = unsafe { CStr::from_ptr(datarep) }.to_string_lossy();
        crate::datarep::check_view(&rep)?;
        let disp = if disp == DISPLACEMENT_CURRENT {
            if f.amode & mode::SEQUENTIAL == 0 {
                return Err(MpiError::new(err::ARG, "MPI_DISPLACEMENT_CURRENT needs a file opened with MPI_MODE_SEQUENTIAL"));
            }
            // The shared file pointer's place (collective: every rank reads the same value),
            // as a byte of the file under the current view.
            let at = f.shared.set_all(|v| Ok(Some(v)), "reading the shared file pointer")?;
            let view = view_of(&f);
            let byte = at.checked_mul(view.esize).ok_or_else(View::overflow)?;
            let byte = view.byte_of(byte)?;
            MpiOffset::try_from(byte).map_err(|_| View::overflow())?
        } else {
            disp
        };
        let view = if disp < 0 {
            Err(MpiError::new(err::ARG, format!("displacement {disp} is negative")))
        } else {
            View::new(disp as u64, etype, filetype, f.amode & (mode::WRONLY | mode::RDWR) != 0)
        };
        // An external32 view converts byte order only: its types keep their native sizes.
        let view = view.and_then(|v| {
            if rep == "external32" {
                crate::external::SameSize::of(etype)?;
                crate::external::SameSize::of(filetype)?;
            }
            Ok(v)
        });
        // Collective: a rank whose view is refused makes every rank's call fail alike.
        let mut worst = view.as_ref().err().map_or(0u32, |e| e.class as u32).to_ne_bytes();
        f.comm.allreduce(&mut worst, viaduct_agent::xfer::Datatype::U32, viaduct_agent::xfer::ReduceOp::Max)?;
        let mut view = view?;
        let worst = u32::from_ne_bytes(worst) as c_int;
        if worst != 0 {
            return Err(MpiError::new(worst, "another rank's view was refused"));
        }
        view.datarep = rep.into_owned();
        {
            let mut pos = f.pos.lock().unwrap_or_else(|e| e.into_inner());
            *f.view.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(view);
            *pos = 0;
        }
        // The shared file pointer goes back to 0 once every rank set its view.
        f.shared.set_all(|_| Ok(Some(0)), "resetting the shared file pointer")?;
        Ok(())
    }
}

/// The handle to give back for a type of a view: a predefined one as it is, a derived one as a
/// new handle the caller frees.
fn type_out(t: &(Handle, Arc<Layout>)) -> Handle {
    if crate::types::is_derived(t.0) {
        crate::types::register_copy(t.0, &t.1)
    } else {
        t.0
    }
}

mpi_fn! {
    /// `MPI_File_get_view`: derived etypes and filetypes come back as new handles.
    MPI_File_get_view / PMPI_File_get_view(fh: *mut c_void, disp: *mut MpiOffset, etype: *mut Handle, filetype: *mut Handle, datarep: *mut c_char) on key_of(fh) => {
        let f = file(fh)?;
        if disp.is_null() || etype.is_null() || filetype.is_null() || datarep.is_null() {
            return Err(MpiError::new(err::ARG, "an output argument is NULL"));
        }
        let view = view_of(&f);
        let e = type_out(&view.etype);
        let t = type_out(&view.filetype);
        let rep = view.datarep.as_bytes();
        // SAFETY: the caller's outputs, checked not NULL; `datarep` holds
        // MPI_MAX_DATAREP_STRING bytes, more than any registered name (shorter than that) and
        // its NUL.
        unsafe {
            *disp = view.disp as MpiOffset;
            *etype = e;
            *filetype = t;
            std::ptr::copy_nonoverlapping(rep.as_ptr().cast::<c_char>(), datarep, rep.len());
            *datarep.add(rep.len()) = 0;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_type_extent` (the native representation: the datatype's extent).
    MPI_File_get_type_extent / PMPI_File_get_type_extent(fh: *mut c_void, datatype: Handle, extent: *mut MpiAint) on key_of(fh) => {
        file(fh)?;
        let l = crate::types::layout(datatype)?;
        // SAFETY: the caller's MPI_Aint.
        unsafe { put(extent, l.extent as MpiAint, "extent") }
    }
}

mpi_fn! {
    /// `MPI_File_get_group`: a new group of the file's communicator's members.
    MPI_File_get_group / PMPI_File_get_group(fh: *mut c_void, group: *mut Handle) on key_of(fh) => {
        let f = file(fh)?;
        if group.is_null() {
            return Err(MpiError::new(err::ARG, "group is NULL"));
        }
        let members: Vec<u32> = (0..f.comm.size()).filter_map(|r| f.comm.world_rank(r)).collect();
        let h = rt()?.add_group(members);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(group, h, "group") }
    }
}

mpi_fn! {
    /// `MPI_File_get_info`: a new, empty info object (no hint is used).
    MPI_File_get_info / PMPI_File_get_info(fh: *mut c_void, info_used: *mut Handle) on key_of(fh) => {
        file(fh)?;
        if info_used.is_null() {
            return Err(MpiError::new(err::ARG, "info_used is NULL"));
        }
        let h = crate::misc::new_info();
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(info_used, h, "info_used") }
    }
}

mpi_fn! {
    /// `MPI_File_set_info` (collective): hints are accepted and not used.
    MPI_File_set_info / PMPI_File_set_info(fh: *mut c_void, info: Handle) on key_of(fh) => {
        let _ = info;
        file(fh)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_preallocate` (collective): after a barrier, rank 0 extends the file to `size`
    /// bytes if it is shorter (the new bytes read as zeros).
    MPI_File_preallocate / PMPI_File_preallocate(fh: *mut c_void, size: MpiOffset) on key_of(fh) => {
        let f = file(fh)?;
        if size < 0 {
            return Err(MpiError::new(err::ARG, format!("size {size} is negative")));
        }
        if f.amode & (mode::WRONLY | mode::RDWR) == 0 {
            return Err(MpiError::new(ferr::ACCESS, format!("{} is not open for writing", f.path.display())));
        }
        f.comm.barrier()?;
        let mine = if f.comm.rank() == 0 {
            let grow = |file: &std::fs::File| -> std::io::Result<()> {
                if file.metadata()?.len() < size as u64 {
                    file.set_len(size as u64)?;
                }
                Ok(())
            };
            grow(f.file.std()).map_or_else(|e| io_class(&e), |()| abi::SUCCESS)
        } else {
            abi::SUCCESS
        };
        let agreed = agree(&f.comm, mine)?;
        if agreed != abi::SUCCESS {
            return Err(MpiError::new(agreed, format!("preallocating {} failed", f.path.display())));
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_set_atomicity` (collective): in atomic mode every access holds a POSIX
    /// byte-range lock over the bytes it touches while its pieces move ([`crate::filelock`]).
    /// Turning it on asks each rank's file system whether it locks byte ranges; where one does
    /// not, every rank gets `MPI_ERR_UNSUPPORTED_OPERATION` and the mode stays as it was. A
    /// flag that differs between the ranks is `MPI_ERR_ARG` on every rank.
    MPI_File_set_atomicity / PMPI_File_set_atomicity(fh: *mut c_void, flag: c_int) on key_of(fh) => {
        let f = file(fh)?;
        let on = flag != 0;
        let mine = if on && f.locks.get().is_none() {
            match crate::filelock::probe(f.file.std()) {
                Ok(kind) => {
                    let _ = f.locks.set(kind);
                    Ok(())
                }
                Err(e) => {
                    let class = if crate::filelock::refused(&e) { err::UNSUPPORTED_OPERATION } else { ferr::IO };
                    Err(MpiError::new(class, format!("atomic mode needs byte-range locks of {}, which its file system refuses: {e}", f.path.display())))
                }
            }
        } else {
            Ok(())
        };
        // Every rank learns every flag and outcome.
        let code = mine.as_ref().map_or_else(|e| e.class, |()| abi::SUCCESS);
        let mut send = [0u8; 8];
        send[..4].copy_from_slice(&c_int::from(on).to_ne_bytes());
        send[4..].copy_from_slice(&code.to_ne_bytes());
        let mut all = vec![0u8; 8 * f.comm.size() as usize];
        f.comm.allgather(&send, &mut all)?;
        let int = |b: &[u8]| c_int::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        let each: Vec<(c_int, c_int)> = all.chunks_exact(8).map(|c| (int(&c[..4]), int(&c[4..]))).collect();
        mine?;
        if let Some(r) = each.iter().position(|&(o, _)| o != c_int::from(on)) {
            return Err(MpiError::new(err::ARG, format!("MPI_File_set_atomicity: flag {flag} here, but rank {r} gives {} (it must be the same on every rank)", each[r].0)));
        }
        if let Some(r) = each.iter().position(|&(_, c)| c != abi::SUCCESS) {
            return Err(MpiError::new(each[r].1, format!("atomic mode: rank {r} cannot lock byte ranges of {}; the mode stays as it was", f.path.display())));
        }
        f.atomic.store(on, Ordering::Relaxed);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_File_get_atomicity`.
    MPI_File_get_atomicity / PMPI_File_get_atomicity(fh: *mut c_void, flag: *mut c_int) on key_of(fh) => {
        let f = file(fh)?;
        // SAFETY: the caller's int.
        unsafe { put(flag, c_int::from(f.atomic.load(Ordering::Relaxed)), "flag") }
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
        abi::ERRORS_ARE_FATAL
        | abi::ERRORS_RETURN
        | abi::ERRORS_ABORT
        | abi::ERRORS_THROW_EXCEPTIONS => Ok(()),
        _ if crate::misc::live_file_handler(h) => Ok(()),
        _ => Err(MpiError::new(
            err::ARG,
            format!("{h:#x} is neither a predefined nor a file error handler"),
        )),
    }
}

mpi_fn! {
    /// `MPI_File_create_errhandler`: an error handler for files; the function gets the file's
    /// handle (`MPI_File *`) and the error code.
    MPI_File_create_errhandler / PMPI_File_create_errhandler(file_errhandler_fn: Option<crate::misc::FileErrFn>, errhandler: *mut Handle) on abi::COMM_WORLD => {
        let f = file_errhandler_fn.ok_or_else(|| MpiError::new(err::ARG, "the error handler function is NULL"))?;
        if errhandler.is_null() {
            return Err(MpiError::new(err::ARG, "errhandler is NULL"));
        }
        let h = crate::misc::add_file_handler(f);
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(errhandler, h, "errhandler") }
    }
}

mpi_fn! {
    /// `MPI_File_call_errhandler`: runs the file's error handler with `errorcode`
    /// (`MPI_FILE_NULL`: the default file handler).
    MPI_File_call_errhandler / PMPI_File_call_errhandler(fh: *mut c_void, errorcode: c_int) on key_of(fh) => {
        if !fh.is_null() {
            file(fh)?;
        }
        crate::error::raise_exact(
            "MPI_File_call_errhandler",
            key_of(fh),
            MpiError::new(errorcode, "raised by MPI_File_call_errhandler"),
        );
        Ok(())
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
        // The caller gets a new handle to free.
        crate::misc::hold_handler(h);
        // SAFETY: the caller's handle.
        unsafe { put(errhandler, h, "errhandler") }
    }
}

/// Completes a file access (what [`Meta::File`] does at completion): waits for its other pieces
/// and, for a read, copies or unpacks the data of all pieces into the caller's buffer. `last`
/// is the number of bytes the request's own piece moved (0 when it failed). A read that ends
/// early (at the end of the file) fills the caller's buffer only as far as the data read; the
/// rest of the buffer is left as it was. It runs once per access: a later call (a wait after
/// `MPI_Request_get_status`) changes nothing.
pub fn finish(a: &Access, last: u64) {
    if a.finished.swap(true, Ordering::Relaxed) {
        return;
    }
    let rest = std::mem::take(&mut *a.rest.lock().unwrap_or_else(|e| e.into_inner()));
    let mut data: Vec<u8> = Vec::new();
    let mut moved = 0u64;
    // Whether an earlier piece came back short: the data ends there.
    let mut ended = false;
    let mut one = |claim: &BufferClaim, got: u64, data: &mut Vec<u8>| {
        let buf = claim.take().and_then(|b| b.into_one());
        if a.read.is_none() || ended {
            return;
        }
        let Some(b) = buf else {
            ended = true;
            return;
        };
        let got = (got as usize).min(b.len());
        ended = got < b.len();
        if data.is_empty() {
            let mut v = b.into_vec();
            v.truncate(got);
            *data = v;
        } else {
            data.extend_from_slice(&b[..got]);
        }
    };
    for (piece, claim) in rest {
        let got = match piece {
            Piece::Started(mut req) => req.wait().ok().map(|st| st.count()),
            Piece::Done(got) => got,
        };
        let got = got.unwrap_or_else(|| {
            let _ = a
                .failed
                .compare_exchange(0, ferr::IO, Ordering::Relaxed, Ordering::Relaxed);
            0
        });
        moved += got;
        one(&claim, got, &mut data);
    }
    if let Some(claim) = &a.last {
        one(claim, last, &mut data);
    }
    a.moved.store(moved, Ordering::Relaxed);
    let Some((dst, l, count)) = &a.read else {
        return;
    };
    if let Some(c) = &a.external {
        c.convert(&mut data);
    }
    if l.contiguous() {
        let n = data.len().min(count * l.size);
        // SAFETY: `dst` is the caller's buffer of `count` contiguous elements given to the read;
        // MPI leaves it to the library until the request completes.
        if let Ok(to) = unsafe { output(*dst as *mut c_void, n) } {
            to.copy_from_slice(&data[..n]);
        }
    } else {
        // SAFETY: `dst` is the caller's buffer of `count` elements of this layout given to the
        // read; MPI leaves it to the library until the request completes.
        unsafe { l.unpack(&data, *dst as *mut u8, *count) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A derived type of `runs` with `extent` (lower bound 0).
    fn derived(runs: Vec<(isize, usize)>, extent: isize) -> Handle {
        let size = runs.iter().map(|r| r.1).sum();
        crate::types::register(Layout {
            runs,
            size,
            lb: 0,
            extent,
            base: Some(abi::dt::INT),
            elements: size / 4,
            align: 4,
            marked_lb: true,
            marked_ub: true,
            sig: Some(vec![(4, size / 4)]),
        })
    }

    #[test]
    fn interleaved_view_maps_to_every_size_th_block() {
        // 3 ints of every 12 (4 ranks), this rank's blocks start at byte 24.
        let t = derived(vec![(0, 12)], 48);
        let v = View::new(24, abi::dt::INT, t, true).unwrap();
        assert_eq!(v.extents(0, 24).unwrap(), vec![(24, 12), (72, 12)]);
        // From the second int: the rest of the first block, a whole one, part of the next.
        assert_eq!(v.extents(4, 28).unwrap(), vec![(28, 8), (72, 12), (120, 8)]);
        assert_eq!(v.byte_of(12).unwrap(), 72);
        assert_eq!(v.extents(8, 0).unwrap(), vec![]);
        // Below byte 80 lie one whole block and 8 bytes of the second; nothing below 24.
        assert_eq!(v.data_below(80), 20);
        assert_eq!(v.data_below(24), 0);
        assert_eq!(v.data_below(10), 0);
        assert_eq!(v.data_below(1000), 12 * 20 + 12);
    }

    #[test]
    fn adjacent_pieces_merge_and_contiguous_views_are_one_extent() {
        // Two runs that touch across tiles: the tiling is one stream.
        let t = derived(vec![(0, 4), (8, 4)], 8);
        let v = View::new(0, abi::dt::INT, t, true).unwrap();
        // The second run reaches past the extent plus the first run's start: tiles overlap.
        // The first tile alone is a valid access (HDF5's collective chunk writes use such
        // views); one reaching into the second tile is refused.
        assert_eq!(v.extents(0, 8).unwrap(), vec![(0, 4), (8, 4)]);
        assert_eq!(v.extents(4, 4).unwrap(), vec![(8, 4)]);
        let e = v.extents(4, 8).err().unwrap();
        assert_eq!(e.class, ferr::IO);
        assert!(e.message.contains("tiles overlap"), "{}", e.message);
        // Read-only files may overlap tiles.
        let t = derived(vec![(0, 4), (8, 4)], 8);
        let v = View::new(0, abi::dt::INT, t, false).unwrap();
        assert_eq!(
            v.extents(0, 16).unwrap(),
            vec![(0, 4), (8, 4), (8, 4), (16, 4)]
        );
        let t = derived(vec![(0, 4), (4, 4)], 8);
        let v = View::new(100, abi::dt::BYTE, t, true).unwrap();
        assert_eq!(v.extents(2, 20).unwrap(), vec![(102, 20)]);
        let v = View::default_view().unwrap();
        assert!(v.contiguous);
        assert_eq!(v.extents(7, 9).unwrap(), vec![(7, 9)]);
        assert_eq!(v.data_below(5), 5);
    }

    #[test]
    fn bad_types_are_refused() {
        let backwards = derived(vec![(4, 4), (0, 4)], 8);
        let e = View::new(0, abi::dt::INT, backwards, false).err().unwrap();
        assert_eq!(e.class, ferr::IO);
        let negative = derived(vec![(-4, 4)], 8);
        assert_eq!(
            View::new(0, abi::dt::INT, negative, false)
                .err()
                .unwrap()
                .class,
            ferr::IO
        );
        // Overlapping regions: refused for writing only.
        let overlap = derived(vec![(0, 12), (4, 4)], 16);
        let e = View::new(0, abi::dt::INT, overlap, true).err().unwrap();
        assert_eq!(e.class, ferr::IO);
        assert!(e.message.contains("overlapping"), "{}", e.message);
        let overlap = derived(vec![(0, 12), (4, 4)], 16);
        assert!(View::new(0, abi::dt::INT, overlap, false).is_ok());
        // Five bytes are no whole number of ints.
        let odd = derived(vec![(0, 5)], 8);
        assert_eq!(
            View::new(0, abi::dt::INT, odd, true).err().unwrap().class,
            err::ARG
        );
        let t = derived(vec![(0, 4)], 8);
        let v = View::new(u64::MAX - 8, abi::dt::INT, t, true).unwrap();
        assert_eq!(v.extents(0, 8).err().unwrap().class, err::ARG);
    }

    #[test]
    fn a_filetype_without_data_allows_only_empty_accesses() {
        let empty = derived(vec![], 24);
        let v = View::new(0, abi::dt::INT, empty, true).unwrap();
        assert_eq!(v.extents(0, 0).unwrap(), vec![]);
        let e = v.extents(0, 4).err().unwrap();
        assert_eq!(e.class, ferr::IO);
        assert!(e.message.contains("holds no data"), "{}", e.message);
        assert_eq!(v.data_below(1000), 0);
    }
}
