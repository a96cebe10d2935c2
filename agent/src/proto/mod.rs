//! The agent's protocols on a VC, apart from the engine that drives them: the message kinds
//! ([`kind`]).
//!
//! The wire format itself (headers, tags) is in [`crate::wire`].

pub(crate) mod kind;

pub(crate) use kind::{Kind, UnknownKind};
