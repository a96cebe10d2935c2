//! Outgoing frames and the `sendmsg` batches that carry them (header and payload iovecs, no
//! copy of the payload), or the plain `send` of a lone frame whose bytes are contiguous.

use std::collections::VecDeque;

use crate::frame::{HEADER_LEN, Header};

use super::completion::Op;

/// One frame waiting to be sent, or in flight.
pub(crate) struct OutFrame {
    pub header: [u8; HEADER_LEN],
    /// The frame's data; when `joined`, preceded by a copy of the header.
    pub payload: Vec<u8>,
    /// Whether `payload` starts with the header, so that the frame's bytes are contiguous and a
    /// frame sent alone goes out with one plain `send` (a copying post builds its frames so).
    pub joined: bool,
    /// Bytes of the frame already sent.
    pub sent: usize,
    /// The descriptor this frame completes: id, kind, and whether the payload buffer goes back.
    pub owner: Option<(u64, Op, bool)>,
}

impl OutFrame {
    /// A frame of `header` and `payload`; `joined`: `payload` starts with `HEADER_LEN` bytes of
    /// room, which take the encoded header.
    pub(crate) fn new(
        header: &Header,
        mut payload: Vec<u8>,
        joined: bool,
        owner: Option<(u64, Op, bool)>,
    ) -> Self {
        let header = header.encode();
        if joined {
            payload[..HEADER_LEN].copy_from_slice(&header);
        }
        OutFrame {
            header,
            payload,
            joined,
            sent: 0,
            owner,
        }
    }

    /// Bytes of data after the header.
    pub(crate) fn data_len(&self) -> usize {
        self.payload.len() - if self.joined { HEADER_LEN } else { 0 }
    }

    /// Bytes of the whole frame.
    pub(crate) fn total(&self) -> usize {
        HEADER_LEN + self.data_len()
    }
}

/// The payload of one send operation (`sendmsg`, `sendmsg_zc`, or a plain `send` of one joined
/// frame, see [`SendBatch::contiguous`]): the frames and the iovec array and
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
    /// A batch without frames, to be filled by [`SendBatch::fill`]; the endpoint keeps one and
    /// refills it, so that a send allocates nothing.
    pub(crate) fn empty() -> Box<SendBatch> {
        Box::new(SendBatch {
            frames: Vec::new(),
            iov: Vec::new(),
            // SAFETY: an all-zero msghdr is a valid empty message header.
            msg: unsafe { std::mem::zeroed() },
            bytes: 0,
            zero_copy: false,
        })
    }

    /// Moves up to `max` frames from the front of `queue` into this batch, which must be empty
    /// (new, or drained by [`SendBatch::settle`]), and points its message header at them.
    pub(crate) fn fill(
        &mut self,
        queue: &mut VecDeque<OutFrame>,
        max: usize,
        zero_copy_threshold: usize,
    ) {
        debug_assert!(self.frames.is_empty());
        let n = queue.len().min(max);
        let SendBatch {
            frames,
            iov,
            msg,
            bytes,
            zero_copy,
        } = self;
        frames.extend(queue.drain(..n));
        *zero_copy = frames.iter().any(|f| f.data_len() >= zero_copy_threshold);
        iov.clear();
        *bytes = 0;
        for f in frames.iter() {
            if f.joined {
                iov.push(libc::iovec {
                    iov_base: f.payload[f.sent..].as_ptr() as *mut libc::c_void,
                    iov_len: f.payload.len() - f.sent,
                });
                *bytes += f.total() - f.sent;
                continue;
            }
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
    }

    /// The unsent bytes of the batch when they are contiguous (one joined frame): a plain
    /// `send` takes them without a message header or iovec to import.
    pub(crate) fn contiguous(&self) -> Option<&[u8]> {
        match &self.frames[..] {
            [f] if f.joined => Some(&f.payload[f.sent..]),
            _ => None,
        }
    }

    /// Takes the frames out, in stream order, after `sent` bytes went out: a frame with
    /// `sent == total()` went out whole, the others keep their progress in `sent`. The batch
    /// is empty afterwards, ready for [`SendBatch::fill`].
    pub(crate) fn settle(&mut self, mut sent: usize) -> std::vec::Drain<'_, OutFrame> {
        for f in self.frames.iter_mut() {
            let step = sent.min(f.total() - f.sent);
            f.sent += step;
            sent -= step;
        }
        self.frames.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Kind;

    fn joined(data: &[u8]) -> OutFrame {
        let mut payload = vec![0u8; HEADER_LEN];
        payload.extend_from_slice(data);
        let h = Header::new(Kind::Send, data.len() as u32);
        OutFrame::new(&h, payload, true, Some((7, Op::Send, false)))
    }

    fn split(data: &[u8]) -> OutFrame {
        let h = Header::new(Kind::Send, data.len() as u32);
        OutFrame::new(&h, data.to_vec(), false, Some((8, Op::Send, true)))
    }

    #[test]
    fn a_joined_frame_carries_its_header_in_front_of_its_data() {
        let f = joined(b"abc");
        assert_eq!(f.data_len(), 3);
        assert_eq!(f.total(), HEADER_LEN + 3);
        assert_eq!(&f.payload[..HEADER_LEN], &f.header[..]);
        assert_eq!(&f.payload[HEADER_LEN..], b"abc");
        let g = split(b"abc");
        assert_eq!((g.data_len(), g.total()), (3, HEADER_LEN + 3));
    }

    #[test]
    fn only_a_lone_joined_frame_goes_out_contiguous() {
        let mut q: VecDeque<OutFrame> = [joined(b"one")].into();
        let mut b = SendBatch::empty();
        b.fill(&mut q, 8, usize::MAX);
        let bytes = b.contiguous().expect("one joined frame is contiguous");
        assert_eq!(bytes.len(), HEADER_LEN + 3);
        assert_eq!(b.bytes, HEADER_LEN + 3);
        assert_eq!(b.iov.len(), 1);
        assert_eq!(b.settle(b.bytes).count(), 1);

        // Refilled (the endpoint reuses its batch): two frames need the gathering sendmsg.
        let mut q: VecDeque<OutFrame> = [joined(b"one"), split(b"four")].into();
        b.fill(&mut q, 8, usize::MAX);
        assert!(b.contiguous().is_none());
        assert_eq!(b.bytes, 2 * HEADER_LEN + 7);
        assert_eq!(b.iov.len(), 3, "joined frame: one iovec; split frame: two");
        assert_eq!(b.msg.msg_iovlen, 3);
        let out: Vec<OutFrame> = b.settle(b.bytes).collect();
        assert!(out.iter().all(|f| f.sent == f.total()));

        let mut q: VecDeque<OutFrame> = [split(b"four")].into();
        b.fill(&mut q, 8, usize::MAX);
        assert!(b.contiguous().is_none(), "a split frame is not contiguous");
        b.settle(0).for_each(drop);
    }

    #[test]
    fn a_short_send_leaves_the_progress_in_the_frames_it_cut() {
        let mut q: VecDeque<OutFrame> = [joined(b"0123456789"), joined(b"abcdef")].into();
        let mut b = SendBatch::empty();
        b.fill(&mut q, 8, usize::MAX);
        let first = HEADER_LEN + 10;
        let out: Vec<(usize, usize)> = b.settle(first + 5).map(|f| (f.sent, f.total())).collect();
        assert_eq!(out, vec![(first, first), (5, HEADER_LEN + 6)]);
        assert!(
            b.frames.is_empty(),
            "settling empties the batch for its next fill"
        );
    }

    #[test]
    fn max_batch_and_the_zero_copy_threshold_are_kept() {
        let mut q: VecDeque<OutFrame> = [joined(b"a"), joined(b"bb"), split(&[0u8; 100])].into();
        let mut b = SendBatch::empty();
        b.fill(&mut q, 2, 100);
        assert_eq!(b.frames.len(), 2);
        assert_eq!(q.len(), 1);
        assert!(!b.zero_copy, "frames under the threshold go by copy");
        b.settle(b.bytes).for_each(drop);
        b.fill(&mut q, 2, 100);
        assert!(
            b.zero_copy,
            "a frame of 100 data bytes reaches the threshold"
        );
        b.settle(b.bytes).for_each(drop);
        // A joined frame counts its data, not the header room in front of it.
        let mut q: VecDeque<OutFrame> = [joined(&[0u8; 99])].into();
        b.fill(&mut q, 2, 100);
        assert!(
            !b.zero_copy,
            "99 data bytes (131 with the header) stay under 100"
        );
        b.settle(b.bytes).for_each(drop);
        let mut q: VecDeque<OutFrame> = [joined(&[0u8; 100])].into();
        b.fill(&mut q, 2, 100);
        assert!(b.zero_copy);
    }
}
