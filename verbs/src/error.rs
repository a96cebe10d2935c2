//! Errors of the verbs layer: one variant per failing verb, the OS error as its source.

use std::io;

/// Result of a fallible verbs call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in a verbs call.
///
/// Each variant names the libibverbs call that failed; where the library reported an `errno`,
/// it is kept as the [`std::io::Error`] source.
///
/// ```
/// # use viaduct_verbs::*;
/// match Context::open("no-such-device") {
///     Err(Error::UnknownDevice { name, .. }) => assert_eq!(name, "no-such-device"),
///     Err(e) => println!("{e}"), // NoDevice, ListDevices, ...
///     Ok(_) => unreachable!(),
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `ibv_get_device_list` failed for a reason other than "no RDMA support".
    #[error("listing RDMA devices failed (ibv_get_device_list)")]
    ListDevices(#[source] io::Error),
    /// No RDMA device exists on this machine.
    #[error("no RDMA device on this machine")]
    NoDevice,
    /// A device was asked for by name, and no device has that name.
    #[error("no RDMA device named {name:?} exists; devices present: {available}")]
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// Names of the devices that do exist, comma separated.
        available: String,
    },
    /// `ibv_open_device` failed.
    #[error("opening RDMA device {name:?} failed (ibv_open_device)")]
    OpenDevice {
        /// Device name.
        name: String,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// `ibv_query_device` failed.
    #[error("querying device attributes failed (ibv_query_device)")]
    QueryDevice(#[source] io::Error),
    /// `ibv_query_port` failed.
    #[error("querying port {port} failed (ibv_query_port)")]
    QueryPort {
        /// Port number.
        port: u8,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// `ibv_query_gid` failed.
    #[error("querying GID {index} of port {port} failed (ibv_query_gid)")]
    QueryGid {
        /// Port number.
        port: u8,
        /// GID table index.
        index: u32,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// No GID of the port fits the addressing the queue pair needs.
    #[error(
        "port {port} of {device} has no usable GID (wanted RoCE v2 with an IPv4-mapped address, \
         or any GID on InfiniBand); GIDs present: {present}"
    )]
    NoUsableGid {
        /// Device name.
        device: String,
        /// Port number.
        port: u8,
        /// Summary of the GID table.
        present: String,
    },
    /// `ibv_alloc_pd` failed.
    #[error("allocating a protection domain failed (ibv_alloc_pd)")]
    AllocPd(#[source] io::Error),
    /// `ibv_reg_mr` failed for a reason other than the locked-memory limit.
    #[error("registering a {len}-byte memory region failed (ibv_reg_mr)")]
    RegisterMr {
        /// Length asked for.
        len: usize,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// `ibv_reg_mr` failed with `ENOMEM`/`EPERM`: the pinned-memory limit was reached.
    #[error(
        "registering a {len}-byte memory region failed (ibv_reg_mr): the locked-memory limit \
         RLIMIT_MEMLOCK (`ulimit -l`) is {limit}; raise it with `ulimit -l unlimited` in the shell \
         that starts the program (as root, or after raising the hard limit with a `memlock` line in \
         /etc/security/limits.conf, or `LimitMEMLOCK=infinity` for a systemd service, or \
         `--ulimit memlock=-1` for a container)"
    )]
    MemlockLimit {
        /// Length asked for.
        len: usize,
        /// The soft limit at the time of the failure, readable (`64 KiB`, `unlimited`).
        limit: String,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// A buffer could not be allocated.
    #[error("allocating a {len}-byte buffer failed")]
    Allocate {
        /// Length asked for.
        len: usize,
    },
    /// A range lies outside the memory region it names.
    #[error("range {offset}..{end} lies outside a {len}-byte memory region")]
    OutOfRange {
        /// Start of the range.
        offset: usize,
        /// End of the range.
        end: usize,
        /// Region length.
        len: usize,
    },
    /// `ibv_create_comp_channel` failed.
    #[error("creating a completion channel failed (ibv_create_comp_channel)")]
    CreateChannel(#[source] io::Error),
    /// Switching a file descriptor's blocking mode failed (`fcntl`).
    #[error("setting O_NONBLOCK on a verbs file descriptor failed (fcntl)")]
    SetNonblocking(#[source] io::Error),
    /// `ibv_create_cq` failed.
    #[error("creating a completion queue of {capacity} entries failed (ibv_create_cq)")]
    CreateCq {
        /// Entries asked for.
        capacity: u32,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// `ibv_req_notify_cq` failed.
    #[error("arming a completion queue failed (ibv_req_notify_cq)")]
    ReqNotify(#[source] io::Error),
    /// The completion queue was created without a completion channel.
    #[error("this completion queue has no completion channel to notify")]
    NoChannel,
    /// `ibv_get_cq_event` or the wait before it failed.
    #[error("reading a completion event failed (ibv_get_cq_event)")]
    GetCqEvent(#[source] io::Error),
    /// `ibv_poll_cq` failed.
    #[error("polling a completion queue failed (ibv_poll_cq)")]
    PollCq(#[source] io::Error),
    /// A wait for completions ended at its deadline.
    #[error("waited {waited_ms} ms for {wanted} completions, got {got}")]
    Timeout {
        /// Milliseconds waited.
        waited_ms: u128,
        /// Completions wanted.
        wanted: usize,
        /// Completions seen.
        got: usize,
    },
    /// `ibv_create_qp` failed.
    #[error("creating a queue pair failed (ibv_create_qp)")]
    CreateQp(#[source] io::Error),
    /// `ibv_modify_qp` failed on the way to `state`.
    #[error("moving a queue pair to {state} failed (ibv_modify_qp)")]
    ModifyQp {
        /// Target state (`INIT`, `RTR`, `RTS`, `ERR`).
        state: &'static str,
        /// OS error.
        #[source]
        source: io::Error,
    },
    /// A queue pair is not in a state that accepts the operation.
    #[error(
        "queue pair {qp_num} is {state}, not connected (RTS): the work requests were not posted"
    )]
    NotConnected {
        /// QP number.
        qp_num: u32,
        /// Its state.
        state: &'static str,
    },
    /// An endpoint or remote-region descriptor did not decode.
    #[error("malformed {what}: {reason}")]
    Decode {
        /// What was decoded.
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// A work request asks for more than the queue pair was built for.
    #[error("work request refused: {0}")]
    InvalidRequest(String),
    /// `ibv_post_send` failed.
    #[error("posting send work requests failed (ibv_post_send)")]
    PostSend(#[source] io::Error),
    /// `ibv_post_recv` or `ibv_post_srq_recv` failed.
    #[error("posting receive work requests failed (ibv_post_recv)")]
    PostRecv(#[source] io::Error),
    /// `ibv_create_srq` failed.
    #[error("creating a shared receive queue failed (ibv_create_srq)")]
    CreateSrq(#[source] io::Error),
    /// `ibv_modify_srq` failed.
    #[error("changing a shared receive queue failed (ibv_modify_srq)")]
    ModifySrq(#[source] io::Error),
    /// `ibv_get_async_event` failed.
    #[error("reading an asynchronous event failed (ibv_get_async_event)")]
    GetAsyncEvent(#[source] io::Error),
}

/// The OS error of the last failed libc/libibverbs call.
pub(crate) fn last_os_error() -> io::Error {
    io::Error::last_os_error()
}

/// An OS error from a verb that returns the error number itself (0 on success).
pub(crate) fn from_code(code: i32) -> io::Error {
    if code == -1 {
        // The verb followed the "-1 and errno" convention instead.
        io::Error::last_os_error()
    } else if code < 0 {
        io::Error::from_raw_os_error(-code)
    } else {
        io::Error::from_raw_os_error(code)
    }
}

/// The soft `RLIMIT_MEMLOCK`, readable.
pub(crate) fn memlock_limit() -> String {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass; it has the right type.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    if rc != 0 {
        return "unknown".to_owned();
    }
    if lim.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".to_owned()
    } else {
        format!("{} KiB", lim.rlim_cur / 1024)
    }
}
