//! The method contract (`viaduct_method::contract_tests!`) on the verbs message endpoint, over a
//! real RDMA device (soft-RoCE `rxe0` in the VM of `scripts/rxe-vm`): both ends of each pair on
//! one device, as `msg.rs` builds them. Each test is instantiated twice: `ring::…` for endpoints
//! with a receive ring of their own, `shared::…` for endpoints drawing their receive buffers from
//! one shared receive pool.
//!
//! Without a device each test prints `SKIPPED: ...` and returns, unless
//! `VIADUCT_REQUIRE_RDMA=1` is set (the VM sets it), where a missing device fails the test.
//! Run one at a time: `--test-threads=1`.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use viaduct_verbs::msg::{self, Completion, Config, Endpoint, Error, Posted};
use viaduct_verbs::{Access, MemoryRegion, RemoteRegion};

/// A stall, not a speed: a million messages through the emulated guest's soft-RoCE take a
/// while.
const LIMIT: Duration = Duration::from_secs(200);

/// Messages of the small-message stream: soft-RoCE in the emulated guest carried about 17 000
/// 8-byte messages a second with the host quiet (a debug build) and 4 500 with the host busy
/// (a million then passed `LIMIT` at 906 771); this many take 15-60 s there.
const SMALL_MESSAGES: u64 = 250_000;

/// Whether a device is there (else the test prints why it skips).
fn ready() -> bool {
    common::ctx().is_some()
}

/// Settings of the dropped-peer pair: a small receive ring, so that a long send waits for
/// credits, one-sided operations in small pieces one at a time, and a short peer timeout.
fn dropped_peer_config() -> Config {
    Config {
        recv_buffers: 4,
        buffer_bytes: 4096,
        send_slots: 4,
        rdma_ops: 1,
        rdma_piece: 4096,
        peer_timeout: Duration::from_millis(500),
        keepalive: Duration::from_millis(100),
        ..Config::default()
    }
}

/// A region of the dropped peer that its partner reads, kept past the peer's drop (it is
/// registered on the peer's protection domain).
static PEER_REGION: Mutex<Option<MemoryRegion>> = Mutex::new(None);

/// Bytes of [`PEER_REGION`]: read in 4 KiB pieces one at a time, it takes thousands of round
/// trips, so the read is still under way when the peer goes.
const PEER_REGION_LEN: usize = 16 << 20;

/// Keeps a readable region of `b` for [`post_two_outstanding`].
fn keep_peer_region(b: &Endpoint) {
    let region = b
        .protection_domain()
        .allocate(PEER_REGION_LEN, Access::LOCAL_WRITE | Access::REMOTE_READ)
        .expect("registering the peer's region");
    *PEER_REGION.lock().unwrap_or_else(|e| e.into_inner()) = Some(region);
}

/// A send that waits for credits (the peer never consumes: its ring of 4 takes three
/// fragments of 200 000 bytes) and a long RDMA READ of the peer's region: both stay
/// outstanding until the peer goes.
fn post_two_outstanding(a: &mut Endpoint) {
    let posted = a
        .post_send_buf(1, 1, vec![1u8; 200_000])
        .expect("long send");
    assert!(matches!(posted, Posted::InProgress), "the long send");
    let remote: RemoteRegion = PEER_REGION
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .expect("the peer's region")
        .remote();
    let buf = a.cache().get(PEER_REGION_LEN).expect("a local buffer");
    assert!(
        a.post_read(2, buf, remote).expect("read").is_posted(),
        "the read"
    );
}

fn check_dropped_peer_completion(c: &Completion) {
    assert!(
        matches!(c.result, Err(Error::PeerFailed(_))),
        "{:?}",
        c.result
    );
    assert_eq!(c.result.as_ref().err().map(Error::errno), Some(libc::EPIPE));
}

/// One instantiation of the contract: a module `$module` whose harness `$harness` builds its
/// pairs on rxe0 with `$make(ctx, config)`; the two differ only in where receives are posted.
macro_rules! verbs_contract {
    ($module:ident, $harness:ident, $make:expr) => {
        mod $module {
            use super::*;

            fn pair(config: Config) -> (Endpoint, Endpoint) {
                let ctx = common::ctx().expect("a device");
                ($make)(&ctx, config)
            }

            struct $harness;

            impl viaduct_method::contract::Harness for $harness {
                type Ep = Endpoint;
                const LIMIT: Duration = LIMIT;
                const REAP_EVERY: u64 = 64;
                const SMALL_MESSAGES: u64 = SMALL_MESSAGES;

                fn pair() -> (Endpoint, Endpoint) {
                    pair(Config::default())
                }

                fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
                    pair(Config {
                        max_message,
                        ..Config::default()
                    })
                }

                fn dropped_peer_pair() -> (Endpoint, Endpoint) {
                    let (a, b) = pair(dropped_peer_config());
                    keep_peer_region(&b);
                    (a, b)
                }

                fn post_two_outstanding(a: &mut Endpoint) {
                    post_two_outstanding(a);
                }

                fn check_dropped_peer_completion(c: &Completion) {
                    check_dropped_peer_completion(c);
                }

                fn is_too_long(e: &Error) -> bool {
                    matches!(e, Error::TooLong { .. })
                }

                fn is_consume_beyond(e: &Error) -> bool {
                    matches!(e, Error::ConsumeBeyond { .. })
                }
            }

            viaduct_method::contract_tests!($harness, skip_unless: ready);
        }
    };
}

// Each endpoint with a receive ring of its own.
verbs_contract!(ring, Ring, |ctx, config| msg::pair(ctx, config)
    .expect("pair"));

// Both endpoints receiving from one shared receive pool.
verbs_contract!(shared, Shared, |ctx, config| {
    let (a, b, _pool) = msg::pair_shared(ctx, config).expect("pair");
    (a, b)
});
