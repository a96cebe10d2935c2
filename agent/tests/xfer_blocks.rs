//! Xfer blocks between ranks of one process (threads, real shm/tcp): chains of forwards,
//! gathers with combining forwards, messages split over several ops, invalid blocks.
//!
//! What runs: every body over `shm` and `tcp`, with 2 to 5 ranks and messages of 0 bytes to
//! 3 MiB (pieces of the default 64 KiB and of 4 KiB, so elements straddle pieces).

mod agent_common;

use std::time::Duration;

use agent_common::{config, job};
use viaduct_agent::comm::Comm;
use viaduct_agent::config::MethodKind;
use viaduct_agent::error::AgentError;
use viaduct_agent::xfer::{Datatype, ReduceOp, Reduction, XferError};

const WAIT: Duration = Duration::from_secs(60);

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
        .collect()
}

fn wait(r: &mut viaduct_agent::request::Request) {
    r.wait_timeout(WAIT)
        .expect("block request failed")
        .expect("block did not complete in time");
}

/// Rank 0 sends, every other rank receives and forwards to the next: a pipelined chain.
fn chain(method: MethodKind, size: u32, len: usize) {
    job(size, config(method), move |agent| {
        let comm = Comm::world(&agent);
        let me = comm.rank();
        let n = comm.size();
        let data = pattern(len, 7);
        let src = (me > 0).then(|| me - 1);
        let mut b = comm.xfer_scatter(src, 3);
        let buf = b.buffer(if me == 0 { data.clone() } else { vec![0; len] });
        if me == 0 {
            b.send_op(buf, 0, len, 1);
        } else if me + 1 < n {
            b.recv_forward_op(buf, 0, len, me + 1);
        } else {
            b.recv_op(buf, 0, len);
        }
        let (mut req, bufs) = b.start().unwrap();
        wait(&mut req);
        assert!(
            bufs.take(buf).unwrap() == data,
            "rank {me}: chain data differs"
        );
    });
}

#[test]
fn chain_shm() {
    for (size, len) in [(2, 0), (3, 1), (4, 100_000), (5, 3 << 20)] {
        chain(MethodKind::Shm, size, len);
    }
}

#[test]
fn chain_tcp() {
    for (size, len) in [(2, 1), (4, 3 << 20)] {
        chain(MethodKind::Tcp, size, len);
    }
}

/// A reduction up a chain with combining forwards, into rank 0; the message of each rank is
/// split over a stored op and a combined op.
fn reduce_chain(method: MethodKind, size: u32, elems: usize, chunk: usize) {
    let mut cfg = config(method);
    cfg.xfer_chunk = chunk;
    job(size, cfg, move |agent| {
        let comm = Comm::world(&agent);
        let me = comm.rank();
        let n = comm.size();
        let mine: Vec<u8> = (0..elems)
            .flat_map(|i| ((i as i64) * (me as i64 + 1)).to_ne_bytes())
            .collect();
        let len = mine.len();
        // Three bytes of a header, stored; then the elements, combined.
        let hdr = [me as u8, 0xAB, 0xCD];
        let dest = (me > 0).then(|| me - 1);
        let mut b = comm.xfer_gather(dest, 9);
        let h = b.buffer(hdr.to_vec());
        let acc = b.buffer(mine.clone());
        let red = Reduction::Builtin(Datatype::I64, ReduceOp::Sum);
        if me + 1 < n {
            if me > 0 {
                b.recv_forward_op(h, 0, 3, me + 1);
                b.recv_mop_forward_op(acc, 0, len, red, me + 1);
            } else {
                b.recv_op(h, 0, 3, me + 1);
                b.recv_mop_op(acc, 0, len, red, me + 1);
            }
        } else {
            b.send_op(h, 0, 3).send_op(acc, 0, len);
        }
        let (mut req, bufs) = b.start().unwrap();
        wait(&mut req);
        if me == 0 && n > 1 {
            let total: i64 = (1..=n as i64).sum();
            let got = bufs.take(acc).unwrap();
            for (i, c) in got.chunks_exact(8).enumerate() {
                assert_eq!(i64::from_ne_bytes(c.try_into().unwrap()), i as i64 * total);
            }
            assert_eq!(bufs.take(h).unwrap(), vec![n as u8 - 1, 0xAB, 0xCD]);
        }
    });
}

#[test]
fn reduce_chain_shm() {
    reduce_chain(MethodKind::Shm, 4, 100_001, 4096);
    reduce_chain(MethodKind::Shm, 3, 0, 65536);
}

#[test]
fn reduce_chain_tcp() {
    reduce_chain(MethodKind::Tcp, 3, 70_000, 65536);
}

fn xfer_err(e: AgentError) -> XferError {
    match e {
        AgentError::Xfer(x) => x,
        other => panic!("expected an xfer error, got {other}"),
    }
}

/// Invalid blocks are refused at start with the cause, and nothing is posted (a valid block
/// with the same tag afterwards still matches its peer's first block).
#[test]
fn invalid_blocks_are_refused() {
    job(2, config(MethodKind::Shm), |agent| {
        let comm = Comm::world(&agent);
        let me = comm.rank();
        let other = 1 - me;
        let red = || Reduction::Builtin(Datatype::I32, ReduceOp::Sum);
        let mut b = comm.xfer_scatter(None, 1);
        let x = b.buffer(vec![0; 16]);
        b.recv_op(x, 0, 4);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::ReceiveWithoutSource { op: 0 }
        ));

        let mut b = comm.xfer_gather(None, 1);
        let x = b.buffer(vec![0; 16]);
        b.send_op(x, 0, 4);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::SendWithoutDestination { op: 0 }
        ));

        let mut b = comm.xfer_scatter(Some(other), 1);
        let x = b.buffer(vec![0; 16]);
        b.recv_op(x, 0, 8).recv_op(x, 4, 12);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::OverlappingReceives {
                first: 0,
                second: 1,
                ..
            }
        ));

        let mut b = comm.xfer_scatter(Some(other), 1);
        let x = b.buffer(vec![0; 16]);
        b.recv_mop_op(x, 0, 8, red()).recv_mop_op(x, 0, 8, red());
        // Combining twice into the same bytes is an accumulate, not an overlap: valid; but the
        // range of the next op is past its buffer.
        b.send_op(x, 8, 17, other);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::RangePastBuffer { op: 2, len: 16, .. }
        ));

        let mut b = comm.xfer_scatter(Some(other), 1);
        let x = b.buffer(vec![0; 16]);
        b.recv_op(x, 9, 8);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::ReversedRange { .. }
        ));

        let mut b = comm.xfer_scatter(None, 1);
        let x = b.buffer(vec![0; 16]);
        b.send_op(x, 0, 4, 5);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::UnknownRank { rank: 5, size: 2 }
        ));

        let mut b = comm.xfer_scatter(Some(other), 1);
        let x = b.buffer(vec![0; 16]);
        b.recv_mop_op(x, 0, 6, red());
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::PartialElement {
                len: 6,
                elem_size: 4,
                ..
            }
        ));

        let mut b = comm.xfer_scatter(Some(other), 1);
        let x = b.buffer(vec![0; 16]);
        b.recv_forward_op(x, 0, 4, me);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::SelfPeer { op: 0, .. }
        ));

        let mut b = comm.xfer_scatter(None, 1);
        b.forward_op(4, me);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::ReceiveWithoutSource { .. }
        ));

        let mut b = comm.xfer_scatter(Some(other), 1);
        let x = b.buffer(vec![0; 16]);
        b.recv_mop_op(x, 0, 8, Reduction::Builtin(Datatype::F64, ReduceOp::Band));
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::BitwiseOnFloat { .. }
        ));

        let b = comm.xfer_scatter(None, 0x8000_0001);
        assert!(matches!(
            xfer_err(b.start().unwrap_err()),
            XferError::ReservedTag(_)
        ));

        // Nothing of the refused blocks went out: the first real blocks with tag 1 match.
        let mut b = comm.xfer_scatter(Some(other), 1);
        let x = b.buffer(vec![me as u8; 4]);
        let y = b.buffer(vec![0; 4]);
        b.send_op(x, 0, 4, other).recv_op(y, 0, 4);
        let (mut req, bufs) = b.start().unwrap();
        wait(&mut req);
        assert_eq!(bufs.take(y).unwrap(), vec![other as u8; 4]);
    });
}

/// A message longer or shorter than the receiving ops add up to fails the receiving block with
/// the cause; the sender's block completes, and both get their buffers back.
#[test]
fn length_mismatch_fails_the_receiving_block() {
    job(2, config(MethodKind::Shm), |agent| {
        let comm = Comm::world(&agent);
        for (sent, expected) in [(20usize, 10usize), (5, 10), (100_000, 50_000), (0, 3)] {
            if comm.rank() == 0 {
                let mut b = comm.xfer_scatter(None, 2);
                let x = b.buffer(vec![1; sent]);
                b.send_op(x, 0, sent, 1);
                let (mut req, bufs) = b.start().unwrap();
                wait(&mut req);
                assert_eq!(bufs.take(x).unwrap().len(), sent);
            } else {
                let mut b = comm.xfer_scatter(Some(0), 2);
                let x = b.buffer(vec![0; expected]);
                b.recv_op(x, 0, expected);
                let (mut req, bufs) = b.start().unwrap();
                let err = req.wait_timeout(WAIT).expect_err("the block must fail");
                let text = err.to_string();
                assert!(
                    text.contains(&format!("message of {sent} bytes from rank 0"))
                        && text.contains(&format!("expects {expected} bytes")),
                    "{text}"
                );
                assert_eq!(bufs.take(x).unwrap().len(), expected);
            }
            // The rest of the refused message is dropped: the next block with the same tag
            // matches the next message.
            let mut b = comm.xfer_scatter(Some(1 - comm.rank()), 2);
            let x = b.buffer(vec![comm.rank() as u8; 3]);
            let y = b.buffer(vec![9; 3]);
            b.send_op(x, 0, 3, 1 - comm.rank()).recv_op(y, 0, 3);
            let (mut req, bufs) = b.start().unwrap();
            wait(&mut req);
            assert_eq!(bufs.take(y).unwrap(), vec![1 - comm.rank() as u8; 3]);
            comm.barrier().unwrap();
        }
    });
}
