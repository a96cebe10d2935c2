//! Shared-memory method between two processes: the test binary re-executes itself as the peer.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use viaduct_fallback::shm::{self, Config, Endpoint, Error, LongMessages, Posted};

const LIMIT: Duration = Duration::from_secs(20);
const ROLE: &str = "VIADUCT_SHM_TEST_ROLE";
const PATH: &str = "VIADUCT_SHM_TEST_PATH";

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

fn send(ep: &mut Endpoint, id: u64, tag: u64, mut buf: Vec<u8>) -> Result<(), Error> {
    let deadline = Instant::now() + LIMIT;
    loop {
        match ep.post_send_buf(id, tag, buf)? {
            Posted::InProgress => return Ok(()),
            Posted::NoResources(b) => buf = b,
        }
        assert!(Instant::now() < deadline, "send {id} made no progress");
        ep.wait(Duration::from_millis(50))?;
        while ep.poll().is_some() {}
    }
}

fn recv(ep: &mut Endpoint) -> Result<(u64, Vec<u8>), Error> {
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

/// Starts this test binary again as the peer playing `role`, connecting to `path`.
fn spawn_peer(role: &str, path: &std::path::Path) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "peer_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(PATH, path)
        .spawn()
        .expect("spawn peer")
}

fn socket_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("viaduct-shm-{}-{name}.sock", std::process::id()))
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

const SIZES: [usize; 9] = [0, 1, 63, 64, 4095, 4096, 65536, 1 << 20, 16 << 20];
const SMALL: u64 = 1_000_000;
/// Size and count of the long messages of the `long-sender` role.
const LONG: usize = 48 << 20;
const LONG_COUNT: u64 = 2;

/// Becomes user and group `nobody`, so that `process_vm_readv` on the (root) parent fails with
/// `EPERM` while the parent may still read this process.
fn drop_privileges() {
    // SAFETY: setgid/setuid take plain integers and only change this process's credentials.
    let rc = unsafe { (libc::setgid(65534), libc::setuid(65534)) };
    assert_eq!(rc, (0, 0), "dropping privileges failed");
}

/// Entry point of the peer process; does nothing in an ordinary test run.
#[test]
fn peer_process_entry() {
    let (Ok(role), Ok(path)) = (std::env::var(ROLE), std::env::var(PATH)) else {
        return;
    };
    let config = Config {
        single_copy: role != "echo-chunks",
        ..Config::default()
    };
    if role == "echo-unprivileged" {
        drop_privileges();
    }
    let mut ep = shm::connect(&path, config).expect("connect");
    match role.as_str() {
        "echo" | "echo-chunks" | "echo-unprivileged" => loop {
            let (tag, data) = recv(&mut ep).expect("recv");
            if tag == u64::MAX {
                break;
            }
            send(&mut ep, tag, tag, data).expect("send");
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
                while ep.poll().is_some() {}
            }
            recv(&mut ep).expect("final message");
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
                while ep.poll().is_some() {}
            }
        }
        "long-sender" => {
            // Sends long messages and keeps making progress (so it helps copy them) until killed.
            let bufs: Vec<Vec<u8>> = (0..LONG_COUNT).map(|i| pattern(LONG, i)).collect();
            for (i, buf) in bufs.into_iter().enumerate() {
                send(&mut ep, i as u64, i as u64, buf).expect("send");
            }
            loop {
                while ep.poll().is_some() {}
                if ep.wait(Duration::from_millis(50)).is_err() || ep.failure().is_some() {
                    return;
                }
            }
        }
        "stall" => {
            // Says it is up, then never drives the endpoint again until it is killed.
            send(&mut ep, 0, 7, Vec::new()).expect("send");
            std::thread::sleep(LIMIT);
            return;
        }
        "rma-target" => {
            let key = ep.register(vec![0u8; 4096]);
            send(&mut ep, 0, key.0 as u64, Vec::new()).expect("send the key");
            // Serves the parent's writes and reads while it waits for the stop message.
            loop {
                let (tag, _) = recv(&mut ep).expect("recv");
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

fn echo_sizes(role: &str, name: &str, expect: LongMessages) {
    echo_sizes_both(role, name, expect, LongMessages::SingleCopy);
}

/// Echoes every size; `out` and `back` are the modes expected for each direction.
fn echo_sizes_both(role: &str, name: &str, out: LongMessages, back: LongMessages) {
    let path = socket_path(name);
    let listener = shm::Listener::bind(&path).expect("bind");
    // A peer running as another user must be allowed to connect.
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod socket");
    let child = spawn_peer(role, &path);
    let mut ep = listener.accept(Config::default()).expect("accept");
    assert_eq!(ep.long_messages(), out);
    assert_eq!(ep.long_messages_in(), back);
    for (i, &len) in SIZES.iter().enumerate() {
        let data = pattern(len, i as u64);
        send(&mut ep, i as u64, len as u64, data.clone()).expect("send");
        let (tag, back) = recv(&mut ep).expect("recv");
        assert_eq!(tag, len as u64);
        assert!(back == data, "echo of {len} bytes differs");
    }
    send(&mut ep, 99, u64::MAX, Vec::new()).expect("stop");
    wait_child(child);
}

#[test]
fn sizes_echo_byte_exact_between_processes() {
    echo_sizes("echo", "echo", LongMessages::SingleCopy);
}

#[test]
fn sizes_echo_byte_exact_between_processes_through_ring_chunks() {
    echo_sizes("echo-chunks", "chunks", LongMessages::RingChunks);
}

#[test]
fn million_messages_from_another_process_arrive_in_order() {
    let path = socket_path("stream");
    let listener = shm::Listener::bind(&path).expect("bind");
    let child = spawn_peer("stream", &path);
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
    send(&mut ep, 0, 0, Vec::new()).expect("final");
    wait_child(child);
}

#[test]
fn killed_peer_fails_outstanding_descriptors_and_the_stream() {
    let path = socket_path("kill");
    let listener = shm::Listener::bind(&path).expect("bind");
    let mut child = spawn_peer("endless", &path);
    let config = Config {
        liveness_interval: Duration::from_millis(10),
        ..Config::default()
    };
    let mut ep = listener.accept(config).expect("accept");
    // Receive a while, post descriptors the peer will not finish, then kill it mid-stream.
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
    send(&mut ep, 1, 1, vec![5u8; 1 << 20]).expect("long send");
    assert!(
        ep.post_read(2, shm::RegionKey(3), 0, vec![0; 16])
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
            // The long send may have been read before the kill; otherwise it failed.
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
    let path = socket_path("rma");
    let listener = shm::Listener::bind(&path).expect("bind");
    let child = spawn_peer("rma-target", &path);
    let mut ep = listener.accept(Config::default()).expect("accept");
    let (key, _) = recv(&mut ep).expect("key");
    let key = shm::RegionKey(key as u32);
    let bad = shm::RegionKey(key.0 ^ 0x40);
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
    let refused = |id: u64, want: shm::AccessError| matches!(&seen[&id].result, Err(Error::RemoteAccess(e)) if *e == want);
    assert_eq!(seen[&1].result.as_ref().ok(), Some(&1000));
    assert!(refused(2, shm::AccessError::BadKey));
    assert!(refused(3, shm::AccessError::OutOfBounds));
    assert!(refused(5, shm::AccessError::OutOfBounds));
    // The read sees the write and nothing else changed around it.
    let mut expect = vec![0u8; 4096];
    expect[100..1100].copy_from_slice(&data);
    assert!(seen[&4].buffer.as_deref() == Some(&expect[..]));
    send(&mut ep, 9, u64::MAX, Vec::new()).expect("stop");
    wait_child(child);
}

#[test]
fn single_copy_refused_with_eperm_switches_to_ring_chunks() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED: needs root to start a peer under another user");
        return;
    }
    // The peer (user nobody) gets EPERM reading this root process: this side's long messages go
    // through the ring. This side may read the peer: its long messages come by single copy.
    echo_sizes_both(
        "echo-unprivileged",
        "eperm",
        LongMessages::RingChunks,
        LongMessages::SingleCopy,
    );
}

#[test]
fn sender_killed_during_a_split_copy_ends_the_receive_with_an_error() {
    // The sender helps copy its 48 MiB messages (48 chunks each); killing it at different
    // moments lands before, during or after its own chunks. The receive either completes
    // byte-exact or fails with a peer failure, within the liveness bound, never hangs.
    for (round, delay_ms) in [0u64, 3, 12].into_iter().enumerate() {
        let path = socket_path(&format!("split-kill-{round}"));
        let listener = shm::Listener::bind(&path).expect("bind");
        let mut child = spawn_peer("long-sender", &path);
        let config = Config {
            liveness_interval: Duration::from_millis(10),
            ..Config::default()
        };
        let mut ep = listener.accept(config).expect("accept");
        let deadline = Instant::now() + LIMIT;
        // The first message is copied inside `next`, helped by the live sender.
        let first = loop {
            if let Some(m) = ep.next().expect("next") {
                break m.data == pattern(LONG, 0);
            }
            assert!(Instant::now() < deadline, "no long message arrived");
            ep.wait(Duration::from_millis(50)).expect("wait");
        };
        assert!(first, "first long message differs");
        ep.consume(LONG).expect("consume");
        // The second message's copy starts in the next `next`; the kill lands around it.
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(delay_ms));
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
        });
        let started = Instant::now();
        let outcome = loop {
            match ep.next() {
                Ok(Some(m)) => break Ok(m.data == pattern(LONG, 1)),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            assert!(started.elapsed() < LIMIT, "the receive hung after the kill");
            ep.wait(Duration::from_millis(10)).expect("wait");
        };
        killer.join().expect("killer");
        eprintln!(
            "split kill after {delay_ms} ms: {:?}",
            outcome.as_ref().map_err(|e| e.to_string())
        );
        match outcome {
            Ok(exact) => assert!(exact, "second long message differs"),
            Err(e) => assert!(matches!(e, Error::PeerFailed(_)), "{e}"),
        }
    }
}

#[test]
fn killed_peer_completes_every_accepted_descriptor_once() {
    let path = socket_path("kill-many");
    let listener = shm::Listener::bind(&path).expect("bind");
    let mut child = spawn_peer("stall", &path);
    let config = Config {
        liveness_interval: Duration::from_millis(10),
        ..Config::default()
    };
    let mut ep = listener.accept(config).expect("accept");
    assert_eq!(recv(&mut ep).expect("up").0, 7);
    // Posts without progress in between until the peer's ring is full: small copied sends,
    // owned buffers, long messages the peer never takes, emulated writes and reads it never
    // serves.
    let mut accepted = std::collections::HashMap::new();
    let mut id = 0u64;
    for round in 0..2 {
        for i in 0..2000usize {
            id += 1;
            let (op, posted) = match i % 97 {
                13 => (
                    shm::Op::Write,
                    ep.post_write(id, shm::RegionKey(1), 0, &[3u8; 1000])
                        .expect("write")
                        .is_posted(),
                ),
                29 => (
                    shm::Op::Read,
                    ep.post_read(id, shm::RegionKey(1), 0, vec![0u8; 4096])
                        .expect("read")
                        .is_posted(),
                ),
                50 => (
                    shm::Op::Send,
                    ep.post_send_buf(id, 5, vec![4u8; 2 << 20])
                        .expect("send")
                        .is_posted(),
                ),
                n if n % 3 == 0 => (
                    shm::Op::Send,
                    ep.post_send_buf(id, 6, vec![5u8; 64 << 10])
                        .expect("send")
                        .is_posted(),
                ),
                _ => (
                    shm::Op::Send,
                    ep.post_send(id, 7, &[6u8; 200]).expect("send").is_posted(),
                ),
            };
            if posted {
                accepted.insert(id, op);
            } else if op == shm::Op::Send {
                break;
            }
        }
        if round == 0 {
            let _ = ep.wait(Duration::from_millis(5));
        }
    }
    assert!(!accepted.is_empty());
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let mut done = std::collections::HashMap::new();
    let deadline = Instant::now() + LIMIT;
    while done.len() < accepted.len() {
        while let Some(c) = ep.poll() {
            assert_eq!(accepted.get(&c.id), Some(&c.op), "{} never posted", c.id);
            assert!(
                done.insert(c.id, c.result).is_none(),
                "descriptor {} completed twice",
                c.id
            );
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} accepted descriptors never completed after the peer died",
            accepted.len() - done.len(),
            accepted.len()
        );
        let _ = ep.wait(Duration::from_millis(10));
    }
    for (id, result) in &done {
        match (accepted[id], result) {
            (shm::Op::Send, Ok(_)) | (_, Err(Error::PeerFailed(_))) => {}
            (op, other) => panic!("descriptor {id} ({op:?}) ended with {other:?}"),
        }
    }
    assert!(done.values().any(|r| r.is_err()));
    assert!(matches!(
        ep.post_send(1 << 40, 1, b"late"),
        Err(Error::PeerFailed(_))
    ));
    assert!(ep.poll().is_none());
}
