//! One-sided operations of the message endpoint and its registration cache against a real RDMA
//! device (soft-RoCE `rxe0` in the VM of `scripts/rxe-vm`): byte-exact RDMA READ and WRITE,
//! pieces bounded by the piece size and queued beyond the send queue's room, buffers reused
//! without registering again, eviction of idle buffers only, and a read whose peer is gone.
//!
//! Without a device each test prints `SKIPPED: ...` and returns, unless
//! `VIADUCT_REQUIRE_RDMA=1` is set (the VM sets it), where a missing device fails the test.
//! Run one at a time: `--test-threads=1`.

mod common;

use common::{ctx, pattern};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use viaduct_verbs::msg::{self, Config, Endpoint, Error, Posted};
use viaduct_verbs::{Access, RegCache};

/// Upper bound on every loop of these tests.
const LIMIT: Duration = Duration::from_secs(60);

fn config() -> Config {
    Config {
        recv_buffers: 8,
        buffer_bytes: 4096,
        send_slots: 8,
        ..Config::default()
    }
}

/// Polls `ep` (and keeps `other` progressing) until `id` completed; every other completion is
/// kept in `done`. Fails the test when an id completes twice.
fn completion(
    ep: &mut Endpoint,
    other: Option<&mut Endpoint>,
    id: u64,
    done: &mut HashMap<u64, Result<usize, Error>>,
) -> Result<usize, Error> {
    let start = Instant::now();
    let mut other = other;
    loop {
        while let Some(c) = ep.poll() {
            assert!(
                done.insert(c.id, c.result).is_none(),
                "id {} completed twice",
                c.id
            );
        }
        if let Some(r) = done.remove(&id) {
            return r;
        }
        if let Some(o) = other.as_deref_mut() {
            while o.poll().is_some() {}
        }
        assert!(start.elapsed() < LIMIT, "id {id} did not complete: {ep:?}");
        ep.wait(Duration::from_millis(5)).unwrap();
    }
}

#[test]
fn read_and_write_move_exact_bytes() {
    let Some(ctx) = ctx() else { return };
    let (mut a, mut b) = msg::pair(&ctx, config()).unwrap();
    let mut done = HashMap::new();
    for (i, len) in [1usize, 4096, 100_000, 1 << 20].into_iter().enumerate() {
        let data = pattern(len, i as u32);
        let mut src = a.cache().get(len).unwrap();
        src.copy_from_slice(&data);
        let dst = b.cache().get(len).unwrap();
        let id = 10 + i as u64;
        assert!(b.post_read(id, dst, src.remote()).unwrap().is_posted());
        assert_eq!(
            completion(&mut b, Some(&mut a), id, &mut done).unwrap(),
            len
        );
        let got = b.take_landed(id).expect("the read's buffer");
        assert!(b.take_landed(id).is_none(), "a buffer is handed out once");
        assert!(got[..] == data[..], "read of {len} bytes differs");

        // And back: b writes a new pattern into a's buffer.
        let back = pattern(len, 99 + i as u32);
        let mut wsrc = b.cache().get(len).unwrap();
        wsrc.copy_from_slice(&back);
        // The peer's target needs remote-write access: a cache of its own.
        let targets = RegCache::new(
            a.protection_domain(),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            1 << 20,
        );
        let target = targets.get(len).unwrap();
        let id = 20 + i as u64;
        assert!(b.post_write(id, wsrc, target.remote()).unwrap().is_posted());
        assert_eq!(
            completion(&mut b, Some(&mut a), id, &mut done).unwrap(),
            len
        );
        assert!(b.take_landed(id).is_none(), "a write lands no buffer");
        assert!(target[..] == back[..], "write of {len} bytes differs");
    }
    assert!(done.is_empty(), "{done:?}");
}

#[test]
fn a_long_read_goes_in_pieces_beyond_the_send_queue() {
    let Some(ctx) = ctx() else { return };
    let cfg = Config {
        rdma_piece: 64 << 10,
        rdma_ops: 2,
        ..config()
    };
    let (mut a, mut b) = msg::pair(&ctx, cfg).unwrap();
    assert_eq!(b.rdma_piece(), 64 << 10);
    let len = (1 << 20) + 12_345;
    let data = pattern(len, 7);
    let mut src = a.cache().get(len).unwrap();
    src.copy_from_slice(&data);
    let mut done = HashMap::new();
    assert!(
        b.post_read(1, b.cache().get(len).unwrap(), src.remote())
            .unwrap()
            .is_posted()
    );
    // 17 pieces, 2 in flight: a second read waits for room.
    match b.post_read(
        2,
        b.cache().get(10).unwrap(),
        src.remote().slice(0, 10).unwrap(),
    ) {
        Ok(Posted::NoResources(buf)) => drop(buf),
        Ok(Posted::InProgress) => {
            // The first read may have been fully posted already on a fast device.
            assert!(completion(&mut b, Some(&mut a), 2, &mut done).is_ok());
        }
        Err(e) => panic!("{e}"),
    }
    assert_eq!(completion(&mut b, Some(&mut a), 1, &mut done).unwrap(), len);
    let got = b.take_landed(1).unwrap();
    assert!(got[..] == data[..], "pieced read differs");
    // A local buffer shorter than the remote region is refused, nothing posted.
    let short = b.cache().get(100).unwrap();
    assert!(matches!(
        b.post_read(3, short, src.remote()),
        Err(Error::Rdma(_))
    ));
}

#[test]
fn repeated_sizes_register_once_and_idle_buffers_are_evicted_lru() {
    let Some(ctx) = ctx() else { return };
    let pd = ctx.alloc_pd().unwrap();
    // Room for two idle buffers of 1 MiB.
    let cache = RegCache::new(&pd, Access::LOCAL_WRITE, 2 << 20);
    for _ in 0..5 {
        let mut b = cache.get(1_000_000).unwrap();
        assert_eq!(b.len(), 1_000_000);
        assert_eq!(b.capacity(), 1 << 20);
        b[0] = 1;
    }
    let s = cache.stats();
    assert_eq!((s.registrations, s.hits, s.in_use), (1, 4, 0));
    // Three buffers in use at once: two more registrations.
    let mut held: Vec<_> = (0..3).map(|_| cache.get(1 << 20).unwrap()).collect();
    assert_eq!(cache.stats().registrations, 3);
    assert_eq!(cache.stats().in_use, 3);
    // A small bound never touches buffers in use: they stay readable and writable.
    for (i, b) in held.iter_mut().enumerate() {
        b.fill(i as u8 + 1);
    }
    let first = held.remove(0);
    drop(held);
    // Two idle (2 MiB): at the bound, nothing evicted; the third one pushes out the oldest.
    assert_eq!(cache.stats().evictions, 0);
    assert!(first.iter().all(|&x| x == 1));
    drop(first);
    let s = cache.stats();
    assert_eq!((s.evictions, s.idle_bytes, s.in_use), (1, 2 << 20, 0));
    // Another size class registers anew.
    drop(cache.get(64).unwrap());
    assert_eq!(cache.stats().registrations, 4);
    assert_eq!(RegCache::class_of(64), RegCache::MIN_CLASS);
}

#[test]
fn a_read_from_a_vanished_peer_fails_once() {
    let Some(ctx) = ctx() else { return };
    let cfg = Config {
        peer_timeout: Duration::from_secs(1),
        keepalive: Duration::from_millis(100),
        ..config()
    };
    let (a, mut b) = msg::pair(&ctx, cfg).unwrap();
    let src = a.cache().get(1 << 20).unwrap();
    let remote = src.remote();
    drop(src);
    drop(a);
    let mut done = HashMap::new();
    let posted = b.post_read(5, b.cache().get(1 << 20).unwrap(), remote);
    match posted {
        Ok(Posted::InProgress) => {
            let r = completion(&mut b, None, 5, &mut done);
            assert!(matches!(r, Err(Error::PeerFailed(_))), "{r:?}");
            assert!(b.take_landed(5).is_none());
        }
        // The peer's close message may have arrived first.
        Err(Error::PeerFailed(_)) => {}
        other => panic!("{other:?}"),
    }
    // Nothing more completes for id 5.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        if let Some(c) = b.poll() {
            assert_ne!(c.id, 5, "id 5 completed twice");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(b.failure().is_some());
}
