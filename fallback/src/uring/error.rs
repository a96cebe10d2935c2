//! Errors of the io_uring engine, with the cause of a refused ring spelled out.

use std::io;

/// Everything that can go wrong in the io_uring engine.
///
/// A ring that cannot be created is diagnosed: the variants [`UringError::DisabledBySysctl`],
/// [`UringError::Refused`], [`UringError::MemlockLimit`] and [`UringError::NotInKernel`] say which
/// cause applies and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum UringError {
    /// `/proc/sys/kernel/io_uring_disabled` forbids io_uring for this process.
    #[error(
        "io_uring is disabled by the sysctl kernel.io_uring_disabled = {value}; \
         enable it with `sysctl -w kernel.io_uring_disabled=0` (as root), or for value 1 \
         add this user to the group named in kernel.io_uring_group"
    )]
    DisabledBySysctl {
        /// The value read from `/proc/sys/kernel/io_uring_disabled`.
        value: u32,
        /// The error `io_uring_setup` returned.
        #[source]
        source: io::Error,
    },
    /// `io_uring_setup` failed with `EPERM` while the sysctl allows io_uring.
    #[error(
        "io_uring_setup was refused with EPERM although kernel.io_uring_disabled allows it: \
         a seccomp filter (for example a container runtime's default profile) or a security \
         module blocks io_uring; allow io_uring_setup, io_uring_enter and io_uring_register \
         in the seccomp profile, or run with the TCP method over plain sockets"
    )]
    Refused {
        /// The error `io_uring_setup` returned.
        #[source]
        source: io::Error,
    },
    /// `io_uring_setup` failed with `ENOMEM`: the ring could not be charged to locked memory.
    #[error(
        "io_uring_setup failed with ENOMEM: the locked-memory limit (RLIMIT_MEMLOCK, now {limit}) \
         is too small for a ring of {entries} entries; raise it with `ulimit -l unlimited` (or \
         `LimitMEMLOCK=` / `--ulimit memlock=-1` in a service or container) or use fewer entries"
    )]
    MemlockLimit {
        /// The current soft limit, as text (`unlimited` or bytes).
        limit: String,
        /// The number of submission entries asked for.
        entries: u32,
        /// The error `io_uring_setup` returned.
        #[source]
        source: io::Error,
    },
    /// The kernel has no io_uring (`ENOSYS`).
    #[error(
        "this kernel has no io_uring (ENOSYS): it is older than 5.1 or built without \
         CONFIG_IO_URING; use a newer kernel or the TCP method over plain sockets"
    )]
    NotInKernel {
        /// The error `io_uring_setup` returned.
        #[source]
        source: io::Error,
    },
    /// `io_uring_setup` failed for another reason.
    #[error("io_uring_setup failed for a ring of {entries} entries")]
    Setup {
        /// The number of submission entries asked for.
        entries: u32,
        /// The error `io_uring_setup` returned.
        #[source]
        source: io::Error,
    },
    /// `io_uring_enter` failed.
    #[error("io_uring_enter failed")]
    Enter(#[source] io::Error),
    /// A single-issuer ring ([`crate::uring::RingConfig::single_issuer`]) was used from a
    /// thread other than the one that created it (`EEXIST` from the kernel).
    #[error(
        "the io_uring ring was set up for a single issuer and was used from a thread other than \
         the one that created it: use the endpoint on its creating thread, or turn single_issuer off"
    )]
    NotIssuer(#[source] io::Error),
    /// An `io_uring_register` call failed.
    #[error("io_uring_register ({what}) failed")]
    Register {
        /// What was being registered.
        what: &'static str,
        /// The error the kernel returned.
        #[source]
        source: io::Error,
    },
    /// The eventfd for blocking waits could not be created.
    #[error("eventfd creation failed")]
    EventFd(#[source] io::Error),
    /// Memory for a provided-buffer ring could not be mapped.
    #[error("mapping {bytes} bytes for a provided-buffer ring failed")]
    Map {
        /// The size asked for.
        bytes: usize,
        /// The error `mmap` returned.
        #[source]
        source: io::Error,
    },
    /// The running kernel lacks a feature that was asked for.
    #[error("the kernel does not support {feature}")]
    Unsupported {
        /// The feature, in words.
        feature: &'static str,
    },
    /// An argument is outside what the engine accepts.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The operation named is not (or no longer) in flight on this ring.
    #[error(
        "operation {0:#x} is not in flight on this ring (already completed or never submitted)"
    )]
    NotInFlight(u64),
}

impl UringError {
    /// The OS error number behind this error, if there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        let source = match self {
            Self::DisabledBySysctl { source, .. }
            | Self::Refused { source }
            | Self::MemlockLimit { source, .. }
            | Self::NotInKernel { source }
            | Self::Setup { source, .. }
            | Self::Enter(source)
            | Self::NotIssuer(source)
            | Self::Register { source, .. }
            | Self::EventFd(source)
            | Self::Map { source, .. } => source,
            _ => return None,
        };
        source.raw_os_error()
    }

    /// The error of a failed `io_uring_enter`: [`UringError::NotIssuer`] for the `EEXIST` of
    /// a single-issuer ring entered from another thread, else [`UringError::Enter`].
    pub(crate) fn enter(source: io::Error) -> Self {
        if source.raw_os_error() == Some(libc::EEXIST) {
            Self::NotIssuer(source)
        } else {
            Self::Enter(source)
        }
    }

    /// Turns a failed `io_uring_setup` into the error that names its cause.
    pub(crate) fn diagnose_setup(source: io::Error, entries: u32) -> Self {
        Self::diagnose(source, entries, read_disabled_sysctl())
    }

    /// The diagnosis, given the value of `kernel.io_uring_disabled` (`None`: absent).
    fn diagnose(source: io::Error, entries: u32, sysctl: Option<u32>) -> Self {
        match source.raw_os_error() {
            Some(libc::EPERM) => match sysctl {
                Some(value) if value != 0 => Self::DisabledBySysctl { value, source },
                _ => Self::Refused { source },
            },
            Some(libc::ENOMEM) => Self::MemlockLimit {
                limit: memlock_limit(),
                entries,
                source,
            },
            Some(libc::ENOSYS) => Self::NotInKernel { source },
            _ => Self::Setup { entries, source },
        }
    }
}

/// Reads `kernel.io_uring_disabled` (absent before Linux 6.6: then `None`).
fn read_disabled_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The soft `RLIMIT_MEMLOCK`, as text.
fn memlock_limit() -> String {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid, exclusively borrowed `lim`.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    if rc != 0 {
        "unknown".to_owned()
    } else if lim.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".to_owned()
    } else {
        format!("{} bytes", lim.rlim_cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(errno: i32, sysctl: Option<u32>) -> UringError {
        UringError::diagnose(io::Error::from_raw_os_error(errno), 64, sysctl)
    }

    #[test]
    fn eperm_with_sysctl_set_names_the_sysctl() {
        for value in [1, 2] {
            let e = diag(libc::EPERM, Some(value));
            assert!(matches!(e, UringError::DisabledBySysctl { .. }));
            let msg = e.to_string();
            assert!(msg.contains("kernel.io_uring_disabled") && msg.contains("sysctl -w"));
        }
    }

    #[test]
    fn eperm_without_sysctl_names_seccomp() {
        for sysctl in [None, Some(0)] {
            let e = diag(libc::EPERM, sysctl);
            assert!(matches!(e, UringError::Refused { .. }));
            assert!(e.to_string().contains("seccomp"));
            assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        }
    }

    #[test]
    fn enomem_names_the_memlock_limit() {
        let e = diag(libc::ENOMEM, Some(0));
        assert!(matches!(e, UringError::MemlockLimit { entries: 64, .. }));
        assert!(e.to_string().contains("ulimit -l"));
    }

    #[test]
    fn other_errors_stay_generic_with_source() {
        assert!(matches!(
            diag(libc::ENOSYS, None),
            UringError::NotInKernel { .. }
        ));
        let e = diag(libc::EINVAL, None);
        assert!(matches!(e, UringError::Setup { entries: 64, .. }));
        assert!(std::error::Error::source(&e).is_some());
    }
}
