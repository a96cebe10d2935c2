//! The contract both fallback methods keep, shared memory and TCP over 127.0.0.1: each test is
//! written once and instantiated per method, so its name says the method (`shm::…`,
//! `tcp::…`). The contract of every method is the generic suite of `viaduct_method::contract`
//! (`contract_tests!`, also run for the loopback endpoint and written against the
//! `viaduct_method::Endpoint` trait); what only the fallback methods have (peer processes,
//! emulated one-sided operations) is in `contract/mod.rs`. Tests of what only one method has
//! stay in `shm_*.rs` and `tcp_*.rs`. Process tests re-execute this binary as the peer
//! (`<method>::peer_process_entry`).

#[macro_use]
mod contract;

mod shm {
    // `REAP_EVERY` is 1 here: the contract's `i % REAP_EVERY` is then always 0, on purpose.
    #![allow(clippy::modulo_one)]

    use std::time::Duration;

    use viaduct_fallback::shm::{self as method, Config, Endpoint, Error, LongMessages, Posted};

    // A stall, not a speed. 20 s in the shared-memory files; here both methods' tests (the
    // million-message streams among them) run side by side in one binary, so it leaves room.
    const LIMIT: Duration = Duration::from_secs(60);
    /// A shared-memory sender may reap after every post: it costs no system call.
    const REAP_EVERY: u64 = 1;
    const ROLE: &str = "VIADUCT_SHM_TEST_ROLE";
    const ADDR: &str = "VIADUCT_SHM_TEST_PATH";

    fn listen(name: &str) -> (method::Listener, String) {
        let path = std::env::temp_dir().join(format!(
            "viaduct-shm-contract-{}-{name}.sock",
            std::process::id()
        ));
        let listener = method::Listener::bind(&path).expect("bind");
        (listener, path.to_str().expect("UTF-8 path").to_owned())
    }

    fn connect(path: &str, config: Config) -> Endpoint {
        method::connect(path, config).expect("connect")
    }

    fn peer_config() -> Config {
        Config::default()
    }

    fn try_send(ep: &mut Endpoint, id: u64, tag: u64, mut buf: Vec<u8>) -> Result<(), Error> {
        let deadline = std::time::Instant::now() + LIMIT;
        loop {
            match ep.post_send_buf(id, tag, buf)? {
                Posted::InProgress => return Ok(()),
                Posted::NoResources(b) => buf = b,
            }
            assert!(
                std::time::Instant::now() < deadline,
                "send {id} made no progress"
            );
            ep.wait(Duration::from_millis(50))?;
            while ep.poll().is_some() {}
        }
    }

    fn check_echo_endpoint(ep: &Endpoint) {
        assert_eq!(ep.long_messages(), LongMessages::SingleCopy);
        assert_eq!(ep.long_messages_in(), LongMessages::SingleCopy);
    }

    fn killed_peer_config() -> Config {
        Config {
            liveness_interval: Duration::from_millis(10),
            ..Config::default()
        }
    }

    /// A long send: it waits for the peer to read it.
    fn post_send_the_peer_never_takes(ep: &mut Endpoint) {
        // Past `ring_copy_max`: a single copy, outstanding until the peer reads it.
        try_send(ep, 1, 1, vec![5u8; 5 << 20]).expect("long send");
    }

    fn invalid_config() -> Config {
        Config {
            ring_bytes: 1000,
            ..Config::default()
        }
    }

    struct Shm;

    impl viaduct_method::contract::Harness for Shm {
        type Ep = Endpoint;
        const LIMIT: Duration = LIMIT;
        const REAP_EVERY: u64 = REAP_EVERY;

        fn pair() -> (Endpoint, Endpoint) {
            method::pair(Config::default()).expect("pair")
        }

        fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
            method::pair(Config {
                max_message,
                ..Config::default()
            })
            .expect("pair")
        }

        fn dropped_peer_pair() -> (Endpoint, Endpoint) {
            method::pair(Config {
                liveness_interval: Duration::from_millis(5),
                ..Config::default()
            })
            .expect("pair")
        }

        /// Long sends past `ring_copy_max` wait for the receiver to read them; reads wait for
        /// a reply.
        fn post_two_outstanding(a: &mut Endpoint) {
            send(a, 1, 1, vec![1u8; 5 << 20]);
            assert!(
                a.post_read(2, method::RegionKey(1), 0, vec![0; 8])
                    .expect("read")
                    .is_posted()
            );
        }

        fn check_dropped_peer_completion(c: &method::Completion) {
            assert!(
                matches!(c.result, Err(Error::PeerFailed(_))),
                "{:?}",
                c.result
            );
            assert_eq!(c.result.as_ref().err().map(Error::errno), Some(32));
        }

        fn is_too_long(e: &Error) -> bool {
            matches!(e, Error::TooLong { .. })
        }

        fn is_consume_beyond(e: &Error) -> bool {
            matches!(e, Error::ConsumeBeyond { .. })
        }
    }

    #[test]
    fn sizes_arrive_byte_exact_single_copy() {
        sizes_round_trip(Config::default(), |ep| {
            assert_eq!(ep.long_messages(), LongMessages::SingleCopy)
        });
    }

    #[test]
    fn sizes_arrive_byte_exact_through_ring_chunks() {
        let config = Config {
            single_copy: false,
            ..Config::default()
        };
        sizes_round_trip(config, |ep| {
            assert_eq!(ep.long_messages(), LongMessages::RingChunks)
        });
    }

    viaduct_method::contract_tests!(Shm);
    fallback_contract_tests!();
}

mod tcp {
    use std::time::Duration;

    use viaduct_fallback::tcp::{self as method, Config, Endpoint, Error, Posted};

    // A stall, not a speed: a million messages in a debug build take 5-18 s, more on a busy
    // 2-core machine (20 s was missed there at load 10-14), so the bound leaves room.
    const LIMIT: Duration = Duration::from_secs(90);
    /// Reaping now and then lets frames posted meanwhile leave in one `sendmsg`.
    const REAP_EVERY: u64 = 64;
    const ROLE: &str = "VIADUCT_TCP_TEST_ROLE";
    const ADDR: &str = "VIADUCT_TCP_TEST_ADDR";

    fn listen(_name: &str) -> (method::Listener, String) {
        let l = method::Listener::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let a = l.local_addr().expect("local address");
        (l, a.to_string())
    }

    fn connect(addr: &str, config: Config) -> Endpoint {
        method::connect(addr.parse().expect("address"), config).expect("connect")
    }

    fn peer_config() -> Config {
        Config {
            zero_copy_threshold: 65536,
            ..Config::default()
        }
    }

    /// Posts a send and drives the endpoint until its completion (a frame queued behind a
    /// `sendmsg` in flight leaves only when the endpoint makes progress).
    fn try_send(ep: &mut Endpoint, id: u64, tag: u64, mut buf: Vec<u8>) -> Result<(), Error> {
        let deadline = std::time::Instant::now() + LIMIT;
        loop {
            match ep.post_send_buf(id, tag, buf)? {
                Posted::InProgress => break,
                Posted::NoResources(b) => buf = b,
            }
            assert!(
                std::time::Instant::now() < deadline,
                "send {id} made no progress"
            );
            ep.wait(Duration::from_millis(50))?;
        }
        loop {
            while let Some(c) = ep.poll() {
                if c.id == id {
                    return c.result.map(drop);
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "send {id} never completed"
            );
            ep.wait(Duration::from_millis(50))?;
        }
    }

    fn check_echo_endpoint(_ep: &Endpoint) {}

    fn killed_peer_config() -> Config {
        Config::default()
    }

    /// The peer never reads messages, so the read request behind this one is never served.
    fn post_send_the_peer_never_takes(ep: &mut Endpoint) {
        assert!(ep.post_send(1, 1, &[5u8; 100]).expect("send").is_posted());
    }

    fn invalid_config() -> Config {
        Config {
            recv_buffers: 3,
            ..Config::default()
        }
    }

    struct Tcp;

    impl viaduct_method::contract::Harness for Tcp {
        type Ep = Endpoint;
        const LIMIT: Duration = LIMIT;
        const REAP_EVERY: u64 = REAP_EVERY;

        fn pair() -> (Endpoint, Endpoint) {
            method::pair(Config::default()).expect("pair")
        }

        fn pair_with_max_message(max_frame: usize) -> (Endpoint, Endpoint) {
            method::pair(Config {
                max_frame: max_frame as u32,
                ..Config::default()
            })
            .expect("pair")
        }

        /// A read waits for a reply that never comes; a 2 MiB send may or may not have left.
        fn post_two_outstanding(a: &mut Endpoint) {
            assert!(
                a.post_send_buf(2, 2, vec![1u8; 2 << 20])
                    .expect("send")
                    .is_posted()
            );
            assert!(
                a.post_read(1, method::RegionKey(1), 0, vec![0; 8])
                    .expect("read")
                    .is_posted()
            );
        }

        fn check_dropped_peer_completion(c: &method::Completion) {
            if c.id == 1 || c.result.is_err() {
                let e = c.result.as_ref().expect_err("the read must fail");
                assert!(matches!(e, Error::PeerFailed(_) | Error::Send(_)), "{e:?}");
                assert!(e.errno() > 0);
            }
        }

        fn is_too_long(e: &Error) -> bool {
            matches!(e, Error::TooLong { .. })
        }

        fn is_consume_beyond(e: &Error) -> bool {
            matches!(e, Error::ConsumeBeyond { .. })
        }
    }

    #[test]
    fn sizes_arrive_byte_exact_with_zero_copy_sends() {
        sizes_round_trip(
            Config {
                zero_copy_threshold: 4096,
                ..Config::default()
            },
            |_| {},
        );
    }

    viaduct_method::contract_tests!(Tcp);
    fallback_contract_tests!();
}
