//! The ABI values of `viaduct_mpi::abi` are those of MPICH's `mpi.h`: a C program compiled
//! against the header prints each one, and the test compares. Skipped where the header or a
//! C compiler is missing.

use std::path::Path;
use std::process::Command;

use viaduct_mpi::abi::{self, dt, err, op};

const INCLUDE: &str = "/usr/include/x86_64-linux-gnu/mpich";

fn values() -> Vec<(&'static str, i64)> {
    let h = |v: i32| i64::from(v);
    vec![
        ("(long)MPI_COMM_NULL", h(abi::COMM_NULL)),
        ("(long)MPI_COMM_WORLD", h(abi::COMM_WORLD)),
        ("(long)MPI_COMM_SELF", h(abi::COMM_SELF)),
        ("(long)MPI_GROUP_NULL", h(abi::GROUP_NULL)),
        ("(long)MPI_GROUP_EMPTY", h(abi::GROUP_EMPTY)),
        ("(long)MPI_DATATYPE_NULL", h(abi::DATATYPE_NULL)),
        ("(long)MPI_REQUEST_NULL", h(abi::REQUEST_NULL)),
        ("(long)MPI_OP_NULL", h(abi::OP_NULL)),
        ("(long)MPI_ERRHANDLER_NULL", h(abi::ERRHANDLER_NULL)),
        ("(long)MPI_ERRORS_ARE_FATAL", h(abi::ERRORS_ARE_FATAL)),
        ("(long)MPI_ERRORS_RETURN", h(abi::ERRORS_RETURN)),
        ("(long)MPI_ERRORS_ABORT", h(abi::ERRORS_ABORT)),
        ("(long)MPI_IDENT", h(abi::IDENT)),
        ("(long)MPI_CONGRUENT", h(abi::CONGRUENT)),
        ("(long)MPI_SIMILAR", h(abi::SIMILAR)),
        ("(long)MPI_UNEQUAL", h(abi::UNEQUAL)),
        ("(long)MPI_PROC_NULL", h(abi::PROC_NULL)),
        ("(long)MPI_ANY_SOURCE", h(abi::ANY_SOURCE)),
        ("(long)MPI_ROOT", h(abi::ROOT)),
        ("(long)MPI_ANY_TAG", h(abi::ANY_TAG)),
        ("(long)MPI_UNDEFINED", h(abi::UNDEFINED)),
        (
            "(long)MPI_MAX_PROCESSOR_NAME",
            abi::MAX_PROCESSOR_NAME as i64,
        ),
        (
            "(long)MPI_MAX_LIBRARY_VERSION_STRING",
            abi::MAX_LIBRARY_VERSION_STRING as i64,
        ),
        ("(long)MPI_MAX_ERROR_STRING", abi::MAX_ERROR_STRING as i64),
        ("(long)MPI_VERSION", h(abi::VERSION)),
        ("(long)MPI_SUBVERSION", h(abi::SUBVERSION)),
        ("(long)MPI_THREAD_SINGLE", h(abi::THREAD_SINGLE)),
        ("(long)MPI_THREAD_FUNNELED", h(abi::THREAD_FUNNELED)),
        ("(long)MPI_THREAD_SERIALIZED", h(abi::THREAD_SERIALIZED)),
        ("(long)MPI_THREAD_MULTIPLE", h(abi::THREAD_MULTIPLE)),
        ("(long)MPI_TAG_UB", h(abi::KEY_TAG_UB)),
        ("(long)MPI_HOST", h(abi::KEY_HOST)),
        ("(long)MPI_IO", h(abi::KEY_IO)),
        ("(long)MPI_WTIME_IS_GLOBAL", h(abi::KEY_WTIME_IS_GLOBAL)),
        ("(long)MPI_UNIVERSE_SIZE", h(abi::KEY_UNIVERSE_SIZE)),
        ("(long)MPI_APPNUM", h(abi::KEY_APPNUM)),
        ("(long)MPI_STATUS_IGNORE", abi::STATUS_IGNORE as i64),
        ("(long)MPI_STATUSES_IGNORE", abi::STATUS_IGNORE as i64),
        ("(long)MPI_IN_PLACE", abi::IN_PLACE as i64),
        (
            "(long)sizeof(MPI_Status)",
            std::mem::size_of::<abi::MpiStatus>() as i64,
        ),
        ("(long)offsetof(MPI_Status, MPI_SOURCE)", 8),
        ("(long)offsetof(MPI_Status, MPI_TAG)", 12),
        ("(long)offsetof(MPI_Status, MPI_ERROR)", 16),
        (
            "(long)sizeof(MPI_Aint)",
            std::mem::size_of::<abi::MpiAint>() as i64,
        ),
        (
            "(long)sizeof(MPI_Count)",
            std::mem::size_of::<abi::MpiCount>() as i64,
        ),
        (
            "(long)sizeof(MPI_Offset)",
            std::mem::size_of::<abi::MpiOffset>() as i64,
        ),
        ("(long)sizeof(MPI_Comm)", 4),
        ("(long)MPI_MAX", h(op::MAX)),
        ("(long)MPI_MIN", h(op::MIN)),
        ("(long)MPI_SUM", h(op::SUM)),
        ("(long)MPI_PROD", h(op::PROD)),
        ("(long)MPI_LAND", h(op::LAND)),
        ("(long)MPI_BAND", h(op::BAND)),
        ("(long)MPI_LOR", h(op::LOR)),
        ("(long)MPI_BOR", h(op::BOR)),
        ("(long)MPI_LXOR", h(op::LXOR)),
        ("(long)MPI_BXOR", h(op::BXOR)),
        ("(long)MPI_MINLOC", h(op::MINLOC)),
        ("(long)MPI_MAXLOC", h(op::MAXLOC)),
        ("(long)MPI_REPLACE", h(op::REPLACE)),
        ("(long)MPI_NO_OP", h(op::NO_OP)),
        ("(long)MPI_CHAR", h(dt::CHAR)),
        ("(long)MPI_SIGNED_CHAR", h(dt::SIGNED_CHAR)),
        ("(long)MPI_UNSIGNED_CHAR", h(dt::UNSIGNED_CHAR)),
        ("(long)MPI_BYTE", h(dt::BYTE)),
        ("(long)MPI_WCHAR", h(dt::WCHAR)),
        ("(long)MPI_SHORT", h(dt::SHORT)),
        ("(long)MPI_UNSIGNED_SHORT", h(dt::UNSIGNED_SHORT)),
        ("(long)MPI_INT", h(dt::INT)),
        ("(long)MPI_UNSIGNED", h(dt::UNSIGNED)),
        ("(long)MPI_LONG", h(dt::LONG)),
        ("(long)MPI_UNSIGNED_LONG", h(dt::UNSIGNED_LONG)),
        ("(long)MPI_FLOAT", h(dt::FLOAT)),
        ("(long)MPI_DOUBLE", h(dt::DOUBLE)),
        ("(long)MPI_LONG_DOUBLE", h(dt::LONG_DOUBLE)),
        ("(long)MPI_LONG_LONG", h(dt::LONG_LONG)),
        ("(long)MPI_UNSIGNED_LONG_LONG", h(dt::UNSIGNED_LONG_LONG)),
        ("(long)MPI_PACKED", h(dt::PACKED)),
        ("(long)MPI_LB", h(dt::LB)),
        ("(long)MPI_UB", h(dt::UB)),
        ("(long)MPI_FLOAT_INT", h(dt::FLOAT_INT)),
        ("(long)MPI_DOUBLE_INT", h(dt::DOUBLE_INT)),
        ("(long)MPI_LONG_INT", h(dt::LONG_INT)),
        ("(long)MPI_SHORT_INT", h(dt::SHORT_INT)),
        ("(long)MPI_2INT", h(dt::TWO_INT)),
        ("(long)MPI_LONG_DOUBLE_INT", h(dt::LONG_DOUBLE_INT)),
        ("(long)MPI_COMPLEX", h(dt::COMPLEX)),
        ("(long)MPI_DOUBLE_COMPLEX", h(dt::DOUBLE_COMPLEX)),
        ("(long)MPI_LOGICAL", h(dt::LOGICAL)),
        ("(long)MPI_REAL", h(dt::REAL)),
        ("(long)MPI_DOUBLE_PRECISION", h(dt::DOUBLE_PRECISION)),
        ("(long)MPI_INTEGER", h(dt::INTEGER)),
        ("(long)MPI_2INTEGER", h(dt::TWO_INTEGER)),
        ("(long)MPI_2REAL", h(dt::TWO_REAL)),
        ("(long)MPI_2DOUBLE_PRECISION", h(dt::TWO_DOUBLE_PRECISION)),
        ("(long)MPI_CHARACTER", h(dt::CHARACTER)),
        ("(long)MPI_REAL4", h(dt::REAL4)),
        ("(long)MPI_REAL8", h(dt::REAL8)),
        ("(long)MPI_REAL16", h(dt::REAL16)),
        ("(long)MPI_COMPLEX8", h(dt::COMPLEX8)),
        ("(long)MPI_COMPLEX16", h(dt::COMPLEX16)),
        ("(long)MPI_COMPLEX32", h(dt::COMPLEX32)),
        ("(long)MPI_INTEGER1", h(dt::INTEGER1)),
        ("(long)MPI_INTEGER2", h(dt::INTEGER2)),
        ("(long)MPI_INTEGER4", h(dt::INTEGER4)),
        ("(long)MPI_INTEGER8", h(dt::INTEGER8)),
        ("(long)MPI_INT8_T", h(dt::INT8_T)),
        ("(long)MPI_INT16_T", h(dt::INT16_T)),
        ("(long)MPI_INT32_T", h(dt::INT32_T)),
        ("(long)MPI_INT64_T", h(dt::INT64_T)),
        ("(long)MPI_UINT8_T", h(dt::UINT8_T)),
        ("(long)MPI_UINT16_T", h(dt::UINT16_T)),
        ("(long)MPI_UINT32_T", h(dt::UINT32_T)),
        ("(long)MPI_UINT64_T", h(dt::UINT64_T)),
        ("(long)MPI_C_BOOL", h(dt::C_BOOL)),
        ("(long)MPI_C_FLOAT_COMPLEX", h(dt::C_FLOAT_COMPLEX)),
        ("(long)MPI_C_DOUBLE_COMPLEX", h(dt::C_DOUBLE_COMPLEX)),
        (
            "(long)MPI_C_LONG_DOUBLE_COMPLEX",
            h(dt::C_LONG_DOUBLE_COMPLEX),
        ),
        ("(long)MPIX_C_FLOAT16", h(dt::FLOAT16)),
        ("(long)MPI_AINT", h(dt::AINT)),
        ("(long)MPI_OFFSET", h(dt::OFFSET)),
        ("(long)MPI_COUNT", h(dt::COUNT)),
        ("(long)MPI_CXX_BOOL", h(dt::CXX_BOOL)),
        ("(long)MPI_CXX_FLOAT_COMPLEX", h(dt::CXX_FLOAT_COMPLEX)),
        ("(long)MPI_CXX_DOUBLE_COMPLEX", h(dt::CXX_DOUBLE_COMPLEX)),
        (
            "(long)MPI_CXX_LONG_DOUBLE_COMPLEX",
            h(dt::CXX_LONG_DOUBLE_COMPLEX),
        ),
        ("(long)MPI_SUCCESS", h(abi::SUCCESS)),
        ("(long)MPI_ERR_BUFFER", h(err::BUFFER)),
        ("(long)MPI_ERR_COUNT", h(err::COUNT)),
        ("(long)MPI_ERR_TYPE", h(err::TYPE)),
        ("(long)MPI_ERR_TAG", h(err::TAG)),
        ("(long)MPI_ERR_COMM", h(err::COMM)),
        ("(long)MPI_ERR_RANK", h(err::RANK)),
        ("(long)MPI_ERR_ROOT", h(err::ROOT)),
        ("(long)MPI_ERR_GROUP", h(err::GROUP)),
        ("(long)MPI_ERR_OP", h(err::OP)),
        ("(long)MPI_ERR_TOPOLOGY", h(err::TOPOLOGY)),
        ("(long)MPI_ERR_DIMS", h(err::DIMS)),
        ("(long)MPI_ERR_ARG", h(err::ARG)),
        ("(long)MPI_ERR_UNKNOWN", h(err::UNKNOWN)),
        ("(long)MPI_ERR_TRUNCATE", h(err::TRUNCATE)),
        ("(long)MPI_ERR_OTHER", h(err::OTHER)),
        ("(long)MPI_ERR_INTERN", h(err::INTERN)),
        ("(long)MPI_ERR_IN_STATUS", h(err::IN_STATUS)),
        ("(long)MPI_ERR_PENDING", h(err::PENDING)),
        ("(long)MPI_ERR_REQUEST", h(err::REQUEST)),
        ("(long)MPI_ERR_NO_MEM", h(err::NO_MEM)),
        (
            "(long)MPI_ERR_UNSUPPORTED_OPERATION",
            h(err::UNSUPPORTED_OPERATION),
        ),
        ("(long)MPI_ERR_PROC_ABORTED", h(err::PROC_ABORTED)),
        ("(long)MPI_ERR_VALUE_TOO_LARGE", h(err::VALUE_TOO_LARGE)),
        ("(long)MPICH_ERR_LAST_CLASS", h(err::LAST_CLASS)),
        ("(long)MPIX_ERR_PROC_FAILED", h(err::PROC_FAILED)),
    ]
}

#[test]
fn abi_values_match_mpich_header() {
    if !Path::new(INCLUDE).join("mpi.h").exists() {
        eprintln!("SKIPPED: MPICH's mpi.h is not installed in {INCLUDE}");
        return;
    }
    let vals = values();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpi-abi");
    std::fs::create_dir_all(&dir).expect("folder");
    let mut c = String::from(
        "#include <mpi.h>\n#include <stdio.h>\n#include <stddef.h>\nint main(void) {\n",
    );
    for (expr, _) in &vals {
        c.push_str(&format!("    printf(\"%ld\\n\", {expr});\n"));
    }
    c.push_str("    return 0;\n}\n");
    let src = dir.join("abi.c");
    std::fs::write(&src, c).expect("write abi.c");
    let bin = dir.join("abi");
    let cc = Command::new("cc")
        .arg(format!("-I{INCLUDE}"))
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .output();
    let Ok(cc) = cc else {
        eprintln!("SKIPPED: no C compiler (cc)");
        return;
    };
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&bin).output().expect("run abi");
    let text = String::from_utf8_lossy(&out.stdout);
    let got: Vec<i64> = text
        .lines()
        .map(|l| l.trim().parse().expect("a number"))
        .collect();
    assert_eq!(got.len(), vals.len());
    let wrong: Vec<String> = vals
        .iter()
        .zip(&got)
        .filter(|((_, want), got)| want != *got)
        .map(|((e, want), got)| format!("{e}: header {got}, viaduct {want}"))
        .collect();
    assert!(wrong.is_empty(), "ABI values differ:\n{}", wrong.join("\n"));
}

/// The status count encoding round-trips through both fields, cancel bit kept apart.
#[test]
fn status_count_encoding() {
    let mut s = abi::MpiStatus::empty();
    for n in [
        0i64,
        1,
        0x7fff_ffff,
        0x8000_0000,
        0x1_2345_6789,
        (1 << 40) + 5,
    ] {
        s.set_cancelled(true);
        s.set_count(n);
        assert_eq!(s.count(), n);
        assert!(s.cancelled());
        s.set_cancelled(false);
        assert_eq!(s.count(), n);
        assert!(!s.cancelled());
    }
}
