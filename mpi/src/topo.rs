//! Process topologies: Cartesian (`MPI_Dims_create`, `MPI_Cart_create`, `MPI_Cart_get`,
//! `MPI_Cartdim_get`, `MPI_Cart_rank`, `MPI_Cart_coords`, `MPI_Cart_shift`, `MPI_Cart_sub`,
//! `MPI_Cart_map`), distributed graphs given by their adjacency
//! (`MPI_Dist_graph_create_adjacent`, `MPI_Dist_graph_neighbors_count`,
//! `MPI_Dist_graph_neighbors`), `MPI_Topo_test`, and the neighbourhood collectives
//! `MPI_Neighbor_allgather`, `MPI_Neighbor_alltoall`, `MPI_Neighbor_allgatherv`,
//! `MPI_Neighbor_alltoallv`, `MPI_Neighbor_alltoallw` (and their nonblocking forms), on
//! Cartesian, graph (MPI-1 `MPI_Graph_create` and its queries)
//! and distributed graph topologies.
//!
//! A topology communicator is the agent's split of the old one (`reorder` is accepted and no
//! rank moves). Its topology keeps a second communicator of the same members (a `dup`), whose
//! point-to-point context carries the neighbourhood collectives, so they never meet the
//! program's messages. The k-th message a rank sends to a neighbour goes with tag k and is
//! received into the block of the k-th appearance of that neighbour in the receiver's list:
//! the in-order matching MPICH gives when a neighbour appears twice (a periodic dimension of 1
//! or 2 ranks).

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use viaduct_agent::comm::Comm;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, wait_all};

use crate::abi::{self, Handle, MpiAint, err};
use crate::comm::put;
use crate::datatype::{bytes, input, output};
use crate::error::MpiError;
use crate::state::{CommEntry, rt};
use crate::vcoll::{Finish, Started, all_of};

/// `MPI_GRAPH`, `MPI_CART`, `MPI_DIST_GRAPH` (`enum MPIR_Topo_type`).
const GRAPH: c_int = 1;
const CART: c_int = 2;
const DIST_GRAPH: c_int = 3;

/// A communicator's topology.
#[derive(Clone)]
enum Shape {
    /// Cartesian: the extent and periodicity of each dimension (row-major rank order).
    Cart {
        dims: Vec<c_int>,
        periods: Vec<bool>,
    },
    /// Graph (MPI-1): `index[i]` is the number of edges of nodes 0..=i, `edges` their ends.
    Graph {
        index: Vec<c_int>,
        edges: Vec<c_int>,
    },
    /// Distributed graph: in- and out-neighbours with their weights.
    DistGraph {
        sources: Vec<c_int>,
        sweights: Vec<c_int>,
        dests: Vec<c_int>,
        dweights: Vec<c_int>,
        weighted: bool,
    },
}

struct Topo {
    shape: Shape,
    /// Same members as the communicator; carries the neighbourhood collectives.
    shadow: Comm,
}

fn table() -> MutexGuard<'static, HashMap<Handle, Arc<Topo>>> {
    static T: OnceLock<Mutex<HashMap<Handle, Arc<Topo>>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn topo_of(h: Handle) -> Option<Arc<Topo>> {
    table().get(&h).cloned()
}

/// Gives communicator `new` (a dup of `old`, collective) the topology of `old`, with a shadow
/// of its own.
pub fn copy(old: Handle, new: Handle, newcomm: &Comm) -> Result<(), MpiError> {
    let Some(t) = topo_of(old) else {
        return Ok(());
    };
    let shape = t.shape.clone();
    // The new shadow on contexts the old one reserved (no messages, so `MPI_Comm_idup`
    // stays nonblocking), or agreed when it has none left.
    let shadow = match t.shadow.idup() {
        Some(s) => s,
        None => newcomm.dup()?,
    };
    table().insert(new, Arc::new(Topo { shape, shadow }));
    Ok(())
}

/// Forgets the topology of a freed communicator.
pub fn forget(h: Handle) {
    table().remove(&h);
}

/// The Cartesian topology of `comm` (`MPI_ERR_TOPOLOGY` when it has none).
fn cart(comm: Handle) -> Result<(Arc<CommEntry>, Arc<Topo>), MpiError> {
    let c = rt()?.comm(comm)?;
    match topo_of(comm) {
        Some(t) if matches!(t.shape, Shape::Cart { .. }) => Ok((c, t)),
        _ => Err(MpiError::new(
            err::TOPOLOGY,
            format!("communicator {comm:#x} has no Cartesian topology"),
        )),
    }
}

fn cart_shape(t: &Topo) -> (&[c_int], &[bool]) {
    match &t.shape {
        Shape::Cart { dims, periods } => (dims, periods),
        _ => (&[], &[]),
    }
}

/// The caller's array of `n` ints.
///
/// # Safety
///
/// `p` points to `n` readable ints.
unsafe fn ints<'a>(p: *const c_int, n: usize, what: &str) -> Result<&'a [c_int], MpiError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiError::new(err::ARG, format!("{what} is NULL")));
    }
    // SAFETY: the caller guarantees `n` ints at `p`.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Writes `v` into the caller's array (when `v` is not empty).
///
/// # Safety
///
/// `p` points to at least `v.len()` writable ints.
unsafe fn write_ints(p: *mut c_int, v: &[c_int], what: &str) -> Result<(), MpiError> {
    if v.is_empty() {
        return Ok(());
    }
    if p.is_null() {
        return Err(MpiError::new(err::ARG, format!("{what} is NULL")));
    }
    // SAFETY: the caller guarantees room for `v.len()` ints.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    Ok(())
}

fn ndims_of(ndims: c_int) -> Result<usize, MpiError> {
    usize::try_from(ndims)
        .map_err(|_| MpiError::new(err::ARG, format!("ndims {ndims} is negative")))
}

/// Coordinates of `rank` in row-major order.
fn coords_of(dims: &[c_int], mut rank: c_int) -> Vec<c_int> {
    let mut c = vec![0; dims.len()];
    for i in (0..dims.len()).rev() {
        c[i] = rank % dims[i];
        rank /= dims[i];
    }
    c
}

/// The rank of `coords` (wrapped in periodic dimensions; `None` outside a non-periodic one).
fn rank_of(dims: &[c_int], periods: &[bool], coords: &[c_int]) -> Option<c_int> {
    let mut r: c_int = 0;
    for i in 0..dims.len() {
        let mut x = coords[i];
        if periods[i] {
            x = x.rem_euclid(dims[i]);
        } else if x < 0 || x >= dims[i] {
            return None;
        }
        r = r * dims[i] + x;
    }
    Some(r)
}

/// Splits `c` into a communicator of the ranks with `Some` key (ordered by key) and gives it
/// topology `shape`; the others get `MPI_COMM_NULL`.
fn make(c: &CommEntry, key: Option<c_int>, color: u32, shape: Shape) -> Result<Handle, MpiError> {
    let rt = rt()?;
    let Some(n) = c.comm.split(key.map(|_| color), key.unwrap_or(0))? else {
        return Ok(abi::COMM_NULL);
    };
    let shadow = n.dup()?;
    let h = rt.add_comm(CommEntry::new(
        n,
        c.errhandler.load(Ordering::Relaxed),
        rt.agent.size(),
    ));
    table().insert(h, Arc::new(Topo { shape, shadow }));
    Ok(h)
}

/// The balanced factorization of `m` into `k` factors, in non-increasing order: the one whose
/// largest and smallest factors differ least; among those, the one whose smallest factor is
/// largest, then its second smallest, and so on. This is the factorization MPICH gives (its
/// `dims5` test checks 75,000 of them), so that a program decomposes its grid as it does there.
fn balanced(m: c_int, k: usize) -> Vec<c_int> {
    /// The best factorization so far: its spread and its factors in non-decreasing order.
    struct Search {
        divisors: Vec<i64>,
        best: Option<(i64, Vec<i64>)>,
    }
    impl Search {
        /// Chooses the `k` factors of `m` left, each at least `lo`, after those in `cur`.
        fn go(&mut self, m: i64, k: usize, lo: i64, cur: &mut Vec<i64>) {
            if k == 1 {
                if m >= lo {
                    cur.push(m);
                    let spread = m - cur[0];
                    let better = self.best.as_ref().is_none_or(|(s, b)| {
                        spread < *s || (spread == *s && cur.as_slice() > b.as_slice())
                    });
                    if better {
                        self.best = Some((spread, cur.clone()));
                    }
                    cur.pop();
                }
                return;
            }
            for i in 0..self.divisors.len() {
                let d = self.divisors[i];
                if d < lo || m % d != 0 {
                    continue;
                }
                // The k factors left are each at least d.
                if d.checked_pow(k as u32).is_none_or(|p| p > m) {
                    break;
                }
                // The largest factor is at least the (k-1)-th root of what is left.
                let first = cur.first().copied().unwrap_or(d);
                let root = ((m / d) as f64).powf(1.0 / (k - 1) as f64).floor() as i64;
                if self
                    .best
                    .as_ref()
                    .is_some_and(|(s, _)| root.max(d) - first > *s)
                {
                    continue;
                }
                cur.push(d);
                self.go(m / d, k - 1, d, cur);
                cur.pop();
            }
        }
    }
    if k == 0 {
        return Vec::new();
    }
    let m = i64::from(m);
    let mut divisors: Vec<i64> = Vec::new();
    let mut high = Vec::new();
    let mut d = 1;
    while d * d <= m {
        if m % d == 0 {
            divisors.push(d);
            if d * d != m {
                high.push(m / d);
            }
        }
        d += 1;
    }
    divisors.extend(high.into_iter().rev());
    let mut s = Search {
        divisors,
        best: None,
    };
    s.go(m, k, 1, &mut Vec::with_capacity(k));
    let best = s.best.map(|(_, b)| b).unwrap_or_default();
    best.into_iter().rev().map(|x| x as c_int).collect()
}

mpi_fn! {
    /// `MPI_Dims_create`: fills the zero entries of `dims` so that the product is `nnodes`,
    /// as close to each other as possible, in non-increasing order.
    MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) on abi::COMM_WORLD => {
        if nnodes <= 0 {
            return Err(MpiError::new(err::ARG, format!("nnodes {nnodes} is not positive")));
        }
        let nd = ndims_of(ndims)?;
        // SAFETY: the caller's array of `ndims` ints.
        let given = unsafe { ints(dims, nd, "dims") }?.to_vec();
        let mut fixed: c_int = 1;
        for &d in &given {
            if d < 0 {
                return Err(MpiError::new(err::DIMS, format!("dimension {d} is negative")));
            }
            if d > 0 {
                fixed = fixed.saturating_mul(d);
            }
        }
        if nnodes % fixed != 0 {
            return Err(MpiError::new(err::DIMS, format!("{nnodes} nodes cannot be split with the fixed dimensions of product {fixed}")));
        }
        let free = given.iter().filter(|&&d| d == 0).count();
        let m = nnodes / fixed;
        if free == 0 {
            if m != 1 {
                return Err(MpiError::new(err::DIMS, format!("the dimensions' product {fixed} is not {nnodes}")));
            }
            return Ok(());
        }
        let mut fill = balanced(m, free).into_iter();
        let out: Vec<c_int> = given.iter().map(|&d| if d == 0 { fill.next().unwrap_or(1) } else { d }).collect();
        // SAFETY: the caller's array of `ndims` ints.
        unsafe { write_ints(dims, &out, "dims") }
    }
}

mpi_fn! {
    /// `MPI_Cart_create` (collective): ranks beyond the grid get `MPI_COMM_NULL`; `reorder`
    /// keeps every rank.
    MPI_Cart_create / PMPI_Cart_create(comm_old: Handle, ndims: c_int, dims: *const c_int, periods: *const c_int, reorder: c_int, comm_cart: *mut Handle) on comm_old => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(comm_cart) };
        let _ = reorder;
        let c = rt()?.intra(comm_old)?;
        if ndims < 0 {
            return Err(MpiError::new(err::ARG, format!("ndims {ndims} is negative")));
        }
        let nd = ndims as usize;
        // SAFETY: the caller's arrays of `ndims` ints.
        let (d, p) = unsafe { (ints(dims, nd, "dims")?, ints(periods, nd, "periods")?) };
        let mut size: i64 = 1;
        for &x in d {
            if x <= 0 {
                return Err(MpiError::new(err::DIMS, format!("dimension {x} is not positive")));
            }
            size = size.saturating_mul(i64::from(x));
        }
        if size > i64::from(c.comm.size()) {
            return Err(MpiError::new(err::ARG, format!("the grid of {size} ranks is larger than the communicator of {}", c.comm.size())));
        }
        if comm_cart.is_null() {
            return Err(MpiError::new(err::ARG, "comm_cart is NULL"));
        }
        let r = c.comm.rank() as i64;
        let key = (r < size).then_some(r as c_int);
        let shape = Shape::Cart { dims: d.to_vec(), periods: p.iter().map(|&x| x != 0).collect() };
        let h = make(&c, key, 0, shape)?;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(comm_cart, h, "comm_cart") }
    }
}

mpi_fn! {
    /// `MPI_Cartdim_get`.
    MPI_Cartdim_get / PMPI_Cartdim_get(comm: Handle, ndims: *mut c_int) on comm => {
        let (_, t) = cart(comm)?;
        let (d, _) = cart_shape(&t);
        // SAFETY: the caller's int.
        unsafe { put(ndims, d.len() as c_int, "ndims") }
    }
}

mpi_fn! {
    /// `MPI_Cart_get`: the first `maxdims` dimensions, periods and this rank's coordinates.
    MPI_Cart_get / PMPI_Cart_get(comm: Handle, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) on comm => {
        let (c, t) = cart(comm)?;
        let (d, p) = cart_shape(&t);
        if maxdims < 0 {
            return Err(MpiError::new(err::ARG, format!("maxdims {maxdims} is negative")));
        }
        let k = d.len().min(maxdims as usize);
        let me = coords_of(d, c.comm.rank() as c_int);
        let pi: Vec<c_int> = p.iter().map(|&x| c_int::from(x)).collect();
        // SAFETY: the caller's arrays of `maxdims` ints.
        unsafe {
            write_ints(dims, &d[..k], "dims")?;
            write_ints(periods, &pi[..k], "periods")?;
            write_ints(coords, &me[..k], "coords")?;
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Cart_rank`: coordinates outside a non-periodic dimension are `MPI_ERR_ARG`.
    MPI_Cart_rank / PMPI_Cart_rank(comm: Handle, coords: *const c_int, rank: *mut c_int) on comm => {
        let (_, t) = cart(comm)?;
        let (d, p) = cart_shape(&t);
        // SAFETY: the caller's array of `ndims` ints.
        let xs = unsafe { ints(coords, d.len(), "coords") }?;
        let r = rank_of(d, p, xs).ok_or_else(|| {
            MpiError::new(err::ARG, format!("coordinates {xs:?} are outside the grid {d:?}"))
        })?;
        // SAFETY: the caller's int.
        unsafe { put(rank, r, "rank") }
    }
}

mpi_fn! {
    /// `MPI_Cart_coords`.
    MPI_Cart_coords / PMPI_Cart_coords(comm: Handle, rank: c_int, maxdims: c_int, coords: *mut c_int) on comm => {
        let (c, t) = cart(comm)?;
        let (d, _) = cart_shape(&t);
        if rank < 0 || rank as u32 >= c.comm.size() {
            return Err(MpiError::new(err::RANK, format!("rank {rank} is not in the communicator of {} ranks", c.comm.size())));
        }
        if (maxdims as i64) < d.len() as i64 {
            return Err(MpiError::new(err::ARG, format!("maxdims {maxdims} is less than the {} dimensions", d.len())));
        }
        // SAFETY: the caller's array of `maxdims` ints.
        unsafe { write_ints(coords, &coords_of(d, rank), "coords") }
    }
}

mpi_fn! {
    /// `MPI_Cart_shift`: `MPI_PROC_NULL` past the end of a non-periodic dimension.
    MPI_Cart_shift / PMPI_Cart_shift(comm: Handle, direction: c_int, disp: c_int, rank_source: *mut c_int, rank_dest: *mut c_int) on comm => {
        let (c, t) = cart(comm)?;
        let (d, p) = cart_shape(&t);
        if direction < 0 || direction as usize >= d.len() {
            return Err(MpiError::new(err::ARG, format!("direction {direction} is not a dimension of the {} of the grid", d.len())));
        }
        let (src, dst) = shift(d, p, c.comm.rank() as c_int, direction as usize, disp);
        // SAFETY: the caller's ints.
        unsafe {
            put(rank_source, src, "rank_source")?;
            put(rank_dest, dst, "rank_dest")
        }
    }
}

/// `(source, dest)` of a shift by `disp` along `dim` from `rank`.
fn shift(d: &[c_int], p: &[bool], rank: c_int, dim: usize, disp: c_int) -> (c_int, c_int) {
    let me = coords_of(d, rank);
    let at = |delta: c_int| {
        let mut x = me.clone();
        x[dim] = x[dim].saturating_add(delta);
        rank_of(d, p, &x).unwrap_or(abi::PROC_NULL)
    };
    (at(disp.saturating_neg()), at(disp))
}

mpi_fn! {
    /// `MPI_Cart_sub` (collective): the sub-grids of the kept dimensions.
    MPI_Cart_sub / PMPI_Cart_sub(comm: Handle, remain_dims: *const c_int, newcomm: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        let (c, t) = cart(comm)?;
        let (d, p) = cart_shape(&t);
        // SAFETY: the caller's array of `ndims` ints.
        let keep = unsafe { ints(remain_dims, d.len(), "remain_dims") }?;
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        let me = coords_of(d, c.comm.rank() as c_int);
        let mut color: u32 = 0;
        let (mut nd, mut np) = (Vec::new(), Vec::new());
        for i in 0..d.len() {
            if keep[i] != 0 {
                nd.push(d[i]);
                np.push(p[i]);
            } else {
                color = color * d[i] as u32 + me[i] as u32;
            }
        }
        let shape = Shape::Cart { dims: nd, periods: np };
        let h = make(&c, Some(c.comm.rank() as c_int), color, shape)?;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}

mpi_fn! {
    /// `MPI_Cart_map`: the rank itself when inside the grid, else `MPI_UNDEFINED`.
    MPI_Cart_map / PMPI_Cart_map(comm: Handle, ndims: c_int, dims: *const c_int, periods: *const c_int, newrank: *mut c_int) on comm => {
        let c = rt()?.comm(comm)?;
        let nd = ndims_of(ndims)?;
        // SAFETY: the caller's arrays of `ndims` ints.
        let d = unsafe { ints(dims, nd, "dims") }?;
        let _ = periods;
        let mut size: i64 = 1;
        for &x in d {
            if x <= 0 {
                return Err(MpiError::new(err::DIMS, format!("dimension {x} is not positive")));
            }
            size = size.saturating_mul(i64::from(x));
        }
        if size > i64::from(c.comm.size()) {
            return Err(MpiError::new(err::ARG, format!("the grid of {size} ranks is larger than the communicator of {}", c.comm.size())));
        }
        let r = c.comm.rank() as i64;
        // SAFETY: the caller's int.
        unsafe { put(newrank, if r < size { r as c_int } else { abi::UNDEFINED }, "newrank") }
    }
}

mpi_fn! {
    /// `MPI_Topo_test`: `MPI_CART`, `MPI_GRAPH`, `MPI_DIST_GRAPH` or `MPI_UNDEFINED`.
    MPI_Topo_test / PMPI_Topo_test(comm: Handle, status: *mut c_int) on comm => {
        rt()?.comm_any(comm)?;
        let s = match topo_of(comm).map(|t| t.shape.clone()) {
            Some(Shape::Cart { .. }) => CART,
            Some(Shape::Graph { .. }) => GRAPH,
            Some(Shape::DistGraph { .. }) => DIST_GRAPH,
            None => abi::UNDEFINED,
        };
        // SAFETY: the caller's int.
        unsafe { put(status, s, "status") }
    }
}

/// Whether `w` is `MPI_UNWEIGHTED` or `MPI_WEIGHTS_EMPTY` (addresses of `crate::symbols`).
fn special_weights(w: *const c_int) -> bool {
    std::ptr::eq(w, &crate::symbols::MPIR_C_MPI_UNWEIGHTED)
        || std::ptr::eq(w, &crate::symbols::MPIR_C_MPI_WEIGHTS_EMPTY)
}

/// Checks a neighbour list against a communicator of `n` ranks.
fn check_ranks(v: &[c_int], n: u32, what: &str) -> Result<(), MpiError> {
    match v.iter().find(|&&r| r < 0 || r as u32 >= n) {
        Some(r) => Err(MpiError::new(
            err::RANK,
            format!("{what} {r} is not in the communicator of {n} ranks"),
        )),
        None => Ok(()),
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_create_adjacent` (collective): every rank gives its in- and
    /// out-neighbours; `reorder` keeps every rank.
    MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(comm_old: Handle, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, destinations: *const c_int, destweights: *const c_int, info: Handle, reorder: c_int, comm_dist_graph: *mut Handle) on comm_old => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(comm_dist_graph) };
        let _ = (info, reorder);
        let c = rt()?.intra(comm_old)?;
        if indegree < 0 || outdegree < 0 {
            return Err(MpiError::new(err::ARG, format!("degree {} is negative", indegree.min(outdegree))));
        }
        let n = c.comm.size();
        // SAFETY: the caller's arrays of `indegree` and `outdegree` ints.
        let (s, d) = unsafe { (ints(sources, indegree as usize, "sources")?, ints(destinations, outdegree as usize, "destinations")?) };
        check_ranks(s, n, "source")?;
        check_ranks(d, n, "destination")?;
        // The standard: MPI_UNWEIGHTED for one list means it for both.
        let unweighted = |w: *const c_int| std::ptr::eq(w, &crate::symbols::MPIR_C_MPI_UNWEIGHTED);
        let weighted = !unweighted(sourceweights) && !unweighted(destweights);
        let (sw, dw) = if weighted {
            // SAFETY: the caller's weight arrays, as long as the neighbour lists.
            unsafe {
                let sw = if special_weights(sourceweights) { vec![0; s.len()] } else { ints(sourceweights, s.len(), "sourceweights")?.to_vec() };
                let dw = if special_weights(destweights) { vec![0; d.len()] } else { ints(destweights, d.len(), "destweights")?.to_vec() };
                (sw, dw)
            }
        } else {
            (Vec::new(), Vec::new())
        };
        if comm_dist_graph.is_null() {
            return Err(MpiError::new(err::ARG, "comm_dist_graph is NULL"));
        }
        let shape = Shape::DistGraph { sources: s.to_vec(), sweights: sw, dests: d.to_vec(), dweights: dw, weighted };
        let h = make(&c, Some(c.comm.rank() as c_int), 0, shape)?;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(comm_dist_graph, h, "comm_dist_graph") }
    }
}

/// The distributed graph of `comm` (`MPI_ERR_TOPOLOGY` when it has none).
fn dist_graph(comm: Handle) -> Result<Arc<Topo>, MpiError> {
    rt()?.comm(comm)?;
    match topo_of(comm) {
        Some(t) if matches!(t.shape, Shape::DistGraph { .. }) => Ok(t),
        _ => Err(MpiError::new(
            err::TOPOLOGY,
            format!("communicator {comm:#x} has no distributed graph topology"),
        )),
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_neighbors_count`.
    MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(comm: Handle, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) on comm => {
        let t = dist_graph(comm)?;
        let Shape::DistGraph { sources, dests, weighted: w, .. } = &t.shape else { unreachable!() };
        // SAFETY: the caller's ints.
        unsafe {
            put(indegree, sources.len() as c_int, "indegree")?;
            put(outdegree, dests.len() as c_int, "outdegree")?;
            put(weighted, c_int::from(*w), "weighted")
        }
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_neighbors`: the first `maxindegree`/`maxoutdegree` neighbours and, for a
    /// weighted graph, their weights.
    MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(comm: Handle, maxindegree: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxoutdegree: c_int, destinations: *mut c_int, destweights: *mut c_int) on comm => {
        let t = dist_graph(comm)?;
        let Shape::DistGraph { sources: s, sweights, dests: d, dweights, weighted } = &t.shape else { unreachable!() };
        if maxindegree < 0 || maxoutdegree < 0 {
            return Err(MpiError::new(err::ARG, "maxindegree or maxoutdegree is negative"));
        }
        let ki = s.len().min(maxindegree as usize);
        let ko = d.len().min(maxoutdegree as usize);
        // SAFETY: the caller's arrays of `maxindegree`/`maxoutdegree` ints.
        unsafe {
            write_ints(sources, &s[..ki], "sources")?;
            write_ints(destinations, &d[..ko], "destinations")?;
            if *weighted {
                if !special_weights(sourceweights) {
                    write_ints(sourceweights, &sweights[..ki], "sourceweights")?;
                }
                if !special_weights(destweights) {
                    write_ints(destweights, &dweights[..ko], "destweights")?;
                }
            }
        }
        Ok(())
    }
}

/// A topology with its in- and out-neighbours.
type Neighbours = (Arc<Topo>, Vec<c_int>, Vec<c_int>);

/// In- and out-neighbours of `comm`'s topology (`MPI_PROC_NULL` entries kept).
fn neighbours(comm: Handle) -> Result<Neighbours, MpiError> {
    let c = rt()?.comm(comm)?;
    let t = topo_of(comm).ok_or_else(|| {
        MpiError::new(
            err::TOPOLOGY,
            format!("communicator {comm:#x} has no topology"),
        )
    })?;
    let (ins, outs) = match &t.shape {
        Shape::Cart { dims, periods } => {
            let mut v = Vec::with_capacity(2 * dims.len());
            for k in 0..dims.len() {
                let (s, d) = shift(dims, periods, c.comm.rank() as c_int, k, 1);
                v.push(s);
                v.push(d);
            }
            (v.clone(), v)
        }
        Shape::Graph { index, edges } => {
            let v = graph_neighbours(index, edges, c.comm.rank() as usize).to_vec();
            (v.clone(), v)
        }
        Shape::DistGraph { sources, dests, .. } => (sources.clone(), dests.clone()),
    };
    Ok((t, ins, outs))
}

/// Sends `blocks[j]` to `outs[j]` and receives from each `ins[i]` into the part
/// `recvs[i]` (offset, length) of `out`, on the topology's shadow communicator; the k-th
/// message between two ranks has tag k.
fn neighbour_exchange(
    t: &Topo,
    ins: &[c_int],
    outs: &[c_int],
    blocks: &[&[u8]],
    recvs: &[(usize, usize)],
    out: Out,
) -> Result<(), MpiError> {
    let ordinals = |v: &[c_int]| -> Vec<u32> {
        let mut seen: HashMap<c_int, u32> = HashMap::new();
        v.iter()
            .map(|&r| {
                let e = seen.entry(r).or_insert(0);
                *e += 1;
                *e - 1
            })
            .collect()
    };
    // On a Cartesian topology the lists are, per dimension, the neighbour below and the one
    // above; a block sent up arrives from below, and one sent down from above. The tag is the
    // sender's list index, so that a rank that is both neighbours of another (a periodic
    // dimension of one or two ranks) still gets each block into its own slot. Elsewhere
    // the k-th block between two ranks goes with tag k.
    let (oi, oo) = if matches!(t.shape, Shape::Cart { .. }) {
        (
            (0..ins.len() as u32).map(|i| i ^ 1).collect(),
            (0..outs.len() as u32).collect(),
        )
    } else {
        (ordinals(ins), ordinals(outs))
    };
    let mut reqs: Vec<Request> = Vec::new();
    let mut bufs = Vec::new();
    for (i, &r) in ins.iter().enumerate() {
        if r != abi::PROC_NULL {
            let (req, b) =
                t.shadow
                    .irecv(recvs[i].1, Source::Rank(r as u32), TagMatch::Tag(oi[i]))?;
            reqs.push(req);
            bufs.push((recvs[i], b));
        }
    }
    for (j, &r) in outs.iter().enumerate() {
        if r != abi::PROC_NULL {
            reqs.push(t.shadow.isend(r as u32, oo[j], blocks[j])?);
        }
    }
    let finish: Finish = Box::new(move |out: &mut [u8]| {
        for ((o, l), b) in bufs {
            let got = b.take();
            let n = got.len().min(l);
            if o + n <= out.len() {
                out[o..o + n].copy_from_slice(&got[..n]);
            }
        }
    });
    match out.request {
        None => {
            wait_all(&mut reqs, None)?;
            // SAFETY: the caller's receive buffer, checked by the call.
            let o = unsafe { output(out.buf, out.len) }?;
            finish(o);
            Ok(())
        }
        // SAFETY: the caller's handle; the receive buffer stays the library's until the
        // request completes.
        Some(h) => unsafe {
            Started::with_finish(all_of(reqs), out.buf, out.len, finish).give(out.comm, h)
        },
    }
}

/// Where a neighbourhood collective's result goes: the caller's receive buffer of `len`
/// bytes, and for the nonblocking form the request handle to write.
struct Out {
    comm: Handle,
    buf: *mut c_void,
    len: usize,
    request: Option<*mut Handle>,
}

/// `MPI_Neighbor_allgather` and its nonblocking form (`request`).
///
/// # Safety
///
/// The arguments follow `MPI_Neighbor_allgather`'s contract.
#[allow(clippy::too_many_arguments)]
unsafe fn n_allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Result<(), MpiError> {
    let (t, ins, outs) = neighbours(comm)?;
    let slen = bytes(sendcount, sendtype)?;
    let rlen = bytes(recvcount, recvtype)?;
    // SAFETY: the caller's send buffer.
    let send = unsafe { input(sendbuf, slen) }?.to_vec();
    let len = rlen * ins.len();
    // SAFETY: the caller's receive buffer of one block per in-neighbour (checked here, written at completion).
    unsafe { output(recvbuf, len) }?;
    let blocks: Vec<&[u8]> = outs.iter().map(|_| &send[..]).collect();
    let recvs: Vec<(usize, usize)> = (0..ins.len()).map(|i| (i * rlen, rlen)).collect();
    neighbour_exchange(
        &t,
        &ins,
        &outs,
        &blocks,
        &recvs,
        Out {
            comm,
            buf: recvbuf,
            len,
            request,
        },
    )
}

mpi_fn! {
    /// `MPI_Neighbor_allgather`: this rank's data to every out-neighbour, block i from the
    /// i-th in-neighbour (`MPI_PROC_NULL` blocks are left as they are).
    MPI_Neighbor_allgather / PMPI_Neighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arguments.
        unsafe { n_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, None) }
    }
}

mpi_fn! {
    /// `MPI_Ineighbor_allgather`: the same exchange; the request completes when every message did.
    MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arguments and handle.
        unsafe { n_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Some(request)) }
    }
}

/// `MPI_Neighbor_alltoall` and its nonblocking form (`request`).
///
/// # Safety
///
/// The arguments follow `MPI_Neighbor_alltoall`'s contract.
#[allow(clippy::too_many_arguments)]
unsafe fn n_alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Result<(), MpiError> {
    let (t, ins, outs) = neighbours(comm)?;
    let slen = bytes(sendcount, sendtype)?;
    let rlen = bytes(recvcount, recvtype)?;
    // SAFETY: the caller's send buffer of one block per out-neighbour.
    let send = unsafe { input(sendbuf, slen * outs.len()) }?.to_vec();
    let len = rlen * ins.len();
    // SAFETY: the caller's receive buffer of one block per in-neighbour (checked here, written at completion).
    unsafe { output(recvbuf, len) }?;
    let blocks: Vec<&[u8]> = (0..outs.len())
        .map(|j| &send[j * slen..(j + 1) * slen])
        .collect();
    let recvs: Vec<(usize, usize)> = (0..ins.len()).map(|i| (i * rlen, rlen)).collect();
    neighbour_exchange(
        &t,
        &ins,
        &outs,
        &blocks,
        &recvs,
        Out {
            comm,
            buf: recvbuf,
            len,
            request,
        },
    )
}

mpi_fn! {
    /// `MPI_Neighbor_alltoall`: block j to the j-th out-neighbour, block i from the i-th
    /// in-neighbour.
    MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arguments.
        unsafe { n_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, None) }
    }
}

mpi_fn! {
    /// `MPI_Ineighbor_alltoall`: the same exchange; the request completes when every message did.
    MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arguments and handle.
        unsafe { n_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Some(request)) }
    }
}

/// The neighbours of node `r` of a graph.
fn graph_neighbours<'a>(index: &[c_int], edges: &'a [c_int], r: usize) -> &'a [c_int] {
    let lo = if r == 0 { 0 } else { index[r - 1] as usize };
    let hi = index.get(r).map_or(lo, |&h| h as usize);
    &edges[lo.min(edges.len())..hi.min(edges.len())]
}

/// A graph's index and edges.
type GraphArrays = (Vec<c_int>, Vec<c_int>);

/// The graph of `comm` (`MPI_ERR_TOPOLOGY` when it has none).
fn graph(comm: Handle) -> Result<GraphArrays, MpiError> {
    rt()?.comm(comm)?;
    match topo_of(comm).map(|t| t.shape.clone()) {
        Some(Shape::Graph { index, edges }) => Ok((index, edges)),
        _ => Err(MpiError::new(
            err::TOPOLOGY,
            format!("communicator {comm:#x} has no graph topology"),
        )),
    }
}

/// Checks a graph description of `nnodes` nodes for a communicator of `size` ranks.
///
/// # Safety
///
/// `indx` holds `nnodes` ints, `edges` as many as its last entry.
unsafe fn graph_args(
    nnodes: c_int,
    indx: *const c_int,
    edges: *const c_int,
    size: u32,
) -> Result<GraphArrays, MpiError> {
    if nnodes < 0 || nnodes as u32 > size {
        return Err(MpiError::new(
            err::ARG,
            format!("{nnodes} nodes for a communicator of {size} ranks"),
        ));
    }
    // SAFETY: the caller's array of `nnodes` ints.
    let index = unsafe { ints(indx, nnodes as usize, "index") }?.to_vec();
    let mut prev = 0;
    for &x in &index {
        if x < prev {
            return Err(MpiError::new(
                err::ARG,
                format!("index {index:?} is not non-decreasing"),
            ));
        }
        prev = x;
    }
    // SAFETY: the caller's array of `index[nnodes - 1]` ints.
    let e = unsafe { ints(edges, prev as usize, "edges") }?.to_vec();
    if let Some(bad) = e.iter().find(|&&x| x < 0 || x >= nnodes) {
        return Err(MpiError::new(
            err::ARG,
            format!("edge to {bad} is not a node of the {nnodes}"),
        ));
    }
    Ok((index, e))
}

mpi_fn! {
    /// `MPI_Graph_create` (collective): ranks beyond the graph's nodes get `MPI_COMM_NULL`;
    /// `reorder` keeps every rank.
    MPI_Graph_create / PMPI_Graph_create(comm_old: Handle, nnodes: c_int, indx: *const c_int, edges: *const c_int, reorder: c_int, comm_graph: *mut Handle) on comm_old => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(comm_graph) };
        let _ = reorder;
        let c = rt()?.intra(comm_old)?;
        // SAFETY: the caller's arrays.
        let (index, e) = unsafe { graph_args(nnodes, indx, edges, c.comm.size()) }?;
        if comm_graph.is_null() {
            return Err(MpiError::new(err::ARG, "comm_graph is NULL"));
        }
        let r = c.comm.rank() as c_int;
        let key = (r < nnodes).then_some(r);
        let h = make(&c, key, 0, Shape::Graph { index, edges: e })?;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(comm_graph, h, "comm_graph") }
    }
}

mpi_fn! {
    /// `MPI_Graphdims_get`.
    MPI_Graphdims_get / PMPI_Graphdims_get(comm: Handle, nnodes: *mut c_int, nedges: *mut c_int) on comm => {
        let (index, edges) = graph(comm)?;
        // SAFETY: the caller's ints.
        unsafe {
            put(nnodes, index.len() as c_int, "nnodes")?;
            put(nedges, edges.len() as c_int, "nedges")
        }
    }
}

mpi_fn! {
    /// `MPI_Graph_get`: the first `maxindex` index entries and `maxedges` edges.
    MPI_Graph_get / PMPI_Graph_get(comm: Handle, maxindex: c_int, maxedges: c_int, indx: *mut c_int, edges: *mut c_int) on comm => {
        let (index, e) = graph(comm)?;
        if maxindex < 0 || maxedges < 0 {
            return Err(MpiError::new(err::ARG, "maxindex or maxedges is negative"));
        }
        // SAFETY: the caller's arrays of `maxindex` and `maxedges` ints.
        unsafe {
            write_ints(indx, &index[..index.len().min(maxindex as usize)], "index")?;
            write_ints(edges, &e[..e.len().min(maxedges as usize)], "edges")
        }
    }
}

mpi_fn! {
    /// `MPI_Graph_neighbors_count`.
    MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(comm: Handle, rank: c_int, nneighbors: *mut c_int) on comm => {
        let (index, e) = graph(comm)?;
        if rank < 0 || rank as usize >= index.len() {
            return Err(MpiError::new(err::RANK, format!("rank {rank} is not a node of the {}", index.len())));
        }
        // SAFETY: the caller's int.
        unsafe { put(nneighbors, graph_neighbours(&index, &e, rank as usize).len() as c_int, "nneighbors") }
    }
}

mpi_fn! {
    /// `MPI_Graph_neighbors`: the first `maxneighbors` neighbours of node `rank`.
    MPI_Graph_neighbors / PMPI_Graph_neighbors(comm: Handle, rank: c_int, maxneighbors: c_int, neighbors: *mut c_int) on comm => {
        let (index, e) = graph(comm)?;
        if rank < 0 || rank as usize >= index.len() {
            return Err(MpiError::new(err::RANK, format!("rank {rank} is not a node of the {}", index.len())));
        }
        if maxneighbors < 0 {
            return Err(MpiError::new(err::ARG, "maxneighbors is negative"));
        }
        let v = graph_neighbours(&index, &e, rank as usize);
        // SAFETY: the caller's array of `maxneighbors` ints.
        unsafe { write_ints(neighbors, &v[..v.len().min(maxneighbors as usize)], "neighbors") }
    }
}

mpi_fn! {
    /// `MPI_Graph_map`: the rank itself when it is a node, else `MPI_UNDEFINED`.
    MPI_Graph_map / PMPI_Graph_map(comm: Handle, nnodes: c_int, indx: *const c_int, edges: *const c_int, newrank: *mut c_int) on comm => {
        let c = rt()?.comm(comm)?;
        // SAFETY: the caller's arrays.
        unsafe { graph_args(nnodes, indx, edges, c.comm.size()) }?;
        let r = c.comm.rank() as c_int;
        // SAFETY: the caller's int.
        unsafe { put(newrank, if r < nnodes { r } else { abi::UNDEFINED }, "newrank") }
    }
}

/// Byte parts `(displs[i] * extent, counts[i] * size)` of `n` neighbours.
///
/// # Safety
///
/// `counts` and `displs` hold `n` ints.
unsafe fn vparts(
    counts: *const c_int,
    displs: *const c_int,
    t: Handle,
    n: usize,
) -> Result<Vec<(usize, usize)>, MpiError> {
    // SAFETY: the caller's arrays of `n` ints.
    let (c, d) = unsafe {
        (
            ints(counts, n, "counts")?,
            ints(displs, n, "displacements")?,
        )
    };
    let ext = bytes(1, t)?;
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        if d[i] < 0 {
            return Err(MpiError::new(
                err::ARG,
                format!("displacement {} is negative", d[i]),
            ));
        }
        v.push((d[i] as usize * ext, bytes(c[i], t)?));
    }
    Ok(v)
}

fn span(parts: &[(usize, usize)]) -> usize {
    parts.iter().map(|(o, l)| o + l).max().unwrap_or(0)
}

/// `MPI_Neighbor_allgatherv` and its nonblocking form (`request`).
///
/// # Safety
///
/// The arguments follow `MPI_Neighbor_allgatherv`'s contract.
#[allow(clippy::too_many_arguments)]
unsafe fn n_allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Result<(), MpiError> {
    let (t, ins, outs) = neighbours(comm)?;
    // Displacements below the buffer move it down (`crate::displs`).
    // SAFETY: the caller's arrays of one entry per in-neighbour.
    let rb = unsafe {
        crate::displs::rebase(
            true,
            recvbuf as usize,
            recvcounts,
            displs,
            ins.len(),
            crate::displs::unit(recvtype),
        )
    }?;
    let (recvbuf, displs) = (rb.0 as *mut c_void, crate::displs::pass(&rb, displs));
    let slen = bytes(sendcount, sendtype)?;
    // SAFETY: the caller's send buffer.
    let send = unsafe { input(sendbuf, slen) }?.to_vec();
    // SAFETY: the caller's arrays of one entry per in-neighbour.
    let recvs = unsafe { vparts(recvcounts, displs, recvtype, ins.len()) }?;
    let len = span(&recvs);
    // SAFETY: the caller's receive buffer covering every part (checked here, written at completion).
    unsafe { output(recvbuf, len) }?;
    let blocks: Vec<&[u8]> = outs.iter().map(|_| &send[..]).collect();
    neighbour_exchange(
        &t,
        &ins,
        &outs,
        &blocks,
        &recvs,
        Out {
            comm,
            buf: recvbuf,
            len,
            request,
        },
    )
}

mpi_fn! {
    /// `MPI_Neighbor_allgatherv`: this rank's data to every out-neighbour, the i-th
    /// in-neighbour's into part i.
    MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arguments.
        unsafe { n_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, None) }
    }
}

mpi_fn! {
    /// `MPI_Ineighbor_allgatherv`: the same exchange; the request completes when every message did.
    MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arguments and handle.
        unsafe { n_allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Some(request)) }
    }
}

/// `MPI_Neighbor_alltoallv` and its nonblocking form (`request`).
///
/// # Safety
///
/// The arguments follow `MPI_Neighbor_alltoallv`'s contract.
#[allow(clippy::too_many_arguments)]
unsafe fn n_alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Result<(), MpiError> {
    let (t, ins, outs) = neighbours(comm)?;
    // Displacements below a buffer move it down (`crate::displs`).
    // SAFETY: the caller's arrays of one entry per neighbour.
    let (sb, rb) = unsafe {
        (
            crate::displs::rebase(
                true,
                sendbuf as usize,
                sendcounts,
                sdispls,
                outs.len(),
                crate::displs::unit(sendtype),
            )?,
            crate::displs::rebase(
                true,
                recvbuf as usize,
                recvcounts,
                rdispls,
                ins.len(),
                crate::displs::unit(recvtype),
            )?,
        )
    };
    let (sendbuf, sdispls) = (sb.0 as *const c_void, crate::displs::pass(&sb, sdispls));
    let (recvbuf, rdispls) = (rb.0 as *mut c_void, crate::displs::pass(&rb, rdispls));
    // SAFETY: the caller's arrays of one entry per neighbour.
    let (sends, recvs) = unsafe {
        (
            vparts(sendcounts, sdispls, sendtype, outs.len())?,
            vparts(recvcounts, rdispls, recvtype, ins.len())?,
        )
    };
    // SAFETY: the caller's send buffer covering every part.
    let send = unsafe { input(sendbuf, span(&sends)) }?.to_vec();
    let len = span(&recvs);
    // SAFETY: the caller's receive buffer covering every part (checked here, written at completion).
    unsafe { output(recvbuf, len) }?;
    let blocks: Vec<&[u8]> = sends.iter().map(|&(o, l)| &send[o..o + l]).collect();
    neighbour_exchange(
        &t,
        &ins,
        &outs,
        &blocks,
        &recvs,
        Out {
            comm,
            buf: recvbuf,
            len,
            request,
        },
    )
}

mpi_fn! {
    /// `MPI_Neighbor_alltoallv`: part j to the j-th out-neighbour, the i-th in-neighbour's into
    /// part i.
    MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arguments.
        unsafe { n_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, None) }
    }
}

mpi_fn! {
    /// `MPI_Ineighbor_alltoallv`: the same exchange; the request completes when every message did.
    MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arguments and handle.
        unsafe { n_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Some(request)) }
    }
}

/// `(displacement, length)` in bytes of each neighbour's part for `MPI_Neighbor_alltoallw`:
/// `counts[i]` elements of `types[i]` at byte displacement `displs[i]` (placed by
/// [`rebase`]).
///
/// # Safety
///
/// The three arrays hold `n` entries (or are NULL, an error when `n > 0`).
unsafe fn wparts(
    counts: *const c_int,
    displs: *const MpiAint,
    types: *const Handle,
    n: usize,
) -> Result<Vec<(MpiAint, usize)>, MpiError> {
    if n > 0 && (counts.is_null() || displs.is_null() || types.is_null()) {
        return Err(MpiError::new(
            err::ARG,
            "counts, displacements or types are NULL",
        ));
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the caller's arrays of `n` entries, checked not NULL.
        let (c, d, t) = unsafe { (*counts.add(i), *displs.add(i), *types.add(i)) };
        v.push((d, bytes(c, t)?));
    }
    Ok(v)
}

/// A buffer's address and its parts' `(offset, length)` from there (see [`rebase`]).
type Rebased = (*const c_void, Vec<(usize, usize)>);

/// The parts `(displacement, length)` of a buffer at `buf` as one buffer from the start of
/// the first part: its address and each part's `(offset, length)` from there. `buf` is
/// `MPI_BOTTOM` (NULL) when the displacements are absolute addresses (`MPI_Get_address`);
/// `MPI_IN_PLACE` is refused. Empty parts take offset 0.
fn rebase(buf: *const c_void, parts: &[(MpiAint, usize)]) -> Result<Rebased, MpiError> {
    if buf as usize == abi::IN_PLACE {
        crate::datatype::check_not_placeholder(buf)?;
    }
    let at = |d: MpiAint| (buf as MpiAint).checked_add(d);
    let mut lo: Option<MpiAint> = None;
    for &(d, l) in parts {
        if l > 0 {
            let a = at(d).filter(|&a| a > 0).ok_or_else(|| {
                MpiError::new(
                    err::BUFFER,
                    format!("displacement {d} from {buf:p} is not a valid address"),
                )
            })?;
            lo = Some(lo.map_or(a, |m| m.min(a)));
        }
    }
    let Some(lo) = lo else {
        return Ok((buf, parts.iter().map(|_| (0, 0)).collect()));
    };
    let v = parts
        .iter()
        .map(|&(d, l)| {
            let off = if l > 0 {
                at(d).map_or(0, |a| a - lo)
            } else {
                0
            };
            (off as usize, l)
        })
        .collect();
    Ok((lo as *const c_void, v))
}

/// `MPI_Neighbor_alltoallw` and its nonblocking form (`request`).
///
/// # Safety
///
/// The arguments follow `MPI_Neighbor_alltoallw`'s contract.
#[allow(clippy::too_many_arguments)]
unsafe fn n_alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const MpiAint,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const MpiAint,
    recvtypes: *const Handle,
    comm: Handle,
    request: Option<*mut Handle>,
) -> Result<(), MpiError> {
    let (t, ins, outs) = neighbours(comm)?;
    // SAFETY: the caller's arrays of one entry per neighbour.
    let (sends, recvs) = unsafe {
        (
            wparts(sendcounts, sdispls, sendtypes, outs.len())?,
            wparts(recvcounts, rdispls, recvtypes, ins.len())?,
        )
    };
    // Either buffer may be MPI_BOTTOM, the displacements then absolute addresses.
    let (sendbuf, sends) = rebase(sendbuf, &sends)?;
    let (recvbuf, recvs) = rebase(recvbuf, &recvs)?;
    let recvbuf = recvbuf.cast_mut();
    // SAFETY: the caller's send buffer covering every part.
    let send = unsafe { input(sendbuf, span(&sends)) }?.to_vec();
    let len = span(&recvs);
    // SAFETY: the caller's receive buffer covering every part (checked here, written at completion).
    unsafe { output(recvbuf, len) }?;
    let blocks: Vec<&[u8]> = sends.iter().map(|&(o, l)| &send[o..o + l]).collect();
    neighbour_exchange(
        &t,
        &ins,
        &outs,
        &blocks,
        &recvs,
        Out {
            comm,
            buf: recvbuf,
            len,
            request,
        },
    )
}

mpi_fn! {
    /// `MPI_Neighbor_alltoallw`: part j (its own count, datatype and byte displacement) to the
    /// j-th out-neighbour, the i-th in-neighbour's into part i.
    MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const MpiAint, recvtypes: *const Handle, comm: Handle) on comm => {
        // SAFETY: the caller's arguments.
        unsafe { n_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, None) }
    }
}

mpi_fn! {
    /// `MPI_Ineighbor_alltoallw`: the same exchange; the request completes when every message did.
    MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MpiAint, sendtypes: *const Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const MpiAint, recvtypes: *const Handle, comm: Handle, request: *mut Handle) on comm => {
        // SAFETY: the caller's arguments and handle.
        unsafe { n_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Some(request)) }
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_create` (collective): each rank gives any edges of the graph; every
    /// rank learns its own in- and out-edges through one all-to-all of the agent (edge
    /// records padded to the largest count, agreed by an allreduce). Neighbours come in the
    /// order of the ranks that gave the edges, then of the edges given. `reorder` keeps every
    /// rank.
    MPI_Dist_graph_create / PMPI_Dist_graph_create(comm_old: Handle, n: c_int, sources: *const c_int, degrees: *const c_int, destinations: *const c_int, weights: *const c_int, info: Handle, reorder: c_int, comm_dist_graph: *mut Handle) on comm_old => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(comm_dist_graph) };
        let _ = (info, reorder);
        let c = rt()?.intra(comm_old)?;
        let size = c.comm.size();
        if n < 0 {
            return Err(MpiError::new(err::ARG, format!("n {n} is negative")));
        }
        // SAFETY: the caller's arrays of `n` ints.
        let (srcs, degs) = unsafe { (ints(sources, n as usize, "sources")?, ints(degrees, n as usize, "degrees")?) };
        if let Some(d) = degs.iter().find(|&&d| d < 0) {
            return Err(MpiError::new(err::ARG, format!("degree {d} is negative")));
        }
        let total: usize = degs.iter().map(|&d| d as usize).sum();
        // SAFETY: the caller's array of the sum of the degrees.
        let dsts = unsafe { ints(destinations, total, "destinations") }?;
        check_ranks(srcs, size, "source")?;
        check_ranks(dsts, size, "destination")?;
        let unweighted = std::ptr::eq(weights, &crate::symbols::MPIR_C_MPI_UNWEIGHTED);
        let w: Vec<c_int> = if unweighted || special_weights(weights) {
            vec![0; total]
        } else {
            // SAFETY: the caller's array of the sum of the degrees.
            unsafe { ints(weights, total, "weights") }?.to_vec()
        };
        if comm_dist_graph.is_null() {
            return Err(MpiError::new(err::ARG, "comm_dist_graph is NULL"));
        }
        // Records for each rank: (0: an out-edge to, 1: an in-edge from; the other end; weight).
        let mut recs: Vec<Vec<[c_int; 3]>> = vec![Vec::new(); size as usize];
        let mut k = 0;
        for (i, &s) in srcs.iter().enumerate() {
            for _ in 0..degs[i] {
                let (d, wt) = (dsts[k], w[k]);
                recs[s as usize].push([0, d, wt]);
                recs[d as usize].push([1, s, wt]);
                k += 1;
            }
        }
        let mut most = (recs.iter().map(Vec::len).max().unwrap_or(0) as u32).to_ne_bytes().to_vec();
        c.comm.allreduce(&mut most, viaduct_agent::xfer::Datatype::U32, viaduct_agent::xfer::ReduceOp::Max)?;
        let most = u32::from_ne_bytes([most[0], most[1], most[2], most[3]]) as usize;
        let part = 4 + 12 * most;
        let mut send = vec![0u8; part * size as usize];
        for (r, v) in recs.iter().enumerate() {
            let p = &mut send[r * part..(r + 1) * part];
            p[..4].copy_from_slice(&(v.len() as u32).to_ne_bytes());
            for (j, rec) in v.iter().enumerate() {
                for (f, x) in rec.iter().enumerate() {
                    let at = 4 + 12 * j + 4 * f;
                    p[at..at + 4].copy_from_slice(&x.to_ne_bytes());
                }
            }
        }
        let mut got = vec![0u8; part * size as usize];
        c.comm.alltoall(&send, &mut got)?;
        let word = |b: &[u8], at: usize| c_int::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let (mut ins, mut sw, mut outs, mut dw) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for r in 0..size as usize {
            let p = &got[r * part..(r + 1) * part];
            let count = (word(p, 0) as usize).min(most);
            for j in 0..count {
                let (kind, other, wt) = (word(p, 4 + 12 * j), word(p, 8 + 12 * j), word(p, 12 + 12 * j));
                if kind == 0 {
                    outs.push(other);
                    dw.push(wt);
                } else {
                    ins.push(other);
                    sw.push(wt);
                }
            }
        }
        let shape = if unweighted {
            Shape::DistGraph { sources: ins, sweights: Vec::new(), dests: outs, dweights: Vec::new(), weighted: false }
        } else {
            Shape::DistGraph { sources: ins, sweights: sw, dests: outs, dweights: dw, weighted: true }
        };
        let h = make(&c, Some(c.comm.rank() as c_int), 0, shape)?;
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(comm_dist_graph, h, "comm_dist_graph") }
    }
}

#[cfg(test)]
mod tests {
    use super::balanced;

    #[test]
    fn balanced_factorizations_are_mpichs() {
        // Cases of MPICH's `baddims.h`, where several factorizations have the same spread.
        assert_eq!(balanced(5616, 4), [13, 9, 8, 6]);
        assert_eq!(balanced(72, 2), [9, 8]);
        assert_eq!(balanced(100, 3), [5, 5, 4]);
        assert_eq!(balanced(7, 3), [7, 1, 1]);
        assert_eq!(balanced(1, 2), [1, 1]);
        assert_eq!(balanced(64, 6), [2, 2, 2, 2, 2, 2]);
    }
}
