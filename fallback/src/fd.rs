//! Adopting file descriptors handed down by a launcher.
//!
//! Launchers such as MPICH's hydra pass each rank an already-connected socket as a plain number
//! in an environment variable (`PMI_FD`). Turning that number into an owned Rust socket is the
//! one step that cannot be checked by the type system; it lives here so the agent stays free of
//! `unsafe`.

use std::io;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

/// Descriptors already adopted by this process; each may be adopted once.
static ADOPTED: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

/// Takes ownership of the inherited socket `fd` (e.g. the value of `PMI_FD`).
///
/// Checks that `fd` is open and is a socket, and that this process has not adopted it before, so
/// two owners can never close the same descriptor. The returned stream is a close-on-exec
/// duplicate (so programs this process starts do not inherit the connection); the inherited
/// descriptor itself is closed.
///
/// # Errors
/// `InvalidInput` when `fd` is negative, not open, not a socket, or was already adopted.
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
    let mut adopted = ADOPTED.lock().unwrap_or_else(|p| p.into_inner());
    if adopted.contains(&fd) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("file descriptor {fd} was already adopted by this process"),
        ));
    }
    adopted.push(fd);
    // SAFETY: `fd` is open and is a socket (checked above through /proc), it was handed to this
    // process by its launcher for this purpose, and the `ADOPTED` registry guarantees this is
    // the only place that takes ownership of it, so exactly one owner will close it.
    let inherited = unsafe { UnixStream::from_raw_fd(fd) };
    // `try_clone` duplicates with close-on-exec; dropping `inherited` closes the original.
    inherited.try_clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn refuses_non_sockets_and_double_adoption() {
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let err = adopt_inherited_socket(std::os::fd::AsRawFd::as_raw_fd(&file)).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert!(adopt_inherited_socket(-1).is_err());

        let (a, _b) = UnixStream::pair().unwrap();
        let raw = a.into_raw_fd();
        let adopted = adopt_inherited_socket(raw).unwrap();
        let again = adopt_inherited_socket(raw).unwrap_err();
        assert!(again.to_string().contains("already adopted"), "{again}");
        drop(adopted);
    }
}
