//! The status of a completed request, and the restricted view query callbacks fill.

use super::error::RequestError;

/// What a completed request reports: envelope (source, tag), byte count, cancellation, error.
///
/// A status is filled by the agent for message requests and by the query callback for generalized
/// and class-driven requests (through [`QueryStatus`], which cannot touch the error field).
#[derive(Debug, Clone)]
pub struct Status {
    // `u32::MAX` is "none"; every field is at least a word, so that copying a freshly filled
    // status never reads across narrower stores (a store-forwarding stall on the fast path).
    source: u32,
    tag: u32,
    count: u64,
    cancelled: u64,
    error: Option<RequestError>,
}

const NONE: u32 = u32::MAX;

#[inline]
fn opt(v: u32) -> Option<u32> {
    (v != NONE).then_some(v)
}

#[inline]
fn raw(v: Option<u32>) -> u32 {
    v.unwrap_or(NONE)
}

impl Default for Status {
    fn default() -> Self {
        Status::empty()
    }
}

impl Status {
    /// An empty status: no source, no tag, zero bytes, not cancelled, no error (what a null
    /// request reports).
    #[inline(always)]
    pub const fn empty() -> Self {
        Status {
            count: 0,
            error: None,
            source: NONE,
            tag: NONE,
            cancelled: 0,
        }
    }

    /// The rank the data came from, if the request has one.
    pub fn source(&self) -> Option<u32> {
        opt(self.source)
    }

    /// The tag of the message, if the request has one.
    pub fn tag(&self) -> Option<u32> {
        opt(self.tag)
    }

    /// Number of bytes the operation moved.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether the request was cancelled (MPI's `test_cancelled`).
    pub fn test_cancelled(&self) -> bool {
        self.cancelled != 0
    }

    /// The request's own error, set only by `*_some`/`*_all` calls that report
    /// [`RequestError::InStatus`] and in statuses handed to request handlers.
    #[inline]
    pub fn error(&self) -> Option<&RequestError> {
        self.error.as_ref()
    }

    #[inline]
    pub(crate) fn set_cancelled(&mut self, cancelled: bool) {
        self.cancelled = u64::from(cancelled);
    }

    #[inline]
    pub(crate) fn set_error(&mut self, error: Option<RequestError>) {
        self.error = error;
    }

    /// `Err` with the status's error, else `Ok` with the status.
    #[inline(always)]
    pub(crate) fn into_result(mut self) -> Result<Status, RequestError> {
        match self.error.take() {
            None => Ok(self),
            Some(e) => Err(e),
        }
    }
}

/// The part of a [`Status`] a query callback may set: source, tag, count and cancellation.
///
/// The error field is out of reach by construction: the agent alone decides, from the context of
/// the call, whether a status reports an error.
///
/// ```compile_fail
/// # use viaduct_agent::request::{QueryStatus, Status};
/// fn query(status: &mut QueryStatus<'_>) {
///     // There is no way to reach the error field, nor to replace the whole status.
///     status.set_error(None);
/// }
/// ```
#[derive(Debug)]
pub struct QueryStatus<'a> {
    status: &'a mut Status,
}

impl<'a> QueryStatus<'a> {
    pub(crate) fn new(status: &'a mut Status) -> Self {
        QueryStatus { status }
    }

    /// Sets the source rank (`None`: undefined; `u32::MAX` is reserved for it).
    #[inline]
    pub fn set_source(&mut self, source: Option<u32>) {
        self.status.source = raw(source);
    }

    /// Sets the tag (`None`: undefined; `u32::MAX` is reserved for it).
    #[inline]
    pub fn set_tag(&mut self, tag: Option<u32>) {
        self.status.tag = raw(tag);
    }

    /// Sets the number of bytes the operation moved.
    #[inline]
    pub fn set_count(&mut self, count: u64) {
        self.status.count = count;
    }

    /// Records whether the request was cancelled (what `test_cancelled` will report).
    #[inline]
    pub fn set_cancelled(&mut self, cancelled: bool) {
        self.status.cancelled = u64::from(cancelled);
    }

    /// The status as filled so far (read-only).
    pub fn status(&self) -> &Status {
        self.status
    }
}
