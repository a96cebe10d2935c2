//! One end of a shared-memory connection: post descriptors, poll completions, read in place.

use std::collections::{HashMap, VecDeque};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use crate::frame::{FLAG_FIRST, Header, Kind};
use crate::sendbuf::{SendBuf, SharedPiece};

use super::completion::{Completion, Op, Posted};
use super::config::Config;
use super::error::Error;
use super::futex;
use super::heartbeat::Heartbeat;
use super::region::{RegionKey, Regions};
use super::ring::{Consumer, Producer, RECORD_HEADER, Record};
use super::segment::{LINE, Segment, SideLine};
use super::sleeper::Sleeper;
use super::spin::{self, Outcome};

mod receive;

pub use receive::Lease;
mod peer_read;
mod split;

/// How long messages are carried when they exceed the eager limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongMessages {
    /// The receiver copies straight out of the sender's buffer with `process_vm_readv`.
    SingleCopy,
    /// Single copy is not permitted (or disabled): the message is copied through the ring in
    /// chunks and reassembled at the receiver.
    RingChunks,
}

/// A message shown by [`Endpoint::next`]: its tag and the bytes not consumed yet, borrowed in
/// place (the shared type of every method).
pub use viaduct_method::Message;

enum Inbound {
    Idle,
    /// An eager message in place in its ring record.
    Ring {
        rec: Record,
        consumed: usize,
    },
    /// A long message, whole, in the reassembly buffer.
    Assembled {
        tag: u64,
        len: usize,
        consumed: usize,
    },
    /// A long message arriving in ring chunks.
    Assembling {
        tag: u64,
        total: usize,
        filled: usize,
    },
}

/// Most buffers [`Endpoint::post_send`] keeps for its long messages.
const LONG_POOL: usize = 4;

struct ChunkedSend {
    id: u64,
    tag: u64,
    buf: SendBuf,
    sent: usize,
    /// Bytes of the message that went into the ring before `buf` was made (straight from the
    /// caller's memory, [`Endpoint::post_send_parts`]): `buf` holds the rest.
    prefix: usize,
    /// Bytes per chunk record.
    chunk: usize,
}

struct RmaOp {
    id: u64,
    op: Op,
    len: usize,
    buf: Option<Vec<u8>>,
}

struct OwedReply {
    header: Header,
    data: Vec<u8>,
}

/// One end of a shared-memory connection.
///
/// Descriptors (`post_*`) get exactly one [`Completion`] each, through [`Endpoint::poll`].
/// Inbound messages are read in place with [`Endpoint::next`] and given back with
/// [`Endpoint::consume`]. Requests of the peer's emulated RDMA operations, replies, and the
/// completion of long sends are all processed by `next`, `poll` and `wait`: call one of them
/// regularly (they never block except `wait`).
pub struct Endpoint {
    tx: Producer,
    rx: Consumer,
    side: usize,
    sock: UnixStream,
    peer_pid: u32,
    long_out: LongMessages,
    long_in: LongMessages,
    config: Config,
    send_seq: u32,
    recv_seq: u32,
    completions: VecDeque<Completion>,
    rendezvous_out: VecDeque<(u64, SendBuf)>,
    /// Buffers of long messages posted by [`Endpoint::post_send`] (borrowed data the endpoint
    /// copies first), kept for the next such send: a fresh allocation would cost page faults
    /// on both ends at every message (the receiver reads it with `process_vm_readv`). One held
    /// only here (strong count 1) is free to refill.
    long_pool: Vec<Arc<Vec<u8>>>,
    rendezvous_reaped: u64,
    chunked_out: VecDeque<ChunkedSend>,
    rma_out: HashMap<u64, RmaOp>,
    next_token: u64,
    owed: VecDeque<OwedReply>,
    regions: Regions,
    inbound: Inbound,
    assembly: Vec<u8>,
    /// Where the current long message begins in `assembly`: at the same offset within a
    /// cache line as the bytes it is copied from (the sender's buffer for a single copy, the
    /// first chunk's payload in the ring for chunks; see `receive::ALIGN`).
    assembly_start: usize,
    /// Rendezvous received so far (numbers the one published for a split copy).
    rendezvous_seen: u32,
    /// Whether this end copies chunks of its long sends into the peer (split single copy).
    helps_copy: bool,
    /// Bytes this end copied into the peer for its own long sends.
    helped_bytes: u64,
    failed: Option<&'static str>,
    idle_polls: u32,
    last_check: Instant,
    spin_now: u32,
    tail_at_refusal: Option<usize>,
    /// Space was released without the fenced check whether the peer sleeps (see
    /// [`Endpoint::release`]); [`Endpoint::settle_wake`] owes it.
    wake_owed: bool,
    /// This side's heartbeat count (see [`Endpoint::beat`]).
    beats: u64,
    /// The peer's heartbeat counts (its endpoint's and its background one's) and the inbound
    /// sequence last seen, and when they last changed.
    peer_seen: (u64, u64, u32, Instant),
    /// The id of the [`Lease`] out on the current message ([`Endpoint::lend`]), if any.
    lent: Option<u64>,
    // Declared last: dropped after the ring halves that point into it (heartbeat handles may
    // keep the mapping alive longer).
    seg: Arc<Segment>,
}

// SAFETY: the endpoint owns its mapping and its halves of the rings; the raw pointers inside
// `Producer`/`Consumer` point into that mapping, which moves with the endpoint.
unsafe impl Send for Endpoint {}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("side", &self.side)
            .field("peer_pid", &self.peer_pid)
            .field("long_out", &self.long_out)
            .field("long_in", &self.long_in)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

fn u64_le(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

impl Endpoint {
    pub(crate) fn new(
        seg: Segment,
        side: usize,
        sock: UnixStream,
        peer_pid: u32,
        peer_reads_me: bool,
        i_read_peer: bool,
        config: Config,
    ) -> Result<Endpoint, Error> {
        sock.set_nonblocking(true).map_err(|source| Error::Socket {
            step: "set non-blocking",
            source,
        })?;
        let seg = Arc::new(seg);
        let c = seg.control();
        c.sides[side]
            .pid
            .store(std::process::id(), Ordering::Relaxed);
        let salt = c.salt.load(Ordering::Relaxed);
        let size = seg.ring_bytes();
        let peer = 1 - side;
        let tx_line = NonNull::from(&c.rings[side].consumer);
        let rx_line = NonNull::from(&c.rings[peer].consumer);
        // SAFETY: each ring's data area and consumer line live in `seg`, which the endpoint owns
        // and drops last; this side is the only producer of ring `side` and the only consumer of
        // ring `peer`.
        let (tx, rx) = unsafe {
            (
                Producer::new(seg.ring_data(side), size, salt, tx_line),
                Consumer::new(
                    seg.ring_data(peer),
                    size,
                    salt,
                    rx_line,
                    config.poll_prefetch,
                ),
            )
        };
        let mode = |ok: bool| {
            if ok {
                LongMessages::SingleCopy
            } else {
                LongMessages::RingChunks
            }
        };
        let helps_copy = config.split_copy && peer_reads_me && i_read_peer;
        Ok(Endpoint {
            tx,
            rx,
            side,
            sock,
            peer_pid,
            long_out: mode(peer_reads_me),
            long_in: mode(i_read_peer),
            spin_now: config.spin,
            regions: Regions::new(salt as u32 ^ (side as u32) << 31),
            config,
            send_seq: 0,
            recv_seq: 0,
            completions: VecDeque::new(),
            rendezvous_out: VecDeque::new(),
            long_pool: Vec::new(),
            rendezvous_reaped: 0,
            chunked_out: VecDeque::new(),
            rma_out: HashMap::new(),
            next_token: 1,
            owed: VecDeque::new(),
            inbound: Inbound::Idle,
            assembly: Vec::new(),
            assembly_start: 0,
            lent: None,
            rendezvous_seen: 0,
            helps_copy,
            helped_bytes: 0,
            failed: None,
            idle_polls: 0,
            last_check: Instant::now(),
            tail_at_refusal: None,
            wake_owed: false,
            beats: 0,
            peer_seen: (0, 0, 0, Instant::now()),
            seg,
        })
    }

    /// How this end's long messages reach the peer (decided by a probe at set-up).
    pub fn long_messages(&self) -> LongMessages {
        self.long_out
    }

    /// How long messages from the peer reach this end.
    pub fn long_messages_in(&self) -> LongMessages {
        self.long_in
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Process id of the peer.
    pub fn peer_pid(&self) -> u32 {
        self.peer_pid
    }

    /// Address ranges of this end's own receive buffers (the inbound ring, the reassembly
    /// buffer): every slice `next` returns lies inside one of them.
    pub fn receive_buffers(&self) -> Vec<std::ops::Range<usize>> {
        let a = self.assembly.as_ptr() as usize;
        vec![self.rx.range(), a..a + self.assembly.len()]
    }

    /// Why the connection failed, once it has.
    pub fn failure(&self) -> Option<&'static str> {
        self.failed
    }

    /// Bumps this side's heartbeat: a relaxed store to a line only this side writes.
    #[inline]
    fn beat(&mut self) {
        self.beats = self.beats.wrapping_add(1);
        self.seg.control().beats[self.side]
            .count
            .store(self.beats, Ordering::Relaxed);
    }

    /// A handle that bumps this side's background heartbeat from any thread, and keeps the
    /// segment mapped while it lives (see [`Heartbeat`]). The peer's
    /// [`Endpoint::peer_heard`] counts its beats.
    pub fn heartbeat(&self) -> Heartbeat {
        Heartbeat::new(Arc::clone(&self.seg), self.side)
    }

    /// The last time this end saw a sign of life from the peer: its heartbeat (bumped by each
    /// of its polls, posts and sleeping waits, and by its [`Heartbeat`] handles) or a record
    /// from it advanced since the previous call (the first call compares with the state at
    /// set-up). A peer whose progress engine runs, or whose process bumps its heartbeat from a
    /// thread of its own, is alive; one stopped (or, without such a thread, blocked outside the
    /// library) shows no change. Cheap (three loads); the caller decides what silence means.
    pub fn peer_heard(&mut self) -> Instant {
        let line = &self.seg.control().beats[1 - self.side];
        let beat = line.count.load(Ordering::Relaxed);
        let background = line.background.load(Ordering::Relaxed);
        let (b, g, r, _) = self.peer_seen;
        if beat != b || background != g || self.recv_seq != r {
            self.peer_seen = (beat, background, self.recv_seq, Instant::now());
        }
        self.peer_seen.3
    }

    fn side_line(&self, side: usize) -> &SideLine {
        &self.seg.control().sides[side]
    }

    /// Wakes the peer if it sleeps. The fence orders every store before it (records
    /// published, space released) before the look at the peer's `sleeping` flag, which the
    /// peer sets before its own fenced look at the ring: one of the two sees the other.
    fn notify_peer(&mut self) {
        self.wake_owed = false;
        fence(Ordering::SeqCst);
        let peer = self.side_line(1 - self.side);
        if peer.sleeping.load(Ordering::Relaxed) != 0 {
            peer.bell.fetch_add(1, Ordering::SeqCst);
            futex::wake(&peer.bell);
        }
    }

    /// Whether the peer was seen asleep: a look without a fence, so a hint only (see
    /// [`Endpoint::release`]).
    fn peer_sleeping(&self) -> bool {
        self.side_line(1 - self.side)
            .sleeping
            .load(Ordering::Relaxed)
            != 0
    }

    /// Makes the wake-up check a release left owed ([`Endpoint::release`]). Runs where this
    /// end finds nothing to do (an empty `next` or `poll`) and before it sleeps in `wait`; a
    /// post makes it as part of its own.
    fn settle_wake(&mut self) {
        if self.wake_owed {
            self.notify_peer();
        }
    }

    fn check_open(&self) -> Result<(), Error> {
        match self.failed {
            Some(why) => Err(Error::PeerFailed(why)),
            None => Ok(()),
        }
    }

    // ----- sending -------------------------------------------------------------------------

    fn put_record(&mut self, mut header: Header, parts: &[&[u8]]) -> bool {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let Some(mut r) = self.tx.reserve(len) else {
            self.tail_at_refusal = Some(self.tx.in_use());
            return false;
        };
        let dst = r.payload();
        let mut at = 0;
        for p in parts {
            dst[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        header.len = len as u32;
        header.seq = self.send_seq;
        self.send_seq = self.send_seq.wrapping_add(1);
        self.tx.publish(r, &header);
        self.notify_peer();
        self.beat();
        true
    }

    /// Posts a send of `data` with `tag`. Up to the eager limit the bytes are copied into the
    /// ring now. Longer messages up to [`Config::ring_copy_max`] go into the ring in chunks
    /// straight from `data` as far as it has room, the rest first copied into a buffer the
    /// endpoint keeps for reuse; longer ones are copied into such a buffer whole and sent as by
    /// [`Endpoint::post_send_buf`] (use that to avoid the copy). Either way the completion
    /// hands no buffer back.
    pub fn post_send(&mut self, id: u64, tag: u64, data: &[u8]) -> Result<Posted, Error> {
        self.post_send_parts(id, tag, &[data])
    }

    /// Like [`Endpoint::post_send`] for a message given in parts (say a header and a payload),
    /// gathered straight into the ring cell: one copy of each byte, no staging buffer.
    pub fn post_send_parts(&mut self, id: u64, tag: u64, parts: &[&[u8]]) -> Result<Posted, Error> {
        self.check_open()?;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.config.eager_limit {
            if len <= self.config.ring_copy_max && self.chunked_out.is_empty() {
                return Ok(self.post_ring_copy_parts(id, tag, parts, len));
            }
            let buf = self.pooled_copy(parts, len);
            return Ok(
                match self.post_send_any(id, tag, SendBuf::Shared(SharedPiece::whole(buf)))? {
                    Posted::InProgress => Posted::InProgress,
                    Posted::NoResources(_) => Posted::NoResources(()),
                },
            );
        }
        if !self.chunked_out.is_empty() {
            self.progress();
            if !self.chunked_out.is_empty() {
                return Ok(Posted::NoResources(()));
            }
        }
        let mut h = Header::new(Kind::Send, 0);
        h.tag = tag;
        if !self.put_record(h, parts) {
            return Ok(Posted::NoResources(()));
        }
        self.completions.push_back(Completion {
            id,
            op: Op::Send,
            result: Ok(len),
            buffer: None,
        });
        Ok(Posted::InProgress)
    }

    /// The ring copy of a long message given by borrowed `parts` (`len` bytes, at most
    /// `ring_copy_max`, no chunked send queued): chunks go from the caller's memory straight
    /// into the ring while it has room, and only the rest is first copied into a pool buffer,
    /// which the receiver, woken before that copy, overlaps by draining the chunks already in.
    fn post_ring_copy_parts(&mut self, id: u64, tag: u64, parts: &[&[u8]], len: usize) -> Posted {
        let chunk = self.ring_copy_chunk();
        let from = parts
            .iter()
            .find(|p| !p.is_empty())
            .map_or(0, |p| p.as_ptr() as usize);
        let mut sent = 0;
        while sent < len {
            let n = if sent == 0 {
                first_chunk(from, chunk, len, self.chunk_room())
            } else {
                (len - sent).min(chunk)
            };
            let Some(mut r) = self.tx.reserve(n) else {
                break;
            };
            gather(parts, sent, r.payload());
            let mut h = Header::new(Kind::Fragment, 0);
            h.tag = tag;
            if sent == 0 {
                h.flags = FLAG_FIRST;
                h.offset = len as u64;
            }
            h.len = n as u32;
            h.seq = self.send_seq;
            self.send_seq = self.send_seq.wrapping_add(1);
            self.tx.publish(r, &h);
            sent += n;
        }
        self.notify_peer();
        self.beat();
        if sent == len {
            self.completions.push_back(Completion {
                id,
                op: Op::Send,
                result: Ok(len),
                buffer: None,
            });
            return Posted::InProgress;
        }
        self.tail_at_refusal = Some(self.tx.in_use());
        let rest = rest_of(parts, sent);
        let buf = self.pooled_copy(&rest, len - sent);
        self.chunked_out.push_back(ChunkedSend {
            id,
            tag,
            buf: SendBuf::Shared(SharedPiece::whole(buf)),
            sent: 0,
            prefix: sent,
            chunk,
        });
        self.push_chunks();
        Posted::InProgress
    }

    /// Chunk size of the ring copy: `ring_copy_chunk`, at most [`Endpoint::chunk_room`].
    fn ring_copy_chunk(&self) -> usize {
        self.config.ring_copy_chunk.min(self.chunk_room())
    }

    /// The longest chunk of a message a record carries: a quarter of the ring.
    fn chunk_room(&self) -> usize {
        self.seg.ring_bytes() / 4 - RECORD_HEADER
    }

    /// `parts` (`len` bytes in all) copied into a buffer of the long-message pool: a free one
    /// large enough, else a new one (kept in the pool while it has fewer than
    /// [`LONG_POOL`] buffers).
    fn pooled_copy(&mut self, parts: &[&[u8]], len: usize) -> Arc<Vec<u8>> {
        let free = self
            .long_pool
            .iter_mut()
            .position(|b| Arc::strong_count(b) == 1 && b.capacity() >= len);
        if let Some(i) = free
            && let Some(v) = Arc::get_mut(&mut self.long_pool[i])
        {
            v.clear();
            for p in parts {
                v.extend_from_slice(p);
            }
            return Arc::clone(&self.long_pool[i]);
        }
        let buf = Arc::new(parts.concat());
        if self.long_pool.len() < LONG_POOL {
            self.long_pool.push(Arc::clone(&buf));
        } else if let Some(i) = self
            .long_pool
            .iter()
            .position(|b| Arc::strong_count(b) == 1 && b.capacity() < len)
        {
            // A free buffer too small for this size makes room for one that fits.
            self.long_pool[i] = Arc::clone(&buf);
        }
        buf
    }

    /// Posts a send of an owned buffer, given back in the completion. Long messages are not
    /// copied by the sender: with [`LongMessages::SingleCopy`] the receiver reads them from
    /// this buffer, which is why the endpoint holds it until the completion.
    pub fn post_send_buf(
        &mut self,
        id: u64,
        tag: u64,
        buf: Vec<u8>,
    ) -> Result<Posted<Vec<u8>>, Error> {
        Ok(match self.post_send_any(id, tag, SendBuf::Owned(buf))? {
            Posted::InProgress => Posted::InProgress,
            Posted::NoResources(b) => Posted::NoResources(b.into_owned().unwrap_or_default()),
        })
    }

    /// Like [`Endpoint::post_send_buf`] for a buffer owned or shared with the caller
    /// ([`SendBuf`]): a long message is read in place, from the caller's memory when shared
    /// (no copy by the sender), which must stay unchanged until the completion. Only an owned
    /// buffer comes back in the completion.
    pub fn post_send_any(
        &mut self,
        id: u64,
        tag: u64,
        buf: SendBuf,
    ) -> Result<Posted<SendBuf>, Error> {
        self.post_send_long(id, tag, buf, false)
    }

    /// Like [`Endpoint::post_send_any`], but a message longer than the eager limit goes by
    /// single copy wherever the peer may read this process ([`LongMessages::SingleCopy`]),
    /// however short it is against [`Config::ring_copy_max`]. For a piece of a longer message
    /// whose sender chose single copy by the whole message's length: sent as a ring copy, such
    /// a piece would be reassembled in the receiver's buffer and copied once more.
    pub fn post_send_single_copy(
        &mut self,
        id: u64,
        tag: u64,
        buf: SendBuf,
    ) -> Result<Posted<SendBuf>, Error> {
        self.post_send_long(id, tag, buf, true)
    }

    fn post_send_long(
        &mut self,
        id: u64,
        tag: u64,
        buf: SendBuf,
        single_copy: bool,
    ) -> Result<Posted<SendBuf>, Error> {
        self.check_open()?;
        let len = buf.len();
        if len > self.config.max_message {
            return Err(Error::TooLong {
                len,
                max: self.config.max_message,
            });
        }
        if len <= self.config.eager_limit {
            return Ok(match self.post_send(id, tag, &buf)? {
                Posted::InProgress => {
                    if let Some(c) = self.completions.back_mut() {
                        c.buffer = buf.into_owned();
                    }
                    Posted::InProgress
                }
                Posted::NoResources(()) => Posted::NoResources(buf),
            });
        }
        // Up to `ring_copy_max` the pipelined ring copy beats single copy (no handshake, no
        // page pinning, both cores copying); beyond it single copy wins where permitted.
        let ring_copy = len <= self.config.ring_copy_max
            && !(single_copy && self.long_out == LongMessages::SingleCopy);
        let mode = if ring_copy {
            LongMessages::RingChunks
        } else {
            self.long_out
        };
        match mode {
            LongMessages::SingleCopy => {
                if !self.chunked_out.is_empty() {
                    return Ok(Posted::NoResources(buf));
                }
                let mut h = Header::new(Kind::Rendezvous, 0);
                h.tag = tag;
                let addr = (buf.as_ptr() as u64).to_le_bytes();
                let blen = (len as u64).to_le_bytes();
                if !self.put_record(h, &[&addr, &blen]) {
                    return Ok(Posted::NoResources(buf));
                }
                self.rendezvous_out.push_back((id, buf));
            }
            LongMessages::RingChunks => {
                if self.chunked_out.len() >= self.config.max_outstanding {
                    return Ok(Posted::NoResources(buf));
                }
                let chunk = if ring_copy {
                    self.ring_copy_chunk()
                } else {
                    self.config.chunk_bytes
                };
                self.chunked_out.push_back(ChunkedSend {
                    id,
                    tag,
                    buf,
                    sent: 0,
                    prefix: 0,
                    chunk,
                });
                self.push_chunks();
            }
        }
        Ok(Posted::InProgress)
    }

    fn push_chunks(&mut self) {
        while let Some(mut c) = self.chunked_out.pop_front() {
            while c.sent < c.buf.len() {
                let n = if c.prefix + c.sent == 0 {
                    first_chunk(
                        c.buf.as_ptr() as usize,
                        c.chunk,
                        c.buf.len(),
                        self.chunk_room(),
                    )
                } else {
                    (c.buf.len() - c.sent).min(c.chunk)
                };
                let mut h = Header::new(Kind::Fragment, 0);
                h.tag = c.tag;
                if c.prefix + c.sent == 0 {
                    h.flags = FLAG_FIRST;
                    h.offset = c.buf.len() as u64;
                }
                let ok = {
                    let piece = &c.buf[c.sent..c.sent + n];
                    let mut hdr = h;
                    let len = piece.len();
                    match self.tx.reserve(len) {
                        Some(mut r) => {
                            r.payload().copy_from_slice(piece);
                            hdr.len = len as u32;
                            hdr.seq = self.send_seq;
                            self.send_seq = self.send_seq.wrapping_add(1);
                            self.tx.publish(r, &hdr);
                            true
                        }
                        None => false,
                    }
                };
                if !ok {
                    self.tail_at_refusal = Some(self.tx.in_use());
                    self.chunked_out.push_front(c);
                    self.notify_peer();
                    return;
                }
                c.sent += n;
            }
            self.notify_peer();
            let len = c.prefix + c.buf.len();
            self.completions.push_back(Completion {
                id: c.id,
                op: Op::Send,
                result: Ok(len),
                buffer: c.buf.into_owned(),
            });
        }
    }

    /// Posts an emulated RDMA write of `data` to `offset` of the peer's region `key`. The
    /// target checks key and bounds; a refusal completes this descriptor with
    /// [`Error::RemoteAccess`]. At most `eager_limit` bytes per write.
    pub fn post_write(
        &mut self,
        id: u64,
        key: RegionKey,
        offset: u64,
        data: &[u8],
    ) -> Result<Posted, Error> {
        self.check_open()?;
        if data.len() > self.config.eager_limit {
            return Err(Error::TooLong {
                len: data.len(),
                max: self.config.eager_limit,
            });
        }
        if self.rma_out.len() >= self.config.max_outstanding || !self.chunked_out.is_empty() {
            return Ok(Posted::NoResources(()));
        }
        let token = self.next_token;
        let mut h = Header::new(Kind::Write, 0);
        h.key = key.0;
        h.offset = offset;
        h.tag = token;
        if !self.put_record(h, &[data]) {
            return Ok(Posted::NoResources(()));
        }
        self.next_token += 1;
        self.rma_out.insert(
            token,
            RmaOp {
                id,
                op: Op::Write,
                len: data.len(),
                buf: None,
            },
        );
        Ok(Posted::InProgress)
    }

    /// Posts an emulated RDMA read of `buf.len()` bytes at `offset` of the peer's region `key`
    /// into `buf`, which comes back filled in the completion. At most `eager_limit` bytes.
    pub fn post_read(
        &mut self,
        id: u64,
        key: RegionKey,
        offset: u64,
        buf: Vec<u8>,
    ) -> Result<Posted<Vec<u8>>, Error> {
        self.check_open()?;
        if buf.len() > self.config.eager_limit {
            return Err(Error::TooLong {
                len: buf.len(),
                max: self.config.eager_limit,
            });
        }
        if self.rma_out.len() >= self.config.max_outstanding || !self.chunked_out.is_empty() {
            return Ok(Posted::NoResources(buf));
        }
        let token = self.next_token;
        let mut h = Header::new(Kind::Read, 0);
        h.key = key.0;
        h.offset = offset;
        h.tag = token;
        if !self.put_record(h, &[&(buf.len() as u64).to_le_bytes()]) {
            return Ok(Posted::NoResources(buf));
        }
        self.next_token += 1;
        self.rma_out.insert(
            token,
            RmaOp {
                id,
                op: Op::Read,
                len: buf.len(),
                buf: Some(buf),
            },
        );
        Ok(Posted::InProgress)
    }

    // ----- regions -------------------------------------------------------------------------

    /// Registers `mem` for the peer's emulated RDMA writes and reads; the key goes to the peer
    /// out of band (for example in a message).
    pub fn register(&mut self, mem: Vec<u8>) -> RegionKey {
        self.regions.register(mem)
    }

    /// The memory of a registered region.
    pub fn region(&self, key: RegionKey) -> Option<&[u8]> {
        self.regions.get(key)
    }

    /// The memory of a registered region, writable.
    pub fn region_mut(&mut self, key: RegionKey) -> Option<&mut [u8]> {
        self.regions.get_mut(key)
    }

    /// Ends a registration and gives the memory back; later accesses with `key` are refused.
    pub fn deregister(&mut self, key: RegionKey) -> Option<Vec<u8>> {
        self.regions.deregister(key)
    }

    // ----- completions and progress --------------------------------------------------------

    fn progress(&mut self) {
        if !self.chunked_out.is_empty() {
            self.push_chunks();
        }
        while let Some(o) = self.owed.pop_front() {
            if !self.put_record(o.header, &[&o.data]) {
                self.owed.push_front(o);
                break;
            }
        }
        if !self.rendezvous_out.is_empty() {
            self.help_copy();
            let done = self.seg.control().rings[self.side]
                .consumer
                .rendezvous_done
                .load(Ordering::Acquire);
            while self.rendezvous_reaped < done {
                let Some((id, buf)) = self.rendezvous_out.pop_front() else {
                    break;
                };
                self.rendezvous_reaped += 1;
                self.completions.push_back(Completion {
                    id,
                    op: Op::Send,
                    result: Ok(buf.len()),
                    buffer: buf.into_owned(),
                });
            }
        }
    }

    fn outstanding(&self) -> bool {
        !self.rendezvous_out.is_empty() || !self.chunked_out.is_empty() || !self.rma_out.is_empty()
    }

    /// Marks the connection failed and completes every outstanding descriptor with an error.
    fn fail(&mut self, why: &'static str) {
        if self.failed.is_none() {
            self.failed = Some(why);
        }
        let why = self.failed.unwrap_or(why);
        // A long send the peer finished reading before it went away still succeeded.
        self.progress_rendezvous_only();
        for (id, buf) in self.rendezvous_out.drain(..) {
            self.completions.push_back(Completion {
                id,
                op: Op::Send,
                result: Err(Error::PeerFailed(why)),
                buffer: buf.into_owned(),
            });
        }
        for c in self.chunked_out.drain(..) {
            self.completions.push_back(Completion {
                id: c.id,
                op: Op::Send,
                result: Err(Error::PeerFailed(why)),
                buffer: c.buf.into_owned(),
            });
        }
        let mut ops: Vec<(u64, RmaOp)> = self.rma_out.drain().collect();
        ops.sort_by_key(|(t, _)| *t);
        for (_, op) in ops {
            self.completions.push_back(Completion {
                id: op.id,
                op: op.op,
                result: Err(Error::PeerFailed(why)),
                buffer: op.buf,
            });
        }
        self.owed.clear();
    }

    fn progress_rendezvous_only(&mut self) {
        let chunked = std::mem::take(&mut self.chunked_out);
        let owed = std::mem::take(&mut self.owed);
        self.progress();
        self.chunked_out = chunked;
        self.owed = owed;
    }

    /// Checks that the peer is still there: it has not closed its endpoint and its end of the
    /// set-up socket is open (a killed process closes it).
    fn check_liveness(&mut self) {
        self.last_check = Instant::now();
        if self.failed.is_some() {
            return;
        }
        if self.side_line(1 - self.side).closed.load(Ordering::Acquire) != 0 {
            self.fail("the peer closed its endpoint");
            return;
        }
        let mut p = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: `p` is one valid pollfd; a zero timeout never blocks.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n > 0 && p.revents != 0 {
            self.fail("the peer process went away");
        }
    }

    fn maybe_check_liveness(&mut self) {
        self.idle_polls = self.idle_polls.wrapping_add(1);
        if self.idle_polls % 256 == 0 && self.last_check.elapsed() >= self.config.liveness_interval
        {
            self.check_liveness();
        }
    }

    /// The next completion an earlier pass found, without making one: after a [`Endpoint::poll`]
    /// that returned a completion (its pass comes before it returns anything), the rest of
    /// what that pass found.
    #[inline]
    pub fn poll_found(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// Makes progress and returns the next completion, if any. Never blocks.
    pub fn poll(&mut self) -> Option<Completion> {
        self.beat();
        self.progress();
        if let Some(c) = self.completions.pop_front() {
            return Some(c);
        }
        self.settle_wake();
        if self.outstanding() {
            // Replies and rendezvous completions may wait behind inbound records.
            let _ = self.advance_inbound();
            self.progress();
            if self.completions.is_empty() {
                self.maybe_check_liveness();
            }
        }
        self.completions.pop_front()
    }

    /// Whether something is ready for the caller: a completion or an inbound message, or space
    /// freed in the ring since a post was refused.
    fn has_work(&mut self) -> bool {
        self.progress();
        // While a message is lent out ([`Endpoint::lend`]), inbound records wait for its
        // return: they are not work for a sleeper.
        let inbound =
            self.lent.is_none() && (!matches!(self.inbound, Inbound::Idle) || self.rx.ready());
        if !self.completions.is_empty() || inbound {
            return true;
        }
        match self.tail_at_refusal {
            Some(used) if self.tx.in_use() < used => {
                self.tail_at_refusal = None;
                true
            }
            _ => self.failed.is_some(),
        }
    }

    /// Prepares a sleep that another thread may take without this endpoint (so without the
    /// lock its owner keeps it under): `None` when a completion or inbound message is ready
    /// (or the peer failed) and there is nothing to sleep for; else a [`Sleeper`] on this
    /// side's bell, which the peer rings from now on for what [`Endpoint::wait`] wakes for.
    /// Beats and, every `config.liveness_interval`, checks the peer's liveness, as `wait`
    /// does; a sleeper sleeps at most that interval at once, so that its caller comes back
    /// here in time for the next check.
    pub fn sleeper(&mut self) -> Result<Option<Sleeper>, Error> {
        self.beat();
        self.settle_wake();
        if self.last_check.elapsed() >= self.config.liveness_interval {
            self.check_liveness();
        }
        if self.has_work() {
            return Ok(None);
        }
        if !self.chunked_out.is_empty() || matches!(self.inbound, Inbound::Assembling { .. }) {
            // A long message is moving through the ring in chunks: the caller polls rather
            // than sleeping between them (each chunk would cost it a futex wake).
            return Ok(None);
        }
        let s = Sleeper::new(
            Arc::clone(&self.seg),
            self.side,
            self.config.liveness_interval,
        );
        // A record published before this side counted itself asleep rang no bell.
        if self.has_work() {
            return Ok(None);
        }
        Ok(Some(s))
    }

    /// Blocks until a completion or inbound message may be ready, ring space was freed after a
    /// refused post, the peer failed, or `timeout` passed. Spins first (adaptively, up to
    /// `config.spin` iterations), then sleeps on the futex in the shared segment; checks the
    /// peer's liveness every `config.liveness_interval` while asleep.
    pub fn wait(&mut self, timeout: Duration) -> Result<(), Error> {
        self.beat();
        self.settle_wake();
        if self.has_work() {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        for _ in 0..self.spin_now {
            std::hint::spin_loop();
            if self.rx.ready() || self.has_work() {
                self.spin_now = spin::next(self.spin_now, self.config.spin, Outcome::Found);
                return Ok(());
            }
        }
        self.spin_now = spin::next(self.spin_now, self.config.spin, Outcome::Missed);
        loop {
            let me = self.side_line(self.side);
            me.sleeping.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let seen = me.bell.load(Ordering::SeqCst);
            if self.has_work() {
                self.side_line(self.side)
                    .sleeping
                    .fetch_sub(1, Ordering::SeqCst);
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                self.side_line(self.side)
                    .sleeping
                    .fetch_sub(1, Ordering::SeqCst);
                return Ok(());
            }
            let slice = (deadline - now).min(self.config.liveness_interval);
            let r = futex::wait(&self.side_line(self.side).bell, seen, slice);
            self.side_line(self.side)
                .sleeping
                .fetch_sub(1, Ordering::SeqCst);
            r.map_err(Error::Wait)?;
            // Asleep or not, this side's progress engine runs: the peer must see it alive.
            self.beat();
            if self.has_work() {
                if now.elapsed() < spin::QUICK_WAKE {
                    self.spin_now = spin::next(self.spin_now, self.config.spin, Outcome::QuickWake);
                }
                return Ok(());
            }
            if self.last_check.elapsed() >= self.config.liveness_interval {
                self.check_liveness();
            }
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // The peer may still be reading long messages out of our buffers: give it a bounded
        // time to finish before the buffers are freed.
        let deadline = Instant::now() + self.config.liveness_interval * 4;
        while !self.rendezvous_out.is_empty() && self.failed.is_none() && Instant::now() < deadline
        {
            let _ = self.wait(self.config.liveness_interval);
            let _ = self.advance_inbound();
            if self.last_check.elapsed() >= self.config.liveness_interval {
                self.check_liveness();
            }
        }
        self.seg.control().sides[self.side]
            .closed
            .store(1, Ordering::Release);
        let peer = &self.seg.control().sides[1 - self.side];
        peer.bell.fetch_add(1, Ordering::SeqCst);
        futex::wake(&peer.bell);
    }
}

/// Copies bytes `from..from + dst.len()` of the concatenation of `parts` into `dst`.
fn gather(parts: &[&[u8]], mut from: usize, dst: &mut [u8]) {
    let mut at = 0;
    for p in parts {
        if at == dst.len() {
            return;
        }
        if from >= p.len() {
            from -= p.len();
            continue;
        }
        let n = (p.len() - from).min(dst.len() - at);
        dst[at..at + n].copy_from_slice(&p[from..from + n]);
        at += n;
        from = 0;
    }
}

/// The bytes of the concatenation of `parts` from `from` on, as parts.
fn rest_of<'a>(parts: &[&'a [u8]], mut from: usize) -> Vec<&'a [u8]> {
    let mut rest = Vec::with_capacity(parts.len());
    for p in parts {
        if from >= p.len() {
            from -= p.len();
        } else {
            rest.push(&p[from..]);
            from = 0;
        }
    }
    rest
}

/// The length of the first chunk of a `len`-byte message copied from address `src` into ring
/// records in chunks of `chunk` bytes, where a record may carry up to `room`: `chunk`, made
/// longer (or, without the room, shorter) by less than a line so that every later chunk's
/// source lies at the same offset within a cache line as the record payload it is copied into
/// (records start on lines, so every payload lies at `RECORD_HEADER` within one). Copies of
/// whole lines run faster (see `receive::ALIGN`); the receiver places the message to match
/// (`Endpoint::on_fragment`). Longer rather than shorter, so that a message of whole chunks
/// takes no more records. A chunk that is not a whole number of lines keeps its length (the
/// offsets would drift anyway).
fn first_chunk(src: usize, chunk: usize, len: usize, room: usize) -> usize {
    if chunk <= LINE || chunk % LINE != 0 {
        return chunk.min(len);
    }
    let off = src.wrapping_sub(RECORD_HEADER) % LINE;
    let longer = chunk + (LINE - off) % LINE;
    let n = if longer <= room { longer } else { chunk - off };
    n.min(len)
}

#[cfg(test)]
mod tests {
    use super::{LINE, RECORD_HEADER, first_chunk};

    #[test]
    fn first_chunks_line_up_the_later_ones_with_the_record_payloads() {
        let chunk = 16384;
        for off in 0..LINE {
            let src = 0x7f00_0000_0000 + off;
            for room in [chunk, chunk + LINE, 1 << 20] {
                let n = first_chunk(src, chunk, 1 << 20, room);
                assert!(
                    n <= room && n + LINE > chunk && n < chunk + LINE,
                    "{off} {room}: {n}"
                );
                assert_eq!((src + n) % LINE, RECORD_HEADER % LINE, "{off} {room}: {n}");
            }
            // Never more than the message; chunks that are not whole lines are left alone.
            assert_eq!(first_chunk(src, chunk, 100, 1 << 20), 100);
            assert_eq!(first_chunk(src, 5000, 1 << 20, 1 << 20), 5000);
        }
    }
}
