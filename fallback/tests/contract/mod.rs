//! Support for `method_contract.rs`: the contract both fallback methods keep, written once.
//!
//! [`method_contract_tests!`] expands, inside a module named after a method, to the tests of
//! the contract and the helpers they use. The module supplies what differs between methods:
//!
//! - `method`: the method's module (`viaduct_fallback::shm` or `viaduct_fallback::tcp`), with
//!   `Config`, `Endpoint`, `Error` and `Posted` in scope;
//! - `LIMIT`: the bound after which a test calls a run stalled (not a speed);
//! - `REAP_EVERY`: how many sends a streaming sender posts between two reaps;
//! - `DELIVERED_AT_POST`: whether a posted small send is in the receiver's view when the post
//!   returns (with no progress made by the sender afterwards);
//! - `ROLE`, `ADDR`: the environment variables that make the test binary a peer process;
//! - `listen(name)`, `connect(addr, config)`: a listener and the peer's way to reach it;
//! - `peer_config()`: the configuration of a peer process;
//! - `try_send(ep, id, tag, buf)`: a send from or to a peer process, driven until the method
//!   took it (and as far as the method needs it to leave);
//! - `check_echo_endpoint(ep)`: checks on an endpoint accepted for the echo test;
//! - `killed_peer_config()`, `post_send_the_peer_never_takes(ep)`: the kill test's setup;
//! - `invalid_config()`, `config_with_max_message(n)`: configurations refused / bounding sends;
//! - `dropped_peer_config()`, `post_two_outstanding(ep)`, `check_dropped_peer_completion(c)`:
//!   the dropped-peer test's setup and its check of each completion.

/// A deterministic payload of `len` bytes for message `seed`.
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

/// Message sizes every method carries byte exact, from empty to beyond its eager limit.
pub const SIZES: [usize; 9] = [0, 1, 63, 64, 4095, 4096, 65536, 1 << 20, 16 << 20];

/// Messages in the small-message streams.
pub const SMALL: u64 = 1_000_000;

/// `EACCES`, the errno of a refused remote access.
pub fn libc_eacces() -> i32 {
    13
}

/// The contract's tests and their helpers, for the method of the enclosing module.
macro_rules! method_contract_tests {
    () => {
        use std::process::{Child, Command};
        use std::thread;
        use std::time::Instant;

        use $crate::contract::{SIZES, SMALL, libc_eacces, pattern};

        fn send(ep: &mut Endpoint, id: u64, tag: u64, mut buf: Vec<u8>) {
            let deadline = Instant::now() + LIMIT;
            loop {
                match ep.post_send_buf(id, tag, buf).expect("post_send_buf") {
                    Posted::InProgress => return,
                    Posted::NoResources(b) => buf = b,
                }
                assert!(Instant::now() < deadline, "send {id} made no progress");
                ep.wait(Duration::from_millis(50)).expect("wait");
            }
        }

        fn try_recv(ep: &mut Endpoint) -> Result<(u64, Vec<u8>), Error> {
            let deadline = Instant::now() + LIMIT;
            loop {
                if let Some(m) = ep.next()? {
                    let out = (m.tag, m.data.to_vec());
                    ep.consume(out.1.len())?;
                    return Ok(out);
                }
                assert!(Instant::now() < deadline, "no message arrived");
                ep.wait(Duration::from_millis(50))?;
            }
        }

        fn recv(ep: &mut Endpoint) -> (u64, Vec<u8>) {
            try_recv(ep).expect("recv")
        }

        /// Drains completions until `n` arrived; all must succeed.
        fn reap(ep: &mut Endpoint, n: usize) {
            let deadline = Instant::now() + LIMIT;
            let mut got = 0;
            while got < n {
                match ep.poll() {
                    Some(c) => {
                        if let Err(e) = c.result {
                            panic!("completion {} failed: {e:?}", c.id);
                        }
                        got += 1;
                    }
                    None => {
                        assert!(Instant::now() < deadline, "only {got} of {n} completions");
                        ep.wait(Duration::from_millis(50)).expect("wait");
                    }
                }
            }
        }

        /// Sends every size from one thread to another; `check` looks at both endpoints first.
        fn sizes_round_trip(config: Config, check: impl Fn(&Endpoint)) {
            let (mut a, mut b) = method::pair(config).expect("pair");
            check(&a);
            check(&b);
            let sender = thread::spawn(move || {
                for (i, &len) in SIZES.iter().enumerate() {
                    send(&mut a, i as u64, len as u64, pattern(len, i as u64));
                }
                reap(&mut a, SIZES.len());
                a
            });
            for (i, &len) in SIZES.iter().enumerate() {
                let (tag, data) = recv(&mut b);
                assert_eq!(tag, len as u64);
                assert!(
                    data == pattern(len, i as u64),
                    "payload of {len} bytes differs"
                );
            }
            sender.join().expect("sender thread");
        }

        #[test]
        fn million_small_messages_arrive_in_order() {
            const N: u64 = 1_000_000;
            let (mut a, mut b) = method::pair(Config::default()).expect("pair");
            let sender = thread::spawn(move || {
                let deadline = Instant::now() + LIMIT;
                let mut i = 0u64;
                while i < N {
                    match a.post_send(i, i, &i.to_le_bytes()).expect("post") {
                        Posted::InProgress => i += 1,
                        Posted::NoResources(()) => {
                            assert!(Instant::now() < deadline, "stuck at {i}");
                            a.wait(Duration::from_millis(50)).expect("wait");
                        }
                    }
                    // Reaping only now and then lets a method send the frames posted
                    // meanwhile together.
                    if i % REAP_EVERY == 0 {
                        while let Some(c) = a.poll() {
                            assert_eq!(c.result.expect("send"), 8);
                        }
                    }
                }
                a
            });
            let deadline = Instant::now() + LIMIT;
            let mut expect = 0u64;
            while expect < N {
                match b.next().expect("next") {
                    Some(m) => {
                        assert_eq!(m.tag, expect);
                        assert_eq!(m.data, &expect.to_le_bytes());
                        b.consume(8).expect("consume");
                        expect += 1;
                    }
                    None => {
                        assert!(Instant::now() < deadline, "stuck at {expect}");
                        b.wait(Duration::from_millis(50)).expect("wait");
                    }
                }
            }
            sender.join().expect("sender");
        }

        #[test]
        fn next_points_into_own_buffers_and_consume_keeps_every_byte() {
            let (mut a, mut b) = method::pair(Config::default()).expect("pair");
            let small = pattern(1000, 7);
            let large = pattern(300_000, 9);
            send(&mut a, 1, 1, small.clone());
            send(&mut a, 2, 2, large.clone());
            let empty = a.post_send(3, 3, &[]).expect("post");
            assert_eq!(empty, Posted::InProgress);
            let mut done = Vec::new();
            for expect in [&small, &large] {
                let mut got = Vec::new();
                let deadline = Instant::now() + LIMIT;
                while got.len() < expect.len() {
                    let (addr, len, first) = match b.next().expect("next") {
                        Some(m) => (
                            m.data.as_ptr() as usize,
                            m.data.len(),
                            m.data.first().copied(),
                        ),
                        None => {
                            assert!(Instant::now() < deadline);
                            // One thread drives both ends: the sender's queued frames leave
                            // when it makes progress.
                            done.extend(a.poll());
                            b.wait(Duration::from_millis(5)).expect("wait");
                            continue;
                        }
                    };
                    assert_eq!(
                        len,
                        expect.len() - got.len(),
                        "next shows the unconsumed rest"
                    );
                    let inside = b
                        .receive_buffers()
                        .iter()
                        .any(|r| r.start <= addr && addr + len <= r.end);
                    assert!(
                        inside,
                        "slice at {addr:#x}+{len} is outside the method's buffers"
                    );
                    // Consume in odd pieces: 1 byte, then up to 777 bytes.
                    let take = if got.is_empty() { 1 } else { len.min(777) };
                    let m = b.next().expect("next").expect("still there");
                    assert_eq!(m.data.first().copied(), first);
                    got.extend_from_slice(&m.data[..take]);
                    b.consume(take).expect("consume");
                }
                assert!(&got == expect);
            }
            let deadline = Instant::now() + LIMIT;
            loop {
                if let Some(m) = b.next().expect("next") {
                    assert!(m.data.is_empty());
                    break;
                }
                assert!(
                    !DELIVERED_AT_POST,
                    "the empty message was not there once the messages before it were"
                );
                assert!(
                    Instant::now() < deadline,
                    "the empty message did not arrive"
                );
                done.extend(a.poll());
                b.wait(Duration::from_millis(5)).expect("wait");
            }
            assert!(matches!(b.consume(1), Err(Error::ConsumeBeyond { .. })));
            b.consume(0).expect("consume empty");
            assert!(done.iter().all(|c| c.result.is_ok()));
            reap(&mut a, 3 - done.len());
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
        fn dropped_peer_fails_outstanding_descriptors() {
            let (mut a, b) = method::pair(dropped_peer_config()).expect("pair");
            post_two_outstanding(&mut a);
            drop(b);
            let mut ids = Vec::new();
            let deadline = Instant::now() + LIMIT;
            while ids.len() < 2 {
                match a.poll() {
                    Some(c) => {
                        check_dropped_peer_completion(&c);
                        ids.push(c.id);
                    }
                    None => {
                        assert!(
                            Instant::now() < deadline,
                            "outstanding descriptors never completed"
                        );
                        a.wait(Duration::from_millis(10)).expect("wait");
                    }
                }
            }
            ids.sort();
            assert_eq!(ids, [1, 2]);
            assert!(matches!(a.post_send(3, 0, &[1]), Err(Error::PeerFailed(_))));
            assert!(matches!(a.next(), Err(Error::PeerFailed(_))));
        }

        #[test]
        fn oversized_and_invalid_requests_are_errors() {
            assert!(matches!(method::pair(invalid_config()), Err(Error::Config(_))));
            let (mut a, _b) = method::pair(config_with_max_message(1 << 20)).expect("pair");
            let r = a.post_send_buf(1, 0, vec![0; (1 << 20) + 1]);
            assert!(matches!(r, Err(Error::TooLong { .. })));
            assert_eq!(r.err().map(|e| e.errno()), Some(90));
            assert!(matches!(a.consume(1), Err(Error::ConsumeBeyond { .. })));
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
