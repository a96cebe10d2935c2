//! The shared-memory ring's consumer, reading records a broken or hostile peer left in the
//! shared segment: stamps, 32-byte frame headers and payload lengths of its choosing.
//!
//! Checks (in `viaduct_fallback::shm::fuzz::consume`): nothing panics or hangs, and every
//! record handed out lies inside the ring's data area.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    viaduct_fallback::shm::fuzz::consume(data);
});
