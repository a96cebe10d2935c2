//! `MPI_Pack_external`, `MPI_Unpack_external`, `MPI_Pack_external_size`: the portable
//! data representation `"external32"` (MPI 4.1 §13.5.2): big-endian, with the sizes of the
//! standard's table (`MPI_LONG` and `MPI_UNSIGNED_LONG` 4 bytes, `MPI_WCHAR` 2, ...).
//!
//! A datatype is converted element by element of its one predefined type: predefined types,
//! and derived types made of a single predefined type. Derived types mixing predefined types,
//! and the `long double` types (whose external32 form is a 16-byte IEEE quad), are refused with
//! `MPI_ERR_TYPE`.

use std::ffi::{CStr, c_char, c_int, c_void};

use crate::abi::{self, Handle, MpiAint, dt, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::types::{count_arg, layout};

/// One component of a predefined type: native bytes, external32 bytes, signed (for a width
/// change).
type Part = (usize, usize, bool);

/// The components of predefined type `t` in its packed (native) data, in order.
fn parts(t: Handle) -> Result<Vec<Part>, MpiError> {
    let unsupported = || {
        MpiError::new(
            err::TYPE,
            format!(
                "{t:#x}: the long double types have no external32 conversion here (see \
                 docs/MPI.md)"
            ),
        )
    };
    Ok(match t {
        dt::LONG => vec![(8, 4, true)],
        dt::UNSIGNED_LONG => vec![(8, 4, false)],
        dt::WCHAR => vec![(4, 2, false)],
        dt::LONG_INT => vec![(8, 4, true), (4, 4, true)],
        dt::FLOAT_INT | dt::TWO_INT | dt::TWO_INTEGER | dt::TWO_REAL => {
            vec![(4, 4, true), (4, 4, true)]
        }
        dt::DOUBLE_INT => vec![(8, 8, true), (4, 4, true)],
        dt::SHORT_INT => vec![(2, 2, true), (4, 4, true)],
        dt::COMPLEX | dt::COMPLEX8 | dt::C_FLOAT_COMPLEX | dt::CXX_FLOAT_COMPLEX => {
            vec![(4, 4, true), (4, 4, true)]
        }
        dt::DOUBLE_COMPLEX
        | dt::COMPLEX16
        | dt::C_DOUBLE_COMPLEX
        | dt::CXX_DOUBLE_COMPLEX
        | dt::TWO_DOUBLE_PRECISION => vec![(8, 8, true), (8, 8, true)],
        dt::LONG_DOUBLE
        | dt::LONG_DOUBLE_INT
        | dt::REAL16
        | dt::COMPLEX32
        | dt::C_LONG_DOUBLE_COMPLEX
        | dt::CXX_LONG_DOUBLE_COMPLEX => return Err(unsupported()),
        _ => {
            let n = crate::datatype::data_size(t)?;
            vec![(n, n, true)]
        }
    })
}

/// How `count` elements of `datatype` convert: the predefined components of one element's
/// packed data (repeated) and the external32 bytes of all.
struct Plan {
    parts: Vec<Part>,
    native: usize,
    external: usize,
}

fn plan(datatype: Handle, count: usize) -> Result<Plan, MpiError> {
    let l = layout(datatype)?;
    let base = match l.base {
        Some(b) => b,
        None if l.size == 0 => dt::BYTE,
        None => {
            return Err(MpiError::new(
                err::TYPE,
                format!(
                    "{datatype:#x} mixes predefined types; external32 takes datatypes of one \
                     predefined type here (see docs/MPI.md)"
                ),
            ));
        }
    };
    let parts = parts(base)?;
    let native_one: usize = parts.iter().map(|p| p.0).sum();
    let external_one: usize = parts.iter().map(|p| p.1).sum();
    let per = l.size.checked_div(native_one).unwrap_or(0);
    let overflow = || MpiError::new(err::COUNT, "the packed size overflows");
    let elements = per.checked_mul(count).ok_or_else(overflow)?;
    Ok(Plan {
        parts,
        native: l.size.checked_mul(count).ok_or_else(overflow)?,
        external: elements.checked_mul(external_one).ok_or_else(overflow)?,
    })
}

/// Native packed bytes to external32.
fn to_external(p: &Plan, native: &[u8], out: &mut [u8]) -> Result<(), MpiError> {
    let (mut i, mut o) = (0, 0);
    while i < native.len() {
        for &(n, e, signed) in &p.parts {
            let src = &native[i..i + n];
            let dst = &mut out[o..o + e];
            if n == e {
                for k in 0..n {
                    dst[k] = src[n - 1 - k];
                }
            } else {
                let mut b = [0u8; 8];
                b[..n].copy_from_slice(src);
                let v = u64::from_le_bytes(b);
                let fits = match (e, signed) {
                    (4, true) => i32::try_from(v as i64).is_ok(),
                    (4, false) => u32::try_from(v).is_ok(),
                    (2, _) => v <= 0xffff,
                    _ => true,
                };
                if !fits {
                    return Err(MpiError::new(
                        err::CONVERSION,
                        format!("value {v:#x} does not fit the {e} bytes of external32"),
                    ));
                }
                dst.copy_from_slice(&v.to_be_bytes()[8 - e..]);
            }
            i += n;
            o += e;
        }
    }
    Ok(())
}

/// External32 bytes to native packed bytes.
fn from_external(p: &Plan, ext: &[u8], native: &mut [u8]) {
    let (mut i, mut o) = (0, 0);
    while o < native.len() {
        for &(n, e, signed) in &p.parts {
            let src = &ext[i..i + e];
            let dst = &mut native[o..o + n];
            if n == e {
                for k in 0..n {
                    dst[k] = src[n - 1 - k];
                }
            } else {
                let mut b = [0u8; 8];
                b[8 - e..].copy_from_slice(src);
                let mut v = u64::from_be_bytes(b);
                if signed && e < 8 && src[0] & 0x80 != 0 {
                    v |= u64::MAX << (8 * e);
                }
                dst.copy_from_slice(&v.to_le_bytes()[..n]);
            }
            i += e;
            o += n;
        }
    }
}

/// The byte-order conversion between native data and external32 data of the same size (the
/// file views of representation `"external32"`): each predefined component reversed in place.
pub(crate) struct SameSize(Vec<usize>);

impl SameSize {
    /// The conversion of datatype `t`'s data; `MPI_ERR_UNSUPPORTED_DATAREP` when a component's
    /// external32 size differs from its native one (`MPI_LONG`, `MPI_UNSIGNED_LONG`,
    /// `MPI_WCHAR` and the pairs holding them), when `t` mixes predefined types, or for the
    /// `long double` types.
    pub(crate) fn of(t: Handle) -> Result<Self, MpiError> {
        let refuse = |why: String| {
            MpiError::new(
                err::UNSUPPORTED_DATAREP,
                format!(
                    "an \"external32\" file view here takes data whose external32 size equals its \
                     native size, of one predefined type: {why} (see docs/MPI.md)"
                ),
            )
        };
        let l = layout(t)?;
        let base = match l.base {
            Some(b) => b,
            None if l.size == 0 => dt::BYTE,
            None => return Err(refuse(format!("{t:#x} mixes predefined types"))),
        };
        let parts = parts(base).map_err(|e| refuse(e.message))?;
        if parts.iter().any(|p| p.0 != p.1) {
            return Err(refuse(format!(
                "{t:#x} holds a type whose external32 size differs from its native size"
            )));
        }
        Ok(SameSize(parts.into_iter().map(|p| p.0).collect()))
    }

    /// Converts packed `data` (whole components from its start; a partial last one is left
    /// alone) between native and external32 order: the same operation both ways.
    pub(crate) fn convert(&self, data: &mut [u8]) {
        let mut at = 0;
        'all: loop {
            for &n in &self.0 {
                if n == 0 || at + n > data.len() {
                    break 'all;
                }
                data[at..at + n].reverse();
                at += n;
            }
        }
    }
}

/// Checks the data representation: only `"external32"`.
///
/// # Safety
///
/// `datarep` is NULL or a NUL-terminated string.
unsafe fn check_rep(datarep: *const c_char) -> Result<(), MpiError> {
    if datarep.is_null() {
        return Err(MpiError::new(err::ARG, "datarep is NULL"));
    }
    // SAFETY: the caller's string.
    let r = unsafe { CStr::from_ptr(datarep) }.to_string_lossy();
    if r != "external32" {
        return Err(MpiError::new(
            err::UNSUPPORTED_DATAREP,
            format!("data representation {r:?}: only \"external32\" is defined for packing"),
        ));
    }
    Ok(())
}

fn aint_arg(v: MpiAint, what: &str) -> Result<usize, MpiError> {
    usize::try_from(v).map_err(|_| MpiError::new(err::ARG, format!("{what} {v} is negative")))
}

mpi_fn! {
    /// `MPI_Pack_external_size`.
    MPI_Pack_external_size / PMPI_Pack_external_size(datarep: *const c_char, incount: c_int, datatype: Handle, size: *mut MpiAint) on abi::COMM_WORLD => {
        // SAFETY: the caller's string.
        unsafe { check_rep(datarep) }?;
        let p = plan(datatype, count_arg(incount, "incount")?)?;
        // SAFETY: the caller's MPI_Aint.
        unsafe { put(size, p.external as MpiAint, "size") }
    }
}

mpi_fn! {
    /// `MPI_Pack_external`.
    MPI_Pack_external / PMPI_Pack_external(datarep: *const c_char, inbuf: *const c_void, incount: c_int, datatype: Handle, outbuf: *mut c_void, outsize: MpiAint, position: *mut MpiAint) on abi::COMM_WORLD => {
        // SAFETY: the caller's string.
        unsafe { check_rep(datarep) }?;
        let n = count_arg(incount, "incount")?;
        let p = plan(datatype, n)?;
        // SAFETY: the caller's MPI_Aint.
        let pos = unsafe { position.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "position is NULL"))?;
        let at = aint_arg(*pos, "position")?;
        let room = aint_arg(outsize, "outsize")?;
        if at.checked_add(p.external).is_none_or(|end| end > room) {
            return Err(MpiError::new(err::TRUNCATE, format!("{} bytes do not fit at {at} in {room}", p.external)));
        }
        if p.external == 0 {
            return Ok(());
        }
        if inbuf.is_null() || outbuf.is_null() {
            return Err(MpiError::new(err::BUFFER, "a buffer is NULL"));
        }
        let l = layout(datatype)?;
        let mut native = Vec::with_capacity(p.native);
        // SAFETY: the caller's input of `incount` elements of the datatype.
        unsafe { l.pack(inbuf.cast(), n, &mut native) };
        // SAFETY: the caller's output of `outsize` bytes, `at + external` checked to fit.
        let out = unsafe { std::slice::from_raw_parts_mut(outbuf.cast::<u8>().add(at), p.external) };
        to_external(&p, &native, out)?;
        *pos = (at + p.external) as MpiAint;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Unpack_external`.
    MPI_Unpack_external / PMPI_Unpack_external(datarep: *const c_char, inbuf: *const c_void, insize: MpiAint, position: *mut MpiAint, outbuf: *mut c_void, outcount: c_int, datatype: Handle) on abi::COMM_WORLD => {
        // SAFETY: the caller's string.
        unsafe { check_rep(datarep) }?;
        let n = count_arg(outcount, "outcount")?;
        let p = plan(datatype, n)?;
        // SAFETY: the caller's MPI_Aint.
        let pos = unsafe { position.as_mut() }.ok_or_else(|| MpiError::new(err::ARG, "position is NULL"))?;
        let at = aint_arg(*pos, "position")?;
        let size = aint_arg(insize, "insize")?;
        if at.checked_add(p.external).is_none_or(|end| end > size) {
            return Err(MpiError::new(err::TRUNCATE, format!("{} bytes wanted at {at} of {size}", p.external)));
        }
        if p.external == 0 {
            return Ok(());
        }
        if inbuf.is_null() || outbuf.is_null() {
            return Err(MpiError::new(err::BUFFER, "a buffer is NULL"));
        }
        // SAFETY: the caller's input of `insize` bytes, `at + external` checked to fit.
        let ext = unsafe { std::slice::from_raw_parts(inbuf.cast::<u8>().add(at), p.external) };
        let mut native = vec![0u8; p.native];
        from_external(&p, ext, &mut native);
        let l = layout(datatype)?;
        // SAFETY: the caller's output of `outcount` elements of the datatype.
        unsafe { l.unpack(&native, outbuf.cast(), n) };
        *pos = (at + p.external) as MpiAint;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_narrows_to_four_bytes_and_back() {
        let p = plan(dt::LONG, 2).unwrap();
        assert_eq!((p.native, p.external), (16, 8));
        let native: Vec<u8> = [-5i64, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut ext = [0u8; 8];
        to_external(&p, &native, &mut ext).unwrap();
        assert_eq!(ext, [0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 7]);
        let mut back = [0u8; 16];
        from_external(&p, &ext, &mut back);
        assert_eq!(&back[..], &native[..]);
    }

    #[test]
    fn a_long_beyond_four_bytes_is_a_conversion_error() {
        let p = plan(dt::LONG, 1).unwrap();
        let mut ext = [0u8; 4];
        let e = to_external(&p, &(1i64 << 40).to_le_bytes(), &mut ext).unwrap_err();
        assert_eq!(e.class, err::CONVERSION);
    }

    #[test]
    fn pair_types_convert_by_component_and_long_double_is_refused() {
        let p = plan(dt::DOUBLE_INT, 1).unwrap();
        assert_eq!((p.native, p.external), (12, 12));
        let mut native = 1.5f64.to_le_bytes().to_vec();
        native.extend_from_slice(&3i32.to_le_bytes());
        let mut ext = [0u8; 12];
        to_external(&p, &native, &mut ext).unwrap();
        assert_eq!(&ext[..8], &1.5f64.to_be_bytes());
        assert_eq!(&ext[8..], &3i32.to_be_bytes());
        assert_eq!(
            plan(dt::LONG_DOUBLE, 1).err().map(|e| e.class),
            Some(err::TYPE)
        );
    }

    #[test]
    fn same_size_conversion_reverses_each_component_and_refuses_size_changes() {
        let c = SameSize::of(dt::DOUBLE_INT).unwrap();
        let mut v: Vec<u8> = 1.5f64
            .to_le_bytes()
            .into_iter()
            .chain(7i32.to_le_bytes())
            .collect();
        c.convert(&mut v);
        assert_eq!(&v[..8], &1.5f64.to_be_bytes());
        assert_eq!(&v[8..], &7i32.to_be_bytes());
        c.convert(&mut v);
        assert_eq!(&v[..8], &1.5f64.to_le_bytes());
        // A partial last component stays as it is.
        let c = SameSize::of(dt::INT).unwrap();
        let mut v = vec![1, 2, 3, 4, 5, 6];
        c.convert(&mut v);
        assert_eq!(v, vec![4, 3, 2, 1, 5, 6]);
        for t in [dt::LONG, dt::LONG_DOUBLE] {
            let e = SameSize::of(t).err().unwrap();
            assert_eq!(e.class, err::UNSUPPORTED_DATAREP);
        }
    }
}
