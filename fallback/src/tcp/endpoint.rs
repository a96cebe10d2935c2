//! One end of a TCP connection driven by an io_uring ring.

use std::collections::{HashMap, VecDeque};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, types};

use crate::frame::{Decoder, HEADER_LEN, Header, Kind};
use crate::shm::region::{RegionKey, Regions};
use crate::uring::{self, ProvidedBuf, ProvidedBuffers, Ring, RingConfig, UringError};

use super::completion::{Completion, Op, Posted};
use super::config::Config;
use super::error::Error;
use super::send::{OutFrame, SendBatch};
use super::sleeper::{Sleeper, WakeFds};

mod direct;
mod receive;

pub use receive::Lease;

/// Token of the multishot receive.
const RECV: u64 = 0;
/// Token of the one-shot readiness poll armed before `wait` sleeps ([`Config::immediate_io`]).
const POLL: u64 = u64::MAX;
/// Largest batch that first tries a non-blocking `send` ([`Config::immediate_io`]): larger
/// ones rarely fit the socket's free room whole, and one ring send with `MSG_WAITALL` carries
/// them in one call.
const IMMEDIATE_SEND_BYTES: usize = 64 << 10;
/// Buffer group of the receive buffers (one ring per connection).
const GROUP: u16 = 0;
/// Payload buffers of sent frames kept for later copying posts.
const SPARE_PAYLOADS: usize = 8;
/// Largest payload buffer kept.
const SPARE_PAYLOAD_BYTES: usize = 64 << 10;

/// What an operation in the ring holds on to.
enum Payload {
    /// A send batch: frames, iovecs, message header (a plain send uses only the frame).
    Send(Box<SendBatch>),
    /// The multishot receive (its memory is the provided-buffer ring).
    Recv,
    /// The readiness poll of a sleeping `wait` (no memory).
    Poll,
}

/// A message shown by [`Endpoint::next`]: its tag and the bytes not consumed yet, borrowed in
/// place (the shared type of every method).
pub use viaduct_method::Message;

/// How this end's send batches left the endpoint so far ([`Endpoint::send_paths`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendPaths {
    /// Batches a plain non-blocking `send`/`sendmsg` took whole ([`Config::immediate_io`]).
    pub immediate: u64,
    /// Batches a plain send took in part; the rest went on through the ring.
    pub partial: u64,
    /// Batches for which the socket had no room (`EAGAIN`); they went through the ring.
    pub would_block: u64,
    /// Sends submitted to the ring (rests of partial batches and refused ones included).
    pub ring: u64,
}

struct Chunk {
    buf: RxBuf,
    off: usize,
}

/// Bytes received: a buffer of the provided-buffer ring (filled by the multishot receive), or
/// one of the endpoint's own receive buffers (filled by a non-blocking `recv`).
enum RxBuf {
    Ring(ProvidedBuf),
    Own { mem: Box<[u8]>, len: usize },
}

impl std::ops::Deref for RxBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            RxBuf::Ring(b) => b,
            RxBuf::Own { mem, len } => &mem[..*len],
        }
    }
}

impl Chunk {
    fn left(&self) -> usize {
        self.buf.len() - self.off
    }
}

enum Current {
    /// Waiting for (the rest of) a header.
    Idle,
    /// A message whose payload lies whole in the front receive buffer, from its `off`.
    InPlace { header: Header, consumed: usize },
    /// A message being copied into the reassembly buffer.
    Assembling { header: Header, filled: usize },
    /// A whole message in the reassembly buffer.
    Assembled { header: Header, consumed: usize },
}

struct RmaOp {
    id: u64,
    op: Op,
    len: usize,
    buf: Option<Vec<u8>>,
}

/// What a post refused for want of window gives back unused: the frame's payload and the
/// operation it would have left outstanding.
type Refused = (Vec<u8>, Option<RmaOp>);

/// One end of a TCP connection.
///
/// Descriptors (`post_*`) get exactly one [`Completion`] each through [`Endpoint::poll`].
/// Inbound messages are read in place with [`Endpoint::next`] and given back with
/// [`Endpoint::consume`]. `next`, `poll` and `wait` drive the ring: they reap completions,
/// re-arm the multishot receive, send queued frames, serve the peer's emulated RDMA requests
/// and return credits. Only `wait` blocks.
pub struct Endpoint {
    ring: Ring<Payload>,
    /// Duplicates of the socket and ring descriptors for [`Sleeper`]s (made at the first).
    wake_fds: Option<Arc<WakeFds>>,
    bufs: ProvidedBuffers,
    // After `ring`: the ring's drop cancels operations on this socket before it closes.
    stream: TcpStream,
    config: Config,
    decoder: Decoder,
    send_seq: u32,
    /// Frames queued for the socket, and how many of them only returned credit.
    frames_sent: u64,
    credit_frames: u64,
    peer_max_frame: u32,
    window: usize,
    unacked: usize,
    freed: usize,
    queue: VecDeque<OutFrame>,
    in_flight: bool,
    zc_first: HashMap<u64, i32>,
    next_send_token: u64,
    recv_armed: bool,
    rx: VecDeque<Chunk>,
    header_bytes: [u8; HEADER_LEN],
    header_have: usize,
    current: Current,
    assembly: Vec<u8>,
    buffer_base: Option<usize>,
    completions: VecDeque<Completion>,
    rma_out: HashMap<u64, RmaOp>,
    next_token: u64,
    regions: Regions,
    failed: Option<&'static str>,
    /// A protocol error found during progress, reported by the next `next`.
    pending_error: Option<Error>,
    reaped: Vec<uring::Completion<Payload>>,
    /// The batch of the last send, emptied, for the next one.
    spare_batch: Option<Box<SendBatch>>,
    /// Payload buffers of sent frames, for the next copying posts (at most [`SPARE_PAYLOADS`],
    /// each at most [`SPARE_PAYLOAD_BYTES`]).
    spare_payloads: Vec<Vec<u8>>,
    /// Keepalive frames sent ([`Config::keepalive`]).
    keepalives: u64,
    /// Frames sent as last seen by the keepalive clock, and when that count last changed.
    sent_seen: (u64, Instant),
    /// Receive completions with data so far.
    received: u64,
    /// Receive completions as last seen by [`Endpoint::peer_heard`], and when they changed.
    heard_seen: (u64, Instant),
    /// Whether the socket is registered as the ring's fixed file 0.
    fixed_socket: bool,
    /// With a single-issuer ring, the thread that set the endpoint up ([`thread_mark`]): the
    /// only one that may enter the ring.
    issuer: Option<usize>,
    /// Own receive buffers not holding data ([`Config::immediate_io`]).
    own_free: Vec<Box<[u8]>>,
    /// Own receive buffers allocated so far (at most `recv_buffers`), with their addresses.
    own_ranges: Vec<std::ops::Range<usize>>,
    /// Whether the readiness poll of a sleeping `wait` is in the ring.
    poll_armed: bool,
    /// Whether the last `poll` returned a completion (see `poll` on receiving).
    just_reaped: bool,
    /// How send batches left so far.
    send_paths: SendPaths,
    /// The id of the [`Lease`] out on the current message ([`Endpoint::lend`]), if any.
    lent: Option<u64>,
    /// The addresses of the reassembly buffer while a lease holds it.
    lent_assembly: Option<std::ops::Range<usize>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("peer", &self.stream.peer_addr().ok())
            .field("queued", &self.queue.len())
            .field("unacked", &self.unacked)
            .field("window", &self.window)
            .field("freed", &self.freed)
            .field("in_flight", &self.in_flight)
            .field("recv_armed", &self.recv_armed)
            .field("rx_chunks", &self.rx.len())
            .field("buffers_taken", &self.bufs.taken())
            .field("ring_in_flight", &self.ring.in_flight())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    pub(crate) fn new(
        stream: TcpStream,
        window: usize,
        peer_max_frame: u32,
        config: Config,
    ) -> Result<Endpoint, Error> {
        let ring_config = RingConfig::new(config.ring_entries)
            .eventfd(false)
            .single_issuer(config.single_issuer);
        let mut ring = Ring::new(&ring_config).map_err(Error::Uring)?;
        let bufs = ring
            .register_buf_ring(GROUP, config.recv_buffers, config.recv_buffer_bytes)
            .map_err(Error::Uring)?;
        // A registered socket spares every operation the look-up and reference count of the
        // descriptor; where the kernel refuses (say a file-table limit), operations name the
        // descriptor instead, with the same effect.
        let fixed_socket = ring.register_files(&[stream.as_raw_fd()]).is_ok();
        let mut ep = Endpoint {
            ring,
            wake_fds: None,
            bufs,
            stream,
            decoder: Decoder::new(config.max_frame),
            send_seq: 0,
            frames_sent: 0,
            credit_frames: 0,
            peer_max_frame,
            window,
            unacked: 0,
            freed: 0,
            queue: VecDeque::new(),
            in_flight: false,
            zc_first: HashMap::new(),
            next_send_token: 1,
            recv_armed: false,
            rx: VecDeque::new(),
            header_bytes: [0; HEADER_LEN],
            header_have: 0,
            current: Current::Idle,
            assembly: Vec::new(),
            buffer_base: None,
            completions: VecDeque::new(),
            rma_out: HashMap::new(),
            next_token: 1,
            regions: Regions::new(0x5EED_0001),
            failed: None,
            pending_error: None,
            reaped: Vec::new(),
            keepalives: 0,
            sent_seen: (0, Instant::now()),
            received: 0,
            heard_seen: (0, Instant::now()),
            spare_batch: None,
            spare_payloads: Vec::new(),
            fixed_socket,
            issuer: None,
            own_free: Vec::new(),
            own_ranges: Vec::new(),
            poll_armed: false,
            just_reaped: false,
            send_paths: SendPaths::default(),
            lent: None,
            lent_assembly: None,
            config,
        };
        if ep.ring.features().defer_taskrun {
            ep.issuer = Some(thread_mark());
        }
        if !ep.config.immediate_io {
            ep.arm_recv()?;
            ep.ring.submit().map_err(Error::Uring)?;
        }
        Ok(ep)
    }

    /// The settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What the kernel offers, as probed when this endpoint's ring was built (whether its
    /// task work is deferred, say: [`crate::uring::Features::defer_taskrun`]).
    pub fn ring_features(&self) -> &crate::uring::Features {
        self.ring.features()
    }

    /// How this end's send batches left so far: whole by a plain non-blocking send, in part,
    /// or through the ring ([`Config::immediate_io`]).
    pub fn send_paths(&self) -> SendPaths {
        self.send_paths
    }

    /// Why the connection failed, once it has.
    pub fn failure(&self) -> Option<&'static str> {
        self.failed
    }

    /// Bytes sent and not yet credited back by the receiver (bounded by its window).
    pub fn unacked(&self) -> usize {
        self.unacked
    }

    /// Frames this end has queued for its socket so far: messages, requests, replies, credit.
    pub fn frames_sent(&self) -> u64 {
        self.frames_sent
    }

    /// Of [`Endpoint::frames_sent`], the frames sent only to return credit, because no other
    /// traffic was going out to carry it.
    pub fn credit_frames_sent(&self) -> u64 {
        self.credit_frames
    }

    /// Address ranges of this end's own receive buffers (the provided-buffer ring, once a
    /// receive has used it, and the reassembly buffer): every slice `next` returns lies inside
    /// one of them.
    pub fn receive_buffers(&self) -> Vec<std::ops::Range<usize>> {
        let mut v = Vec::new();
        if let Some(base) = self.buffer_base {
            let len = self.bufs.count() as usize * self.bufs.buf_size() as usize;
            v.push(base..base + len);
        }
        v.extend(self.own_ranges.iter().cloned());
        let a = self.assembly.as_ptr() as usize;
        v.push(a..a + self.assembly.len());
        v.extend(self.lent_assembly.clone());
        v
    }

    fn check_open(&self) -> Result<(), Error> {
        match self.failed {
            Some(why) => Err(Error::PeerFailed(why)),
            None => Ok(()),
        }
    }

    /// Refuses a call from a thread other than the issuer of a single-issuer ring, before
    /// anything reaches the ring: the call fails, the connection and every descriptor in it
    /// stay as they were, and the issuer thread can go on.
    #[inline]
    fn check_issuer(&self) -> Result<(), Error> {
        match self.issuer {
            Some(t) if t != thread_mark() => Err(Error::Uring(UringError::NotIssuer(
                std::io::Error::from_raw_os_error(libc::EEXIST),
            ))),
            _ => Ok(()),
        }
    }

    // ----- ring plumbing -------------------------------------------------------------------

    fn arm_recv(&mut self) -> Result<(), Error> {
        let entry = if self.fixed_socket {
            opcode::RecvMulti::new(types::Fixed(0), GROUP).build()
        } else {
            opcode::RecvMulti::new(types::Fd(self.stream.as_raw_fd()), GROUP).build()
        };
        // SAFETY: the receive writes only into the provided-buffer ring, which the ring keeps
        // registered (and alive) until it is dropped; the socket stays open while the ring lives
        // (field order).
        unsafe { self.ring.push(entry, RECV, Payload::Recv) }.map_err(|e| Error::Uring(e.error))?;
        self.recv_armed = true;
        Ok(())
    }

    /// Sends queued frames if no send is in flight (a lone joined frame with a plain send, else
    /// one `sendmsg`). Once the connection failed, frames
    /// found queued complete with the failure instead (none should be: the failure drains the
    /// queue and posts are refused; this keeps the exactly-once rule whatever the path).
    fn flush(&mut self) -> Result<(), Error> {
        self.flush_with(true)
    }

    /// [`Endpoint::flush`]; `plain`: whether the first batch may try a plain send first
    /// ([`Config::immediate_io`]); not right after the socket took part of a frame (it has no
    /// room now, the ring waits for it).
    pub(super) fn flush_with(&mut self, plain: bool) -> Result<(), Error> {
        if let Some(why) = self.failed {
            if !self.queue.is_empty() || !self.rma_out.is_empty() {
                self.fail(why);
            }
            return Ok(());
        }
        if self.in_flight || self.queue.is_empty() {
            return Ok(());
        }
        let mut batch = self.spare_batch.take().unwrap_or_else(SendBatch::empty);
        batch.fill(
            &mut self.queue,
            self.config.max_batch,
            self.config.zero_copy_threshold,
        );
        while plain
            && self.config.immediate_io
            && !batch.zero_copy
            && batch.bytes <= IMMEDIATE_SEND_BYTES
        {
            match self.send_now(batch) {
                Some(rest) => batch = rest,
                // Sent whole (or the connection failed): the next batch, if any.
                None if self.failed.is_none() && !self.queue.is_empty() => {
                    batch = self.spare_batch.take().unwrap_or_else(SendBatch::empty);
                    batch.fill(
                        &mut self.queue,
                        self.config.max_batch,
                        self.config.zero_copy_threshold,
                    );
                    continue;
                }
                None => return Ok(()),
            }
            // The socket took part of the batch or none of it: the rest waits in the ring.
            break;
        }
        let flags = (libc::MSG_WAITALL | libc::MSG_NOSIGNAL) as u32;
        let fd = self.stream.as_raw_fd();
        // The socket as the registered file 0 where that worked, else by its descriptor.
        macro_rules! on_socket {
            (|$s:ident| $build:expr) => {
                if self.fixed_socket {
                    let $s = types::Fixed(0);
                    $build
                } else {
                    let $s = types::Fd(fd);
                    $build
                }
            };
        }
        let entry = match batch.contiguous() {
            Some(bytes) if !batch.zero_copy => {
                on_socket!(|s| opcode::Send::new(s, bytes.as_ptr(), bytes.len() as u32)
                    .flags(flags as i32)
                    .build())
            }
            _ if batch.zero_copy => {
                on_socket!(|s| opcode::SendMsgZc::new(s, &batch.msg).flags(flags).build())
            }
            _ => on_socket!(|s| opcode::SendMsg::new(s, &batch.msg).flags(flags).build()),
        };
        let token = self.next_send_token;
        self.next_send_token += 1;
        // SAFETY: the entry points at the batch's message header, iovec array, frame headers and
        // payloads (or, for a plain send, at the one frame's bytes), all in heap memory owned by
        // the boxed batch, which the ring holds as the payload until the final completion.
        match unsafe { self.ring.push(entry, token, Payload::Send(batch)) } {
            Ok(_) => {
                self.send_paths.ring += 1;
                self.in_flight = true;
                self.ring.submit().map_err(Error::Uring)?;
                Ok(())
            }
            Err(e) => {
                if let Payload::Send(mut batch) = e.payload {
                    for f in batch.settle(0).rev() {
                        self.queue.push_front(f);
                    }
                    self.spare_batch = Some(batch);
                }
                Err(Error::Uring(e.error))
            }
        }
    }

    /// Tries `batch` (not zero-copy, nothing in flight before it) with one non-blocking
    /// `send`/`sendmsg` ([`Config::immediate_io`]). Returns the batch to go on through the
    /// ring: untouched when the socket had no room, refilled from the queue (the cut frame
    /// first, with its progress) when it took part. `None` when the batch is settled: sent
    /// whole, its frames completed, or failed, the connection with it.
    fn send_now(&mut self, mut batch: Box<SendBatch>) -> Option<Box<SendBatch>> {
        let fd = self.stream.as_raw_fd();
        let flags = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
        let r = match batch.contiguous() {
            // SAFETY: `bytes` borrows the batch's one frame, alive for the call; `send` only
            // reads it.
            Some(bytes) => unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), flags) },
            // SAFETY: the batch's message header points at its own iovec array and frames (see
            // `SendBatch::fill`), alive for the call; `sendmsg` only reads them.
            None => unsafe { libc::sendmsg(fd, &batch.msg, flags) },
        };
        if r < 0 {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            if matches!(errno, libc::EAGAIN | libc::EINTR | libc::ENOBUFS) {
                self.send_paths.would_block += 1;
                return Some(batch);
            }
            // As a failed ring send: every frame of the batch completes with the failure.
            self.on_sent(batch, -errno);
            return None;
        }
        let sent = r as usize;
        if sent == batch.bytes {
            self.send_paths.immediate += 1;
            // At most IMMEDIATE_SEND_BYTES: fits the ring's result type.
            self.on_sent(batch, sent as i32);
            return None;
        }
        // Part of the batch went out: the frames sent whole complete, the rest goes back to the
        // head of the queue in stream order, the cut frame first.
        self.send_paths.partial += 1;
        let mut rest = Vec::new();
        for f in batch.settle(sent) {
            if f.sent == f.total() {
                self.finish_sent(f);
            } else {
                rest.push(f);
            }
        }
        for f in rest.into_iter().rev() {
            self.queue.push_front(f);
        }
        batch.fill(
            &mut self.queue,
            self.config.max_batch,
            self.config.zero_copy_threshold,
        );
        Some(batch)
    }

    /// Non-blocking receives into the endpoint's own receive buffers until the socket has
    /// nothing more or every buffer holds data not consumed yet ([`Config::immediate_io`]).
    /// End of stream and socket errors fail the connection, as they do for the ring's receive.
    /// Returns whether bytes arrived.
    ///
    /// A call that finds nothing leaves the free buffers as they were (the receive goes into
    /// the last one, which is taken only once bytes landed in it) and reads `errno` directly:
    /// a busy receiver makes this call in a loop, so its cost beside the `recv` is the gap
    /// between two looks at the socket.
    pub(super) fn recv_now(&mut self) -> bool {
        let fd = self.stream.as_raw_fd();
        let size = self.config.recv_buffer_bytes as usize;
        let mut got = false;
        while self.failed.is_none() {
            if self.own_free.is_empty() {
                if self.own_ranges.len() >= self.config.recv_buffers as usize {
                    // The peer's window keeps it from sending more than these hold.
                    return got;
                }
                let m = vec![0u8; size].into_boxed_slice();
                let at = m.as_ptr() as usize;
                self.own_ranges.push(at..at + size);
                self.own_free.push(m);
            }
            let Some(mem) = self.own_free.last_mut() else {
                return got;
            };
            // SAFETY: `recv` writes at most `mem.len()` bytes into the owned buffer.
            let r =
                unsafe { libc::recv(fd, mem.as_mut_ptr().cast(), mem.len(), libc::MSG_DONTWAIT) };
            if r > 0 {
                let n = r as usize;
                got = true;
                self.received += 1;
                if let Some(mem) = self.own_free.pop() {
                    self.rx.push_back(Chunk {
                        buf: RxBuf::Own { mem, len: n },
                        off: 0,
                    });
                }
                if n < size {
                    // The socket had no more (a further call would most likely find none).
                    return got;
                }
                continue;
            }
            if r == 0 {
                self.fail("the peer closed the connection");
                return got;
            }
            // SAFETY: `__errno_location` returns this thread's `errno`, always valid to read;
            // it still holds the failed `recv`'s code (nothing ran in between).
            let errno = unsafe { *libc::__errno_location() };
            if !matches!(errno, libc::EAGAIN | libc::EINTR) {
                self.fail_with_errno(errno);
            }
            return got;
        }
        got
    }

    /// Gives a chunk's buffer back once nothing in it is needed: to the provided-buffer ring
    /// (by its drop) or to the own buffers.
    fn recycle(&mut self, chunk: Chunk) {
        if let RxBuf::Own { mem, .. } = chunk.buf {
            self.own_free.push(mem);
        }
    }

    /// Arms the one-shot readiness poll that wakes a sleeping `wait` when bytes (or the end of
    /// the stream, or an error) arrive ([`Config::immediate_io`]).
    fn arm_poll(&mut self) -> Result<(), Error> {
        let mask = (libc::POLLIN | libc::POLLRDHUP) as u32;
        let entry = if self.fixed_socket {
            opcode::PollAdd::new(types::Fixed(0), mask).build()
        } else {
            opcode::PollAdd::new(types::Fd(self.stream.as_raw_fd()), mask).build()
        };
        // SAFETY: a poll reads and writes no memory of ours; the socket stays open while the
        // ring lives (field order).
        unsafe { self.ring.push(entry, POLL, Payload::Poll) }.map_err(|e| Error::Uring(e.error))?;
        self.poll_armed = true;
        self.ring.submit().map_err(Error::Uring)?;
        Ok(())
    }

    /// Sleeps in `ppoll` on the socket until it is readable (or at end of stream, or failed)
    /// or `d` passed ([`Config::immediate_io`], nothing in the ring). An interrupted sleep
    /// just ends early: the caller loops.
    fn sleep_on_socket(&self, d: Duration) {
        let mut pfd = libc::pollfd {
            fd: self.stream.as_raw_fd(),
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one valid pollfd and a valid timespec, both alive for the call; no signal
        // mask is changed.
        unsafe {
            libc::ppoll(&mut pfd, 1, &ts, std::ptr::null());
        }
    }

    /// Reaps completions and acts on them; receives (or re-arms the receive); sends what is
    /// queued.
    fn progress(&mut self) {
        self.progress_with(true);
    }

    /// [`Endpoint::progress`]; `receive`: whether to take bytes from the socket when they are
    /// taken by plain calls ([`Config::immediate_io`]).
    fn progress_with(&mut self, receive: bool) {
        if let Err(e) = self.try_progress(receive) {
            self.engine_failed(&e);
        }
    }

    /// Fails the connection after an error of the engine, naming the cause where it is the
    /// caller's (a single-issuer endpoint used from another thread).
    pub(super) fn engine_failed(&mut self, e: &Error) {
        self.fail(match e {
            Error::Uring(UringError::NotIssuer(_)) => {
                "the endpoint is single-issuer (Config::single_issuer) and was used from a \
                 thread other than the one that set it up"
            }
            _ => "the io_uring engine failed",
        });
    }

    fn try_progress(&mut self, receive: bool) -> Result<(), Error> {
        if self.failed.is_some() && self.ring.unsubmitted() > 0 {
            // A submission failed after its entry was pushed (the connection failed then):
            // the entry still has to reach the kernel, which completes it, with an error on
            // the shut-down socket, so that its descriptors complete exactly once.
            self.ring.submit().map_err(Error::Uring)?;
        }
        let mut reaped = std::mem::take(&mut self.reaped);
        // Completions taken before an error still carry their batches: act on them first.
        let r = self.ring.reap(&mut reaped);
        for c in reaped.drain(..) {
            self.on_completion(c);
        }
        self.reaped = reaped;
        r.map_err(Error::Uring)?;
        if self.config.immediate_io && receive {
            self.recv_now();
        }
        if !self.rx.is_empty() {
            // Credits, replies and requests may wait at the head of the stream; a malformed
            // frame found here is reported by the next `next`.
            if let Err(e) = self.advance() {
                self.pending_error.get_or_insert(e);
            }
        }
        if !self.config.immediate_io
            && !self.recv_armed
            && self.failed.is_none()
            && self.bufs.taken() < self.bufs.count() as usize
        {
            self.arm_recv()?;
            self.ring.submit().map_err(Error::Uring)?;
        }
        self.flush()
    }

    fn on_completion(&mut self, c: uring::Completion<Payload>) {
        if c.token == RECV {
            self.on_recv(&c);
            return;
        }
        match c.payload {
            None => {
                // First completion of a zero-copy send: the bytes are queued in the socket, the
                // buffers stay with the kernel until the notification.
                self.zc_first.insert(c.token, c.result);
                self.in_flight = false;
                if c.result < 0 {
                    self.fail_with_errno(-c.result);
                }
            }
            Some(Payload::Send(batch)) => {
                let result = if cqueue::notif(c.flags) {
                    self.zc_first.remove(&c.token).unwrap_or(-libc::EIO)
                } else {
                    self.in_flight = false;
                    c.result
                };
                self.on_sent(batch, result);
            }
            Some(Payload::Recv) => self.on_recv(&c),
            // The socket became readable (or failed): the next progress receives.
            Some(Payload::Poll) => self.poll_armed = false,
        }
    }

    fn on_sent(&mut self, mut batch: Box<SendBatch>, result: i32) {
        let bytes = batch.bytes;
        let sent = if result > 0 { result as usize } else { 0 };
        // A short or failed send leaves the stream cut inside a frame: the connection is
        // unusable. The frames of this batch come before the queued ones in the stream, so
        // they complete first; those not sent whole with the connection's failure (a failure
        // found before this completion keeps its reason).
        let cut = (sent < bytes).then(|| {
            let errno = if result < 0 { -result } else { libc::EPIPE };
            self.failed.unwrap_or(failure_reason(errno))
        });
        for f in batch.settle(sent) {
            if f.sent < f.total() {
                let why = cut.unwrap_or("a send stopped short");
                self.complete_failed(f, Error::PeerFailed(why));
                continue;
            }
            self.finish_sent(f);
        }
        self.spare_batch = Some(batch);
        if let Some(why) = cut {
            self.fail(why);
        }
    }

    /// Completes a frame that left whole: a send's descriptor (reads and writes complete on
    /// their reply, not when the request leaves); its payload buffer goes back to the caller or
    /// is kept for later copying posts.
    fn finish_sent(&mut self, f: OutFrame) {
        let len = f.data_len();
        match f.owner {
            Some((id, Op::Send, give_back)) => {
                let buffer = if give_back {
                    Some(f.payload)
                } else {
                    self.keep_payload(f.payload);
                    None
                };
                self.completions.push_back(Completion {
                    id,
                    op: Op::Send,
                    result: Ok(len),
                    buffer,
                });
            }
            _ => self.keep_payload(f.payload),
        }
    }

    /// Keeps the buffer of a sent frame for a later copying post.
    fn keep_payload(&mut self, mut payload: Vec<u8>) {
        if self.spare_payloads.len() < SPARE_PAYLOADS
            && payload.capacity() > 0
            && payload.capacity() <= SPARE_PAYLOAD_BYTES
        {
            payload.clear();
            self.spare_payloads.push(payload);
        }
    }

    fn complete_failed(&mut self, f: OutFrame, error: Error) {
        if let Some((id, op, give_back)) = f.owner {
            if op == Op::Send {
                let buffer = give_back.then_some(f.payload);
                self.completions.push_back(Completion {
                    id,
                    op,
                    result: Err(error),
                    buffer,
                });
            }
        }
    }

    fn on_recv(&mut self, c: &uring::Completion<Payload>) {
        if !c.more() {
            self.recv_armed = false;
        }
        if c.result > 0 {
            self.received += 1;
            match self.bufs.take(c.flags, c.result as usize) {
                Some(buf) => {
                    if self.buffer_base.is_none() {
                        let size = self.bufs.buf_size() as usize;
                        self.buffer_base = Some(buf.as_ptr() as usize - buf.bid() as usize * size);
                    }
                    self.rx.push_back(Chunk {
                        buf: RxBuf::Ring(buf),
                        off: 0,
                    });
                }
                None => self.fail("a receive completed without a buffer"),
            }
        } else if c.result == 0 {
            self.fail("the peer closed the connection");
        } else if c.result != -libc::ENOBUFS && c.result != -libc::ECANCELED {
            self.fail_with_errno(-c.result);
        }
    }

    fn fail_with_errno(&mut self, errno: i32) {
        self.fail(failure_reason(errno));
    }

    /// Marks the connection failed, shuts the socket down so that operations in flight end at
    /// once, and completes every queued or outstanding descriptor with an error.
    fn fail(&mut self, why: &'static str) {
        if self.failed.is_none() {
            self.failed = Some(why);
            // SAFETY: shutdown on our own open socket; it does not close the descriptor.
            unsafe {
                libc::shutdown(self.stream.as_raw_fd(), libc::SHUT_RDWR);
            }
        }
        let why = self.failed.unwrap_or(why);
        while let Some(f) = self.queue.pop_front() {
            self.complete_failed(f, Error::PeerFailed(why));
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
    }

    // ----- sending -------------------------------------------------------------------------

    fn enqueue(&mut self, header: Header, payload: Vec<u8>, owner: Option<(u64, Op, bool)>) {
        self.enqueue_frame(header, payload, false, owner);
    }

    /// Queues a frame; `joined`: `payload` starts with room for the header (see [`OutFrame`]).
    fn enqueue_frame(
        &mut self,
        mut header: Header,
        payload: Vec<u8>,
        joined: bool,
        owner: Option<(u64, Op, bool)>,
    ) {
        self.stamp(
            &mut header,
            payload.len() - if joined { HEADER_LEN } else { 0 },
        );
        self.commit_frame(&header);
        self.queue
            .push_back(OutFrame::new(&header, payload, joined, owner));
    }

    /// Fills in the fields this end gives its next frame: the data length `len`, the sequence
    /// number, and the freed credit where the kind carries it. Changes nothing of the endpoint
    /// ([`Endpoint::commit_frame`] does, once the frame is this end's next in the stream).
    fn stamp(&self, header: &mut Header, len: usize) {
        header.len = len as u32;
        if header.kind.carries_credit() {
            header.offset = self.freed as u64;
        }
        header.seq = self.send_seq;
    }

    /// Counts a stamped frame as sent into the stream: its credit is given, its sequence
    /// number taken.
    fn commit_frame(&mut self, header: &Header) {
        if header.kind.carries_credit() {
            self.freed = 0;
        }
        self.send_seq = self.send_seq.wrapping_add(1);
        self.frames_sent += 1;
    }

    /// Whether `bytes` more may be sent now under the peer's window: a frame may start while
    /// less than the window is unacknowledged, so at most the window plus one frame is in
    /// flight (the receiver copies a frame larger than its buffers out as it arrives).
    fn credit_for(&self) -> bool {
        self.unacked < self.window
    }

    fn check_len(&self, len: usize) -> Result<(), Error> {
        let max = self.config.max_frame.min(self.peer_max_frame) as usize;
        if len > max {
            return Err(Error::TooLong { len, max });
        }
        Ok(())
    }

    /// Queues a frame that counts against the peer's window and sends it if it can; gives the
    /// payload and `rma` back when the window is full. `rma` is the operation a write or read
    /// request leaves outstanding until its reply (`header.tag` is its token).
    ///
    /// `joined`: `payload` starts with room for the header (see [`OutFrame`]).
    fn post_counted(
        &mut self,
        header: Header,
        payload: Vec<u8>,
        joined: bool,
        owner: (u64, Op, bool),
        rma: Option<RmaOp>,
    ) -> Result<Option<Refused>, Error> {
        self.check_open()?;
        let len = payload.len() - if joined { HEADER_LEN } else { 0 };
        self.check_len(len)?;
        let bytes = HEADER_LEN + len;
        if !self.credit_for() {
            self.progress();
            // The same pass may have found both the peer's last credits and its failure: the
            // failure wins, so nothing is accepted after it (it would never complete).
            self.check_open()?;
            if !self.credit_for() {
                return Ok(Some((payload, rma)));
            }
        }
        if let Some(op) = rma {
            // Registered before the request can fail, so that a failure completes it.
            self.rma_out.insert(header.tag, op);
            self.next_token += 1;
        }
        self.unacked += bytes;
        self.enqueue_frame(header, payload, joined, Some(owner));
        if self.in_flight {
            // One send is in flight at a time (the stream's order). On a socket with room the
            // kernel completes a send while it is submitted, so the one in flight has most
            // often completed already: take its completion now and this frame leaves at once,
            // instead of when the next `poll`, `next` or `wait` does (a caller that posts and
            // then stops calling the endpoint would hold it back until then).
            self.progress();
        } else {
            self.flush_quietly();
        }
        Ok(None)
    }

    /// Posts a send of `data` with `tag`. The bytes are copied into a buffer of the endpoint
    /// (use [`Endpoint::post_send_buf`] to send without copying); when nothing else is going
    /// out, that buffer goes to the socket at once with one non-blocking `send`
    /// ([`Config::immediate_io`]), what the socket does not take through the ring.
    pub fn post_send(&mut self, id: u64, tag: u64, data: &[u8]) -> Result<Posted, Error> {
        self.post_send_parts(id, tag, &[data])
    }

    /// Like [`Endpoint::post_send`] for a message given in parts (say a header and a payload),
    /// gathered into the one buffer the send owns: one copy of each byte.
    pub fn post_send_parts(&mut self, id: u64, tag: u64, parts: &[&[u8]]) -> Result<Posted, Error> {
        self.check_issuer()?;
        self.check_open()?;
        self.check_len(parts.iter().map(|p| p.len()).sum())?;
        if !self.credit_for() {
            self.progress();
            // A failure found by that pass wins over the full window (as in `post_counted`).
            self.check_open()?;
            if !self.credit_for() {
                return Ok(Posted::NoResources(()));
            }
        }
        let mut h = Header::new(Kind::Send, 0);
        h.tag = tag;
        // Room for the header first: the frame's bytes are contiguous (see `OutFrame`).
        let mut payload = self.spare_payloads.pop().unwrap_or_default();
        payload.resize(HEADER_LEN, 0);
        for p in parts {
            payload.extend_from_slice(p);
        }
        let payload = match self.send_direct(id, h, payload) {
            Ok(posted) => return Ok(posted),
            Err(payload) => payload,
        };
        Ok(
            match self.post_counted(h, payload, true, (id, Op::Send, false), None)? {
                None => Posted::InProgress,
                Some((payload, _)) => {
                    self.keep_payload(payload);
                    Posted::NoResources(())
                }
            },
        )
    }

    /// Posts a send of an owned buffer: `sendmsg` gathers header and buffer without copying
    /// (with `SEND_ZC` at or above `config.zero_copy_threshold`). The buffer comes back in the
    /// completion, or at once with [`Posted::NoResources`] when the peer's window is full.
    pub fn post_send_buf(
        &mut self,
        id: u64,
        tag: u64,
        buf: Vec<u8>,
    ) -> Result<Posted<Vec<u8>>, Error> {
        self.check_issuer()?;

        let mut h = Header::new(Kind::Send, 0);
        h.tag = tag;
        Ok(
            match self.post_counted(h, buf, false, (id, Op::Send, true), None)? {
                None => Posted::InProgress,
                Some((b, _)) => Posted::NoResources(b),
            },
        )
    }

    /// Posts an emulated RDMA write of `data` to `offset` of the peer's region `key`. The
    /// target checks key and bounds; a refusal completes this descriptor with
    /// [`Error::RemoteAccess`] and the target's memory is not touched.
    pub fn post_write(
        &mut self,
        id: u64,
        key: RegionKey,
        offset: u64,
        data: &[u8],
    ) -> Result<Posted, Error> {
        self.check_issuer()?;

        self.check_open()?;
        if self.rma_out.len() >= self.config.max_outstanding {
            return Ok(Posted::NoResources(()));
        }
        let token = self.next_token;
        let mut h = Header::new(Kind::Write, 0);
        h.key = key.0;
        h.offset = offset;
        h.tag = token;
        let op = RmaOp {
            id,
            op: Op::Write,
            len: data.len(),
            buf: None,
        };
        Ok(
            match self.post_counted(h, data.to_vec(), false, (id, Op::Write, false), Some(op))? {
                None => Posted::InProgress,
                Some(_) => Posted::NoResources(()),
            },
        )
    }

    /// Posts an emulated RDMA read of `buf.len()` bytes at `offset` of the peer's region `key`
    /// into `buf`, which comes back filled in the completion.
    pub fn post_read(
        &mut self,
        id: u64,
        key: RegionKey,
        offset: u64,
        buf: Vec<u8>,
    ) -> Result<Posted<Vec<u8>>, Error> {
        self.check_issuer()?;

        self.check_open()?;
        self.check_len(buf.len())?;
        if self.rma_out.len() >= self.config.max_outstanding {
            return Ok(Posted::NoResources(buf));
        }
        let token = self.next_token;
        let mut h = Header::new(Kind::Read, 0);
        h.key = key.0;
        h.offset = offset;
        h.tag = token;
        let req = (buf.len() as u64).to_le_bytes().to_vec();
        // The buffer travels with the outstanding operation, which comes back unregistered
        // when the window is full.
        let op = RmaOp {
            id,
            op: Op::Read,
            len: buf.len(),
            buf: Some(buf),
        };
        Ok(
            match self.post_counted(h, req, false, (id, Op::Read, false), Some(op))? {
                None => Posted::InProgress,
                Some((_, op)) => Posted::NoResources(op.and_then(|o| o.buf).unwrap_or_default()),
            },
        )
    }

    // ----- regions -------------------------------------------------------------------------

    /// Registers `mem` for the peer's emulated RDMA writes and reads.
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

    // ----- completions and waiting ---------------------------------------------------------

    /// Makes progress and returns the next completion, if any. Never blocks.
    pub fn poll(&mut self) -> Option<Completion> {
        if let Some(c) = self.completions.pop_front() {
            self.just_reaped = true;
            return Some(c);
        }
        if self.check_issuer().is_err() {
            // Nothing may enter the ring from here; `wait` and the posts say why.
            return None;
        }
        if self.config.keepalive.is_some() {
            self.maybe_keepalive(Instant::now());
        }
        // With plain receives, the call that ends a loop draining completions (the one right
        // after a completion was returned) leaves the socket alone unless a completion may hang
        // on the connection moving (a send in the ring, a write or read waiting for its
        // reply): a sender that reaps its sends makes no receive call for that. Every other
        // call receives, so the peer's requests are served.
        let receive = !std::mem::take(&mut self.just_reaped)
            || self.in_flight
            || !self.rma_out.is_empty()
            || !self.queue.is_empty();
        self.progress_with(receive);
        if self.completions.is_empty() && !self.rma_out.is_empty() {
            // Replies may wait behind inbound frames.
            let _ = self.advance();
        }
        let c = self.completions.pop_front();
        self.just_reaped = c.is_some();
        c
    }

    /// Queues a keepalive frame when [`Config::keepalive`] passed since the last frame this end
    /// sent (it leaves with the next flush). Frames sent are counted, so a busy end never sends
    /// one; an end whose send is stuck behind a full window sends none either (its peer then
    /// has bytes to read).
    fn maybe_keepalive(&mut self, now: Instant) {
        let Some(every) = self.config.keepalive else {
            return;
        };
        if self.frames_sent != self.sent_seen.0 {
            self.sent_seen = (self.frames_sent, now);
            return;
        }
        if now.duration_since(self.sent_seen.1) < every
            || self.failed.is_some()
            || self.in_flight
            || !self.queue.is_empty()
        {
            return;
        }
        self.keepalives += 1;
        self.enqueue(Header::new(Kind::Credit, 0), Vec::new(), None);
        self.sent_seen = (self.frames_sent, now);
    }

    /// Keepalive frames sent so far ([`Config::keepalive`]).
    pub fn keepalives_sent(&self) -> u64 {
        self.keepalives
    }

    /// The last time this end saw a sign of life from the peer: bytes received since the
    /// previous call (the first call compares with the state at set-up). The peer's messages
    /// and its keepalive frames ([`Config::keepalive`]) count; the kernel's TCP
    /// acknowledgements do not (a stopped process's kernel still sends those). The caller
    /// decides what silence means.
    pub fn peer_heard(&mut self) -> Instant {
        if self.received != self.heard_seen.0 {
            self.heard_seen = (self.received, Instant::now());
        }
        self.heard_seen.1
    }

    fn ready(&self) -> bool {
        // While a message is lent out ([`Endpoint::lend`]), inbound bytes wait for its return:
        // they are not work for a sleeper.
        !self.completions.is_empty()
            || (self.lent.is_none()
                && (matches!(
                    self.current,
                    Current::InPlace { .. } | Current::Assembled { .. }
                ) || !self.rx.is_empty()))
            || self.failed.is_some()
    }

    /// Prepares a sleep that another thread may take without this endpoint (so without the
    /// lock its owner keeps it under): `None` when a completion or inbound data is ready (or
    /// the peer failed); else a [`Sleeper`] on the socket and the ring, woken by what
    /// [`Endpoint::wait`] wakes for. Sends a keepalive that fell due, as `wait` does; a sleeper
    /// sleeps at most the keepalive interval at once (1 ms while operations are in flight),
    /// so that its caller comes back here in time.
    pub fn sleeper(&mut self) -> Result<Option<Sleeper>, Error> {
        self.check_issuer()?;
        self.progress_with(!self.config.immediate_io);
        if self.ready() {
            return Ok(None);
        }
        self.maybe_keepalive(Instant::now());
        // Credit held back while polling goes out before this end sleeps.
        self.credit_when_idle();
        self.flush_quietly();
        if self.ready() {
            return Ok(None);
        }
        if self.ring.in_flight() == 0 && !self.config.immediate_io {
            // Nothing can arrive: the receive ended and could not be re-armed.
            return Ok(None);
        }
        let fds = match &self.wake_fds {
            Some(f) => Arc::clone(f),
            None => {
                let f = Arc::new(WakeFds {
                    socket: self.stream.try_clone().map_err(Error::Wait)?.into(),
                    ring: self.ring.dup_fd().map_err(Error::Wait)?,
                });
                self.wake_fds = Some(Arc::clone(&f));
                f
            }
        };
        let mut longest = match self.config.keepalive {
            Some(k) => k.max(Duration::from_millis(1)),
            None => Duration::from_secs(1),
        };
        if self.ring.in_flight() > 0 {
            longest = longest.min(Duration::from_millis(1));
        }
        Ok(Some(Sleeper::new(fds, self.config.immediate_io, longest)))
    }

    /// Blocks until a completion or inbound data may be ready, the peer failed, or `timeout`
    /// passed. With `config.busy_poll` it polls the completion queue first (up to
    /// `config.spin` times), then sleeps in `io_uring_enter`.
    pub fn wait(&mut self, timeout: Duration) -> Result<(), Error> {
        self.check_issuer()?;
        // With plain receives and no spinning, the socket is not read here: the sleep below
        // returns at once when it holds bytes, and they are read then (one call fewer for a
        // caller that found nothing in `next` just before).
        self.progress_with(self.config.busy_poll || !self.config.immediate_io);
        if self.ready() {
            return Ok(());
        }
        if self.config.busy_poll {
            for i in 0..self.config.spin {
                // With plain receives every eighth poll also tries the socket (a syscall, some
                // ten times a poll of the completion queue), so that the spin lasts about as
                // long as through the ring.
                self.progress_with(!self.config.immediate_io || i % 8 == 0);
                if self.ready() {
                    return Ok(());
                }
                std::hint::spin_loop();
            }
        }
        let deadline = Instant::now() + timeout;
        while !self.ready() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            // A sleeping end stays alive to its peer: wake for each keepalive that falls due.
            self.maybe_keepalive(now);
            self.credit_when_idle();
            self.flush_quietly();
            let mut slice = deadline - now;
            if let Some(k) = self.config.keepalive {
                slice = slice.min(k.max(Duration::from_millis(1)));
            }
            if self.config.immediate_io && self.failed.is_none() && self.ring.in_flight() == 0 {
                // Nothing in the ring: sleep on the socket itself, which wakes this thread
                // directly when bytes, the end of the stream or an error arrive (no task work
                // of the ring on the way).
                self.sleep_on_socket(slice);
                self.progress();
                continue;
            }
            if self.config.immediate_io && !self.poll_armed && self.failed.is_none() {
                // Sends in the ring: sleep in the ring, woken by them or by the socket.
                if let Err(e) = self.arm_poll() {
                    self.engine_failed(&e);
                    break;
                }
            }
            let mut reaped = std::mem::take(&mut self.reaped);
            let r = self.ring.wait(1, Some(slice), &mut reaped);
            for c in reaped.drain(..) {
                self.on_completion(c);
            }
            self.reaped = reaped;
            if let Err(e) = r {
                self.engine_failed(&Error::Uring(e));
            }
            self.progress();
            if self.ring.in_flight() == 0 && !self.ready() && !self.config.immediate_io {
                // Nothing can arrive: the receive ended and could not be re-armed (with plain
                // receives the next turn arms the readiness poll again).
                break;
            }
        }
        Ok(())
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // Queued frames still go out (bounded by the peer's window), then the socket closes;
        // the ring's drop cancels what is left in flight before its memory is freed.
        let deadline = Instant::now() + Duration::from_millis(500);
        while (self.in_flight || !self.queue.is_empty())
            && self.failed.is_none()
            && Instant::now() < deadline
        {
            if self.wait(Duration::from_millis(10)).is_err() {
                break;
            }
        }
        // SAFETY: shutdown on our own open socket; it does not close the descriptor.
        unsafe {
            libc::shutdown(self.stream.as_raw_fd(), libc::SHUT_RDWR);
        }
    }
}

/// A number that tells the live threads of the process apart: the address of a thread-local
/// byte (cheaper than `thread::current`, which counts a reference).
fn thread_mark() -> usize {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|m| m as *const u8 as usize)
}

/// The reason a connection failure with `errno` is reported with.
fn failure_reason(errno: i32) -> &'static str {
    match errno {
        libc::ECONNRESET => "the connection was reset by the peer",
        libc::EPIPE => "the peer closed the connection",
        libc::ETIMEDOUT => "the peer stopped acknowledging data (timeout)",
        _ => "the connection failed",
    }
}
