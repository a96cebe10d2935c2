//! Inbound messages lent out of a message endpoint (`Endpoint::lease`) on a real RDMA device
//! (soft-RoCE `rxe0` in the VM of `scripts/rxe-vm`): a lease shows the message in the
//! registered receive buffer it landed in and holds the peer's credit until it comes back;
//! leases come back in any order; a shared pool at its low water lends copies instead (the
//! credit still held); leases outlive their endpoints, a dead peer and the pool's other users, and
//! every buffer goes back exactly once.
//!
//! Without a device each test prints `SKIPPED: ...` and returns, unless
//! `VIADUCT_REQUIRE_RDMA=1` is set (the VM sets it), where a missing device fails the test.
//! Run one at a time: `--test-threads=1`.

mod common;

use common::{ctx, pattern};
use std::time::{Duration, Instant};

use viaduct_verbs::Context;
use viaduct_verbs::msg::{self, Config, Endpoint, Error, Lease, Prepared, ReceivePool};

/// Upper bound on every loop of these tests (a stall, not a speed).
const LIMIT: Duration = Duration::from_secs(60);
/// How long a message that must not arrive is given to arrive anyway.
const QUIET: Duration = Duration::from_millis(500);

/// A window of 8 credits (7 for data: one stays back for credit messages); a pool of 8 buffers
/// (low below 2 posted).
fn small() -> Config {
    Config {
        recv_buffers: 8,
        pool_buffers: 8,
        buffer_bytes: 4096,
        send_slots: 8,
        ..Config::default()
    }
}

fn data(i: u64) -> Vec<u8> {
    pattern(100 + i as usize * 7, i as u32)
}

/// Posts message `i` (tag `i`, [`data`]) from `a`, driving both ends until it is accepted.
fn send(a: &mut Endpoint, b: &mut Endpoint, i: u64) {
    let start = Instant::now();
    while !a.post_send(i, i, &data(i)).expect("post").is_posted() {
        assert!(
            start.elapsed() < LIMIT,
            "message {i} never accepted: {a:?} / {b:?} (failure: {:?})",
            b.failure()
        );
        let _ = a.poll();
        b.wait(Duration::from_millis(1)).expect("wait");
    }
}

/// Drives `a` (the sender) until `b` has a message to show; `None` if none came by `within`.
fn lease_within(a: &mut Endpoint, b: &mut Endpoint, within: Duration) -> Option<Lease> {
    let start = Instant::now();
    loop {
        if let Some(l) = b.lease().expect("lease") {
            return Some(l);
        }
        if start.elapsed() > within {
            return None;
        }
        while a.poll().is_some() {}
        b.wait(Duration::from_millis(1)).expect("wait");
    }
}

/// `a` has no credit for message `i` (b holds every buffer of its window): its post is
/// refused for a while, both ends driven meanwhile.
fn assert_refused(a: &mut Endpoint, b: &mut Endpoint, i: u64) {
    let start = Instant::now();
    while start.elapsed() < QUIET {
        assert!(
            !a.post_send(i, i, &data(i)).expect("post").is_posted(),
            "message {i} accepted beyond the window while every buffer was lent: {a:?} / {b:?}"
        );
        while a.poll().is_some() {}
        assert!(
            b.lease().expect("lease").is_none(),
            "a message from nowhere"
        );
        b.wait(Duration::from_millis(5)).expect("wait");
    }
}

fn lease(a: &mut Endpoint, b: &mut Endpoint) -> Lease {
    lease_within(a, b, LIMIT).unwrap_or_else(|| panic!("nothing arrived: {a:?} / {b:?}"))
}

fn check(l: &Lease, i: u64) {
    assert_eq!(l.tag(), i, "a message was lost or reordered");
    assert!(**l == data(i)[..], "message {i} differs");
}

fn inside(ranges: &[std::ops::Range<usize>], bytes: &[u8]) -> bool {
    let at = bytes.as_ptr() as usize;
    ranges
        .iter()
        .any(|r| r.start <= at && at + bytes.len() <= r.end)
}

#[test]
fn a_lease_is_the_receive_buffer_and_holds_its_credit_until_it_comes_back() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, small()).expect("pair");
    for i in 0..7 {
        send(&mut a, &mut b, i);
    }
    // An eighth waits for a credit: every buffer of b's window is lent out.
    let mut leases: Vec<Lease> = (0..7)
        .map(|i| {
            let l = lease(&mut a, &mut b);
            check(&l, i);
            assert!(l.is_in_place(), "{l:?}");
            assert!(inside(&b.receive_buffers(), &l), "not in a receive buffer");
            l
        })
        .collect();
    assert_eq!(b.leases_out(), 7);
    assert_refused(&mut a, &mut b, 7);
    // One lease back (the middle one, dropped on its own): its buffer goes back to the peer.
    drop(leases.remove(1));
    send(&mut a, &mut b, 7);
    let l7 = lease(&mut a, &mut b);
    check(&l7, 7);
    assert!(l7.is_in_place());
    // The others back out of order, some given back and some dropped.
    b.give_back(leases.pop().expect("the last"));
    drop(leases.remove(2));
    b.give_back(leases.remove(0));
    drop(leases);
    drop(l7);
    // The whole window again, twice over, in order.
    for i in 8..24 {
        send(&mut a, &mut b, i);
        let l = lease(&mut a, &mut b);
        check(&l, i);
        b.give_back(l);
    }
    assert_eq!(b.leases_out(), 0);
    assert!(b.failure().is_none() && a.failure().is_none());
}

#[test]
fn a_lease_shows_only_the_unconsumed_rest_and_next_moves_on() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, small()).expect("pair");
    send(&mut a, &mut b, 0);
    send(&mut a, &mut b, 1);
    let start = Instant::now();
    while b.next().expect("next").is_none() {
        assert!(start.elapsed() < LIMIT, "nothing arrived");
        let _ = a.poll();
        b.wait(Duration::from_millis(1)).expect("wait");
    }
    b.consume(10).expect("consume");
    let rest = b.lease().expect("lease").expect("current");
    assert!(*rest == data(0)[10..]);
    // The endpoint moved on: the second message shows while the first is out.
    let second = b.next().expect("next").expect("the second").data.to_vec();
    assert_eq!(second, data(1));
    b.consume(second.len()).expect("consume");
    drop(rest);
    send(&mut a, &mut b, 2);
    check(&lease(&mut a, &mut b), 2);
}

/// `n` senders (rings of their own) to `n` endpoints of one receiving rank drawing from `pool`.
fn star(ctx: &Context, config: &Config, pool: &ReceivePool, n: usize) -> Vec<(Endpoint, Endpoint)> {
    (0..n)
        .map(|_| {
            let s = Prepared::new(ctx, config.clone()).expect("sender");
            let r = Prepared::with_pool(ctx, config.clone(), pool).expect("receiver");
            let (cs, cr) = (s.card(), r.card());
            (
                s.connect(&cr).expect("connect"),
                r.connect(&cs).expect("connect"),
            )
        })
        .collect()
}

#[test]
fn a_pool_at_low_water_lends_copies_and_their_credits_stay_held() {
    let Some(ctx) = ctx() else { return };
    // 8 buffers: below 2 posted the pool is low.
    let config = small();
    let pool = ReceivePool::new(&ctx, &config).expect("pool");
    let mut pairs = star(&ctx, &config, &pool, 2);
    let (first, second) = pairs.split_at_mut(1);
    let (s1, r1) = &mut first[0];
    let (s2, r2) = &mut second[0];
    // Six messages of r1 lent out in place: two buffers of the pool left posted.
    let mut held = Vec::new();
    for i in 0..6 {
        send(s1, r1, i);
        let l = lease(s1, r1);
        check(&l, i);
        assert!(l.is_in_place(), "{l:?}");
        held.push(l);
    }
    assert_eq!(pool.posted(), 2, "{pool:?}");
    // What r2 gets now takes the pool below low water: copied, the buffer back in the pool at once,
    // so the leases cannot hold the pool empty.
    let mut copies = Vec::new();
    for i in 100..107 {
        send(s2, r2, i);
        let l = lease(s2, r2);
        check(&l, i);
        assert!(
            !l.is_in_place(),
            "lent in place from a pool at low water: {pool:?}"
        );
        assert!(pool.posted() >= 2, "{pool:?}");
        copies.push(l);
    }
    // The copies still hold their peer's credits: s2's window is full.
    assert_refused(s2, r2, 107);
    drop(copies.remove(0));
    send(s2, r2, 107);
    let l = lease(s2, r2);
    check(&l, 107);
    copies.push(l);
    // Every lease back (in a mixed order): the whole pool is posted again, each buffer once.
    drop(held.remove(1));
    drop(copies);
    drop(held);
    let start = Instant::now();
    while pool.posted() < 8 || r1.leases_out() + r2.leases_out() > 0 {
        assert!(start.elapsed() < LIMIT, "buffers lost: {pool:?}");
        let _ = r1.poll();
        let _ = r2.poll();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(pool.posted(), 8, "a buffer posted twice: {pool:?}");
    // Both windows work again, in place.
    for i in 6..20 {
        send(s1, r1, i);
        let l = lease(s1, r1);
        check(&l, i);
        assert!(l.is_in_place());
        send(s2, r2, 200 + i);
        check(&lease(s2, r2), 200 + i);
    }
}

#[test]
fn leases_outlive_their_endpoints_and_come_back_once() {
    let Some(ctx) = ctx() else { return };
    // A ring: the leases own their registered buffers after both ends are gone.
    let (mut a, mut b) = msg::pair(&ctx, small()).expect("pair");
    send(&mut a, &mut b, 0);
    send(&mut a, &mut b, 1);
    let l0 = lease(&mut a, &mut b);
    let l1 = lease(&mut a, &mut b);
    drop(b);
    drop(a);
    check(&l1, 1);
    check(&l0, 0);
    drop((l1, l0));
    // A pool: leases out when the endpoints go come back to the pool, each buffer once.
    let (mut a, mut b, pool) = msg::pair_shared(&ctx, small()).expect("pair");
    send(&mut a, &mut b, 0);
    send(&mut a, &mut b, 1);
    let l0 = lease(&mut a, &mut b);
    let l1 = lease(&mut a, &mut b);
    assert!(l0.is_in_place() && l1.is_in_place());
    drop(l0); // into the endpoint's box, not taken yet
    drop(b);
    drop(a);
    check(&l1, 1);
    drop(l1); // the endpoint gone: straight to the pool
    assert_eq!(pool.posted(), 8, "{pool:?}");
}

#[test]
fn a_dead_peer_fails_the_endpoint_while_a_lease_is_held_and_every_buffer_returns() {
    let Some(ctx) = ctx() else { return };
    let config = Config {
        peer_timeout: Duration::from_secs(2),
        keepalive: Duration::from_millis(100),
        ..small()
    };
    let (mut a, mut b, pool) = msg::pair_shared(&ctx, config).expect("pair");
    send(&mut a, &mut b, 0);
    send(&mut a, &mut b, 1);
    let held = lease(&mut a, &mut b);
    drop(a);
    // The second message still comes out, then the failure.
    let start = Instant::now();
    let second = loop {
        assert!(
            start.elapsed() < LIMIT,
            "the second message never came: {b:?}"
        );
        match b.lease().expect("the messages that arrived come first") {
            Some(l) => break l,
            None => b.wait(Duration::from_millis(10)).expect("wait"),
        }
    };
    check(&second, 1);
    let start = Instant::now();
    let err = loop {
        assert!(
            start.elapsed() < LIMIT,
            "the peer's end was never noticed: {b:?}"
        );
        match b.lease() {
            Err(e) => break e,
            Ok(Some(l)) => panic!("a message from nowhere: {l:?}"),
            Ok(None) => b.wait(Duration::from_millis(10)).expect("wait"),
        }
    };
    assert!(matches!(err, Error::PeerFailed(_)), "{err:?}");
    check(&held, 0);
    b.give_back(held);
    drop(second);
    drop(b);
    assert_eq!(pool.posted(), 8, "buffers lost or posted twice: {pool:?}");
}
