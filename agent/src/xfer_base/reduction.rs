//! Reductions of `mop` ops ("MPI operations"): built-in operations on built-in
//! element types, and user functions.

use std::sync::Arc;

use super::error::XferError;

/// Element type of a built-in reduction (native byte order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Datatype {
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl Datatype {
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            Datatype::I32 | Datatype::U32 | Datatype::F32 => 4,
            Datatype::I64 | Datatype::U64 | Datatype::F64 => 8,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Datatype::F32 | Datatype::F64)
    }
}

/// A built-in reduction operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (integers wrap).
    Sum,
    /// Product (integers wrap).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers only).
    Band,
    /// Bitwise or (integers only).
    Bor,
    /// Bitwise exclusive or (integers only).
    Bxor,
}

impl ReduceOp {
    fn is_bitwise(self) -> bool {
        matches!(self, ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor)
    }
}

/// A user reduction: `f(incoming, acc)` combines `incoming` into `acc` in place, both slices
/// holding the same whole number of elements of `elem_size` bytes. It must be associative and
/// commutative (the order in which contributions meet depends on the algorithm). It runs inside
/// the agent's progress pass, with the agent's mutex held: it must not call into the agent,
/// and it should not panic (a panic unwinds through the caller of the pass).
pub type UserFn = Arc<dyn Fn(&[u8], &mut [u8]) + Send + Sync>;

/// The reduction a `mop` op applies: `acc = incoming (op) acc`, element by element.
#[derive(Clone)]
pub enum Reduction {
    /// A built-in operation on a built-in type.
    Builtin(Datatype, ReduceOp),
    /// A user function on elements of `elem_size` bytes.
    User {
        /// Bytes of one element (at least 1).
        elem_size: usize,
        /// The combining function.
        f: UserFn,
    },
}

impl std::fmt::Debug for Reduction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reduction::Builtin(t, o) => write!(f, "{o:?}({t:?})"),
            Reduction::User { elem_size, .. } => write!(f, "user({elem_size} B)"),
        }
    }
}

impl Reduction {
    /// A user reduction on elements of `elem_size` bytes.
    pub fn user(elem_size: usize, f: impl Fn(&[u8], &mut [u8]) + Send + Sync + 'static) -> Self {
        Reduction::User {
            elem_size,
            f: Arc::new(f),
        }
    }

    /// Bytes of one element.
    pub fn elem_size(&self) -> usize {
        match self {
            Reduction::Builtin(t, _) => t.size(),
            Reduction::User { elem_size, .. } => *elem_size,
        }
    }

    /// Checks that the operation applies to the type.
    pub fn check(&self) -> Result<(), XferError> {
        match self {
            Reduction::Builtin(t, o) if o.is_bitwise() && t.is_float() => {
                Err(XferError::BitwiseOnFloat { op: *o, dtype: *t })
            }
            Reduction::User { elem_size: 0, .. } => Err(XferError::ZeroElementSize),
            _ => Ok(()),
        }
    }

    /// `acc = incoming (op) acc`; both hold the same whole number of elements.
    pub fn combine(&self, incoming: &[u8], acc: &mut [u8]) {
        debug_assert_eq!(incoming.len(), acc.len());
        match self {
            Reduction::User { f, .. } => f(incoming, acc),
            Reduction::Builtin(t, o) => builtin(*t, *o, incoming, acc),
        }
    }
}

macro_rules! lanes {
    ($ty:ty, $n:expr, $incoming:expr, $acc:expr, |$a:ident, $b:ident| $e:expr) => {{
        for (x, y) in $incoming.chunks_exact($n).zip($acc.chunks_exact_mut($n)) {
            let $a = <$ty>::from_ne_bytes(x.try_into().unwrap_or([0; $n]));
            let $b = <$ty>::from_ne_bytes((&*y).try_into().unwrap_or([0; $n]));
            y.copy_from_slice(&($e).to_ne_bytes());
        }
    }};
}

macro_rules! int_op {
    ($ty:ty, $n:expr, $op:expr, $i:expr, $acc:expr) => {
        match $op {
            ReduceOp::Sum => lanes!($ty, $n, $i, $acc, |a, b| a.wrapping_add(b)),
            ReduceOp::Prod => lanes!($ty, $n, $i, $acc, |a, b| a.wrapping_mul(b)),
            ReduceOp::Min => lanes!($ty, $n, $i, $acc, |a, b| a.min(b)),
            ReduceOp::Max => lanes!($ty, $n, $i, $acc, |a, b| a.max(b)),
            ReduceOp::Band => lanes!($ty, $n, $i, $acc, |a, b| a & b),
            ReduceOp::Bor => lanes!($ty, $n, $i, $acc, |a, b| a | b),
            ReduceOp::Bxor => lanes!($ty, $n, $i, $acc, |a, b| a ^ b),
        }
    };
}

macro_rules! float_op {
    ($ty:ty, $n:expr, $op:expr, $i:expr, $acc:expr) => {
        match $op {
            ReduceOp::Sum => lanes!($ty, $n, $i, $acc, |a, b| a + b),
            ReduceOp::Prod => lanes!($ty, $n, $i, $acc, |a, b| a * b),
            ReduceOp::Min => lanes!($ty, $n, $i, $acc, |a, b| a.min(b)),
            ReduceOp::Max => lanes!($ty, $n, $i, $acc, |a, b| a.max(b)),
            // Refused by `Reduction::check` before any block starts.
            ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => {}
        }
    };
}

fn builtin(t: Datatype, o: ReduceOp, incoming: &[u8], acc: &mut [u8]) {
    match t {
        Datatype::I32 => int_op!(i32, 4, o, incoming, acc),
        Datatype::I64 => int_op!(i64, 8, o, incoming, acc),
        Datatype::U32 => int_op!(u32, 4, o, incoming, acc),
        Datatype::U64 => int_op!(u64, 8, o, incoming, acc),
        Datatype::F32 => float_op!(f32, 4, o, incoming, acc),
        Datatype::F64 => float_op!(f64, 8, o, incoming, acc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_i32(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    #[test]
    fn builtins_combine_elementwise() {
        let a = bytes_i32(&[1, -5, 7]);
        let mut b = bytes_i32(&[2, 3, -7]);
        Reduction::Builtin(Datatype::I32, ReduceOp::Sum).combine(&a, &mut b);
        assert_eq!(b, bytes_i32(&[3, -2, 0]));
        Reduction::Builtin(Datatype::I32, ReduceOp::Min).combine(&a, &mut b);
        assert_eq!(b, bytes_i32(&[1, -5, 0]));
        let x: Vec<u8> = [1.5f64, 2.0].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let mut y: Vec<u8> = [2.0f64, -1.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        Reduction::Builtin(Datatype::F64, ReduceOp::Prod).combine(&x, &mut y);
        let got: Vec<f64> = y
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, vec![3.0, -2.0]);
    }

    #[test]
    fn bitwise_on_float_is_refused() {
        assert!(matches!(
            Reduction::Builtin(Datatype::F32, ReduceOp::Bxor).check(),
            Err(XferError::BitwiseOnFloat { .. })
        ));
        assert!(
            Reduction::Builtin(Datatype::U64, ReduceOp::Bxor)
                .check()
                .is_ok()
        );
        assert!(Reduction::user(0, |_, _| {}).check().is_err());
    }
}
