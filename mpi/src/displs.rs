//! Negative displacements of the `v` and `w` collectives. The standard counts a part's
//! displacement from the buffer argument either way (ROMIO gathers host names at
//! displacements between separately allocated strings, some below the first), while the
//! collectives lay their parts out from the buffer up. A buffer argument whose displacements go
//! below it is rebased at the call: the buffer moves down to the lowest part and every
//! displacement up by as much, which names the same bytes.

use std::ffi::c_int;

use crate::abi::{Handle, err};
use crate::error::MpiError;

/// A buffer argument's displacements made non-negative: the buffer (an address) and, when
/// some displacement was negative, the rebased displacements, which the call passes on
/// instead (kept alive until it returned).
pub(crate) type Rebased = (usize, Option<Vec<c_int>>);

/// Rebases buffer `ptr` with `counts[i]` elements at `displs[i]` units of `unit` bytes for
/// each of `n` ranks, when `significant` (see the module). Parts of no element do not count;
/// their displacements stay as given. A rebased displacement past an `int` is `MPI_ERR_ARG`.
///
/// # Safety
///
/// When `significant`, `counts` and `displs` hold `n` ints or are NULL.
pub(crate) unsafe fn rebase(
    significant: bool,
    ptr: usize,
    counts: *const c_int,
    displs: *const c_int,
    n: usize,
    unit: isize,
) -> Result<Rebased, MpiError> {
    if !significant || counts.is_null() || displs.is_null() || ptr == crate::abi::IN_PLACE {
        return Ok((ptr, None));
    }
    // SAFETY: the caller's arrays of `n` ints.
    let (c, d) = unsafe {
        (
            std::slice::from_raw_parts(counts, n),
            std::slice::from_raw_parts(displs, n),
        )
    };
    let low = (0..n).filter(|&i| c[i] > 0).map(|i| d[i]).min();
    let Some(low) = low.filter(|&l| l < 0) else {
        return Ok((ptr, None));
    };
    let moved = d
        .iter()
        .zip(c)
        .map(|(&di, &ci)| {
            if ci > 0 {
                c_int::try_from(i64::from(di) - i64::from(low)).map_err(|_| {
                    MpiError::new(
                        err::ARG,
                        format!("displacements from {low} to {di} span more than an int"),
                    )
                })
            } else {
                Ok(di)
            }
        })
        .collect::<Result<Vec<c_int>, MpiError>>()?;
    let shift = (low as isize).checked_mul(unit).ok_or_else(|| {
        MpiError::new(err::ARG, format!("displacement {low} overflows an address"))
    })?;
    let base = ptr.checked_add_signed(shift).ok_or_else(|| {
        MpiError::new(err::ARG, format!("displacement {low} goes below address 0"))
    })?;
    Ok((base, Some(moved)))
}

/// The bytes one displacement of datatype `t` counts (its extent).
pub(crate) fn unit(t: Handle) -> isize {
    crate::types::layout(t).map_or(1, |l| l.extent)
}

/// The displacements to pass on: the rebased ones, else the caller's.
pub(crate) fn pass(r: &Rebased, displs: *const c_int) -> *const c_int {
    r.1.as_ref().map_or(displs, |v| v.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_displacements_move_the_buffer_down() {
        let counts = [2, 0, 3];
        let displs = [4, -100, -6];
        // SAFETY: arrays of 3 ints.
        let r = unsafe { rebase(true, 1000, counts.as_ptr(), displs.as_ptr(), 3, 4) }.unwrap();
        assert_eq!(r.0, 1000 - 24);
        assert_eq!(r.1.as_deref(), Some(&[10, -100, 0][..]));
        let plain = [0, 5, 9];
        // SAFETY: arrays of 3 ints.
        let r = unsafe { rebase(true, 1000, counts.as_ptr(), plain.as_ptr(), 3, 4) }.unwrap();
        assert_eq!(r, (1000, None));
        // SAFETY: not significant: the arrays are not read.
        let r = unsafe { rebase(false, 8, std::ptr::null(), std::ptr::null(), 3, 4) }.unwrap();
        assert_eq!(r, (8, None));
    }
}
