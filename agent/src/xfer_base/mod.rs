//! What the xfer blocks, their engine and the agent's errors share, below all of them: the
//! reductions ([`Datatype`], [`ReduceOp`], [`Reduction`]), the error of an invalid block
//! ([`XferError`]), buffer ids ([`BufId`]) and the collectives' tag bit ([`COLL_TAG_BIT`]).
//! Their public paths are in [`crate::xfer`].

mod error;
mod reduction;

pub use error::XferError;
pub use reduction::{Datatype, ReduceOp, Reduction, UserFn};

/// Tags with this bit set belong to the collectives.
pub const COLL_TAG_BIT: u32 = 1 << 31;

/// A buffer handed to a block with `buffer`; ops name it by this id, and
/// [`XferBuffers::take`](crate::xfer::XferBuffers::take) gives it back by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufId(pub(crate) usize);
