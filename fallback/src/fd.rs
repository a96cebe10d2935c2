//! Adopting file descriptors handed down by a launcher.
//!
//! Launchers such as MPICH's hydra pass each rank an already-connected socket as a plain number
//! in an environment variable (`PMI_FD`). Turning that number into an owned Rust socket is the
//! one step that cannot be checked by the type system; it lives here so the agent stays free of
//! `unsafe`.
//!
//! It also holds [`wait_readable`], one `poll` over several descriptors (the agent's sleep on
//! the descriptors of all its TCP and verbs connections at once), and [`own_table_keeping`],
//! which gives a helper thread a descriptor table of its own.

use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;

/// Takes ownership of the inherited socket `fd` (e.g. the value of `PMI_FD`).
///
/// Checks that `fd` is open and is a socket. The returned stream is a close-on-exec
/// duplicate (so programs this process starts do not inherit the connection); the inherited
/// descriptor itself is closed, so adopting the same number twice fails (it is no longer open)
/// unless something else has been opened under that number since; callers that read the number
/// from the environment (`PMI_FD`) must take it once.
///
/// # Errors
/// `InvalidInput` when `fd` is negative, not open or not a socket.
///
/// ```
/// use std::os::fd::IntoRawFd;
/// use std::os::unix::net::UnixStream;
/// use viaduct_fallback::fd::adopt_inherited_socket;
/// let (ours, _peer) = UnixStream::pair()?;
/// let adopted = adopt_inherited_socket(ours.into_raw_fd())?;
/// assert!(adopt_inherited_socket(-1).is_err());
/// # drop(adopted);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn adopt_inherited_socket(fd: RawFd) -> io::Result<UnixStream> {
    if fd < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("file descriptor {fd} is negative"),
        ));
    }
    let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("file descriptor {fd} is not open in this process: {e}"),
        )
    })?;
    if !target.to_string_lossy().starts_with("socket:") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "file descriptor {fd} is not a socket (it is {})",
                target.display()
            ),
        ));
    }
    // SAFETY: `fd` is open and is a socket (checked above through /proc); the caller's contract
    // (documented above) is that the launcher handed it to this process for this purpose and it
    // is taken once, so the stream built here is its only owner and closing it is correct.
    let inherited = unsafe { UnixStream::from_raw_fd(fd) };
    // `try_clone` duplicates with close-on-exec; dropping `inherited` closes the original.
    inherited.try_clone()
}

/// Sleeps until one of `fds` is readable (`POLLIN`), at end of stream or failed (`POLLRDHUP`,
/// `POLLHUP`, `POLLERR`), a signal arrives, or `timeout` passed: one `poll(2)`.
///
/// # Errors
/// The error of `poll` other than `EINTR`.
///
/// ```
/// use std::io::Write;
/// use std::os::fd::AsFd;
/// use std::os::unix::net::UnixStream;
/// use std::time::Duration;
/// use viaduct_fallback::fd::wait_readable;
/// let (mut a, b) = UnixStream::pair()?;
/// a.write_all(b"x")?;
/// wait_readable(&[b.as_fd()], Duration::from_secs(10))?; // returns at once: a byte waits
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn wait_readable(
    fds: &[std::os::fd::BorrowedFd<'_>],
    timeout: std::time::Duration,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut set: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` holds `set.len()` valid pollfds naming descriptors the caller keeps open
    // (borrowed) for the call; `ts` is a valid timespec; no signal mask is changed.
    let rc = unsafe {
        libc::ppoll(
            set.as_mut_ptr(),
            set.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// Gives the calling thread a descriptor table of its own that holds only `keep` and the
/// standard streams (0, 1, 2): `unshare(CLONE_FILES)` copies the process's table for this
/// thread, then every other descriptor of the copy is closed (`close_range`, or one `close`
/// per entry of `/proc/thread-self/fd` on kernels without it). The other threads' table is
/// untouched, and no longer shared with this thread.
///
/// For a helper thread of a process whose other threads make many system calls on
/// descriptors: while two threads share a table, every such call takes and drops a reference
/// on its file (two atomic operations; the kernel skips them for a table with one user).
/// Measured on this project's 64-byte TCP ping-pong: one idle extra thread made it 4-5 %
/// slower. The thread must use only the descriptors in `keep` afterwards (and open its own);
/// a descriptor that something it owns closes later must be in `keep`, or that close fails.
///
/// # Errors
/// The error of `unshare` (the table stays shared, nothing was closed) or of the closing
/// (some descriptors of the copy may stay open: harmless but for the files they hold).
///
/// ```
/// use std::os::fd::AsRawFd;
/// use viaduct_fallback::fd::own_table_keeping;
/// let (a, _b) = std::os::unix::net::UnixStream::pair()?;
/// let kept = std::fs::File::open("/proc/self/status")?;
/// let (fa, fk) = (a.as_raw_fd(), kept.as_raw_fd());
/// let open = |fd| std::path::Path::new(&format!("/proc/thread-self/fd/{fd}")).exists();
/// std::thread::spawn(move || -> std::io::Result<()> {
///     own_table_keeping(&[fk])?;
///     assert!(open(fk) && !open(fa)); // closed here only
///     Ok(())
/// })
/// .join()
/// .expect("thread")?;
/// assert!(open(fa) && open(fk)); // the spawning thread's table is as it was
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn own_table_keeping(keep: &[RawFd]) -> io::Result<()> {
    // SAFETY: unshare with CLONE_FILES only gives this thread a private copy of the table; it
    // touches no memory of ours.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut kept: Vec<u32> = keep
        .iter()
        .filter_map(|&fd| u32::try_from(fd).ok())
        .chain([0, 1, 2])
        .collect();
    kept.sort_unstable();
    kept.dedup();
    let mut from = 0u32;
    for &k in kept.iter().chain([&u32::MAX]) {
        if k > from {
            let to = if k == u32::MAX { u32::MAX } else { k - 1 };
            // SAFETY: close_range closes descriptors of this thread's private table only
            // (unshared above), none of which the code after it uses (see the contract).
            let rc = unsafe { libc::close_range(from, to, 0) };
            if rc != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::ENOSYS) {
                    return close_listed(&kept);
                }
                return Err(e);
            }
        }
        from = k.saturating_add(1);
    }
    Ok(())
}

/// [`own_table_keeping`]'s closing on kernels without `close_range`: every descriptor listed
/// in `/proc/thread-self/fd` that is not in `kept`.
fn close_listed(kept: &[u32]) -> io::Result<()> {
    let fds: Vec<u32> = std::fs::read_dir("/proc/thread-self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds.into_iter().filter(|fd| !kept.contains(fd)) {
        // SAFETY: closes a descriptor of this thread's private table (see the contract); the
        // one of the directory listing above is already closed, and this fails harmlessly.
        unsafe {
            libc::close(fd as RawFd);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn refuses_non_sockets_and_adopts_sockets() {
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let err = adopt_inherited_socket(std::os::fd::AsRawFd::as_raw_fd(&file)).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert!(adopt_inherited_socket(-1).is_err());

        let (a, peer) = UnixStream::pair().unwrap();
        let raw = a.into_raw_fd();
        let adopted = adopt_inherited_socket(raw).unwrap();
        // The adopted stream is a working duplicate of the inherited socket.
        let mut w = &adopted;
        std::io::Write::write_all(&mut w, b"x").unwrap();
        let mut byte = [0u8; 1];
        std::io::Read::read_exact(&mut &peer, &mut byte).unwrap();
        assert_eq!(&byte, b"x");
    }
}
