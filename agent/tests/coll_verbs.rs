//! Collectives over the verbs method: 3 and 4 ranks (threads of this process, each with its own
//! agent) on one RDMA device, soft-RoCE `rxe0` in the VM of `scripts/rxe-vm`, every result
//! checked against a sequential reference computed here.
//!
//! The guest's CPU is emulated, so this runs fewer sizes than the shm and tcp suite
//! (`coll_collectives`): 0, 7, 4096 and 1 MiB (1 MiB crosses the allreduce and allgather switch
//! points), with bcast, allreduce (built-in and user reductions), allgather, reduce, gather,
//! scatter, alltoall and barrier. Without a device each test prints `SKIPPED: ...`, unless
//! `VIADUCT_REQUIRE_RDMA=1` (set by the VM), where a missing device fails it.
#![cfg(feature = "rdma")]

mod agent_common;

use agent_common::{config, job};
use viaduct_agent::agent::Agent;
use viaduct_agent::comm::Comm;
use viaduct_agent::config::MethodKind;
use viaduct_agent::xfer::{Datatype, ReduceOp, Reduction};

fn have_rdma() -> bool {
    if !viaduct_verbs::device::names()
        .unwrap_or_default()
        .is_empty()
    {
        return true;
    }
    if std::env::var("VIADUCT_REQUIRE_RDMA").as_deref() == Ok("1") {
        panic!("VIADUCT_REQUIRE_RDMA=1 but this machine has no RDMA device");
    }
    println!("SKIPPED: no RDMA device (run through scripts/rxe-vm)");
    false
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed * 977) as u8
        })
        .collect()
}

fn i64_bytes(v: impl IntoIterator<Item = i64>) -> Vec<u8> {
    v.into_iter().flat_map(i64::to_ne_bytes).collect()
}

fn check(agent: Agent, len: usize) {
    let comm = Comm::world(&agent);
    assert_eq!(
        agent.method_of((agent.rank() + 1) % agent.size()),
        Some("verbs")
    );
    let (r, n) = (comm.rank(), comm.size());
    let nu = n as usize;
    comm.barrier().unwrap();

    // bcast from the last rank.
    let root = n - 1;
    let mut buf = if r == root {
        pattern(len, 1)
    } else {
        vec![0; len]
    };
    comm.bcast(&mut buf, root).unwrap();
    assert!(
        buf == pattern(len, 1),
        "bcast of {len} bytes differs on rank {r}"
    );

    // allreduce, sum of i64 (len rounded down to whole elements).
    let elems = len / 8;
    let mine = |rank: u32| (0..elems).map(move |i| i as i64 * 3 - i64::from(rank));
    let mut acc = i64_bytes(mine(r));
    comm.allreduce(&mut acc, Datatype::I64, ReduceOp::Sum)
        .unwrap();
    let expect = i64_bytes((0..elems).map(|i| (0..n).map(|k| i as i64 * 3 - i64::from(k)).sum()));
    assert!(
        acc == expect,
        "allreduce sum of {elems} i64 differs on rank {r}"
    );

    // allreduce with a user reduction: byte-wise wrapping sum over every byte.
    let bytesum = Reduction::user(1, |inc, acc| {
        for (a, b) in acc.iter_mut().zip(inc) {
            *a = a.wrapping_add(*b);
        }
    });
    let mut acc = pattern(len, r + 10);
    comm.allreduce_with(&mut acc, &bytesum).unwrap();
    let mut expect = vec![0u8; len];
    for k in 0..n {
        for (e, b) in expect.iter_mut().zip(pattern(len, k + 10)) {
            *e = e.wrapping_add(b);
        }
    }
    assert!(
        acc == expect,
        "user allreduce of {len} bytes differs on rank {r}"
    );

    // allgather.
    let mut all = vec![0u8; len * nu];
    comm.allgather(&pattern(len, r + 20), &mut all).unwrap();
    let expect: Vec<u8> = (0..n).flat_map(|k| pattern(len, k + 20)).collect();
    assert!(
        all == expect,
        "allgather of {len} bytes per rank differs on rank {r}"
    );

    // reduce (max of i64) to rank 0.
    let mut acc = i64_bytes(mine(r));
    comm.reduce(&mut acc, Datatype::I64, ReduceOp::Max, 0)
        .unwrap();
    if r == 0 {
        assert!(acc == i64_bytes(mine(0)), "reduce max differs on the root");
    }

    // gather to rank 1 and scatter from rank 1.
    let mut gathered = vec![0u8; if r == 1 { len * nu } else { 0 }];
    comm.gather(&pattern(len, r + 30), &mut gathered, 1)
        .unwrap();
    if r == 1 {
        let expect: Vec<u8> = (0..n).flat_map(|k| pattern(len, k + 30)).collect();
        assert!(gathered == expect, "gather of {len} bytes per rank differs");
    }
    let send = if r == 1 {
        pattern(len * nu, 40)
    } else {
        Vec::new()
    };
    let mut part = vec![0u8; len];
    comm.scatter(&send, &mut part, 1).unwrap();
    assert!(
        part == pattern(len * nu, 40)[r as usize * len..(r as usize + 1) * len],
        "scatter part of rank {r} differs"
    );

    // alltoall: block j of rank i is pattern(len, i * n + j).
    let send: Vec<u8> = (0..n).flat_map(|j| pattern(len, r * n + j)).collect();
    let mut recv = vec![0u8; len * nu];
    comm.alltoall(&send, &mut recv).unwrap();
    let expect: Vec<u8> = (0..n).flat_map(|i| pattern(len, i * n + r)).collect();
    assert!(
        recv == expect,
        "alltoall of {len} bytes per pair differs on rank {r}"
    );
    comm.barrier().unwrap();
}

fn run(ranks: u32) {
    if !have_rdma() {
        return;
    }
    for len in [0usize, 7, 4096, 1 << 20] {
        job(ranks, config(MethodKind::Verbs), move |agent| {
            check(agent, len)
        });
    }
}

#[test]
fn collectives_over_verbs_3_ranks() {
    run(3);
}

#[test]
fn collectives_over_verbs_4_ranks() {
    run(4);
}
