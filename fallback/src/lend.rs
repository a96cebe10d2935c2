//! Lending a caller's borrowed memory to a request for the length of one blocking call.
//!
//! A blocking `send` or `recv` waits until its request completed, so the caller's slice could
//! be read or written in place by the protocol (no copy through a buffer of the library's
//! own), as MPI libraries do; but the request's machinery wants memory it may hold without a
//! lifetime (`'static`), possibly on another thread. [`lend`] and [`lend_mut`] hand it such a
//! value for the length of a closure: a [`Lent`] or [`LentMut`] that refers to the caller's
//! bytes. The closure must give every copy of it back (drop it) before it returns, for
//! example by taking a receive buffer's memory back after the wait; when the closure returns
//! or unwinds with one still alive, the process aborts with a message instead of letting
//! anything reach memory whose borrow ended.
//!
//! ```
//! use viaduct_fallback::lend::{lend, lend_mut};
//!
//! let mut bytes = [0u8; 4];
//! lend_mut(&mut bytes, |mut lent| {
//!     // `lent` is 'static + Send: it can go into a request on another thread.
//!     std::thread::spawn(move || lent.as_mut().copy_from_slice(b"data")).join().unwrap();
//! });
//! assert_eq!(&bytes, b"data");
//!
//! let n = lend(&bytes, |lent| lent.as_ref().len());
//! assert_eq!(n, 4);
//! ```

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many lent values of one loan are alive (the scope's own check counts none).
struct Loan {
    alive: AtomicUsize,
}

impl Loan {
    fn new() -> Arc<Loan> {
        Arc::new(Loan {
            alive: AtomicUsize::new(1),
        })
    }
}

/// A lent value's share of its loan: counted alive until dropped.
struct Share(Arc<Loan>);

impl Drop for Share {
    fn drop(&mut self) {
        self.0.alive.fetch_sub(1, Ordering::Release);
    }
}

/// At the end of the loan's scope (return or unwind): aborts when a lent value is alive.
struct ScopeEnd(Arc<Loan>);

impl Drop for ScopeEnd {
    fn drop(&mut self) {
        if self.0.alive.load(Ordering::Acquire) != 0 {
            eprintln!(
                "viaduct: lent memory outlived the call that lent it (a request kept the \
                 caller's buffer after its wait); aborting rather than touch memory whose \
                 borrow ended"
            );
            std::process::abort();
        }
    }
}

/// The caller's bytes, readable for the length of a [`lend`] call.
pub struct Lent {
    ptr: NonNull<u8>,
    len: usize,
    _share: Share,
}

// SAFETY: `Lent` gives shared reads of bytes borrowed immutably (`&[u8]`, itself `Send` and
// `Sync`) for the length of `lend`, which does not return while a `Lent` is alive (it aborts).
unsafe impl Send for Lent {}
// SAFETY: as for `Send`: shared reads only.
unsafe impl Sync for Lent {}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` and `len` come from a `&[u8]` borrowed for the whole `lend` call, and
        // this `Lent` is alive, so that call has not returned (`ScopeEnd` aborts otherwise).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// The caller's bytes, writable for the length of a [`lend_mut`] call.
pub struct LentMut {
    ptr: NonNull<u8>,
    len: usize,
    _share: Share,
}

// SAFETY: `LentMut` is the only access to bytes borrowed mutably (`&mut [u8]`, itself `Send`)
// for the length of `lend_mut`, which does not return while the `LentMut` is alive (it aborts).
unsafe impl Send for LentMut {}

impl AsMut<[u8]> for LentMut {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` and `len` come from the `&mut [u8]` borrowed for the whole `lend_mut`
        // call, whose only access this `LentMut` is (the closure got it by value and the
        // slice is not reachable otherwise); that call has not returned while it is alive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl AsRef<[u8]> for LentMut {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: as for `as_mut`, and `&self` excludes a writer through this value.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

/// Calls `f` with a `'static` handle on `bytes` (see the module documentation): every
/// [`Lent`] must be dropped before `f` returns, else the process aborts.
pub fn lend<R>(bytes: &[u8], f: impl FnOnce(Lent) -> R) -> R {
    let loan = Loan::new();
    let _end = ScopeEnd(loan.clone());
    f(Lent {
        ptr: NonNull::from(bytes).cast(),
        len: bytes.len(),
        _share: Share(loan),
    })
}

/// Calls `f` with a `'static` handle on `bytes` to write (see the module documentation): the
/// [`LentMut`] must be dropped before `f` returns, else the process aborts.
pub fn lend_mut<R>(bytes: &mut [u8], f: impl FnOnce(LentMut) -> R) -> R {
    let loan = Loan::new();
    let _end = ScopeEnd(loan.clone());
    let len = bytes.len();
    f(LentMut {
        ptr: NonNull::from(bytes).cast(),
        len,
        _share: Share(loan),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lent_values_reach_the_callers_bytes() {
        let mut buf = vec![0u8; 64];
        lend_mut(&mut buf, |mut m| {
            m.as_mut()[..3].copy_from_slice(b"abc");
            assert_eq!(&m.as_ref()[..3], b"abc");
        });
        assert_eq!(&buf[..3], b"abc");
        let shared = lend(&buf, |l| {
            let l = Arc::new(l);
            let copies: Vec<_> = (0..4).map(|_| l.clone()).collect();
            let sum: usize = copies
                .iter()
                .map(|c| AsRef::<[u8]>::as_ref(&**c)[0] as usize)
                .sum();
            sum
        });
        assert_eq!(shared, 4 * b'a' as usize);
    }

    #[test]
    fn empty_slices_lend() {
        lend_mut(&mut [], |mut m| assert!(m.as_mut().is_empty()));
        lend(&[], |l| assert!(l.as_ref().is_empty()));
    }
}
