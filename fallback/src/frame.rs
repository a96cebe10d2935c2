//! Wire frames shared by the TCP and shared-memory methods.
//!
//! Every message on a connection is one frame: a fixed 32-byte [`Header`] followed by `len`
//! payload bytes. The header carries the payload length, the [`Kind`] of frame, flags, a status
//! (for replies), a per-direction sequence number, and the key, tag/immediate and offset used by
//! one-sided operations. All integers are little-endian.
//!
//! ```text
//!  0        4    5     6        8        12       16              24              32
//!  +--------+----+-----+--------+--------+--------+---------------+---------------+
//!  | len    |kind|flags| status | seq    | key    | tag           | offset        |
//!  +--------+----+-----+--------+--------+--------+---------------+---------------+
//! ```
//!
//! The [`Decoder`] is written for input from a peer that may be broken or hostile: it never
//! panics, never allocates (a claimed length is checked against a configured maximum before
//! anything else happens) and reports each kind of malformed input as its own [`FrameError`].

/// Size of an encoded [`Header`] in bytes.
pub const HEADER_LEN: usize = 32;

/// What a frame carries.
///
/// ```
/// use viaduct_fallback::frame::Kind;
/// assert_eq!(Kind::from_u8(Kind::Send as u8), Some(Kind::Send));
/// assert!(Kind::Send.carries_credit() && Kind::Send.counts_against_window());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A two-sided message; `tag` is the sender's tag/immediate.
    Send = 1,
    /// Emulated RDMA write: put the payload at `offset` of region `key`; `tag` is the initiator's
    /// token, echoed in the [`Kind::WriteAck`].
    Write = 2,
    /// Reply to a [`Kind::Write`]; `status` is 0 or the refusal code, `tag` the token.
    WriteAck = 3,
    /// Emulated RDMA read of `tag`-token: the payload is the 8-byte length to read at `offset`
    /// of region `key`.
    Read = 4,
    /// Reply to a [`Kind::Read`]; `status` is 0 or the refusal code, the payload the bytes read.
    ReadReply = 5,
    /// Flow control: `offset` more bytes may be sent. (The kinds for which
    /// [`Kind::carries_credit`] holds return credit in `offset` the same way, so credit rides
    /// along with traffic that flows anyway.)
    Credit = 6,
    /// Orderly end of the connection.
    Close = 7,
    /// Shared memory: the message lies in the sender's memory; payload is address and length.
    Rendezvous = 8,
    /// Shared memory: one piece of a message copied through the ring in chunks.
    Fragment = 9,
}

impl Kind {
    /// Whether `offset` of a frame of this kind returns flow-control credit (bytes) to its
    /// receiver: true for [`Kind::Send`], [`Kind::WriteAck`], [`Kind::ReadReply`] and
    /// [`Kind::Credit`], whose `offset` has no other use.
    ///
    /// ```
    /// # use viaduct_fallback::frame::Kind;
    /// assert!(Kind::Credit.carries_credit());
    /// assert!(!Kind::Write.carries_credit()); // its offset is the target offset
    /// ```
    pub fn carries_credit(self) -> bool {
        matches!(
            self,
            Kind::Send | Kind::WriteAck | Kind::ReadReply | Kind::Credit
        )
    }

    /// Whether a frame of this kind counts against the receiver's window over TCP: the
    /// messages and requests a post makes ([`Kind::Send`], [`Kind::Write`], [`Kind::Read`]).
    /// The frames the endpoint makes itself (replies, credit, close) are not counted, so their
    /// receiver returns no credit for them either: crediting them back would hand the peer
    /// window it never used, and an idle pair would answer each credit frame with another.
    ///
    /// ```
    /// # use viaduct_fallback::frame::Kind;
    /// assert!(Kind::Read.counts_against_window());
    /// assert!(!Kind::Credit.counts_against_window());
    /// ```
    pub fn counts_against_window(self) -> bool {
        matches!(self, Kind::Send | Kind::Write | Kind::Read)
    }

    /// Decodes a kind byte.
    ///
    /// ```
    /// # use viaduct_fallback::frame::Kind;
    /// assert_eq!(Kind::from_u8(1), Some(Kind::Send));
    /// assert_eq!(Kind::from_u8(0), None);
    /// ```
    pub fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Send,
            2 => Kind::Write,
            3 => Kind::WriteAck,
            4 => Kind::Read,
            5 => Kind::ReadReply,
            6 => Kind::Credit,
            7 => Kind::Close,
            8 => Kind::Rendezvous,
            9 => Kind::Fragment,
            _ => return None,
        })
    }
}

/// Flag: this fragment is the first of its message (its `offset` holds the total length).
pub const FLAG_FIRST: u8 = 1;
/// All flag bits a valid header may carry.
pub const FLAGS_KNOWN: u8 = FLAG_FIRST;

/// The fixed frame header.
///
/// ```
/// use viaduct_fallback::frame::{HEADER_LEN, Header, Kind};
/// let mut h = Header::new(Kind::Send, 5);
/// h.tag = 42;
/// let bytes = h.encode();
/// assert_eq!(bytes.len(), HEADER_LEN);
/// assert_eq!(Header::decode(&bytes, 1024), Ok(h));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Payload bytes following the header.
    pub len: u32,
    /// What the frame carries.
    pub kind: Kind,
    /// [`FLAG_FIRST`] or 0.
    pub flags: u8,
    /// 0, or a refusal code in replies.
    pub status: u16,
    /// Per-direction frame sequence number (wrapping).
    pub seq: u32,
    /// Region key of one-sided operations.
    pub key: u32,
    /// Tag/immediate of a message, or the token of a one-sided operation.
    pub tag: u64,
    /// Offset into a region, or a length where the kind says so.
    pub offset: u64,
}

/// Why a byte sequence is not a valid frame.
///
/// ```
/// use viaduct_fallback::frame::{FrameError, Header};
/// assert_eq!(Header::decode(&[0; 4], 64), Err(FrameError::Truncated { have: 4 }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Fewer than [`HEADER_LEN`] bytes were given to [`Header::decode`].
    #[error("truncated header: {have} of {HEADER_LEN} bytes")]
    Truncated {
        /// Bytes present.
        have: usize,
    },
    /// The kind byte names no known kind.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// Flag bits outside [`FLAGS_KNOWN`] are set.
    #[error("unknown flag bits {0:#04x}")]
    UnknownFlags(u8),
    /// The payload length exceeds the configured maximum.
    #[error("payload length {len} exceeds the maximum of {max} bytes")]
    TooLong {
        /// Claimed length.
        len: u32,
        /// Configured maximum.
        max: u32,
    },
    /// The sequence number is not the one expected next.
    #[error("frame sequence {got} where {expected} was expected")]
    OutOfSequence {
        /// Sequence number in the header.
        got: u32,
        /// Sequence number expected.
        expected: u32,
    },
}

impl FrameError {
    /// The errno a C caller would expect: `EMSGSIZE` for a too long frame, `EPROTO` otherwise.
    ///
    /// ```
    /// use viaduct_fallback::frame::FrameError;
    /// assert_eq!(FrameError::TooLong { len: 2, max: 1 }.errno(), 90); // EMSGSIZE
    /// assert_eq!(FrameError::UnknownKind(0).errno(), 71); // EPROTO
    /// ```
    pub fn errno(&self) -> i32 {
        match self {
            FrameError::TooLong { .. } => libc::EMSGSIZE,
            _ => libc::EPROTO,
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl Header {
    /// A header of `kind` with `len` payload bytes and every other field zero.
    ///
    /// ```
    /// # use viaduct_fallback::frame::{Header, Kind};
    /// let h = Header::new(Kind::Send, 100);
    /// assert_eq!((h.len, h.seq, h.tag), (100, 0, 0));
    /// ```
    pub fn new(kind: Kind, len: u32) -> Header {
        Header {
            len,
            kind,
            flags: 0,
            status: 0,
            seq: 0,
            key: 0,
            tag: 0,
            offset: 0,
        }
    }

    /// Encodes the header into its 32 wire bytes.
    ///
    /// ```
    /// # use viaduct_fallback::frame::{Header, Kind};
    /// let bytes = Header::new(Kind::Send, 7).encode();
    /// assert_eq!(&bytes[..5], [7, 0, 0, 0, Kind::Send as u8]); // little-endian length, then the kind
    /// ```
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.len.to_le_bytes());
        b[4] = self.kind as u8;
        b[5] = self.flags;
        b[6..8].copy_from_slice(&self.status.to_le_bytes());
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.key.to_le_bytes());
        b[16..24].copy_from_slice(&self.tag.to_le_bytes());
        b[24..32].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    /// Decodes a header from the first [`HEADER_LEN`] bytes of `bytes`, refusing a payload
    /// length above `max_len`. Never panics; extra bytes after the header are ignored.
    ///
    /// ```
    /// # use viaduct_fallback::frame::{FrameError, Header, Kind};
    /// let bytes = Header::new(Kind::Send, 100).encode();
    /// assert!(Header::decode(&bytes, 100).is_ok());
    /// assert_eq!(Header::decode(&bytes, 99), Err(FrameError::TooLong { len: 100, max: 99 }));
    /// ```
    pub fn decode(bytes: &[u8], max_len: u32) -> Result<Header, FrameError> {
        if bytes.len() < HEADER_LEN {
            return Err(FrameError::Truncated { have: bytes.len() });
        }
        let len = u32_at(bytes, 0);
        if len > max_len {
            return Err(FrameError::TooLong { len, max: max_len });
        }
        let kind = Kind::from_u8(bytes[4]).ok_or(FrameError::UnknownKind(bytes[4]))?;
        let flags = bytes[5];
        if flags & !FLAGS_KNOWN != 0 {
            return Err(FrameError::UnknownFlags(flags));
        }
        Ok(Header {
            len,
            kind,
            flags,
            status: u16::from_le_bytes([bytes[6], bytes[7]]),
            seq: u32_at(bytes, 8),
            key: u32_at(bytes, 12),
            tag: u64_at(bytes, 16),
            offset: u64_at(bytes, 24),
        })
    }
}

/// What [`Decoder::decode`] found at the front of its input.
///
/// ```
/// use viaduct_fallback::frame::{Decoded, Decoder, Header, Kind};
/// let mut input = Header::new(Kind::Send, 3).encode().to_vec();
/// let mut d = Decoder::new(1024);
/// assert!(matches!(d.decode(&input)?, Decoded::NeedPayload { need: 3, .. }));
/// input.extend_from_slice(b"abc");
/// assert!(matches!(d.decode(&input)?, Decoded::Frame { payload: b"abc", .. }));
/// # Ok::<(), viaduct_fallback::frame::FrameError>(())
/// ```
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole frame: its header and payload, borrowed from the input.
    Frame {
        /// The header.
        header: Header,
        /// The payload (`header.len` bytes).
        payload: &'a [u8],
    },
    /// The input ends inside the header; `need` more bytes are required.
    NeedHeader {
        /// Bytes still missing.
        need: usize,
    },
    /// The header is complete and valid but the payload is not all there yet.
    NeedPayload {
        /// The header.
        header: Header,
        /// Payload bytes still missing.
        need: usize,
    },
}

/// Stateful frame decoder of one direction of a connection: checks lengths against a maximum
/// and sequence numbers for continuity.
///
/// ```
/// use viaduct_fallback::frame::{Decoded, Decoder, Header, Kind};
/// let mut d = Decoder::new(1024);
/// let mut second = Header::new(Kind::Send, 0);
/// second.seq = 1;
/// assert!(matches!(d.decode(&Header::new(Kind::Send, 0).encode())?, Decoded::Frame { .. }));
/// assert!(matches!(d.decode(&second.encode())?, Decoded::Frame { .. }));
/// assert!(d.decode(&second.encode()).is_err()); // sequence 1 again
/// # Ok::<(), viaduct_fallback::frame::FrameError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Decoder {
    max_len: u32,
    next_seq: u32,
}

impl Decoder {
    /// A decoder refusing payloads longer than `max_len` and expecting sequence number 0 first.
    ///
    /// ```
    /// # use viaduct_fallback::frame::{Decoded, Decoder};
    /// let mut d = Decoder::new(1 << 20);
    /// assert_eq!(d.decode(&[])?, Decoded::NeedHeader { need: 32 });
    /// # Ok::<(), viaduct_fallback::frame::FrameError>(())
    /// ```
    pub fn new(max_len: u32) -> Decoder {
        Decoder {
            max_len,
            next_seq: 0,
        }
    }

    /// The largest payload this decoder accepts.
    ///
    /// ```
    /// # use viaduct_fallback::frame::Decoder;
    /// assert_eq!(Decoder::new(4096).max_len(), 4096);
    /// ```
    pub fn max_len(&self) -> u32 {
        self.max_len
    }

    /// Looks at the front of `input`. A returned [`Decoded::Frame`] advances the expected
    /// sequence number; the caller drops `HEADER_LEN + header.len` bytes from its input.
    /// [`Decoded::NeedPayload`] does not advance it: the same header is decoded again later.
    ///
    /// ```
    /// # use viaduct_fallback::frame::{Decoded, Decoder, Header, Kind};
    /// let mut d = Decoder::new(1024);
    /// let frame = [&Header::new(Kind::Send, 2).encode()[..], b"hi"].concat();
    /// assert!(matches!(d.decode(&frame[..10])?, Decoded::NeedHeader { need: 22 }));
    /// assert!(matches!(d.decode(&frame)?, Decoded::Frame { payload: b"hi", .. }));
    /// # Ok::<(), viaduct_fallback::frame::FrameError>(())
    /// ```
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, FrameError> {
        if input.len() < HEADER_LEN {
            return Ok(Decoded::NeedHeader {
                need: HEADER_LEN - input.len(),
            });
        }
        let header = Header::decode(input, self.max_len)?;
        if header.seq != self.next_seq {
            return Err(FrameError::OutOfSequence {
                got: header.seq,
                expected: self.next_seq,
            });
        }
        let total = HEADER_LEN + header.len as usize;
        match input.get(HEADER_LEN..total) {
            Some(payload) => {
                self.next_seq = self.next_seq.wrapping_add(1);
                Ok(Decoded::Frame { header, payload })
            }
            None => Ok(Decoded::NeedPayload {
                header,
                need: total - input.len(),
            }),
        }
    }

    /// Checks `header` (already decoded by [`Header::decode`]) for sequence continuity and
    /// advances the expected sequence number; used when header and payload arrive apart.
    ///
    /// ```
    /// # use viaduct_fallback::frame::{Decoder, Header, Kind};
    /// let mut d = Decoder::new(1024);
    /// let h = Header::decode(&Header::new(Kind::Send, 8).encode(), 1024)?;
    /// d.accept(&h)?; // sequence 0 was expected
    /// assert!(d.accept(&h).is_err()); // sequence 1 is expected next
    /// # Ok::<(), viaduct_fallback::frame::FrameError>(())
    /// ```
    pub fn accept(&mut self, header: &Header) -> Result<(), FrameError> {
        if header.len > self.max_len {
            return Err(FrameError::TooLong {
                len: header.len,
                max: self.max_len,
            });
        }
        if header.seq != self.next_seq {
            return Err(FrameError::OutOfSequence {
                got: header.seq,
                expected: self.next_seq,
            });
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        Ok(())
    }
}
