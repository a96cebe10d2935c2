//! Shared-memory method between two threads of one process.

use std::thread;
use std::time::{Duration, Instant};

use viaduct_fallback::shm::{self, AccessError, Config, Endpoint, Error, LongMessages, Posted};

const LIMIT: Duration = Duration::from_secs(20);

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

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

/// The next inbound message, copied out and consumed, if one is there now.
fn take_next(ep: &mut Endpoint) -> Option<(u64, Vec<u8>)> {
    let out = ep.next().expect("next").map(|m| (m.tag, m.data.to_vec()))?;
    ep.consume(out.1.len()).expect("consume");
    Some(out)
}

fn recv(ep: &mut Endpoint) -> (u64, Vec<u8>) {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(out) = take_next(ep) {
            return out;
        }
        assert!(Instant::now() < deadline, "no message arrived");
        ep.wait(Duration::from_millis(50)).expect("wait");
    }
}

/// Drains completions until `n` arrived; all must succeed.
fn reap(ep: &mut Endpoint, n: usize) {
    let deadline = Instant::now() + LIMIT;
    let mut got = 0;
    while got < n {
        match ep.poll() {
            Some(c) => {
                c.result.expect("completion failed");
                got += 1;
            }
            None => {
                assert!(Instant::now() < deadline, "only {got} of {n} completions");
                ep.wait(Duration::from_millis(50)).expect("wait");
            }
        }
    }
}

const SIZES: [usize; 9] = [0, 1, 63, 64, 4095, 4096, 65536, 1 << 20, 16 << 20];

fn sizes_round_trip(config: Config, expect: LongMessages) {
    let (mut a, mut b) = shm::pair(config).expect("pair");
    assert_eq!(a.long_messages(), expect);
    assert_eq!(b.long_messages(), expect);
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
fn sizes_arrive_byte_exact_single_copy() {
    sizes_round_trip(Config::default(), LongMessages::SingleCopy);
}

#[test]
fn sizes_arrive_byte_exact_through_ring_chunks() {
    let config = Config {
        single_copy: false,
        ..Config::default()
    };
    sizes_round_trip(config, LongMessages::RingChunks);
}

/// Sends `count` long messages of `len` bytes from `a` to `b` (sender in a thread that keeps
/// making progress), checks each byte-exact and returns the bytes the sender copied itself.
fn long_messages_split(sender_config: Config, receiver_config: Config, count: u64) -> u64 {
    const LEN: usize = (8 << 20) + 5;
    let (mut a, mut b) = shm::pair_with(sender_config, receiver_config).expect("pair");
    let sender = thread::spawn(move || {
        // Made before the first send, so the sender is polling while the receiver copies.
        let bufs: Vec<Vec<u8>> = (0..count).map(|i| pattern(LEN, i)).collect();
        for (i, buf) in bufs.into_iter().enumerate() {
            send(&mut a, i as u64, i as u64, buf);
        }
        reap(&mut a, count as usize);
        a.bytes_copied_for_peer()
    });
    for i in 0..count {
        let (tag, data) = recv(&mut b);
        assert_eq!(tag, i);
        assert!(data == pattern(LEN, i), "long message {i} differs");
    }
    sender.join().expect("sender thread")
}

#[test]
fn split_single_copy_shares_the_work_and_stays_byte_exact() {
    // Both ends copy chunks: over 12 messages of 9 chunks each the sender, which keeps polling,
    // takes some of them.
    let helped = long_messages_split(Config::default(), Config::default(), 12);
    assert!(helped > 0, "the sender never copied a chunk");
    assert!(
        helped < 12 * ((8 << 20) + 5),
        "the receiver never copied a chunk"
    );
    // Either end can turn it off; then the receiver copies alone.
    let off = Config {
        split_copy: false,
        ..Config::default()
    };
    assert_eq!(long_messages_split(off.clone(), Config::default(), 4), 0);
    assert_eq!(long_messages_split(Config::default(), off, 4), 0);
}

#[test]
fn million_small_messages_arrive_in_order() {
    const N: u64 = 1_000_000;
    let (mut a, mut b) = shm::pair(Config::default()).expect("pair");
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
            while a.poll().is_some() {}
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
    let (mut a, mut b) = shm::pair(Config::default()).expect("pair");
    let small = pattern(1000, 7);
    let large = pattern(300_000, 9);
    send(&mut a, 1, 1, small.clone());
    send(&mut a, 2, 2, large.clone());
    let empty = a.post_send(3, 3, &[]).expect("post");
    assert_eq!(empty, Posted::InProgress);
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
                    b.wait(Duration::from_millis(50)).expect("wait");
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
    let m = b.next().expect("next").expect("empty message");
    assert!(m.data.is_empty());
    assert!(matches!(b.consume(1), Err(Error::ConsumeBeyond { .. })));
    b.consume(0).expect("consume empty");
    reap(&mut a, 3);
}

#[test]
fn emulated_write_and_read_check_key_and_bounds() {
    let (mut a, mut b) = shm::pair(Config::default()).expect("pair");
    let key = b.register(vec![0u8; 4096]);
    let bad = shm::RegionKey(key.0 ^ 0x40);
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
        Err(Error::RemoteAccess(AccessError::BadKey))
    ));
    assert!(matches!(
        seen[&3].result,
        Err(Error::RemoteAccess(AccessError::OutOfBounds))
    ));
    assert!(matches!(
        seen[&4].result,
        Err(Error::RemoteAccess(AccessError::OutOfBounds))
    ));
    assert_eq!(seen[&5].buffer.as_deref(), Some(&data[..]));
    assert!(matches!(
        seen[&6].result,
        Err(Error::RemoteAccess(AccessError::BadKey))
    ));
    assert!(matches!(
        seen[&7].result,
        Err(Error::RemoteAccess(AccessError::OutOfBounds))
    ));
    assert_eq!(
        seen[&6].result.as_ref().err().map(Error::errno),
        Some(libc_eacces())
    );
    send(&mut a, 8, 99, Vec::new());
    let b = server.join().expect("server");
    let region = b.region(key).expect("region");
    assert_eq!(&region[100..1100], &data[..]);
    assert!(region[..100].iter().all(|&x| x == 0) && region[1100..].iter().all(|&x| x == 0));
}

fn libc_eacces() -> i32 {
    13
}

#[test]
fn receiver_that_does_not_consume_stops_the_sender() {
    let config = Config {
        ring_bytes: 64 << 10,
        eager_limit: 4096,
        chunk_bytes: 4096,
        poll_prefetch: true,
        ..Config::default()
    };
    let (mut a, mut b) = shm::pair(config).expect("pair");
    let mut accepted = 0u64;
    let mut refused = 0;
    while refused < 1000 {
        match a.post_send(accepted, accepted, &[7u8; 100]).expect("post") {
            Posted::InProgress => accepted += 1,
            Posted::NoResources(()) => refused += 1,
        }
    }
    // 100-byte messages take 192-byte records: the ring bounds what is in flight.
    assert!(
        accepted <= (64 << 10) / 192,
        "{accepted} messages accepted into a 64 KiB ring"
    );
    assert!(accepted > 0);
    let mut got = 0u64;
    while let Some(m) = b.next().expect("next") {
        assert_eq!(m.tag, got);
        b.consume(100).expect("consume");
        got += 1;
    }
    assert_eq!(got, accepted);
    assert!(
        a.post_send(accepted, accepted, &[1])
            .expect("post")
            .is_posted()
    );
}

#[test]
fn dropped_peer_fails_outstanding_descriptors() {
    let config = Config {
        liveness_interval: Duration::from_millis(5),
        ..Config::default()
    };
    let (mut a, b) = shm::pair(config).expect("pair");
    let key = shm::RegionKey(1);
    // Long sends wait for the receiver to read them; reads wait for a reply.
    send(&mut a, 1, 1, vec![1u8; 1 << 20]);
    assert!(
        a.post_read(2, key, 0, vec![0; 8])
            .expect("read")
            .is_posted()
    );
    drop(b);
    let mut ids = Vec::new();
    let deadline = Instant::now() + LIMIT;
    while ids.len() < 2 {
        match a.poll() {
            Some(c) => {
                assert!(
                    matches!(c.result, Err(Error::PeerFailed(_))),
                    "{:?}",
                    c.result
                );
                assert_eq!(c.result.as_ref().err().map(Error::errno), Some(32));
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
    assert!(matches!(
        shm::pair(Config {
            ring_bytes: 1000,
            ..Config::default()
        }),
        Err(Error::Config(_))
    ));
    let config = Config {
        max_message: 1 << 20,
        ..Config::default()
    };
    let (mut a, _b) = shm::pair(config).expect("pair");
    let r = a.post_send_buf(1, 0, vec![0; (1 << 20) + 1]);
    assert!(matches!(r, Err(Error::TooLong { .. })));
    assert_eq!(r.err().map(|e| e.errno()), Some(90));
    assert!(matches!(a.consume(1), Err(Error::ConsumeBeyond { .. })));
}

/// A sender asleep on a full ring is woken by the release that frees space, even when the
/// receiver then calls nothing for a while: the release looks at the sender's sleep flag itself
/// (the fenced check it may owe is only for a sender that falls asleep at that moment).
/// Liveness checks are set 10 s apart, so only the release can wake the sender sooner.
#[test]
fn a_sender_asleep_on_a_full_ring_wakes_at_the_release() {
    let config = Config {
        ring_bytes: 64 << 10,
        eager_limit: 4096,
        chunk_bytes: 4096,
        spin: 0,
        liveness_interval: Duration::from_secs(10),
        ..Config::default()
    };
    let (mut a, mut b) = shm::pair(config).expect("pair");
    let mut accepted = 0u64;
    while a
        .post_send(accepted, accepted, &[7u8; 100])
        .expect("post")
        .is_posted()
    {
        accepted += 1;
    }
    reap(&mut a, accepted as usize);
    assert!(a.poll().is_none());
    let (tx, rx) = std::sync::mpsc::channel();
    let receiver = thread::spawn(move || {
        // Let the sender fall asleep first.
        thread::sleep(Duration::from_millis(300));
        let n = b.next().expect("next").expect("a message").data.len();
        b.consume(n).expect("consume");
        tx.send(Instant::now()).expect("send");
        thread::sleep(Duration::from_secs(3));
        b
    });
    let slept = Instant::now();
    a.wait(Duration::from_secs(10)).expect("wait");
    let woke = Instant::now();
    let released = rx.recv().expect("the receiver released a record");
    assert!(
        woke > released,
        "the sender woke {:?} after it slept, before the release",
        woke - slept
    );
    assert!(
        woke < released + Duration::from_secs(2),
        "the sender slept on {:?} after the release",
        woke - released
    );
    assert!(
        a.post_send(accepted, accepted, &[7u8; 100])
            .expect("post")
            .is_posted(),
        "the released space takes a message"
    );
    let _b = receiver.join().expect("receiver");
}

/// Small records of one to five lines, in a ping-pong over the smallest ring, lap it many
/// times: every position of the ring, those near its end included, is polled empty right
/// after a record of each size (the consumer then prefetches the lines a record of that size
/// would take there: `poll_prefetch` on, whatever the processor) and then receives one. Every payload arrives byte exact, in order.
#[test]
fn small_records_of_several_lines_lap_the_ring_byte_exact() {
    let config = Config {
        ring_bytes: 64 << 10,
        eager_limit: 4096,
        chunk_bytes: 4096,
        poll_prefetch: true,
        ..Config::default()
    };
    // Payloads that make records of 1, 2, 2, 3, 4, 4 and 5 lines (40 header bytes in front).
    const LENS: [usize; 7] = [24, 25, 88, 100, 150, 216, 217];
    const ROUNDS: usize = 3000; // some 9 laps of a 64 KiB ring each way
    let (mut a, mut b) = shm::pair(config).expect("pair");
    let echo = thread::spawn(move || {
        for i in 0..ROUNDS {
            let (tag, data) = recv(&mut b);
            assert_eq!(tag, i as u64);
            send(&mut b, i as u64, tag, data);
            reap(&mut b, 1);
        }
        b
    });
    for i in 0..ROUNDS {
        let len = LENS[i % LENS.len()];
        send(&mut a, i as u64, i as u64, pattern(len, i as u64));
        reap(&mut a, 1);
        // Poll empty before the echo is there (most of the time), as a spinning receiver does.
        let deadline = Instant::now() + LIMIT;
        let (tag, data) = loop {
            if let Some(out) = take_next(&mut a) {
                break out;
            }
            assert!(Instant::now() < deadline, "echo {i} did not arrive");
        };
        assert_eq!(tag, i as u64);
        assert!(
            data == pattern(len, i as u64),
            "echo {i} of {len} bytes differs"
        );
    }
    echo.join().expect("echo thread");
}

/// The poll prefetch is on by default exactly on AMD (and Hygon) processors, as the kernel's
/// own reading of the vendor says.
#[test]
fn poll_prefetch_defaults_to_on_for_amd_processors() {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        eprintln!("skipped: /proc/cpuinfo cannot be read here");
        return;
    };
    let Some(vendor) = info.lines().find_map(|l| {
        l.strip_prefix("vendor_id")
            .map(|v| v.trim_start_matches([' ', '\t', ':']))
    }) else {
        eprintln!("skipped: /proc/cpuinfo names no vendor_id (not an x86 processor)");
        return;
    };
    let amd = vendor == "AuthenticAMD" || vendor == "HygonGenuine";
    assert_eq!(Config::default().poll_prefetch, amd, "vendor {vendor}");
}
