//! Reductions on C's `long double` (`MPI_LONG_DOUBLE`, `MPI_LONG_DOUBLE_INT`,
//! `MPI_C_LONG_DOUBLE_COMPLEX`, `MPI_CXX_LONG_DOUBLE_COMPLEX`). On x86-64 a `long double` is
//! the x87 80-bit extended format in 16 bytes; Rust has no such type, so its arithmetic runs
//! on the x87 unit itself, one operation per element, with the full 64-bit significand (no
//! rounding through `f64`). Other targets refuse these reductions with `MPI_ERR_OP`.

use viaduct_agent::coll::Reduction;

use crate::abi::{Handle, dt, op};

/// One `long double` in memory (the low 10 bytes hold the value).
type Ld = [u8; 16];

/// An x87 arithmetic instruction on two `long double`s.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Arith {
    Add,
    Sub,
    Mul,
}

/// `x op y` in extended precision.
#[cfg(target_arch = "x86_64")]
fn arith(x: &Ld, y: &Ld, a: Arith) -> Ld {
    let mut out: Ld = [0; 16];
    macro_rules! x87 {
        ($insn:literal) => {
            // SAFETY: loads the two 10-byte values from the 16-byte arrays, applies one x87
            // instruction and stores the result into `out`'s first 10 bytes; the x87 stack is
            // empty before (the ABI's rule between calls) and after, and both registers used
            // are declared clobbered.
            unsafe {
                std::arch::asm!(
                    "fld tbyte ptr [{x}]",
                    "fld tbyte ptr [{y}]",
                    $insn,
                    "fstp tbyte ptr [{out}]",
                    x = in(reg) x.as_ptr(),
                    y = in(reg) y.as_ptr(),
                    out = in(reg) out.as_mut_ptr(),
                    out("st(0)") _,
                    out("st(1)") _,
                    options(nostack),
                )
            }
        };
    }
    match a {
        // st(1) = st(1) op st(0) = x op y, popped.
        Arith::Add => x87!("faddp st(1), st"),
        Arith::Sub => x87!("fsubp st(1), st"),
        Arith::Mul => x87!("fmulp st(1), st"),
    }
    out
}

/// Whether `x < y` (false when either is a NaN).
#[cfg(target_arch = "x86_64")]
fn less(x: &Ld, y: &Ld) -> bool {
    let below: u8;
    let unordered: u8;
    // SAFETY: loads both values, compares them (`fcomip` sets CF for x < y and PF for an
    // unordered pair, popping one), pops the other; the x87 stack ends empty as it began.
    unsafe {
        std::arch::asm!(
            "fld tbyte ptr [{y}]",
            "fld tbyte ptr [{x}]",
            "fcomip st, st(1)",
            "fstp st(0)",
            "setb {b}",
            "setp {u}",
            x = in(reg) x.as_ptr(),
            y = in(reg) y.as_ptr(),
            b = out(reg_byte) below,
            u = out(reg_byte) unordered,
            out("st(0)") _,
            out("st(1)") _,
            options(nostack),
        )
    };
    below != 0 && unordered == 0
}

/// Whether `x == y` as numbers.
#[cfg(target_arch = "x86_64")]
fn equal(x: &Ld, y: &Ld) -> bool {
    !is_nan(x) && !is_nan(y) && !less(x, y) && !less(y, x)
}

/// Whether `x` is a NaN (exponent all ones, significand other than the integer bit).
#[cfg(target_arch = "x86_64")]
fn is_nan(x: &Ld) -> bool {
    let exp = u16::from_le_bytes([x[8], x[9]]) & 0x7fff;
    let frac = u64::from_le_bytes(x[..8].try_into().unwrap_or([0; 8])) & !(1 << 63);
    exp == 0x7fff && frac != 0
}

/// Whether `x` is zero (of either sign): what C's `x != 0` tests for the logical operations.
#[cfg(target_arch = "x86_64")]
fn is_zero(x: &Ld) -> bool {
    u16::from_le_bytes([x[8], x[9]]) & 0x7fff == 0 && x[..8] == [0; 8]
}

/// 1 or 0 as a `long double`, the result of a logical operation (as C gives it).
#[cfg(target_arch = "x86_64")]
fn truth(b: bool) -> Ld {
    let mut v: Ld = [0; 16];
    if b {
        v[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
        v[8..10].copy_from_slice(&16383u16.to_le_bytes());
    }
    v
}

fn ld(b: &[u8]) -> Ld {
    let mut v: Ld = [0; 16];
    v.copy_from_slice(&b[..16]);
    v
}

/// The reduction of predefined operation `o` on a `long double` type `t`, if the standard
/// defines one (`None`: the operation does not apply, or this target has no x87 unit).
#[cfg(target_arch = "x86_64")]
pub fn reduction(t: Handle, o: Handle) -> Option<Reduction> {
    match t {
        dt::LONG_DOUBLE => {
            let f: fn(&Ld, &Ld) -> Ld = match o {
                op::SUM => |x, y| arith(x, y, Arith::Add),
                op::PROD => |x, y| arith(x, y, Arith::Mul),
                op::MIN => |x, y| if less(x, y) { *x } else { *y },
                op::MAX => |x, y| if less(y, x) { *x } else { *y },
                // MPICH's extension: the logical operations on floating types, as on `float`
                // and `double` (a value is true when it is not zero).
                op::LAND => |x, y| truth(!is_zero(x) && !is_zero(y)),
                op::LOR => |x, y| truth(!is_zero(x) || !is_zero(y)),
                op::LXOR => |x, y| truth(is_zero(x) != is_zero(y)),
                _ => return None,
            };
            Some(Reduction::user(16, move |inc: &[u8], acc: &mut [u8]| {
                for (i, a) in inc.chunks_exact(16).zip(acc.chunks_exact_mut(16)) {
                    a.copy_from_slice(&f(&ld(i), &ld(a)));
                }
            }))
        }
        dt::C_LONG_DOUBLE_COMPLEX | dt::CXX_LONG_DOUBLE_COMPLEX => {
            let prod = match o {
                op::SUM => false,
                op::PROD => true,
                _ => return None,
            };
            Some(Reduction::user(32, move |inc: &[u8], acc: &mut [u8]| {
                for (x, a) in inc.chunks_exact(32).zip(acc.chunks_exact_mut(32)) {
                    let (xr, xi, ar, ai) = (ld(&x[..16]), ld(&x[16..]), ld(&a[..16]), ld(&a[16..]));
                    let (r, i) = if prod {
                        let rr = arith(
                            &arith(&xr, &ar, Arith::Mul),
                            &arith(&xi, &ai, Arith::Mul),
                            Arith::Sub,
                        );
                        let ii = arith(
                            &arith(&xr, &ai, Arith::Mul),
                            &arith(&xi, &ar, Arith::Mul),
                            Arith::Add,
                        );
                        (rr, ii)
                    } else {
                        (arith(&xr, &ar, Arith::Add), arith(&xi, &ai, Arith::Add))
                    };
                    a[..16].copy_from_slice(&r);
                    a[16..].copy_from_slice(&i);
                }
            }))
        }
        dt::LONG_DOUBLE_INT => {
            let max = match o {
                op::MAXLOC => true,
                op::MINLOC => false,
                _ => return None,
            };
            // { long double value at 0; int index at 16 } in 32 bytes.
            Some(Reduction::user(32, move |inc: &[u8], acc: &mut [u8]| {
                for (x, a) in inc.chunks_exact(32).zip(acc.chunks_exact_mut(32)) {
                    let (xv, av) = (ld(&x[..16]), ld(&a[..16]));
                    let idx = |b: &[u8]| i32::from_ne_bytes(b[16..20].try_into().unwrap_or([0; 4]));
                    let take = if equal(&xv, &av) {
                        idx(x) < idx(a)
                    } else if max {
                        less(&av, &xv)
                    } else {
                        less(&xv, &av)
                    };
                    if take {
                        a[..20].copy_from_slice(&x[..20]);
                    }
                }
            }))
        }
        _ => None,
    }
}

/// No `long double` reductions on a target without the x87 unit.
#[cfg(not(target_arch = "x86_64"))]
pub fn reduction(_t: Handle, _o: Handle) -> Option<Reduction> {
    None
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    /// The x87 extended encoding of a small integer `v` > 0.
    fn int(v: u64) -> Ld {
        let shift = v.leading_zeros();
        let mant = v << shift;
        let exp = 16383 + 63 - shift as u16;
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&mant.to_le_bytes());
        b[8..10].copy_from_slice(&exp.to_le_bytes());
        b
    }

    #[test]
    fn arithmetic_and_order_in_extended_precision() {
        assert_eq!(arith(&int(3), &int(4), Arith::Add), int(7));
        assert_eq!(arith(&int(3), &int(4), Arith::Mul), int(12));
        assert_eq!(arith(&int(9), &int(4), Arith::Sub), int(5));
        assert!(less(&int(3), &int(4)) && !less(&int(4), &int(3)) && !less(&int(4), &int(4)));
        assert!(equal(&int(5), &int(5)) && !equal(&int(5), &int(6)));
        // 2^63 + 1 needs the 64-bit significand (an f64 would round it to 2^63).
        let big = int((1 << 63) + 1);
        assert_eq!(arith(&int(1 << 63), &int(1), Arith::Add), big);
    }

    #[test]
    fn logical_operations_give_one_or_zero() {
        let zero: Ld = [0; 16];
        let mut minus_zero = zero;
        minus_zero[9] = 0x80;
        assert_eq!(truth(true), int(1));
        assert!(is_zero(&zero) && is_zero(&minus_zero) && !is_zero(&int(3)));
        let red = reduction(dt::LONG_DOUBLE, op::LXOR).expect("LXOR on long double");
        let mut acc = [int(2), zero, int(5), minus_zero].concat();
        red.combine(&[int(7), int(1), zero, zero].concat(), &mut acc);
        assert_eq!(acc, [zero, int(1), int(1), zero].concat());
    }
}
