//! The status of a completed request, and the restricted view query callbacks fill.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::error::RequestError;

/// What a completed request reports: envelope (source, tag), byte count, cancellation, error.
///
/// A status is filled by the agent for message requests and by the query callback for generalized
/// and class-driven requests (through [`QueryStatus`], which cannot touch the error field).
#[derive(Debug, Clone)]
pub struct Status {
    // Four words: the envelope (source in the low half, tag in the high half, `u32::MAX` for
    // "none"), the count, the cancelled flag, and the error behind one pointer (null: none), so
    // that a status lives in registers on the fast path and copying one never reads across
    // narrower stores (a store-forwarding stall).
    envelope: u64,
    count: u64,
    cancelled: u64,
    error: Option<Box<RequestError>>,
}

const NONE: u32 = u32::MAX;
const EMPTY_ENVELOPE: u64 = u64::MAX;

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
            envelope: EMPTY_ENVELOPE,
            count: 0,
            cancelled: 0,
            error: None,
        }
    }

    /// The status of a received message: its source, tag and byte count (not cancelled, no
    /// error). A message's source and tag are ranks and tags below `u32::MAX`; `u32::MAX`
    /// reads back as "none".
    ///
    /// ```
    /// use viaduct_request::Status;
    ///
    /// let s = Status::message(2, 7, 64);
    /// assert_eq!((s.source(), s.tag(), s.count()), (Some(2), Some(7), 64));
    /// assert!(!s.test_cancelled() && s.error().is_none());
    /// ```
    #[inline(always)]
    pub const fn message(source: u32, tag: u32, count: u64) -> Self {
        Status {
            envelope: source as u64 | ((tag as u64) << 32),
            count,
            cancelled: 0,
            error: None,
        }
    }

    /// The rank the data came from, if the request has one.
    pub fn source(&self) -> Option<u32> {
        opt(self.envelope as u32)
    }

    /// The tag of the message, if the request has one.
    pub fn tag(&self) -> Option<u32> {
        opt((self.envelope >> 32) as u32)
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
        self.error.as_deref()
    }

    #[inline]
    pub(crate) fn set_cancelled(&mut self, cancelled: bool) {
        self.cancelled = u64::from(cancelled);
    }

    #[inline]
    pub(crate) fn set_error(&mut self, error: Option<RequestError>) {
        self.error = error.map(Box::new);
    }

    /// `Err` with the status's error, else `Ok` with the status.
    #[inline(always)]
    pub(crate) fn into_result(mut self) -> Result<Status, RequestError> {
        match self.error.take() {
            None => Ok(self),
            Some(e) => Err(*e),
        }
    }
}

/// The part of a [`Status`] a query callback may set: source, tag, count and cancellation.
///
/// The error field is out of reach by construction: the agent alone decides, from the context of
/// the call, whether a status reports an error.
///
/// ```compile_fail
/// # use viaduct_request::{QueryStatus, Status};
/// fn query(status: &mut QueryStatus<'_>) {
///     // There is no way to reach the error field, nor to replace the whole status.
///     status.set_error(None);
/// }
/// ```
#[derive(Debug)]
pub struct QueryStatus<'a> {
    fields: &'a QueryFields,
}

/// What a query callback fills.
///
/// Atomic (relaxed) fields: the agent reads each back with a load of its own size. A plain
/// struct would be copied out with wide loads right after the callback's narrower stores, and
/// such a load cannot take its bytes from several pending stores (a store-forwarding stall on
/// the fast path of every completing wait).
#[derive(Debug)]
pub(crate) struct QueryFields {
    source: AtomicU32,
    tag: AtomicU32,
    count: AtomicU64,
    cancelled: AtomicBool,
}

impl QueryFields {
    /// Fields of an empty status.
    #[inline(always)]
    pub(crate) const fn new() -> Self {
        QueryFields {
            source: AtomicU32::new(NONE),
            tag: AtomicU32::new(NONE),
            count: AtomicU64::new(0),
            cancelled: AtomicBool::new(false),
        }
    }

    /// The status these fields describe, with no error.
    #[inline(always)]
    pub(crate) fn status(&self) -> Status {
        let source = u64::from(self.source.load(Ordering::Relaxed));
        let tag = u64::from(self.tag.load(Ordering::Relaxed));
        Status {
            envelope: source | (tag << 32),
            count: self.count.load(Ordering::Relaxed),
            cancelled: u64::from(self.cancelled.load(Ordering::Relaxed)),
            error: None,
        }
    }
}

impl<'a> QueryStatus<'a> {
    #[inline(always)]
    pub(crate) fn new(fields: &'a QueryFields) -> Self {
        QueryStatus { fields }
    }

    /// Sets the source rank (`None`: undefined; `u32::MAX` is reserved for it).
    #[inline]
    pub fn set_source(&mut self, source: Option<u32>) {
        self.fields.source.store(raw(source), Ordering::Relaxed);
    }

    /// Sets the tag (`None`: undefined; `u32::MAX` is reserved for it).
    #[inline]
    pub fn set_tag(&mut self, tag: Option<u32>) {
        self.fields.tag.store(raw(tag), Ordering::Relaxed);
    }

    /// Sets the number of bytes the operation moved.
    #[inline]
    pub fn set_count(&mut self, count: u64) {
        self.fields.count.store(count, Ordering::Relaxed);
    }

    /// Records whether the request was cancelled (what `test_cancelled` will report).
    #[inline]
    pub fn set_cancelled(&mut self, cancelled: bool) {
        self.fields.cancelled.store(cancelled, Ordering::Relaxed);
    }

    /// A copy of the status as filled so far (its error field is always empty here: the agent
    /// sets it after the callback).
    pub fn status(&self) -> Status {
        self.fields.status()
    }
}
