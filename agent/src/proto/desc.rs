//! Descriptor ids: what a method completion belongs to.
//!
//! Every message the agent hands to a method carries a 64-bit descriptor id, and the method's
//! completion names it again. The agent's ids fit the low 56 bits ([`crate::wire::ID_MASK`]);
//! the top bits say which protocol owns the completion, so that [`DescId::route`] sends it to
//! that protocol without a table lookup. The bit values are fixed (they reach the methods,
//! which hand them back unchanged).

/// Set on the ids of fast sends (see [`crate::fast`]): above every id the agent hands out.
const FAST_BIT: u64 = 1 << 63;
/// Set on the ids of RDMA reads of the read rendezvous (see [`crate::engine::read_rndv`]).
const READ_BIT: u64 = 1 << 62;

/// The protocol that owns a completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// A message with a request (eager, stream, rendezvous pieces, xfer pieces, control
    /// messages): the agent's table of sends holds what it completes.
    Send,
    /// A fast send (no request: only a count per peer).
    FastSend,
    /// An RDMA READ of the read rendezvous.
    Read,
}

/// A descriptor id as a method sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DescId(u64);

impl DescId {
    /// The id of a message with a request: the agent's id as it is.
    #[cfg(test)]
    #[inline]
    pub(crate) const fn send(id: u64) -> DescId {
        DescId(id)
    }

    /// The id of a fast send made from the agent's id `id`.
    #[inline]
    pub(crate) const fn fast(id: u64) -> DescId {
        DescId(id | FAST_BIT)
    }

    /// The id of a rendezvous read made from the agent's id `id`.
    #[inline]
    pub(crate) const fn read(id: u64) -> DescId {
        DescId(id | READ_BIT)
    }

    /// The id a method completion names.
    #[inline]
    pub(crate) const fn from_raw(raw: u64) -> DescId {
        DescId(raw)
    }

    /// The value handed to the method.
    #[inline]
    pub(crate) const fn raw(self) -> u64 {
        self.0
    }

    /// Which protocol the completion of this descriptor goes to.
    #[inline]
    pub(crate) const fn route(self) -> Route {
        if self.0 & FAST_BIT != 0 {
            Route::FastSend
        } else if self.0 & READ_BIT != 0 {
            Route::Read
        } else {
            Route::Send
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ID_MASK;

    #[test]
    fn a_completion_id_routes_to_the_protocol_that_made_it() {
        for id in [1, 2, 12345, ID_MASK] {
            assert_eq!(DescId::send(id).route(), Route::Send);
            assert_eq!(DescId::fast(id).route(), Route::FastSend);
            assert_eq!(DescId::read(id).route(), Route::Read);
            // What a method hands back routes the same way.
            for d in [DescId::send(id), DescId::fast(id), DescId::read(id)] {
                assert_eq!(DescId::from_raw(d.raw()).route(), d.route());
            }
        }
        // The values on the way to the methods are the ones the agent always used.
        assert_eq!(DescId::fast(5).raw(), 5 | 1 << 63);
        assert_eq!(DescId::read(5).raw(), 5 | 1 << 62);
        assert_eq!(DescId::send(5).raw(), 5);
    }
}
