//! [`FileRequest`]: an agent request for a file operation, and the claim on its buffers.

use std::sync::Arc;

use viaduct_fallback::file::Buffers;

use super::class::OpState;
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
    /// Waits for the request; on success the status and the buffers come back.
    pub fn wait(mut self) -> Result<(Status, Buffers), (RequestError, Option<Buffers>)> {
        match self.request.wait() {
            Ok(status) => Ok((status, self.buffers.take().unwrap_or(Buffers::None))),
            Err(e) => Err((e, self.buffers.take())),
        }
    }

    /// Splits into the request and the buffer claim.
    pub fn into_parts(self) -> (Request, BufferClaim) {
        (self.request, self.buffers)
    }
}
