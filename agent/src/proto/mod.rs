//! The agent's protocols on a VC, apart from the engine that drives them: the message kinds
//! ([`kind`]) and the descriptor ids that say which protocol owns a completion ([`desc`]).
//!
//! The wire format itself (headers, tags) is in [`crate::wire`].

pub(crate) mod desc;
pub(crate) mod kind;

pub(crate) use desc::{DescId, Route};
pub(crate) use kind::{Kind, UnknownKind};
