//! Shared-memory method between two processes: the test binary re-executes itself as the peer.
//! The tests every method shares are in `method_contract.rs`; these are the shared-memory ones.

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
        "echo-chunks" | "echo-unprivileged" => loop {
            let (tag, data) = recv(&mut ep).expect("recv");
            if tag == u64::MAX {
                break;
            }
            send(&mut ep, tag, tag, data).expect("send");
            while ep.poll().is_some() {}
        },
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
fn sizes_echo_byte_exact_between_processes_through_ring_chunks() {
    echo_sizes("echo-chunks", "chunks", LongMessages::RingChunks);
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
