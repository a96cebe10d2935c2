//! The receive side of an endpoint: records out of the inbound ring, the peer's requests and
//! replies, long messages, and `next`/`consume`.

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::copy::copy;
use crate::frame::{FLAG_FIRST, Header, Kind};

use super::super::completion::Completion;
use super::super::error::{AccessError, Error};
use super::super::region::RegionKey;
use super::super::ring::{Peek, Record};
use super::super::segment::{LINE, Segment};
use super::{Endpoint, Inbound, Message, OwedReply, u64_le};

impl Endpoint {
    /// Fails the connection on a record that breaks the protocol; the error names the peer
    /// process.
    pub(super) fn protocol_error(&mut self, what: String) -> Error {
        self.fail("the peer broke the ring protocol");
        Error::Protocol(format!("from peer process {}: {what}", self.peer_pid))
    }

    pub(super) fn reply(&mut self, header: Header, data: &[u8]) {
        if self.owed.is_empty() && self.put_record(header, &[data]) {
            return;
        }
        self.owed.push_back(OwedReply {
            header,
            data: data.to_vec(),
        });
    }

    /// Releases the ring space up to `rec` to the peer. A peer seen asleep is woken at once;
    /// otherwise the fenced check (a memory fence, which would sit between a received message
    /// and the reply on a ping-pong's path) is owed and made by the next post, empty `next` or
    /// `poll`, or `wait`, whichever comes first ([`Endpoint::settle_wake`]). A peer that
    /// went to sleep in that window is woken then, or wakes by its own timed wait.
    pub(super) fn release(&mut self, rec: &Record) {
        self.rx.release(rec);
        if self.peer_sleeping() {
            self.notify_peer();
        } else {
            self.wake_owed = true;
        }
    }

    pub(super) fn payload(rec: &Record) -> &[u8] {
        // SAFETY: the record was published (acquire on its stamp) and is not released yet: the
        // producer does not write its bytes until the consumer releases it. The returned borrow
        // never outlives the caller's use before `release`.
        unsafe { std::slice::from_raw_parts(rec.payload.as_ptr(), rec.header.len as usize) }
    }

    /// Processes inbound records until a message is ready for `next` (true) or the ring is
    /// empty (false).
    pub(super) fn advance_inbound(&mut self) -> Result<bool, Error> {
        loop {
            if matches!(
                self.inbound,
                Inbound::Ring { .. } | Inbound::Assembled { .. }
            ) {
                return Ok(true);
            }
            let rec = match self.rx.peek() {
                Peek::Empty => return Ok(false),
                Peek::Corrupt(what) => return Err(self.protocol_error(what)),
                Peek::Record(r) => r,
            };
            let h = rec.header;
            if h.seq != self.recv_seq {
                return Err(self.protocol_error(format!(
                    "record sequence {} where {} was expected",
                    h.seq, self.recv_seq
                )));
            }
            self.recv_seq = self.recv_seq.wrapping_add(1);
            let assembling = matches!(self.inbound, Inbound::Assembling { .. });
            if assembling && h.kind != Kind::Fragment {
                return Err(self.protocol_error("a record interrupts a chunked message".into()));
            }
            match h.kind {
                Kind::Send => {
                    self.inbound = Inbound::Ring { rec, consumed: 0 };
                    return Ok(true);
                }
                Kind::Rendezvous => self.on_rendezvous(&rec)?,
                Kind::Fragment => self.on_fragment(&rec)?,
                Kind::Write => {
                    let status = {
                        let data = Self::payload(&rec);
                        match self
                            .regions
                            .range_mut(RegionKey(h.key), h.offset, data.len())
                        {
                            Ok(dst) => {
                                copy(dst, data);
                                0
                            }
                            Err(e) => e.code(),
                        }
                    };
                    self.release(&rec);
                    let mut r = Header::new(Kind::WriteAck, 0);
                    r.tag = h.tag;
                    r.status = status;
                    self.reply(r, &[]);
                }
                Kind::Read => {
                    let want = u64_le(Self::payload(&rec), 0);
                    self.release(&rec);
                    let mut r = Header::new(Kind::ReadReply, 0);
                    r.tag = h.tag;
                    let data = if h.len != 8 || want > self.config.eager_limit as u64 {
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
                    self.reply(r, &data);
                }
                Kind::WriteAck | Kind::ReadReply => self.on_reply(&rec)?,
                Kind::Close | Kind::Credit => {
                    self.release(&rec);
                }
            }
        }
    }

    pub(super) fn on_rendezvous(&mut self, rec: &Record) -> Result<(), Error> {
        let p = Self::payload(rec);
        if p.len() != 16 {
            return Err(self.protocol_error("rendezvous record of the wrong size".into()));
        }
        let (addr, len) = (u64_le(p, 0), u64_le(p, 8));
        if len > self.config.max_message as u64 {
            return Err(self.protocol_error(format!("rendezvous of {len} bytes is too long")));
        }
        let len = len as usize;
        self.assembly_start = place_like(&mut self.assembly, addr, len);
        self.copy_long(addr, len)?;
        let tag = rec.header.tag;
        self.rx.release(rec);
        self.seg.control().rings[1 - self.side]
            .consumer
            .rendezvous_done
            .fetch_add(1, Ordering::Release);
        self.notify_peer();
        self.inbound = Inbound::Assembled {
            tag,
            len,
            consumed: 0,
        };
        Ok(())
    }

    pub(super) fn on_fragment(&mut self, rec: &Record) -> Result<(), Error> {
        let h = rec.header;
        if h.flags & FLAG_FIRST != 0 {
            if matches!(self.inbound, Inbound::Assembling { .. }) {
                return Err(self.protocol_error("a new chunked message starts inside one".into()));
            }
            if h.offset > self.config.max_message as u64 {
                return Err(self
                    .protocol_error(format!("chunked message of {} bytes is too long", h.offset)));
            }
            // Every chunk's payload lies at the same offset within a line (records start on
            // lines). The sender sized its first chunk so that the later ones start at that
            // offset in its buffer too (`first_chunk` in the endpoint module); placed so that
            // they land at it as well, the copies out of the ring move whole lines. (A message
            // of one chunk is placed like that chunk.)
            let first = Self::payload(rec).as_ptr() as u64;
            let like = if (h.len as u64) < h.offset {
                first.wrapping_sub(u64::from(h.len))
            } else {
                first
            };
            self.assembly_start = place_like(&mut self.assembly, like, h.offset as usize);
            self.inbound = Inbound::Assembling {
                tag: h.tag,
                total: h.offset as usize,
                filled: 0,
            };
        }
        let Inbound::Assembling { tag, total, filled } = self.inbound else {
            return Err(self.protocol_error("a chunk arrives outside a chunked message".into()));
        };
        let n = h.len as usize;
        if filled + n > total {
            return Err(self.protocol_error("chunks overrun their message".into()));
        }
        let at = self.assembly_start + filled;
        copy(&mut self.assembly[at..at + n], Self::payload(rec));
        self.release(rec);
        let filled = filled + n;
        self.inbound = if filled == total {
            Inbound::Assembled {
                tag,
                len: total,
                consumed: 0,
            }
        } else {
            Inbound::Assembling { tag, total, filled }
        };
        Ok(())
    }

    pub(super) fn on_reply(&mut self, rec: &Record) -> Result<(), Error> {
        let h = rec.header;
        let Some(mut op) = self.rma_out.remove(&h.tag) else {
            return Err(self.protocol_error(format!("reply for unknown operation {}", h.tag)));
        };
        let result = match AccessError::from_code(h.status) {
            Some(e) => Err(Error::RemoteAccess(e)),
            None if h.status != 0 => {
                return Err(self.protocol_error(format!("unknown reply status {}", h.status)));
            }
            None if h.kind == Kind::ReadReply => {
                let data = Self::payload(rec);
                match op.buf.as_mut() {
                    Some(b) if b.len() == data.len() => {
                        copy(b, data);
                        Ok(data.len())
                    }
                    _ => return Err(self.protocol_error("read reply of the wrong length".into())),
                }
            }
            None => Ok(op.len),
        };
        self.release(rec);
        self.completions.push_back(Completion {
            id: op.id,
            op: op.op,
            result,
            buffer: op.buf,
        });
        Ok(())
    }

    /// Borrows the next inbound message in place: the unconsumed bytes of the current message,
    /// inside the inbound ring (eager messages) or the reassembly buffer (long messages).
    /// `Ok(None)` when nothing has arrived. Processes the peer's emulated RDMA requests and
    /// replies on the way. After the peer failed, messages that arrived before still come out,
    /// then the failure is returned as [`Error::PeerFailed`].
    // `next`/`consume` are the method contract's names; this is not an iterator (the slice
    // borrows the endpoint until `consume`).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Message<'_>>, Error> {
        if self.lent.is_some() {
            // The current message is out on a lease: nothing comes before it is given back.
            self.progress();
            self.settle_wake();
            return Ok(None);
        }
        if !self.advance_inbound()? {
            if self.owed.is_empty() && self.chunked_out.is_empty() {
                self.maybe_check_liveness();
            } else {
                self.progress();
            }
            self.settle_wake();
            self.check_open()?;
            return Ok(None);
        }
        Ok(Some(match &self.inbound {
            Inbound::Ring { rec, consumed } => Message {
                tag: rec.header.tag,
                data: &Self::payload(rec)[*consumed..],
            },
            Inbound::Assembled { tag, len, consumed } => Message {
                tag: *tag,
                data: &self.assembly[self.assembly_start + consumed..self.assembly_start + len],
            },
            _ => return Ok(None),
        }))
    }

    /// Like [`Endpoint::next`], followed by the messages queued in the inbound ring right
    /// behind the current one (eager sends already published, in order), at most `max` in
    /// all, every one borrowed in place. [`Endpoint::consume`] still applies to the first;
    /// once it is consumed whole, `next` brings the second to the head, and so on. The look
    /// ahead stops at the first record that is not an eager send (a long message, a request
    /// of the peer), which `next` handles when it gets there.
    pub fn next_queued(&mut self, max: usize) -> Result<Vec<Message<'_>>, Error> {
        if max == 0 || self.next()?.is_none() {
            return Ok(Vec::new());
        }
        let this = &*self;
        let (first, mut pos) = match &this.inbound {
            Inbound::Ring { rec, consumed } => (
                Message {
                    tag: rec.header.tag,
                    data: &Self::payload(rec)[*consumed..],
                },
                rec.end(),
            ),
            Inbound::Assembled { tag, len, consumed } => (
                Message {
                    tag: *tag,
                    data: &this.assembly[this.assembly_start + consumed..this.assembly_start + len],
                },
                this.rx.position(),
            ),
            _ => return Ok(Vec::new()),
        };
        let mut out = vec![first];
        let mut seq = this.recv_seq;
        while out.len() < max {
            let Peek::Record(rec) = this.rx.peek_at(pos) else {
                break;
            };
            if rec.header.kind != Kind::Send || rec.header.seq != seq {
                break;
            }
            out.push(Message {
                tag: rec.header.tag,
                data: Self::payload_ahead(this, rec),
            });
            pos = rec.end();
            seq = seq.wrapping_add(1);
        }
        Ok(out)
    }

    fn payload_ahead(&self, rec: Record) -> &[u8] {
        // SAFETY: the record was published (acquire on its stamp) and lies after the
        // consumer's position, so it is not released: the producer does not write its bytes
        // until the consumer releases it, which needs `&mut self`, while the returned borrow
        // holds `&self`.
        unsafe { std::slice::from_raw_parts(rec.payload.as_ptr(), rec.header.len as usize) }
    }

    /// Gives back the first `n` bytes shown by `next`. Once every byte of a message is consumed
    /// (for an empty message: `consume(0)`), its ring cell is released to the sender.
    pub fn consume(&mut self, n: usize) -> Result<(), Error> {
        if self.lent.is_some() {
            // The current message is out on a lease: only its return consumes it.
            return Err(Error::ConsumeBeyond {
                requested: n,
                available: 0,
            });
        }
        match &mut self.inbound {
            Inbound::Ring { rec, consumed } => {
                let len = rec.header.len as usize;
                if *consumed + n > len {
                    return Err(Error::ConsumeBeyond {
                        requested: n,
                        available: len - *consumed,
                    });
                }
                *consumed += n;
                if *consumed == len {
                    let rec = *rec;
                    self.inbound = Inbound::Idle;
                    self.release(&rec);
                }
                Ok(())
            }
            Inbound::Assembled { len, consumed, .. } => {
                if *consumed + n > *len {
                    return Err(Error::ConsumeBeyond {
                        requested: n,
                        available: *len - *consumed,
                    });
                }
                *consumed += n;
                if *consumed == *len {
                    self.inbound = Inbound::Idle;
                }
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

/// The current inbound message lent out of its endpoint ([`Endpoint::lend`]): an eager
/// message shown in place in its inbound ring record (the lease keeps the segment mapped, and
/// the record is not released to the sender until the lease comes back), or a long message in
/// the reassembly buffer, which the lease then owns. No copy either way. The endpoint reads
/// nothing more from the ring until the lease comes back ([`Endpoint::give_back`]); dropped
/// instead (say after its endpoint closed), it frees what it owns (the record stays unreleased:
/// its endpoint is gone or no longer expects it).
pub struct Lease {
    id: u64,
    mem: Lent,
}

enum Lent {
    Ring {
        // Keeps the mapping that `ptr` points into alive.
        _seg: Arc<Segment>,
        ptr: NonNull<u8>,
        len: usize,
    },
    Assembly(Vec<u8>, Range<usize>),
}

// SAFETY: the pointer points into the shared mapping that the lease keeps alive through its
// `Arc<Segment>` (itself `Send` and `Sync`); the lease only ever reads through it.
unsafe impl Send for Lease {}
// SAFETY: as for `Send`: shared references only read the record's bytes.
unsafe impl Sync for Lease {}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for Lease {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.mem {
            // SAFETY: the record was published (acquire on its stamp) and is not released
            // while the lease is out (only `give_back`, which takes the lease, releases it),
            // so the producer does not write its bytes; `_seg` keeps the mapping alive even
            // after the endpoint is gone.
            Lent::Ring { ptr, len, .. } => unsafe {
                std::slice::from_raw_parts(ptr.as_ptr(), *len)
            },
            Lent::Assembly(v, range) => &v[range.clone()],
        }
    }
}

impl Endpoint {
    /// Lends the current inbound message (the one [`Endpoint::next`] shows) out of the
    /// endpoint: its unconsumed bytes stay where they are (the ring record, or the reassembly
    /// buffer, which the lease takes), owned by the returned [`Lease`], which may outlive this
    /// borrow, the endpoint's lock and the endpoint itself. Until the lease is given back
    /// ([`Endpoint::give_back`]) `next` shows nothing and `consume` refuses; sends and
    /// completions go on. `Ok(None)` when no message is current, or one is lent already.
    pub fn lend(&mut self) -> Result<Option<Lease>, Error> {
        if self.lent.is_some() {
            return Ok(None);
        }
        let mem = match &self.inbound {
            Inbound::Ring { rec, consumed } => {
                let len = rec.header.len as usize;
                // `consumed <= len` (kept by `consume`): the pointer stays inside the record.
                let ptr = match NonNull::new(rec.payload.as_ptr().wrapping_add(*consumed)) {
                    Some(p) => p,
                    None => return Ok(None),
                };
                Lent::Ring {
                    _seg: Arc::clone(&self.seg),
                    ptr,
                    len: len - consumed,
                }
            }
            Inbound::Assembled { len, consumed, .. } => {
                let range = self.assembly_start + consumed..self.assembly_start + len;
                Lent::Assembly(std::mem::take(&mut self.assembly), range)
            }
            _ => return Ok(None),
        };
        let id = LEASES.fetch_add(1, Ordering::Relaxed);
        self.lent = Some(id);
        Ok(Some(Lease { id, mem }))
    }

    /// Takes back a lease of [`Endpoint::lend`]: the message is consumed whole (its ring record
    /// released to the sender) and `next` goes on with the records behind it. A lease this
    /// endpoint did not lend is dropped.
    pub fn give_back(&mut self, lease: Lease) -> Result<(), Error> {
        if self.lent != Some(lease.id) {
            return Ok(());
        }
        self.lent = None;
        let rest = lease.len();
        if let Lent::Assembly(v, _) = lease.mem {
            self.assembly = v;
        }
        self.consume(rest)
    }

    /// The addresses of the shared segment this endpoint maps (its rings: every eager message
    /// `next` shows, and every [`Lease`] of one, lies inside).
    pub fn segment_range(&self) -> Range<usize> {
        self.seg.range()
    }

    /// Whether a message is out on a lease ([`Endpoint::lend`]).
    pub fn is_lent(&self) -> bool {
        self.lent.is_some()
    }
}

/// The cache-line size that a copy's source and destination should agree on: `rep movsb` and
/// the kernel's `copy_to_user` (which `process_vm_readv` runs) copy whole lines when both
/// addresses sit at the same offset within a line, and split every line in two when they do
/// not. Measured here with `process_vm_readv` of 4 MiB between two processes, 100 copies, best
/// of 5: 11.2-13.1 GB/s with the two addresses at the same offset (both page-aligned, both at
/// 16, or 64 and 2048), 9.3-10.1 GB/s with one at 0 and the other at 16. (`malloc` returns
/// 16-byte aligned blocks, so two buffers of a program disagree more often than not.)
pub(super) const ALIGN: usize = LINE;

/// Sizes `buf` to hold `len` bytes starting at an offset below [`ALIGN`] at which they lie at
/// the same offset within a cache line as the peer's address `src`; returns that offset.
/// Reuses the buffer's memory when it is large enough (no allocation or clearing per message).
fn place_like(buf: &mut Vec<u8>, src: u64, len: usize) -> usize {
    buf.resize(len + ALIGN - 1, 0);
    let start = (src as usize).wrapping_sub(buf.as_ptr() as usize) % ALIGN;
    buf.truncate(start + len);
    start
}

#[cfg(test)]
mod tests {
    use super::{ALIGN, place_like};

    #[test]
    fn a_placed_message_shares_the_sources_offset_within_a_line() {
        let mut buf = Vec::new();
        for len in [0, 1, 63, 64, 65, 4096, 100_003] {
            for off in 0..ALIGN as u64 {
                let src = 0x7f00_0000_1000 + off;
                let start = place_like(&mut buf, src, len);
                assert!(start < ALIGN, "start {start}");
                assert_eq!(buf.len(), start + len);
                let at = buf[start..].as_ptr() as u64;
                assert_eq!(at % ALIGN as u64, off, "len {len}, source offset {off}");
            }
        }
    }
}
