//! The receiving side: the receive ring, messages shown in place or reassembled, consuming.

use super::super::completion::Message;
use super::super::error::Error;
use super::super::header::{
    FIRST, HEADER_LEN, Header, KIND_CLOSE, KIND_CREDIT, KIND_DATA, LAST, read_compact, tag_slot,
};
use super::super::lease::Lease;
use super::{Current, Endpoint, RECV_BASE, RxBuf};
use crate::mr::MemoryRegion;
use crate::wr::{RecvRequest, Segment};

impl Endpoint {
    pub(super) fn on_receive(
        &mut self,
        idx: u32,
        region: MemoryRegion,
        byte_len: usize,
        imm: Option<u32>,
    ) {
        let (header, at) = match imm {
            // A compact header: a whole data message whose tag the table holds.
            Some(imm) => match read_compact(imm) {
                Ok((credits, slot)) => match self.rx_tags[slot] {
                    Some(tag) => (
                        Header {
                            tag,
                            total: byte_len as u32,
                            credits,
                            kind: KIND_DATA,
                            flags: FIRST | LAST,
                        },
                        0,
                    ),
                    None => {
                        return self.violation("a compact header names a tag never sent");
                    }
                },
                Err(e) => {
                    self.fail(e.to_string());
                    return;
                }
            },
            None => match Header::read(&region[..byte_len.min(region.len())]) {
                Ok(h) => (h, HEADER_LEN),
                Err(e) => {
                    self.fail(e.to_string());
                    return;
                }
            },
        };
        self.credits += u32::from(header.credits);
        match header.kind {
            KIND_CREDIT => self.repost(idx, region),
            KIND_CLOSE => {
                if let Some(pool) = &self.pool {
                    let _ = pool.repost(idx, region);
                }
                self.peer_closed = true;
                self.fail("the peer closed the connection".to_owned());
            }
            _ => {
                if at == HEADER_LEN && header.flags & FIRST != 0 {
                    // As the sender recorded it when it sent this header.
                    self.rx_tags[tag_slot(header.tag)] = Some(header.tag);
                }
                let len = byte_len - at;
                if let Some(pool) = self.pool.as_ref().filter(|p| p.low()) {
                    // The shared pool runs low: copy the fragment out and give its buffer
                    // back at once, so messages not consumed yet cannot hold the pool empty.
                    // The peer's credit stays held until the copy is consumed, as the buffer's
                    // would: a receiver that does not consume still stops its peers.
                    let copy = region[at..at + len].to_vec();
                    if let Err(why) = pool.repost(idx, region) {
                        self.fail(why);
                    }
                    self.held += 1;
                    self.rx.push_back(RxBuf {
                        buf: None,
                        copy,
                        header,
                        at: 0,
                        len,
                    });
                    return;
                }
                self.held += 1;
                self.rx.push_back(RxBuf {
                    buf: Some((idx, region)),
                    copy: Vec::new(),
                    header,
                    at,
                    len,
                });
            }
        }
    }

    /// Posts receive buffer `idx` again; its credit goes back to the peer. A shared pool's
    /// buffer goes back to the pool even after a failure (the other endpoints use it).
    pub(super) fn repost(&mut self, idx: u32, region: MemoryRegion) {
        if let Some(pool) = &self.pool {
            match pool.repost(idx, region) {
                Ok(()) if self.failed.is_none() => self.to_return += 1,
                Ok(()) => {}
                Err(why) => self.fail(why),
            }
            return;
        }
        if self.failed.is_some() {
            return;
        }
        let segments = self.one_segment(Segment::whole(region));
        match self.qp.post_recv([RecvRequest::with_segments(
            RECV_BASE | u64::from(idx),
            segments,
        )]) {
            Ok(()) => self.to_return += 1,
            Err(e) => self.fail(format!("re-posting a receive buffer failed: {}", e.error)),
        }
    }

    /// Gives a held receive buffer back to the ring (or the pool).
    pub(super) fn release(&mut self, idx: u32, region: MemoryRegion) {
        self.held = self.held.saturating_sub(1);
        self.repost(idx, region);
    }

    /// Done with fragment `b`: its buffer goes back, or, for a copy (whose buffer went back
    /// when it was made), its credit.
    fn release_rx(&mut self, b: RxBuf) {
        match b.buf {
            Some((idx, region)) => self.release(idx, region),
            None => {
                self.held = self.held.saturating_sub(1);
                if self.failed.is_none() {
                    self.to_return += 1;
                }
            }
        }
    }

    pub(super) fn shown(&self) -> bool {
        matches!(
            self.current,
            Current::InPlace { .. } | Current::Assembled { .. }
        )
    }

    /// Moves to the next inbound message: in place when it fits one buffer, else copies the
    /// fragments that arrived into the reassembly buffer.
    pub(super) fn advance(&mut self) {
        loop {
            match self.current {
                Current::InPlace { .. } | Current::Assembled { .. } => return,
                Current::Idle => {
                    let Some(b) = self.rx.front() else { return };
                    let (h, len) = (b.header, b.len);
                    let total = h.total as usize;
                    if h.flags & FIRST == 0 {
                        return self.violation("a message continues that never started");
                    }
                    if total > self.config.max_message {
                        return self.violation("a message longer than the maximum");
                    }
                    if h.flags & LAST != 0 {
                        if len != total {
                            return self.violation("a message's length differs from its header");
                        }
                        self.current = Current::InPlace { consumed: 0 };
                        return;
                    }
                    if len == 0 || len >= total {
                        return self.violation("a first fragment of a wrong length");
                    }
                    self.assembly.clear();
                    self.assembly.reserve(total);
                    self.current = Current::Assembling { tag: h.tag, total };
                }
                Current::Assembling { tag, total } => {
                    let Some(b) = self.rx.pop_front() else { return };
                    let first = b.header.flags & FIRST != 0;
                    if first != self.assembly.is_empty()
                        || b.header.tag != tag
                        || b.header.total as usize != total
                        || self.assembly.len() + b.len > total
                    {
                        return self.violation("fragments of a message do not fit together");
                    }
                    self.assembly.extend_from_slice(b.payload());
                    let last = b.header.flags & LAST != 0;
                    self.release_rx(b);
                    if last != (self.assembly.len() == total) {
                        return self.violation("a message's fragments do not add up to it");
                    }
                    if last {
                        self.current = Current::Assembled { tag, consumed: 0 };
                        return;
                    }
                }
            }
        }
    }

    /// The current inbound message: its tag and the bytes not consumed yet, in place in a
    /// registered receive buffer (or the reassembly buffer, see [the module docs](crate::msg)).
    /// `Ok(None)` when no whole message is there yet; after a failure, the messages that had
    /// arrived come out first, then the failure.
    // Named after the method contract's `next`, not an iterator: the item borrows the endpoint.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Message<'_>>, Error> {
        if self.lent.is_some() {
            // Lent under the method contract: nothing shows until the lease comes back (the
            // failure does, for a caller that waits on it).
            self.progress();
            if self.lent.is_some() {
                self.check_open()?;
                return Ok(None);
            }
        }
        if !self.shown() {
            self.progress();
            self.advance();
            if !self.shown() {
                self.check_open()?;
                return Ok(None);
            }
        }
        Ok(match self.current {
            Current::InPlace { consumed } => self.rx.front().map(|b| Message {
                tag: b.header.tag,
                data: &b.payload()[consumed..],
            }),
            Current::Assembled { tag, consumed } => Some(Message {
                tag,
                data: &self.assembly[consumed..],
            }),
            _ => None,
        })
    }

    /// Gives back `n` bytes of the current message; once it is consumed whole, its receive
    /// buffer is posted again (and its credit goes back to the peer).
    pub fn consume(&mut self, n: usize) -> Result<(), Error> {
        match self.current {
            Current::InPlace { consumed } => {
                let len = self.rx.front().map_or(0, |b| b.len);
                if consumed + n > len {
                    return Err(Error::ConsumeBeyond {
                        requested: n,
                        available: len - consumed,
                    });
                }
                if consumed + n < len {
                    self.current = Current::InPlace {
                        consumed: consumed + n,
                    };
                    return Ok(());
                }
                self.current = Current::Idle;
                if let Some(b) = self.rx.pop_front() {
                    self.release_rx(b);
                }
                self.maybe_return_credits();
                Ok(())
            }
            Current::Assembled { tag, consumed } => {
                let len = self.assembly.len();
                if consumed + n > len {
                    return Err(Error::ConsumeBeyond {
                        requested: n,
                        available: len - consumed,
                    });
                }
                self.current = if consumed + n == len {
                    Current::Idle
                } else {
                    Current::Assembled {
                        tag,
                        consumed: consumed + n,
                    }
                };
                Ok(())
            }
            _ => Err(Error::ConsumeBeyond {
                requested: n,
                available: 0,
            }),
        }
    }
}

impl Endpoint {
    /// Takes the leases that came home: their buffers are posted again and the peer's credits
    /// become due. Returns how many came.
    pub(super) fn take_returns(&mut self) -> usize {
        let back = self.returns.take();
        let n = back.len();
        for b in back {
            self.leases_out = self.leases_out.saturating_sub(1);
            if self.lent == Some(b.serial) {
                self.lent = None;
            }
            match b.buf {
                Some((idx, region)) => self.release(idx, region),
                None if b.credit => {
                    self.held = self.held.saturating_sub(1);
                    if self.failed.is_none() {
                        self.to_return += 1;
                    }
                }
                None => {}
            }
        }
        n
    }

    /// Lends the current inbound message out of the endpoint, whole or its unconsumed rest:
    /// the [`Lease`] owns the registered receive buffer it landed in, and the endpoint moves
    /// on to the next message (`next` shows it; a lease does not hold the inbound). The buffer
    /// is posted again, and the peer's credit for it returned, once the lease comes back
    /// (dropped, or [`Endpoint::give_back`]). `Ok(None)` when no whole message is there yet;
    /// after a failure, the messages that had arrived are lent first, then the failure.
    ///
    /// With a shared [`ReceivePool`](super::super::ReceivePool) running low (fewer than a
    /// quarter of its buffers posted) the message is lent as a copy: the one made when it
    /// arrived while the pool was low, or one made now; its buffer went back to the pool at
    /// once, so leases cannot hold the pool empty, while the peer's credit stays held until
    /// the lease comes back. A message that spanned receive buffers is lent
    /// in the reassembly buffer (taken, not copied; its receive buffers went back already).
    pub fn lease(&mut self) -> Result<Option<Lease>, Error> {
        if !self.shown() {
            self.progress();
            self.advance();
            if !self.shown() {
                self.check_open()?;
                return Ok(None);
            }
        }
        let serial = self.next_lease;
        let lease = match self.current {
            Current::InPlace { consumed } => {
                let Some(b) = self.rx.pop_front() else {
                    self.current = Current::Idle;
                    return Ok(None);
                };
                self.current = Current::Idle;
                let tag = b.header.tag;
                match b.buf {
                    Some((idx, region)) => match self.pool.clone() {
                        Some(pool) if pool.low() => {
                            let copy = region[b.at + consumed..b.at + b.len].to_vec();
                            if let Err(why) = pool.repost(idx, region) {
                                self.fail(why);
                            }
                            Lease::copy(tag, copy, true, serial, &self.returns)
                        }
                        pool => Lease::in_place(
                            tag,
                            (idx, region),
                            b.at + consumed,
                            b.len - consumed,
                            serial,
                            &self.returns,
                            pool,
                        ),
                    },
                    None => {
                        let mut copy = b.copy;
                        copy.truncate(b.len);
                        copy.drain(..consumed);
                        Lease::copy(tag, copy, true, serial, &self.returns)
                    }
                }
            }
            Current::Assembled { tag, consumed } => {
                self.current = Current::Idle;
                let mut data = std::mem::take(&mut self.assembly);
                data.drain(..consumed);
                Lease::copy(tag, data, false, serial, &self.returns)
            }
            _ => return Ok(None),
        };
        self.next_lease += 1;
        self.leases_out += 1;
        Ok(Some(lease))
    }

    /// Takes back a lease of this endpoint at once (as its drop does, without waiting for
    /// the next pass): its buffer is posted again and credits go back to the peer when due.
    /// A lease of another endpoint goes back to its own.
    pub fn give_back(&mut self, lease: Lease) {
        drop(lease);
        self.take_returns();
        self.maybe_return_credits();
    }

    /// Leases out of this endpoint that have not come back yet.
    pub fn leases_out(&self) -> usize {
        self.leases_out as usize
    }

    /// Lends the current inbound message under the method contract: as [`Endpoint::lease`],
    /// but `next` shows nothing until this lease comes back.
    pub(crate) fn lend_holding(&mut self) -> Result<Option<Lease>, Error> {
        if self.lent.is_some() {
            self.progress();
            if self.lent.is_some() {
                self.check_open()?;
                return Ok(None);
            }
        }
        let lease = self.lease()?;
        if let Some(l) = &lease {
            self.lent = Some(l.serial());
        }
        Ok(lease)
    }
}
