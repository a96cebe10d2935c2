//! The direct send of a copying post: when nothing else is going out, its frame goes to the
//! socket in one non-blocking `send`, without being queued or batched.

use crate::frame::{HEADER_LEN, Header};

use super::super::completion::{Completion, Op, Posted};
use super::{Endpoint, IMMEDIATE_SEND_BYTES};
use crate::tcp::send::OutFrame;

impl Endpoint {
    /// Sends the frame of a copying post (`header`, stamped here, and `payload`: room for the
    /// header, then the message) with one non-blocking `send` when nothing else is going out:
    /// no frame queued, no send in the ring ([`super::Config::immediate_io`]). The caller has
    /// checked the connection, the length and the peer's window.
    ///
    /// Gives `payload` back when the direct send does not apply or the socket took nothing
    /// (no room, or an error that the queued path meets again and reports): nothing changed,
    /// the caller goes on with the queued path. Otherwise the frame is this end's next in the
    /// stream: sent whole, its completion is queued; sent in part, the rest goes on through
    /// the ring (from the head of the queue, with its progress).
    ///
    /// One buffer and a plain `send`, not the header and the caller's bytes as two iovecs of
    /// a `sendmsg`: the kernel's iovec import costs more than the copy of a small message
    /// (measured: 64-byte ping-pong 4.3 us against 4.05 us).
    pub(super) fn send_direct(
        &mut self,
        id: u64,
        mut header: Header,
        mut payload: Vec<u8>,
    ) -> Result<Posted, Vec<u8>> {
        let len = payload.len() - HEADER_LEN;
        if !self.config.immediate_io
            || self.in_flight
            || !self.queue.is_empty()
            || self.failed.is_some()
            || payload.len() > IMMEDIATE_SEND_BYTES
            || len >= self.config.zero_copy_threshold
        {
            return Err(payload);
        }
        // Committed below only when bytes left.
        self.stamp(&mut header, len);
        payload[..HEADER_LEN].copy_from_slice(&header.encode());
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.stream);
        // SAFETY: `payload` is an owned, initialized buffer of `payload.len()` bytes, alive
        // for the call; `send` only reads it.
        let r = unsafe {
            libc::send(
                fd,
                payload.as_ptr().cast(),
                payload.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if r <= 0 {
            // No room, or a failure: nothing left this end; the queued path tries again and
            // fails the connection (completing the post) if the socket is broken.
            return Err(payload);
        }
        let sent = r as usize;
        self.commit_frame(&header);
        self.unacked += payload.len();
        if sent == payload.len() {
            self.send_paths.immediate += 1;
            self.keep_payload(payload);
            self.completions.push_back(Completion {
                id,
                op: Op::Send,
                result: Ok(len),
                buffer: None,
            });
            return Ok(Posted::InProgress);
        }
        // The socket took part of the frame and has no room now: the rest goes through the
        // ring at once, from the head of the queue, as the rest of a queued batch the socket
        // took in part does.
        self.send_paths.partial += 1;
        let mut frame = OutFrame::new(&header, payload, true, Some((id, Op::Send, false)));
        frame.sent = sent;
        self.queue.push_front(frame);
        if let Err(e) = self.flush_with(false) {
            self.engine_failed(&e);
        }
        Ok(Posted::InProgress)
    }
}
