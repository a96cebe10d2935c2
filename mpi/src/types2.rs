//! Datatypes, continued: how a type was built (`MPI_Type_get_envelope`,
//! `MPI_Type_get_contents`), names (`MPI_Type_set_name`, `MPI_Type_get_name`), the
//! constructors `MPI_Type_create_subarray`, `MPI_Type_create_darray` and
//! `MPI_Type_create_hindexed_block`,
//! `MPI_Type_match_size`, the `MPI_Count` forms of the extent calls and of
//! `MPI_Get_elements`, and the MPI-1 calls old programs still use (`MPI_Address`,
//! `MPI_Type_extent`, `MPI_Type_lb`, `MPI_Type_ub`, `MPI_Type_hvector`, `MPI_Type_hindexed`,
//! `MPI_Type_struct`, `MPI_Errhandler_create`, `MPI_Errhandler_get`, `MPI_Errhandler_set`).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};

use crate::abi::{self, Handle, MpiAint, MpiCount, MpiStatus, dt, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::types::{Layout, arr, build, count_arg, is_derived, layout};

/// How a derived datatype was built: its combiner and the arguments of its constructor, as
/// `MPI_Type_get_contents` gives them back.
#[derive(Debug, Clone)]
pub struct Recipe {
    combiner: c_int,
    ints: Vec<c_int>,
    aints: Vec<MpiAint>,
    /// The large counts (`MPI_Count`) of a `_c` constructor (`MPI_Type_get_contents_c`).
    counts: Vec<MpiCount>,
    /// The datatypes given to the constructor: predefined ones by handle, derived ones also by
    /// what they were then (they may be freed meanwhile).
    types: Vec<(Handle, Option<Snapshot>)>,
}

/// A derived datatype as it was when a recipe named it: its layout and recipe.
type Snapshot = (Arc<Layout>, Option<Arc<Recipe>>);

impl Recipe {
    /// A recipe of `combiner` with these arguments.
    pub fn new(combiner: c_int, ints: Vec<c_int>, aints: Vec<MpiAint>, types: &[Handle]) -> Self {
        let types = types
            .iter()
            .map(|&t| {
                let inner = is_derived(t)
                    .then(|| crate::types::derived(t).ok())
                    .flatten()
                    .map(|l| (l, recipe_of(t)));
                (t, inner)
            })
            .collect();
        Recipe {
            combiner,
            ints,
            aints,
            counts: Vec::new(),
            types,
        }
    }

    /// This recipe with the large counts of a `_c` constructor.
    pub fn with_counts(mut self, counts: Vec<MpiCount>) -> Self {
        self.counts = counts;
        self
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn recipes() -> &'static Mutex<HashMap<Handle, Arc<Recipe>>> {
    static R: OnceLock<Mutex<HashMap<Handle, Arc<Recipe>>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

fn names() -> &'static Mutex<HashMap<Handle, String>> {
    static N: OnceLock<Mutex<HashMap<Handle, String>>> = OnceLock::new();
    N.get_or_init(|| Mutex::new(HashMap::new()))
}

fn recipe_of(h: Handle) -> Option<Arc<Recipe>> {
    lock(recipes()).get(&h).cloned()
}

/// Records how new datatype `h` was built.
pub fn record(h: Handle, r: Recipe) {
    lock(recipes()).insert(h, Arc::new(r));
}

/// Forgets the recipe and name of freed datatype `h`.
pub fn forget(h: Handle) {
    lock(recipes()).remove(&h);
    lock(names()).remove(&h);
}

/// Gives copy `to` the recipe of `from`, if it has one.
pub fn copy_recipe(from: Handle, to: Handle) {
    if let Some(r) = recipe_of(from) {
        lock(recipes()).insert(to, r);
    }
}

/// The recipe of derived type `h`; a type built without one (none here) reads as the
/// `MPI_COMBINER_HINDEXED` of its byte runs.
fn recipe_or_runs(h: Handle, l: &Layout) -> Arc<Recipe> {
    recipe_of(h).unwrap_or_else(|| {
        let n = l.runs.len() as c_int;
        let mut ints = vec![n];
        ints.extend(l.runs.iter().map(|r| r.1 as c_int));
        Arc::new(Recipe {
            combiner: abi::COMBINER_HINDEXED,
            ints,
            aints: l.runs.iter().map(|r| r.0 as MpiAint).collect(),
            counts: Vec::new(),
            types: vec![(dt::BYTE, None)],
        })
    })
}

/// The names of the predefined datatypes, as MPICH spells them.
fn predefined_name(t: Handle) -> Option<&'static str> {
    Some(match t {
        dt::CHAR => "MPI_CHAR",
        dt::SIGNED_CHAR => "MPI_SIGNED_CHAR",
        dt::UNSIGNED_CHAR => "MPI_UNSIGNED_CHAR",
        dt::BYTE => "MPI_BYTE",
        dt::WCHAR => "MPI_WCHAR",
        dt::SHORT => "MPI_SHORT",
        dt::UNSIGNED_SHORT => "MPI_UNSIGNED_SHORT",
        dt::INT => "MPI_INT",
        dt::UNSIGNED => "MPI_UNSIGNED",
        dt::LONG => "MPI_LONG",
        dt::UNSIGNED_LONG => "MPI_UNSIGNED_LONG",
        dt::FLOAT => "MPI_FLOAT",
        dt::DOUBLE => "MPI_DOUBLE",
        dt::LONG_DOUBLE => "MPI_LONG_DOUBLE",
        dt::LONG_LONG => "MPI_LONG_LONG_INT",
        dt::UNSIGNED_LONG_LONG => "MPI_UNSIGNED_LONG_LONG",
        dt::PACKED => "MPI_PACKED",
        dt::LB => "MPI_LB",
        dt::UB => "MPI_UB",
        dt::FLOAT_INT => "MPI_FLOAT_INT",
        dt::DOUBLE_INT => "MPI_DOUBLE_INT",
        dt::LONG_INT => "MPI_LONG_INT",
        dt::SHORT_INT => "MPI_SHORT_INT",
        dt::TWO_INT => "MPI_2INT",
        dt::LONG_DOUBLE_INT => "MPI_LONG_DOUBLE_INT",
        dt::COMPLEX => "MPI_COMPLEX",
        dt::DOUBLE_COMPLEX => "MPI_DOUBLE_COMPLEX",
        dt::LOGICAL => "MPI_LOGICAL",
        dt::REAL => "MPI_REAL",
        dt::DOUBLE_PRECISION => "MPI_DOUBLE_PRECISION",
        dt::INTEGER => "MPI_INTEGER",
        dt::TWO_INTEGER => "MPI_2INTEGER",
        dt::TWO_REAL => "MPI_2REAL",
        dt::TWO_DOUBLE_PRECISION => "MPI_2DOUBLE_PRECISION",
        dt::CHARACTER => "MPI_CHARACTER",
        dt::REAL4 => "MPI_REAL4",
        dt::REAL8 => "MPI_REAL8",
        dt::REAL16 => "MPI_REAL16",
        dt::COMPLEX8 => "MPI_COMPLEX8",
        dt::COMPLEX16 => "MPI_COMPLEX16",
        dt::COMPLEX32 => "MPI_COMPLEX32",
        dt::INTEGER1 => "MPI_INTEGER1",
        dt::INTEGER2 => "MPI_INTEGER2",
        dt::INTEGER4 => "MPI_INTEGER4",
        dt::INTEGER8 => "MPI_INTEGER8",
        dt::INT8_T => "MPI_INT8_T",
        dt::INT16_T => "MPI_INT16_T",
        dt::INT32_T => "MPI_INT32_T",
        dt::INT64_T => "MPI_INT64_T",
        dt::UINT8_T => "MPI_UINT8_T",
        dt::UINT16_T => "MPI_UINT16_T",
        dt::UINT32_T => "MPI_UINT32_T",
        dt::UINT64_T => "MPI_UINT64_T",
        dt::C_BOOL => "MPI_C_BOOL",
        // `mpi.h` defines MPI_C_COMPLEX as this type; MPICH names it so.
        dt::C_FLOAT_COMPLEX => "MPI_C_COMPLEX",
        dt::C_DOUBLE_COMPLEX => "MPI_C_DOUBLE_COMPLEX",
        dt::C_LONG_DOUBLE_COMPLEX => "MPI_C_LONG_DOUBLE_COMPLEX",
        dt::FLOAT16 => "MPIX_C_FLOAT16",
        dt::AINT => "MPI_AINT",
        dt::OFFSET => "MPI_OFFSET",
        dt::COUNT => "MPI_COUNT",
        dt::CXX_BOOL => "MPI_CXX_BOOL",
        dt::CXX_FLOAT_COMPLEX => "MPI_CXX_FLOAT_COMPLEX",
        dt::CXX_DOUBLE_COMPLEX => "MPI_CXX_DOUBLE_COMPLEX",
        dt::CXX_LONG_DOUBLE_COMPLEX => "MPI_CXX_LONG_DOUBLE_COMPLEX",
        _ => return None,
    })
}

mpi_fn! {
    /// `MPI_Type_get_envelope`: `MPI_COMBINER_NAMED` for a predefined datatype.
    MPI_Type_get_envelope / PMPI_Type_get_envelope(datatype: Handle, num_integers: *mut c_int, num_addresses: *mut c_int, num_datatypes: *mut c_int, combiner: *mut c_int) on abi::COMM_WORLD => {
        let (ni, na, nc, nt, c) = envelope(datatype)?;
        if nc > 0 {
            return Err(large_counts(datatype, "MPI_Type_get_envelope_c"));
        }
        // SAFETY: the caller's ints.
        unsafe {
            put(num_integers, ni as c_int, "num_integers")?;
            put(num_addresses, na as c_int, "num_addresses")?;
            put(num_datatypes, nt as c_int, "num_datatypes")?;
            put(combiner, c, "combiner")
        }
    }
}

/// The numbers of integers, addresses, large counts and datatypes of `datatype`'s
/// constructor, and its combiner (`MPI_COMBINER_NAMED` for a predefined datatype).
pub(crate) fn envelope(datatype: Handle) -> Result<(usize, usize, usize, usize, c_int), MpiError> {
    let l = layout(datatype)?;
    Ok(if is_derived(datatype) {
        let r = recipe_or_runs(datatype, &l);
        (
            r.ints.len(),
            r.aints.len(),
            r.counts.len(),
            r.types.len(),
            r.combiner,
        )
    } else {
        (0, 0, 0, 0, abi::COMBINER_NAMED)
    })
}

/// The error of an `int` query on a datatype built with large counts.
fn large_counts(datatype: Handle, use_c: &str) -> MpiError {
    MpiError::new(
        err::TYPE,
        format!(
            "datatype {datatype:#x} was built with large counts (a _c constructor): {use_c} gives its arguments"
        ),
    )
}

/// A handle for datatype argument `t` of a recipe: a predefined type as it is, a derived one
/// as a new handle (the caller frees it) of what it was when the recipe was made.
fn type_out(t: &(Handle, Option<Snapshot>)) -> Handle {
    match &t.1 {
        None => t.0,
        Some((l, r)) => {
            let h = crate::types::register((**l).clone());
            if let Some(r) = r {
                lock(recipes()).insert(h, Arc::clone(r));
            }
            h
        }
    }
}

mpi_fn! {
    /// `MPI_Type_get_contents`: the constructor's arguments; derived datatypes among them come
    /// back as new handles, which the caller frees.
    MPI_Type_get_contents / PMPI_Type_get_contents(datatype: Handle, max_integers: c_int, max_addresses: c_int, max_datatypes: c_int, array_of_integers: *mut c_int, array_of_addresses: *mut MpiAint, array_of_datatypes: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's arrays, as the call's contract says.
        unsafe { contents(datatype, [max_integers as MpiCount, max_addresses as MpiCount, -1, max_datatypes as MpiCount], array_of_integers, array_of_addresses, std::ptr::null_mut(), array_of_datatypes) }
    }
}

/// Writes the constructor arguments of `datatype` into the caller's arrays; `max` holds their
/// capacities (integers, addresses, large counts, datatypes), a large-count capacity of -1
/// meaning the `int` form (which refuses a datatype built with large counts).
///
/// # Safety
/// Each non-NULL array holds at least its capacity of elements.
pub(crate) unsafe fn contents(
    datatype: Handle,
    max: [MpiCount; 4],
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MpiAint,
    array_of_large_counts: *mut MpiCount,
    array_of_datatypes: *mut Handle,
) -> Result<(), MpiError> {
    let l = layout(datatype)?;
    if !is_derived(datatype) {
        return Err(MpiError::new(
            err::TYPE,
            format!("{datatype:#x} is a predefined datatype: it has no contents"),
        ));
    }
    let r = recipe_or_runs(datatype, &l);
    if max[2] < 0 && !r.counts.is_empty() {
        return Err(large_counts(datatype, "MPI_Type_get_contents_c"));
    }
    let short = |what: &str, max: MpiCount, need: usize| {
        if (max.max(0) as usize) < need {
            Err(MpiError::new(
                err::ARG,
                format!("{what} is {max}; the datatype has {need}"),
            ))
        } else {
            Ok(())
        }
    };
    short("max_integers", max[0], r.ints.len())?;
    short("max_addresses", max[1], r.aints.len())?;
    short("max_large_counts", max[2], r.counts.len())?;
    short("max_datatypes", max[3], r.types.len())?;
    let null = |p: bool, n: usize, what: &str| {
        if p && n > 0 {
            Err(MpiError::new(err::ARG, format!("{what} is NULL")))
        } else {
            Ok(())
        }
    };
    null(
        array_of_integers.is_null(),
        r.ints.len(),
        "array_of_integers",
    )?;
    null(
        array_of_addresses.is_null(),
        r.aints.len(),
        "array_of_addresses",
    )?;
    null(
        array_of_large_counts.is_null(),
        r.counts.len(),
        "array_of_large_counts",
    )?;
    null(
        array_of_datatypes.is_null(),
        r.types.len(),
        "array_of_datatypes",
    )?;
    // SAFETY: the caller's arrays, at least as long as written (checked above).
    unsafe {
        for (i, v) in r.ints.iter().enumerate() {
            *array_of_integers.add(i) = *v;
        }
        for (i, v) in r.aints.iter().enumerate() {
            *array_of_addresses.add(i) = *v;
        }
        for (i, v) in r.counts.iter().enumerate() {
            *array_of_large_counts.add(i) = *v;
        }
        for (i, t) in r.types.iter().enumerate() {
            *array_of_datatypes.add(i) = type_out(t);
        }
    }
    Ok(())
}

/// `MPI_MAX_OBJECT_NAME`.
const MAX_OBJECT_NAME: usize = 128;

mpi_fn! {
    /// `MPI_Type_set_name`.
    MPI_Type_set_name / PMPI_Type_set_name(datatype: Handle, type_name: *const c_char) on abi::COMM_WORLD => {
        layout(datatype)?;
        // SAFETY: the caller's string.
        let n = unsafe { crate::misc::string(type_name, "type_name") }?;
        let n: String = n.chars().take(MAX_OBJECT_NAME - 1).collect();
        lock(names()).insert(datatype, n);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Type_get_name`: predefined datatypes carry their MPI names, derived ones none until
    /// named.
    MPI_Type_get_name / PMPI_Type_get_name(datatype: Handle, type_name: *mut c_char, resultlen: *mut c_int) on abi::COMM_WORLD => {
        layout(datatype)?;
        let n = lock(names()).get(&datatype).cloned();
        let n = n.unwrap_or_else(|| predefined_name(datatype).unwrap_or("").to_owned());
        if type_name.is_null() {
            return Err(MpiError::new(err::ARG, "type_name is NULL"));
        }
        // SAFETY: the caller's buffer of MPI_MAX_OBJECT_NAME bytes and int.
        unsafe {
            crate::misc::put_c(&n, type_name, MAX_OBJECT_NAME);
            put(resultlen, n.len().min(MAX_OBJECT_NAME - 1) as c_int, "resultlen")
        }
    }
}

/// The layout of a subarray (C order: the last dimension varies fastest).
fn subarray(
    sizes: &[c_int],
    subsizes: &[c_int],
    starts: &[c_int],
    order: c_int,
    oldtype: Handle,
) -> Result<Layout, MpiError> {
    let bad = |what: String| MpiError::new(err::ARG, what);
    let (mut sz, mut sub, mut st) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..sizes.len() {
        let (n, s, at) = (sizes[i], subsizes[i], starts[i]);
        if n < 1 {
            return Err(bad(format!("array_of_sizes[{i}] = {n} is not positive")));
        }
        if s < 0 || s > n {
            return Err(bad(format!(
                "array_of_subsizes[{i}] = {s} is outside 0..={n}"
            )));
        }
        if at < 0 || at > n - s {
            return Err(bad(format!(
                "array_of_starts[{i}] = {at} is outside 0..={} (size {n}, subsize {s})",
                n - s
            )));
        }
        sz.push(n as usize);
        sub.push(s as usize);
        st.push(at as usize);
    }
    match order {
        abi::ORDER_C => {}
        abi::ORDER_FORTRAN => {
            sz.reverse();
            sub.reverse();
            st.reverse();
        }
        o => {
            return Err(bad(format!(
                "order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"
            )));
        }
    }
    let old = layout(oldtype)?;
    let d = sz.len();
    let overflow = || MpiError::new(err::COUNT, "the subarray's extent overflows");
    // Strides in bytes, the last dimension's the old type's extent.
    let mut stride = vec![old.extent; d];
    for i in (0..d - 1).rev() {
        stride[i] = stride[i + 1]
            .checked_mul(sz[i + 1] as isize)
            .ok_or_else(overflow)?;
    }
    let total = stride[0].checked_mul(sz[0] as isize).ok_or_else(overflow)?;
    let mut blocks = Vec::new();
    if sub.iter().all(|&s| s > 0) {
        let mut idx = vec![0usize; d - 1];
        'outer: loop {
            let disp: isize = (0..d)
                .map(|i| (st[i] + idx.get(i).copied().unwrap_or(0)) as isize * stride[i])
                .sum();
            blocks.push((disp, sub[d - 1], Arc::clone(&old), oldtype));
            // The next index of the outer dimensions, the last of them fastest.
            let mut k = d - 1;
            loop {
                if k == 0 {
                    break 'outer;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < sub[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
    }
    let mut l = build(&blocks)?;
    l.lb = 0;
    l.extent = total;
    (l.marked_lb, l.marked_ub) = (true, true);
    Ok(l)
}

mpi_fn! {
    /// `MPI_Type_create_subarray` (`MPI_ORDER_C` and `MPI_ORDER_FORTRAN`).
    MPI_Type_create_subarray / PMPI_Type_create_subarray(ndims: c_int, array_of_sizes: *const c_int, array_of_subsizes: *const c_int, array_of_starts: *const c_int, order: c_int, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        if ndims < 1 {
            return Err(MpiError::new(err::ARG, format!("ndims {ndims} is not positive")));
        }
        let n = ndims as usize;
        layout(oldtype)?;
        // SAFETY: the caller's arrays of `ndims` ints.
        let (sizes, subs, starts) = unsafe {
            (arr(array_of_sizes, n, "array_of_sizes")?, arr(array_of_subsizes, n, "array_of_subsizes")?, arr(array_of_starts, n, "array_of_starts")?)
        };
        let l = subarray(sizes, subs, starts, order, oldtype)?;
        let ints = [&[ndims][..], sizes, subs, starts, &[order][..]].concat();
        crate::types::give(l, newtype, Recipe::new(abi::COMBINER_SUBARRAY, ints, vec![], &[oldtype]))
    }
}

/// The global indices of one dimension of `g` elements that process coordinate `c` of `p`
/// owns under distribution `distrib` with argument `darg`, in increasing order.
fn owned(
    i: usize,
    g: usize,
    distrib: c_int,
    darg: c_int,
    p: usize,
    c: usize,
) -> Result<Vec<usize>, MpiError> {
    let bad = |what: String| MpiError::new(err::ARG, what);
    let dflt = darg == abi::DISTRIBUTE_DFLT_DARG;
    if !dflt && darg < 1 {
        return Err(bad(format!(
            "array_of_dargs[{i}] = {darg} is neither positive nor MPI_DISTRIBUTE_DFLT_DARG"
        )));
    }
    match distrib {
        abi::DISTRIBUTE_NONE => {
            if p != 1 {
                return Err(bad(format!(
                    "dimension {i} is MPI_DISTRIBUTE_NONE over {p} processes (must be 1)"
                )));
            }
            Ok((0..g).collect())
        }
        abi::DISTRIBUTE_BLOCK => {
            let blk = if dflt { g.div_ceil(p) } else { darg as usize };
            if blk * p < g {
                return Err(bad(format!(
                    "dimension {i}: blocks of {blk} over {p} processes do not cover {g} elements"
                )));
            }
            let lo = (c * blk).min(g);
            Ok((lo..((c + 1) * blk).min(g)).collect())
        }
        abi::DISTRIBUTE_CYCLIC => {
            let blk = if dflt { 1 } else { darg as usize };
            let mut v = Vec::new();
            let mut s = c * blk;
            while s < g {
                v.extend(s..(s + blk).min(g));
                s += p * blk;
            }
            Ok(v)
        }
        d => Err(bad(format!(
            "array_of_distribs[{i}] = {d} is not an MPI_DISTRIBUTE_ value"
        ))),
    }
}

mpi_fn! {
    /// `MPI_Type_create_darray`: the part of a distributed array that process `rank` of a
    /// `size`-process grid (ranks in row-major order) owns; block, cyclic and undistributed
    /// dimensions, C and Fortran order.
    MPI_Type_create_darray / PMPI_Type_create_darray(size: c_int, rank: c_int, ndims: c_int, array_of_gsizes: *const c_int, array_of_distribs: *const c_int, array_of_dargs: *const c_int, array_of_psizes: *const c_int, order: c_int, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let bad = |what: String| MpiError::new(err::ARG, what);
        if size < 1 || rank < 0 || rank >= size {
            return Err(bad(format!("rank {rank} is not in a grid of {size} processes")));
        }
        if ndims < 1 {
            return Err(bad(format!("ndims {ndims} is not positive")));
        }
        let d = ndims as usize;
        let old = layout(oldtype)?;
        // SAFETY: the caller's arrays of `ndims` ints.
        let (gs, ds, da, ps) = unsafe {
            (arr(array_of_gsizes, d, "array_of_gsizes")?, arr(array_of_distribs, d, "array_of_distribs")?,
             arr(array_of_dargs, d, "array_of_dargs")?, arr(array_of_psizes, d, "array_of_psizes")?)
        };
        if gs.iter().any(|&g| g < 1) || ps.iter().any(|&p| p < 1) {
            return Err(bad("every global size and process count must be positive".into()));
        }
        let procs = ps.iter().try_fold(1usize, |a, &p| a.checked_mul(p as usize));
        if procs != Some(size as usize) {
            return Err(bad(format!("the process grid {ps:?} does not have {size} processes")));
        }
        if order != abi::ORDER_C && order != abi::ORDER_FORTRAN {
            return Err(bad(format!("order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN")));
        }
        // Process coordinates: row-major in the grid whatever the array order.
        let mut coords = vec![0usize; d];
        let mut r = rank as usize;
        for i in (0..d).rev() {
            coords[i] = r % ps[i] as usize;
            r /= ps[i] as usize;
        }
        let mut own = Vec::with_capacity(d);
        for i in 0..d {
            own.push(owned(i, gs[i] as usize, ds[i], da[i], ps[i] as usize, coords[i])?);
        }
        let mut sz: Vec<usize> = gs.iter().map(|&g| g as usize).collect();
        if order == abi::ORDER_FORTRAN {
            sz.reverse();
            own.reverse();
        }
        let overflow = || MpiError::new(err::COUNT, "the darray's extent overflows");
        let mut stride = vec![old.extent; d];
        for i in (0..d - 1).rev() {
            stride[i] = stride[i + 1].checked_mul(sz[i + 1] as isize).ok_or_else(overflow)?;
        }
        let total = stride[0].checked_mul(sz[0] as isize).ok_or_else(overflow)?;
        // The last dimension's owned indices as runs of consecutive ones (one run for a
        // block distribution): one block per run and row, not one per element, so the
        // type of a large array costs its rows, not its elements.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &j in &own[d - 1] {
            match runs.last_mut() {
                Some((start, len)) if *start + *len == j => *len += 1,
                _ => runs.push((j, 1)),
            }
        }
        let mut blocks = Vec::new();
        if own.iter().all(|o| !o.is_empty()) {
            let mut idx = vec![0usize; d - 1];
            'outer: loop {
                let base: isize = (0..d - 1).map(|i| own[i][idx[i]] as isize * stride[i]).sum();
                for &(j, len) in &runs {
                    blocks.push((base + j as isize * stride[d - 1], len, Arc::clone(&old), oldtype));
                }
                let mut k = d - 1;
                loop {
                    if k == 0 {
                        break 'outer;
                    }
                    k -= 1;
                    idx[k] += 1;
                    if idx[k] < own[k].len() {
                        break;
                    }
                    idx[k] = 0;
                }
            }
        }
        let mut l = build(&blocks)?;
        l.lb = 0;
        l.extent = total;
        (l.marked_lb, l.marked_ub) = (true, true);
        let ints = [&[size, rank, ndims][..], gs, ds, da, ps, &[order][..]].concat();
        crate::types::give(l, newtype, Recipe::new(abi::COMBINER_DARRAY, ints, vec![], &[oldtype]))
    }
}

mpi_fn! {
    /// `MPI_Type_create_hindexed_block`.
    MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block(count: c_int, blocklength: c_int, array_of_displacements: *const MpiAint, oldtype: Handle, newtype: *mut Handle) on abi::COMM_WORLD => {
        let n = count_arg(count, "count")?;
        let b = count_arg(blocklength, "blocklength")?;
        let old = layout(oldtype)?;
        // SAFETY: the caller's array of `count` displacements.
        let ds = unsafe { arr(array_of_displacements, n, "array_of_displacements") }?;
        let blocks: Vec<_> = ds.iter().map(|d| (*d as isize, b, Arc::clone(&old), oldtype)).collect();
        let r = Recipe::new(abi::COMBINER_HINDEXED_BLOCK, vec![count, blocklength], ds.to_vec(), &[oldtype]);
        crate::types::give(build(&blocks)?, newtype, r)
    }
}

mpi_fn! {
    /// `MPI_Type_match_size`: the Fortran sized types (`MPI_INTEGER1` .. `MPI_INTEGER8`,
    /// `MPI_REAL4` .. `MPI_REAL16`, `MPI_COMPLEX8` .. `MPI_COMPLEX32`), as MPICH gives them.
    MPI_Type_match_size / PMPI_Type_match_size(typeclass: c_int, size: c_int, datatype: *mut Handle) on abi::COMM_WORLD => {
        let candidates: &[Handle] = match typeclass {
            abi::TYPECLASS_INTEGER => &[dt::INTEGER1, dt::INTEGER2, dt::INTEGER4, dt::INTEGER8],
            abi::TYPECLASS_REAL => &[dt::REAL4, dt::REAL8, dt::REAL16],
            abi::TYPECLASS_COMPLEX => &[dt::COMPLEX8, dt::COMPLEX16, dt::COMPLEX32],
            c => return Err(MpiError::new(err::ARG, format!("typeclass {c} is not MPI_TYPECLASS_INTEGER, _REAL or _COMPLEX"))),
        };
        let t = candidates
            .iter()
            .copied()
            .find(|&t| crate::datatype::size_of(t).ok() == usize::try_from(size).ok())
            .ok_or_else(|| MpiError::new(err::ARG, format!("no datatype of typeclass {typeclass} has {size} bytes")))?;
        // SAFETY: the caller's handle.
        unsafe { put(datatype, t, "datatype") }
    }
}

mpi_fn! {
    /// `MPI_Type_get_extent_x`.
    MPI_Type_get_extent_x / PMPI_Type_get_extent_x(datatype: Handle, lb: *mut MpiCount, extent: *mut MpiCount) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        // SAFETY: the caller's MPI_Counts.
        unsafe {
            put(lb, l.lb as MpiCount, "lb")?;
            put(extent, l.extent as MpiCount, "extent")
        }
    }
}

mpi_fn! {
    /// `MPI_Type_get_true_extent_x`.
    MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(datatype: Handle, true_lb: *mut MpiCount, true_extent: *mut MpiCount) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        let lo = l.runs.iter().map(|r| r.0).min().unwrap_or(0);
        let hi = l.runs.iter().map(|r| r.0 + r.1 as isize).max().unwrap_or(0);
        // SAFETY: the caller's MPI_Counts.
        unsafe {
            put(true_lb, lo as MpiCount, "true_lb")?;
            put(true_extent, (hi - lo) as MpiCount, "true_extent")
        }
    }
}

mpi_raw! {
    /// `MPI_Get_elements_x`: `MPI_Get_elements` into an `MPI_Count`, in 64 bits (a status
    /// holds a byte count of 63 bits), as `MPI_Get_elements_c`.
    MPI_Get_elements_x / PMPI_Get_elements_x(status: *const MpiStatus, datatype: Handle, count: *mut MpiCount) -> c_int => {
        // SAFETY: the caller's status and MPI_Count, passed on as they came.
        unsafe { crate::large::PMPI_Get_elements_c(status, datatype, count) }
    }
}

mpi_raw! {
    /// `MPI_Address` (MPI-1): `MPI_Get_address`.
    MPI_Address / PMPI_Address(location: *const c_void, address: *mut MpiAint) -> c_int => {
        // SAFETY: the caller's MPI_Aint.
        unsafe { crate::misc::PMPI_Get_address(location, address) }
    }
}

mpi_fn! {
    /// `MPI_Type_extent` (MPI-1): the extent of `MPI_Type_get_extent`.
    MPI_Type_extent / PMPI_Type_extent(datatype: Handle, extent: *mut MpiAint) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        // SAFETY: the caller's MPI_Aint.
        unsafe { put(extent, l.extent as MpiAint, "extent") }
    }
}

mpi_fn! {
    /// `MPI_Type_lb` (MPI-1): the lower bound.
    MPI_Type_lb / PMPI_Type_lb(datatype: Handle, displacement: *mut MpiAint) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        // SAFETY: the caller's MPI_Aint.
        unsafe { put(displacement, l.lb as MpiAint, "displacement") }
    }
}

mpi_fn! {
    /// `MPI_Type_ub` (MPI-1): the upper bound, lower bound plus extent.
    MPI_Type_ub / PMPI_Type_ub(datatype: Handle, displacement: *mut MpiAint) on abi::COMM_WORLD => {
        let l = layout(datatype)?;
        // SAFETY: the caller's MPI_Aint.
        unsafe { put(displacement, (l.lb + l.extent) as MpiAint, "displacement") }
    }
}

mpi_raw! {
    /// `MPI_Type_hvector` (MPI-1): `MPI_Type_create_hvector`.
    MPI_Type_hvector / PMPI_Type_hvector(count: c_int, blocklength: c_int, stride: MpiAint, oldtype: Handle, newtype: *mut Handle) -> c_int => {
        // SAFETY: the caller's handle.
        unsafe { crate::types::PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype) }
    }
}

mpi_raw! {
    /// `MPI_Type_hindexed` (MPI-1): `MPI_Type_create_hindexed`.
    MPI_Type_hindexed / PMPI_Type_hindexed(count: c_int, blocklengths: *const c_int, displacements: *const MpiAint, oldtype: Handle, newtype: *mut Handle) -> c_int => {
        // SAFETY: the caller's arrays and handle.
        unsafe { crate::types::PMPI_Type_create_hindexed(count, blocklengths, displacements, oldtype, newtype) }
    }
}

mpi_raw! {
    /// `MPI_Type_struct` (MPI-1): `MPI_Type_create_struct`.
    MPI_Type_struct / PMPI_Type_struct(count: c_int, blocklengths: *const c_int, displacements: *const MpiAint, types: *const Handle, newtype: *mut Handle) -> c_int => {
        // SAFETY: the caller's arrays and handle.
        unsafe { crate::types::PMPI_Type_create_struct(count, blocklengths, displacements, types, newtype) }
    }
}

mpi_raw! {
    /// `MPI_Errhandler_create` (MPI-1): `MPI_Comm_create_errhandler`.
    MPI_Errhandler_create / PMPI_Errhandler_create(function: Option<crate::misc::CommErrFn>, errhandler: *mut Handle) -> c_int => {
        // SAFETY: the caller's function and handle.
        unsafe { crate::misc::PMPI_Comm_create_errhandler(function, errhandler) }
    }
}

mpi_raw! {
    /// `MPI_Errhandler_get` (MPI-1): `MPI_Comm_get_errhandler`.
    MPI_Errhandler_get / PMPI_Errhandler_get(comm: Handle, errhandler: *mut Handle) -> c_int => {
        // SAFETY: the caller's handle.
        unsafe { crate::comm::PMPI_Comm_get_errhandler(comm, errhandler) }
    }
}

mpi_raw! {
    /// `MPI_Errhandler_set` (MPI-1): `MPI_Comm_set_errhandler`.
    MPI_Errhandler_set / PMPI_Errhandler_set(comm: Handle, errhandler: Handle) -> c_int => {
        // SAFETY: handles only.
        unsafe { crate::comm::PMPI_Comm_set_errhandler(comm, errhandler) }
    }
}
