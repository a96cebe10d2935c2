//! The message endpoint (`viaduct_verbs::msg`) against a real RDMA device (soft-RoCE `rxe0` in
//! the VM of `scripts/rxe-vm`): byte-exact messages, credit back-pressure, many messages in
//! flight, and a peer that goes away.
//!
//! Without a device each test prints `SKIPPED: ...` and returns, unless
//! `VIADUCT_REQUIRE_RDMA=1` is set (the VM sets it), where a missing device fails the test.
//! Run one at a time: `--test-threads=1`.

mod common;

use common::{ctx, pattern};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use viaduct_verbs::msg::{self, Card, Config, Endpoint, Error, Posted};

/// Upper bound on every loop of these tests.
const LIMIT: Duration = Duration::from_secs(60);

fn small() -> Config {
    Config {
        recv_buffers: 8,
        buffer_bytes: 4096,
        send_slots: 8,
        ..Config::default()
    }
}

fn check_deadline(start: Instant, what: &str, a: &Endpoint, b: &Endpoint) {
    assert!(
        start.elapsed() < LIMIT,
        "{what} did not finish within {LIMIT:?}: {a:?} / {b:?}"
    );
}

/// Completions by descriptor id.
type Done = HashMap<u64, Result<usize, Error>>;

/// Sends `msgs` from `a` to `b` (posting whenever `a` has resources) and returns what `b`
/// received, with `a`'s completions by id. Checks that single-buffer messages are shown in a
/// registered receive buffer.
fn transfer(
    a: &mut Endpoint,
    b: &mut Endpoint,
    msgs: &[(u64, Vec<u8>)],
) -> (Vec<(u64, Vec<u8>)>, Done) {
    let start = Instant::now();
    let mut next_send = 0;
    let mut got = Vec::new();
    let mut done = HashMap::new();
    let frag = (b.config().buffer_bytes as usize).min(a.config().buffer_bytes as usize) - 16;
    while got.len() < msgs.len() || done.len() < msgs.len() {
        check_deadline(start, "transfer", a, b);
        let mut busy = false;
        if next_send < msgs.len() {
            let (tag, data) = &msgs[next_send];
            match a.post_send(next_send as u64, *tag, data).expect("post") {
                Posted::InProgress => {
                    next_send += 1;
                    busy = true;
                }
                Posted::NoResources(()) => {}
            }
        }
        while let Some(c) = a.poll() {
            assert!(done.insert(c.id, c.result).is_none(), "id {} twice", c.id);
            busy = true;
        }
        if let Some(m) = b.next().expect("next") {
            let (tag, data) = (m.tag, m.data.to_vec());
            let at = m.data.as_ptr() as usize;
            if !data.is_empty() && data.len() <= frag {
                assert!(
                    b.receive_buffers()
                        .iter()
                        .take(b.config().recv_buffers as usize)
                        .any(|r| r.contains(&at)),
                    "a {}-byte message is not shown in a registered receive buffer",
                    data.len()
                );
            }
            let n = data.len();
            b.consume(n).expect("consume");
            got.push((tag, data));
            busy = true;
        }
        if !busy {
            b.wait(Duration::from_millis(5)).unwrap();
        }
    }
    (got, done)
}

#[test]
fn messages_of_every_size_arrive_byte_exact_both_ways() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, Config::default()).unwrap();
    let frag = Config::default().buffer_bytes as usize - 16;
    let sizes = [
        0usize,
        1,
        100,
        frag - 1,
        frag,
        frag + 1,
        3 * frag,
        1 << 20,
        4 << 20,
    ];
    let msgs: Vec<(u64, Vec<u8>)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &len)| (0xabcd_0000 + i as u64, pattern(len, i as u32)))
        .collect();
    for reverse in [false, true] {
        let (got, done) = if reverse {
            transfer(&mut b, &mut a, &msgs)
        } else {
            transfer(&mut a, &mut b, &msgs)
        };
        assert_eq!(got.len(), msgs.len());
        for ((tag, data), (gtag, gdata)) in msgs.iter().zip(&got) {
            assert_eq!(tag, gtag);
            assert!(data == gdata, "a {}-byte message differs", data.len());
        }
        for (i, (_, data)) in msgs.iter().enumerate() {
            assert_eq!(*done[&(i as u64)].as_ref().unwrap(), data.len());
        }
    }
    println!("sizes {sizes:?} arrived byte-exact in both directions");
}

#[test]
fn parts_are_gathered_into_one_message_in_post_order() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, small()).unwrap();
    let frag = small().buffer_bytes as usize - 16;
    let head = pattern(8, 1);
    // Part layouts around the slot size (one slot: gathered straight into it; longer: an
    // owned buffer), an empty message, and owned sends in between that must keep their place.
    let plans: Vec<Vec<Vec<u8>>> = vec![
        vec![],
        vec![head.clone(), pattern(0, 2)],
        vec![head.clone(), pattern(100, 3)],
        vec![pattern(1, 4), pattern(2, 5), pattern(3, 6)],
        vec![head.clone(), pattern(frag - 8, 7)],
        vec![head.clone(), pattern(frag - 7, 8)],
        vec![head.clone(), pattern(3 * frag, 9)],
    ];
    let mut expected = Vec::new();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut done: Done = HashMap::new();
    let mut posted = 0;
    let total = plans.len() * 2;
    while got.len() < total || done.len() < total {
        check_deadline(start, "parts", &a, &b);
        if posted < total {
            let i = posted / 2;
            let tag = posted as u64;
            let ok = if posted % 2 == 0 {
                let parts: Vec<&[u8]> = plans[i].iter().map(Vec::as_slice).collect();
                let r = a
                    .post_send_parts(tag, tag, &parts)
                    .expect("post_send_parts");
                if r.is_posted() {
                    expected.push((tag, plans[i].concat()));
                }
                r.is_posted()
            } else {
                let data = pattern(frag + 3, 100 + i as u32);
                match a
                    .post_send_buf(tag, tag, data.clone())
                    .expect("post_send_buf")
                {
                    Posted::InProgress => {
                        expected.push((tag, data));
                        true
                    }
                    Posted::NoResources(_) => false,
                }
            };
            if ok {
                posted += 1;
            }
        }
        while let Some(c) = a.poll() {
            assert!(done.insert(c.id, c.result).is_none(), "id {} twice", c.id);
        }
        if let Some(m) = b.next().expect("next") {
            got.push((m.tag, m.data.to_vec()));
            let n = m.data.len();
            b.consume(n).expect("consume");
        }
    }
    assert_eq!(got.len(), expected.len());
    for ((tag, data), (etag, edata)) in got.iter().zip(&expected) {
        assert_eq!(tag, etag, "messages out of post order");
        assert!(data == edata, "message {tag}: {} bytes differ", data.len());
    }
    for (tag, data) in &expected {
        assert_eq!(
            done[tag].as_ref().map_err(|e| e.to_string()),
            Ok(&data.len()),
            "completion of {tag}"
        );
    }
}

#[test]
fn partial_consume_and_reassembly_buffer() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, small()).unwrap();
    let long = pattern(50_000, 9);
    assert!(a.post_send(1, 7, b"abcdef").unwrap().is_posted());
    let start = Instant::now();
    let mut seen = Vec::new();
    while seen.len() < 6 {
        check_deadline(start, "partial consume", &a, &b);
        let _ = a.poll();
        match b.next().unwrap() {
            Some(m) => {
                assert_eq!(m.tag, 7);
                seen.extend_from_slice(&m.data[..2]);
                b.consume(2).unwrap();
            }
            None => b.wait(Duration::from_millis(5)).unwrap(),
        }
    }
    assert_eq!(seen, b"abcdef");
    assert!(matches!(
        b.consume(1),
        Err(Error::ConsumeBeyond { available: 0, .. })
    ));
    let (got, _) = transfer(&mut a, &mut b, &[(8, long.clone())]);
    assert!(got[0].1 == long);
}

#[test]
fn a_receiver_that_does_not_consume_stops_the_sender_without_loss() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, small()).unwrap();
    let start = Instant::now();
    let mut accepted = 0u64;
    let mut refusals = 0;
    let mut done = 0u64;
    // The receiver only drives its queue pair (no next/consume): its buffers fill up.
    while refusals < 200 {
        check_deadline(start, "filling the receiver", &a, &b);
        let data = pattern(100, accepted as u32);
        match a.post_send(accepted, accepted, &data).unwrap() {
            Posted::InProgress => accepted += 1,
            Posted::NoResources(()) => {
                refusals += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        while let Some(c) = a.poll() {
            assert_eq!(c.id, done, "completions out of order");
            c.result.unwrap();
            done += 1;
        }
        b.wait(Duration::ZERO).unwrap();
    }
    // One credit stays back for credit messages.
    assert_eq!(accepted, u64::from(small().recv_buffers) - 1);
    println!("the sender was stopped after {accepted} messages, {refusals} refusals");
    let mut got = 0u64;
    let total = accepted + 50;
    let mut next_send = accepted;
    while got < total || done < total {
        check_deadline(start, "draining", &a, &b);
        if next_send < total
            && a.post_send(next_send, next_send, &pattern(100, next_send as u32))
                .unwrap()
                .is_posted()
        {
            next_send += 1;
        }
        while let Some(c) = a.poll() {
            assert_eq!(c.id, done, "completions out of order");
            c.result.unwrap();
            done += 1;
        }
        if let Some(m) = b.next().unwrap() {
            assert_eq!(m.tag, got, "a message was lost or reordered");
            assert!(m.data == pattern(100, got as u32));
            b.consume(100).unwrap();
            got += 1;
        } else {
            b.wait(Duration::from_millis(1)).unwrap();
        }
    }
}

#[test]
fn many_messages_in_flight_both_ways() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, Config::default()).unwrap();
    const N: usize = 400;
    let size = |i: usize| match i % 7 {
        0 => 0,
        1 => 70_000,
        _ => (i * 37) % 3000,
    };
    let mut sent = [0usize; 2];
    let mut recvd = [0usize; 2];
    let mut completed = [0usize; 2];
    let start = Instant::now();
    let mut eps = [&mut a, &mut b];
    while recvd.iter().any(|r| *r < N) || completed.iter().any(|c| *c < N) {
        check_deadline(start, "many messages", eps[0], eps[1]);
        for side in 0..2 {
            let ep = &mut eps[side];
            while sent[side] < N {
                let i = sent[side];
                match ep
                    .post_send(i as u64, i as u64, &pattern(size(i), (i + side) as u32))
                    .unwrap()
                {
                    Posted::InProgress => sent[side] += 1,
                    Posted::NoResources(()) => break,
                }
            }
            while let Some(c) = ep.poll() {
                assert_eq!(c.id as usize, completed[side]);
                c.result.unwrap();
                completed[side] += 1;
            }
            let other = 1 - side;
            while let Some(m) = ep.next().unwrap() {
                let i = recvd[side];
                assert_eq!(m.tag as usize, i);
                assert!(
                    m.data == pattern(size(i), (i + other) as u32),
                    "message {i}"
                );
                let n = m.data.len();
                ep.consume(n).unwrap();
                recvd[side] += 1;
            }
        }
    }
    println!("{N} messages each way, mixed sizes, arrived in order and byte-exact");
}

/// Posts until refused, plus a long message that cannot finish, and returns the ids accepted.
fn fill(a: &mut Endpoint, b: &mut Endpoint) -> Vec<u64> {
    let mut ids = Vec::new();
    let start = Instant::now();
    let mut refusals = 0;
    while refusals < 50 {
        check_deadline(start, "filling", a, b);
        let id = ids.len() as u64;
        let len = if id == 3 { 200_000 } else { 64 };
        match a.post_send(id, id, &pattern(len, 1)).unwrap() {
            Posted::InProgress => ids.push(id),
            Posted::NoResources(()) => refusals += 1,
        }
        b.wait(Duration::ZERO).unwrap();
    }
    ids
}

/// Polls `a` until it failed and every id in `ids` completed; checks exactly-once.
fn collect_failure(a: &mut Endpoint, b: Option<&Endpoint>, ids: &[u64]) -> (usize, usize, String) {
    let start = Instant::now();
    let mut seen: HashMap<u64, bool> = HashMap::new();
    while a.failure().is_none() || seen.len() < ids.len() {
        assert!(
            start.elapsed() < LIMIT,
            "the failure was not noticed within {LIMIT:?}: {a:?} / {b:?}"
        );
        while let Some(c) = a.poll() {
            assert!(ids.contains(&c.id), "unknown id {}", c.id);
            assert!(
                seen.insert(c.id, c.result.is_ok()).is_none(),
                "id {} completed twice",
                c.id
            );
        }
        a.wait(Duration::from_millis(20)).unwrap();
    }
    for _ in 0..100 {
        assert!(a.poll().is_none(), "a completion after all completed");
    }
    let why = a.failure().unwrap_or_default().to_owned();
    assert!(matches!(
        a.post_send(999, 0, b"late"),
        Err(Error::PeerFailed(_))
    ));
    let ok = seen.values().filter(|v| **v).count();
    (ok, seen.len() - ok, why)
}

#[test]
fn a_peer_that_closes_fails_outstanding_descriptors_once() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, small()).unwrap();
    let ids = fill(&mut a, &mut b);
    drop(b);
    let (ok, failed, why) = collect_failure(&mut a, None, &ids);
    println!(
        "{} accepted: {ok} completed, {failed} failed: {why}",
        ids.len()
    );
    assert!(failed >= 1, "the unfinished long message must fail");
    assert!(why.contains("closed"), "{why}");
}

#[test]
fn a_silent_peer_is_noticed_by_keepalive_and_fails_descriptors_once() {
    let Some(ctx) = ctx() else { return };
    let config = Config {
        peer_timeout: Duration::from_millis(500),
        keepalive: Duration::from_millis(100),
        ..small()
    };
    let (mut a, mut b) = msg::pair(&ctx, config).unwrap();
    let ids = fill(&mut a, &mut b);
    // The peer's queue pair stops answering (as if its process died), without a word.
    b.queue_pair().set_error().unwrap();
    let t = Instant::now();
    let (ok, failed, why) = collect_failure(&mut a, Some(&b), &ids);
    println!(
        "{} accepted: {ok} completed, {failed} failed after {:?}: {why}",
        ids.len(),
        t.elapsed()
    );
    assert!(failed >= 1);
    drop(b);
}

#[test]
fn prepared_card_round_trips_and_bad_settings_are_refused() {
    let Some(ctx) = ctx() else { return };
    let p = msg::Prepared::new(&ctx, small()).unwrap();
    let card = p.card();
    assert_eq!(Card::from_hex(&card.to_hex()).unwrap(), card);
    assert_eq!(card.recv_buffers, small().recv_buffers);
    let bad = Config {
        send_slots: 0,
        ..small()
    };
    assert!(matches!(
        msg::Prepared::new(&ctx, bad),
        Err(Error::Config(_))
    ));
    let (mut a, _b) = msg::pair(&ctx, small()).unwrap();
    assert!(matches!(
        a.post_send(1, 1, &vec![0; 65 << 20]),
        Err(Error::TooLong { .. })
    ));
}

/// Half round trips of a ping-pong between two endpoints driven by one thread in turn (each
/// side busy-polls until the message is there, then answers), printed per size for comparison
/// with `viaduct bench verbs-lat` in the same guest.
#[test]
fn ping_pong_half_round_trips_are_reported() {
    let Some(ctx) = ctx() else { return };
    for compact in [true, false] {
        let config = Config {
            compact_headers: compact,
            ..Config::default()
        };
        let (mut a, mut b) = msg::pair(&ctx, config).unwrap();
        println!("compact headers: {compact}");
        ping_pong(&mut a, &mut b);
    }
}

fn ping_pong(a: &mut Endpoint, b: &mut Endpoint) {
    const ITERS: usize = 200;
    fn hop(from: &mut Endpoint, to: &mut Endpoint, data: &[u8], start: Instant) {
        loop {
            assert!(start.elapsed() < LIMIT, "ping-pong stalled: {from:?}");
            if from.post_send(0, 1, data).unwrap().is_posted() {
                break;
            }
            while from.poll().is_some() {}
        }
        loop {
            assert!(start.elapsed() < LIMIT, "ping-pong stalled: {to:?}");
            if let Some(m) = to.next().unwrap() {
                assert_eq!(m.data.len(), data.len());
                to.consume(data.len()).unwrap();
                break;
            }
        }
        while from.poll().is_some() {}
    }
    for len in [8usize, 4096, 65536] {
        let data = pattern(len, 3);
        let start = Instant::now();
        let mut t = Vec::with_capacity(ITERS);
        for _ in 0..ITERS {
            let t0 = Instant::now();
            hop(a, b, &data, start);
            hop(b, a, &data, start);
            t.push(t0.elapsed());
        }
        t.sort();
        let median = t[t.len() / 2].as_secs_f64() * 1e6 / 2.0;
        println!("message endpoint ping-pong {len:>6} B: median half round trip {median:.1} us");
    }
}

/// Packets the device has sent (its `sent_pkts` counter), when it has the counter. The kernel
/// serves a counter read within its `lifespan` (10 ms by default) from a cache: wait past it.
fn sent_packets(ctx: &viaduct_verbs::Context) -> Option<u64> {
    std::thread::sleep(Duration::from_millis(100));
    let path = format!(
        "/sys/class/infiniband/{}/ports/1/hw_counters/sent_pkts",
        ctx.name()
    );
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `n` ping-pongs of `len` bytes with one tag (each message received and its send completed
/// before the next), and the packets the device sent meanwhile.
fn packets_for(
    ctx: &viaduct_verbs::Context,
    a: &mut Endpoint,
    b: &mut Endpoint,
    len: usize,
    n: usize,
) -> u64 {
    let data = pattern(len, 9);
    let before = sent_packets(ctx).unwrap();
    let start = Instant::now();
    for i in 0..n {
        let (from, to) = if i % 2 == 0 {
            (&mut *a, &mut *b)
        } else {
            (&mut *b, &mut *a)
        };
        loop {
            check_deadline(start, "ping-pong", from, to);
            if from.post_send(i as u64, 77, &data).unwrap().is_posted() {
                break;
            }
            while from.poll().is_some() {}
        }
        let mut sent = false;
        let mut got = false;
        while !(sent && got) {
            check_deadline(start, "ping-pong", from, to);
            if let Some(c) = from.poll() {
                assert_eq!(c.result.unwrap(), len);
                sent = true;
            }
            if !got {
                if let Some(m) = to.next().unwrap() {
                    assert_eq!((m.tag, m.data), (77, &data[..]));
                    to.consume(len).unwrap();
                    got = true;
                }
            }
        }
    }
    sent_packets(ctx).unwrap() - before
}

#[test]
fn a_whole_message_of_the_path_mtu_is_one_packet() {
    let Some(ctx) = ctx() else { return };
    if sent_packets(&ctx).is_none() {
        println!("SKIPPED: {} has no sent_pkts counter", ctx.name());
        return;
    }
    const N: usize = 64;
    let (mut a, mut b) = msg::pair(&ctx, Config::default()).unwrap();
    let mtu = a.queue_pair().endpoint().mtu.bytes() as usize;
    // Warm the tag tables, then count: one byte, then the MTU, with compact headers.
    packets_for(&ctx, &mut a, &mut b, 1, 4);
    let one = packets_for(&ctx, &mut a, &mut b, 1, N);
    let full_mtu = packets_for(&ctx, &mut a, &mut b, mtu, N);
    let full = Config {
        compact_headers: false,
        ..Config::default()
    };
    let (mut c, mut d) = msg::pair(&ctx, full).unwrap();
    let with_header = packets_for(&ctx, &mut c, &mut d, mtu, N);
    println!(
        "{N} messages: 1 B {one} packets, {mtu} B {full_mtu} packets; \
         {mtu} B with the header in the payload {with_header} packets"
    );
    assert!(
        full_mtu < one + (N / 4) as u64,
        "{mtu}-byte messages took {full_mtu} packets against {one} for 1-byte ones"
    );
    assert!(
        with_header >= one + (N * 3 / 4) as u64,
        "the header in the payload should add a packet per message: {with_header} against {one}"
    );
}

#[test]
fn compact_and_full_headers_interleave_byte_exact() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, small()).unwrap();
    let frag = small().buffer_bytes as usize - 16;
    // 300 tags cycle twice (more tags than table slots: slots are taken over and reused),
    // with repeats, at sizes inside one buffer and past it (fragments keep full headers).
    let mut msgs = Vec::new();
    for round in 0..2u64 {
        for t in 0..300u64 {
            let tag = 0x5eed_0000_0000 + t * 0x1_0001;
            let len = [0, 1, 64, frag - 1, frag, frag + 1, 2 * frag + 7][(t + round) as usize % 7];
            msgs.push((tag, pattern(len, t as u32)));
            if t % 3 == 0 {
                msgs.push((tag, pattern(len / 2, 1 + t as u32)));
            }
        }
    }
    for reverse in [false, true] {
        let (got, done) = if reverse {
            transfer(&mut b, &mut a, &msgs)
        } else {
            transfer(&mut a, &mut b, &msgs)
        };
        assert_eq!(got.len(), msgs.len());
        for (i, ((tag, data), (gtag, gdata))) in msgs.iter().zip(&got).enumerate() {
            assert_eq!(tag, gtag, "message {i}: tag");
            assert!(
                data == gdata,
                "message {i}: a {}-byte message differs",
                data.len()
            );
        }
        assert!(done.values().all(Result::is_ok));
    }
    println!(
        "{} messages over 300 tags, compact and full headers, arrived exact both ways",
        msgs.len()
    );
}
