//! Taking over the PMI socket a launcher left open for this process (`PMI_FD`).
//!
//! Turning the inherited descriptor number into a stream is done by
//! [`viaduct_fallback::fd::adopt_inherited_socket`] (this crate has no `unsafe`): it checks
//! the descriptor is open and a socket (through `/proc/self/fd/N`), takes it at most once, and
//! returns a close-on-exec duplicate.

use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::BootstrapError;

/// Set once the inherited descriptor has been taken, so a second caller cannot own it too.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// Takes ownership of the inherited PMI socket `fd` and returns it as a stream.
///
/// The returned stream is a close-on-exec duplicate: the inherited descriptor itself (which the
/// launcher left without close-on-exec) is closed, so programs this process starts do not inherit
/// the PMI connection. Errors: `fd` negative, not open, not a socket, or already taken.
///
/// ```no_run
/// use viaduct_pmi::fd::adopt_inherited_fd;
///
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     // The descriptor a launcher passed (hydra's PMI_FD).
///     let fd: i32 = std::env::var("PMI_FD")?.parse()?;
///     let stream = adopt_inherited_fd(fd)?;
///     println!("PMI socket {stream:?}");
///     Ok(())
/// }
/// ```
pub fn adopt_inherited_fd(fd: i32) -> Result<UnixStream, BootstrapError> {
    let fail = |reason: String| BootstrapError::AdoptFd { fd, reason };
    // Check the descriptor before claiming the one PMI slot, so a bad number does not use it up.
    if std::fs::read_link(format!("/proc/self/fd/{fd}")).is_err() {
        return Err(fail(
            "the descriptor is not open in this process (or is negative)".into(),
        ));
    }
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Err(fail(
            "the PMI descriptor was already taken by this process".into(),
        ));
    }
    viaduct_fallback::fd::adopt_inherited_socket(fd).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_bad_descriptors() {
        assert!(matches!(
            adopt_inherited_fd(-1),
            Err(BootstrapError::AdoptFd { fd: -1, .. })
        ));
        // A descriptor number far above anything open here.
        let err = adopt_inherited_fd(987_654).unwrap_err();
        assert!(err.to_string().contains("not open"), "{err}");
        // An open file that is not a socket.
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let err = adopt_inherited_fd(fd).unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
    }
}
