//! The state word of a request: outstanding CAR count and flags in one `AtomicU64`.
//!
//! Every transition is one read-modify-write on this word, so the order between a completion, a
//! waiter registering, a handler being posted and the user's handle being given back is total:
//! whoever makes the last of the free conditions true sees it in the value its own operation
//! returned, and runs the free callback (exactly once).

/// Outstanding CARs (bits 0..32). The request is complete when this reaches 0.
pub(crate) const COUNT_MASK: u64 = 0xFFFF_FFFF;
/// One handler posting that has not run yet (bits 32..40). Pins the request: no free before 0.
pub(crate) const PIN_ONE: u64 = 1 << 32;
/// All pin bits.
pub(crate) const PIN_MASK: u64 = 0xFF << 32;
/// The user's handle is gone (given back by a completing wait/test, or by `free`/drop).
pub(crate) const HANDLE_RELEASED: u64 = 1 << 40;
/// The free callback has been claimed by some call; nobody else runs it.
pub(crate) const FREE_CLAIMED: u64 = 1 << 41;
/// Some wait set registered a waiter; completion must look at the waiter list.
pub(crate) const WAITING: u64 = 1 << 42;
/// `cancel` was called on the request.
pub(crate) const CANCEL_REQUESTED: u64 = 1 << 43;
/// The operation's owner completed it as cancelled (message requests).
pub(crate) const CANCELLED: u64 = 1 << 44;
/// The owner will signal release separately from completion.
pub(crate) const RELEASE_HELD: u64 = 1 << 45;
/// The owner signalled release.
pub(crate) const RELEASE_SIGNALLED: u64 = 1 << 46;
/// A handler was posted at some point: the request's handler slots need clearing before reuse.
pub(crate) const HANDLERS_POSTED: u64 = 1 << 47;

/// A failure is being committed ([`fail`](super::core::Core::fail)): it completes every CAR, so
/// every other completion loses. Set before the cancel callback runs, cleared with the count.
pub(crate) const FAILING: u64 = 1 << 48;
/// One CAR is reserved while its result (bytes, error) is written, before it is counted: other
/// completions may not take that CAR, and whole-request completions wait (a few stores, no user
/// code) until it is counted.
pub(crate) const SETTLING: u64 = 1 << 49;

/// Outstanding CAR count of a state word.
pub(crate) const fn count(s: u64) -> u64 {
    s & COUNT_MASK
}

/// Whether a state word says complete.
pub(crate) const fn is_complete(s: u64) -> bool {
    count(s) == 0
}

/// Number of unrun handler postings.
pub(crate) const fn pins(s: u64) -> u64 {
    (s & PIN_MASK) >> 32
}

/// Whether all resources of the operation are given back (the RELEASE condition).
pub(crate) const fn is_released(s: u64) -> bool {
    is_complete(s) && (s & RELEASE_HELD == 0 || s & RELEASE_SIGNALLED != 0)
}

/// Whether the free callback may run now and nobody has claimed it yet.
pub(crate) const fn free_due(s: u64) -> bool {
    is_complete(s) && s & HANDLE_RELEASED != 0 && pins(s) == 0 && s & FREE_CLAIMED == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_is_due_only_when_complete_released_and_unpinned() {
        let s = HANDLE_RELEASED;
        assert!(free_due(s));
        assert!(!free_due(s | 1));
        assert!(!free_due(s | PIN_ONE));
        assert!(!free_due(s | FREE_CLAIMED));
        assert!(!free_due(0));
    }

    #[test]
    fn release_follows_completion_unless_held() {
        assert!(is_released(0));
        assert!(!is_released(1));
        assert!(!is_released(RELEASE_HELD));
        assert!(is_released(RELEASE_HELD | RELEASE_SIGNALLED));
        assert!(!is_released(RELEASE_HELD | RELEASE_SIGNALLED | 1));
    }
}
