//! Network to file: writing received messages to a [`File`] without a copy by the program.
//!
//! Three ways, by where the received bytes are:
//!
//! - **A completed tagged receive** ([`File::iwrite_received_at`]): the bytes of a
//!   [`RecvBuffer`] filled by [`Agent::irecv`] move into the file request (the `Vec` itself is
//!   handed over, no byte is copied) and the write is nonblocking like any file request. The
//!   allocation comes back with the request's buffers when it completes
//!   ([`BufferClaim::take`](super::BufferClaim::take) or [`FileRequest::wait`]; `IoBuffer::into_vec`
//!   returns the very same allocation). The one copy on this path is the receive itself, done by
//!   the agent when the message lands in the `RecvBuffer` (from the method's receive memory, or
//!   from the sender on the self loop).
//! - **A stream message in place, written at once** ([`File::write_next_at`]): the bytes shown by
//!   [`Agent::next`] inside the method's receive memory (a shared-memory ring cell, an io_uring
//!   receive buffer) go to the kernel from there with `pwrite`, **no copy in user space at all**.
//!   The bytes are only lent for the duration of the `next` closure, so this write is
//!   synchronous: it runs inside the closure, with the agent's lock held, and the message is
//!   given back to the method (consumed) when the write returned; a write that fails part way
//!   consumes only the bytes written, so the rest can be written by a later call.
//! - **A stream message in place, written in the background** ([`File::iwrite_next_at`]): a
//!   nonblocking write needs memory the request owns until the kernel is done with it, which the
//!   method's receive memory is not (the method reuses it as soon as the message is consumed).
//!   So this path makes exactly **one copy**: inside the `next` closure, from the method's
//!   receive memory into a buffer the file request owns; the message is given back to the method
//!   as soon as that copy is done, before the write is even submitted, and the copy comes back
//!   with the request's buffers at completion.

use std::os::unix::fs::FileExt;
use std::time::Duration;

use viaduct_fallback::file::IoBuffer;

use super::error::FileIoError;
use super::file::File;
use super::request::FileRequest;
use crate::agent::Agent;
use crate::recv_buffer::RecvBuffer;
use crate::request::Request;

impl File {
    /// Starts a write of the message received in `buf` at `offset`, handing the buffer's
    /// allocation to the request (no copy). `receive` is the receive's request, which must be
    /// complete (or null, after its wait); otherwise [`FileIoError::ReceiveIncomplete`] and `buf`
    /// is left alone. `buf` is empty afterwards; the bytes come back with the request's buffers
    /// when it completes.
    pub fn iwrite_received_at(
        &self,
        receive: &Request,
        buf: &RecvBuffer,
        offset: u64,
    ) -> Result<FileRequest, FileIoError> {
        if !receive.is_complete() {
            return Err(FileIoError::ReceiveIncomplete);
        }
        Ok(self.iwrite_at(IoBuffer::from(buf.take()), offset))
    }

    /// Writes the oldest stream message from `peer` (what is left of it) at `offset`, straight
    /// from the method's receive memory (no copy in user space), waiting up to `timeout` for a
    /// message. `Ok(None)`: no message came; `Ok(Some(n))`: `n` bytes written and consumed. The
    /// write is synchronous and runs with the agent's lock held (see the [module docs](self)).
    pub fn write_next_at(
        &self,
        agent: &Agent,
        peer: u32,
        offset: u64,
        timeout: Duration,
    ) -> Result<Option<usize>, FileIoError> {
        let mut failure = None;
        let consumed = agent
            .next_timeout(peer, timeout, |bytes| {
                let mut written = 0;
                while written < bytes.len() {
                    match self
                        .file
                        .write_at(&bytes[written..], offset + written as u64)
                    {
                        Ok(0) => {
                            failure = Some(std::io::Error::from(std::io::ErrorKind::WriteZero));
                            break;
                        }
                        Ok(n) => written += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            failure = Some(e);
                            break;
                        }
                    }
                }
                written
            })
            .map_err(|source| FileIoError::Stream {
                peer,
                source: Box::new(source),
            })?;
        match (failure, consumed) {
            (Some(source), written) => Err(FileIoError::Write {
                written: written.unwrap_or(0),
                source,
            }),
            (None, n) => Ok(n),
        }
    }

    /// Starts a nonblocking write of the oldest stream message from `peer` (what is left of it)
    /// at `offset`, waiting up to `timeout` for a message (`Ok(None)`: none came). The bytes are
    /// copied once, from the method's receive memory into a buffer the request owns, and the
    /// message is consumed at once (see the [module docs](self)).
    pub fn iwrite_next_at(
        &self,
        agent: &Agent,
        peer: u32,
        offset: u64,
        timeout: Duration,
    ) -> Result<Option<FileRequest>, FileIoError> {
        let mut owned = None;
        agent
            .next_timeout(peer, timeout, |bytes| {
                owned = Some(bytes.to_vec());
                bytes.len()
            })
            .map_err(|source| FileIoError::Stream {
                peer,
                source: Box::new(source),
            })?;
        Ok(owned.map(|bytes| self.iwrite_at(IoBuffer::from(bytes), offset)))
    }
}
