//! Work completions as Rust values.

use std::fmt;

use rdma_sys as sys;

use crate::wr::Segment;

/// Status of a work completion: every `ibv_wc_status`, with libibverbs' own message text.
///
/// ```
/// # use viaduct_verbs::*;
/// let s = Status::from_raw(12);
/// assert_eq!(s, Status::RetryExceeded);
/// assert_eq!(s.to_string(), "transport retry counter exceeded");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// The operation completed.
    Success,
    /// Local length error (for example a receive buffer too small for the message).
    LocalLength,
    /// Local QP operation error.
    LocalQpOperation,
    /// Local EE context operation error.
    LocalEecOperation,
    /// Local protection error (an lkey or address the region does not cover).
    LocalProtection,
    /// Flushed: the QP went to the error state before this request ran.
    WrFlush,
    /// Memory window bind error.
    MwBind,
    /// Bad response.
    BadResponse,
    /// Local access error.
    LocalAccess,
    /// Remote invalid request.
    RemoteInvalidRequest,
    /// Remote access error (wrong rkey, range or rights).
    RemoteAccess,
    /// Remote operation error.
    RemoteOperation,
    /// Transport retry counter exceeded (peer unreachable).
    RetryExceeded,
    /// RNR retry counter exceeded (peer posted no receive in time).
    RnrRetryExceeded,
    /// Local RDD violation.
    LocalRddViolation,
    /// Remote invalid RD request.
    RemoteInvalidRdRequest,
    /// Remote abort.
    RemoteAbort,
    /// Invalid EE context number.
    InvalidEecn,
    /// Invalid EE context state.
    InvalidEecState,
    /// Fatal error.
    Fatal,
    /// Response timeout.
    ResponseTimeout,
    /// General error.
    General,
    /// Tag matching error.
    TagMatching,
    /// Tag matching rendezvous incomplete.
    TagMatchingRendezvousIncomplete,
    /// A status value this library does not know.
    Unknown(u32),
}

impl Status {
    /// From the raw `ibv_wc_status`.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert_eq!(Status::from_raw(0), Status::Success);
    /// assert_eq!(Status::from_raw(999), Status::Unknown(999));
    /// ```
    #[inline]
    pub fn from_raw(v: u32) -> Self {
        use sys::ibv_wc_status::*;
        match v {
            IBV_WC_SUCCESS => Self::Success,
            IBV_WC_LOC_LEN_ERR => Self::LocalLength,
            IBV_WC_LOC_QP_OP_ERR => Self::LocalQpOperation,
            IBV_WC_LOC_EEC_OP_ERR => Self::LocalEecOperation,
            IBV_WC_LOC_PROT_ERR => Self::LocalProtection,
            IBV_WC_WR_FLUSH_ERR => Self::WrFlush,
            IBV_WC_MW_BIND_ERR => Self::MwBind,
            IBV_WC_BAD_RESP_ERR => Self::BadResponse,
            IBV_WC_LOC_ACCESS_ERR => Self::LocalAccess,
            IBV_WC_REM_INV_REQ_ERR => Self::RemoteInvalidRequest,
            IBV_WC_REM_ACCESS_ERR => Self::RemoteAccess,
            IBV_WC_REM_OP_ERR => Self::RemoteOperation,
            IBV_WC_RETRY_EXC_ERR => Self::RetryExceeded,
            IBV_WC_RNR_RETRY_EXC_ERR => Self::RnrRetryExceeded,
            IBV_WC_LOC_RDD_VIOL_ERR => Self::LocalRddViolation,
            IBV_WC_REM_INV_RD_REQ_ERR => Self::RemoteInvalidRdRequest,
            IBV_WC_REM_ABORT_ERR => Self::RemoteAbort,
            IBV_WC_INV_EECN_ERR => Self::InvalidEecn,
            IBV_WC_INV_EEC_STATE_ERR => Self::InvalidEecState,
            IBV_WC_FATAL_ERR => Self::Fatal,
            IBV_WC_RESP_TIMEOUT_ERR => Self::ResponseTimeout,
            IBV_WC_GENERAL_ERR => Self::General,
            IBV_WC_TM_ERR => Self::TagMatching,
            IBV_WC_TM_RNDV_INCOMPLETE => Self::TagMatchingRendezvousIncomplete,
            other => Self::Unknown(other),
        }
    }

    /// The raw `ibv_wc_status` value.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert_eq!(Status::WrFlush.to_raw(), 5);
    /// assert_eq!(Status::from_raw(Status::WrFlush.to_raw()), Status::WrFlush);
    /// ```
    pub fn to_raw(self) -> u32 {
        use sys::ibv_wc_status::*;
        match self {
            Self::Success => IBV_WC_SUCCESS,
            Self::LocalLength => IBV_WC_LOC_LEN_ERR,
            Self::LocalQpOperation => IBV_WC_LOC_QP_OP_ERR,
            Self::LocalEecOperation => IBV_WC_LOC_EEC_OP_ERR,
            Self::LocalProtection => IBV_WC_LOC_PROT_ERR,
            Self::WrFlush => IBV_WC_WR_FLUSH_ERR,
            Self::MwBind => IBV_WC_MW_BIND_ERR,
            Self::BadResponse => IBV_WC_BAD_RESP_ERR,
            Self::LocalAccess => IBV_WC_LOC_ACCESS_ERR,
            Self::RemoteInvalidRequest => IBV_WC_REM_INV_REQ_ERR,
            Self::RemoteAccess => IBV_WC_REM_ACCESS_ERR,
            Self::RemoteOperation => IBV_WC_REM_OP_ERR,
            Self::RetryExceeded => IBV_WC_RETRY_EXC_ERR,
            Self::RnrRetryExceeded => IBV_WC_RNR_RETRY_EXC_ERR,
            Self::LocalRddViolation => IBV_WC_LOC_RDD_VIOL_ERR,
            Self::RemoteInvalidRdRequest => IBV_WC_REM_INV_RD_REQ_ERR,
            Self::RemoteAbort => IBV_WC_REM_ABORT_ERR,
            Self::InvalidEecn => IBV_WC_INV_EECN_ERR,
            Self::InvalidEecState => IBV_WC_INV_EEC_STATE_ERR,
            Self::Fatal => IBV_WC_FATAL_ERR,
            Self::ResponseTimeout => IBV_WC_RESP_TIMEOUT_ERR,
            Self::General => IBV_WC_GENERAL_ERR,
            Self::TagMatching => IBV_WC_TM_ERR,
            Self::TagMatchingRendezvousIncomplete => IBV_WC_TM_RNDV_INCOMPLETE,
            Self::Unknown(v) => v,
        }
    }

    /// Every known status, in `ibv_wc_status` order.
    pub const ALL: [Status; 24] = [
        Self::Success,
        Self::LocalLength,
        Self::LocalQpOperation,
        Self::LocalEecOperation,
        Self::LocalProtection,
        Self::WrFlush,
        Self::MwBind,
        Self::BadResponse,
        Self::LocalAccess,
        Self::RemoteInvalidRequest,
        Self::RemoteAccess,
        Self::RemoteOperation,
        Self::RetryExceeded,
        Self::RnrRetryExceeded,
        Self::LocalRddViolation,
        Self::RemoteInvalidRdRequest,
        Self::RemoteAbort,
        Self::InvalidEecn,
        Self::InvalidEecState,
        Self::Fatal,
        Self::ResponseTimeout,
        Self::General,
        Self::TagMatching,
        Self::TagMatchingRendezvousIncomplete,
    ];

    /// The message `ibv_wc_status_str` gives for this status.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert_eq!(Status::RnrRetryExceeded.message(), "RNR retry counter exceeded");
    /// ```
    pub fn message(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::LocalLength => "local length error",
            Self::LocalQpOperation => "local QP operation error",
            Self::LocalEecOperation => "local EE context operation error",
            Self::LocalProtection => "local protection error",
            Self::WrFlush => "Work Request Flushed Error",
            Self::MwBind => "memory management operation error",
            Self::BadResponse => "bad response error",
            Self::LocalAccess => "local access error",
            Self::RemoteInvalidRequest => "remote invalid request error",
            Self::RemoteAccess => "remote access error",
            Self::RemoteOperation => "remote operation error",
            Self::RetryExceeded => "transport retry counter exceeded",
            Self::RnrRetryExceeded => "RNR retry counter exceeded",
            Self::LocalRddViolation => "local RDD violation error",
            Self::RemoteInvalidRdRequest => "remote invalid RD request",
            Self::RemoteAbort => "aborted error",
            Self::InvalidEecn => "invalid EE context number",
            Self::InvalidEecState => "invalid EE context state",
            Self::Fatal => "fatal error",
            Self::ResponseTimeout => "response timeout error",
            Self::General => "general error",
            Self::TagMatching => "TM error",
            Self::TagMatchingRendezvousIncomplete => "TM software rendezvous",
            Self::Unknown(_) => "unknown",
        }
    }

    /// True for [`Status::Success`].
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// assert!(Status::Success.is_success() && !Status::WrFlush.is_success());
    /// ```
    #[inline]
    pub fn is_success(self) -> bool {
        self == Self::Success
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(v) => write!(f, "unknown work completion status {v}"),
            s => f.write_str(s.message()),
        }
    }
}

/// What a completed work request did.
///
/// ```
/// # use viaduct_verbs::*;
/// # let c = Completion { id: 1, status: Status::Success, opcode: Opcode::Recv, byte_len: 5, imm: None, qp_num: 17, vendor_err: 0, signalled: true, segments: Vec::new() };
/// if c.opcode == Opcode::Recv {
///     println!("{} bytes arrived", c.byte_len);
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// A SEND (with or without immediate) left this side.
    Send,
    /// An RDMA WRITE (with or without immediate) left this side.
    RdmaWrite,
    /// An RDMA READ finished.
    RdmaRead,
    /// A receive took a SEND.
    Recv,
    /// A receive took an RDMA WRITE WITH IMMEDIATE (no bytes land in the receive buffer).
    RecvRdmaWithImm,
    /// An atomic fetch-and-add finished (the old value is in the local segment).
    FetchAdd,
    /// An atomic compare-and-swap finished (the old value is in the local segment).
    CompareSwap,
    /// Another opcode (memory windows, ...), raw value.
    Other(u32),
}

impl Opcode {
    #[inline]
    pub(crate) fn from_raw(v: u32) -> Self {
        use sys::ibv_wc_opcode::*;
        match v {
            IBV_WC_SEND => Self::Send,
            IBV_WC_RDMA_WRITE => Self::RdmaWrite,
            IBV_WC_RDMA_READ => Self::RdmaRead,
            IBV_WC_RECV => Self::Recv,
            IBV_WC_RECV_RDMA_WITH_IMM => Self::RecvRdmaWithImm,
            IBV_WC_FETCH_ADD => Self::FetchAdd,
            IBV_WC_COMP_SWAP => Self::CompareSwap,
            o => Self::Other(o),
        }
    }
}

/// One finished work request: its id, outcome, and the buffers it had borrowed.
///
/// ```
/// # use viaduct_verbs::*;
/// let c = Completion { id: 1, status: Status::Success, opcode: Opcode::Recv, byte_len: 5, imm: None,
///     qp_num: 17, vendor_err: 0, signalled: true, segments: Vec::new() };
/// assert!(c.ok().is_ok() && c.imm.is_none());
/// ```
#[derive(Debug)]
pub struct Completion {
    /// The id given when posting.
    pub id: u64,
    /// Outcome.
    pub status: Status,
    /// What it was. For error completions the hardware does not report the opcode; this is
    /// then the opcode of the request as posted.
    pub opcode: Opcode,
    /// Bytes received (receives) or transferred (RDMA read).
    pub byte_len: u32,
    /// Immediate data (host byte order), for `*_WITH_IMM` receives.
    pub imm: Option<u32>,
    /// QP number of the local queue pair.
    pub qp_num: u32,
    /// Vendor error syndrome (0 when none).
    pub vendor_err: u32,
    /// False for an unsignalled send request, completed implicitly when a later signalled
    /// request of the same send queue completed.
    pub signalled: bool,
    /// The memory the request owned, handed back.
    pub segments: Vec<Segment>,
}

impl Completion {
    /// `Ok(())` on success, else the status as an error value.
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// # let c = Completion { id: 1, status: Status::Success, opcode: Opcode::Recv, byte_len: 5, imm: None, qp_num: 17, vendor_err: 0, signalled: true, segments: Vec::new() };
    /// assert_eq!(c.ok(), Ok(()));
    /// let failed = Completion { status: Status::WrFlush, ..c };
    /// assert_eq!(failed.ok(), Err(Status::WrFlush));
    /// ```
    pub fn ok(&self) -> Result<(), Status> {
        if self.status.is_success() {
            Ok(())
        } else {
            Err(self.status)
        }
    }

    /// The first segment's region, moved out (convenient for single-buffer requests).
    ///
    /// ```
    /// # use viaduct_verbs::*;
    /// # let mut c = Completion { id: 1, status: Status::Success, opcode: Opcode::Recv, byte_len: 5, imm: None, qp_num: 17, vendor_err: 0, signalled: true, segments: Vec::new() };
    /// assert!(c.take_region().is_none()); // an inline send or a raw request owns no memory
    /// ```
    pub fn take_region(&mut self) -> Option<crate::mr::MemoryRegion> {
        if self.segments.is_empty() {
            None
        } else {
            Some(self.segments.remove(0).into_region())
        }
    }
}
