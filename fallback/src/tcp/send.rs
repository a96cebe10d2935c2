//! Outgoing frames and the `sendmsg` batches that carry them (header and payload iovecs, no
//! copy of the payload).

use std::collections::VecDeque;

use crate::frame::{HEADER_LEN, Header};

use super::completion::Op;

/// One frame waiting to be sent, or in flight.
pub(crate) struct OutFrame {
    pub header: [u8; HEADER_LEN],
    pub payload: Vec<u8>,
    /// Bytes of header and payload already sent.
    pub sent: usize,
    /// The descriptor this frame completes: id, kind, and whether the payload buffer goes back.
    pub owner: Option<(u64, Op, bool)>,
}

impl OutFrame {
    pub(crate) fn new(header: &Header, payload: Vec<u8>, owner: Option<(u64, Op, bool)>) -> Self {
        OutFrame {
            header: header.encode(),
            payload,
            sent: 0,
            owner,
        }
    }

    pub(crate) fn total(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }
}

/// The payload of one `sendmsg`/`sendmsg_zc` operation: the frames and the iovec array and
/// message header that point into them. Boxed, so the kernel-visible pointers stay put.
pub(crate) struct SendBatch {
    pub frames: Vec<OutFrame>,
    iov: Vec<libc::iovec>,
    pub msg: libc::msghdr,
    /// Bytes this batch sends.
    pub bytes: usize,
    /// Whether it goes with `SEND_ZC`.
    pub zero_copy: bool,
}

// SAFETY: the raw pointers in `iov` and `msg` point into this batch's own heap memory (the
// frames' headers and payloads, the iovec array); moving the batch to another thread moves that
// ownership with it.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Moves up to `max` frames from the front of `queue` into a new batch.
    pub(crate) fn gather(
        queue: &mut VecDeque<OutFrame>,
        max: usize,
        zero_copy_threshold: usize,
    ) -> Box<SendBatch> {
        let n = queue.len().min(max);
        let frames: Vec<OutFrame> = queue.drain(..n).collect();
        let zero_copy = frames
            .iter()
            .any(|f| f.payload.len() >= zero_copy_threshold);
        // SAFETY: an all-zero msghdr is a valid empty message header.
        let msg: libc::msghdr = unsafe { std::mem::zeroed() };
        let mut b = Box::new(SendBatch {
            frames,
            iov: Vec::with_capacity(2 * n),
            msg,
            bytes: 0,
            zero_copy,
        });
        let SendBatch {
            frames,
            iov,
            msg,
            bytes,
            ..
        } = &mut *b;
        for f in frames.iter() {
            if f.sent < HEADER_LEN {
                iov.push(libc::iovec {
                    iov_base: f.header[f.sent..].as_ptr() as *mut libc::c_void,
                    iov_len: HEADER_LEN - f.sent,
                });
            }
            let from = f.sent.saturating_sub(HEADER_LEN);
            if from < f.payload.len() {
                iov.push(libc::iovec {
                    iov_base: f.payload[from..].as_ptr() as *mut libc::c_void,
                    iov_len: f.payload.len() - from,
                });
            }
            *bytes += f.total() - f.sent;
        }
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        b
    }

    /// Splits the frames after `sent` bytes went out: the fully sent ones, and the rest (which
    /// keep their progress in `sent`).
    pub(crate) fn settle(self, mut sent: usize) -> (Vec<OutFrame>, Vec<OutFrame>) {
        let mut done = Vec::new();
        let mut rest = Vec::new();
        for mut f in self.frames {
            let left = f.total() - f.sent;
            if sent >= left {
                sent -= left;
                f.sent = f.total();
                done.push(f);
            } else {
                f.sent += sent;
                sent = 0;
                rest.push(f);
            }
        }
        (done, rest)
    }
}
