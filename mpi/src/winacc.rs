//! Accumulates on elements with holes: the pair types `MPI_SHORT_INT`, `MPI_DOUBLE_INT`,
//! `MPI_LONG_INT`, `MPI_LONG_DOUBLE_INT` (with `MPI_MAXLOC`, `MPI_MINLOC`, ...) and types
//! derived from them.
//!
//! A one-sided batch carries an accumulate's data packed (each element's runs' bytes, without
//! the padding between value and index) and the target side as byte runs, adjacent runs
//! merged. The reductions work on whole elements as they lie in memory (extent bytes, value and
//! index at their offsets), so each element is unpacked into a scratch element, the target's
//! element gathered into another, the two combined, and the result's runs written back to the
//! target's bytes (the padding of the target is never touched).

use viaduct_agent::coll::Reduction;

use crate::types::Layout;

/// A position in a sequence of memory pieces `(address, length)`, walked byte by byte in
/// order.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    pieces: &'a [(usize, usize)],
    piece: usize,
    off: usize,
}

impl Cursor<'_> {
    /// Moves `out.len()` bytes between the pieces at the cursor and `out` (`write`: from `out`
    /// to the pieces), and advances; stops early at the end of the pieces.
    ///
    /// # Safety
    ///
    /// Every piece is `length` readable (and, for `write`, writable) bytes at its address, not
    /// overlapping `out`.
    unsafe fn transfer(&mut self, out: &mut [u8], write: bool) {
        let mut done = 0;
        while done < out.len() && self.piece < self.pieces.len() {
            let (addr, len) = self.pieces[self.piece];
            let n = (len - self.off).min(out.len() - done);
            let p = (addr + self.off) as *mut u8;
            // SAFETY: `n` bytes from `off` lie inside the piece (the caller's memory) and
            // inside `out`, which do not overlap.
            unsafe {
                if write {
                    std::ptr::copy_nonoverlapping(out.as_ptr().add(done), p, n);
                } else {
                    std::ptr::copy_nonoverlapping(p, out.as_mut_ptr().add(done), n);
                }
            }
            done += n;
            self.off += n;
            if self.off == len {
                self.piece += 1;
                self.off = 0;
            }
        }
    }
}

/// Combines the packed elements of `base` in `data` into the target bytes `pieces` (addresses
/// and lengths, in the order of the target datatype's runs, holding as many bytes as `data`)
/// with `red`, one element at a time through scratch elements of `base`'s extent.
///
/// # Safety
///
/// Every piece is `length` readable and writable bytes at its address, accessed by nothing
/// else meanwhile.
pub(crate) unsafe fn combine(
    red: &Reduction,
    base: &Layout,
    data: &[u8],
    pieces: &[(usize, usize)],
) {
    let ext = base.extent.max(0) as usize;
    if base.size == 0
        || base
            .runs
            .iter()
            .any(|&(o, l)| o < 0 || o as usize + l > ext)
    {
        return;
    }
    let mut inc = vec![0u8; ext];
    let mut acc = vec![0u8; ext];
    let mut cur = Cursor {
        pieces,
        piece: 0,
        off: 0,
    };
    for elem in data.chunks_exact(base.size) {
        let start = cur;
        let mut at = 0;
        for &(o, l) in &base.runs {
            let o = o as usize;
            inc[o..o + l].copy_from_slice(&elem[at..at + l]);
            // SAFETY: the caller's pieces.
            unsafe { cur.transfer(&mut acc[o..o + l], false) };
            at += l;
        }
        red.combine(&inc, &mut acc);
        let mut back = start;
        for &(o, l) in &base.runs {
            let o = o as usize;
            // SAFETY: the caller's pieces, the same bytes just read.
            unsafe { back.transfer(&mut acc[o..o + l], true) };
        }
    }
}
