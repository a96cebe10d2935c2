//! Rendezvous by messages: a large message waits with its sender, announced by `RTS`; the
//! receiver matches the announcement like any message and answers `CTS` naming its receive;
//! the sender then sends the data in `DATA` pieces (see [`crate::wire`]). Over verbs the
//! receiver may read the data itself instead (see [`crate::engine::read_rndv`]).
//!
//! This module keeps both sides' state; the engine assigns descriptor ids and writes the
//! messages.

use std::collections::HashMap;

use viaduct_fallback::sendbuf::SendBuf;

use crate::error::AgentError;
use crate::proto::ProtocolError;
use crate::proto::recv::Completions;
use crate::recv_buffer::RecvBuffer;
use crate::request::CarCounter;
use crate::wire;

/// A rendezvous send waiting for the receiver's go-ahead.
#[derive(Debug)]
struct RndvSend {
    peer: u32,
    chunks: Vec<SendBuf>,
    counter: CarCounter,
}

/// A rendezvous receive whose data is arriving.
#[derive(Debug)]
struct RndvRecv {
    peer: u32,
    buf: RecvBuffer,
    counter: CarCounter,
    len: u64,
    got: u64,
}

/// A send cleared by its `CTS`: its pieces go to `peer` as `DATA` naming `receiver_id`, each
/// completing one CAR of `counter`.
#[derive(Debug)]
pub(crate) struct Cleared {
    pub(crate) peer: u32,
    pub(crate) receiver_id: u64,
    pub(crate) chunks: Vec<SendBuf>,
    pub(crate) counter: CarCounter,
}

/// The rendezvous sends and receives of an agent, by the id each side gave it.
#[derive(Debug, Default)]
pub(crate) struct Rendezvous {
    sends: HashMap<u64, RndvSend>,
    recvs: HashMap<u64, RndvRecv>,
    /// The agent's count of completed requests.
    done: Completions,
}

impl Rendezvous {
    /// No rendezvous yet; completions count in `done`.
    pub(crate) fn new(done: Completions) -> Rendezvous {
        Rendezvous {
            done,
            ..Default::default()
        }
    }

    /// Keeps the data of send `sender_id` to `peer` until its `CTS`; returns the `RTS` payload.
    pub(crate) fn send(
        &mut self,
        sender_id: u64,
        peer: u32,
        context: u32,
        tag: u32,
        chunks: Vec<SendBuf>,
        counter: CarCounter,
    ) -> Vec<u8> {
        let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        self.sends.insert(
            sender_id,
            RndvSend {
                peer,
                chunks,
                counter,
            },
        );
        wire::rts(context, tag, len)
    }

    /// The data of send `sender_id` while it waits for its `CTS`.
    pub(crate) fn chunks(&self, sender_id: u64) -> Option<&[SendBuf]> {
        self.sends.get(&sender_id).map(|s| s.chunks.as_slice())
    }

    /// Takes send `sender_id` over to another protocol: its data and request.
    pub(crate) fn take_send(&mut self, sender_id: u64) -> Option<(Vec<SendBuf>, CarCounter)> {
        self.sends.remove(&sender_id).map(|s| (s.chunks, s.counter))
    }

    /// Fails send `sender_id` (its `RTS` could not leave) with `err`.
    pub(crate) fn fail_send(&mut self, sender_id: u64, err: AgentError) {
        if let Some(s) = self.sends.remove(&sender_id) {
            self.done.note(s.counter.fail_car(err));
        }
    }

    /// Expects the `len` bytes of a matched message from `peer` in receive `rid` (the id its
    /// `CTS` names).
    pub(crate) fn recv(
        &mut self,
        rid: u64,
        peer: u32,
        buf: RecvBuffer,
        counter: CarCounter,
        len: u64,
    ) {
        self.recvs.insert(
            rid,
            RndvRecv {
                peer,
                buf,
                counter,
                len,
                got: 0,
            },
        );
    }

    /// A `CTS` from `peer` for send `id`: the send is cleared when it goes to that peer.
    pub(crate) fn cts(
        &mut self,
        peer: u32,
        id: u64,
        data: &[u8],
    ) -> Result<Cleared, ProtocolError> {
        let receiver_id = wire::u64_at(data, 0).ok_or(ProtocolError::MalformedCts)?;
        // Only the rank the send goes to may clear it.
        match self.sends.get(&id) {
            Some(s) if s.peer == peer => {}
            Some(s) => return Err(ProtocolError::CtsWrongPeer { id, to: s.peer }),
            None => return Err(ProtocolError::CtsUnknownSend { id }),
        }
        let s = self
            .sends
            .remove(&id)
            .ok_or(ProtocolError::CtsUnknownSend { id })?;
        Ok(Cleared {
            peer: s.peer,
            receiver_id,
            chunks: s.chunks,
            counter: s.counter,
        })
    }

    /// A `DATA` piece from `peer` for receive `id`; the receive completes with its last piece.
    pub(crate) fn data(&mut self, peer: u32, id: u64, data: &[u8]) -> Result<(), ProtocolError> {
        let r = self
            .recvs
            .get_mut(&id)
            .ok_or(ProtocolError::DataUnknownRecv { id })?;
        // Only the sender the RTS came from may fill the receive, and no further than the
        // length it announced.
        if r.peer != peer {
            return Err(ProtocolError::DataWrongPeer { id, from: r.peer });
        }
        if r.got + data.len() as u64 > r.len {
            return Err(ProtocolError::DataPastEnd {
                id,
                len: r.len,
                got: r.got,
                more: data.len(),
            });
        }
        r.buf.fill(data);
        r.got += data.len() as u64;
        if r.got >= r.len {
            if let Some(r) = self.recvs.remove(&id) {
                self.done.finish_recv(&r.counter, &r.buf, r.len);
            }
        }
        Ok(())
    }

    /// Whether sends wait for their `CTS`.
    pub(crate) fn sends_pending(&self) -> bool {
        !self.sends.is_empty()
    }

    /// Whether a send to `peer` or a receive from it is under way.
    pub(crate) fn waits_on(&self, peer: u32) -> bool {
        self.sends.values().any(|s| s.peer == peer) || self.recvs.values().any(|r| r.peer == peer)
    }

    /// Fails the sends to `peer` and the receives from it with `err()`.
    pub(crate) fn peer_failed(&mut self, peer: u32, err: impl Fn() -> AgentError) {
        self.sends.retain(|_, s| {
            let keep = s.peer != peer;
            if !keep {
                self.done.note(s.counter.fail_car(err()));
            }
            keep
        });
        self.recvs.retain(|_, r| {
            let keep = r.peer != peer;
            if !keep {
                self.done.note(r.counter.fail_car(err()));
            }
            keep
        });
    }

    /// Fails everything still open (at finalize).
    pub(crate) fn fail_all(&mut self) {
        for (_, s) in self.sends.drain() {
            self.done.note(s.counter.fail_car(AgentError::Finalized));
        }
        for (_, r) in self.recvs.drain() {
            self.done.note(r.counter.fail_car(AgentError::Finalized));
        }
    }
}
