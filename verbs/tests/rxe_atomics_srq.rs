//! RDMA atomics and shared receive queues against a real RDMA device (soft-RoCE in the VM of
//! `scripts/rxe-vm`), between two devices where `VIADUCT_RDMA_PEER_DEVICE` names a second one
//! (`scripts/cluster-rdma-test` runs this file with `vdr1` and `vdr2`, each on its own node's
//! interface); otherwise both ends are on the one device.
//!
//! Without a device each test prints `SKIPPED: ...` and returns, unless
//! `VIADUCT_REQUIRE_RDMA=1` (set in the VM). Run one at a time: `--test-threads=1`.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use viaduct_verbs::{
    Access, AsyncEventKind, Completion, CompletionQueue, Completions, ConnectOptions, Context,
    Error, MemoryRegion, Opcode, ProtectionDomain, QueuePair, RecvRequest, SendRequest,
    SharedReceiveQueue, Status,
};

const WAIT: Duration = Duration::from_secs(30);

/// The local device, and the peer device: `VIADUCT_RDMA_PEER_DEVICE` when set, else the same.
fn devices() -> Option<(Context, Context)> {
    let a = common::ctx()?;
    let b = match std::env::var("VIADUCT_RDMA_PEER_DEVICE") {
        Ok(name) if !name.is_empty() => Context::open(&name).expect("opening the peer device"),
        _ => common::ctx()?,
    };
    println!("devices: {} -> {}", a.name(), b.name());
    Some((a, b))
}

struct Side {
    pd: ProtectionDomain,
    cq: CompletionQueue,
}

fn side(ctx: &Context) -> Side {
    Side {
        pd: ctx.alloc_pd().unwrap(),
        cq: ctx.create_cq(512).unwrap(),
    }
}

const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_ATOMIC);

/// Connects a queue pair of `a` to one of `b` (`b`'s taking receives from `srq` when given).
fn connect(a: &Side, b: &Side, srq: Option<&SharedReceiveQueue>) -> (QueuePair, QueuePair) {
    let pa = a.pd.queue_pair(&a.cq, &a.cq).access(ALL).build().unwrap();
    let mut bb = b.pd.queue_pair(&b.cq, &b.cq).access(ALL);
    if let Some(s) = srq {
        bb = bb.srq(s);
    }
    let pb = bb.build().unwrap();
    let (ea, eb) = (pa.endpoint(), pb.endpoint());
    let opts = ConnectOptions::default();
    (
        pa.connect(&eb, &opts).unwrap(),
        pb.connect(&ea, &opts).unwrap(),
    )
}

fn wait_n(cq: &CompletionQueue, n: usize) -> Vec<Completion> {
    let mut c = Completions::with_batch(64);
    cq.wait(&mut c, n, WAIT).expect("completions");
    let mut out = Vec::new();
    while let Some(x) = c.pop() {
        out.push(x);
    }
    out
}

fn word(mr: &MemoryRegion, at: usize) -> u64 {
    u64::from_ne_bytes(mr[at..at + 8].try_into().unwrap())
}

#[test]
fn fetch_add_and_compare_swap_change_the_remote_word_atomically() {
    let Some((ca, cb)) = devices() else { return };
    let (a, b) = (side(&ca), side(&cb));
    let (qa, _qb) = connect(&a, &b, None);
    let mut target = b.pd.allocate(64, ALL).unwrap();
    target[8..16].copy_from_slice(&1000u64.to_ne_bytes());
    let remote = target.remote().slice(8, 8).unwrap();

    // Ten fetch-and-adds of 7, in one post: each returns the word before it.
    let reqs: Vec<_> = (0..10u64)
        .map(|i| {
            let r = a.pd.allocate(8, Access::LOCAL_WRITE).unwrap();
            SendRequest::fetch_add(i, r, remote, 7)
        })
        .collect();
    qa.post_send(reqs).unwrap();
    let mut olds = Vec::new();
    for mut c in wait_n(&a.cq, 10) {
        assert_eq!((c.status, c.opcode), (Status::Success, Opcode::FetchAdd));
        let r = c.take_region().unwrap();
        olds.push((c.id, word(&r, 0)));
    }
    olds.sort();
    let expect: Vec<_> = (0..10u64).map(|i| (i, 1000 + 7 * i)).collect();
    assert_eq!(olds, expect, "old values in posting order");
    assert_eq!(word(&target, 8), 1070);
    println!("10 fetch-and-adds: 1000 -> 1070, old values 1000, 1007, ... 1063");

    // A compare-and-swap that matches swaps; one that does not leaves the word.
    let r = a.pd.allocate(8, Access::LOCAL_WRITE).unwrap();
    qa.post_send([SendRequest::compare_swap(20, r, remote, 1070, 5)])
        .unwrap();
    let mut c = wait_n(&a.cq, 1).pop().unwrap();
    assert_eq!((c.status, c.opcode), (Status::Success, Opcode::CompareSwap));
    assert_eq!(word(&c.take_region().unwrap(), 0), 1070);
    assert_eq!(word(&target, 8), 5, "matching compare swapped");
    let r = a.pd.allocate(8, Access::LOCAL_WRITE).unwrap();
    qa.post_send([SendRequest::compare_swap(21, r, remote, 1070, 9)])
        .unwrap();
    let mut c = wait_n(&a.cq, 1).pop().unwrap();
    assert_eq!(c.status, Status::Success);
    assert_eq!(
        word(&c.take_region().unwrap(), 0),
        5,
        "returns the word as found"
    );
    assert_eq!(word(&target, 8), 5, "a failed compare leaves the word");
    // The bytes around the word are untouched.
    assert!(target[..8].iter().chain(&target[16..]).all(|&x| x == 0));
    println!("compare-and-swap: 1070 -> 5 when matching, unchanged when not");
}

#[test]
fn atomics_with_a_wrong_shape_are_refused_before_posting() {
    let Some((ca, cb)) = devices() else { return };
    let (a, b) = (side(&ca), side(&cb));
    let (qa, _qb) = connect(&a, &b, None);
    let target = b.pd.allocate(64, ALL).unwrap();
    let misaligned = target.remote().slice(4, 8).unwrap();
    let r = a.pd.allocate(8, Access::LOCAL_WRITE).unwrap();
    let e = qa
        .post_send([SendRequest::fetch_add(1, r, misaligned, 1)])
        .unwrap_err();
    assert!(matches!(e.error, Error::InvalidRequest(_)), "{e}");
    assert!(e.to_string().contains("8-byte aligned"), "{e}");
    assert_eq!(e.unposted.len(), 1, "the request comes back");
    let wide = a.pd.allocate(16, Access::LOCAL_WRITE).unwrap();
    let e = qa
        .post_send([SendRequest::compare_swap(2, wide, target.remote(), 0, 1)])
        .unwrap_err();
    assert!(e.to_string().contains("8 bytes, this one has 16"), "{e}");
    // Nothing reached the device: no completion comes.
    let mut c = Completions::with_batch(4);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(a.cq.poll(&mut c).unwrap(), 0);
    println!("refused: {e}");
}

#[test]
fn an_atomic_without_remote_atomic_access_completes_with_an_error() {
    let Some((ca, cb)) = devices() else { return };
    let (a, b) = (side(&ca), side(&cb));
    let (qa, _qb) = connect(&a, &b, None);
    let no_atomic =
        b.pd.allocate(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .unwrap();
    let r = a.pd.allocate(8, Access::LOCAL_WRITE).unwrap();
    qa.post_send([SendRequest::fetch_add(3, r, no_atomic.remote(), 1)])
        .unwrap();
    let c = wait_n(&a.cq, 1).pop().unwrap();
    assert_eq!(c.id, 3);
    assert_eq!(c.status, Status::RemoteAccess, "{c:?}");
    assert!(c.segments.len() == 1, "the result buffer comes back");
    assert!(no_atomic.iter().all(|&x| x == 0));
    println!(
        "fetch-and-add on a region without REMOTE_ATOMIC: {}",
        c.status
    );
}

#[test]
fn one_shared_receive_queue_serves_several_queue_pairs() {
    let Some((ca, cb)) = devices() else { return };
    let (a, b) = (side(&ca), side(&cb));
    let srq = b.pd.shared_receive_queue(16, 1).unwrap();
    assert!(srq.max_wr() >= 16);
    // Three connections into b, all receiving from the same 12 buffers.
    let pairs: Vec<_> = (0..3).map(|_| connect(&a, &b, Some(&srq))).collect();
    let bufs: Vec<_> = (0..12)
        .map(|i| RecvRequest::new(100 + i, b.pd.allocate(256, Access::LOCAL_WRITE).unwrap()))
        .collect();
    srq.post_recv(bufs).unwrap();
    assert_eq!(srq.posted(), 12);
    // A queue pair that receives from the SRQ refuses receives of its own.
    let e = pairs[0]
        .1
        .post_recv([RecvRequest::new(
            1,
            b.pd.allocate(8, Access::LOCAL_WRITE).unwrap(),
        )])
        .unwrap_err();
    assert!(e.to_string().contains("shared receive queue"), "{e}");
    assert_eq!(e.unposted.len(), 1);

    // Four messages on each connection.
    for (k, (qa, _)) in pairs.iter().enumerate() {
        let reqs: Vec<_> = (0..4u8)
            .map(|i| {
                let mut m = a.pd.allocate(32, Access::empty()).unwrap();
                m.fill(k as u8 * 16 + i);
                SendRequest::send(u64::from(i), m)
            })
            .collect();
        qa.post_send(reqs).unwrap();
    }
    let sent = wait_n(&a.cq, 12);
    assert!(sent.iter().all(|c| c.status == Status::Success));
    let got = wait_n(&b.cq, 12);
    let by_qp: HashMap<u32, usize> = pairs
        .iter()
        .enumerate()
        .map(|(k, (_, qb))| (qb.qp_num(), k))
        .collect();
    let mut seen = vec![Vec::new(); 3];
    let mut ids = Vec::new();
    for mut c in got {
        assert_eq!(
            (c.status, c.opcode, c.byte_len),
            (Status::Success, Opcode::Recv, 32)
        );
        let k = by_qp[&c.qp_num];
        let r = c.take_region().unwrap();
        assert!(r[..32].iter().all(|&x| x == r[0]));
        assert_eq!(
            r[0] / 16,
            k as u8,
            "the message came in on its own connection"
        );
        seen[k].push(r[0] % 16);
        ids.push(c.id);
    }
    for (k, s) in seen.iter().enumerate() {
        assert_eq!(
            s,
            &[0, 1, 2, 3],
            "connection {k}: every message once, in order"
        );
    }
    ids.sort();
    assert_eq!(
        ids,
        (100..112).collect::<Vec<_>>(),
        "each buffer completed once"
    );
    assert_eq!(srq.posted(), 0);
    println!(
        "3 queue pairs x 4 messages into one SRQ of 12 buffers: all in order, each buffer once"
    );

    // A connection that goes away leaves the SRQ's buffers to the others.
    srq.post_recv([RecvRequest::new(
        200,
        b.pd.allocate(256, Access::LOCAL_WRITE).unwrap(),
    )])
    .unwrap();
    let mut pairs = pairs;
    let (qa_gone, qb_gone) = pairs.remove(0);
    drop(qb_gone);
    drop(qa_gone);
    assert_eq!(srq.posted(), 1, "a queue pair's end does not flush the SRQ");
    let mut m = a.pd.allocate(8, Access::empty()).unwrap();
    m.fill(0xab);
    pairs[0].0.post_send([SendRequest::send(9, m)]).unwrap();
    let mut c = wait_n(&b.cq, 1).pop().unwrap();
    assert_eq!((c.id, c.status), (200, Status::Success));
    assert_eq!(&c.take_region().unwrap()[..8], &[0xab; 8]);
    wait_n(&a.cq, 1);
    println!("after one queue pair was destroyed, its SRQ buffer served another");
}

#[test]
fn the_srq_limit_event_asks_for_more_receives() {
    let Some((ca, cb)) = devices() else { return };
    let (a, b) = (side(&ca), side(&cb));
    cb.set_async_nonblocking(true).unwrap();
    while cb.get_async_event().unwrap().is_some() {}
    let srq = b.pd.shared_receive_queue(8, 1).unwrap();
    let (qa, _qb) = connect(&a, &b, Some(&srq));
    let bufs: Vec<_> = (0..6)
        .map(|i| RecvRequest::new(i, b.pd.allocate(64, Access::LOCAL_WRITE).unwrap()))
        .collect();
    srq.post_recv(bufs).unwrap();
    assert!(srq.arm_limit(0).is_err());
    assert!(srq.arm_limit(srq.max_wr()).is_err());
    srq.arm_limit(3).unwrap();
    // Two messages leave 4 posted: no event yet.
    let send = |n: u64| {
        for i in 0..n {
            let m = a.pd.allocate(16, Access::empty()).unwrap();
            qa.post_send([SendRequest::send(i, m)]).unwrap();
        }
        wait_n(&a.cq, n as usize);
        wait_n(&b.cq, n as usize);
    };
    send(2);
    let early = cb.wait_async_event(Duration::from_millis(300)).unwrap();
    assert!(early.is_none(), "event before the limit: {early:?}");
    // Two more leave 2 posted, below the limit of 3.
    send(2);
    let start = Instant::now();
    let mut ev = None;
    while start.elapsed() < WAIT {
        match cb.wait_async_event(Duration::from_millis(500)).unwrap() {
            Some(e) if e.kind == AsyncEventKind::SrqLimitReached => {
                ev = Some(e);
                break;
            }
            Some(other) => println!("also: {other}"),
            None => {}
        }
    }
    assert!(ev.is_some(), "no SRQ_LIMIT_REACHED below the limit");
    assert_eq!(srq.posted(), 2);
    println!("SRQ limit 3: no event at 4 posted, SRQ_LIMIT_REACHED at 2");
}
