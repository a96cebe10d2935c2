//! Message endpoints receiving from one shared receive pool (`msg::ReceivePool`) on a real RDMA
//! device (soft-RoCE `rxe0` in the VM of `scripts/rxe-vm`): many peers sending to one rank with
//! more in flight than the pool holds (nothing lost or reordered, byte-exact), teardown handing
//! every buffer back, and the receive memory per rank with per-peer rings and with the pool.
//!
//! Without a device each test prints `SKIPPED: ...` and returns, unless
//! `VIADUCT_REQUIRE_RDMA=1` is set (the VM sets it), where a missing device fails the test.
//! Run one at a time: `--test-threads=1`.

mod common;

use common::{ctx, pattern};
use std::time::{Duration, Instant};

use viaduct_verbs::Context;
use viaduct_verbs::msg::{Config, Endpoint, Posted, Prepared, ReceivePool};

/// Upper bound on every loop of these tests (a stall, not a speed).
const LIMIT: Duration = Duration::from_secs(120);

/// A pool of 16 buffers of 4 KiB; a window of 8 credits per peer.
fn small() -> Config {
    Config {
        recv_buffers: 8,
        pool_buffers: 16,
        buffer_bytes: 4096,
        send_slots: 8,
        ..Config::default()
    }
}

/// `peers` senders (rings of their own) connected to `peers` endpoints of one receiving rank
/// that draw from `pool`: (senders, receivers).
fn star(
    ctx: &Context,
    config: &Config,
    pool: &ReceivePool,
    peers: usize,
) -> (Vec<Endpoint>, Vec<Endpoint>) {
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..peers {
        let s = Prepared::new(ctx, config.clone()).expect("sender");
        let r = Prepared::with_pool(ctx, config.clone(), pool).expect("receiver");
        let (cs, cr) = (s.card(), r.card());
        assert!(cr.shared_receive && !cs.shared_receive);
        senders.push(s.connect(&cr).expect("connect sender"));
        receivers.push(r.connect(&cs).expect("connect receiver"));
    }
    (senders, receivers)
}

/// Message `i` of sender `p`: sizes from empty to several fragments.
fn message(p: usize, i: usize, frag: usize) -> Vec<u8> {
    let len = match i % 6 {
        0 => 0,
        1 => 1,
        2 => frag,
        3 => 3 * frag + 5,
        _ => (i * 37 + p) % frag,
    };
    pattern(len, (p * 10_000 + i) as u32)
}

#[test]
fn many_peers_to_one_over_a_shared_pool_lose_and_reorder_nothing() {
    let Some(ctx) = ctx() else { return };
    const PEERS: usize = 7;
    const N: usize = 120;
    let config = small();
    let frag = config.buffer_bytes as usize - 16;
    let pool = ReceivePool::new(&ctx, &config).expect("pool");
    let (mut senders, mut receivers) = star(&ctx, &config, &pool, PEERS);
    let start = Instant::now();
    let mut sent = [0usize; PEERS];
    let mut done = [0usize; PEERS];
    let mut got = [0usize; PEERS];
    // First the receiving rank only drives its endpoints and consumes nothing, until the
    // senders are stopped by their credits: together they had more in flight than the pool
    // holds, and every one of those sends completed (nothing waits in receiver-not-ready).
    let mut quiet = 0;
    while quiet < 200 {
        assert!(start.elapsed() < LIMIT, "filling stalled: {senders:?}");
        let mut moved = false;
        for p in 0..PEERS {
            if sent[p] < N
                && senders[p]
                    .post_send(sent[p] as u64, p as u64, &message(p, sent[p], frag))
                    .expect("post")
                    .is_posted()
            {
                sent[p] += 1;
                moved = true;
            }
            while let Some(c) = senders[p].poll() {
                assert_eq!(c.id as usize, done[p], "completions out of order");
                c.result.expect("send");
                done[p] += 1;
                moved = true;
            }
            receivers[p].wait(Duration::ZERO).expect("wait");
        }
        quiet = if moved { 0 } else { quiet + 1 };
        if !moved {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let completed: usize = done.iter().sum();
    println!(
        "before any consume: {completed} sends completed into a pool of {} buffers ({} posted)",
        pool.buffers(),
        pool.posted()
    );
    assert!(
        completed > pool.buffers() as usize,
        "only {completed} sends completed: the pool of {} should not bound them",
        pool.buffers()
    );
    // Then everything goes through, the receiver consuming round robin.
    while got.iter().any(|g| *g < N) || done.iter().any(|d| *d < N) {
        assert!(
            start.elapsed() < LIMIT,
            "transfer stalled: sent {sent:?} done {done:?} got {got:?}: {receivers:?}"
        );
        for p in 0..PEERS {
            if sent[p] < N
                && senders[p]
                    .post_send(sent[p] as u64, p as u64, &message(p, sent[p], frag))
                    .expect("post")
                    .is_posted()
            {
                sent[p] += 1;
            }
            while let Some(c) = senders[p].poll() {
                assert_eq!(c.id as usize, done[p], "completions out of order");
                c.result.expect("send");
                done[p] += 1;
            }
            while let Some(m) = receivers[p].next().expect("next") {
                assert_eq!(m.tag, p as u64, "a message of another peer");
                let want = message(p, got[p], frag);
                assert!(
                    m.data == want,
                    "peer {p} message {}: {} bytes, expected {}",
                    got[p],
                    m.data.len(),
                    want.len()
                );
                let n = m.data.len();
                receivers[p].consume(n).expect("consume");
                got[p] += 1;
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while pool.posted() < pool.buffers() as usize {
        assert!(Instant::now() < deadline, "pool not refilled: {pool:?}");
        for r in &mut receivers {
            r.wait(Duration::ZERO).expect("wait");
        }
    }
    println!(
        "{PEERS} peers x {N} messages arrived in order, byte-exact, through {} shared buffers",
        pool.buffers()
    );
}

#[test]
fn teardown_with_messages_held_gives_every_buffer_back_to_the_pool() {
    let Some(ctx) = ctx() else { return };
    let config = small();
    let pool = ReceivePool::new(&ctx, &config).expect("pool");
    let total = pool.buffers() as usize;
    assert_eq!(pool.posted(), total);
    let (mut senders, mut receivers) = star(&ctx, &config, &pool, 3);
    // Each sender puts 5 messages into its receiver, which holds them unconsumed.
    let start = Instant::now();
    for (p, s) in senders.iter_mut().enumerate() {
        let mut acked = 0;
        let mut posted = 0;
        while acked < 5 {
            assert!(start.elapsed() < LIMIT, "sends stalled: {s:?}");
            if posted < 5
                && s.post_send(posted, p as u64, &[p as u8; 100])
                    .expect("post")
                    .is_posted()
            {
                posted += 1;
            }
            while let Some(c) = s.poll() {
                c.result.expect("send");
                acked += 1;
            }
            for r in &mut receivers {
                r.wait(Duration::ZERO).expect("wait");
            }
        }
    }
    // The first receiver shows one message (held in place).
    let deadline = Instant::now() + LIMIT;
    while receivers[0].next().expect("next").is_none() {
        assert!(Instant::now() < deadline);
        receivers[0].wait(Duration::from_millis(5)).expect("wait");
    }
    let held = total - pool.posted();
    println!("{held} of {total} pool buffers held by unconsumed messages");
    assert!(held >= 1, "messages are held in place");
    // A peer going first: its receiver fails (closed) with messages still held, which come
    // out before the failure.
    drop(senders.remove(1));
    let mut out = 0;
    let deadline = Instant::now() + LIMIT;
    loop {
        assert!(Instant::now() < deadline, "no failure: {:?}", receivers[1]);
        match receivers[1].next() {
            Ok(Some(m)) => {
                assert!(m.data == [1u8; 100]);
                receivers[1].consume(100).expect("consume");
                out += 1;
            }
            Ok(None) => receivers[1].wait(Duration::from_millis(5)).expect("wait"),
            Err(e) => {
                assert!(e.to_string().contains("closed"), "{e}");
                break;
            }
        }
    }
    assert_eq!(out, 5, "the messages that had arrived come out first");
    drop(receivers);
    assert_eq!(
        pool.posted(),
        total,
        "every buffer is back in the pool after the endpoints went"
    );
    drop(senders);
}

#[test]
fn a_receiver_that_does_not_consume_stops_its_peer_after_its_window_though_the_pool_runs_low() {
    // A window of 8 into a pool of 4: the pool runs dry, arriving fragments are copied out to
    // refill it, but the copies keep their credits until consumed.
    let Some(ctx) = ctx() else { return };
    let config = Config {
        recv_buffers: 8,
        pool_buffers: 4,
        buffer_bytes: 4096,
        send_slots: 16,
        ..Config::default()
    };
    let pool = ReceivePool::new(&ctx, &config).expect("pool");
    let (mut senders, mut receivers) = star(&ctx, &config, &pool, 1);
    let (s, r) = (&mut senders[0], &mut receivers[0]);
    let start = Instant::now();
    let (mut accepted, mut done, mut refusals) = (0u64, 0u64, 0);
    while refusals < 300 {
        assert!(start.elapsed() < LIMIT, "filling stalled: {s:?} / {r:?}");
        match s
            .post_send(accepted, accepted, &pattern(100, accepted as u32))
            .expect("post")
        {
            Posted::InProgress => accepted += 1,
            Posted::NoResources(()) => {
                refusals += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert!(
            accepted < u64::from(config.recv_buffers),
            "the sender was not stopped by its window of {}",
            config.recv_buffers
        );
        while let Some(c) = s.poll() {
            c.result.expect("send");
            done += 1;
        }
        // The receiver only drives its queue pair: it takes every fragment, consumes none.
        r.wait(Duration::ZERO).expect("wait");
    }
    println!(
        "stopped after {accepted} messages ({done} completed); the pool has {} of {} posted",
        pool.posted(),
        pool.buffers()
    );
    // One credit stays back for credit messages, as with a ring.
    assert_eq!(
        accepted,
        u64::from(config.recv_buffers) - 1,
        "the window was not kept"
    );
    // Every message is still there, in order.
    let mut got = 0;
    while got < accepted {
        assert!(start.elapsed() < LIMIT, "draining stalled at {got}: {r:?}");
        while let Some(c) = s.poll() {
            c.result.expect("send");
        }
        match r.next().expect("next") {
            Some(m) => {
                assert_eq!(m.tag, got, "lost or reordered");
                assert!(m.data == pattern(100, got as u32));
                r.consume(100).expect("consume");
                got += 1;
            }
            None => r.wait(Duration::from_millis(1)).expect("wait"),
        }
    }
}

#[test]
fn a_pool_refuses_endpoints_of_another_buffer_size() {
    let Some(ctx) = ctx() else { return };
    let pool = ReceivePool::new(&ctx, &small()).expect("pool");
    let other = Config {
        buffer_bytes: 8192,
        ..small()
    };
    let e = Prepared::with_pool(&ctx, other, &pool).expect_err("another size");
    assert!(e.to_string().contains("buffer_bytes"), "{e}");
    let bad = Config {
        pool_buffers: 1,
        ..small()
    };
    assert!(ReceivePool::new(&ctx, &bad).is_err());
}

/// Registered receive memory and queue pairs of one rank of an `n`-rank job (one endpoint per
/// peer on one device) with per-peer rings and with one shared pool, at the default settings.
#[test]
fn receive_memory_per_rank_is_flat_with_a_shared_pool() {
    let Some(ctx) = ctx() else { return };
    let config = Config::default();
    println!(
        "| ranks | QPs per rank | ring: receive bytes per rank | shared pool: receive bytes per rank |"
    );
    println!("| --- | --- | --- | --- |");
    let mut pooled = Vec::new();
    let mut rings = Vec::new();
    for n in [2usize, 4, 8] {
        let ring: Vec<Prepared> = (1..n)
            .map(|_| Prepared::new(&ctx, config.clone()).expect("ring endpoint"))
            .collect();
        let ring_bytes: usize = ring.iter().map(Prepared::own_receive_bytes).sum();
        drop(ring);
        let pool = ReceivePool::new(&ctx, &config).expect("pool");
        let shared: Vec<Prepared> = (1..n)
            .map(|_| Prepared::with_pool(&ctx, config.clone(), &pool).expect("pool endpoint"))
            .collect();
        let pool_bytes = pool.registered_bytes()
            + shared
                .iter()
                .map(Prepared::own_receive_bytes)
                .sum::<usize>();
        println!(
            "| {n} | {} | {} KiB | {} KiB |",
            n - 1,
            ring_bytes >> 10,
            pool_bytes >> 10
        );
        rings.push(ring_bytes);
        pooled.push(pool_bytes);
    }
    assert!(pooled.iter().all(|b| *b == pooled[0]), "{pooled:?}");
    assert_eq!(rings[2], 7 * rings[0], "{rings:?}");
}

#[test]
fn sends_to_a_shared_pool_endpoint_wait_out_an_empty_pool() {
    // A window larger than the pool: the receiver holds nothing back (it copies out when
    // low), so every send completes even with the pool empty for a while.
    let Some(ctx) = ctx() else { return };
    let config = Config {
        recv_buffers: 32,
        pool_buffers: 4,
        buffer_bytes: 4096,
        send_slots: 32,
        ..Config::default()
    };
    let pool = ReceivePool::new(&ctx, &config).expect("pool");
    let (mut senders, mut receivers) = star(&ctx, &config, &pool, 1);
    let (s, r) = (&mut senders[0], &mut receivers[0]);
    const N: u64 = 300;
    let (mut sent, mut done, mut got) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let mut round = 0u64;
    while got < N || done < N {
        round += 1;
        assert!(start.elapsed() < LIMIT, "stalled at {got}: {s:?} / {r:?}");
        if sent < N {
            if let Posted::InProgress = s
                .post_send(sent, sent, &pattern(200, sent as u32))
                .expect("post")
            {
                sent += 1;
            }
        }
        while let Some(c) = s.poll() {
            assert_eq!(c.id, done);
            c.result.expect("send");
            done += 1;
        }
        // Consume only every third round: messages pile up beyond the pool.
        if round % 3 == 0 || sent == N {
            while let Some(m) = r.next().expect("next") {
                assert_eq!(m.tag, got, "lost or reordered");
                assert!(m.data == pattern(200, got as u32));
                r.consume(200).expect("consume");
                got += 1;
            }
        } else {
            r.wait(Duration::ZERO).expect("wait");
        }
    }
}

/// One thread streams `n` 8-byte messages from `s` to `r` and consumes them: the seconds it
/// took.
fn stream(s: &mut Endpoint, r: &mut Endpoint, n: u64) -> f64 {
    let start = Instant::now();
    let (mut sent, mut got) = (0u64, 0u64);
    while got < n {
        assert!(
            start.elapsed() < LIMIT,
            "stream stalled at {got}: {s:?} / {r:?}"
        );
        while sent < n
            && s.post_send(sent, sent, &sent.to_le_bytes())
                .expect("post")
                .is_posted()
        {
            sent += 1;
        }
        while let Some(c) = s.poll() {
            c.result.expect("send");
        }
        while let Some(m) = r.next().expect("next") {
            assert_eq!(m.tag, got, "lost or reordered");
            r.consume(8).expect("consume");
            got += 1;
        }
    }
    start.elapsed().as_secs_f64()
}

/// Times of the same stream and ping-pong into an endpoint with a ring of its own and into one
/// drawing from a shared pool (the sender has a ring either way), printed for comparison in
/// the same guest; only order and bytes are checked.
#[test]
fn ring_and_pool_receivers_are_timed_alike() {
    let Some(ctx) = ctx() else { return };
    const N: u64 = 20_000;
    let config = Config::default();
    for round in 0..2 {
        let (mut a, mut b) = viaduct_verbs::msg::pair(&ctx, config.clone()).expect("ring pair");
        let ring = stream(&mut a, &mut b, N);
        let pool = ReceivePool::new(&ctx, &config).expect("pool");
        let (mut s, mut r) = star(&ctx, &config, &pool, 1);
        let pooled = stream(&mut s[0], &mut r[0], N);
        println!(
            "round {round}: {N} 8-byte messages: ring receiver {:.1} us/message, pool receiver \
             {:.1} us/message",
            ring * 1e6 / N as f64,
            pooled * 1e6 / N as f64
        );
    }
}
