//! [`FileRequest`]: an agent request for a file operation, and the claim on its buffers.

use std::sync::Arc;

use viaduct_fallback::file::Buffers;

use super::class::OpState;
use crate::error::{AgentError, chain};
use crate::request::{Request, RequestError, Status};

/// Takes the buffers of a file operation once its request has completed.
///
/// If the request is dropped or freed before it completed, nothing completes it any more and
/// this claim never yields the buffers; the engine keeps them until the kernel is done with the
/// operation **and** every clone of the claim is dropped, then frees them (seen in
/// [`FileEngine::outstanding`](super::FileEngine::outstanding) and released by the engine's
/// next poll, wait or test).
#[derive(Debug, Clone)]
pub struct BufferClaim {
    pub(crate) state: Arc<OpState>,
}

impl BufferClaim {
    /// The operation's buffers, once (`None` before completion, or when taken already).
    pub fn take(&self) -> Option<Buffers> {
        self.state
            .buffers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// A started file operation: its request and the claim on its buffers.
#[derive(Debug)]
pub struct FileRequest {
    /// The request: wait or test it alone or in an array with other requests. Its status count
    /// is the number of bytes moved.
    pub request: Request,
    /// Where the buffers come back.
    pub buffers: BufferClaim,
}

impl FileRequest {
    /// Waits for the request; on success the status and the buffers come back. On failure the
    /// [`FileWaitError`] holds the request's error and the buffers, if they came back (`?`
    /// takes it into a `Box<dyn Error>`, a [`RequestError`] or an [`AgentError`]).
    ///
    /// ```
    /// use viaduct_agent::fileio::{File, FileEngine, IoBuffer, OpenOptions};
    ///
    /// fn write_twice(path: &std::path::Path) -> Result<u64, Box<dyn std::error::Error>> {
    ///     let engine = FileEngine::new(8)?;
    ///     let file = File::open(&engine, path, &OpenOptions::create_rw())?;
    ///     let (status, buffers) = file.iwrite_at(IoBuffer::from(b"ab".to_vec()), 0).wait()?;
    ///     let buf = buffers.into_one().expect("the write's buffer");
    ///     let (again, _) = file.iwrite_at(buf, status.count()).wait()?;
    ///     Ok(status.count() + again.count())
    /// }
    ///
    /// let dir = std::env::temp_dir().join(format!("viaduct-doc-wait-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// match write_twice(&dir.join("f")) {
    ///     Ok(n) => assert_eq!(n, 4),
    ///     // No io_uring here (seccomp, old kernel): the engine's error names the cause.
    ///     Err(e) => eprintln!("{e}"),
    /// }
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn wait(mut self) -> Result<(Status, Buffers), FileWaitError> {
        match self.request.wait() {
            Ok(status) => Ok((status, self.buffers.take().unwrap_or(Buffers::None))),
            Err(error) => Err(FileWaitError {
                error,
                buffers: self.buffers.take(),
            }),
        }
    }

    /// Splits into the request and the buffer claim.
    pub fn into_parts(self) -> (Request, BufferClaim) {
        (self.request, self.buffers)
    }
}

/// A failed [`FileRequest::wait`]: the request's error, and the operation's buffers when they
/// came back (a failed read or write still gives its buffers back; they are `None` only when
/// the operation never got them back from the engine).
///
/// It is an [`Error`](std::error::Error) whose source is the [`RequestError`], so `?` takes it
/// into a `Box<dyn Error>`; `From` turns it into a [`RequestError`] or an [`AgentError`] (the
/// buffers are then dropped). [`FileWaitError::into_parts`] recovers both.
///
/// ```
/// use viaduct_agent::fileio::FileWaitError;
/// use viaduct_agent::request::RequestError;
///
/// fn reuse(e: FileWaitError) -> RequestError {
///     let (error, buffers) = e.into_parts();
///     drop(buffers); // or give them to the next operation
///     error
/// }
/// ```
#[derive(Debug)]
pub struct FileWaitError {
    error: RequestError,
    buffers: Option<Buffers>,
}

impl FileWaitError {
    /// The request's error.
    pub fn error(&self) -> &RequestError {
        &self.error
    }

    /// The buffers, if they came back.
    pub fn buffers(&self) -> Option<&Buffers> {
        self.buffers.as_ref()
    }

    /// Takes the buffers out (`None` if they did not come back or were taken already).
    pub fn take_buffers(&mut self) -> Option<Buffers> {
        self.buffers.take()
    }

    /// The request's error and the buffers.
    pub fn into_parts(self) -> (RequestError, Option<Buffers>) {
        (self.error, self.buffers)
    }
}

impl std::fmt::Display for FileWaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "file operation failed: {}", chain(&self.error))
    }
}

impl std::error::Error for FileWaitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<FileWaitError> for RequestError {
    fn from(e: FileWaitError) -> Self {
        e.error
    }
}

impl From<FileWaitError> for AgentError {
    fn from(e: FileWaitError) -> Self {
        AgentError::Request(e.error)
    }
}
