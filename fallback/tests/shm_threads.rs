//! Shared-memory method between two threads of one process.
//! The tests every method shares are in `method_contract.rs`; these are the ones of this method.

use std::thread;
use std::time::{Duration, Instant};

use viaduct_fallback::shm::{self, Config, Endpoint, Posted};

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
    // takes some of them. How the chunks split depends on which thread the kernel runs when (on
    // a loaded machine one thread may be off its core for a whole message), so a run in which
    // one side did all the copying is tried again, up to 5 runs: sharing must show in one.
    let total = 12 * ((8 << 20) + 5);
    let mut seen = Vec::new();
    for _ in 0..5 {
        let helped = long_messages_split(Config::default(), Config::default(), 12);
        seen.push(helped);
        if helped > 0 && helped < total {
            break;
        }
    }
    let last = *seen.last().unwrap();
    assert!(
        seen.iter().any(|h| *h > 0),
        "the sender never copied a chunk in {} runs",
        seen.len()
    );
    assert!(
        last > 0 && last < total,
        "no run had both ends copy (bytes the sender copied, per run of {total}: {seen:?})"
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
        // Stamped before the release: the sender may wake (and stamp) as soon as the consume
        // lands, before this thread runs again.
        let releasing = Instant::now();
        b.consume(n).expect("consume");
        tx.send(releasing).expect("send");
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

#[test]
fn long_messages_up_to_ring_copy_max_go_through_the_ring_byte_exact() {
    // Sizes around the eager limit, the chunk size and the ring-copy limit, sent in one burst
    // (several chunked messages outstanding), each checked byte by byte.
    let config = Config {
        eager_limit: 4096,
        ring_copy_chunk: 3000,
        ring_copy_max: 40_000,
        ..Config::default()
    };
    let sizes = [
        4097, 5999, 6000, 6001, 9000, 39_999, 40_000, 40_001, 100_000, 4096,
    ];
    let (mut a, mut b) = shm::pair(config).expect("pair");
    let sender = thread::spawn(move || {
        for (i, len) in sizes.iter().enumerate() {
            send(&mut a, i as u64, i as u64, pattern(*len, i as u64));
        }
        reap(&mut a, sizes.len());
    });
    for (i, len) in sizes.iter().enumerate() {
        let (tag, data) = recv(&mut b);
        assert_eq!(tag, i as u64);
        assert_eq!(data.len(), *len);
        assert!(
            data == pattern(*len, i as u64),
            "message {i} of {len} B differs"
        );
    }
    sender.join().expect("sender thread");
}

/// Whether a send of `len` bytes completes while the receiver does nothing at all (a message
/// copied through the ring completes once it is in the ring; a single copy waits for the
/// receiver to read it).
fn completes_without_the_receiver(config: Config, len: usize) -> bool {
    let (mut a, b) = shm::pair(config).expect("pair");
    send(&mut a, 1, 1, pattern(len, 1));
    let deadline = Instant::now() + Duration::from_millis(300);
    let done = loop {
        if let Some(c) = a.poll() {
            c.result.expect("send completion");
            break true;
        }
        if Instant::now() >= deadline {
            break false;
        }
        thread::sleep(Duration::from_millis(1));
    };
    drop(b);
    done
}

#[test]
fn ring_copy_max_chooses_between_the_ring_and_single_copy() {
    let probe = shm::pair(Config::default()).expect("pair");
    if probe.0.long_messages() != shm::LongMessages::SingleCopy {
        eprintln!(
            "skipped: process_vm_readv is not permitted here, every long message goes through the ring"
        );
        return;
    }
    drop(probe);
    let config = |max: usize| Config {
        ring_copy_max: max,
        ..Config::default()
    };
    let len = 64 << 10;
    assert!(
        completes_without_the_receiver(config(len), len),
        "a {len} B message within ring_copy_max did not go through the ring"
    );
    assert!(
        !completes_without_the_receiver(config(len - 1), len),
        "a {len} B message past ring_copy_max did not wait for the receiver's single copy"
    );
    assert!(
        !completes_without_the_receiver(config(0), len),
        "ring_copy_max 0 still copied through the ring"
    );
}

#[test]
fn ring_copy_settings_are_checked() {
    let bad_chunk = Config {
        ring_copy_chunk: 10,
        ..Config::default()
    };
    let e = bad_chunk.validate().expect_err("a 10-byte chunk");
    assert!(e.to_string().contains("ring_copy_chunk 10"), "{e}");
    // A ring-copy limit past the largest message is no error (no message reaches it).
    let small_max = Config {
        max_message: 1 << 20,
        ..Config::default()
    };
    small_max
        .validate()
        .expect("ring_copy_max above max_message");
}

#[test]
fn long_copied_sends_reuse_their_buffers_and_stay_byte_exact() {
    // Borrowed long messages of changing sizes (ring copy and single copy, where permitted),
    // many more than the endpoint keeps buffers for: every one arrives byte-exact, and their
    // completions hand no buffer back (the endpoint keeps it for the next copy).
    let (mut a, mut b) = shm::pair(Config::default()).expect("pair");
    let sizes: Vec<usize> = (0..24)
        .map(|i| [20_000, 200_000, 70_000, 600_000, 140_000][i % 5] + i)
        .collect();
    let expect = sizes.clone();
    let sender = thread::spawn(move || {
        for (i, len) in sizes.iter().enumerate() {
            let data = pattern(*len, i as u64);
            let deadline = Instant::now() + LIMIT;
            while !a
                .post_send(i as u64, i as u64, &data)
                .expect("post_send")
                .is_posted()
            {
                assert!(Instant::now() < deadline, "send {i} made no progress");
                a.wait(Duration::from_millis(50)).expect("wait");
            }
            let deadline = Instant::now() + LIMIT;
            loop {
                if let Some(c) = a.poll() {
                    assert_eq!(c.id, i as u64);
                    c.result.expect("send completion");
                    assert!(c.buffer.is_none(), "a copied send handed a buffer back");
                    break;
                }
                assert!(Instant::now() < deadline, "send {i} did not complete");
                a.wait(Duration::from_millis(50)).expect("wait");
            }
        }
    });
    for (i, len) in expect.iter().enumerate() {
        let (tag, data) = recv(&mut b);
        assert_eq!(tag, i as u64);
        assert_eq!(data.len(), *len);
        assert!(
            data == pattern(*len, i as u64),
            "message {i} of {len} B differs"
        );
    }
    sender.join().expect("sender thread");
}

/// Posts borrowed `parts` until the endpoint takes them.
fn post_parts(ep: &mut Endpoint, id: u64, parts: &[&[u8]]) {
    let deadline = Instant::now() + LIMIT;
    while !ep
        .post_send_parts(id, id, parts)
        .expect("post_send_parts")
        .is_posted()
    {
        assert!(Instant::now() < deadline, "send {id} made no progress");
        ep.wait(Duration::from_millis(50)).expect("wait");
    }
}

#[test]
fn borrowed_ring_copies_larger_than_the_free_ring_stay_byte_exact() {
    // A borrowed long message goes into the ring from the caller's memory as far as the ring
    // has room, the rest from a copy. Sizes around the ring's free room (64 KiB ring), odd
    // sizes, parts split inside a chunk, some posted behind a queued chunked send and some onto
    // a ring another message fills, all byte-exact and in order.
    let ring = 64 << 10;
    let config = Config {
        ring_bytes: ring,
        eager_limit: 4096,
        chunk_bytes: 8192,
        ring_copy_chunk: 5000,
        ring_copy_max: 1 << 20,
        ..Config::default()
    };
    let sizes = [
        4097,
        5000,
        5001,
        ring - 1,
        ring,
        ring + 1,
        3 * ring + 7,
        250_001,
        1 << 20,
        9999,
        (1 << 20) - 3,
    ];
    let (mut a, mut b) = shm::pair(config).expect("pair");
    let sender = thread::spawn(move || {
        for (i, len) in sizes.iter().enumerate() {
            let data = pattern(*len, i as u64);
            // Three parts, the first two cut inside the first chunk and at an odd offset.
            let (x, rest) = data.split_at(7.min(*len));
            let (y, z) = rest.split_at((len / 3).min(rest.len()));
            post_parts(&mut a, i as u64, &[x, y, z]);
        }
        reap(&mut a, sizes.len());
    });
    for (i, len) in sizes.iter().enumerate() {
        let (tag, data) = recv(&mut b);
        assert_eq!(tag, i as u64);
        assert_eq!(data.len(), *len, "message {i}");
        assert!(
            data == pattern(*len, i as u64),
            "message {i} of {len} B differs"
        );
    }
    sender.join().expect("sender thread");
}

#[test]
fn borrowed_ring_copy_larger_than_the_ring_fails_when_the_peer_goes() {
    // The receiver takes the start of a message four rings long and then goes: the send,
    // part of it still queued, completes with an error within a bounded time.
    let ring = 64 << 10;
    let config = Config {
        ring_bytes: ring,
        eager_limit: 4096,
        chunk_bytes: 8192,
        ring_copy_max: 1 << 20,
        liveness_interval: Duration::from_millis(20),
        ..Config::default()
    };
    let (mut a, mut b) = shm::pair(config).expect("pair");
    let data = pattern(4 * ring, 3);
    post_parts(&mut a, 1, &[&data]);
    // The receiver never consumes the whole: it leaves with the message half read.
    let deadline = Instant::now() + Duration::from_millis(200);
    while Instant::now() < deadline {
        let _ = b.next().expect("next");
        thread::sleep(Duration::from_millis(1));
    }
    drop(b);
    let deadline = Instant::now() + LIMIT;
    let result = loop {
        if let Some(c) = a.poll() {
            break c.result;
        }
        assert!(
            Instant::now() < deadline,
            "the send never completed after the peer left"
        );
        let _ = a.wait(Duration::from_millis(20));
    };
    let e = result.expect_err("a send the peer never took completed successfully");
    assert!(e.to_string().contains("peer"), "{e}");
}

#[test]
fn single_copies_land_at_the_senders_offset_within_a_cache_line_byte_exact() {
    // Long messages by single copy (ring copy off), with and without the sender's help: each
    // lands in the receiver's memory at the same offset within a 64-byte line as the sender's
    // buffer (the copy then moves whole lines), whatever the two allocations' offsets, and
    // arrives byte-exact through `next` and through a lease. (Large blocks from the heap,
    // where the small allocations between the messages shift where each begins; a fresh
    // mapping per block would put every one at the same offset.)
    viaduct_fallback::memory::keep_large_blocks(64 << 20);
    for split_copy in [false, true] {
        let config = Config {
            ring_copy_max: 0,
            split_copy,
            ..Config::default()
        };
        let (mut a, mut b) = shm::pair(config).expect("pair");
        if a.long_messages() != shm::LongMessages::SingleCopy {
            println!("SKIPPED: single copy is not permitted here (process_vm_readv)");
            return;
        }
        const COUNT: usize = 24;
        let sizes: Vec<usize> = (0..COUNT).map(|i| 300_000 + 4099 * i + i % 7).collect();
        let expect = sizes.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let sender = thread::spawn(move || {
            // Allocations of differing sizes between the messages shift where each begins.
            let mut keep = Vec::new();
            for (i, len) in sizes.iter().enumerate() {
                keep.push(vec![0u8; 16 * (i % 5) + 1]);
                let data = pattern(*len, i as u64);
                tx.send(data.as_ptr() as usize % 64).expect("offset");
                send(&mut a, i as u64, i as u64, data);
                reap(&mut a, 1);
            }
        });
        let mut offsets = std::collections::BTreeSet::new();
        for (i, len) in expect.iter().enumerate() {
            let from = rx.recv().expect("sender's offset");
            let deadline = Instant::now() + LIMIT;
            let at = loop {
                if let Some(m) = b.next().expect("next") {
                    assert_eq!(m.tag, i as u64);
                    assert!(m.data == pattern(*len, i as u64), "message {i} differs");
                    break m.data.as_ptr() as usize % 64;
                }
                assert!(Instant::now() < deadline, "message {i} did not arrive");
                b.wait(Duration::from_millis(50)).expect("wait");
            };
            assert_eq!(
                at, from,
                "message {i} of {len} B: receiver at {at}, sender at {from}"
            );
            offsets.insert(from);
            if i % 2 == 0 {
                b.consume(*len).expect("consume");
            } else {
                let lease = b.lend().expect("lend").expect("a current message");
                assert!(*lease == pattern(*len, i as u64)[..], "lease {i} differs");
                assert_eq!(lease.as_ptr() as usize % 64, from);
                b.give_back(lease).expect("give back");
            }
        }
        sender.join().expect("sender thread");
        println!("split copy {split_copy}: senders' offsets within a line {offsets:?}");
    }
}

#[test]
fn poll_found_takes_what_the_last_pass_found_and_makes_no_pass_of_its_own() {
    let (mut a, mut b) = shm::pair(Config {
        ring_copy_max: 0,
        ..Config::default()
    })
    .expect("pair");
    // Three eager sends complete as they are posted: one poll takes the first, the rest come
    // from `poll_found`, then nothing.
    for id in 1..=3 {
        send(&mut a, id, 7, pattern(32, id));
    }
    let mut ids = vec![a.poll().expect("a completed send").id];
    while let Some(c) = a.poll_found() {
        c.result.expect("send completion");
        ids.push(c.id);
    }
    assert_eq!(ids, [1, 2, 3]);
    for id in 1..=3 {
        assert_eq!(recv(&mut b), (7, pattern(32, id)));
    }
    let single_copy = a.long_messages() == shm::LongMessages::SingleCopy;
    // A long message completes when the receiver has read it, which only a pass of the sender
    // notices: `poll_found` does not, `poll` does.
    let len = 64 << 10;
    send(&mut a, 4, 8, pattern(len, 4));
    send(&mut a, 5, 8, pattern(32, 5));
    let first = a.poll().expect("the eager send behind it");
    let mut second = None;
    if single_copy {
        assert_eq!(first.id, 5, "the single copy completed before it was read");
        assert!(a.poll_found().is_none());
        let (tag, data) = recv(&mut b);
        assert_eq!((tag, data.len()), (8, len));
        assert!(data == pattern(len, 4), "the long message arrived changed");
        assert!(
            a.poll_found().is_none(),
            "poll_found made a pass: it found the read of the long message"
        );
    } else {
        eprintln!(
            "skipped in part: process_vm_readv is not permitted here, long messages go through the ring"
        );
        second = a.poll_found();
        let (tag, data) = recv(&mut b);
        assert_eq!((tag, data.len()), (8, len));
    }
    let deadline = Instant::now() + LIMIT;
    while second.is_none() {
        second = a.poll();
        assert!(Instant::now() < deadline, "the long send never completed");
    }
    let mut ids = [first.id, second.expect("completion").id];
    ids.sort();
    assert_eq!(ids, [4, 5]);
    assert_eq!(recv(&mut b), (8, pattern(32, 5)));
}
