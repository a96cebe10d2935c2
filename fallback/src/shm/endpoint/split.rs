//! Split single copy: both ends copy one long message at once.
//!
//! A long message goes by rendezvous: the receiver copies it straight out of the sender's buffer
//! with `process_vm_readv`. One core's copy is then the whole bandwidth, while the sender's core
//! usually just waits for the completion. With [`Config::split_copy`](super::Config) the receiver
//! cuts a message of more than one chunk into chunks and publishes it in its ring's
//! [`SplitLine`]; from then on both ends claim chunks through one compare-and-swap word and copy
//! them, the receiver with `process_vm_readv`, the sender (whenever it makes progress) with
//! `process_vm_writev` from the same buffer into the receiver's. Every byte is still copied once.
//!
//! The receiver alone decides when the message is done (every byte counted in `done`), and only
//! then tells the sender its buffer is free, so a chunk the sender claimed is always finished
//! before either end reuses a buffer. A sender that never makes progress costs nothing: the
//! receiver claims every chunk itself. A sender whose write fails hands its chunk back and stops
//! helping; a sender that dies mid-chunk is noticed by the receiver's liveness check.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::super::cma;
use super::super::error::Error;
use super::super::segment::SplitLine;
use super::Endpoint;

/// Smallest and largest chunk: a message gets about four chunks within these bounds.
const MIN_CHUNK: usize = 64 << 10;
const MAX_CHUNK: usize = 1 << 20;

/// Chunk size for a message of `len` bytes.
fn chunk_for(len: usize) -> usize {
    (len / 4).clamp(MIN_CHUNK, MAX_CHUNK).next_multiple_of(4096)
}

fn pack(number: u32, index: u32) -> u64 {
    (u64::from(number) << 32) | u64::from(index)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// Claims the next chunk of rendezvous `number` with `chunks` chunks, or None when every chunk
/// is claimed or another rendezvous is published.
fn claim(line: &SplitLine, number: u32, chunks: usize) -> Option<usize> {
    let mut word = line.claim.load(Ordering::Acquire);
    loop {
        let (n, index) = unpack(word);
        if n != number || index as usize >= chunks {
            return None;
        }
        match line
            .claim
            .compare_exchange_weak(word, word + 1, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(index as usize),
            Err(now) => word = now,
        }
    }
}

impl Endpoint {
    /// Bytes of this end's long sends that it copied into the peer itself (split single copy,
    /// see [`Config::split_copy`](super::Config::split_copy)); the receiver copied the rest.
    pub fn bytes_copied_for_peer(&self) -> u64 {
        self.helped_bytes
    }

    fn split_line(&self, ring: usize) -> &SplitLine {
        &self.seg.control().rings[ring].split
    }

    /// Receiver: copies the long message of `len` bytes at `addr` of the peer into the assembly
    /// buffer, with the sender's help where both ends allow it.
    pub(super) fn copy_long(&mut self, addr: u64, len: usize) -> Result<(), Error> {
        self.rendezvous_seen = self.rendezvous_seen.wrapping_add(1);
        let chunk = chunk_for(len);
        let peer_may_write = self.long_out == super::LongMessages::SingleCopy;
        if !self.config.split_copy || !peer_may_write || len <= chunk {
            return self.read_long(addr, 0, len);
        }
        let number = self.rendezvous_seen;
        let chunks = len.div_ceil(chunk);
        {
            let line = self.split_line(1 - self.side);
            line.chunk.store(chunk as u64, Ordering::Relaxed);
            let dest = self.assembly[self.assembly_start..].as_ptr();
            line.dest.store(dest as u64, Ordering::Relaxed);
            line.done.store(0, Ordering::Relaxed);
            line.handback.store(0, Ordering::Relaxed);
            line.claim.store(pack(number, 0), Ordering::Release);
        }
        // A sender asleep in `wait` wakes up and helps (a wake-up costs far less than a chunk).
        self.notify_peer();
        while let Some(i) = claim(self.split_line(1 - self.side), number, chunks) {
            self.read_chunk(addr, len, chunk, i)?;
        }
        // Wait for the chunks the sender claimed (at most one at a time, so briefly).
        let mut spins = 0u32;
        loop {
            let line = self.split_line(1 - self.side);
            if line.done.load(Ordering::Acquire) >= len as u64 {
                return Ok(());
            }
            let back = line.handback.swap(0, Ordering::AcqRel);
            let (n, index) = unpack(back);
            if n == number && index > 0 && (index as usize) <= chunks {
                self.read_chunk(addr, len, chunk, index as usize - 1)?;
                continue;
            }
            spins = spins.wrapping_add(1);
            std::hint::spin_loop();
            if spins % 1024 == 0 && self.last_check.elapsed() >= self.config.liveness_interval {
                self.check_liveness();
                if let Some(why) = self.failed {
                    return Err(Error::PeerFailed(why));
                }
            }
        }
    }

    /// Receiver: copies chunk `i` of the published message of `len` bytes and counts it done.
    fn read_chunk(&mut self, addr: u64, len: usize, chunk: usize, i: usize) -> Result<(), Error> {
        let at = i * chunk;
        let n = chunk.min(len - at);
        self.read_long(addr, at, n)?;
        self.split_line(1 - self.side)
            .done
            .fetch_add(n as u64, Ordering::Release);
        Ok(())
    }

    /// Receiver: reads bytes `[at, at + n)` of the peer's message at `addr` into the assembly
    /// buffer. The sender writes other chunks of the same buffer meanwhile, never these.
    fn read_long(&mut self, addr: u64, at: usize, n: usize) -> Result<(), Error> {
        let start = self.assembly_start + at;
        let read = cma::read_from(
            self.peer_pid,
            addr + at as u64,
            &mut self.assembly[start..start + n],
        );
        let len = self.assembly.len() - self.assembly_start;
        self.peer_read_done(len, read).inspect_err(|e| {
            if matches!(e, Error::SingleCopy { .. }) {
                self.fail("single-copy read from the peer failed");
            }
        })
    }

    /// Sender: copies chunks of the long message the receiver is reading now, if it published
    /// one of ours. Called from every progress pass while long sends are outstanding.
    pub(super) fn help_copy(&mut self) {
        if !self.helps_copy || self.failed.is_some() {
            return;
        }
        let started = Instant::now();
        loop {
            let line = self.split_line(self.side);
            let (number, _) = unpack(line.claim.load(Ordering::Acquire));
            // Rendezvous are numbered from 1 in the order they were sent; those reaped are done.
            let pos = number
                .wrapping_sub(self.rendezvous_reaped as u32)
                .wrapping_sub(1) as usize;
            let Some((_, buf)) = self.rendezvous_out.get(pos) else {
                return;
            };
            let chunk = line.chunk.load(Ordering::Relaxed) as usize;
            let dest = line.dest.load(Ordering::Relaxed);
            if chunk == 0 {
                return;
            }
            let len = buf.len();
            let Some(i) = claim(line, number, len.div_ceil(chunk)) else {
                return;
            };
            // The claim succeeded, so `chunk` and `dest` are those of rendezvous `number`: the
            // receiver publishes the next one only after this chunk is counted or handed back.
            let at = i * chunk;
            let n = chunk.min(len - at);
            match cma::write_to(self.peer_pid, dest + at as u64, &buf[at..at + n]) {
                Ok(()) => {
                    line.done.fetch_add(n as u64, Ordering::Release);
                    self.helped_bytes += n as u64;
                }
                Err(_) => {
                    line.handback
                        .store(pack(number, i as u32 + 1), Ordering::Release);
                    self.helps_copy = false;
                    return;
                }
            }
            // Stay a bounded time in one progress pass.
            if started.elapsed() > self.config.liveness_interval {
                return;
            }
        }
    }
}
