//! The direct send of a copying post: when nothing else is going out, its frame goes to the
//! socket in one non-blocking `send`, without being queued or batched.

use crate::frame::{HEADER_LEN, Header};

use super::super::completion::{Completion, Op, Posted};
use super::{Endpoint, IMMEDIATE_SEND_BYTES};
use crate::tcp::send::OutFrame;

impl Endpoint {
    /// Sends the frame of a copying post (`header`, whose length, sequence number and credit
    /// are filled in here, and the message `parts`, `len` bytes) with one non-blocking
    /// `send` when nothing else is going out: no frame queued, no send in the ring
    /// ([`super::Config::immediate_io`]). The caller has checked the connection, the length
    /// and the peer's window.
    ///
    /// Returns `None` when the direct send does not apply or the socket took nothing (no room,
    /// or an error that the queued path meets again and reports): nothing changed, the caller
    /// goes on with the queued path. Otherwise the frame is this end's next in the stream:
    /// sent whole, its completion is queued; sent in part, the rest goes on through the ring
    /// (from the head of the queue, with its progress).
    pub(super) fn send_direct(
        &mut self,
        id: u64,
        mut header: Header,
        parts: &[&[u8]],
        len: usize,
    ) -> Option<Posted> {
        let total = HEADER_LEN + len;
        if !self.config.immediate_io
            || self.in_flight
            || !self.queue.is_empty()
            || self.failed.is_some()
            || total > IMMEDIATE_SEND_BYTES
            || len >= self.config.zero_copy_threshold
        {
            return None;
        }
        // The fields `enqueue_frame` gives a queued frame; committed below only when bytes left.
        header.len = len as u32;
        let credit = header.kind.carries_credit();
        if credit {
            header.offset = self.freed as u64;
        }
        header.seq = self.send_seq;
        // The frame's bytes gathered in one buffer (kept from earlier posts), so that a plain
        // `send` takes them: the kernel's `sendmsg` imports an iovec array first, which costs
        // more than the copy of a small message (measured: 64-byte ping-pong 4.3 us against
        // 4.05 us with the header and the data as two iovecs).
        let mut buf = self.spare_payloads.pop().unwrap_or_default();
        buf.extend_from_slice(&header.encode());
        for p in parts {
            buf.extend_from_slice(p);
        }
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.stream);
        // SAFETY: `buf` is an owned, initialized buffer of `buf.len()` bytes, alive for the
        // call; `send` only reads it.
        let r = unsafe {
            libc::send(
                fd,
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if r <= 0 {
            // No room, or a failure: nothing left this end; the queued path tries again and
            // fails the connection (completing the post) if the socket is broken.
            self.keep_payload(buf);
            return None;
        }
        let sent = r as usize;
        if credit {
            self.freed = 0;
        }
        self.send_seq = self.send_seq.wrapping_add(1);
        self.frames_sent += 1;
        self.unacked += total;
        if sent == total {
            self.send_paths.immediate += 1;
            self.keep_payload(buf);
            self.completions.push_back(Completion {
                id,
                op: Op::Send,
                result: Ok(len),
                buffer: None,
            });
            return Some(Posted::InProgress);
        }
        // The socket took part of the frame: the rest goes on from the queue's head.
        self.send_paths.partial += 1;
        let mut frame = OutFrame::new(&header, buf, true, Some((id, Op::Send, false)));
        frame.sent = sent;
        self.queue.push_front(frame);
        // The socket has no room now: the rest goes through the ring at once, as the rest of
        // a queued batch the socket took in part does.
        if let Err(e) = self.flush_with(false) {
            self.engine_failed(&e);
        }
        Some(Posted::InProgress)
    }
}
