//! TCP method between two processes over 127.0.0.1: the test binary re-executes itself as the
//! peer.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use viaduct_fallback::tcp::{self, Config, Endpoint, Error, Posted};

// A stall, not a speed: a million messages in a debug build take 5-18 s, more on a busy
// 2-core machine (20 s was missed there at load 10-14), so the bound leaves room.
const LIMIT: Duration = Duration::from_secs(90);
const ROLE: &str = "VIADUCT_TCP_TEST_ROLE";
const ADDR: &str = "VIADUCT_TCP_TEST_ADDR";

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

/// Posts a send and drives the endpoint until its completion (a frame queued behind a
/// `sendmsg` in flight leaves only when the endpoint makes progress).
fn send(ep: &mut Endpoint, id: u64, tag: u64, mut buf: Vec<u8>) -> Result<(), Error> {
    let deadline = Instant::now() + LIMIT;
    loop {
        match ep.post_send_buf(id, tag, buf)? {
            Posted::InProgress => break,
            Posted::NoResources(b) => buf = b,
        }
        assert!(Instant::now() < deadline, "send {id} made no progress");
        ep.wait(Duration::from_millis(50))?;
    }
    loop {
        while let Some(c) = ep.poll() {
            if c.id == id {
                return c.result.map(drop);
            }
        }
        assert!(Instant::now() < deadline, "send {id} never completed");
        ep.wait(Duration::from_millis(50))?;
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

/// Starts this test binary again as the peer playing `role`, connecting to `addr`.
fn spawn_peer(role: &str, addr: std::net::SocketAddr) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "peer_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(ADDR, addr.to_string())
        .spawn()
        .expect("spawn peer")
}

fn listen() -> (tcp::Listener, std::net::SocketAddr) {
    let l = tcp::Listener::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let a = l.local_addr().expect("local address");
    (l, a)
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

/// Entry point of the peer process; does nothing in an ordinary test run.
#[test]
fn peer_process_entry() {
    let (Ok(role), Ok(addr)) = (std::env::var(ROLE), std::env::var(ADDR)) else {
        return;
    };
    let config = Config {
        zero_copy_threshold: 65536,
        ..Config::default()
    };
    let mut ep = tcp::connect(addr.parse().expect("address"), config).expect("connect");
    match role.as_str() {
        "echo" => loop {
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
                if i % 64 == 0 {
                    while ep.poll().is_some() {}
                }
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
                if i % 64 == 0 {
                    while ep.poll().is_some() {}
                }
            }
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

#[test]
fn sizes_echo_byte_exact_between_processes() {
    let (listener, addr) = listen();
    let child = spawn_peer("echo", addr);
    let mut ep = listener.accept(Config::default()).expect("accept");
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
fn million_messages_from_another_process_arrive_in_order() {
    let (listener, addr) = listen();
    let child = spawn_peer("stream", addr);
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
    let (listener, addr) = listen();
    let mut child = spawn_peer("endless", addr);
    let mut ep = listener.accept(Config::default()).expect("accept");
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
    // The peer never reads messages, so the read request behind this one is never served.
    assert!(ep.post_send(1, 1, &[5u8; 100]).expect("send").is_posted());
    assert!(
        ep.post_read(2, tcp::RegionKey(3), 0, vec![0; 16])
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
            // The send may have left before the kill; otherwise it failed.
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
    let (listener, addr) = listen();
    let child = spawn_peer("rma-target", addr);
    let mut ep = listener.accept(Config::default()).expect("accept");
    let (key, _) = recv(&mut ep).expect("key");
    let key = tcp::RegionKey(key as u32);
    let bad = tcp::RegionKey(key.0 ^ 0x40);
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
    let refused = |id: u64, want: tcp::AccessError| matches!(&seen[&id].result, Err(Error::RemoteAccess(e)) if *e == want);
    assert_eq!(seen[&1].result.as_ref().ok(), Some(&1000));
    assert!(refused(2, tcp::AccessError::BadKey));
    assert!(refused(3, tcp::AccessError::OutOfBounds));
    assert!(refused(5, tcp::AccessError::OutOfBounds));
    // The read sees the write and nothing else changed around it.
    let mut expect = vec![0u8; 4096];
    expect[100..1100].copy_from_slice(&data);
    assert!(seen[&4].buffer.as_deref() == Some(&expect[..]));
    send(&mut ep, 9, u64::MAX, Vec::new()).expect("stop");
    wait_child(child);
}
