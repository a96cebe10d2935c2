//! What the device tests of this crate share: opening the RDMA device (or skipping without
//! one) and recognizable test data.

#![allow(dead_code)]

use viaduct_verbs::{Context, device};

/// The device named by `VIADUCT_RDMA_DEVICE`, else `rxe0`, else the first one. Without any
/// device it prints `SKIPPED: ...` and gives `None`, unless `VIADUCT_REQUIRE_RDMA=1` (set
/// inside the VM of `scripts/rxe-vm`), where a missing device fails the test.
pub fn ctx() -> Option<Context> {
    let names = device::names().expect("listing devices");
    if names.is_empty() {
        assert!(
            std::env::var("VIADUCT_REQUIRE_RDMA").as_deref() != Ok("1"),
            "VIADUCT_REQUIRE_RDMA=1 but this machine has no RDMA device"
        );
        println!("SKIPPED: no RDMA device (run through scripts/rxe-vm)");
        return None;
    }
    let want = std::env::var("VIADUCT_RDMA_DEVICE").unwrap_or_else(|_| {
        if names.iter().any(|n| n == "rxe0") {
            "rxe0".to_owned()
        } else {
            names[0].clone()
        }
    });
    Some(Context::open(&want).expect("opening the device"))
}

/// `len` bytes that differ with `seed` and with the position.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}
