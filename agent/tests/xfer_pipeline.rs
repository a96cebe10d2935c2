//! Pipelining and matching order of xfer blocks, shown by progress counters, not by time.
//!
//! - `chain_pipelines_*`: 4 ranks forward 16 MiB down a chain (pieces of the default 16360
//!   bytes, 1026 of them). Rank 0 starts its block and then makes no progress at all until the
//!   last rank says so: most of its pieces stay in its own VC queue (the methods take at most
//!   a few MiB: the shared-memory ring holds 1 MiB, TCP's credit window 3 MiB). The last rank
//!   nevertheless receives piece 0, and at that moment the first forwarder has received fewer
//!   than all pieces: it forwarded piece 0 before the message was in (store-and-forward could
//!   not have delivered anything yet).
//! - `later_send_matches_later_block_*`: a block whose send leaves before an earlier block's
//!   forward still matches the later block at the receiver.

mod agent_common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_common::{config, job};
use viaduct_agent::comm::Comm;
use viaduct_agent::config::MethodKind;
use viaduct_agent::xfer::XferMonitor;

const LIMIT: Duration = Duration::from_secs(60);

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

#[derive(Default)]
struct Shared {
    forwarder: Mutex<Option<XferMonitor>>,
    go: AtomicBool,
    first_done: AtomicBool,
    /// (pieces the last rank had, pieces the first forwarder had) when the last rank saw its
    /// first piece.
    seen: Mutex<Option<(u64, u64)>>,
}

fn chain_pipelines(method: MethodKind) {
    const LEN: usize = 16 << 20;
    let cfg = config(method);
    let total_pieces = LEN.div_ceil(cfg.xfer_chunk) as u64;
    let shared = Arc::new(Shared::default());
    let sh = Arc::clone(&shared);
    job(4, cfg, move |agent| {
        let comm = Comm::world(&agent);
        let me = comm.rank();
        let data = pattern(LEN, 3);
        let mut b = comm.xfer_scatter((me > 0).then(|| me - 1), 11);
        let buf = b.buffer(if me == 0 { data.clone() } else { vec![0; LEN] });
        match me {
            0 => b.send_op(buf, 0, LEN, 1),
            1 | 2 => b.recv_forward_op(buf, 0, LEN, me + 1),
            _ => b.recv_op(buf, 0, LEN),
        };
        let (mut req, bufs) = b.start().unwrap();
        let deadline = Instant::now() + LIMIT;
        match me {
            0 => {
                // No call into the agent until the last rank has seen piece 0.
                while !sh.go.load(Ordering::Acquire) {
                    assert!(Instant::now() < deadline, "the last rank never saw a piece");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            1 => *sh.forwarder.lock().unwrap() = Some(bufs.monitor()),
            3 => {
                let mine = bufs.monitor();
                while mine.pieces_received() == 0 {
                    assert!(Instant::now() < deadline, "no piece reached the last rank");
                    agent.make_progress();
                }
                let fwd = loop {
                    if let Some(m) = sh.forwarder.lock().unwrap().clone() {
                        break m;
                    }
                    assert!(Instant::now() < deadline);
                    std::thread::yield_now();
                };
                *sh.seen.lock().unwrap() = Some((mine.pieces_received(), fwd.pieces_received()));
                assert!(!sh.first_done.load(Ordering::Acquire));
                sh.go.store(true, Ordering::Release);
            }
            _ => {}
        }
        req.wait_timeout(LIMIT)
            .expect("chain block failed")
            .expect("chain block did not complete in time");
        if me == 0 {
            sh.first_done.store(true, Ordering::Release);
        }
        assert!(bufs.take(buf).unwrap() == data, "rank {me}: data differs");
        assert_eq!(
            bufs.monitor().pieces_sent(),
            if me < 3 { total_pieces } else { 0 }
        );
    });
    let (last, first_forwarder) = shared.seen.lock().unwrap().expect("recorded");
    eprintln!(
        "{method:?}: the last rank had {last} piece(s) while the first forwarder had \
         {first_forwarder} of {total_pieces}"
    );
    assert!(last >= 1);
    assert!(
        first_forwarder < total_pieces,
        "the first forwarder had all {first_forwarder} pieces before the last rank got one"
    );
}

#[test]
fn chain_pipelines_shm() {
    chain_pipelines(MethodKind::Shm);
}

#[test]
fn chain_pipelines_tcp() {
    chain_pipelines(MethodKind::Tcp);
}

fn later_send_matches_later_block(method: MethodKind) {
    let go = Arc::new(AtomicBool::new(false));
    job(3, config(method), move |agent| {
        let comm = Comm::world(&agent);
        let me = comm.rank();
        let deadline = Instant::now() + LIMIT;
        match me {
            0 => {
                while !go.load(Ordering::Acquire) {
                    assert!(Instant::now() < deadline);
                    agent.make_progress();
                }
                let mut b = comm.xfer_scatter(None, 5);
                let x = b.buffer(b"from rank 0".to_vec());
                b.send_op(x, 0, 11, 1);
                b.start().unwrap().0.wait().unwrap();
            }
            1 => {
                // Block P forwards what rank 0 sends (later); block Q sends at once.
                let mut p = comm.xfer_scatter(Some(0), 5);
                let x = p.buffer(vec![0; 11]);
                p.recv_forward_op(x, 0, 11, 2);
                let (mut rp, _) = p.start().unwrap();
                let mut q = comm.xfer_scatter(None, 5);
                let y = q.buffer(b"from Q".to_vec());
                q.send_op(y, 0, 6, 2);
                let (mut rq, _) = q.start().unwrap();
                rq.wait().unwrap();
                rp.wait().unwrap();
            }
            _ => {
                let mut x = comm.xfer_scatter(Some(1), 5);
                let bx = x.buffer(vec![0; 11]);
                x.recv_op(bx, 0, 11);
                let (mut rx, ox) = x.start().unwrap();
                let mut y = comm.xfer_scatter(Some(1), 5);
                let by = y.buffer(vec![0; 6]);
                y.recv_op(by, 0, 6);
                let (mut ry, oy) = y.start().unwrap();
                // The later block completes first: its message left first.
                ry.wait().unwrap();
                assert_eq!(oy.take(by).unwrap(), b"from Q");
                assert!(!rx.is_complete());
                go.store(true, Ordering::Release);
                rx.wait().unwrap();
                assert_eq!(ox.take(bx).unwrap(), b"from rank 0");
            }
        }
    });
}

#[test]
fn later_send_matches_later_block_shm() {
    later_send_matches_later_block(MethodKind::Shm);
}

#[test]
fn later_send_matches_later_block_tcp() {
    later_send_matches_later_block(MethodKind::Tcp);
}
