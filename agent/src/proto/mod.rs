//! The agent's protocols on a VC, apart from the engine that drives them (the message kinds
//! are in [`crate::wire`]): the descriptor ids that say which protocol owns a completion ([`desc`]), the
//! receive side they share ([`recv`]), the eager protocol ([`eager`]) and the rendezvous by
//! messages ([`rndv`]), and the typed errors of a broken message or a failed VC ([`error`]). The engine ([`crate::engine`]) keeps the matching queues, hands out
//! descriptor ids, writes what the protocols produce and delegates each message to its
//! protocol; these modules use neither the engine nor the VCs.
//!
//! The wire format itself (headers, tags) is in [`crate::wire`].

pub(crate) mod desc;
pub(crate) mod eager;
pub(crate) mod error;
pub(crate) mod recv;
pub(crate) mod rndv;

pub(crate) use crate::wire::{Kind, UnknownKind};
pub(crate) use desc::{DescId, Route};
pub(crate) use error::{Failure, ProtocolError};
