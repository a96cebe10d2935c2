//! Why an xfer block is refused at `start`, or why its request failed.

use super::reduction::{Datatype, ReduceOp};

/// An invalid xfer block (reported by `start`, before anything is posted), or a message that
/// does not fit the block that received it (carried by the block's request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XferError {
    /// A receive-type op in a scatter block created without a source.
    #[error("op {op} receives, but the scatter block has no source")]
    ReceiveWithoutSource {
        /// Index of the op in issue order.
        op: usize,
    },
    /// A send-type op in a gather block created without a destination.
    #[error("op {op} sends, but the gather block has no destination")]
    SendWithoutDestination {
        /// Index of the op in issue order.
        op: usize,
    },
    /// Two receive ops write overlapping bytes of one buffer (only `mop` ops may share bytes).
    #[error("ops {first} and {second} receive into overlapping bytes of buffer {buf}")]
    OverlappingReceives {
        /// The earlier op.
        first: usize,
        /// The later op.
        second: usize,
        /// The buffer.
        buf: usize,
    },
    /// A range past the end of its buffer.
    #[error("op {op}: range {first}..{last} is past the end of buffer {buf} ({len} bytes)")]
    RangePastBuffer {
        /// Index of the op.
        op: usize,
        /// The buffer.
        buf: usize,
        /// First byte.
        first: usize,
        /// One past the last byte.
        last: usize,
        /// Length of the buffer.
        len: usize,
    },
    /// A range whose first byte lies after its end.
    #[error("op {op}: range {first}..{last} has first > last")]
    ReversedRange {
        /// Index of the op.
        op: usize,
        /// First byte.
        first: usize,
        /// One past the last byte.
        last: usize,
    },
    /// A buffer id not given by this block's `buffer`.
    #[error("op {op} names buffer {buf}, which the block does not hold")]
    UnknownBuffer {
        /// Index of the op.
        op: usize,
        /// The id.
        buf: usize,
    },
    /// A rank outside the communicator.
    #[error("rank {rank} is not in the communicator of {size} ranks")]
    UnknownRank {
        /// The rank given.
        rank: u32,
        /// The communicator size.
        size: u32,
    },
    /// A `mop` range that is not a whole number of elements.
    #[error("op {op}: {len} bytes are not a whole number of {elem_size}-byte elements")]
    PartialElement {
        /// Index of the op.
        op: usize,
        /// Length of the range.
        len: usize,
        /// Bytes of one element.
        elem_size: usize,
    },
    /// A message to or from the own rank (a block moves data between ranks; local copies are
    /// the caller's).
    #[error("op {op} sends to or receives from this rank itself ({rank})")]
    SelfPeer {
        /// Index of the op (`usize::MAX`: the block's own source or destination).
        op: usize,
        /// The rank.
        rank: u32,
    },
    /// A bitwise reduction on a floating-point type.
    #[error("{op:?} is not defined on {dtype:?}")]
    BitwiseOnFloat {
        /// The operation.
        op: ReduceOp,
        /// The element type.
        dtype: Datatype,
    },
    /// A user reduction with elements of 0 bytes.
    #[error("a user reduction needs elements of at least one byte")]
    ZeroElementSize,
    /// A tag reserved for the collectives (the high bit set).
    #[error("tag {0:#x} is reserved for collectives (user tags are below 0x80000000)")]
    ReservedTag(u32),
    /// The message that arrived is not as long as the block expects from its sender.
    #[error(
        "message of {len} bytes from rank {peer} does not fit the block, which expects {expected} bytes"
    )]
    LengthMismatch {
        /// The sender (world rank).
        peer: u32,
        /// Length announced by the sender.
        len: u64,
        /// Length the receiving ops add up to.
        expected: u64,
    },
    /// The sender's block failed before its message to this block was whole (a length
    /// mismatch or a failed peer upstream): nothing more of it comes.
    #[error("rank {peer} failed its part of the collective, so its message never comes")]
    SenderFailed {
        /// The sender (world rank).
        peer: u32,
    },
}
