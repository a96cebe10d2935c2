//! A lent handle that outlives its `lend_mut` call aborts the process, with a message, instead
//! of leaving a way to memory whose borrow ended.

use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use viaduct_fallback::lend::lend_mut;

/// `SIGABRT` on Linux.
const SIGABRT: i32 = 6;

/// Marks the child process started by the test below.
const CHILD_VAR: &str = "VIADUCT_TEST_LEND_ESCAPE";

/// The child's body: keeps the handle past the call (here by leaking it).
#[test]
#[ignore = "child process of lent_handle_escaping_its_call_aborts"]
fn escaping_child() {
    if std::env::var_os(CHILD_VAR).is_none() {
        return;
    }
    let mut bytes = vec![0u8; 16];
    lend_mut(&mut bytes, std::mem::forget);
    println!("returned");
}

#[test]
fn lent_handle_escaping_its_call_aborts() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "escaping_child", "--nocapture"])
        .env(CHILD_VAR, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        Some(SIGABRT),
        "{:?}: {stderr}",
        out.status
    );
    assert!(stderr.contains("outlived the call"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("returned"));
}
