//! Operations: the predefined ones (see [`crate::datatype::reduction`]) and the program's own,
//! `MPI_Op_create` / `MPI_Op_free`, run by the agent's reductions as user reductions.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use viaduct_agent::coll::Reduction;

use crate::abi::{self, Handle, MpiCount, err};
use crate::comm::put;
use crate::datatype::size_of;
use crate::error::MpiError;

/// `MPI_User_function`: `inoutvec[i] = invec[i] op inoutvec[i]` for `*len` elements.
pub type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut Handle);
/// `MPI_User_function_c`: as [`UserFn`] with an `MPI_Count` length.
pub type UserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut MpiCount, *mut Handle);

/// MPICH's C++ library's caller of a C++ operation (`MPIR_Call_op_fn`): the two buffers, the
/// count, the datatype and the program's function.
pub type CxxCallFn = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Handle, UserFn);

/// The program's function of an operation.
#[derive(Clone)]
enum UserOp {
    /// Of `MPI_Op_create`.
    Int(UserFn),
    /// Of `MPI_Op_create_c`.
    Large(UserFnC),
    /// Of `MPI::Op::Init` in MPICH's C++ library: called through the library's caller.
    Cxx(UserFn, CxxCallFn),
    /// A stand-in of [`packed_op`]: the program's operation on a datatype with holes, applied
    /// to packed elements (each unpacked into the datatype's layout for the call).
    Packed(Arc<PackedOp>),
}

/// What [`UserOp::Packed`] applies: the program's operation, its datatype and that layout.
struct PackedOp {
    inner: UserOp,
    datatype: Handle,
    layout: Arc<crate::types::Layout>,
}

/// Calls the program's function `f` on `count` elements of `t` at `inp` and `out`.
///
/// # Safety
///
/// `inp` and `out` hold `count` elements of `t` (readable; `out` also writable).
unsafe fn call_user(f: &UserOp, inp: *mut c_void, out: *mut c_void, count: usize, t: Handle) {
    let mut dt = t;
    match f {
        UserOp::Int(f) => {
            let mut n = count as c_int;
            // SAFETY: the program's function, given `n` elements of `t` in each buffer as
            // MPI_User_function specifies (this function's contract); `inp` is only read.
            unsafe { f(inp, out, &mut n, &mut dt) };
        }
        UserOp::Large(f) => {
            let mut n = count as MpiCount;
            // SAFETY: as above, as MPI_User_function_c specifies.
            unsafe { f(inp, out, &mut n, &mut dt) };
        }
        UserOp::Cxx(f, call) => {
            // SAFETY: MPICH's C++ caller of the program's function, with the buffers, count
            // and datatype by value as `MPIR_Call_op_fn` takes them.
            unsafe { call(inp, out, count as c_int, dt, *f) };
        }
        UserOp::Packed(p) => {
            // SAFETY: `inp` and `out` hold `count` packed elements of `p.layout`.
            unsafe { call_packed(p, inp, out, count) };
        }
    }
}

/// Applies the program's operation of `p` to `count` packed elements: both sides unpacked
/// into scratch buffers of the datatype's layout, the function called on them, and the
/// result packed back into `out`.
///
/// # Safety
///
/// `inp` and `out` hold `count * p.layout.size` bytes (`out` writable).
unsafe fn call_packed(p: &PackedOp, inp: *mut c_void, out: *mut c_void, count: usize) {
    let l = &p.layout;
    let bytes = count * l.size;
    let (lo, hi) = l.reach(count);
    let shift = (-lo).max(0) as usize;
    let room = shift + hi.max(0) as usize;
    let (mut a, mut b) = (vec![0u8; room], vec![0u8; room]);
    // SAFETY: this function's contract: `bytes` readable bytes at `inp`, writable at `out`.
    let (packed_in, packed_out) = unsafe {
        (
            std::slice::from_raw_parts(inp as *const u8, bytes),
            std::slice::from_raw_parts_mut(out as *mut u8, bytes),
        )
    };
    // SAFETY: the scratch buffers cover every byte `count` elements reach from `shift`.
    unsafe {
        let (pa, pb) = (a.as_mut_ptr().add(shift), b.as_mut_ptr().add(shift));
        l.unpack(packed_in, pa, count);
        l.unpack(packed_out, pb, count);
        call_user(&p.inner, pa.cast(), pb.cast(), count, p.datatype);
        let mut back = Vec::with_capacity(bytes);
        l.pack(pb, count, &mut back);
        packed_out.copy_from_slice(&back[..bytes]);
    }
}

/// The program's operations: function and whether it commutes.
fn ops() -> &'static Mutex<HashMap<Handle, (UserOp, bool)>> {
    static OPS: OnceLock<Mutex<HashMap<Handle, (UserOp, bool)>>> = OnceLock::new();
    OPS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Whether operation `o` commutes (every predefined one does; an unknown handle counts as
/// commutative, and is refused where its reduction is built).
pub fn commutes(o: Handle) -> bool {
    ops()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&o)
        .is_none_or(|&(_, c)| c)
}

/// Folds the contributions of every rank (`all`: `n` blocks of `out.len()` bytes in rank
/// order) into `out` in rank order: `out = x0 op (x1 op (... op x(n-1)))`, the order the
/// standard requires of a non-commutative operation.
pub fn fold(red: &Reduction, all: &[u8], out: &mut [u8]) {
    let len = out.len();
    let n = all.len().checked_div(len).unwrap_or(0);
    if n == 0 {
        return;
    }
    out.copy_from_slice(&all[(n - 1) * len..n * len]);
    for i in (0..n - 1).rev() {
        red.combine(&all[i * len..(i + 1) * len], out);
    }
}

static NEXT: AtomicI32 = AtomicI32::new(abi::OP_FIRST_USER);

/// The reduction of operation `o` (predefined or the program's) on datatype `t`.
pub fn reduction(t: Handle, o: Handle) -> Result<Reduction, MpiError> {
    let user = ops()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&o)
        .map(|(f, _)| f.clone());
    // A type of MPI_Type_create_f90_* reduces as the predefined type it copies.
    let t = match (&user, crate::fortran::f90_base(t)) {
        (None, Some(base)) => base,
        _ => t,
    };
    if crate::types::is_derived(t) {
        let l = crate::types::derived(t)?;
        return match user {
            // The standard defines the predefined operations on predefined datatypes only.
            None => Err(MpiError::new(
                err::OP,
                format!("predefined operation {o:#x} is not defined on derived datatype {t:#x}"),
            )),
            Some(f) if l.contiguous() && l.extent > 0 => {
                Ok(user_reduction(f, t, l.extent as usize))
            }
            Some(_) => Err(MpiError::new(
                err::TYPE,
                format!("datatype {t:#x} is not contiguous"),
            )),
        };
    }
    let Some(f) = user else {
        return crate::datatype::reduction(t, o);
    };
    let size = size_of(t)?;
    if size == 0 {
        return Err(MpiError::new(
            err::TYPE,
            format!("datatype {t:#x} has no size"),
        ));
    }
    Ok(user_reduction(f, t, size))
}

/// The program's function as the agent's user reduction on elements of `size` bytes of `t`.
fn user_reduction(f: UserOp, t: Handle, size: usize) -> Reduction {
    Reduction::user(size, move |incoming: &[u8], acc: &mut [u8]| {
        let (inp, out) = (incoming.as_ptr() as *mut c_void, acc.as_mut_ptr().cast());
        // SAFETY: both slices hold `acc.len() / size` whole elements of `t` (packed ones for a
        // stand-in); `incoming` is only read.
        unsafe { call_user(&f, inp, out, acc.len() / size, t) };
    })
}

/// A stand-in operation for the program's operation `op` on datatype `t` of layout `layout`
/// (which has holes): it applies `op` to packed elements of `layout.size` bytes, so a
/// reduction can run on a packed copy of the buffers (see `crate::holesred`). `None` when `op`
/// is not the program's. [`forget`] removes it.
pub(crate) fn packed_op(
    op: Handle,
    t: Handle,
    layout: Arc<crate::types::Layout>,
) -> Option<Handle> {
    let mut ops = ops().lock().unwrap_or_else(|e| e.into_inner());
    let (inner, commute) = ops.get(&op).cloned()?;
    let h = NEXT.fetch_add(1, Ordering::Relaxed);
    let p = PackedOp {
        inner,
        datatype: t,
        layout,
    };
    ops.insert(h, (UserOp::Packed(Arc::new(p)), commute));
    Some(h)
}

/// Whether `op` is one of the program's operations.
pub(crate) fn is_user(op: Handle) -> bool {
    ops()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains_key(&op)
}

/// Removes stand-in operation `h` of [`packed_op`].
pub(crate) fn forget(h: Handle) {
    ops().lock().unwrap_or_else(|e| e.into_inner()).remove(&h);
}

/// Registers the program's operation `f`; writes its handle to `op`.
fn create(f: UserOp, commute: c_int, op: *mut Handle) -> Result<(), MpiError> {
    if op.is_null() {
        return Err(MpiError::new(err::ARG, "op is NULL"));
    }
    let h = NEXT.fetch_add(1, Ordering::Relaxed);
    ops()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(h, (f, commute != 0));
    // SAFETY: the caller's handle, checked not NULL.
    unsafe { put(op, h, "op") }
}

mpi_fn! {
    /// `MPI_Op_create`: a commutative operation runs in the agent's reductions, which combine
    /// contributions in the order they meet; a non-commutative one is combined in rank order
    /// (the contributions gathered, then folded).
    MPI_Op_create / PMPI_Op_create(user_fn: Option<UserFn>, commute: c_int, op: *mut Handle) on abi::COMM_WORLD => {
        let f = user_fn.ok_or_else(|| MpiError::new(err::ARG, "the user function is NULL"))?;
        create(UserOp::Int(f), commute, op)
    }
}

mpi_fn! {
    /// `MPI_Op_create_c`: as `MPI_Op_create`, the function taking an `MPI_Count` length.
    MPI_Op_create_c / PMPI_Op_create_c(user_fn: Option<UserFnC>, commute: c_int, op: *mut Handle) on abi::COMM_WORLD => {
        let f = user_fn.ok_or_else(|| MpiError::new(err::ARG, "the user function is NULL"))?;
        create(UserOp::Large(f), commute, op)
    }
}

mpi_fn! {
    /// `MPI_Op_free`.
    MPI_Op_free / PMPI_Op_free(op: *mut Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's handle.
        let h = unsafe { op.as_mut() }.ok_or_else(|| MpiError::new(err::OP, "op is NULL"))?;
        ops().lock().unwrap_or_else(|e| e.into_inner()).remove(h).ok_or_else(|| {
            MpiError::new(err::OP, format!("{:#x} is not an operation created by MPI_Op_create", *h))
        })?;
        *h = abi::OP_NULL;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Op_commutative`.
    MPI_Op_commutative / PMPI_Op_commutative(op: Handle, commute: *mut c_int) on abi::COMM_WORLD => {
        let user = ops().lock().unwrap_or_else(|e| e.into_inner()).get(&op).map(|&(_, c)| c);
        let c = match user {
            Some(c) => c,
            None if (crate::abi::op::MAX..=crate::abi::op::NO_OP).contains(&op) => true,
            None => return Err(MpiError::new(err::OP, format!("{op:#x} is not an operation"))),
        };
        // SAFETY: the caller's int.
        unsafe { put(commute, c_int::from(c), "commute") }
    }
}

mpi_fn! {
    /// `MPI_Reduce_local`: `inoutbuf = inbuf op inoutbuf`, element by element.
    MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle) on abi::COMM_WORLD => {
        let user = ops().lock().unwrap_or_else(|e| e.into_inner()).get(&op).map(|(f, _)| f.clone());
        if let Some(f) = user {
            // The program's function on the caller's buffers themselves, whatever the
            // datatype's layout (as MPICH).
            if count < 0 {
                return Err(MpiError::new(err::COUNT, format!("count {count} is negative")));
            }
            crate::types::layout(datatype)?;
            if count == 0 {
                return Ok(());
            }
            crate::datatype::check_not_placeholder(inbuf)?;
            crate::datatype::check_not_placeholder(inoutbuf)?;
            if std::ptr::eq(inbuf, inoutbuf.cast_const()) {
                return Err(MpiError::new(err::BUFFER, "inbuf and inoutbuf are the same buffer (aliased arguments)"));
            }
            // SAFETY: the caller's buffers of `count` elements of `datatype`, as
            // MPI_Reduce_local specifies; `inbuf` is only read.
            unsafe { call_user(&f, inbuf.cast_mut(), inoutbuf, count as usize, datatype) };
            return Ok(());
        }
        let len = crate::datatype::bytes(count, datatype)?;
        let red = reduction(datatype, op)?;
        if len > 0 && std::ptr::eq(inbuf, inoutbuf.cast_const()) {
            return Err(MpiError::new(err::BUFFER, "inbuf and inoutbuf are the same buffer (aliased arguments)"));
        }
        // SAFETY: the caller's buffers of `count` elements.
        let (inb, acc) = unsafe { (crate::datatype::input(inbuf, len)?.to_vec(), crate::datatype::output(inoutbuf, len)?) };
        red.combine(&inb, acc);
        Ok(())
    }
}

/// `MPII_Op_set_cxx`: MPICH's C++ library (`libmpichcxx.so.12`) calls this after
/// `MPI_Op_create` for an operation made by `MPI::Op::Init`, so that its function (a C++
/// function of another signature) is called through `opcall`.
///
/// # Safety
///
/// `opcall` is MPICH's `MPIR_Call_op_fn` of the C++ library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPII_Op_set_cxx(op: Handle, opcall: Option<CxxCallFn>) {
    let Some(call) = opcall else { return };
    let mut ops = ops().lock().unwrap_or_else(|e| e.into_inner());
    if let Some((f, _)) = ops.get_mut(&op) {
        if let UserOp::Int(user) = *f {
            *f = UserOp::Cxx(user, call);
        }
    }
}
