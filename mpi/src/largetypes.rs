//! The datatype constructors with large counts (MPI-4's `_c` forms): `MPI_Type_contiguous_c`,
//! `MPI_Type_vector_c`, `MPI_Type_create_hvector_c`, `MPI_Type_indexed_c`,
//! `MPI_Type_create_hindexed_c`, `MPI_Type_create_indexed_block_c`,
//! `MPI_Type_create_hindexed_block_c` and `MPI_Type_create_struct_c`.
//!
//! Each takes any `MPI_Count` (a negative count or block length is `MPI_ERR_COUNT`) and keeps
//! its arguments as large counts, in MPICH's order: `MPI_Type_get_envelope_c` and
//! `MPI_Type_get_contents_c` give them back, and the `int` forms of those refuse such a type
//! (`MPI_ERR_TYPE`). Layouts are the `int` forms' (`types::build`), 64-bit throughout.

use std::ffi::c_int;
use std::sync::Arc;

use crate::abi::{self, Handle, MpiCount, err};
use crate::error::MpiError;
use crate::types::{arr, build, give, hvector, layout, struct_padded};
use crate::types2::Recipe;

/// A large count argument as a `usize` (`MPI_ERR_COUNT` when negative).
pub(crate) fn large(what: &str, v: MpiCount) -> Result<usize, MpiError> {
    usize::try_from(v).map_err(|_| MpiError::new(err::COUNT, format!("{what} {v} is negative")))
}

/// A large displacement or stride as a byte offset, `unit` bytes per step.
fn bytes(what: &str, v: MpiCount, unit: isize) -> Result<isize, MpiError> {
    isize::try_from(v)
        .ok()
        .and_then(|v| v.checked_mul(unit))
        .ok_or_else(|| {
            MpiError::new(
                err::COUNT,
                format!("{what} {v} of {unit}-byte steps overflows"),
            )
        })
}

/// The large recipe of `combiner`: the counts, one datatype or several.
fn recipe(combiner: c_int, counts: Vec<MpiCount>, types: &[Handle]) -> Recipe {
    Recipe::new(combiner, vec![], vec![], types).with_counts(counts)
}

mpi_fn! {
    /// `MPI_Type_contiguous_c`: `count` elements; large counts `[count]`.
    MPI_Type_contiguous_c / PMPI_Type_contiguous_c(count: MpiCount, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let n = large("count", count)?;
        let l = build(&[(0, n, layout(oldtype)?, oldtype)])?;
        give(l, newtype, recipe(abi::COMBINER_CONTIGUOUS, vec![count], &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_vector_c`; large counts `[count, blocklength, stride]`.
    MPI_Type_vector_c / PMPI_Type_vector_c(count: MpiCount, blocklength: MpiCount, stride: MpiCount, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let (n, b) = (large("count", count)?, large("blocklength", blocklength)?);
        let step = bytes("stride", stride, layout(oldtype)?.extent)?;
        let r = recipe(abi::COMBINER_VECTOR, vec![count, blocklength, stride], &[oldtype]);
        give(hvector(n, b, step, oldtype)?, newtype, r)
    }
}

mpi_fn! {
    /// `MPI_Type_create_hvector_c`; large counts `[count, blocklength, stride]` (as MPICH).
    MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c(count: MpiCount, blocklength: MpiCount, stride: MpiCount, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let (n, b) = (large("count", count)?, large("blocklength", blocklength)?);
        let step = bytes("stride", stride, 1)?;
        let r = recipe(abi::COMBINER_HVECTOR, vec![count, blocklength, stride], &[oldtype]);
        give(hvector(n, b, step, oldtype)?, newtype, r)
    }
}

/// Blocks `(displacement × unit bytes, block length)` of `oldtype`, and the large counts
/// `[count, blocklengths.., displacements..]`.
///
/// # Safety
/// `blocklengths` and `displacements` hold `count` values each (when `count` > 0).
unsafe fn indexed(
    count: MpiCount,
    blocklengths: *const MpiCount,
    displacements: *const MpiCount,
    oldtype: Handle,
    unit: Option<isize>,
) -> Result<(crate::types::Layout, Vec<MpiCount>), MpiError> {
    let n = large("count", count)?;
    let old = layout(oldtype)?;
    let unit = unit.unwrap_or(old.extent);
    // SAFETY: the caller's arrays of `count` values.
    let (bl, ds) = unsafe {
        (
            arr(blocklengths, n, "array_of_blocklengths")?,
            arr(displacements, n, "array_of_displacements")?,
        )
    };
    let mut blocks = Vec::with_capacity(n);
    for (b, d) in bl.iter().zip(ds) {
        blocks.push((
            bytes("displacement", *d, unit)?,
            large("blocklength", *b)?,
            Arc::clone(&old),
            oldtype,
        ));
    }
    Ok((build(&blocks)?, [&[count][..], bl, ds].concat()))
}

mpi_fn! {
    /// `MPI_Type_indexed_c`; large counts `[count, blocklengths.., displacements..]`.
    MPI_Type_indexed_c / PMPI_Type_indexed_c(count: MpiCount, array_of_blocklengths: *const MpiCount, array_of_displacements: *const MpiCount, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's arrays of `count` values.
        let (l, c) = unsafe { indexed(count, array_of_blocklengths, array_of_displacements, oldtype, None) }?;
        give(l, newtype, recipe(abi::COMBINER_INDEXED, c, &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_create_hindexed_c`; large counts `[count, blocklengths.., displacements..]`.
    MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(count: MpiCount, array_of_blocklengths: *const MpiCount, array_of_displacements: *const MpiCount, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's arrays of `count` values.
        let (l, c) = unsafe { indexed(count, array_of_blocklengths, array_of_displacements, oldtype, Some(1)) }?;
        give(l, newtype, recipe(abi::COMBINER_HINDEXED, c, &[oldtype]))
    }
}

/// Blocks of `blocklength` elements at `displacements` × `unit` bytes (the old extent when
/// `None`), and the large counts `[count, blocklength, displacements..]`.
///
/// # Safety
/// `displacements` holds `count` values (when `count` > 0).
unsafe fn blocked(
    count: MpiCount,
    blocklength: MpiCount,
    displacements: *const MpiCount,
    oldtype: Handle,
    unit: Option<isize>,
) -> Result<(crate::types::Layout, Vec<MpiCount>), MpiError> {
    let (n, b) = (large("count", count)?, large("blocklength", blocklength)?);
    let old = layout(oldtype)?;
    let unit = unit.unwrap_or(old.extent);
    // SAFETY: the caller's array of `count` values.
    let ds = unsafe { arr(displacements, n, "array_of_displacements") }?;
    let mut blocks = Vec::with_capacity(n);
    for d in ds {
        blocks.push((
            bytes("displacement", *d, unit)?,
            b,
            Arc::clone(&old),
            oldtype,
        ));
    }
    Ok((build(&blocks)?, [&[count, blocklength][..], ds].concat()))
}

mpi_fn! {
    /// `MPI_Type_create_indexed_block_c`; large counts `[count, blocklength, displacements..]`.
    MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(count: MpiCount, blocklength: MpiCount, array_of_displacements: *const MpiCount, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's array of `count` values.
        let (l, c) = unsafe { blocked(count, blocklength, array_of_displacements, oldtype, None) }?;
        give(l, newtype, recipe(abi::COMBINER_INDEXED_BLOCK, c, &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_create_hindexed_block_c`; large counts `[count, blocklength,
    /// displacements..]`.
    MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c(count: MpiCount, blocklength: MpiCount, array_of_displacements: *const MpiCount, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's array of `count` values.
        let (l, c) = unsafe { blocked(count, blocklength, array_of_displacements, oldtype, Some(1)) }?;
        give(l, newtype, recipe(abi::COMBINER_HINDEXED_BLOCK, c, &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_create_struct_c`; large counts `[count, blocklengths.., displacements..]`,
    /// the extent padded as `MPI_Type_create_struct`'s.
    MPI_Type_create_struct_c / PMPI_Type_create_struct_c(count: MpiCount, array_of_blocklengths: *const MpiCount, array_of_displacements: *const MpiCount, array_of_types: *const Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let n = large("count", count)?;
        // SAFETY: the caller's arrays of `count` values.
        let (bl, ds, ts) = unsafe {
            (arr(array_of_blocklengths, n, "array_of_blocklengths")?, arr(array_of_displacements, n, "array_of_displacements")?, arr(array_of_types, n, "array_of_types")?)
        };
        let mut blocks = Vec::with_capacity(n);
        for ((b, d), t) in bl.iter().zip(ds).zip(ts) {
            blocks.push((bytes("displacement", *d, 1)?, large("blocklength", *b)?, layout(*t)?, *t));
        }
        let c = [&[count][..], bl, ds].concat();
        give(struct_padded(build(&blocks)?), newtype, recipe(abi::COMBINER_STRUCT, c, ts))
    }
}
