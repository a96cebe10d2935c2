//! Limits that several modules name: kept apart so that naming one adds no dependency between
//! those modules.

/// The most communicators on contexts of their own (all but the world's handles) one rank
/// holds at once; an agreement on one more fails (see `crate::comm`).
pub const MAX_LIVE_COMMS: u32 = 16_384;
