//! POSIX byte-range locks of files in atomic mode (`MPI_File_set_atomicity`), as ROMIO takes
//! them: every access of a file in atomic mode holds a read lock (reads) or a write lock
//! (writes) over the bytes of the file it touches, first to last, for as long as its pieces
//! are transferred.
//!
//! Open file description locks (`F_OFD_SETLKW`) are used where the kernel has them (Linux 3.15
//! and later): they belong to the open file, not to the process, so two handles of one process
//! on the same file exclude each other too. Elsewhere the per-process locks (`F_SETLKW`) are.
//! Accesses of one file handle within a process are serialized by the file's individual
//! pointer lock (see `crate::file`), so a process never holds two locks of one handle at once.

use std::ffi::c_int;
use std::os::fd::AsRawFd;

/// Which `fcntl` commands lock a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockKind {
    /// Open file description locks (`F_OFD_GETLK`, `F_OFD_SETLKW`).
    Ofd,
    /// Per-process locks (`F_GETLK`, `F_SETLKW`).
    Process,
}

impl LockKind {
    fn get(self) -> c_int {
        match self {
            LockKind::Ofd => libc::F_OFD_GETLK,
            LockKind::Process => libc::F_GETLK,
        }
    }

    fn set_wait(self) -> c_int {
        match self {
            LockKind::Ofd => libc::F_OFD_SETLKW,
            LockKind::Process => libc::F_SETLKW,
        }
    }
}

/// A `struct flock` of `kind` (`F_RDLCK`, `F_WRLCK`, `F_UNLCK`) over `len` bytes from `from`
/// (`len` 0: to the end of the file, however far it grows).
fn flock(kind: c_int, from: u64, len: u64) -> std::io::Result<libc::flock> {
    let too_far = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the byte range {from}+{len} lies beyond the largest file offset"),
        )
    };
    let start = libc::off_t::try_from(from).map_err(|_| too_far())?;
    let l_len = libc::off_t::try_from(len).map_err(|_| too_far())?;
    start.checked_add(l_len).ok_or_else(too_far)?;
    // SAFETY: `struct flock` is plain integers; all zeros is a valid value (and `l_pid` must be
    // 0 for open file description locks).
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as _;
    fl.l_whence = libc::SEEK_SET as _;
    fl.l_start = start;
    fl.l_len = l_len;
    Ok(fl)
}

/// `fcntl(fd, cmd, fl)`, again while interrupted by a signal.
fn fcntl(file: &std::fs::File, cmd: c_int, fl: &mut libc::flock) -> std::io::Result<()> {
    loop {
        // SAFETY: a valid descriptor (the file is open while borrowed) and a valid `struct
        // flock`, which the kernel reads (and for the GETLK commands writes) only in the call.
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, fl as *mut libc::flock) };
        if rc != -1 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Which locks `file` takes: asks the file system (`F_OFD_GETLK`, else `F_GETLK`, over the
/// whole file), which places nothing. An error is the file system's refusal.
pub(crate) fn probe(file: &std::fs::File) -> std::io::Result<LockKind> {
    let ask = |kind: LockKind| {
        let mut fl = flock(libc::F_WRLCK, 0, 0)?;
        fcntl(file, kind.get(), &mut fl)
    };
    match ask(LockKind::Ofd) {
        Ok(()) => Ok(LockKind::Ofd),
        // A kernel without open file description locks.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            ask(LockKind::Process).map(|()| LockKind::Process)
        }
        Err(e) => Err(e),
    }
}

/// Whether `e` says that the file system does not lock byte ranges at all.
pub(crate) fn refused(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOLCK | libc::EINVAL | libc::EOPNOTSUPP)
    )
}

/// A byte-range lock held on a file; [`RangeLock::release`] (or dropping it) unlocks.
pub(crate) struct RangeLock<'a> {
    file: &'a std::fs::File,
    kind: LockKind,
    from: u64,
    len: u64,
    held: bool,
}

impl<'a> RangeLock<'a> {
    /// Locks `len` (more than 0) bytes of `file` from `from`, for writing when `write` (an
    /// exclusive lock), else for reading (a shared one); waits while others hold a conflicting
    /// lock.
    pub(crate) fn take(
        file: &'a std::fs::File,
        kind: LockKind,
        write: bool,
        from: u64,
        len: u64,
    ) -> std::io::Result<Self> {
        let mode = if write { libc::F_WRLCK } else { libc::F_RDLCK };
        let mut fl = flock(mode, from, len)?;
        fcntl(file, kind.set_wait(), &mut fl)?;
        Ok(Self {
            file,
            kind,
            from,
            len,
            held: true,
        })
    }

    /// Unlocks the range.
    pub(crate) fn release(mut self) -> std::io::Result<()> {
        self.held = false;
        self.unlock()
    }

    fn unlock(&self) -> std::io::Result<()> {
        let mut fl = flock(libc::F_UNLCK, self.from, self.len)?;
        fcntl(self.file, self.kind.set_wait(), &mut fl)
    }
}

impl Drop for RangeLock<'_> {
    fn drop(&mut self) {
        if self.held {
            // An error path: the access failed already, and that error is the one reported.
            let _ = self.unlock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ofd_locks_of_two_opens_exclude_each_other() {
        let path = std::env::temp_dir().join(format!("viaduct-filelock-{}", std::process::id()));
        let a = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let b = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let kind = probe(&a).unwrap();
        let held = RangeLock::take(&a, kind, true, 10, 20).unwrap();
        if kind == LockKind::Ofd {
            // The other open file description sees the write lock.
            let mut fl = flock(libc::F_RDLCK, 0, 100).unwrap();
            fcntl(&b, kind.get(), &mut fl).unwrap();
            assert_eq!(c_int::from(fl.l_type), libc::F_WRLCK);
            assert_eq!((fl.l_start, fl.l_len), (10, 20));
        }
        held.release().unwrap();
        let mut fl = flock(libc::F_WRLCK, 0, 100).unwrap();
        fcntl(&b, kind.get(), &mut fl).unwrap();
        assert_eq!(c_int::from(fl.l_type), libc::F_UNLCK);
        // Shared locks of two opens coexist.
        let r1 = RangeLock::take(&a, kind, false, 0, 8).unwrap();
        let r2 = RangeLock::take(&b, kind, false, 4, 8).unwrap();
        drop(r1);
        r2.release().unwrap();
        std::fs::remove_file(&path).unwrap();
    }
}
