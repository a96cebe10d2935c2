//! A single-producer/single-consumer ring of records in the shared segment.
//!
//! A record starts on a cache line: an 8-byte stamp, a 32-byte [`Header`], then the payload,
//! padded to whole cache lines. The producer writes header and payload, then stores the stamp
//! with release ordering; the consumer polls the stamp of the record at its position with
//! acquire ordering, so a small message costs one cache-line transfer. The stamp is the record's
//! byte position (monotonic, never reused) mixed with a per-segment salt, so memory left over
//! from an earlier lap never looks valid. The consumer gives space back by storing the position
//! it has released up to; the producer re-reads that word only when its cached copy says the
//! ring is full. A record that does not fit before the end of the data area is preceded by a
//! padding record and placed at the start.
//!
//! A record longer than one line costs the consumer a transfer per line. It prefetches a
//! record's later lines as soon as the header gives their number, and (on AMD processors, see
//! `Config::poll_prefetch`), while it polls, the later lines of a small record (2-4 lines) the
//! size of the last one, so that those transfers run beside others instead of after them
//! ([`Consumer::peek`]).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::frame::{HEADER_LEN, Header};

use super::segment::{ConsumerLine, LINE};

/// Bytes in front of the payload of a record: the stamp and the frame header.
pub(crate) const RECORD_HEADER: usize = 8 + HEADER_LEN;
/// Lines after a record's first that the consumer prefetches when it finds the record: a
/// payload of up to 4 KiB; longer ones are copied at the speed of the hardware's own
/// streaming prefetch.
const PREFETCH_LINES: usize = 64;
/// The largest record (in lines) whose later lines the consumer prefetches while it polls
/// for the next record ([`Consumer::prefetch_next`]): a payload of up to 216 bytes.
const POLL_PREFETCH_LINES: usize = 4;
/// Stamp kind byte value marking a padding record (not a frame kind).
const PAD_MARK: u64 = 0x00FF_FFFF_FFFF_FFFF;

/// Bytes a record with `len` payload bytes occupies in the ring.
pub(crate) fn record_bytes(len: usize) -> usize {
    (RECORD_HEADER + len).div_ceil(LINE) * LINE
}

fn stamp_of(pos: u64, salt: u64) -> u64 {
    // Never 0, so zero-filled memory is never a valid stamp.
    ((pos + 1) ^ salt) | 1 << 63
}

/// The sending half of a ring.
pub(crate) struct Producer {
    data: NonNull<u8>,
    size: usize,
    salt: u64,
    head: u64,
    cached_tail: u64,
    consumer: NonNull<ConsumerLine>,
}

/// A reserved record: write the payload through `payload`, then [`Producer::publish`].
pub(crate) struct Reservation {
    pos: u64,
    payload: NonNull<u8>,
    len: usize,
}

impl Reservation {
    /// The payload area of the record (`len` bytes, not yet visible to the consumer).
    pub(crate) fn payload(&mut self) -> &mut [u8] {
        // SAFETY: the reservation covers `len` bytes inside the ring data area that the consumer
        // has released and will not read before the stamp is published; `&mut self` makes the
        // borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.payload.as_ptr(), self.len) }
    }
}

impl Producer {
    /// # Safety
    /// `data` must point to `size` bytes of the shared segment reserved to this ring, `consumer`
    /// to its consumer line, both valid for the life of the producer, and there must be no other
    /// producer of this ring.
    pub(crate) unsafe fn new(
        data: NonNull<u8>,
        size: usize,
        salt: u64,
        consumer: NonNull<ConsumerLine>,
    ) -> Producer {
        Producer {
            data,
            size,
            salt,
            head: 0,
            cached_tail: 0,
            consumer,
        }
    }

    fn consumer(&self) -> &ConsumerLine {
        // SAFETY: valid for the life of the producer (constructor contract); atomics only.
        unsafe { self.consumer.as_ref() }
    }

    /// The largest payload a single record can carry.
    pub(crate) fn max_payload(&self) -> usize {
        self.size / 2 - RECORD_HEADER
    }

    /// Bytes of the ring that the consumer has not released yet.
    pub(crate) fn in_use(&self) -> usize {
        // The tail lives in memory the peer writes: a broken peer must not make this overflow.
        let used = self
            .head
            .wrapping_sub(self.consumer().tail.load(Ordering::Acquire));
        used.min(self.size as u64) as usize
    }

    /// Whether `need` more bytes fit, given the consumer's tail `tail` (a tail the producer
    /// never published, from a broken peer, counts as a full ring).
    fn fits(&self, need: u64, tail: u64) -> bool {
        match self.head.checked_sub(tail) {
            Some(used) => used <= self.size as u64 && need <= self.size as u64 - used,
            None => false,
        }
    }

    /// Reserves a record for `len` payload bytes, or `None` when the ring lacks the space now.
    pub(crate) fn reserve(&mut self, len: usize) -> Option<Reservation> {
        if len > self.max_payload() {
            return None;
        }
        let rec = record_bytes(len) as u64;
        let off = (self.head % self.size as u64) as usize;
        let pad = if off + rec as usize > self.size {
            (self.size - off) as u64
        } else {
            0
        };
        let need = pad + rec;
        if !self.fits(need, self.cached_tail) {
            self.cached_tail = self.consumer().tail.load(Ordering::Acquire);
            if !self.fits(need, self.cached_tail) {
                return None;
            }
        }
        if pad > 0 {
            // SAFETY: `off` is a line-aligned offset inside the data area, released by the
            // consumer (checked above), so writing the stamp word there races with nothing.
            let stamp = unsafe { &*self.data.as_ptr().add(off).cast::<AtomicU64>() };
            stamp.store(stamp_of(self.head, self.salt) ^ PAD_MARK, Ordering::Release);
            self.head += pad;
        }
        let off = (self.head % self.size as u64) as usize;
        // SAFETY: the record `off..off + rec` lies inside the data area (pad handled above).
        let payload =
            unsafe { NonNull::new_unchecked(self.data.as_ptr().add(off + RECORD_HEADER)) };
        Some(Reservation {
            pos: self.head,
            payload,
            len,
        })
    }

    /// Writes `header` and makes the reserved record visible to the consumer.
    pub(crate) fn publish(&mut self, r: Reservation, header: &Header) {
        debug_assert_eq!(r.pos, self.head);
        let off = (r.pos % self.size as u64) as usize;
        let bytes = header.encode();
        // SAFETY: the header area of the reserved record is ours until the stamp is published;
        // the stamp word is 8-aligned (records are line aligned) and accessed atomically only.
        unsafe {
            let base = self.data.as_ptr().add(off);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(8), HEADER_LEN);
            (*base.cast::<AtomicU64>()).store(stamp_of(r.pos, self.salt), Ordering::Release);
        }
        self.head += record_bytes(r.len) as u64;
    }
}

/// A record visible to the consumer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    /// Ring position of the record.
    pub pos: u64,
    /// Its header (validated by [`Header::decode`]).
    pub header: Header,
    /// Its payload inside the ring.
    pub payload: NonNull<u8>,
}

impl Record {
    /// Position just past this record.
    pub(crate) fn end(&self) -> u64 {
        self.pos + record_bytes(self.header.len as usize) as u64
    }
}

/// The receiving half of a ring.
pub(crate) struct Consumer {
    data: NonNull<u8>,
    size: usize,
    salt: u64,
    pos: u64,
    /// Lines of the last record found (see [`Consumer::prefetch_next`]).
    last_lines: usize,
    /// Whether [`Consumer::prefetch_next`] prefetches (`Config::poll_prefetch`).
    poll_prefetch: bool,
    consumer: NonNull<ConsumerLine>,
}

/// What the consumer finds at its position.
pub(crate) enum Peek {
    /// No record yet.
    Empty,
    /// A record.
    Record(Record),
    /// A record whose header is not valid: the peer is broken.
    Corrupt(String),
}

impl Consumer {
    /// `poll_prefetch`: see [`Consumer::prefetch_next`].
    ///
    /// # Safety
    /// Same contract as [`Producer::new`], for the single consumer of the ring.
    pub(crate) unsafe fn new(
        data: NonNull<u8>,
        size: usize,
        salt: u64,
        consumer: NonNull<ConsumerLine>,
        poll_prefetch: bool,
    ) -> Consumer {
        Consumer {
            data,
            size,
            salt,
            pos: 0,
            last_lines: 1,
            poll_prefetch,
            consumer,
        }
    }

    /// Address range of the ring's data area.
    pub(crate) fn range(&self) -> std::ops::Range<usize> {
        let start = self.data.as_ptr() as usize;
        start..start + self.size
    }

    fn stamp_at(&self, off: usize) -> u64 {
        // SAFETY: `off` is a line-aligned offset inside the data area; the stamp word is only
        // accessed atomically.
        unsafe { (*self.data.as_ptr().add(off).cast::<AtomicU64>()).load(Ordering::Acquire) }
    }

    /// Whether a record (or padding) is waiting, without decoding it.
    pub(crate) fn ready(&self) -> bool {
        let off = (self.pos % self.size as u64) as usize;
        let s = self.stamp_at(off);
        s == stamp_of(self.pos, self.salt) || s == stamp_of(self.pos, self.salt) ^ PAD_MARK
    }

    /// The record at the consumer's position, skipping padding.
    pub(crate) fn peek(&mut self) -> Peek {
        let peek = self.peek_at(self.pos);
        match &peek {
            Peek::Record(r) => {
                self.pos = r.pos;
                self.last_lines = record_bytes(r.header.len as usize) / LINE;
            }
            Peek::Empty => self.prefetch_next(),
            Peek::Corrupt(_) => {}
        }
        peek
    }

    /// The record at ring position `pos` (the consumer's position or a record end after it,
    /// for looking ahead of records not released yet), skipping padding; nothing is taken.
    pub(crate) fn peek_at(&self, mut pos: u64) -> Peek {
        loop {
            let off = (pos % self.size as u64) as usize;
            let s = self.stamp_at(off);
            if s == stamp_of(pos, self.salt) {
                break;
            }
            if s == stamp_of(pos, self.salt) ^ PAD_MARK {
                pos += (self.size - off) as u64;
                continue;
            }
            return Peek::Empty;
        }
        let off = (pos % self.size as u64) as usize;
        // SAFETY: the stamp was published with release ordering after the header was written;
        // the 32 header bytes lie inside the data area (records are at least one line).
        let raw =
            unsafe { std::slice::from_raw_parts(self.data.as_ptr().add(off + 8), HEADER_LEN) };
        let limit = (self.size - off - RECORD_HEADER) as u32;
        let header = match Header::decode(raw, limit) {
            Ok(h) => h,
            Err(e) => return Peek::Corrupt(format!("record at ring position {pos}: {e}")),
        };
        // SAFETY: the payload `off + RECORD_HEADER .. + len` was checked to fit the data area.
        let payload =
            unsafe { NonNull::new_unchecked(self.data.as_ptr().add(off + RECORD_HEADER)) };
        self.prefetch_rest(off, header.len as usize);
        Peek::Record(Record {
            pos,
            header,
            payload,
        })
    }

    /// Starts fetching the lines of the record at `off` after its first (the one the stamp
    /// was read from), at most [`PREFETCH_LINES`] of them, as soon as the header says how long
    /// the record is.
    ///
    /// The producer wrote those lines before the stamp, so they sit modified in its cache;
    /// without this each is fetched only when the payload is copied. A caller with a lock or
    /// fence right after the copy (the agent: its unlock is a locked instruction, which waits
    /// for the copy's outstanding loads) then waits for those transfers there, after its
    /// checks, instead of having them run during the checks. Measured on the agent's 64 B and
    /// 256 B ping-pong over shm: 0.92 and 0.87 of the time without (41 alternating pairs of
    /// builds, `docs/perf/agent.md`).
    #[inline]
    fn prefetch_rest(&self, off: usize, len: usize) {
        let lines = record_bytes(len) / LINE;
        for i in 1..lines.min(PREFETCH_LINES + 1) {
            self.prefetch_line(off + i * LINE);
        }
    }

    /// On a poll that found nothing, where `Config::poll_prefetch` asks for it (by default
    /// on AMD processors only): when the last record was a small one of several lines (at
    /// most [`POLL_PREFETCH_LINES`]), prefetches the lines after the first of a record of
    /// that size at the consumer's position, so that they travel while the stamp is awaited.
    ///
    /// Such a record's lines reach the consumer one after the other otherwise: the stamp's
    /// line when it is published, the others only once the header was read. When the two
    /// ends sit far apart (in one phase of this machine an 8 B half round trip takes 0.31 us
    /// instead of 0.09), that second transfer cost the agent's 64 B ping-pong 0.41 against
    /// 0.31 us; with this it is 0.31 (7 alternating pairs of builds, `docs/perf/agent.md`).
    /// A line fetched before the producer wrote it is simply fetched again. Longer records are
    /// left alone: polling their lines while the producer copies into them slowed a 4 KiB
    /// ping-pong. On an Intel Xeon guest the same prefetches made the 64 B ping-pong 15 %
    /// slower, hence the setting.
    #[inline]
    fn prefetch_next(&self) {
        if !self.poll_prefetch || !(2..=POLL_PREFETCH_LINES).contains(&self.last_lines) {
            return;
        }
        let off = (self.pos % self.size as u64) as usize;
        // A record that does not fit before the end of the data area goes to its start.
        if off + self.last_lines * LINE <= self.size {
            for i in 1..self.last_lines {
                self.prefetch_line(off + i * LINE);
            }
        }
    }

    /// Starts fetching the line at offset `off` of the data area (`off < size`).
    #[inline]
    fn prefetch_line(&self, off: usize) {
        debug_assert!(off < self.size);
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // SAFETY: `off` lies inside the data area (callers keep it below `size`), so the
            // pointer stays inside the mapping; a prefetch reads nothing and cannot fault.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(self.data.as_ptr().add(off).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = off;
    }

    /// The consumer's position: everything before it is released.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// Releases every record up to and including `rec`, handing its space back to the producer.
    pub(crate) fn release(&mut self, rec: &Record) {
        self.pos = rec.end();
        // SAFETY: valid for the life of the consumer (constructor contract); atomics only.
        unsafe { self.consumer.as_ref() }
            .tail
            .store(self.pos, Ordering::Release);
    }
}

/// The stamp of a record at ring position `pos` (of padding when `pad`), for the fuzz entry
/// point (`super::fuzz`), which writes records as a peer would.
#[cfg(feature = "fuzzing")]
pub(super) fn fuzz_stamp(pos: u64, salt: u64, pad: bool) -> u64 {
    stamp_of(pos, salt) ^ if pad { PAD_MARK } else { 0 }
}
