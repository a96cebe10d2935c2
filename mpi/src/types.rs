//! Derived datatypes: `MPI_Type_contiguous`, `MPI_Type_vector`, `MPI_Type_create_hvector`,
//! `MPI_Type_indexed`, `MPI_Type_create_hindexed`, `MPI_Type_create_indexed_block`,
//! `MPI_Type_create_struct`, `MPI_Type_create_resized`, `MPI_Type_dup`, `MPI_Type_commit`,
//! `MPI_Type_free`, `MPI_Type_size`, `MPI_Type_get_extent`, `MPI_Type_get_true_extent`,
//! `MPI_Pack`, `MPI_Unpack`, `MPI_Pack_size`.
//!
//! A datatype is flattened into its typemap's byte runs (offset, length) in typemap order,
//! adjacent runs merged. A type whose one run is `[0, extent)` is contiguous and moves as plain
//! bytes everywhere; any other is packed into its runs' bytes for point-to-point messages (the
//! wire format of every datatype is its packed data, so differently built types of one
//! signature match) and refused by collectives (`MPI_ERR_TYPE`); file I/O packs and unpacks them.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::abi::{self, Handle, MpiAint, MpiCount, dt, err};
use crate::comm::put;
use crate::datatype::{data_size, size_of};
use crate::error::MpiError;
use crate::types2::Recipe;

/// Most byte runs one datatype may flatten to.
const MAX_RUNS: usize = 1 << 22;

/// A flattened datatype.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Byte runs (offset from the element's start, length), in typemap order.
    pub runs: Vec<(isize, usize)>,
    /// Bytes of data of one element (`MPI_Type_size`).
    pub size: usize,
    /// Lower bound.
    pub lb: isize,
    /// Extent (`ub - lb`): the stride between consecutive elements.
    pub extent: isize,
    /// The predefined type every element is made of, if only one.
    pub base: Option<Handle>,
    /// Predefined elements per element (`MPI_Get_elements`).
    pub elements: usize,
    /// The largest alignment of the predefined types in it: `MPI_Type_create_struct` rounds
    /// its extent up to a multiple of this (the standard's epsilon, as MPICH).
    pub align: usize,
    /// Whether `lb` is an explicit lower bound (`MPI_LB`, `MPI_Type_create_resized`, ...),
    /// which wins over the data's bounds in types built from this one.
    pub marked_lb: bool,
    /// Whether `lb + extent` is an explicit upper bound (`MPI_UB`, resized, ...).
    pub marked_ub: bool,
    /// The type signature of one element as runs of (predefined element size, how many), for
    /// counting the predefined elements of a partial element (`MPI_Get_elements`); `None`
    /// when it would take more than [`MAX_RUNS`] runs.
    pub sig: Option<Vec<(usize, usize)>>,
}

/// The address `off` bytes from `base`. A null `base` is `MPI_BOTTOM` (MPICH's ABI defines it
/// as a null pointer): `off` is then an absolute address, taken from `MPI_Get_address` (which
/// exposes it), so the pointer is rebuilt from it with that exposed provenance.
#[inline]
fn element(base: *const u8, off: isize) -> *const u8 {
    if base.is_null() {
        std::ptr::with_exposed_provenance(off as usize)
    } else {
        base.wrapping_offset(off)
    }
}

/// Appends `count` predefined elements of `size` bytes to signature `sig`, merged with its last
/// run when of the same size (`false` when that would pass [`MAX_RUNS`] runs).
fn push_sig(sig: &mut Vec<(usize, usize)>, size: usize, count: usize) -> bool {
    if count == 0 {
        return true;
    }
    if let Some(last) = sig.last_mut().filter(|l| l.0 == size) {
        last.1 += count;
        return true;
    }
    if sig.len() >= MAX_RUNS {
        return false;
    }
    sig.push((size, count));
    true
}

impl Layout {
    /// The predefined elements in the first `bytes` bytes of one element's data (`None` when
    /// they end inside a predefined element, or the signature is unknown).
    pub fn elements_in(&self, bytes: usize) -> Option<usize> {
        let mut left = bytes;
        let mut n = 0;
        for &(size, count) in self.sig.as_ref()? {
            if left == 0 {
                break;
            }
            let take = (left / size).min(count);
            n += take;
            left -= take * size;
            if take < count {
                break;
            }
        }
        (left == 0).then_some(n)
    }

    /// Whether elements are plain bytes `[0, extent)` (no holes, no reordering).
    pub fn contiguous(&self) -> bool {
        self.lb == 0
            && (self.runs.is_empty() && self.extent == 0
                || self.runs.len() == 1 && self.runs[0] == (0, self.extent as usize))
    }

    /// The bytes `count` elements touch, as offsets from the buffer's address: the lowest and
    /// one past the highest ((0, 0) for none).
    pub fn reach(&self, count: usize) -> (isize, isize) {
        if count == 0 {
            return (0, 0);
        }
        let (lo, hi) = self.true_bounds();
        let last = (count as isize - 1) * self.extent;
        (lo + last.min(0), hi + last.max(0))
    }

    fn true_bounds(&self) -> (isize, isize) {
        let lo = self.runs.iter().map(|r| r.0).min().unwrap_or(0);
        let hi = self
            .runs
            .iter()
            .map(|r| r.0 + r.1 as isize)
            .max()
            .unwrap_or(0);
        (lo, hi)
    }

    /// Copies `count` elements at `src` into `out` (their runs' bytes in order). A null `src`
    /// is `MPI_BOTTOM`: the runs' displacements are then absolute addresses.
    ///
    /// # Safety
    ///
    /// `src` holds `count` elements of this layout.
    pub unsafe fn pack(&self, src: *const u8, count: usize, out: &mut Vec<u8>) {
        out.reserve(self.size * count);
        for i in 0..count {
            let base = i as isize * self.extent;
            for &(off, len) in &self.runs {
                // SAFETY: the caller guarantees the element's runs are readable.
                let piece = unsafe { std::slice::from_raw_parts(element(src, base + off), len) };
                out.extend_from_slice(piece);
            }
        }
    }

    /// Copies packed data into elements at `dst`; returns the bytes used (stops at the end of
    /// `data`, mid-element if the data ends there). A null `dst` is `MPI_BOTTOM`, as for
    /// [`Layout::pack`].
    ///
    /// # Safety
    ///
    /// `dst` holds `count` writable elements of this layout.
    pub unsafe fn unpack(&self, data: &[u8], dst: *mut u8, count: usize) -> usize {
        let mut at = 0;
        'all: for i in 0..count {
            let base = i as isize * self.extent;
            for &(off, len) in &self.runs {
                if at >= data.len() {
                    break 'all;
                }
                let n = len.min(data.len() - at);
                // SAFETY: the caller guarantees the element's runs are writable; `n` bytes of
                // `data` remain.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr().add(at),
                        element(dst, base + off).cast_mut(),
                        n,
                    )
                };
                at += n;
            }
        }
        at
    }
}

fn push_run(runs: &mut Vec<(isize, usize)>, off: isize, len: usize) -> Result<(), MpiError> {
    if len == 0 {
        return Ok(());
    }
    if let Some(last) = runs.last_mut() {
        if last.0 + last.1 as isize == off {
            last.1 += len;
            return Ok(());
        }
    }
    if runs.len() >= MAX_RUNS {
        return Err(MpiError::new(
            err::TYPE,
            format!("the datatype has more than {MAX_RUNS} separate pieces"),
        ));
    }
    runs.push((off, len));
    Ok(())
}

fn table() -> &'static Mutex<HashMap<Handle, Arc<Layout>>> {
    static T: OnceLock<Mutex<HashMap<Handle, Arc<Layout>>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}

/// First handle of a derived datatype (MPICH's indirect kind bits of a datatype).
const FIRST: Handle = 0xcc00_0000u32 as Handle;
static NEXT: AtomicI32 = AtomicI32::new(FIRST);

/// Whether `t` is a handle of this module's kind.
pub fn is_derived(t: Handle) -> bool {
    (t as u32) & 0xff00_0000 == 0xcc00_0000
}

/// The derived datatype behind `t`.
pub fn derived(t: Handle) -> Result<Arc<Layout>, MpiError> {
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&t)
        .cloned()
        .ok_or_else(|| MpiError::new(err::TYPE, format!("{t:#x} is not a datatype (freed?)")))
}

/// The size in bytes of the data of one element of any datatype (`MPI_Type_size`), without
/// building a layout for a predefined one.
pub fn type_size(t: Handle) -> Result<usize, MpiError> {
    if is_derived(t) {
        return Ok(derived(t)?.size);
    }
    data_size(t)
}

/// The layout of any datatype (predefined ones built on the fly).
pub fn layout(t: Handle) -> Result<Arc<Layout>, MpiError> {
    if is_derived(t) {
        return derived(t);
    }
    let extent = size_of(t)?;
    let size = data_size(t)?;
    let runs = match t {
        dt::DOUBLE_INT | dt::LONG_INT => vec![(0, 12)],
        dt::SHORT_INT => vec![(0, 2), (4, 4)],
        dt::LONG_DOUBLE_INT => vec![(0, 20)],
        _ if extent == 0 => Vec::new(),
        _ => vec![(0, extent)],
    };
    // The pair types are two predefined elements each, as the standard defines them (a value and an index).
    let sig = match t {
        dt::FLOAT_INT | dt::TWO_INT | dt::TWO_INTEGER | dt::TWO_REAL => vec![(4, 2)],
        dt::TWO_DOUBLE_PRECISION => vec![(8, 2)],
        dt::DOUBLE_INT | dt::LONG_INT => vec![(8, 1), (4, 1)],
        dt::SHORT_INT => vec![(2, 1), (4, 1)],
        dt::LONG_DOUBLE_INT => vec![(16, 1), (4, 1)],
        _ if size == 0 => Vec::new(),
        _ => vec![(size, 1)],
    };
    Ok(Arc::new(Layout {
        runs,
        size,
        lb: 0,
        extent: extent as isize,
        base: Some(t),
        elements: sig.iter().map(|s| s.1).sum(),
        sig: Some(sig),
        align: align_of(t, extent),
        marked_lb: t == dt::LB,
        marked_ub: t == dt::UB,
    }))
}

/// The alignment of predefined type `t` of `extent` bytes in a C struct on this ABI (x86-64
/// System V): its size up to 8, 16 for `long double` and its complex types, the largest part's
/// for the pair types, 0 for `MPI_LB`/`MPI_UB`.
fn align_of(t: Handle, extent: usize) -> usize {
    match t {
        dt::LB | dt::UB => 0,
        dt::LONG_DOUBLE | dt::C_LONG_DOUBLE_COMPLEX | dt::CXX_LONG_DOUBLE_COMPLEX => 16,
        dt::LONG_DOUBLE_INT => 16,
        dt::FLOAT_INT | dt::SHORT_INT => 4,
        dt::DOUBLE_INT | dt::LONG_INT => 8,
        dt::TWO_INT | dt::TWO_INTEGER | dt::TWO_REAL => 4,
        dt::TWO_DOUBLE_PRECISION => 8,
        dt::C_FLOAT_COMPLEX | dt::COMPLEX | dt::COMPLEX8 | dt::CXX_FLOAT_COMPLEX => 4,
        dt::C_DOUBLE_COMPLEX | dt::DOUBLE_COMPLEX | dt::COMPLEX16 | dt::CXX_DOUBLE_COMPLEX => 8,
        _ => extent.clamp(1, 8),
    }
}

/// A new datatype handle for layout `l` (a copy of a type given back to the caller, who frees
/// it).
pub fn register(l: Layout) -> Handle {
    add(l)
}

/// A new handle for a copy of derived datatype `h` (layout `l`), with its recipe if `h` is
/// still there (a type given back to the caller, who frees it).
pub fn register_copy(h: Handle, l: &Layout) -> Handle {
    let n = add(l.clone());
    crate::types2::copy_recipe(h, n);
    n
}

/// A private handle to a derived datatype, kept for an operation that outlives the caller's
/// handle (a persistent request may be started after `MPI_Type_free`: MPI lets operations that
/// use a freed datatype go on). The handle goes when the last clone of this goes; a predefined
/// datatype is held as it is.
#[derive(Debug)]
pub struct HeldType(Handle);

impl HeldType {
    /// Holds datatype `t` (`MPI_ERR_TYPE` when it is no datatype).
    pub fn new(t: Handle) -> Result<Arc<HeldType>, MpiError> {
        if !is_derived(t) {
            return Ok(Arc::new(HeldType(t)));
        }
        let l = derived(t)?;
        let h = NEXT.fetch_add(1, Ordering::Relaxed);
        table()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(h, l);
        Ok(Arc::new(HeldType(h)))
    }

    /// The handle to use in the caller's place.
    pub fn handle(&self) -> Handle {
        self.0
    }
}

impl Drop for HeldType {
    fn drop(&mut self) {
        if is_derived(self.0) {
            remove(self.0);
        }
    }
}

/// Handles of freed datatypes, the last freed at the end: a new datatype takes the last freed
/// handle, as MPICH does (programs written for MPICH have come to rely on it, e.g. by reusing
/// a variable that held a freed type's handle).
fn freed() -> &'static Mutex<Vec<Handle>> {
    static F: OnceLock<Mutex<Vec<Handle>>> = OnceLock::new();
    F.get_or_init(|| Mutex::new(Vec::new()))
}

/// Removes datatype `h` from the table, its handle free for reuse (`None`: not a datatype).
fn remove(h: Handle) -> Option<Arc<Layout>> {
    let l = table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&h)?;
    freed().lock().unwrap_or_else(|e| e.into_inner()).push(h);
    Some(l)
}

fn add(l: Layout) -> Handle {
    let reused = freed().lock().unwrap_or_else(|e| e.into_inner()).pop();
    let h = reused.unwrap_or_else(|| NEXT.fetch_add(1, Ordering::Relaxed));
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(h, Arc::new(l));
    h
}

pub(crate) fn count_arg(n: c_int, what: &str) -> Result<usize, MpiError> {
    usize::try_from(n).map_err(|_| MpiError::new(err::COUNT, format!("{what} {n} is negative")))
}

/// Builds a type from blocks `(displacement in bytes, number of old elements, old type)`.
///
/// The bounds follow the standard's typemap rules: block `(d, n, old)` has lower
/// bounds at `d + old.lb + k * old.extent` and upper bounds at `d + old.ub + k *
/// old.extent` for `k` in `0..n` (a negative extent puts the last element lowest); the new
/// lower bound is the lowest of the explicit ones (`MPI_LB`, resized types) if any block has
/// one, else the lowest of all, and the upper bound likewise. With no data and no explicit
/// bound, a bound is 0.
pub(crate) fn build(blocks: &[(isize, usize, Arc<Layout>, Handle)]) -> Result<Layout, MpiError> {
    let mut runs = Vec::new();
    let mut size = 0usize;
    let mut elements = 0usize;
    let mut align = 0usize;
    // (lowest, highest) over all blocks and over the blocks with explicit bounds.
    let (mut lb, mut marked_lb): (Option<isize>, Option<isize>) = (None, None);
    let (mut ub, mut marked_ub): (Option<isize>, Option<isize>) = (None, None);
    let mut base: Option<Option<Handle>> = None;
    let mut sig = Some(Vec::new());
    for (disp, n, old, _) in blocks {
        align = align.max(old.align);
        if *n == 0 {
            continue;
        }
        if let (Some(s), Some(o)) = (sig.as_mut(), old.sig.as_ref()) {
            let fits = match o.as_slice() {
                [(size, count)] => push_sig(s, *size, count.saturating_mul(*n)),
                _ => (0..*n).all(|_| o.iter().all(|&(size, count)| push_sig(s, size, count))),
            };
            if !fits {
                sig = None;
            }
        } else {
            sig = None;
        }
        if old.runs.len() == 1 && old.runs[0].0 == 0 && old.extent == old.runs[0].1 as isize {
            // Dense elements one after another: one run, however many (a large count).
            let len = old.runs[0].1.checked_mul(*n).ok_or_else(overflow)?;
            isize::try_from(len).map_err(|_| overflow())?;
            push_run(&mut runs, *disp, len)?;
        } else {
            for k in 0..*n {
                let at = disp + k as isize * old.extent;
                for &(off, len) in &old.runs {
                    push_run(&mut runs, at + off, len)?;
                }
            }
        }
        size = size
            .checked_add(old.size.checked_mul(*n).ok_or_else(overflow)?)
            .ok_or_else(overflow)?;
        elements = elements.saturating_add(old.elements.saturating_mul(*n));
        let last = (*n as isize - 1)
            .checked_mul(old.extent)
            .ok_or_else(extent_overflow)?;
        let lo = disp
            .checked_add(old.lb)
            .and_then(|v| v.checked_add(last.min(0)))
            .ok_or_else(extent_overflow)?;
        let hi = disp
            .checked_add(old.lb)
            .and_then(|v| v.checked_add(old.extent))
            .and_then(|v| v.checked_add(last.max(0)))
            .ok_or_else(extent_overflow)?;
        let low = |b: Option<isize>| Some(b.map_or(lo, |b| b.min(lo)));
        let high = |b: Option<isize>| Some(b.map_or(hi, |b| b.max(hi)));
        // A type with no data and no explicit bound (an empty one) adds no bounds.
        let real = !old.runs.is_empty() || old.marked_lb || old.marked_ub || old.extent != 0;
        if old.marked_lb {
            marked_lb = low(marked_lb);
        } else if real && old.base != Some(dt::UB) {
            lb = low(lb);
        }
        if old.marked_ub {
            marked_ub = high(marked_ub);
        } else if real && old.base != Some(dt::LB) {
            ub = high(ub);
        }
        base = Some(match base {
            None => old.base,
            Some(b) if b == old.base => b,
            Some(_) => None,
        });
    }
    let lower = marked_lb.or(lb).unwrap_or(0);
    let upper = marked_ub.or(ub).unwrap_or(0);
    let extent = upper.checked_sub(lower).ok_or_else(extent_overflow)?;
    Ok(Layout {
        runs,
        size,
        lb: lower,
        extent,
        base: base.flatten(),
        elements,
        align,
        marked_lb: marked_lb.is_some(),
        marked_ub: marked_ub.is_some(),
        sig,
    })
}

fn overflow() -> MpiError {
    MpiError::new(err::COUNT, "the datatype's size overflows")
}

fn extent_overflow() -> MpiError {
    MpiError::new(
        err::COUNT,
        "the datatype's bounds overflow a 64-bit address",
    )
}

/// The caller's array of `n` values.
///
/// # Safety
///
/// `p` points to `n` readable values.
pub(crate) unsafe fn arr<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T], MpiError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiError::new(err::ARG, format!("{what} is NULL")));
    }
    // SAFETY: the caller guarantees `n` values at `p`.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Gives the caller a new datatype of layout `l`, built as `recipe` says.
pub(crate) fn give(l: Layout, newtype: *mut Handle, recipe: Recipe) -> Result<(), MpiError> {
    if newtype.is_null() {
        return Err(MpiError::new(err::ARG, "newtype is NULL"));
    }
    let h = add(l);
    crate::types2::record(h, recipe);
    // SAFETY: the caller's handle, checked not NULL.
    unsafe { *newtype = h };
    Ok(())
}

mpi_fn! {
    /// `MPI_Type_contiguous`.
    MPI_Type_contiguous / PMPI_Type_contiguous(count: c_int, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let n = count_arg(count, "count")?;
        let old = layout(oldtype)?;
        give(build(&[(0, n, old, oldtype)])?, newtype, Recipe::new(abi::COMBINER_CONTIGUOUS, vec![count], vec![], &[oldtype]))
    }
}

/// `count` blocks of `blocklength` old elements, block i at byte `i * stride`.
pub(crate) fn hvector(
    n: usize,
    b: usize,
    stride: isize,
    oldtype: Handle,
) -> Result<Layout, MpiError> {
    let old = layout(oldtype)?;
    if n > 1 && b > 0 && stride == (b as isize).saturating_mul(old.extent) {
        // Blocks one after another: the elements of one block of `n * b`.
        let all = n.checked_mul(b).ok_or_else(overflow)?;
        return build(&[(0, all, old, oldtype)]);
    }
    if n > MAX_RUNS && b > 0 && old.size > 0 {
        return Err(MpiError::new(
            err::TYPE,
            format!("the datatype has more than {MAX_RUNS} separate pieces ({n} blocks)"),
        ));
    }
    let blocks: Vec<_> = (0..n)
        .map(|i| (i as isize * stride, b, Arc::clone(&old), oldtype))
        .collect();
    build(&blocks)
}

mpi_fn! {
    /// `MPI_Type_vector`.
    MPI_Type_vector / PMPI_Type_vector(count: c_int, blocklength: c_int, stride: c_int, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let ext = layout(oldtype)?.extent;
        let r = Recipe::new(abi::COMBINER_VECTOR, vec![count, blocklength, stride], vec![], &[oldtype]);
        let (n, b) = (count_arg(count, "count")?, count_arg(blocklength, "blocklength")?);
        give(hvector(n, b, stride as isize * ext, oldtype)?, newtype, r)
    }
}

mpi_fn! {
    /// `MPI_Type_create_hvector`.
    MPI_Type_create_hvector / PMPI_Type_create_hvector(count: c_int, blocklength: c_int, stride: MpiAint, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let r = Recipe::new(abi::COMBINER_HVECTOR, vec![count, blocklength], vec![stride], &[oldtype]);
        let (n, b) = (count_arg(count, "count")?, count_arg(blocklength, "blocklength")?);
        give(hvector(n, b, stride as isize, oldtype)?, newtype, r)
    }
}

mpi_fn! {
    /// `MPI_Type_indexed`.
    MPI_Type_indexed / PMPI_Type_indexed(count: c_int, blocklengths: *const c_int, displacements: *const c_int, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let n = count_arg(count, "count")?;
        let old = layout(oldtype)?;
        // SAFETY: the caller's arrays of `count` ints.
        let (bl, ds) = unsafe { (arr(blocklengths, n, "blocklengths")?, arr(displacements, n, "displacements")?) };
        let mut blocks = Vec::with_capacity(n);
        for (b, d) in bl.iter().zip(ds) {
            blocks.push((*d as isize * old.extent, count_arg(*b, "blocklength")?, Arc::clone(&old), oldtype));
        }
        let ints = [&[count][..], bl, ds].concat();
        give(build(&blocks)?, newtype, Recipe::new(abi::COMBINER_INDEXED, ints, vec![], &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_create_hindexed`.
    MPI_Type_create_hindexed / PMPI_Type_create_hindexed(count: c_int, blocklengths: *const c_int, displacements: *const MpiAint, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let n = count_arg(count, "count")?;
        let old = layout(oldtype)?;
        // SAFETY: the caller's arrays of `count` values.
        let (bl, ds) = unsafe { (arr(blocklengths, n, "blocklengths")?, arr(displacements, n, "displacements")?) };
        let mut blocks = Vec::with_capacity(n);
        for (b, d) in bl.iter().zip(ds) {
            blocks.push((*d as isize, count_arg(*b, "blocklength")?, Arc::clone(&old), oldtype));
        }
        let ints = [&[count][..], bl].concat();
        give(build(&blocks)?, newtype, Recipe::new(abi::COMBINER_HINDEXED, ints, ds.to_vec(), &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_create_indexed_block`.
    MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block(count: c_int, blocklength: c_int, displacements: *const c_int, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let n = count_arg(count, "count")?;
        let b = count_arg(blocklength, "blocklength")?;
        let old = layout(oldtype)?;
        // SAFETY: the caller's array of `count` ints.
        let ds = unsafe { arr(displacements, n, "displacements") }?;
        let blocks: Vec<_> = ds.iter().map(|d| (*d as isize * old.extent, b, Arc::clone(&old), oldtype)).collect();
        let ints = [&[count, blocklength][..], ds].concat();
        give(build(&blocks)?, newtype, Recipe::new(abi::COMBINER_INDEXED_BLOCK, ints, vec![], &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_create_struct`.
    MPI_Type_create_struct / PMPI_Type_create_struct(count: c_int, blocklengths: *const c_int, displacements: *const MpiAint, types: *const Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let n = count_arg(count, "count")?;
        // SAFETY: the caller's arrays of `count` values.
        let (bl, ds, ts) = unsafe {
            (arr(blocklengths, n, "blocklengths")?, arr(displacements, n, "displacements")?, arr(types, n, "types")?)
        };
        let mut blocks = Vec::with_capacity(n);
        for ((b, d), t) in bl.iter().zip(ds).zip(ts) {
            blocks.push((*d as isize, count_arg(*b, "blocklength")?, layout(*t)?, *t));
        }
        let ints = [&[count][..], bl].concat();
        give(struct_padded(build(&blocks)?), newtype, Recipe::new(abi::COMBINER_STRUCT, ints, ds.to_vec(), ts))
    }
}

/// A struct type's layout with the standard's epsilon: the extent rounded up to the largest
/// alignment inside, so that `count` elements of a C struct's type step by `sizeof` (as
/// MPICH).
pub(crate) fn struct_padded(mut l: Layout) -> Layout {
    if l.align > 1 && !l.marked_ub {
        let pad = l.extent.rem_euclid(l.align as isize);
        if pad != 0 {
            l.extent += l.align as isize - pad;
        }
    }
    l
}

mpi_fn! {
    /// `MPI_Type_create_resized`.
    MPI_Type_create_resized / PMPI_Type_create_resized(oldtype: Handle, lb: MpiAint, extent: MpiAint, newtype: *mut Handle) on abi::COMM_WORLD => {
        let mut l = (*layout(oldtype)?).clone();
        l.lb = lb as isize;
        l.extent = extent as isize;
        (l.marked_lb, l.marked_ub) = (true, true);
        give(l, newtype, Recipe::new(abi::COMBINER_RESIZED, vec![], vec![lb, extent], &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_dup`.
    MPI_Type_dup / PMPI_Type_dup(oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let l = (*layout(oldtype)?).clone();
        give(l, newtype, Recipe::new(abi::COMBINER_DUP, vec![], vec![], &[oldtype]))?;
        // SAFETY: `give` wrote the new handle.
        let h = unsafe { *newtype };
        if let Err(e) = crate::attr::copy_all(crate::attr::Kind::Type, oldtype, h) {
            remove(h);
            // SAFETY: the caller's handle, written by `give` above.
            unsafe { *newtype = abi::DATATYPE_NULL };
            return Err(e);
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Type_commit`: every datatype is ready when built.
    MPI_Type_commit / PMPI_Type_commit(datatype: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's handle.
        let h = unsafe { datatype.as_ref() }.ok_or_else(|| MpiError::new(err::TYPE, "datatype is NULL"))?;
        layout(*h)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Type_free`: derived datatypes only; the handle becomes `MPI_DATATYPE_NULL`.
    MPI_Type_free / PMPI_Type_free(datatype: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's handle.
        let h = unsafe { datatype.as_mut() }.ok_or_else(|| MpiError::new(err::TYPE, "datatype is NULL"))?;
        if !is_derived(*h) {
            return Err(MpiError::new(err::TYPE, format!("{:#x} is a predefined datatype", *h)));
        }
        if crate::fortran::f90_base(*h).is_some() {
            // A type of MPI_Type_create_f90_* stays (the next call for the same arguments
            // gives it again); freeing it only clears the program's handle, as in MPICH.
            *h = abi::DATATYPE_NULL;
            return Ok(());
        }
        derived(*h)?;
        crate::attr::delete_all(crate::attr::Kind::Type, *h)?;
        crate::types2::forget(*h);
        remove(*h).ok_or_else(|| MpiError::new(err::TYPE, format!("{:#x} is not a datatype", *h)))?;
        *h = abi::DATATYPE_NULL;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Type_size`.
    MPI_Type_size / PMPI_Type_size(datatype: Handle, size: *mut c_int) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        let s = c_int::try_from(l.size).unwrap_or(abi::UNDEFINED);
        // SAFETY: the caller's int.
        unsafe { put(size, s, "size") }
    }
}

mpi_fn! {
    /// `MPI_Type_size_x`.
    MPI_Type_size_x / PMPI_Type_size_x(datatype: Handle, size: *mut MpiCount) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        // SAFETY: the caller's MPI_Count.
        unsafe { put(size, l.size as MpiCount, "size") }
    }
}

mpi_fn! {
    /// `MPI_Type_get_extent`.
    MPI_Type_get_extent / PMPI_Type_get_extent(datatype: Handle, lb: *mut MpiAint, extent: *mut MpiAint) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        // SAFETY: the caller's MPI_Aints.
        unsafe {
            put(lb, l.lb as MpiAint, "lb")?;
            put(extent, l.extent as MpiAint, "extent")
        }
    }
}

mpi_fn! {
    /// `MPI_Type_get_true_extent`.
    MPI_Type_get_true_extent / PMPI_Type_get_true_extent(datatype: Handle, true_lb: *mut MpiAint, true_extent: *mut MpiAint) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        let (lo, hi) = l.true_bounds();
        // SAFETY: the caller's MPI_Aints.
        unsafe {
            put(true_lb, lo as MpiAint, "true_lb")?;
            put(true_extent, (hi - lo) as MpiAint, "true_extent")
        }
    }
}

mpi_fn! {
    /// `MPI_Pack_size`: an upper bound (here exact) of the packed bytes.
    MPI_Pack_size / PMPI_Pack_size(incount: c_int, datatype: Handle, comm: Handle, size: *mut c_int) on comm => {
        let n = count_arg(incount, "incount")?;
        let l = layout(datatype)?;
        let s = l.size.checked_mul(n).and_then(|s| c_int::try_from(s).ok()).ok_or_else(overflow)?;
        // SAFETY: the caller's int.
        unsafe { put(size, s, "size") }
    }
}

mpi_fn! {
    /// `MPI_Pack`.
    MPI_Pack / PMPI_Pack(inbuf: *const c_void, incount: c_int, datatype: Handle, outbuf: *mut c_void, outsize: c_int, position: *mut c_int, comm: Handle) on comm => {
        let n = count_arg(incount, "incount")?;
        let l = layout(datatype)?;
        // SAFETY: the caller's int.
        let pos = unsafe { position.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "position is NULL"))?;
        let at = count_arg(*pos, "position")?;
        let need = l.size.checked_mul(n).ok_or_else(overflow)?;
        let room = count_arg(outsize, "outsize")?;
        if at.checked_add(need).is_none_or(|end| end > room) {
            return Err(MpiError::new(err::TRUNCATE, format!("{need} bytes do not fit at {at} in {room}")));
        }
        if need == 0 {
            return Ok(());
        }
        // A null input is MPI_BOTTOM: the type's displacements are absolute addresses (a
        // contiguous type from 0 cannot be).
        if outbuf.is_null() || inbuf.is_null() && l.contiguous() {
            return Err(MpiError::new(err::BUFFER, "a buffer is NULL"));
        }
        let mut v = Vec::with_capacity(need);
        // SAFETY: the caller's input of `incount` elements; the output has `outsize` bytes, of
        // which `at + need` are checked to fit.
        unsafe {
            l.pack(inbuf.cast(), n, &mut v);
            std::ptr::copy_nonoverlapping(v.as_ptr(), outbuf.cast::<u8>().add(at), need);
        }
        *pos = (at + need) as c_int;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Unpack`.
    MPI_Unpack / PMPI_Unpack(inbuf: *const c_void, insize: c_int, position: *mut c_int, outbuf: *mut c_void, outcount: c_int, datatype: Handle, comm: Handle) on comm => {
        let n = count_arg(outcount, "outcount")?;
        let l = layout(datatype)?;
        // SAFETY: the caller's int.
        let pos = unsafe { position.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "position is NULL"))?;
        let at = count_arg(*pos, "position")?;
        let size = count_arg(insize, "insize")?;
        let need = l.size.checked_mul(n).ok_or_else(overflow)?;
        if at.checked_add(need).is_none_or(|end| end > size) {
            return Err(MpiError::new(err::TRUNCATE, format!("{need} bytes wanted at {at} of {size}")));
        }
        if need == 0 {
            return Ok(());
        }
        // A null output is MPI_BOTTOM, as for MPI_Pack's input.
        if inbuf.is_null() || outbuf.is_null() && l.contiguous() {
            return Err(MpiError::new(err::BUFFER, "a buffer is NULL"));
        }
        // SAFETY: the caller's input of `insize` bytes (`at + need` checked to fit) and output
        // of `outcount` elements.
        unsafe {
            let data = std::slice::from_raw_parts(inbuf.cast::<u8>().add(at), need);
            l.unpack(data, outbuf.cast(), n);
        }
        *pos = (at + need) as c_int;
        Ok(())
    }
}
