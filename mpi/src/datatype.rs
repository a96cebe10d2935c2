//! Predefined datatypes: sizes, buffers, and the reductions of the predefined operations.
//!
//! A predefined type of kind `0x4c` carries its size in bits 8..16 of its handle (MPICH's
//! encoding); the pair types of kind `0x8c` (`MPI_FLOAT_INT`, ...) are listed here. Derived
//! datatypes are not supported yet: their constructors are stubs.

use std::ffi::c_int;

use viaduct_agent::coll::{Datatype, ReduceOp, Reduction};

use crate::abi::{Handle, dt, err, op};
use crate::error::MpiError;

/// The extent in bytes of predefined datatype `t`: what one element takes in memory, and
/// what this library moves per element (the pair types include their padding).
pub fn size_of(t: Handle) -> Result<usize, MpiError> {
    let u = t as u32;
    let size = match t {
        dt::FLOAT_INT => 8,
        dt::DOUBLE_INT | dt::LONG_INT => 16,
        dt::SHORT_INT => 8,
        dt::LONG_DOUBLE_INT => 32,
        dt::LB | dt::UB => 0,
        _ if u & 0xff00_0000 == 0x4c00_0000 => ((u >> 8) & 0xff) as usize,
        _ if t == crate::abi::DATATYPE_NULL => {
            return Err(MpiError::new(
                err::TYPE,
                "the datatype is MPI_DATATYPE_NULL",
            ));
        }
        _ => {
            return Err(MpiError::new(
                err::TYPE,
                format!("{t:#x} is not a predefined datatype"),
            ));
        }
    };
    Ok(size)
}

/// The size in bytes of the data of predefined datatype `t` (`MPI_Type_size`: the pair types
/// without their padding).
pub fn data_size(t: Handle) -> Result<usize, MpiError> {
    Ok(match t {
        dt::FLOAT_INT => 8,
        dt::DOUBLE_INT | dt::LONG_INT => 12,
        dt::SHORT_INT => 6,
        dt::LONG_DOUBLE_INT => 20,
        _ => size_of(t)?,
    })
}

/// Bytes of `count` elements of `t` laid out contiguously (`MPI_ERR_COUNT` for a negative
/// count or an overflow; `MPI_ERR_TYPE` for a derived datatype with holes, which only
/// point-to-point calls take). No elements of `MPI_DATATYPE_NULL` are no bytes, as MPICH takes
/// them (`MPI_Send(NULL, 0, MPI_DATATYPE_NULL, ...)`).
pub fn bytes(count: c_int, t: Handle) -> Result<usize, MpiError> {
    if count < 0 {
        return Err(MpiError::new(
            err::COUNT,
            format!("count {count} is negative"),
        ));
    }
    if count == 0 && t == crate::abi::DATATYPE_NULL {
        return Ok(0);
    }
    let size = if crate::types::is_derived(t) {
        let l = crate::types::derived(t)?;
        if !l.contiguous() {
            return Err(MpiError::new(
                err::TYPE,
                format!(
                    "datatype {t:#x} is not contiguous (only point-to-point calls, file I/O and \
                     MPI_Pack/MPI_Unpack take such datatypes)"
                ),
            ));
        }
        l.extent as usize
    } else {
        size_of(t)?
    };
    (count as usize)
        .checked_mul(size)
        .ok_or_else(|| MpiError::new(err::COUNT, format!("{count} elements overflow")))
}

/// The caller's buffer of `len` bytes at `ptr`, for reading.
///
/// # Safety
///
/// `ptr` must point to `len` readable bytes (any value when `len` is 0).
pub unsafe fn input<'a>(ptr: *const std::ffi::c_void, len: usize) -> Result<&'a [u8], MpiError> {
    if len == 0 {
        return Ok(&[]);
    }
    check_not_placeholder(ptr)?;
    // SAFETY: the caller guarantees `len` readable bytes at `ptr`, which is not null.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// Refuses NULL and the `MPI_IN_PLACE` placeholder where a call needs a real buffer
/// (`MPI_ERR_BUFFER`), so neither is ever read or written.
pub(crate) fn check_not_placeholder<T>(ptr: *const T) -> Result<(), MpiError> {
    if ptr.is_null() {
        return Err(MpiError::new(err::BUFFER, "the buffer is NULL"));
    }
    if ptr as usize == crate::abi::IN_PLACE {
        return Err(MpiError::new(
            err::BUFFER,
            "MPI_IN_PLACE is not allowed for this buffer",
        ));
    }
    Ok(())
}

/// The caller's buffer of `len` bytes at `ptr`, for writing.
///
/// # Safety
///
/// `ptr` must point to `len` writable bytes that nothing else accesses meanwhile.
pub unsafe fn output<'a>(ptr: *mut std::ffi::c_void, len: usize) -> Result<&'a mut [u8], MpiError> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_not_placeholder(ptr)?;
    // SAFETY: the caller guarantees `len` writable bytes at `ptr`, not null, not aliased.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    Float,
    Bool,
    Byte,
    Pair,
    Complex,
    Other,
}

/// Whether `MPI_Compare_and_swap` takes predefined datatype `t`: a C or Fortran integer
/// (characters included, as in MPICH), a logical, `MPI_BYTE` or a multi-language type
/// (`MPI_AINT`, `MPI_OFFSET`, `MPI_COUNT`); not a floating-point, complex, pair or derived one.
pub(crate) fn swappable(t: Handle) -> bool {
    matches!(kind(t), Kind::Int | Kind::Bool | Kind::Byte)
}

fn kind(t: Handle) -> Kind {
    match t {
        dt::CHAR
        | dt::SIGNED_CHAR
        | dt::UNSIGNED_CHAR
        | dt::SHORT
        | dt::UNSIGNED_SHORT
        | dt::INT
        | dt::UNSIGNED
        | dt::LONG
        | dt::UNSIGNED_LONG
        | dt::LONG_LONG
        | dt::UNSIGNED_LONG_LONG
        | dt::INT8_T
        | dt::INT16_T
        | dt::INT32_T
        | dt::INT64_T
        | dt::UINT8_T
        | dt::UINT16_T
        | dt::UINT32_T
        | dt::UINT64_T
        | dt::AINT
        | dt::OFFSET
        | dt::COUNT
        | dt::WCHAR
        | dt::INTEGER
        | dt::INTEGER1
        | dt::INTEGER2
        | dt::INTEGER4
        | dt::INTEGER8 => Kind::Int,
        dt::FLOAT | dt::DOUBLE | dt::REAL | dt::DOUBLE_PRECISION | dt::REAL4 | dt::REAL8 => {
            Kind::Float
        }
        dt::C_BOOL | dt::CXX_BOOL | dt::LOGICAL => Kind::Bool,
        dt::BYTE => Kind::Byte,
        dt::FLOAT_INT
        | dt::DOUBLE_INT
        | dt::LONG_INT
        | dt::SHORT_INT
        | dt::TWO_INT
        | dt::LONG_DOUBLE_INT
        | dt::TWO_INTEGER
        | dt::TWO_REAL
        | dt::TWO_DOUBLE_PRECISION => Kind::Pair,
        dt::C_FLOAT_COMPLEX
        | dt::COMPLEX
        | dt::COMPLEX8
        | dt::CXX_FLOAT_COMPLEX
        | dt::C_DOUBLE_COMPLEX
        | dt::DOUBLE_COMPLEX
        | dt::COMPLEX16
        | dt::CXX_DOUBLE_COMPLEX => Kind::Complex,
        _ => Kind::Other,
    }
}

fn unsigned(t: Handle) -> bool {
    matches!(
        t,
        dt::UNSIGNED_CHAR
            | dt::UNSIGNED_SHORT
            | dt::UNSIGNED
            | dt::UNSIGNED_LONG
            | dt::UNSIGNED_LONG_LONG
            | dt::UINT8_T
            | dt::UINT16_T
            | dt::UINT32_T
            | dt::UINT64_T
            | dt::WCHAR
    )
}

/// Elementwise integer reduction on `N`-byte little-endian elements.
macro_rules! int_red {
    ($ty:ty, $f:expr) => {{
        const N: usize = std::mem::size_of::<$ty>();
        Reduction::user(N, move |inc: &[u8], acc: &mut [u8]| {
            // Bound here, not captured: a constant the compiler inlines (and vectorises).
            let f: fn($ty, $ty) -> $ty = $f;
            for (i, a) in inc.chunks_exact(N).zip(acc.chunks_exact_mut(N)) {
                let x = <$ty>::from_ne_bytes(i.try_into().unwrap_or([0; N]));
                let y = <$ty>::from_ne_bytes((&*a).try_into().unwrap_or([0; N]));
                a.copy_from_slice(&f(x, y).to_ne_bytes());
            }
        })
    }};
}

/// The reduction for `op` over elements of an integer type `$ty`.
macro_rules! int_op {
    ($ty:ty, $op:expr) => {
        match $op {
            op::SUM => Some(int_red!($ty, |x, y| x.wrapping_add(y))),
            op::PROD => Some(int_red!($ty, |x, y| x.wrapping_mul(y))),
            op::MIN => Some(int_red!($ty, |x, y| x.min(y))),
            op::MAX => Some(int_red!($ty, |x, y| x.max(y))),
            op::BAND => Some(int_red!($ty, |x, y| x & y)),
            op::BOR => Some(int_red!($ty, |x, y| x | y)),
            op::BXOR => Some(int_red!($ty, |x, y| x ^ y)),
            op::LAND => Some(int_red!($ty, |x, y| <$ty>::from(x != 0 && y != 0))),
            op::LOR => Some(int_red!($ty, |x, y| <$ty>::from(x != 0 || y != 0))),
            op::LXOR => Some(int_red!($ty, |x, y| <$ty>::from((x != 0) != (y != 0)))),
            _ => None,
        }
    };
}

/// Elementwise float reduction.
macro_rules! float_op {
    ($ty:ty, $op:expr) => {{
        const N: usize = std::mem::size_of::<$ty>();
        let f: Option<fn($ty, $ty) -> $ty> = match $op {
            op::LAND => Some(|x, y| <$ty>::from(u8::from(x != 0.0 && y != 0.0))),
            op::LOR => Some(|x, y| <$ty>::from(u8::from(x != 0.0 || y != 0.0))),
            op::LXOR => Some(|x, y| <$ty>::from(u8::from((x != 0.0) != (y != 0.0)))),
            _ => None,
        };
        f.map(|f| {
            Reduction::user(N, move |inc: &[u8], acc: &mut [u8]| {
                for (i, a) in inc.chunks_exact(N).zip(acc.chunks_exact_mut(N)) {
                    let x = <$ty>::from_ne_bytes(i.try_into().unwrap_or([0; N]));
                    let y = <$ty>::from_ne_bytes((&*a).try_into().unwrap_or([0; N]));
                    a.copy_from_slice(&f(x, y).to_ne_bytes());
                }
            })
        })
    }};
}

/// `MPI_SUM` and `MPI_PROD` on complex numbers of two `$ty` parts (real, imaginary), the only
/// predefined operations the standard defines on complex types.
macro_rules! complex_op {
    ($ty:ty, $op:expr) => {{
        const N: usize = std::mem::size_of::<$ty>();
        let prod = match $op {
            op::SUM => Some(false),
            op::PROD => Some(true),
            _ => None,
        };
        prod.map(|prod| {
            Reduction::user(2 * N, move |inc: &[u8], acc: &mut [u8]| {
                let part = |b: &[u8], i: usize| {
                    <$ty>::from_ne_bytes(b[i * N..(i + 1) * N].try_into().unwrap_or([0; N]))
                };
                for (x, a) in inc.chunks_exact(2 * N).zip(acc.chunks_exact_mut(2 * N)) {
                    let (xr, xi, ar, ai) = (part(x, 0), part(x, 1), part(a, 0), part(a, 1));
                    let (r, i) = if prod {
                        (xr * ar - xi * ai, xr * ai + xi * ar)
                    } else {
                        (xr + ar, xi + ai)
                    };
                    a[..N].copy_from_slice(&r.to_ne_bytes());
                    a[N..].copy_from_slice(&i.to_ne_bytes());
                }
            })
        })
    }};
}

/// MAXLOC/MINLOC on pairs `{ value: V at 0, index: I at offset }` of `size` bytes: the better
/// value wins, equal values keep the smaller index.
macro_rules! loc_op {
    ($v:ty, $i:ty, $off:expr, $size:expr, $max:expr) => {{
        const V: usize = std::mem::size_of::<$v>();
        const I: usize = std::mem::size_of::<$i>();
        let max: bool = $max;
        Reduction::user($size, move |inc: &[u8], acc: &mut [u8]| {
            for (x, a) in inc.chunks_exact($size).zip(acc.chunks_exact_mut($size)) {
                let xv = <$v>::from_ne_bytes(x[..V].try_into().unwrap_or([0; V]));
                let av = <$v>::from_ne_bytes(a[..V].try_into().unwrap_or([0; V]));
                let xi = <$i>::from_ne_bytes(x[$off..$off + I].try_into().unwrap_or([0; I]));
                let ai = <$i>::from_ne_bytes(a[$off..$off + I].try_into().unwrap_or([0; I]));
                let take = if xv == av {
                    xi < ai
                } else if max {
                    xv > av
                } else {
                    xv < av
                };
                if take {
                    a[..V].copy_from_slice(&x[..V]);
                    a[$off..$off + I].copy_from_slice(&x[$off..$off + I]);
                }
            }
        })
    }};
}

/// The reduction of predefined operation `o` on predefined datatype `t` (`MPI_ERR_OP` when the
/// operation does not apply to the type, `MPI_ERR_TYPE` for a type no reduction applies to).
pub fn reduction(t: Handle, o: Handle) -> Result<Reduction, MpiError> {
    let size = size_of(t)?;
    let k = kind(t);
    let bad_op = || {
        MpiError::new(
            err::OP,
            format!("operation {o:#x} does not apply to datatype {t:#x}"),
        )
    };
    if o == crate::abi::OP_NULL {
        return Err(MpiError::new(err::OP, "the operation is MPI_OP_NULL"));
    }
    if !(op::MAX..=op::NO_OP).contains(&o) {
        return Err(MpiError::new(
            err::OP,
            format!("{o:#x} is not a predefined operation (user operations are not supported)"),
        ));
    }
    if matches!(
        t,
        dt::LONG_DOUBLE
            | dt::LONG_DOUBLE_INT
            | dt::C_LONG_DOUBLE_COMPLEX
            | dt::CXX_LONG_DOUBLE_COMPLEX
    ) {
        return crate::longdouble::reduction(t, o).ok_or_else(bad_op);
    }
    if o == op::MAXLOC || o == op::MINLOC {
        let max = o == op::MAXLOC;
        return match t {
            dt::TWO_INT | dt::TWO_INTEGER => Ok(loc_op!(i32, i32, 4, 8, max)),
            dt::FLOAT_INT => Ok(loc_op!(f32, i32, 4, 8, max)),
            dt::DOUBLE_INT => Ok(loc_op!(f64, i32, 8, 16, max)),
            dt::LONG_INT => Ok(loc_op!(i64, i32, 8, 16, max)),
            dt::SHORT_INT => Ok(loc_op!(i16, i32, 4, 8, max)),
            dt::TWO_REAL => Ok(loc_op!(f32, f32, 4, 8, max)),
            dt::TWO_DOUBLE_PRECISION => Ok(loc_op!(f64, f64, 8, 16, max)),
            _ => Err(bad_op()),
        };
    }
    if matches!(o, op::REPLACE | op::NO_OP) {
        return Err(bad_op());
    }
    let builtin = |d: Datatype| -> Option<Reduction> {
        let r = match o {
            op::SUM => ReduceOp::Sum,
            op::PROD => ReduceOp::Prod,
            op::MIN => ReduceOp::Min,
            op::MAX => ReduceOp::Max,
            op::BAND => ReduceOp::Band,
            op::BOR => ReduceOp::Bor,
            op::BXOR => ReduceOp::Bxor,
            _ => return None,
        };
        Some(Reduction::Builtin(d, r))
    };
    let found = match (k, size, unsigned(t)) {
        (Kind::Int, 4, false) => builtin(Datatype::I32).or_else(|| int_op!(i32, o)),
        (Kind::Int, 8, false) => builtin(Datatype::I64).or_else(|| int_op!(i64, o)),
        (Kind::Int, 4, true) => builtin(Datatype::U32).or_else(|| int_op!(u32, o)),
        (Kind::Int, 8, true) => builtin(Datatype::U64).or_else(|| int_op!(u64, o)),
        (Kind::Int, 1, false) => int_op!(i8, o),
        (Kind::Int, 1, true) => int_op!(u8, o),
        (Kind::Int, 2, false) => int_op!(i16, o),
        (Kind::Int, 2, true) => int_op!(u16, o),
        (Kind::Float, 4, _) if matches!(o, op::SUM | op::PROD | op::MIN | op::MAX) => {
            builtin(Datatype::F32)
        }
        (Kind::Float, 8, _) if matches!(o, op::SUM | op::PROD | op::MIN | op::MAX) => {
            builtin(Datatype::F64)
        }
        (Kind::Float, 4, _) => float_op!(f32, o),
        (Kind::Float, 8, _) => float_op!(f64, o),
        (Kind::Bool, 1, _) if matches!(o, op::LAND | op::LOR | op::LXOR) => int_op!(u8, o),
        (Kind::Bool, 4, _) if matches!(o, op::LAND | op::LOR | op::LXOR) => int_op!(u32, o),
        (Kind::Byte, 1, _) if matches!(o, op::BAND | op::BOR | op::BXOR) => int_op!(u8, o),
        (Kind::Complex, 8, _) => complex_op!(f32, o),
        (Kind::Complex, 16, _) => complex_op!(f64, o),
        _ => None,
    };
    found.ok_or_else(bad_op)
}
