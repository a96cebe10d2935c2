//! Entry points for the fuzz targets in the repository's `fuzz/` folder (cargo feature
//! `fuzzing`): the agent's handling of inbound messages (see [`crate::wire`] and
//! [`crate::engine::read_rndv`]) without methods, so that a fuzzer can play a broken or hostile
//! peer. Not part of the API.

use crate::config::Config;
use crate::engine::{Book, Completions, PostedRecv};
use crate::matching::{Pattern, Source, TagMatch};
use crate::recv_buffer::RecvBuffer;
use crate::request::Request;
use crate::wire;

/// Every message kind the agent knows (the method tag's top byte), the last handshake
/// bytes' kind included.
pub const KINDS: [u8; 10] = {
    let mut k = [0u8; 10];
    let mut i = 0;
    while i < k.len() {
        k[i] = wire::Kind::ALL[i].byte();
        i += 1;
    }
    k
};

/// A method tag: `kind` in the top byte, `id` in the low 56 bits.
pub fn method_tag(kind: u8, id: u64) -> u64 {
    wire::raw_tag(kind, id)
}

/// An `EAGER` payload (for seed inputs).
pub fn eager(context: u32, tag: u32, data: &[u8]) -> Vec<u8> {
    wire::eager(context, tag, data)
}

/// The method tag of an `EAGER_PACKED` message, when `context` fits one (for seed inputs).
pub fn eager_packed_tag(context: u32, tag: u32) -> Option<u64> {
    wire::eager_packed_tag(context, tag)
}

/// An `RTS` payload (for seed inputs).
pub fn rts(context: u32, tag: u32, len: u64) -> Vec<u8> {
    wire::rts(context, tag, len)
}

/// An `XFER` piece (for seed inputs).
pub fn xfer_piece(context: u32, tag: u32, seq: u32, total: u64, data: &[u8]) -> Vec<u8> {
    wire::xfer_piece(context, tag, seq, total, data)
}

/// The bookkeeping of one agent (matching queues, rendezvous state, xfer engine) fed with
/// messages as its methods would deliver them.
#[derive(Debug)]
pub struct Inbound {
    book: Book,
    recvs: Vec<(Request, RecvBuffer)>,
    sends: Vec<Request>,
}

impl Default for Inbound {
    fn default() -> Self {
        Self::new()
    }
}

impl Inbound {
    /// Rank 0 with the default configuration's limits.
    pub fn new() -> Inbound {
        let c = Config::default();
        Inbound {
            book: Book::new(
                0,
                c.eager_limit,
                c.rendezvous_chunk,
                c.max_unexpected_bytes,
                c.xfer_chunk,
                c.verbs_write_min as u64,
                Completions::default(),
            ),
            recvs: Vec::new(),
            sends: Vec::new(),
        }
    }

    /// Posts a receive of at most `capacity` bytes; `None` is a wildcard.
    pub fn post_recv(
        &mut self,
        context: u32,
        source: Option<u32>,
        tag: Option<u32>,
        capacity: usize,
    ) {
        let (request, counter) = Request::message(1);
        let buf = RecvBuffer::new(capacity);
        let pattern = Pattern {
            context,
            source: source.map_or(Source::Any, Source::Rank),
            tag: tag.map_or(TagMatch::Any, TagMatch::Tag),
        };
        self.book.post_recv(
            pattern,
            PostedRecv {
                buf: buf.clone(),
                counter,
                ranks: None,
                lease: None,
            },
        );
        self.recvs.push((request, buf));
    }

    /// Starts a rendezvous send of `len` bytes (in pieces of `chunk`) to `peer`, waiting for
    /// the peer's `CTS`; returns the sender's id the peer must name.
    pub fn rendezvous_send(&mut self, peer: u32, len: usize, chunk: usize) -> u64 {
        let (request, counter) = Request::message(1);
        let chunk = chunk.max(1);
        let mut chunks: Vec<Vec<u8>> = (0..len / chunk).map(|_| vec![7; chunk]).collect();
        if len % chunk != 0 || chunks.is_empty() {
            chunks.push(vec![7; len % chunk]);
        }
        let pieces = chunks.into_iter().map(Into::into).collect();
        let out = self.book.rendezvous_send(peer, 1, 2, pieces, counter);
        self.sends.push(request);
        wire::split_tag(out.tag).1
    }

    /// Handles one inbound message from `peer`, as the agent does when a method delivers it;
    /// an error is what fails the peer's VC.
    pub fn message(&mut self, peer: u32, tag: u64, data: &[u8]) -> Result<(), String> {
        self.book
            .inbound(peer, tag, data)
            .map_err(|e| e.to_string())
    }

    /// Checks what peers cannot be allowed to break: no receive buffer holds more than its
    /// capacity.
    ///
    /// # Panics
    /// When one does.
    pub fn check(&self) {
        for (_, buf) in &self.recvs {
            assert!(
                buf.len() <= buf.capacity(),
                "a receive buffer of capacity {} holds {} bytes",
                buf.capacity(),
                buf.len()
            );
        }
    }

    /// Fails everything still open, as finalize does.
    pub fn finish(mut self) {
        self.book.fail_all();
        drop(self.recvs);
        drop(self.sends);
    }
}
