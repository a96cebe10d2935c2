//! Support for `method_contract.rs`: what of the contract only the fallback methods have
//! (processes as peers, emulated one-sided operations, configurations they refuse), written
//! once for both. The contract every method keeps is the generic suite of
//! `viaduct_method::contract`, instantiated in `method_contract.rs` with `contract_tests!`.
//!
//! [`fallback_contract_tests!`] expands, inside a module named after a method, to these tests
//! and the helpers they use. The module supplies what differs between methods:
//!
//! - `method`: the method's module (`viaduct_fallback::shm` or `viaduct_fallback::tcp`), with
//!   `Config`, `Endpoint`, `Error` and `Posted` in scope;
//! - `LIMIT`: the bound after which a test calls a run stalled (not a speed);
//! - `REAP_EVERY`: how many sends a streaming sender posts between two reaps;
//! - `ROLE`, `ADDR`: the environment variables that make the test binary a peer process;
//! - `listen(name)`, `connect(addr, config)`: a listener and the peer's way to reach it;
//! - `peer_config()`: the configuration of a peer process;
//! - `try_send(ep, id, tag, buf)`: a send from or to a peer process, driven until the method
//!   took it (and as far as the method needs it to leave);
//! - `check_echo_endpoint(ep)`: checks on an endpoint accepted for the echo test;
//! - `killed_peer_config()`, `post_send_the_peer_never_takes(ep)`: the kill test's setup;
//! - `invalid_config()`: a configuration `pair` refuses.

/// `EACCES`, the errno of a refused remote access.
pub fn libc_eacces() -> i32 {
    13
}

/// The fallback methods' contract tests and their helpers, for the method of the enclosing
/// module.
macro_rules! fallback_contract_tests {
    () => {
        use std::process::{Child, Command};
        use std::thread;
        use std::time::Instant;

        use viaduct_method::contract::{SIZES, SMALL, pattern};

        use $crate::contract::libc_eacces;

        fn send(ep: &mut Endpoint, id: u64, tag: u64, buf: Vec<u8>) {
            viaduct_method::contract::send(ep, LIMIT, id, tag, buf);
        }

        fn try_recv(ep: &mut Endpoint) -> Result<(u64, Vec<u8>), Error> {
            viaduct_method::contract::try_recv(ep, LIMIT)
        }

        /// Sends every size from one thread to another; `check` looks at both endpoints first.
        fn sizes_round_trip(config: Config, check: impl Fn(&Endpoint)) {
            let (a, b) = method::pair(config).expect("pair");
            check(&a);
            check(&b);
            viaduct_method::contract::sizes_round_trip(LIMIT, (a, b));
        }

        #[test]
        fn emulated_write_and_read_check_key_and_bounds() {
            let (mut a, mut b) = method::pair(Config::default()).expect("pair");
            let key = b.register(vec![0u8; 4096]);
            let bad = method::RegionKey(key.0 ^ 0x40);
            let server = thread::spawn(move || {
                // Serve requests until the initiator says stop with a message.
                let deadline = Instant::now() + LIMIT;
                loop {
                    if let Some(m) = b.next().expect("next") {
                        assert_eq!(m.tag, 99);
                        b.consume(0).expect("consume");
                        return b;
                    }
                    assert!(Instant::now() < deadline);
                    b.wait(Duration::from_millis(50)).expect("wait");
                }
            });
            let data = pattern(1000, 3);
            assert!(a.post_write(1, key, 100, &data).expect("write").is_posted());
            assert!(a.post_write(2, bad, 0, &data).expect("write").is_posted());
            assert!(
                a.post_write(3, key, 4000, &data)
                    .expect("write")
                    .is_posted()
            );
            assert!(
                a.post_write(4, key, u64::MAX - 10, &data)
                    .expect("write")
                    .is_posted()
            );
            assert!(
                a.post_read(5, key, 100, vec![0; 1000])
                    .expect("read")
                    .is_posted()
            );
            assert!(
                a.post_read(6, bad, 0, vec![0; 10])
                    .expect("read")
                    .is_posted()
            );
            assert!(
                a.post_read(7, key, 4090, vec![0; 10])
                    .expect("read")
                    .is_posted()
            );
            let mut seen = std::collections::HashMap::new();
            let deadline = Instant::now() + LIMIT;
            while seen.len() < 7 {
                match a.poll() {
                    Some(c) => {
                        assert!(seen.insert(c.id, c).is_none(), "two completions for one id");
                    }
                    None => {
                        assert!(Instant::now() < deadline, "missing completions");
                        a.wait(Duration::from_millis(50)).expect("wait");
                    }
                }
            }
            assert_eq!(seen[&1].result.as_ref().ok(), Some(&1000));
            assert!(matches!(
                seen[&2].result,
                Err(Error::RemoteAccess(method::AccessError::BadKey))
            ));
            assert!(matches!(
                seen[&3].result,
                Err(Error::RemoteAccess(method::AccessError::OutOfBounds))
            ));
            assert!(matches!(
                seen[&4].result,
                Err(Error::RemoteAccess(method::AccessError::OutOfBounds))
            ));
            assert_eq!(seen[&5].buffer.as_deref(), Some(&data[..]));
            assert!(matches!(
                seen[&6].result,
                Err(Error::RemoteAccess(method::AccessError::BadKey))
            ));
            assert!(matches!(
                seen[&7].result,
                Err(Error::RemoteAccess(method::AccessError::OutOfBounds))
            ));
            assert_eq!(
                seen[&6].result.as_ref().err().map(Error::errno),
                Some(libc_eacces())
            );
            send(&mut a, 8, 99, Vec::new());
            let b = server.join().expect("server");
            let region = b.region(key).expect("region");
            assert_eq!(&region[100..1100], &data[..]);
            assert!(
                region[..100].iter().all(|&x| x == 0) && region[1100..].iter().all(|&x| x == 0)
            );
        }

        #[test]
        fn invalid_configurations_are_refused() {
            assert!(matches!(method::pair(invalid_config()), Err(Error::Config(_))));
        }

        /// Starts this test binary again as the peer playing `role`, connecting to `addr`.
        fn spawn_peer(role: &str, addr: &str) -> Child {
            let entry = concat!(module_path!(), "::peer_process_entry");
            let entry = entry.split_once("::").map_or(entry, |(_, rest)| rest);
            Command::new(std::env::current_exe().expect("test binary"))
                .args(["--exact", entry, "--nocapture", "--test-threads=1"])
                .env(ROLE, role)
                .env(ADDR, addr)
                .spawn()
                .expect("spawn peer")
        }

        fn wait_child(mut child: Child) {
            let deadline = Instant::now() + LIMIT;
            loop {
                if let Some(st) = child.try_wait().expect("try_wait") {
                    assert!(st.success(), "peer exited with {st}");
                    return;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("peer did not exit");
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }

        /// Entry point of the peer process; does nothing in an ordinary test run.
        #[test]
        fn peer_process_entry() {
            let (Ok(role), Ok(addr)) = (std::env::var(ROLE), std::env::var(ADDR)) else {
                return;
            };
            let mut ep = connect(&addr, peer_config());
            match role.as_str() {
                "echo" => loop {
                    let (tag, data) = try_recv(&mut ep).expect("recv");
                    if tag == u64::MAX {
                        break;
                    }
                    try_send(&mut ep, tag, tag, data).expect("send");
                    while ep.poll().is_some() {}
                },
                "stream" => {
                    let mut i = 0u64;
                    let deadline = Instant::now() + LIMIT;
                    while i < SMALL {
                        match ep.post_send(i, i, &i.to_le_bytes()).expect("post") {
                            Posted::InProgress => i += 1,
                            Posted::NoResources(()) => {
                                assert!(Instant::now() < deadline);
                                ep.wait(Duration::from_millis(50)).expect("wait");
                            }
                        }
                        if i % REAP_EVERY == 0 {
                            while ep.poll().is_some() {}
                        }
                    }
                    try_recv(&mut ep).expect("final message");
                }
                "endless" => {
                    // Streams until killed or the parent goes away.
                    let mut i = 0u64;
                    loop {
                        match ep.post_send(i, i, &[0u8; 32]) {
                            Ok(Posted::InProgress) => i += 1,
                            Ok(Posted::NoResources(())) => {
                                let _ = ep.wait(Duration::from_millis(50));
                            }
                            Err(_) => return,
                        }
                        if i % REAP_EVERY == 0 {
                            while ep.poll().is_some() {}
                        }
                    }
                }
                "rma-target" => {
                    let key = ep.register(vec![0u8; 4096]);
                    try_send(&mut ep, 0, key.0 as u64, Vec::new()).expect("send the key");
                    // Serves the parent's writes and reads while it waits for the stop message.
                    loop {
                        let (tag, _) = try_recv(&mut ep).expect("recv");
                        if tag == u64::MAX {
                            break;
                        }
                    }
                }
                other => panic!("unknown role {other}"),
            }
            let deadline = Instant::now() + Duration::from_secs(2);
            while ep.poll().is_some() || Instant::now() < deadline && ep.failure().is_none() {
                let _ = ep.wait(Duration::from_millis(10));
                if ep.next().is_err() {
                    break;
                }
            }
        }

        #[test]
        fn sizes_echo_byte_exact_between_processes() {
            let (listener, addr) = listen("echo");
            let child = spawn_peer("echo", &addr);
            let mut ep = listener.accept(Config::default()).expect("accept");
            check_echo_endpoint(&ep);
            for (i, &len) in SIZES.iter().enumerate() {
                let data = pattern(len, i as u64);
                try_send(&mut ep, i as u64, len as u64, data.clone()).expect("send");
                let (tag, back) = try_recv(&mut ep).expect("recv");
                assert_eq!(tag, len as u64);
                assert!(back == data, "echo of {len} bytes differs");
            }
            try_send(&mut ep, 99, u64::MAX, Vec::new()).expect("stop");
            wait_child(child);
        }

        #[test]
        fn million_messages_from_another_process_arrive_in_order() {
            let (listener, addr) = listen("stream");
            let child = spawn_peer("stream", &addr);
            let mut ep = listener.accept(Config::default()).expect("accept");
            let deadline = Instant::now() + LIMIT;
            let mut expect = 0u64;
            while expect < SMALL {
                match ep.next().expect("next") {
                    Some(m) => {
                        assert_eq!(m.tag, expect);
                        assert_eq!(m.data, &expect.to_le_bytes());
                        ep.consume(8).expect("consume");
                        expect += 1;
                    }
                    None => {
                        assert!(Instant::now() < deadline, "stuck at {expect}");
                        ep.wait(Duration::from_millis(50)).expect("wait");
                    }
                }
            }
            try_send(&mut ep, 0, 0, Vec::new()).expect("final");
            wait_child(child);
        }

        #[test]
        fn killed_peer_fails_outstanding_descriptors_and_the_stream() {
            let (listener, addr) = listen("kill");
            let mut child = spawn_peer("endless", &addr);
            let mut ep = listener.accept(killed_peer_config()).expect("accept");
            // Receive a while, post descriptors the peer will not finish, then kill it
            // mid-stream.
            let mut got = 0;
            while got < 10_000 {
                if let Some(m) = ep.next().expect("next") {
                    let n = m.data.len();
                    ep.consume(n).expect("consume");
                    got += 1;
                } else {
                    ep.wait(Duration::from_millis(50)).expect("wait");
                }
            }
            post_send_the_peer_never_takes(&mut ep);
            assert!(
                ep.post_read(2, method::RegionKey(3), 0, vec![0; 16])
                    .expect("read")
                    .is_posted()
            );
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
            let deadline = Instant::now() + LIMIT;
            let mut failed = Vec::new();
            let mut stream_failed = false;
            while failed.len() < 2 || !stream_failed {
                assert!(
                    Instant::now() < deadline,
                    "no error completion after the peer died"
                );
                match ep.next() {
                    Ok(Some(m)) => {
                        let n = m.data.len();
                        ep.consume(n).expect("consume");
                    }
                    Ok(None) => {}
                    Err(e) => {
                        assert!(matches!(e, Error::PeerFailed(_)), "{e}");
                        stream_failed = true;
                    }
                }
                while let Some(c) = ep.poll() {
                    // The send may have been taken before the kill; otherwise it failed.
                    if c.id == 2 || c.result.is_err() {
                        assert!(
                            matches!(c.result, Err(Error::PeerFailed(_))),
                            "{:?}",
                            c.result
                        );
                    }
                    failed.push(c.id);
                }
                ep.wait(Duration::from_millis(10)).expect("wait");
            }
            failed.sort();
            assert_eq!(failed, [1, 2]);
        }

        #[test]
        fn emulated_write_and_read_in_another_process_check_key_and_bounds() {
            let (listener, addr) = listen("rma");
            let child = spawn_peer("rma-target", &addr);
            let mut ep = listener.accept(Config::default()).expect("accept");
            let (key, _) = try_recv(&mut ep).expect("key");
            let key = method::RegionKey(key as u32);
            let bad = method::RegionKey(key.0 ^ 0x40);
            let data = pattern(1000, 5);
            assert!(
                ep.post_write(1, key, 100, &data)
                    .expect("write")
                    .is_posted()
            );
            assert!(ep.post_write(2, bad, 0, &data).expect("write").is_posted());
            assert!(
                ep.post_write(3, key, 4000, &data)
                    .expect("write")
                    .is_posted()
            );
            assert!(
                ep.post_read(4, key, 0, vec![9; 4096])
                    .expect("read")
                    .is_posted()
            );
            assert!(
                ep.post_read(5, key, 4090, vec![0; 10])
                    .expect("read")
                    .is_posted()
            );
            let mut seen = std::collections::HashMap::new();
            let deadline = Instant::now() + LIMIT;
            while seen.len() < 5 {
                match ep.poll() {
                    Some(c) => assert!(seen.insert(c.id, c).is_none(), "two completions for one id"),
                    None => {
                        assert!(Instant::now() < deadline, "missing completions");
                        ep.wait(Duration::from_millis(20)).expect("wait");
                    }
                }
            }
            let refused = |id: u64, want: method::AccessError| {
                matches!(&seen[&id].result, Err(Error::RemoteAccess(e)) if *e == want)
            };
            assert_eq!(seen[&1].result.as_ref().ok(), Some(&1000));
            assert!(refused(2, method::AccessError::BadKey));
            assert!(refused(3, method::AccessError::OutOfBounds));
            assert!(refused(5, method::AccessError::OutOfBounds));
            // The read sees the write and nothing else changed around it.
            let mut expect = vec![0u8; 4096];
            expect[100..1100].copy_from_slice(&data);
            assert!(seen[&4].buffer.as_deref() == Some(&expect[..]));
            try_send(&mut ep, 9, u64::MAX, Vec::new()).expect("stop");
            wait_child(child);
        }
    };
}
