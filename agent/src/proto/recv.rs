//! The receive side shared by the protocols: a posted receive, a message that came before its
//! receive, and how a receive completes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::AgentError;
use crate::recv_buffer::RecvBuffer;
use crate::request::{CarCounter, RequestError};

/// A receive waiting for its message.
#[derive(Debug)]
pub(crate) struct PostedRecv {
    pub(crate) buf: RecvBuffer,
    pub(crate) counter: CarCounter,
    /// World rank -> communicator rank, for the status of a receive posted on a communicator
    /// (`None`: report world ranks).
    pub(crate) ranks: Option<Arc<[u32]>>,
    /// For an in-place receive (`Agent::recv_in_place`): where the matched message goes (a
    /// lease of the method's memory, or an owned buffer) instead of `buf`.
    pub(crate) lease: Option<InPlaceSlot>,
}

/// Where an in-place receive finds its message once matched.
pub(crate) type InPlaceSlot = Arc<Mutex<Option<InPlaceData>>>;

/// The message of an in-place receive.
#[derive(Debug)]
pub(crate) enum InPlaceData {
    /// Lent out of the method of `peer`'s VC; the payload starts `skip` bytes in (behind the
    /// eager header).
    Leased {
        lease: crate::method::Lease,
        skip: usize,
        peer: u32,
    },
    /// In the agent's memory (an unexpected message, a message from this rank).
    Owned(Vec<u8>),
}

impl PostedRecv {
    /// The source as the receive's status reports it.
    pub(crate) fn source_of(&self, world: u32) -> u32 {
        match &self.ranks {
            Some(map) => map.get(world as usize).copied().unwrap_or(world),
            None => world,
        }
    }
}

/// A message that arrived before its receive.
#[derive(Debug)]
pub(crate) enum Unexpected {
    /// A whole small message (from a peer or from this rank). `sync` is a synchronous send to
    /// self, which completes when matched.
    Eager {
        data: Vec<u8>,
        sync: Option<CarCounter>,
    },
    /// The announcement of a rendezvous message; its data stays with the sender.
    Rts { sender_id: u64, len: u64 },
}

impl Unexpected {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Unexpected::Eager { data, .. } => data.len() as u64,
            Unexpected::Rts { len, .. } => *len,
        }
    }
}

/// The requests one agent completed so far (shared by its state and its blocking waits): a
/// blocking progress round ends as soon as the agent completed one, so the wait that called it
/// looks at once. Each agent has its own, so one agent's completions never end another's
/// blocking round early. Cheap to clone (one `Arc`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Completions(Arc<AtomicU64>);

impl Completions {
    /// Counts a request that a CAR's completion completed.
    pub(crate) fn note(&self, r: Result<bool, RequestError>) {
        if r.unwrap_or(false) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Requests completed so far.
    pub(crate) fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Completes a receive whose message of `len` bytes is in its buffer (up to its capacity).
    pub(crate) fn finish_recv(&self, counter: &CarCounter, buf: &RecvBuffer, len: u64) {
        let cap = buf.capacity() as u64;
        if len > cap {
            self.note(counter.fail_car(AgentError::Truncated { len, capacity: cap }));
        } else {
            self.note(counter.complete_car(len));
        }
    }
}
