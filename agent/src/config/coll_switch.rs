//! The collectives' switch points ([`SwitchPoints`], a part of [`Config`](crate::config::Config)),
//! their defaults and the settings overriding them; their public paths are in
//! [`crate::coll`].

/// Bytes up to which blocking `bcast`, `reduce`, `allreduce` and `allgather` (its whole
/// result), and every `barrier`, run as point-to-point messages.
pub const SMALL_MAX: usize = 4096;
/// Environment variable overriding [`SMALL_MAX`] (0 sends every size through xfer blocks).
pub const SMALL_MAX_VAR: &str = "VIADUCT_COLL_SMALL_MAX";

/// Bytes from which `bcast` uses a chain instead of a binomial tree.
pub const BCAST_CHAIN_MIN: usize = 8 << 20;
/// Environment variable overriding [`BCAST_CHAIN_MIN`].
pub const BCAST_CHAIN_MIN_VAR: &str = "VIADUCT_COLL_BCAST_CHAIN_MIN";
/// Bytes from which `allreduce` uses reduce-scatter and allgather instead of recursive
/// doubling.
pub const ALLREDUCE_RSAG_MIN: usize = 512 << 10;
/// Environment variable overriding [`ALLREDUCE_RSAG_MIN`].
pub const ALLREDUCE_RSAG_MIN_VAR: &str = "VIADUCT_COLL_ALLREDUCE_RSAG_MIN";
/// Bytes of the whole result from which `allgather` uses a ring instead of recursive doubling.
pub const ALLGATHER_RING_MIN: usize = 16 << 10;
/// Environment variable overriding [`ALLGATHER_RING_MIN`].
pub const ALLGATHER_RING_MIN_VAR: &str = "VIADUCT_COLL_ALLGATHER_RING_MIN";

/// Bytes up to which the broadcast in place (`Comm::bcast_in_place`, `MPI_Bcast`) on more
/// than two ranks sends the message whole along the binomial tree as point-to-point messages
/// (each rank forwards it once it arrived whole); longer ones take the pipelined xfer
/// broadcast. On two ranks there is nothing to pipeline (one hop): (over TCP from
/// [`BCAST_PAIR_P2P_MIN`]) every length of `bcast` and `bcast_in_place` goes as one
/// point-to-point message. 0 turns the point-to-point broadcast
/// off past [`SMALL_MAX`], two ranks included.
pub const BCAST_P2P_MAX: usize = 256 << 10;
/// Environment variable overriding [`BCAST_P2P_MAX`].
pub const BCAST_P2P_MAX_VAR: &str = "VIADUCT_COLL_BCAST_P2P_MAX";
/// Bytes from which the broadcast on two ranks joined by TCP goes as one point-to-point
/// message (see [`BCAST_P2P_MAX`]; over shared memory and verbs every length does); a longer
/// message than [`SMALL_MAX`] but shorter than this takes the pipelined xfer broadcast, whose
/// pieces go eagerly. A message just over the eager limit pays the whole rendezvous handshake
/// for one hop: measured over TCP between two nodes of the
/// one-machine cluster (`mpi/bench/mpibench.c`, alternating, under load from other builds),
/// 64 and 128 KiB took 60-140 us through the xfer pipeline against 70-870 us as one message;
/// at 256 KiB neither was ahead, from 512 KiB one message was. Not settable by a variable.
pub const BCAST_PAIR_P2P_MIN: usize = 256 << 10;
/// Bytes of each rank's part from which the blocking `alltoall` exchanges every part as one
/// point-to-point message (pairwise, received straight into its place) instead of xfer
/// blocks.
pub const ALLTOALL_P2P_MIN: usize = 0;
/// Environment variable overriding [`ALLTOALL_P2P_MIN`].
pub const ALLTOALL_P2P_MIN_VAR: &str = "VIADUCT_COLL_ALLTOALL_P2P_MIN";

/// The switch points in use.
///
/// ```
/// use viaduct_agent::coll::{SMALL_MAX, SwitchPoints};
/// use viaduct_agent::config::Config;
///
/// let config = Config::default();
/// assert_eq!(config.switch_points, SwitchPoints::default());
/// assert_eq!(config.switch_points.small_max, SMALL_MAX);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchPoints {
    /// See [`BCAST_CHAIN_MIN`].
    pub bcast_chain_min: usize,
    /// See [`ALLREDUCE_RSAG_MIN`].
    pub allreduce_rsag_min: usize,
    /// See [`ALLGATHER_RING_MIN`].
    pub allgather_ring_min: usize,
    /// See [`SMALL_MAX`].
    pub small_max: usize,
    /// See [`BCAST_P2P_MAX`].
    pub bcast_p2p_max: usize,
    /// See [`ALLTOALL_P2P_MIN`].
    pub alltoall_p2p_min: usize,
    /// See [`BCAST_PAIR_P2P_MIN`].
    pub bcast_pair_p2p_min: usize,
}

impl Default for SwitchPoints {
    fn default() -> SwitchPoints {
        SwitchPoints {
            bcast_chain_min: BCAST_CHAIN_MIN,
            allreduce_rsag_min: ALLREDUCE_RSAG_MIN,
            allgather_ring_min: ALLGATHER_RING_MIN,
            small_max: SMALL_MAX,
            bcast_p2p_max: BCAST_P2P_MAX,
            alltoall_p2p_min: ALLTOALL_P2P_MIN,
            bcast_pair_p2p_min: BCAST_PAIR_P2P_MIN,
        }
    }
}
