//! The MPICH ABI: handle values, constants and the status layout, as Debian's MPICH 4.0
//! `mpi.h` (package `libmpich-dev`, `/usr/include/x86_64-linux-gnu/mpich/mpi.h`) defines them.
//! Every value here is copied from that header; `mpi/tests/abi.rs` compiles a C program
//! against the header and checks each one.

use std::ffi::{c_int, c_long};

/// `MPI_Aint` (`typedef long MPI_Aint`).
pub type MpiAint = c_long;
/// `MPI_Count` (`typedef long MPI_Count`).
pub type MpiCount = c_long;
/// `MPI_Offset` (`typedef long MPI_Offset`).
pub type MpiOffset = c_long;
/// `MPI_Comm`, `MPI_Datatype`, `MPI_Op`, `MPI_Request`, `MPI_Errhandler`, `MPI_Group`:
/// plain `int` handles.
pub type Handle = c_int;

/// `MPI_Status`: `{ count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR }`.
/// The byte count is `count_lo` (low 32 bits) and `count_hi_and_cancelled >> 1` (high bits);
/// bit 0 of `count_hi_and_cancelled` is the cancelled flag.
///
/// ```
/// use viaduct_mpi::abi::MpiStatus;
/// let mut st = MpiStatus::default();
/// st.set_count((5 << 32) + 7);
/// assert_eq!((st.count_lo, st.count_hi_and_cancelled), (7, 5 << 1));
/// ```
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MpiStatus {
    /// Low 32 bits of the byte count.
    pub count_lo: c_int,
    /// High bits of the byte count, shifted left by one; bit 0: cancelled.
    pub count_hi_and_cancelled: c_int,
    /// Source rank.
    pub source: c_int,
    /// Tag.
    pub tag: c_int,
    /// Error code (set by the `*all`/`*some` calls that return `MPI_ERR_IN_STATUS`).
    pub error: c_int,
}

impl MpiStatus {
    /// The byte count.
    ///
    /// ```
    /// # use viaduct_mpi::abi::MpiStatus;
    /// let st = MpiStatus { count_lo: 12, ..MpiStatus::default() };
    /// assert_eq!(st.count(), 12);
    /// ```
    pub fn count(&self) -> i64 {
        let hi = u64::from((self.count_hi_and_cancelled as u32) >> 1);
        ((hi << 32) | u64::from(self.count_lo as u32)) as i64
    }

    /// Sets the byte count, keeping the cancelled flag.
    ///
    /// ```
    /// # use viaduct_mpi::abi::MpiStatus;
    /// let mut st = MpiStatus::default();
    /// st.set_cancelled(true);
    /// st.set_count(1 << 40);
    /// assert_eq!(st.count(), 1 << 40);
    /// assert!(st.cancelled()); // kept
    /// ```
    pub fn set_count(&mut self, count: i64) {
        let c = count as u64;
        self.count_lo = c as u32 as c_int;
        self.count_hi_and_cancelled =
            (self.count_hi_and_cancelled & 1) | (((c >> 32) << 1) as u32 as c_int);
    }

    /// Whether the cancelled flag is set.
    ///
    /// ```
    /// # use viaduct_mpi::abi::MpiStatus;
    /// let st = MpiStatus { count_hi_and_cancelled: 1, ..MpiStatus::default() };
    /// assert!(st.cancelled() && st.count() == 0);
    /// ```
    pub fn cancelled(&self) -> bool {
        self.count_hi_and_cancelled & 1 != 0
    }

    /// Sets the cancelled flag.
    ///
    /// ```
    /// # use viaduct_mpi::abi::MpiStatus;
    /// let mut st = MpiStatus::default();
    /// st.set_cancelled(true);
    /// assert_eq!(st.count_hi_and_cancelled, 1);
    /// ```
    pub fn set_cancelled(&mut self, cancelled: bool) {
        self.count_hi_and_cancelled = (self.count_hi_and_cancelled & !1) | c_int::from(cancelled);
    }

    /// The status of an empty request (`MPI_ANY_SOURCE`, `MPI_ANY_TAG`, no bytes), what a wait
    /// on `MPI_REQUEST_NULL` or an inactive request reports.
    ///
    /// ```
    /// use viaduct_mpi::abi::{self, MpiStatus};
    /// let st = MpiStatus::empty();
    /// assert_eq!((st.source, st.tag, st.count()), (abi::ANY_SOURCE, abi::ANY_TAG, 0));
    /// ```
    pub fn empty() -> Self {
        MpiStatus {
            count_lo: 0,
            count_hi_and_cancelled: 0,
            source: ANY_SOURCE,
            tag: ANY_TAG,
            error: SUCCESS,
        }
    }
}

/// `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE` (`(MPI_Status *)1`).
pub const STATUS_IGNORE: usize = 1;
/// `MPI_IN_PLACE` (`(void *)-1`).
pub const IN_PLACE: usize = usize::MAX;

/// `MPI_COMM_NULL`.
pub const COMM_NULL: Handle = 0x0400_0000;
/// `MPI_COMM_WORLD`.
pub const COMM_WORLD: Handle = 0x4400_0000;
/// `MPI_COMM_SELF`.
pub const COMM_SELF: Handle = 0x4400_0001;
/// First handle given to a communicator the program creates (MPICH's kind bits of a
/// communicator, `0x84000000`, plus an index).
pub const COMM_FIRST_USER: Handle = 0x8400_0000u32 as Handle;
/// `MPI_GROUP_NULL`.
pub const GROUP_NULL: Handle = 0x0800_0000;
/// `MPI_GROUP_EMPTY`.
pub const GROUP_EMPTY: Handle = 0x4800_0000;
/// First handle given to a group the program creates (MPICH's kind bits of a group,
/// `0x88000000`, plus an index).
pub const GROUP_FIRST_USER: Handle = 0x8800_0000u32 as Handle;
/// First handle given to an operation the program creates (`0x98000000` plus an index).
pub const OP_FIRST_USER: Handle = 0x9800_0000u32 as Handle;
/// `MPI_DATATYPE_NULL`.
pub const DATATYPE_NULL: Handle = 0x0c00_0000;
/// `MPI_REQUEST_NULL`.
pub const REQUEST_NULL: Handle = 0x2c00_0000;
/// `MPI_OP_NULL`.
pub const OP_NULL: Handle = 0x1800_0000;
/// `MPI_ERRHANDLER_NULL`.
pub const ERRHANDLER_NULL: Handle = 0x1400_0000;
/// `MPI_ERRORS_ARE_FATAL`.
pub const ERRORS_ARE_FATAL: Handle = 0x5400_0000;
/// `MPI_ERRORS_RETURN`.
pub const ERRORS_RETURN: Handle = 0x5400_0001;
/// `MPIR_ERRORS_THROW_EXCEPTIONS` (MPICH's C++ `MPI::ERRORS_THROW_EXCEPTIONS`): to the C
/// interface it is `MPI_ERRORS_RETURN`; MPICH's C++ library throws on the code returned.
pub const ERRORS_THROW_EXCEPTIONS: Handle = 0x5400_0002;
/// `MPI_ERRORS_ABORT`.
pub const ERRORS_ABORT: Handle = 0x5400_0003;

/// `MPI_IDENT`.
pub const IDENT: c_int = 0;
/// `MPI_CONGRUENT`.
pub const CONGRUENT: c_int = 1;
/// `MPI_SIMILAR`.
pub const SIMILAR: c_int = 2;
/// `MPI_UNEQUAL`.
pub const UNEQUAL: c_int = 3;

/// `MPI_PROC_NULL`.
pub const PROC_NULL: c_int = -1;
/// `MPI_ANY_SOURCE`.
pub const ANY_SOURCE: c_int = -2;
/// `MPI_ROOT`.
pub const ROOT: c_int = -3;
/// `MPI_ANY_TAG`.
pub const ANY_TAG: c_int = -1;
/// `MPI_UNDEFINED`.
pub const UNDEFINED: c_int = -32766;

/// `MPI_MAX_PROCESSOR_NAME`.
pub const MAX_PROCESSOR_NAME: usize = 128;
/// `MPI_MAX_LIBRARY_VERSION_STRING`.
pub const MAX_LIBRARY_VERSION_STRING: usize = 8192;
/// `MPI_MAX_ERROR_STRING`.
pub const MAX_ERROR_STRING: usize = 512;

/// `MPI_VERSION`.
pub const VERSION: c_int = 4;
/// `MPI_SUBVERSION`.
pub const SUBVERSION: c_int = 0;

/// `MPI_THREAD_SINGLE`.
pub const THREAD_SINGLE: c_int = 0;
/// `MPI_THREAD_FUNNELED`.
pub const THREAD_FUNNELED: c_int = 1;
/// `MPI_THREAD_SERIALIZED`.
pub const THREAD_SERIALIZED: c_int = 2;
/// `MPI_THREAD_MULTIPLE`.
pub const THREAD_MULTIPLE: c_int = 3;

/// `MPI_TAG_UB` (attribute key).
pub const KEY_TAG_UB: c_int = 0x6440_0001;
/// `MPI_HOST` (attribute key).
pub const KEY_HOST: c_int = 0x6440_0003;
/// `MPI_IO` (attribute key).
pub const KEY_IO: c_int = 0x6440_0005;
/// `MPI_WTIME_IS_GLOBAL` (attribute key).
pub const KEY_WTIME_IS_GLOBAL: c_int = 0x6440_0007;
/// `MPI_UNIVERSE_SIZE` (attribute key).
pub const KEY_UNIVERSE_SIZE: c_int = 0x6440_0009;
/// `MPI_APPNUM` (attribute key).
pub const KEY_APPNUM: c_int = 0x6440_000d;
/// `MPI_LASTUSEDCODE` (attribute key).
pub const KEY_LASTUSEDCODE: c_int = 0x6440_000b;

/// The largest tag this library accepts (the value of the `MPI_TAG_UB` attribute).
pub const TAG_UB: c_int = 0x7fff_ffff;

/// Predefined operations (`MPI_MAX` ... `MPI_NO_OP`).
pub mod op {
    use super::Handle;
    /// `MPI_MAX`.
    pub const MAX: Handle = 0x5800_0001;
    /// `MPI_MIN`.
    pub const MIN: Handle = 0x5800_0002;
    /// `MPI_SUM`.
    pub const SUM: Handle = 0x5800_0003;
    /// `MPI_PROD`.
    pub const PROD: Handle = 0x5800_0004;
    /// `MPI_LAND`.
    pub const LAND: Handle = 0x5800_0005;
    /// `MPI_BAND`.
    pub const BAND: Handle = 0x5800_0006;
    /// `MPI_LOR`.
    pub const LOR: Handle = 0x5800_0007;
    /// `MPI_BOR`.
    pub const BOR: Handle = 0x5800_0008;
    /// `MPI_LXOR`.
    pub const LXOR: Handle = 0x5800_0009;
    /// `MPI_BXOR`.
    pub const BXOR: Handle = 0x5800_000a;
    /// `MPI_MINLOC`.
    pub const MINLOC: Handle = 0x5800_000b;
    /// `MPI_MAXLOC`.
    pub const MAXLOC: Handle = 0x5800_000c;
    /// `MPI_REPLACE`.
    pub const REPLACE: Handle = 0x5800_000d;
    /// `MPI_NO_OP`.
    pub const NO_OP: Handle = 0x5800_000e;
}

/// Predefined datatypes. A predefined type of kind `0x4c` carries its size in bytes in bits
/// 8..16 of its handle; the pair types of kind `0x8c` do not.
#[allow(missing_docs)]
pub mod dt {
    use super::Handle;
    pub const CHAR: Handle = 0x4c00_0101;
    pub const SIGNED_CHAR: Handle = 0x4c00_0118;
    pub const UNSIGNED_CHAR: Handle = 0x4c00_0102;
    pub const BYTE: Handle = 0x4c00_010d;
    pub const WCHAR: Handle = 0x4c00_040e;
    pub const SHORT: Handle = 0x4c00_0203;
    pub const UNSIGNED_SHORT: Handle = 0x4c00_0204;
    pub const INT: Handle = 0x4c00_0405;
    pub const UNSIGNED: Handle = 0x4c00_0406;
    pub const LONG: Handle = 0x4c00_0807;
    pub const UNSIGNED_LONG: Handle = 0x4c00_0808;
    pub const FLOAT: Handle = 0x4c00_040a;
    pub const DOUBLE: Handle = 0x4c00_080b;
    pub const LONG_DOUBLE: Handle = 0x4c00_100c;
    pub const LONG_LONG: Handle = 0x4c00_0809;
    pub const UNSIGNED_LONG_LONG: Handle = 0x4c00_0819;
    pub const PACKED: Handle = 0x4c00_010f;
    pub const LB: Handle = 0x4c00_0010;
    pub const UB: Handle = 0x4c00_0011;
    pub const FLOAT_INT: Handle = 0x8c00_0000u32 as Handle;
    pub const DOUBLE_INT: Handle = 0x8c00_0001u32 as Handle;
    pub const LONG_INT: Handle = 0x8c00_0002u32 as Handle;
    pub const SHORT_INT: Handle = 0x8c00_0003u32 as Handle;
    pub const TWO_INT: Handle = 0x4c00_0816;
    pub const LONG_DOUBLE_INT: Handle = 0x8c00_0004u32 as Handle;
    pub const COMPLEX: Handle = 0x4c00_081e;
    pub const DOUBLE_COMPLEX: Handle = 0x4c00_1022;
    pub const LOGICAL: Handle = 0x4c00_041d;
    pub const REAL: Handle = 0x4c00_041c;
    pub const DOUBLE_PRECISION: Handle = 0x4c00_081f;
    pub const INTEGER: Handle = 0x4c00_041b;
    pub const TWO_INTEGER: Handle = 0x4c00_0820;
    pub const TWO_REAL: Handle = 0x4c00_0821;
    pub const TWO_DOUBLE_PRECISION: Handle = 0x4c00_1023;
    pub const CHARACTER: Handle = 0x4c00_011a;
    pub const REAL4: Handle = 0x4c00_0427;
    pub const REAL8: Handle = 0x4c00_0829;
    pub const REAL16: Handle = 0x4c00_102b;
    pub const COMPLEX8: Handle = 0x4c00_0828;
    pub const COMPLEX16: Handle = 0x4c00_102a;
    pub const COMPLEX32: Handle = 0x4c00_202c;
    pub const INTEGER1: Handle = 0x4c00_012d;
    pub const INTEGER2: Handle = 0x4c00_022f;
    pub const INTEGER4: Handle = 0x4c00_0430;
    pub const INTEGER8: Handle = 0x4c00_0831;
    pub const INT8_T: Handle = 0x4c00_0137;
    pub const INT16_T: Handle = 0x4c00_0238;
    pub const INT32_T: Handle = 0x4c00_0439;
    pub const INT64_T: Handle = 0x4c00_083a;
    pub const UINT8_T: Handle = 0x4c00_013b;
    pub const UINT16_T: Handle = 0x4c00_023c;
    pub const UINT32_T: Handle = 0x4c00_043d;
    pub const UINT64_T: Handle = 0x4c00_083e;
    pub const C_BOOL: Handle = 0x4c00_013f;
    pub const C_FLOAT_COMPLEX: Handle = 0x4c00_0840;
    pub const C_DOUBLE_COMPLEX: Handle = 0x4c00_1041;
    pub const C_LONG_DOUBLE_COMPLEX: Handle = 0x4c00_2042;
    pub const FLOAT16: Handle = 0x4c00_0246;
    pub const AINT: Handle = 0x4c00_0843;
    pub const OFFSET: Handle = 0x4c00_0844;
    pub const COUNT: Handle = 0x4c00_0845;
    pub const CXX_BOOL: Handle = 0x4c00_0133;
    pub const CXX_FLOAT_COMPLEX: Handle = 0x4c00_0834;
    pub const CXX_DOUBLE_COMPLEX: Handle = 0x4c00_1035;
    pub const CXX_LONG_DOUBLE_COMPLEX: Handle = 0x4c00_2036;
}

/// Error classes (`MPI_SUCCESS`, `MPI_ERR_*`).
pub const SUCCESS: c_int = 0;
#[allow(missing_docs)]
pub mod err {
    use std::ffi::c_int;
    pub const BUFFER: c_int = 1;
    pub const COUNT: c_int = 2;
    pub const TYPE: c_int = 3;
    pub const TAG: c_int = 4;
    pub const COMM: c_int = 5;
    pub const RANK: c_int = 6;
    pub const ROOT: c_int = 7;
    pub const GROUP: c_int = 8;
    pub const OP: c_int = 9;
    pub const TOPOLOGY: c_int = 10;
    pub const DIMS: c_int = 11;
    pub const ARG: c_int = 12;
    pub const UNKNOWN: c_int = 13;
    pub const TRUNCATE: c_int = 14;
    pub const OTHER: c_int = 15;
    pub const INTERN: c_int = 16;
    pub const IN_STATUS: c_int = 17;
    pub const PENDING: c_int = 18;
    pub const REQUEST: c_int = 19;
    pub const CONVERSION: c_int = 23;
    pub const IO: c_int = 32;
    pub const NO_MEM: c_int = 34;
    pub const UNSUPPORTED_DATAREP: c_int = 43;
    pub const UNSUPPORTED_OPERATION: c_int = 44;
    pub const PROC_ABORTED: c_int = 76;
    pub const VALUE_TOO_LARGE: c_int = 77;
    /// `MPICH_ERR_LAST_CLASS`: the last predefined class.
    pub const LAST_CLASS: c_int = 78;
    /// `MPIX_ERR_PROC_FAILED`.
    pub const PROC_FAILED: c_int = 101;
}

/// `MPI_COMBINER_NAMED` (a predefined datatype).
pub const COMBINER_NAMED: c_int = 1;
/// `MPI_COMBINER_DUP`.
pub const COMBINER_DUP: c_int = 2;
/// `MPI_COMBINER_CONTIGUOUS`.
pub const COMBINER_CONTIGUOUS: c_int = 3;
/// `MPI_COMBINER_VECTOR`.
pub const COMBINER_VECTOR: c_int = 4;
/// `MPI_COMBINER_HVECTOR`.
pub const COMBINER_HVECTOR: c_int = 6;
/// `MPI_COMBINER_INDEXED`.
pub const COMBINER_INDEXED: c_int = 7;
/// `MPI_COMBINER_HINDEXED`.
pub const COMBINER_HINDEXED: c_int = 9;
/// `MPI_COMBINER_INDEXED_BLOCK`.
pub const COMBINER_INDEXED_BLOCK: c_int = 10;
/// `MPI_COMBINER_STRUCT`.
pub const COMBINER_STRUCT: c_int = 12;
/// `MPI_COMBINER_SUBARRAY`.
pub const COMBINER_SUBARRAY: c_int = 13;
/// `MPI_COMBINER_RESIZED`.
pub const COMBINER_RESIZED: c_int = 18;
/// `MPI_COMBINER_HINDEXED_BLOCK`.
pub const COMBINER_HINDEXED_BLOCK: c_int = 19;
/// `MPI_ORDER_C`.
pub const ORDER_C: c_int = 56;
/// `MPI_ORDER_FORTRAN`.
pub const ORDER_FORTRAN: c_int = 57;
/// `MPI_TYPECLASS_REAL`.
pub const TYPECLASS_REAL: c_int = 1;
/// `MPI_TYPECLASS_INTEGER`.
pub const TYPECLASS_INTEGER: c_int = 2;
/// `MPI_TYPECLASS_COMPLEX`.
pub const TYPECLASS_COMPLEX: c_int = 3;
/// `MPI_COMBINER_DARRAY`.
pub const COMBINER_DARRAY: c_int = 14;
/// `MPI_COMBINER_F90_REAL`.
pub const COMBINER_F90_REAL: c_int = 15;
/// `MPI_COMBINER_F90_COMPLEX`.
pub const COMBINER_F90_COMPLEX: c_int = 16;
/// `MPI_COMBINER_F90_INTEGER`.
pub const COMBINER_F90_INTEGER: c_int = 17;
/// `MPI_DISTRIBUTE_BLOCK`.
pub const DISTRIBUTE_BLOCK: c_int = 121;
/// `MPI_DISTRIBUTE_CYCLIC`.
pub const DISTRIBUTE_CYCLIC: c_int = 122;
/// `MPI_DISTRIBUTE_NONE`.
pub const DISTRIBUTE_NONE: c_int = 123;
/// `MPI_DISTRIBUTE_DFLT_DARG`.
pub const DISTRIBUTE_DFLT_DARG: c_int = -49767;
