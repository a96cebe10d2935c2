//! The receive side of an endpoint: parsing frames out of the receive buffers, serving the
//! peer's requests and replies, and `next`/`consume`.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::frame::{FrameError, HEADER_LEN, Header, Kind};
use crate::shm::AccessError;
use crate::shm::region::RegionKey;

use super::super::completion::Completion;
use super::super::error::Error;
use super::{Chunk, Current, Endpoint, Message};

impl Endpoint {
    pub(super) fn protocol_error(&mut self, e: Error) -> Error {
        self.fail("the peer sent a malformed frame");
        e
    }

    /// Gives `n` stream bytes of a frame of `kind` back to the peer's window, when the peer
    /// counted that kind against it ([`Kind::counts_against_window`]).
    pub(super) fn credit(&mut self, kind: Kind, n: usize) {
        if !kind.counts_against_window() {
            return;
        }
        self.freed += n;
        if self.freed >= self.config.window() / 8 && self.failed.is_none() {
            self.send_credit();
        }
    }

    /// Queues a frame that only returns the freed credit.
    fn send_credit(&mut self) {
        self.credit_frames += 1;
        self.enqueue(Header::new(Kind::Credit, 0), Vec::new(), None);
    }

    /// Returns all freed credit when nothing else is going out to carry it and this end is
    /// about to sleep. A polling end (`next` finding nothing) holds it back: the sender never
    /// waits for it (less than an eighth of the window is held back, and a frame may start
    /// while less than the window is unacknowledged), and a credit frame of its own would wake
    /// a peer thread asleep on the socket for nothing. Measured with `viaduct bench threads
    /// --transport tcp`: returned after 2 ms of polling, such frames woke the peer's sleeping
    /// thread about 250 times in its half-second round, and the p99 of the other thread's
    /// posts rose 1.2-3.5x; held back, 0.9-1.2x.
    pub(super) fn credit_when_idle(&mut self) {
        if self.freed > 0 && self.queue.is_empty() && !self.in_flight && self.failed.is_none() {
            self.send_credit();
        }
    }

    pub(super) fn pop_empty_chunks(&mut self) {
        while self.rx.front().is_some_and(|c| c.left() == 0) {
            if let Some(c) = self.rx.pop_front() {
                self.recycle(c);
            }
        }
    }

    /// Parses inbound bytes until a message is ready for `next` (true) or more bytes are needed
    /// (false). Serves requests, replies and credits on the way.
    pub(super) fn advance(&mut self) -> Result<bool, Error> {
        loop {
            match self.current {
                Current::InPlace { .. } | Current::Assembled { .. } => return Ok(true),
                Current::Assembling { header, filled } => {
                    let need = header.len as usize - filled;
                    if need > 0 {
                        let Some(front) = self.rx.front_mut() else {
                            return Ok(false);
                        };
                        let n = need.min(front.left());
                        self.assembly[filled..filled + n]
                            .copy_from_slice(&front.buf[front.off..front.off + n]);
                        front.off += n;
                        self.pop_empty_chunks();
                        // The bytes left the receive buffers: the sender may refill them.
                        self.credit(header.kind, n);
                        self.current = Current::Assembling {
                            header,
                            filled: filled + n,
                        };
                        continue;
                    }
                    self.current = Current::Idle;
                    if header.kind == Kind::Send {
                        self.current = Current::Assembled {
                            header,
                            consumed: 0,
                        };
                        return Ok(true);
                    }
                    let payload = std::mem::take(&mut self.assembly);
                    let r = self.on_control(header, &payload);
                    self.assembly = payload;
                    r?;
                }
                Current::Idle => {
                    let decoded = match self.header_in_place() {
                        // The usual case: the whole header lies in the front buffer.
                        Some(decoded) => decoded,
                        None => {
                            if !self.read_header() {
                                return Ok(false);
                            }
                            let raw = self.header_bytes;
                            self.header_have = 0;
                            Header::decode(&raw, self.config.max_frame)
                        }
                    };
                    let header = match decoded {
                        Ok(h) => h,
                        Err(e) => return Err(self.protocol_error(Error::Frame(e))),
                    };
                    if let Err(e) = self.decoder.accept(&header) {
                        return Err(self.protocol_error(Error::Frame(e)));
                    }
                    if header.kind.carries_credit() {
                        self.unacked = self.unacked.saturating_sub(header.offset as usize);
                    }
                    self.credit(header.kind, HEADER_LEN);
                    let len = header.len as usize;
                    self.pop_empty_chunks();
                    let in_front = self.rx.front().is_some_and(|c| c.left() >= len);
                    if len > 0 && in_front {
                        if header.kind == Kind::Send {
                            self.current = Current::InPlace {
                                header,
                                consumed: 0,
                            };
                            return Ok(true);
                        }
                        let Some(front) = self.rx.pop_front() else {
                            continue;
                        };
                        let r = self.on_control(header, &front.buf[front.off..front.off + len]);
                        let mut front = front;
                        front.off += len;
                        if front.left() > 0 {
                            self.rx.push_front(front);
                        } else {
                            self.recycle(front);
                        }
                        self.credit(header.kind, len);
                        r?;
                    } else {
                        // Spans receive buffers (or is empty): reassemble. The length was
                        // checked against `max_frame` before this allocation.
                        self.assembly.clear();
                        self.assembly.resize(len, 0);
                        self.current = Current::Assembling { header, filled: 0 };
                    }
                }
            }
        }
    }

    /// Decodes the next header where it lies when no part of it was collected yet and the
    /// front receive buffer holds all of it (no copy); `None` otherwise (see
    /// [`Endpoint::read_header`]).
    #[inline]
    fn header_in_place(&mut self) -> Option<Result<Header, FrameError>> {
        if self.header_have != 0 {
            return None;
        }
        let front = self.rx.front_mut()?;
        let bytes = front.buf.get(front.off..front.off + HEADER_LEN)?;
        let decoded = Header::decode(bytes, self.config.max_frame);
        front.off += HEADER_LEN;
        Some(decoded)
    }

    /// Collects header bytes from the receive buffers; true once all 32 are there.
    pub(super) fn read_header(&mut self) -> bool {
        while self.header_have < HEADER_LEN {
            self.pop_empty_chunks();
            let Some(front) = self.rx.front_mut() else {
                return false;
            };
            let n = (HEADER_LEN - self.header_have).min(front.left());
            self.header_bytes[self.header_have..self.header_have + n]
                .copy_from_slice(&front.buf[front.off..front.off + n]);
            front.off += n;
            self.header_have += n;
        }
        self.pop_empty_chunks();
        true
    }

    /// Acts on a frame that is not a message for the user.
    pub(super) fn on_control(&mut self, h: Header, payload: &[u8]) -> Result<(), Error> {
        match h.kind {
            // Its credit was taken when the header was parsed.
            Kind::Credit => {}
            Kind::Write => {
                let status = match self
                    .regions
                    .range_mut(RegionKey(h.key), h.offset, payload.len())
                {
                    Ok(dst) => {
                        dst.copy_from_slice(payload);
                        0
                    }
                    Err(e) => e.code(),
                };
                let mut r = Header::new(Kind::WriteAck, 0);
                r.tag = h.tag;
                r.status = status;
                self.enqueue(r, Vec::new(), None);
            }
            Kind::Read => {
                let mut r = Header::new(Kind::ReadReply, 0);
                r.tag = h.tag;
                let want = if payload.len() == 8 {
                    u64::from_le_bytes(payload.try_into().unwrap_or([0xFF; 8]))
                } else {
                    u64::MAX
                };
                let max = self.config.max_frame.min(self.peer_max_frame) as u64;
                let data = if want > max {
                    r.status = AccessError::OutOfBounds.code();
                    Vec::new()
                } else {
                    match self
                        .regions
                        .range(RegionKey(h.key), h.offset, want as usize)
                    {
                        Ok(src) => src.to_vec(),
                        Err(e) => {
                            r.status = e.code();
                            Vec::new()
                        }
                    }
                };
                self.enqueue(r, data, None);
            }
            Kind::WriteAck | Kind::ReadReply => {
                let Some(mut op) = self.rma_out.remove(&h.tag) else {
                    if self.failed.is_some() {
                        // A reply read after the failure: its operation already completed
                        // with the failure.
                        return Ok(());
                    }
                    return Err(self.protocol_error(Error::Protocol(format!(
                        "reply for unknown operation {}",
                        h.tag
                    ))));
                };
                let result = match AccessError::from_code(h.status) {
                    Some(e) => Err(Error::RemoteAccess(e)),
                    None if h.status != 0 => {
                        return Err(self.protocol_error(Error::Protocol(format!(
                            "unknown reply status {}",
                            h.status
                        ))));
                    }
                    None if h.kind == Kind::ReadReply => match op.buf.as_mut() {
                        Some(b) if b.len() == payload.len() => {
                            b.copy_from_slice(payload);
                            Ok(payload.len())
                        }
                        _ => {
                            return Err(self.protocol_error(Error::Protocol(
                                "read reply of the wrong length".into(),
                            )));
                        }
                    },
                    None => Ok(op.len),
                };
                self.completions.push_back(Completion {
                    id: op.id,
                    op: op.op,
                    result,
                    buffer: op.buf,
                });
            }
            Kind::Close => self.fail("the peer closed the connection"),
            Kind::Send | Kind::Rendezvous | Kind::Fragment => {
                return Err(self.protocol_error(Error::Protocol(format!(
                    "frame kind {:?} is not used over TCP",
                    h.kind
                ))));
            }
        }
        Ok(())
    }

    /// Borrows the next inbound message in place: the unconsumed bytes of the current message,
    /// inside a receive buffer of the provided-buffer ring, or inside the reassembly buffer when
    /// the message spans receive buffers. `Ok(None)` when no whole message has arrived. After
    /// the peer failed, messages that arrived before still come out, then the failure is
    /// returned as [`Error::PeerFailed`].
    // `next`/`consume` are the method contract's names; this is not an iterator (the slice
    // borrows the endpoint until `consume`).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Message<'_>>, Error> {
        self.check_issuer()?;
        if self.lent.is_some() {
            // The current message is out on a lease: nothing comes before it is given back.
            self.progress();
            self.flush_quietly();
            return Ok(None);
        }
        if !matches!(
            self.current,
            Current::InPlace { .. } | Current::Assembled { .. }
        ) {
            if self.quiet() {
                // Nothing in the ring and nothing to send: a full progress pass would only
                // receive (one poll of a busy receiver costs the `recv` alone, as in a plain
                // socket loop). Nothing arrived and nothing lies in the receive buffers: no
                // frame to parse and nothing to flush (the queue is empty).
                if !self.recv_now()
                    && self.rx.is_empty()
                    && self.failed.is_none()
                    && self.pending_error.is_none()
                {
                    return Ok(None);
                }
            } else {
                self.progress();
            }
            if let Some(e) = self.pending_error.take() {
                return Err(e);
            }
            if !self.advance()? {
                self.flush_quietly();
                self.check_open()?;
                return Ok(None);
            }
            self.flush_quietly();
        }
        Ok(match self.current {
            Current::InPlace { header, consumed } => self.rx.front().map(|c| Message {
                tag: header.tag,
                data: &c.buf[c.off + consumed..c.off + header.len as usize],
            }),
            Current::Assembled { header, consumed } => Some(Message {
                tag: header.tag,
                data: &self.assembly[consumed..header.len as usize],
            }),
            _ => None,
        })
    }

    /// Like [`Endpoint::next`], followed by the messages that lie whole in the same receive
    /// buffer right behind the current one (sends only, in order), at most `max` in all,
    /// every one borrowed in place. [`Endpoint::consume`] still applies to the first; once it
    /// is consumed whole, `next` brings the second to the head, and so on. The look ahead
    /// stops at a frame that is not a send, at a header or payload that crosses into the next
    /// receive buffer, and at the end of what has arrived.
    pub fn next_queued(&mut self, max: usize) -> Result<Vec<Message<'_>>, Error> {
        if max == 0 || self.next()?.is_none() {
            return Ok(Vec::new());
        }
        let this = &*self;
        let Some(front) = this.rx.front() else {
            return Ok(Vec::new());
        };
        let (first, mut at) = match this.current {
            Current::InPlace { header, consumed } => {
                let end = front.off + header.len as usize;
                (
                    Message {
                        tag: header.tag,
                        data: &front.buf[front.off + consumed..end],
                    },
                    end,
                )
            }
            Current::Assembled { header, consumed } => (
                Message {
                    tag: header.tag,
                    data: &this.assembly[consumed..header.len as usize],
                },
                front.off,
            ),
            _ => return Ok(Vec::new()),
        };
        let mut out = vec![first];
        let bytes: &[u8] = &front.buf;
        while out.len() < max {
            let Some(raw) = bytes.get(at..at + HEADER_LEN) else {
                break;
            };
            let Ok(h) = Header::decode(raw, this.config.max_frame) else {
                break;
            };
            let start = at + HEADER_LEN;
            let Some(data) = bytes.get(start..start + h.len as usize) else {
                break;
            };
            if h.kind != Kind::Send {
                break;
            }
            out.push(Message { tag: h.tag, data });
            at = start + h.len as usize;
        }
        Ok(out)
    }

    /// Whether a progress pass would only receive ([`super::Config::immediate_io`], nothing
    /// in the ring or queued, the connection up): then `next` receives alone.
    fn quiet(&self) -> bool {
        self.config.immediate_io
            && self.failed.is_none()
            && self.queue.is_empty()
            && self.ring.idle()
    }

    pub(super) fn flush_quietly(&mut self) {
        if let Err(e) = self.flush() {
            self.engine_failed(&e);
        }
    }

    /// Gives back the first `n` bytes shown by `next`. Once a message is consumed whole (for an
    /// empty message: `consume(0)`), its receive buffer is recycled when nothing else lies in
    /// it, and its bytes are credited back to the sender.
    pub fn consume(&mut self, n: usize) -> Result<(), Error> {
        self.check_issuer()?;
        if self.lent.is_some() {
            // The current message is out on a lease: only its return consumes it.
            return Err(Error::ConsumeBeyond {
                requested: n,
                available: 0,
            });
        }
        match self.current {
            Current::InPlace { header, consumed } => {
                let len = header.len as usize;
                if consumed + n > len {
                    return Err(Error::ConsumeBeyond {
                        requested: n,
                        available: len - consumed,
                    });
                }
                if consumed + n == len {
                    if let Some(front) = self.rx.front_mut() {
                        front.off += len;
                    }
                    self.pop_empty_chunks();
                    self.current = Current::Idle;
                    self.credit(header.kind, len);
                    self.flush_quietly();
                } else {
                    self.current = Current::InPlace {
                        header,
                        consumed: consumed + n,
                    };
                }
                Ok(())
            }
            Current::Assembled { header, consumed } => {
                let len = header.len as usize;
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
                        header,
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

/// Numbers the leases of every endpoint (a lease goes back only to the endpoint that lent it).
static LEASES: AtomicU64 = AtomicU64::new(1);

/// The current inbound message lent out of its endpoint ([`Endpoint::lend`]): it owns the
/// receive buffer the message lies in (a buffer of the provided-buffer ring, or an own receive
/// buffer, with any bytes behind the message), or the reassembly buffer for a message that
/// spanned receive buffers, and shows the message's unconsumed bytes where they were received
/// (no copy). The endpoint reads nothing more from the connection until the lease comes back
/// ([`Endpoint::give_back`]); dropped instead (say after its endpoint closed), it frees its
/// memory.
pub struct Lease {
    id: u64,
    mem: Lent,
    range: Range<usize>,
}

enum Lent {
    Chunk(Chunk),
    Assembly(Vec<u8>),
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .field("len", &self.range.len())
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for Lease {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.mem {
            Lent::Chunk(c) => &c.buf[self.range.clone()],
            Lent::Assembly(v) => &v[self.range.clone()],
        }
    }
}

impl Endpoint {
    /// Lends the current inbound message (the one [`Endpoint::next`] shows) out of the
    /// endpoint: its unconsumed bytes stay where they were received, owned by the returned
    /// [`Lease`], which may outlive this borrow, the endpoint's lock and the endpoint itself.
    /// Until the lease is given back ([`Endpoint::give_back`]) `next` shows nothing and
    /// `consume` refuses; sends, completions and the peer's requests go on. `Ok(None)` when no
    /// message is current, or one is lent already.
    pub fn lend(&mut self) -> Result<Option<Lease>, Error> {
        self.check_issuer()?;
        if self.lent.is_some() {
            return Ok(None);
        }
        let (mem, range) = match self.current {
            Current::InPlace { header, consumed } => {
                let Some(chunk) = self.rx.pop_front() else {
                    return Ok(None);
                };
                let range = chunk.off + consumed..chunk.off + header.len as usize;
                (Lent::Chunk(chunk), range)
            }
            Current::Assembled { header, consumed } => {
                let v = std::mem::take(&mut self.assembly);
                let at = v.as_ptr() as usize;
                self.lent_assembly = Some(at..at + v.len());
                (Lent::Assembly(v), consumed..header.len as usize)
            }
            _ => return Ok(None),
        };
        let id = LEASES.fetch_add(1, Ordering::Relaxed);
        self.lent = Some(id);
        Ok(Some(Lease { id, mem, range }))
    }

    /// Takes back a lease of [`Endpoint::lend`]: the message is consumed whole (its buffer
    /// recycled, its bytes credited to the sender) and `next` goes on with the bytes behind
    /// it. A lease this endpoint did not lend is dropped.
    pub fn give_back(&mut self, lease: Lease) -> Result<(), Error> {
        if self.lent != Some(lease.id) {
            return Ok(());
        }
        self.lent = None;
        self.lent_assembly = None;
        let rest = lease.range.len();
        match lease.mem {
            Lent::Chunk(c) => self.rx.push_front(c),
            Lent::Assembly(v) => self.assembly = v,
        }
        self.consume(rest)
    }

    /// Whether a message is out on a lease ([`Endpoint::lend`]).
    pub fn is_lent(&self) -> bool {
        self.lent.is_some()
    }
}
