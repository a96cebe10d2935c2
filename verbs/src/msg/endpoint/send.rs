//! The sending side: accepting messages, fragments into send slots, credits, keepalives.

use std::time::Instant;

use super::super::completion::Posted;
use super::super::error::Error;
use super::super::header::{
    FIRST, HEADER_LEN, Header, KIND_CREDIT, KIND_DATA, LAST, compact_imm, tag_slot,
};
use super::super::setup::KEEPALIVE_LEN;
use super::{Endpoint, KEEPALIVE_ID, OutMsg};
use crate::mr::{MemoryRegion, RemoteRegion};
use crate::wr::{Segment, SendOp, SendRequest};

impl Endpoint {
    /// Whether a new message can be accepted: nothing accepted waits for credits or slots, and
    /// a data credit (one is kept back for credit messages) and a slot are free.
    pub(super) fn can_accept(&self) -> bool {
        self.outgoing.back().is_none_or(OutMsg::posted_all)
            && self.credits >= 2
            && !self.free_slots.is_empty()
    }

    /// Posts bytes `at..at + len` of send slot `idx`, with immediate data `imm` when given.
    pub(super) fn send_slot(
        &mut self,
        idx: u32,
        region: MemoryRegion,
        at: usize,
        len: usize,
        imm: Option<u32>,
    ) -> Result<(), String> {
        let seg = Segment::new(region, at, len).map_err(|e| e.to_string())?;
        let op = match imm {
            Some(imm) => SendOp::SendWithImm(imm),
            None => SendOp::Send,
        };
        let req = SendRequest::new(u64::from(idx), op, self.one_segment(seg));
        match self.qp.post_send([req]) {
            Ok(()) => {
                self.posted_send();
                Ok(())
            }
            Err(e) => {
                for r in e.unposted {
                    for s in r.into_segments() {
                        self.free_slots.push((idx, s.into_region()));
                    }
                }
                Err(format!("posting a send failed: {}", e.error))
            }
        }
    }

    /// Sends fragments of the last accepted message while credits and slots allow.
    pub(super) fn pump(&mut self) {
        while self.failed.is_none() && self.credits >= 2 {
            let frag = self.frag;
            let Some(m) = self.outgoing.back_mut() else {
                return;
            };
            if m.posted_all() {
                return;
            }
            let Some((idx, mut region)) = self.free_slots.pop() else {
                return;
            };
            let n = (m.len - m.off).min(frag);
            let mut flags = 0;
            if !m.started {
                flags |= FIRST;
            }
            if m.off + n == m.len {
                flags |= LAST;
            }
            region[HEADER_LEN..HEADER_LEN + n].copy_from_slice(&m.data[m.off..m.off + n]);
            m.off += n;
            m.started = true;
            m.unacked += 1;
            let (seq, header) = (m.seq, Self::data_header(m.tag, m.len, flags));
            self.send_fragment(idx, region, seq, header, n);
        }
    }

    /// Sends the `n` payload bytes already in slot `idx` (at `HEADER_LEN`), a fragment of
    /// message `seq`, with the credits due: a whole message whose tag the peer's table holds
    /// goes with a compact header in the immediate data (the payload alone on the wire), any
    /// other with `header` written in front of the payload. Takes a data credit; a failed post
    /// fails the connection, which completes the message with the error.
    fn send_fragment(
        &mut self,
        idx: u32,
        mut region: MemoryRegion,
        seq: u64,
        mut header: Header,
        n: usize,
    ) {
        let credits = self.to_return.min(u32::from(u16::MAX)) as u16;
        self.slot_owner[idx as usize] = Some(seq);
        self.to_return -= u32::from(credits);
        self.credits -= 1;
        let slot = tag_slot(header.tag);
        let whole = header.flags == FIRST | LAST;
        let sent = if whole && self.config.compact_headers && self.tx_tags[slot] == Some(header.tag)
        {
            self.send_slot(idx, region, HEADER_LEN, n, Some(compact_imm(credits, slot)))
        } else {
            header.credits = credits;
            header.write(&mut region[..HEADER_LEN]);
            if header.flags & FIRST != 0 {
                // The peer records it when it takes this fragment.
                self.tx_tags[slot] = Some(header.tag);
            }
            self.send_slot(idx, region, 0, HEADER_LEN + n, None)
        };
        if let Err(why) = sent {
            self.fail(why);
        }
    }

    /// A data header of `total` bytes with `tag` and `flags` (credits set when it is sent).
    fn data_header(tag: u64, total: usize, flags: u8) -> Header {
        Header {
            tag,
            total: total as u32,
            credits: 0,
            kind: KIND_DATA,
            flags,
        }
    }

    /// Queues an accepted message behind the others; returns its sequence number.
    fn accept(&mut self, id: u64, tag: u64, data: Vec<u8>, len: usize) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.outgoing.push_back(OutMsg {
            seq,
            id,
            tag,
            data,
            len,
            off: 0,
            started: false,
            unacked: 0,
        });
        seq
    }

    /// Sends a message of `kind` carrying only the credits due; false when no credit or slot
    /// is free.
    pub(super) fn send_control(&mut self, kind: u8) -> bool {
        if self.failed.is_some() || self.credits == 0 {
            return false;
        }
        let Some((idx, mut region)) = self.free_slots.pop() else {
            return false;
        };
        let credits = self.to_return.min(u32::from(u16::MAX)) as u16;
        Header {
            tag: 0,
            total: 0,
            credits,
            kind,
            flags: 0,
        }
        .write(&mut region[..HEADER_LEN]);
        self.slot_owner[idx as usize] = None;
        self.to_return -= u32::from(credits);
        self.credits -= 1;
        if let Err(why) = self.send_slot(idx, region, 0, HEADER_LEN, None) {
            self.fail(why);
            return false;
        }
        true
    }

    /// Returns credits in an explicit message when enough are due, or when the peer may be
    /// nearly out of them.
    pub(super) fn maybe_return_credits(&mut self) {
        if self.failed.is_some() || self.to_return == 0 {
            return;
        }
        let n = self.config.recv_buffers;
        let peer_left = n.saturating_sub(self.held + self.to_return);
        if self.to_return >= (n / 4).max(1) || peer_left <= 2 {
            self.send_control(KIND_CREDIT);
        }
    }

    /// Notes a posted send. The clock is not read here: it costs microseconds in an emulated
    /// guest (an HPET read), once per message. The timers move on the next clock pass instead
    /// (`timers_to`, paced by [`crate::pacer::ClockPacer`]), which their tenths of seconds
    /// allow.
    pub(super) fn posted_send(&mut self) {
        self.sends_out += 1;
        self.sent_since_clock = true;
    }

    /// Notes a completed send (see [`Endpoint::posted_send`] for the clock).
    pub(super) fn send_completed(&mut self) {
        self.sends_out = self.sends_out.saturating_sub(1);
        self.acked_since_clock = true;
    }

    /// Brings the send timers to `now`: a send posted since the last pass counts as sent now,
    /// and a completion since then restarts the wait for acknowledgements.
    pub(super) fn timers_to(&mut self, now: Instant) {
        if self.sent_since_clock {
            self.last_send = now;
        }
        if self.acked_since_clock || self.sends_out == 0 {
            self.waiting_since = None;
        }
        if self.sends_out > 0 && (self.sent_since_clock || self.acked_since_clock) {
            self.waiting_since.get_or_insert(now);
        }
        self.sent_since_clock = false;
        self.acked_since_clock = false;
    }

    /// Fails the connection when sends have been outstanding for the peer timeout with none
    /// completing: the queue pair's own retry limit ends them at about that time, but soft-RoCE
    /// never does for a peer whose queue pair is gone or in the error state.
    pub(super) fn check_acks(&mut self, now: Instant) {
        self.timers_to(now);
        let limit = self.config.peer_timeout;
        if let Some(since) = self.waiting_since {
            if self.failed.is_none() && now.duration_since(since) > limit {
                self.fail(format!(
                    "the peer acknowledged nothing for {limit:?}: it hangs, died or is unreachable"
                ));
            }
        }
    }

    /// Writes a keepalive into the peer's region after `config.keepalive` without a send: an
    /// RDMA WRITE needs no receive buffer, so it goes even without credits, and a peer that is
    /// gone makes it fail with retry exceeded.
    pub(super) fn maybe_keepalive(&mut self, now: Instant) {
        if self.failed.is_some() {
            return;
        }
        self.check_acks(now);
        if self.keepalive_src.is_none() {
            return;
        }
        if self.failed.is_some() || now.duration_since(self.last_send) < self.config.keepalive {
            return;
        }
        let Some(mut src) = self.keepalive_src.take() else {
            return;
        };
        self.keepalive_count += 1;
        src[..KEEPALIVE_LEN].copy_from_slice(&self.keepalive_count.to_le_bytes());
        let to = RemoteRegion {
            len: KEEPALIVE_LEN as u64,
            ..self.keepalive_to
        };
        match self
            .qp
            .post_send([SendRequest::write(KEEPALIVE_ID, src, to)])
        {
            Ok(()) => {
                self.posted_send();
                self.timers_to(now);
            }
            Err(mut e) => {
                if let Some(r) = e.unposted.pop() {
                    self.keepalive_src = r.into_segments().pop().map(Segment::into_region);
                }
                self.fail(format!("posting a keepalive failed: {}", e.error));
            }
        }
    }

    /// Posts `data` (copied into registered send slots) as one message with `tag`.
    pub fn post_send(&mut self, id: u64, tag: u64, data: &[u8]) -> Result<Posted, Error> {
        self.post_send_parts(id, tag, &[data])
    }

    /// Like [`Endpoint::post_send`] for a message given in parts (say a header and a payload).
    /// A message that fits one send slot is gathered straight into it, one copy of each byte;
    /// a longer one is gathered into an owned buffer that is copied into slots as credits
    /// allow.
    pub fn post_send_parts(&mut self, id: u64, tag: u64, parts: &[&[u8]]) -> Result<Posted, Error> {
        self.check_open()?;
        let len = parts.iter().map(|p| p.len()).sum::<usize>();
        self.check_len(len)?;
        if !self.can_accept() {
            self.progress();
            self.check_open()?;
            if !self.can_accept() {
                return Ok(Posted::NoResources(()));
            }
        }
        if len > self.frag {
            return Ok(match self.post_send_buf(id, tag, parts.concat())? {
                Posted::InProgress => Posted::InProgress,
                Posted::NoResources(_) => Posted::NoResources(()),
            });
        }
        // `can_accept` holds: nothing waits before this message, a data credit and a slot
        // are free.
        let Some((idx, mut region)) = self.free_slots.pop() else {
            return Ok(Posted::NoResources(()));
        };
        let mut at = HEADER_LEN;
        for p in parts {
            region[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        let seq = self.accept(id, tag, Vec::new(), len);
        if let Some(m) = self.outgoing.back_mut() {
            // Its only fragment is in the slot: nothing is left for `pump`.
            m.off = len;
            m.started = true;
            m.unacked = 1;
        }
        let header = Self::data_header(tag, len, FIRST | LAST);
        self.send_fragment(idx, region, seq, header, len);
        Ok(Posted::InProgress)
    }

    /// Posts an owned buffer as one message with `tag`. Its bytes are copied into registered
    /// send slots as credits allow (a long message goes as several fragments); the buffer is
    /// freed when the message completes. Refused with the buffer given back
    /// ([`Posted::NoResources`]) while an earlier message still waits for credits or slots, or
    /// none is free.
    pub fn post_send_buf(
        &mut self,
        id: u64,
        tag: u64,
        buf: Vec<u8>,
    ) -> Result<Posted<Vec<u8>>, Error> {
        self.check_open()?;
        self.check_len(buf.len())?;
        if !self.can_accept() {
            self.progress();
            // The same pass may have found the failure: nothing is accepted after it.
            self.check_open()?;
            if !self.can_accept() {
                return Ok(Posted::NoResources(buf));
            }
        }
        let len = buf.len();
        self.accept(id, tag, buf, len);
        self.pump();
        Ok(Posted::InProgress)
    }
}
