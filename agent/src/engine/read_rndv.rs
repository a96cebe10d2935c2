//! Rendezvous by RDMA READ or RDMA WRITE on verbs VCs, and by the receiver's read of the
//! sender's memory on shared-memory VCs.
//!
//! Over TCP, and over shared memory up to the method's ring-copy limit, a rendezvous message
//! travels as `RTS`, `CTS`, then `DATA` pieces (see [`crate::wire`]). Over a verbs VC the NIC
//! moves the data, one-sided:
//!
//! | kind | method tag id | payload |
//! | --- | --- | --- |
//! | `RTS_READ` (7) | sender's id | context u32, tag u32, length u64, then the sender's region: address u64, length u64, remote key u32 |
//! | `FIN` (8) | sender's id | empty: the receiver has read the data |
//! | `CTS_WRITE` (10) | sender's id | the receiver's region: address u64, length u64, remote key u32 |
//! | `FIN_WRITE` (11) | sender's id | empty: the sender has written the data |
//!
//! 1. **Sender** (`announce`, when the `RTS` of a rendezvous send is written on a verbs VC,
//!    whatever its length: synchronous sends of small messages too): takes a registered
//!    buffer from the VC's registration cache (one per connection, so the remote key goes to
//!    that peer only, see [`viaduct_verbs::regcache`]), copies the data into it (borrowed
//!    bytes were copied into it when the send was posted, see "Copies" below), and sends
//!    `RTS_READ` naming it. The buffer stays with the send until the data has moved.
//!    When no registered buffer can be had (e.g. the memory-lock limit), the `RTS` goes
//!    unchanged and the message takes the piecewise protocol.
//! 2. **Receiver**: `RTS_READ` is matched like any `RTS` (posted receive or unexpected
//!    queue). Once a receive matches, a registered buffer of the receiver's cache is taken,
//!    and the receiver chooses the direction by the message's length:
//!    - **read** (shorter than `VIADUCT_VERBS_WRITE_MIN`): an RDMA READ of the sender's region
//!      is posted on the VC's endpoint (in pieces bounded by the device's largest message, see
//!      [`viaduct_verbs::msg::Endpoint::post_read`]). When it completes, the receive completes
//!      and `FIN` goes to the sender, which completes the send and gives its buffer back.
//!    - **write** (from `VIADUCT_VERBS_WRITE_MIN` bytes): `CTS_WRITE` names the receiver's
//!      buffer; the sender posts an RDMA WRITE of its buffer into it. When the write completed
//!      at the sender (the receiver's NIC acknowledged every piece, so the bytes are in the
//!      receiver's memory), the send completes, its buffer goes back, and `FIN_WRITE` goes to
//!      the receiver, whose receive then completes.
//!
//!    A read costs one round trip less than a write (no `CTS_WRITE`), so it is the faster
//!    for short messages. Writes stream better where the NIC recovers lost packets of a read
//!    response slowly: soft-RoCE resends the lost tail of a READ response only when the
//!    queue pair's ACK timeout expires, while a lost WRITE packet is answered by a NAK at
//!    once (between two soft-RoCE devices, 4 MiB: `ib_read_bw` 8.9 MB/s, `ib_write_bw` 26.4,
//!    `docs/perf/cluster.md`). The sender follows whichever the receiver asks for, so the
//!    setting may differ between ranks.
//! 3. Delivery: the [`RecvBuffer`] takes the registered buffer (or a copy of its bytes, see
//!    "Copies").
//!
//! Copies: one on the sender, none or one on the receiver.
//! - Sender: a send of borrowed bytes ([`Agent::isend`](crate::agent::Agent::isend), blocking
//!   `send`) copies them straight into a registered buffer of the VC's cache when it is posted
//!   ([`register_copy`]), and that buffer is the send's only piece; the `RTS_READ` names it.
//!   A send of owned or shared data (`isend_owned`, `isend_shared`) keeps the caller's memory
//!   until its `RTS` is written, which then copies it into a registered buffer. (The caller's
//!   own memory is never registered: a registration must never outlive the memory it maps.)
//! - Receiver: a receive into the agent's own memory ([`RecvBuffer::new`], `irecv`) keeps the
//!   registered buffer the data landed in, with no copy ([`RecvBuffer::land`]); its
//!   registration goes back to the cache when the caller clears, takes or drops the buffer. A
//!   receive into the caller's memory (`recv`, [`RecvBuffer::caller`]) gets one copy.
//!
//! The bytes cross the wire by the NIC, with no copy through send slots or a reassembly buffer
//! (the piecewise protocol copies into send slots, into the reassembly buffer, then into the
//! `RecvBuffer`). Buffers are registered once per size class and connection: repeated
//! messages of one size register nothing
//! ([`Agent::verbs_cache_stats`](crate::agent::Agent::verbs_cache_stats) counts).
//!
//! Shared memory (past `VIADUCT_SHM_RING_COPY_MAX`, where the method's set-up probe found that
//! the peer may read this process, [`announce_shm`]): the send's data is one range of this
//! process's memory (a shared send's caller memory, an owned send's buffer, a borrowed send's
//! one copy), which `RTS_READ` names (remote key 0) and the send keeps until `FIN`. The
//! receiver, once a receive matched, copies it with `process_vm_readv` straight into the
//! receive's memory (the caller's, or the end of the agent's without zeroing it first) and
//! sends `FIN`. One copy, by the receiver alone: no `CTS`, no ring, no reassembly buffer, no
//! step by the sender, so the receive completes while the sender computes. A message too long
//! for the receive is read as far as it fits and fails the receive as truncated; the send
//! completes.
//!
//! Failure: a failed read or write fails its request and the VC; a failed VC fails the sends
//! waiting for `FIN` or for their write, the reads in flight and the receives waiting for
//! `FIN_WRITE` (the endpoint completes each operation once), so both requests complete once,
//! with the peer failure. A receive's buffer a peer may still write goes back to the cache
//! only with the VC failed: its queue pair then takes no more writes.

use std::collections::HashMap;

use super::{Completions, State, peer_failed};
use crate::error::AgentError;
use crate::proto::{Failure, ProtocolError};
use crate::recv_buffer::RecvBuffer;
use crate::request::CarCounter;
use crate::vc::Link;
use crate::vc::Outbound;
use crate::wire::{self, Kind};
use viaduct_fallback::sendbuf::SendBuf;

/// Bytes of the region in an `RTS_READ`.
pub(crate) const REGION_LEN: usize = 20;

/// A peer's region: address, length, remote key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Region {
    addr: u64,
    len: u64,
    rkey: u32,
}

impl Region {
    fn read(b: &[u8]) -> Option<Region> {
        if b.len() != REGION_LEN {
            return None;
        }
        Some(Region {
            addr: wire::u64_at(b, 0)?,
            len: wire::u64_at(b, 8)?,
            rkey: wire::u32_at(b, 16)?,
        })
    }

    #[cfg(feature = "rdma")]
    fn of(buf: &viaduct_verbs::Pooled) -> Region {
        let r = buf.remote();
        Region {
            addr: r.addr,
            len: r.len,
            rkey: r.rkey,
        }
    }

    #[cfg(feature = "rdma")]
    fn remote(&self) -> viaduct_verbs::RemoteRegion {
        viaduct_verbs::RemoteRegion {
            addr: self.addr,
            len: self.len,
            rkey: self.rkey,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.addr.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&self.rkey.to_le_bytes());
    }
}

/// Rendezvous messages received over verbs, by direction
/// ([`Agent::verbs_rendezvous_counts`](crate::agent::Agent::verbs_rendezvous_counts)).
#[cfg(feature = "rdma")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RendezvousCounts {
    /// Messages this rank read from the sender's registered buffer.
    pub read: u64,
    /// Messages the sender wrote into this rank's registered buffer.
    pub written: u64,
}

/// A send whose data waits for the receiver's read: in a registered buffer (verbs), or where
/// it lies in this process (shared memory).
#[derive(Debug)]
struct ReadSend {
    peer: u32,
    counter: CarCounter,
    len: u64,
    /// Shared memory: the send's data, one contiguous range the receiver reads with
    /// `process_vm_readv`; kept until `FIN`.
    held: Vec<SendBuf>,
    /// The registered buffer with the data: kept until `FIN` (the peer's NIC reads it), or
    /// handed to the endpoint for the write a `CTS_WRITE` asks for (`None` from then on).
    #[cfg(feature = "rdma")]
    buf: Option<viaduct_verbs::Pooled>,
}

impl ReadSend {
    /// Whether the send still holds its data for the receiver's read (no `CTS_WRITE` took
    /// it).
    fn holds_data(&self) -> bool {
        #[cfg(feature = "rdma")]
        if self.buf.is_some() {
            return true;
        }
        !self.held.is_empty()
    }

    /// Fails the send, letting go of its data first.
    fn fail(self, e: AgentError, done: &Completions) {
        let ReadSend { counter, held, .. } = self;
        drop(held);
        done.note(counter.fail_car(e));
    }
}

/// A registered buffer of a send prepared at post ([`register_copy`]).
#[cfg(feature = "rdma")]
type PreparedBuf = std::sync::Arc<viaduct_verbs::Pooled>;
#[cfg(not(feature = "rdma"))]
type PreparedBuf = ();

/// A matched receive reading its data.
#[derive(Debug)]
#[cfg_attr(not(feature = "rdma"), allow(dead_code))]
struct ReadRecv {
    peer: u32,
    sender_id: u64,
    region: Region,
    buf: RecvBuffer,
    counter: CarCounter,
    len: u64,
    /// Write: the registered buffer the sender writes into, named by `CTS_WRITE`.
    #[cfg(feature = "rdma")]
    target: Option<viaduct_verbs::Pooled>,
}

/// Rendezvous-by-read-or-write bookkeeping of an agent.
#[derive(Debug, Default)]
pub(crate) struct ReadRndv {
    sends: HashMap<u64, ReadSend>,
    /// Regions of `RTS_READ`s not matched yet, by (peer, sender's id).
    announced: HashMap<(u32, u64), Region>,
    /// Sends whose data is registered already ([`register_copy`]), by sender's id: their peer
    /// and buffer, until their `RTS` is written.
    prepared: HashMap<u64, (u32, PreparedBuf)>,
    /// Matched receives, by read descriptor id.
    recvs: HashMap<u64, ReadRecv>,
    /// Receives waiting for `FIN_WRITE`: their read descriptor id by (peer, sender's id).
    written_by: HashMap<(u32, u64), u64>,
    /// Sends a `CTS_WRITE` asked to write: sender's id and the receiver's region.
    to_write: Vec<(u64, Region)>,
    /// Writes posted: the sender's id by write descriptor id.
    writes: HashMap<u64, u64>,
    /// `FIN_WRITE`s to send: peer and sender's id.
    fin_writes: Vec<(u32, u64)>,
    /// Messages from this many bytes are written by the sender rather than read by the
    /// receiver (`VIADUCT_VERBS_WRITE_MIN`; 0: never).
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    write_min: u64,
    /// Receives completed, by direction.
    #[cfg(feature = "rdma")]
    counts: RendezvousCounts,
    /// Receives whose read is to be posted.
    to_post: Vec<u64>,
    /// Reads completed, their data to be delivered.
    landed: Vec<u64>,
    /// The agent's count of completed requests.
    done: Completions,
}

impl ReadRndv {
    /// No read yet; completions count in `done`. Receives of messages from `write_min` bytes
    /// ask the sender to write (0: never).
    pub(crate) fn new(done: Completions, write_min: u64) -> ReadRndv {
        ReadRndv {
            done,
            write_min,
            ..Default::default()
        }
    }

    /// Receives completed, by direction.
    #[cfg(feature = "rdma")]
    pub(crate) fn counts(&self) -> RendezvousCounts {
        self.counts
    }

    /// Whether sends wait for a `FIN` or their write, or a `FIN_WRITE` is still to go.
    pub(crate) fn sends_pending(&self) -> bool {
        !self.sends.is_empty() || !self.fin_writes.is_empty()
    }

    /// Records the region of an `RTS_READ` (its envelope is matched by the caller).
    pub(crate) fn announce(
        &mut self,
        peer: u32,
        sender_id: u64,
        b: &[u8],
    ) -> Result<(), ProtocolError> {
        let region = Region::read(b).ok_or(ProtocolError::MalformedRegion)?;
        self.announced.insert((peer, sender_id), region);
        Ok(())
    }

    /// Whether the rendezvous message `sender_id` of `peer` was announced by `RTS_READ`.
    pub(crate) fn is_announced(&self, peer: u32, sender_id: u64) -> bool {
        self.announced.contains_key(&(peer, sender_id))
    }

    /// Starts the read of a matched rendezvous message announced by `RTS_READ` (see
    /// [`ReadRndv::is_announced`]); `rid` is a fresh descriptor id.
    pub(crate) fn start_recv(
        &mut self,
        rid: u64,
        peer: u32,
        sender_id: u64,
        len: u64,
        buf: RecvBuffer,
        counter: CarCounter,
    ) {
        let region = match self.announced.remove(&(peer, sender_id)) {
            Some(r) if r.len == len => r,
            other => {
                let what = other.map_or(0, |r| r.len);
                self.done.note(counter.fail_car(peer_failed(
                    peer,
                    &format!(
                        "protocol error: a region of {what} bytes announced for a message of {len}"
                    ),
                )));
                return;
            }
        };
        let rid = crate::proto::DescId::read(rid).raw();
        self.recvs.insert(
            rid,
            ReadRecv {
                peer,
                sender_id,
                region,
                buf,
                counter,
                len,
                #[cfg(feature = "rdma")]
                target: None,
            },
        );
        self.to_post.push(rid);
    }

    /// `CTS_WRITE` for send `sender_id`: its data is to be written into the receiver's region
    /// `b`.
    pub(crate) fn cts_write(
        &mut self,
        peer: u32,
        sender_id: u64,
        b: &[u8],
    ) -> Result<(), ProtocolError> {
        let region = Region::read(b).ok_or(ProtocolError::MalformedRegion)?;
        match self.sends.get(&sender_id) {
            Some(s) if s.peer == peer && s.len == region.len && self.is_unwritten(sender_id) => {
                self.to_write.push((sender_id, region));
                Ok(())
            }
            Some(s) if s.peer == peer && s.len != region.len => Err(ProtocolError::RegionLength {
                id: sender_id,
                len: s.len,
                region: region.len,
            }),
            _ => Err(ProtocolError::CtsWriteUnknownSend { id: sender_id }),
        }
    }

    /// Whether send `sender_id` still holds its buffer (no `CTS_WRITE` took it).
    fn is_unwritten(&self, sender_id: u64) -> bool {
        self.sends.get(&sender_id).is_some_and(ReadSend::holds_data)
            && !self.to_write.iter().any(|(id, _)| *id == sender_id)
    }

    /// `FIN_WRITE` for rendezvous message `sender_id` of `peer`: its data is in the receive's
    /// buffer, which completes.
    pub(crate) fn fin_write(&mut self, peer: u32, sender_id: u64) -> Result<(), ProtocolError> {
        let rid = self
            .written_by
            .remove(&(peer, sender_id))
            .ok_or(ProtocolError::FinWriteUnknownRecv { id: sender_id })?;
        let Some(r) = self.recvs.remove(&rid) else {
            return Err(ProtocolError::FinWriteUnknownRecv { id: sender_id });
        };
        #[cfg(feature = "rdma")]
        if let Some(data) = r.target {
            if let Err(data) = r.buf.land(data) {
                r.buf.fill(&data);
            }
            self.done.finish_recv(&r.counter, &r.buf, r.len);
            self.counts.written += 1;
            return Ok(());
        }
        self.done.note(r.counter.fail_car(peer_failed(
            peer,
            "protocol error: FIN_WRITE for a receive with no buffer to write",
        )));
        Ok(())
    }

    /// `FIN` for send `sender_id`: the send completes and its buffer goes back.
    pub(crate) fn fin(&mut self, peer: u32, sender_id: u64) -> Result<(), ProtocolError> {
        match self.sends.get(&sender_id) {
            Some(s) if s.peer != peer => Err(ProtocolError::FinWrongPeer {
                id: sender_id,
                to: s.peer,
            }),
            // A send being written was not read: its FIN has no place.
            Some(_) if !self.is_unwritten(sender_id) => {
                Err(ProtocolError::FinUnknownSend { id: sender_id })
            }
            Some(_) => {
                if let Some(s) = self.sends.remove(&sender_id) {
                    let ReadSend {
                        counter, len, held, ..
                    } = s;
                    // Let go of the caller's memory before the send shows complete.
                    drop(held);
                    self.done.note(counter.complete_car(len));
                }
                Ok(())
            }
            None => Err(ProtocolError::FinUnknownSend { id: sender_id }),
        }
    }

    /// A read or write descriptor completed; the reason when it failed (the VC fails).
    pub(crate) fn read_completed(
        &mut self,
        peer: u32,
        id: u64,
        result: Result<usize, crate::method::MethodError>,
    ) -> Option<Failure> {
        if let Some(sid) = self.writes.remove(&id) {
            return self.write_completed(peer, sid, result);
        }
        match result {
            Ok(_) => {
                if self.recvs.contains_key(&id) {
                    self.landed.push(id);
                }
                None
            }
            Err(e) => {
                let failure = Failure::of(e);
                if let Some(r) = self.recvs.remove(&id) {
                    self.done.note(r.counter.fail_car(failure.error(peer)));
                }
                Some(failure)
            }
        }
    }

    /// The write of send `sender_id` completed: the send completes (`FIN_WRITE` goes to the
    /// receiver) or fails.
    fn write_completed(
        &mut self,
        peer: u32,
        sender_id: u64,
        result: Result<usize, crate::method::MethodError>,
    ) -> Option<Failure> {
        let send = self.sends.remove(&sender_id);
        match result {
            Ok(_) => {
                if let Some(s) = send {
                    self.done.note(s.counter.complete_car(s.len));
                    self.fin_writes.push((peer, sender_id));
                }
                None
            }
            Err(e) => {
                let failure = Failure::of(e);
                if let Some(s) = send {
                    self.done.note(s.counter.fail_car(failure.error(peer)));
                }
                Some(failure)
            }
        }
    }

    /// Fails what depends on `peer`.
    pub(crate) fn peer_failed(&mut self, peer: u32, failure: &Failure) {
        self.announced.retain(|(p, _), _| *p != peer);
        self.prepared.retain(|_, (p, _)| *p != peer);
        self.written_by.retain(|(p, _), _| *p != peer);
        self.fin_writes.retain(|(p, _)| *p != peer);
        let sends = &self.sends;
        self.to_write
            .retain(|(id, _)| sends.get(id).is_some_and(|s| s.peer != peer));
        let gone: Vec<u64> = self
            .sends
            .iter()
            .filter(|(_, s)| s.peer == peer)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(s) = self.sends.remove(&id) {
                s.fail(failure.error(peer), &self.done);
            }
        }
        let gone: Vec<u64> = self
            .recvs
            .iter()
            .filter(|(_, r)| r.peer == peer)
            .map(|(id, _)| *id)
            .collect();
        for id in gone {
            if let Some(r) = self.recvs.remove(&id) {
                self.done.note(r.counter.fail_car(failure.error(peer)));
            }
        }
    }

    /// Fails everything still open (at finalize).
    pub(crate) fn fail_all(&mut self) {
        self.announced.clear();
        self.prepared.clear();
        self.written_by.clear();
        self.to_write.clear();
        self.writes.clear();
        self.fin_writes.clear();
        for (_, s) in self.sends.drain() {
            s.fail(AgentError::Finalized, &self.done);
        }
        for (_, r) in self.recvs.drain() {
            self.done.note(r.counter.fail_car(AgentError::Finalized));
        }
        self.to_post.clear();
        self.landed.clear();
    }
}

/// Turns the `RTS` of a rendezvous send on a verbs VC into an `RTS_READ` naming a registered
/// copy of the data; any other message, or when no registered buffer can be had, goes as it
/// is.
pub(crate) fn announce(st: &mut State, peer: u32, out: Outbound) -> Outbound {
    let (kind, sid) = wire::split_tag(out.tag);
    if kind != Ok(Kind::Rts) || out.buf.len() != wire::RTS_LEN {
        return out;
    }
    if let Some(Link::Remote(crate::method::Method::Shm(_))) =
        st.vcs.get(peer as usize).map(|v| &v.link)
    {
        return announce_shm(st, peer, sid, out);
    }
    #[cfg(feature = "rdma")]
    {
        let State { vcs, book, .. } = st;
        let Some(vc) = vcs.get_mut(peer as usize) else {
            return out;
        };
        if vc.failed.is_some() {
            return out;
        }
        let Link::Remote(crate::method::Method::Verbs(ep)) = &mut vc.link else {
            return out;
        };
        let (region, len, counter, buf) = match book.rdma.prepared.remove(&sid) {
            Some((_, shared)) => {
                let Some((pieces, counter)) = book.take_rndv_send(sid) else {
                    return out;
                };
                // The pieces hold the other reference to the buffer: with them gone, the
                // send holds it alone.
                drop(pieces);
                let buf = match std::sync::Arc::try_unwrap(shared) {
                    Ok(b) => b,
                    Err(shared) => {
                        let Ok(mut b) = ep.cache().get(shared.len()) else {
                            return out;
                        };
                        b.copy_from_slice(&shared);
                        b
                    }
                };
                (Region::of(&buf), buf.len(), counter, buf)
            }
            None => {
                let Some(chunks) = book.rndv_chunks(sid) else {
                    return out;
                };
                let len: usize = chunks.iter().map(|c| c.len()).sum();
                let Ok(mut buf) = ep.cache().get(len) else {
                    return out;
                };
                let mut at = 0;
                for c in chunks {
                    buf[at..at + c.len()].copy_from_slice(c);
                    at += c.len();
                }
                let Some((_, counter)) = book.take_rndv_send(sid) else {
                    return out;
                };
                (Region::of(&buf), len, counter, buf)
            }
        };
        let send = ReadSend {
            peer,
            counter,
            len: len as u64,
            held: Vec::new(),
            buf: Some(buf),
        };
        awaits_read(book, sid, send, out, region)
    }
    #[cfg(not(feature = "rdma"))]
    {
        let _ = sid;
        out
    }
}

/// [`announce`] on a shared-memory VC: a message longer than the method's ring-copy limit
/// (`shm::Config::ring_copy_max`), whose data lies in one range, goes as `RTS_READ` naming
/// that range (remote key 0), where the peer may read this process's memory. The receiver
/// then copies it straight into the receive's memory with one `process_vm_readv` (no ring,
/// no reassembly buffer, no step by this rank) and sends `FIN`. Anything else goes as it is.
fn announce_shm(st: &mut State, peer: u32, sid: u64, out: Outbound) -> Outbound {
    let State { vcs, book, .. } = st;
    let Some(vc) = vcs.get(peer as usize) else {
        return out;
    };
    let Link::Remote(crate::method::Method::Shm(ep)) = &vc.link else {
        return out;
    };
    if vc.failed.is_some() || ep.long_messages() != viaduct_fallback::shm::LongMessages::SingleCopy
    {
        return out;
    }
    // The RTS names the message's length (context u32, tag u32, length u64).
    if wire::u64_at(&out.buf, 8).is_none_or(|len| len <= ep.config().ring_copy_max as u64) {
        return out;
    }
    let Some((addr, len)) = book.rndv_chunks(sid).and_then(contiguous) else {
        return out;
    };
    let Some((held, counter)) = book.take_rndv_send(sid) else {
        return out;
    };
    let region = Region {
        addr,
        len: len as u64,
        rkey: 0,
    };
    let send = ReadSend {
        peer,
        counter,
        len: len as u64,
        held,
        #[cfg(feature = "rdma")]
        buf: None,
    };
    awaits_read(book, sid, send, out, region)
}

/// Keeps `send` until the receiver read its data, and turns its `RTS` `out` into the
/// `RTS_READ` naming `region`.
fn awaits_read(
    book: &mut super::Book,
    sid: u64,
    send: ReadSend,
    out: Outbound,
    region: Region,
) -> Outbound {
    book.rdma.sends.insert(sid, send);
    let mut payload = out.buf.to_vec();
    region.write(&mut payload);
    Outbound {
        id: out.id,
        tag: wire::method_tag(Kind::RtsRead, sid),
        buf: payload.into(),
    }
}

/// The address and length of `chunks` when they lie one after the other in memory.
fn contiguous(chunks: &[SendBuf]) -> Option<(u64, usize)> {
    let first = chunks.first()?;
    let start = first.as_ptr() as usize;
    let mut end = start;
    for c in chunks {
        if c.as_ptr() as usize != end {
            return None;
        }
        end += c.len();
    }
    Some((start as u64, end - start))
}

/// Reads the messages of matched receives announced by `RTS_READ` on shared-memory VCs: each
/// straight into its receive's memory, then `FIN` to the sender. Receives on other VCs stay
/// queued for the verbs part of [`drive`]. Returns the work done.
fn shm_reads(
    st: &mut State,
    fins: &mut Vec<(u32, u64)>,
    failures: &mut Vec<(u32, Failure)>,
) -> usize {
    use crate::method::Method;
    use crate::recv_buffer::Room;

    let State { vcs, book, .. } = st;
    let (rdma, spare) = (&mut book.rdma, &mut book.spare);
    let mut work = 0;
    let mut rest = Vec::new();
    for rid in std::mem::take(&mut rdma.to_post) {
        let Some(peer) = rdma.recvs.get(&rid).map(|r| r.peer) else {
            continue;
        };
        let Some(vc) = vcs.get_mut(peer as usize) else {
            continue;
        };
        if vc.failed.is_some() {
            // The VC's failure fails the receive (`peer_failed`).
            continue;
        }
        let Link::Remote(Method::Shm(ep)) = &mut vc.link else {
            if cfg!(feature = "rdma") {
                rest.push(rid);
            } else if let Some(r) = rdma.recvs.remove(&rid) {
                let why = "an RTS_READ arrived on a VC without verbs or shared memory";
                rdma.done.note(r.counter.fail_car(peer_failed(peer, why)));
                failures.push((peer, why.into()));
            }
            continue;
        };
        let Some(r) = rdma.recvs.remove(&rid) else {
            continue;
        };
        work += 1;
        let addr = r.region.addr;
        // The agent's memory comes from its spare large buffers (no fresh pages to fault in).
        r.buf
            .expect_in(r.len.min(r.buf.capacity() as u64) as usize, spare);
        let read = r.buf.fill_in(r.len as usize, |room| match room {
            Room::Slice(dst) => ep.read_peer(addr, dst),
            Room::Append(v, n) => ep.read_peer_append(addr, n, v),
        });
        match read {
            Ok(_) => {
                rdma.done.finish_recv(&r.counter, &r.buf, r.len);
                fins.push((peer, r.sender_id));
            }
            Err(e) => {
                let failure = Failure::of(e);
                rdma.done.note(r.counter.fail_car(failure.error(peer)));
                failures.push((peer, failure));
            }
        }
    }
    rdma.to_post.extend(rest);
    work
}

/// The one piece of a rendezvous send of the caller's borrowed bytes `data` to `peer` over a
/// verbs VC: a registered buffer of the VC's cache the bytes are copied into (the one copy
/// such a send makes, where it would otherwise copy them into the agent's memory now and into
/// a registered buffer when its `RTS` is written). `None` (the bytes then go the usual way)
/// for another VC or when no registered buffer can be had. Name the send with
/// [`prepared`] once its `RTS` exists.
#[cfg(feature = "rdma")]
pub(crate) fn register_copy(
    st: &mut State,
    peer: u32,
    data: &[u8],
) -> Option<(viaduct_fallback::sendbuf::SendBuf, PreparedBuf)> {
    use viaduct_fallback::sendbuf::{SendBuf, SharedPiece};

    let vc = st.vcs.get_mut(peer as usize)?;
    if vc.failed.is_some() {
        return None;
    }
    let Link::Remote(crate::method::Method::Verbs(ep)) = &mut vc.link else {
        return None;
    };
    let mut buf = ep.cache().get(data.len()).ok()?;
    buf.copy_from_slice(data);
    let buf = std::sync::Arc::new(buf);
    let piece = SharedPiece::whole(buf.clone());
    Some((SendBuf::Shared(piece), buf))
}

/// Names the rendezvous send whose `RTS` is `rts` as one whose piece is the registered buffer
/// `buf` ([`register_copy`]): its `RTS_READ` names that buffer, with no further copy.
#[cfg(feature = "rdma")]
pub(crate) fn prepared(st: &mut State, peer: u32, rts: &Outbound, buf: PreparedBuf) {
    if let (Ok(Kind::Rts), sid) = wire::split_tag(rts.tag) {
        st.book.rdma.prepared.insert(sid, (peer, buf));
    }
}

/// The verbs endpoint of `peer`'s VC for a step of the verbs rendezvous; `None` for a missing
/// or failed VC, and for a VC without verbs, which then fails with `why`.
#[cfg(feature = "rdma")]
fn verbs_endpoint<'a>(
    vcs: &'a mut [crate::vc::Vc],
    peer: u32,
    why: &str,
    failures: &mut Vec<(u32, Failure)>,
) -> Option<&'a mut viaduct_verbs::msg::Endpoint> {
    let vc = vcs.get_mut(peer as usize)?;
    if vc.failed.is_some() {
        return None;
    }
    match &mut vc.link {
        Link::Remote(crate::method::Method::Verbs(ep)) => Some(ep),
        _ => {
            failures.push((peer, why.into()));
            None
        }
    }
}

/// Posts the reads of matched receives and delivers the reads that completed (data into the
/// receive buffer, `FIN` to the sender). Returns the work done.
pub(crate) fn drive(st: &mut State) -> usize {
    let rdma = &st.book.rdma;
    if rdma.to_post.is_empty()
        && rdma.landed.is_empty()
        && rdma.to_write.is_empty()
        && rdma.fin_writes.is_empty()
    {
        return 0;
    }
    let mut failures: Vec<(u32, Failure)> = Vec::new();
    let mut fins: Vec<(u32, u64)> = Vec::new();
    let mut work = if rdma.to_post.is_empty() {
        0
    } else {
        shm_reads(st, &mut fins, &mut failures)
    };
    #[cfg_attr(not(feature = "rdma"), allow(unused_mut))]
    let mut cts_writes: Vec<(u32, u64, Vec<u8>)> = Vec::new();
    #[cfg(feature = "rdma")]
    {
        use viaduct_verbs::msg::Posted;

        let State { vcs, book, .. } = &mut *st;
        // Descriptor ids of the writes to post (taken before `rdma` borrows the book).
        let mut write_ids: Vec<u64> = (0..book.rdma.to_write.len()).map(|_| book.id()).collect();
        let rdma = &mut book.rdma;
        for rid in std::mem::take(&mut rdma.to_post) {
            let write_min = rdma.write_min;
            let Some(r) = rdma.recvs.get_mut(&rid) else {
                continue;
            };
            let peer = r.peer;
            let why = "an RTS_READ arrived on a VC without verbs";
            let Some(ep) = verbs_endpoint(vcs, peer, why, &mut failures) else {
                continue;
            };
            let buf = match ep.cache().get(r.len as usize) {
                Ok(b) => b,
                Err(e) => {
                    failures.push((
                        peer,
                        Failure {
                            reason: format!(
                                "registering {} bytes for a rendezvous read: {}",
                                r.len,
                                super::chain(&e)
                            ),
                            source: Some(crate::error::PeerCause::new(e)),
                        },
                    ));
                    continue;
                }
            };
            if write_min > 0 && r.len >= write_min {
                // The sender writes into `buf` (see the module doc: the direction).
                let mut payload = Vec::with_capacity(REGION_LEN);
                Region::of(&buf).write(&mut payload);
                r.target = Some(buf);
                rdma.written_by.insert((peer, r.sender_id), rid);
                cts_writes.push((peer, r.sender_id, payload));
                work += 1;
                continue;
            }
            match ep.post_read(rid, buf, r.region.remote()) {
                Ok(Posted::InProgress) => work += 1,
                Ok(Posted::NoResources(_)) => rdma.to_post.push(rid),
                Err(e) => failures.push((peer, Failure::of(e))),
            }
        }
        for (sid, region) in std::mem::take(&mut rdma.to_write) {
            let Some(s) = rdma.sends.get_mut(&sid) else {
                continue;
            };
            let peer = s.peer;
            let why = "a CTS_WRITE arrived on a VC without verbs";
            let Some(ep) = verbs_endpoint(vcs, peer, why, &mut failures) else {
                continue;
            };
            let Some(wid) = write_ids.pop() else {
                rdma.to_write.push((sid, region));
                continue;
            };
            let Some(buf) = s.buf.take() else {
                continue;
            };
            let wid = crate::proto::DescId::read(wid).raw();
            match ep.post_write(wid, buf, region.remote()) {
                Ok(Posted::InProgress) => {
                    rdma.writes.insert(wid, sid);
                    work += 1;
                }
                Ok(Posted::NoResources(buf)) => {
                    s.buf = Some(buf);
                    rdma.to_write.push((sid, region));
                }
                Err(e) => failures.push((peer, Failure::of(e))),
            }
        }
        for rid in std::mem::take(&mut rdma.landed) {
            let Some(r) = rdma.recvs.remove(&rid) else {
                continue;
            };
            work += 1;
            let data = match vcs.get_mut(r.peer as usize).map(|v| &mut v.link) {
                Some(Link::Remote(crate::method::Method::Verbs(ep))) => ep.take_landed(rid),
                _ => None,
            };
            match data {
                Some(data) => {
                    // No copy into a buffer of the agent's own memory: it keeps the
                    // registered buffer the data was read into.
                    if let Err(data) = r.buf.land(data) {
                        r.buf.fill(&data);
                    }
                    rdma.done.finish_recv(&r.counter, &r.buf, r.len);
                    rdma.counts.read += 1;
                    fins.push((r.peer, r.sender_id));
                }
                None => {
                    let why = "a rendezvous read completed without its buffer";
                    rdma.done.note(r.counter.fail_car(peer_failed(r.peer, why)));
                    failures.push((r.peer, why.into()));
                }
            }
        }
    }
    let fin_writes = std::mem::take(&mut st.book.rdma.fin_writes);
    work += fin_writes.len();
    let controls = fins
        .into_iter()
        .map(|(peer, sid)| (peer, Kind::Fin, sid, Vec::new()))
        .chain(
            fin_writes
                .into_iter()
                .map(|(peer, sid)| (peer, Kind::FinWrite, sid, Vec::new())),
        )
        .chain(
            cts_writes
                .into_iter()
                .map(|(peer, sid, region)| (peer, Kind::CtsWrite, sid, region)),
        );
    for (peer, kind, sender_id, payload) in controls.collect::<Vec<_>>() {
        let id = st.book.id();
        st.write(
            peer,
            Outbound {
                id,
                tag: wire::method_tag(kind, sender_id),
                buf: payload.into(),
            },
        );
    }
    for (peer, reason) in failures {
        work += 1;
        st.fail_vc(peer, reason);
    }
    work
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pieces_lying_one_after_another_make_one_range() {
        use viaduct_fallback::sendbuf::SharedPiece;
        let data: viaduct_fallback::sendbuf::SharedBytes = std::sync::Arc::new(vec![7u8; 100]);
        let piece = |start, len| {
            SendBuf::Shared(SharedPiece::new(data.clone(), start, len).expect("inside the data"))
        };
        let at = (*data).as_ref().as_ptr() as u64;
        assert_eq!(contiguous(&[piece(0, 40), piece(40, 60)]), Some((at, 100)));
        assert_eq!(contiguous(&[piece(10, 30)]), Some((at + 10, 30)));
        assert_eq!(
            contiguous(&[piece(40, 60), piece(0, 40)]),
            None,
            "out of order"
        );
        assert_eq!(contiguous(&[piece(0, 30), piece(40, 60)]), None, "a gap");
        assert_eq!(contiguous(&[]), None);
    }

    #[test]
    fn announcements_are_checked_and_fins_name_known_sends() {
        let mut r = ReadRndv::default();
        let mut b = Vec::new();
        b.extend_from_slice(&0x1000u64.to_le_bytes());
        b.extend_from_slice(&77u64.to_le_bytes());
        b.extend_from_slice(&9u32.to_le_bytes());
        assert_eq!(
            Region::read(&b),
            Some(Region {
                addr: 0x1000,
                len: 77,
                rkey: 9
            })
        );
        assert!(r.announce(1, 5, &b[..19]).is_err());
        assert!(!r.is_announced(1, 5));
        r.announce(1, 5, &b).unwrap();
        assert!(r.is_announced(1, 5) && !r.is_announced(2, 5));
        assert!(r.fin(1, 5).is_err(), "no send 5 waits for a FIN");
        assert_eq!(
            r.cts_write(1, 5, &b),
            Err(ProtocolError::CtsWriteUnknownSend { id: 5 }),
            "no send 5 waits to be written"
        );
        assert_eq!(
            r.cts_write(1, 5, &b[..3]),
            Err(ProtocolError::MalformedRegion)
        );
        assert_eq!(
            r.fin_write(1, 5),
            Err(ProtocolError::FinWriteUnknownRecv { id: 5 }),
            "no receive waits for a write of message 5"
        );
        r.peer_failed(1, &"gone".into());
        assert!(!r.is_announced(1, 5));
        assert!(!r.sends_pending());
    }
}
