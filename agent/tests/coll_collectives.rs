//! Every collective checked against a sequential reference computed here, over `shm` and
//! `tcp`, ranks as threads of this process with their own agents.
//!
//! What runs (kept to a few seconds per test on 2 cores):
//! - `all_sizes_*`: sizes 0, 1, 7, 4096 and 1 MiB for 3 and 4 ranks over shm, 3 ranks over tcp
//!   (1 MiB crosses the allreduce and allgather switch points: reduce-scatter + allgather,
//!   ring);
//! - `all_ranks_*`: 1 to 9 ranks with sizes 7 and 4096 over shm, 1 to 9 ranks with 7 bytes
//!   over tcp;
//! - `sixteen_mib_*`: 16 MiB bcast (the chain) and allreduce (and allgather of 16 MiB in all)
//!   for 4 ranks over shm and 3 over tcp; every collective at 16 MiB per contribution for 3
//!   ranks over shm (scatter and gather of parts from 4 MiB go flat and in place);
//! - `direct_switch_tcp`: every collective at one byte under and at the 4 MiB part from which
//!   the blocking scatter and gather go flat, 3 ranks over tcp (root 1);
//! - `two_ranks_long_*`: 2 ranks over shm and tcp at lengths around the two-rank paths: just
//!   over the eager limit (64 KiB, 64 KiB + 1: bcast through the xfer pipeline, allgather in
//!   eager pieces, the last one short), 200000 B (still the pipeline), 300000 B (bcast as one
//!   message) and 1 MiB (allreduce over tcp as one exchange in eager pieces, over shm as two
//!   exchanges of halves in place: reduce-scatter, allgather);
//! - `two_ranks_lengths_differ`: the two ranks pass lengths of whole eager pieces that differ
//!   by one piece to the allgather, alltoall and allreduce, over tcp and shm: both ranks get
//!   an error, none waits for a piece that does not come;
//! - user reductions (a byte-wise wrapping sum of any length, a 3-byte element) everywhere.

mod agent_common;

use agent_common::{config, job, job_owned};
use viaduct_agent::agent::Agent;
use viaduct_agent::comm::Comm;
use viaduct_agent::config::MethodKind;
use viaduct_agent::xfer::{Datatype, ReduceOp, Reduction};

/// Bytes that differ with `seed` and with the position (period 256: the low byte of a product
/// depends only on the low bytes of its factors, so one block of 256 is computed and repeated).
fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let block: Vec<u8> = (0..256u32)
        .map(|i| {
            i.wrapping_mul(2_654_435_761)
                .wrapping_add(seed.wrapping_mul(40_503)) as u8
        })
        .collect();
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let n = (len - v.len()).min(256);
        v.extend_from_slice(&block[..n]);
    }
    v
}

fn byte_sum() -> Reduction {
    Reduction::user(1, |inc, acc| {
        for (a, b) in acc.iter_mut().zip(inc) {
            *a = a.wrapping_add(*b);
        }
    })
}

/// Elements of 3 bytes: the max of the first byte wins the whole element (ties: larger rest).
fn triple_max() -> Reduction {
    Reduction::user(3, |inc, acc| {
        for (a, b) in acc.chunks_exact_mut(3).zip(inc.chunks_exact(3)) {
            if b > &*a {
                a.copy_from_slice(b);
            }
        }
    })
}

fn i64s(v: &[u8]) -> Vec<i64> {
    v.chunks_exact(8)
        .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Which collectives a run checks.
#[derive(Clone, Copy)]
struct Only {
    rooted: bool,
    alltoall: bool,
}

const EVERYTHING: Only = Only {
    rooted: true,
    alltoall: true,
};

fn check_all(agent: Agent, len: usize, only: Only) {
    let comm = Comm::world(&agent);
    let (r, n) = (comm.rank(), comm.size());
    let nu = n as usize;
    comm.barrier().unwrap();

    // bcast from the first and the last rank.
    for root in [0, n - 1] {
        let mut buf = if r == root {
            pattern(len, root)
        } else {
            vec![0; len]
        };
        comm.bcast(&mut buf, root).unwrap();
        assert!(
            buf == pattern(len, root),
            "bcast of {len} B from {root} on {n} ranks"
        );
    }

    // allreduce: byte-wise user sum of any length.
    let mut buf = pattern(len, 300 + r);
    comm.allreduce_with(&mut buf, &byte_sum()).unwrap();
    let mut want = vec![0u8; len];
    for i in 0..n {
        for (w, b) in want.iter_mut().zip(pattern(len, 300 + i)) {
            *w = w.wrapping_add(b);
        }
    }
    assert!(buf == want, "allreduce (user) of {len} B on {n} ranks");

    // allreduce: i64 sum and f64 max on the whole elements of `len`.
    let elems = len / 8;
    let mine: Vec<u8> = (0..elems)
        .flat_map(|j| ((j as i64 - 5) * (r as i64 + 1)).to_ne_bytes())
        .collect();
    let mut buf = mine.clone();
    comm.allreduce(&mut buf, Datatype::I64, ReduceOp::Sum)
        .unwrap();
    let tri = (nu * (nu + 1) / 2) as i64;
    assert!(
        i64s(&buf)
            .iter()
            .enumerate()
            .all(|(j, v)| *v == (j as i64 - 5) * tri),
        "allreduce (i64 sum) of {len} B on {n} ranks"
    );
    let mut buf: Vec<u8> = (0..elems)
        .flat_map(|j| (((j + r as usize) % nu) as f64).to_ne_bytes())
        .collect();
    comm.allreduce(&mut buf, Datatype::F64, ReduceOp::Max)
        .unwrap();
    assert!(
        buf.chunks_exact(8)
            .all(|c| f64::from_ne_bytes(c.try_into().unwrap()) == (nu - 1) as f64),
        "allreduce (f64 max) of {len} B on {n} ranks"
    );

    // allgather of `len` bytes per rank.
    let mut all = vec![0; len * nu];
    comm.allgather(&pattern(len, 500 + r), &mut all).unwrap();
    for i in 0..nu {
        assert!(
            all[i * len..(i + 1) * len] == pattern(len, 500 + i as u32)[..],
            "allgather of {len} B on {n} ranks: part {i}"
        );
    }

    if only.rooted {
        let root = n / 2;
        // reduce with a 3-byte user element to the middle rank.
        let l3 = len / 3 * 3;
        let mut buf = pattern(l3, 600 + r);
        comm.reduce_with(&mut buf, &triple_max(), root).unwrap();
        if r == root {
            let mut want = pattern(l3, 600);
            for i in 1..n {
                triple_max().combine_for_test(&pattern(l3, 600 + i), &mut want);
            }
            assert!(buf == want, "reduce (user) of {l3} B on {n} ranks");
        } else {
            assert!(
                buf == pattern(l3, 600 + r),
                "reduce changed a non-root buffer"
            );
        }
        // i64 sum to rank 0.
        let mut buf = mine.clone();
        comm.reduce(&mut buf, Datatype::I64, ReduceOp::Sum, 0)
            .unwrap();
        if r == 0 {
            assert!(
                i64s(&buf)
                    .iter()
                    .enumerate()
                    .all(|(j, v)| *v == (j as i64 - 5) * tri)
            );
        }

        // scatter and gather through the root.
        let send: Vec<u8> = if r == root {
            (0..n).flat_map(|i| pattern(len, 700 + i)).collect()
        } else {
            Vec::new()
        };
        let mut part = vec![0; len];
        comm.scatter(&send, &mut part, root).unwrap();
        assert!(
            part == pattern(len, 700 + r),
            "scatter of {len} B on {n} ranks"
        );
        let mut back = if r == root {
            vec![0; len * nu]
        } else {
            Vec::new()
        };
        comm.gather(&part, &mut back, root).unwrap();
        if r == root {
            assert!(back == send, "gather of {len} B on {n} ranks");
        }
    }

    if only.alltoall {
        let send: Vec<u8> = (0..n)
            .flat_map(|i| pattern(len, 800 + r * 16 + i))
            .collect();
        let mut recv = vec![0; len * nu];
        comm.alltoall(&send, &mut recv).unwrap();
        for i in 0..nu {
            assert!(
                recv[i * len..(i + 1) * len] == pattern(len, 800 + i as u32 * 16 + r)[..],
                "alltoall of {len} B on {n} ranks: part {i}"
            );
        }
    }
    comm.barrier().unwrap();
}

trait ForTest {
    fn combine_for_test(&self, incoming: &[u8], acc: &mut [u8]);
}

impl ForTest for Reduction {
    fn combine_for_test(&self, incoming: &[u8], acc: &mut [u8]) {
        match self {
            Reduction::User { f, .. } => f(incoming, acc),
            Reduction::Builtin(..) => unreachable!("only user reductions are recomputed here"),
        }
    }
}

fn run(method: MethodKind, ranks: &[u32], sizes: &[usize], only: Only) {
    for &n in ranks {
        let sizes = sizes.to_vec();
        job(n, config(method), move |agent| {
            for &len in &sizes {
                check_all(agent.clone(), len, only);
            }
        });
    }
}

#[test]
fn all_sizes_shm() {
    run(
        MethodKind::Shm,
        &[3, 4],
        &[0, 1, 7, 4096, 1 << 20],
        EVERYTHING,
    );
}

#[test]
fn all_sizes_tcp() {
    run(MethodKind::Tcp, &[3], &[0, 1, 7, 4096, 1 << 20], EVERYTHING);
}

#[test]
fn all_ranks_shm() {
    run(
        MethodKind::Shm,
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
        &[7, 4096],
        EVERYTHING,
    );
}

#[test]
fn all_ranks_tcp() {
    run(
        MethodKind::Tcp,
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
        &[7],
        EVERYTHING,
    );
}

fn sixteen(method: MethodKind, n: u32) {
    job(n, config(method), move |agent| {
        let comm = Comm::world(&agent);
        let r = comm.rank();
        let len = 16 << 20;
        let mut buf = if r == 0 {
            pattern(len, 9)
        } else {
            vec![0; len]
        };
        comm.bcast(&mut buf, 0).unwrap();
        assert!(buf == pattern(len, 9), "16 MiB bcast");
        let mut buf: Vec<u8> = (0..len / 8)
            .flat_map(|j| ((j as i64) ^ i64::from(r)).to_ne_bytes())
            .collect();
        comm.allreduce(&mut buf, Datatype::I64, ReduceOp::Bxor)
            .unwrap();
        let x = (0..n as i64).fold(0, |a, b| a ^ b);
        let odd = n % 2 == 1;
        assert!(
            i64s(&buf)
                .iter()
                .enumerate()
                .all(|(j, v)| *v == if odd { j as i64 ^ x } else { x }),
            "16 MiB allreduce"
        );
        let part = len / n as usize;
        let mut all = vec![0; part * n as usize];
        comm.allgather(&pattern(part, r), &mut all).unwrap();
        for i in 0..n as usize {
            assert!(all[i * part..(i + 1) * part] == pattern(part, i as u32)[..]);
        }
    });
}

#[test]
fn sixteen_mib_shm() {
    sixteen(MethodKind::Shm, 4);
}

#[test]
fn sixteen_mib_tcp() {
    sixteen(MethodKind::Tcp, 3);
}

/// Every collective (rooted ones and alltoall included) at 16 MiB per contribution, 3 ranks
/// over shm.
#[test]
fn sixteen_mib_every_collective_shm() {
    run(MethodKind::Shm, &[3], &[16 << 20], EVERYTHING);
}

/// Parts on both sides of the switch point of the flat, in-place scatter and gather.
#[test]
fn direct_switch_tcp() {
    let at = viaduct_agent::coll::DIRECT_MIN;
    run(MethodKind::Tcp, &[3], &[at - 1, at], EVERYTHING);
}

/// Two ranks at the lengths where their own paths switch (see the module's list).
#[test]
fn two_ranks_long_tcp() {
    run(
        MethodKind::Tcp,
        &[2],
        &[65536, 65537, 200_000, 300_000, 1 << 20],
        EVERYTHING,
    );
}

/// [`two_ranks_long_tcp`] over shm.
#[test]
fn two_ranks_long_shm() {
    run(
        MethodKind::Shm,
        &[2],
        &[65536, 65537, 200_000, 300_000, 1 << 20],
        EVERYTHING,
    );
}

/// Lengths that differ by one whole eager piece between the two ranks, over TCP (the exchange
/// in eager pieces) and shared memory (allreduce: two exchanges of halves in place): an error
/// on both, not a wait for a piece the other rank never sends (nor a result on the rank that
/// passed fewer).
#[test]
fn two_ranks_lengths_differ() {
    for (method, what) in [
        (MethodKind::Tcp, "allgather"),
        (MethodKind::Tcp, "allreduce"),
        (MethodKind::Tcp, "alltoall"),
        (MethodKind::Shm, "allgather"),
        (MethodKind::Shm, "allreduce"),
        (MethodKind::Shm, "alltoall"),
    ] {
        let errors = job_owned(2, config(method), move |agent| {
            let comm = Comm::world(&agent);
            let piece = agent.config().eager_limit;
            let r = comm.rank() as usize;
            let got = if what == "allgather" {
                // Each rank's part: 2 or 3 whole pieces.
                let mut buf = vec![1u8; 2 * piece * (2 + r)];
                comm.allgather_in_place(&mut buf)
            } else if what == "alltoall" {
                // Each part: 2 or 3 whole pieces.
                let c = piece * (2 + r);
                let mut recv = vec![0u8; 2 * c];
                comm.alltoall(&vec![1u8; 2 * c], &mut recv)
            } else {
                // 9 or 10 whole pieces, past the allreduce switch point.
                assert!(9 * piece >= viaduct_agent::coll::ALLREDUCE_RSAG_MIN);
                let mut buf = vec![0u8; piece * (9 + r)];
                comm.allreduce(&mut buf, Datatype::I64, ReduceOp::Sum)
            };
            got.err().map(|e| e.to_string())
        });
        for (rank, e) in errors.iter().enumerate() {
            let e = e.as_deref().unwrap_or_else(|| {
                panic!("{what} over {method:?}: rank {rank} succeeded with mismatched lengths")
            });
            // A piece of another length than expected: shorter (the collective names the
            // lengths) or longer (truncated).
            assert!(
                e.contains(what) || e.contains("truncated"),
                "{what} over {method:?}: rank {rank}: {e}"
            );
        }
    }
}

/// A broadcast on 4 ranks (a binomial tree: rank 2 passes the root's message on to rank 3)
/// where the root passes another length than the others, shorter and longer, small (whole
/// messages along the tree) and past the small switch point (the xfer pipeline), blocking and
/// nonblocking, over shm and tcp: every non-root rank gets an error, rank 3 too, whose parent
/// failed before passing anything on; nobody waits for a message that never comes.
#[test]
fn bcast_lengths_differ() {
    for method in [MethodKind::Shm, MethodKind::Tcp] {
        for (root_len, other_len) in [(4, 40), (40, 4), (100_000, 200_000), (200_000, 100_000)] {
            for blocking in [true, false] {
                let errors = job(4, config(method), move |agent| {
                    let comm = Comm::world(&agent);
                    let len = if comm.rank() == 0 {
                        root_len
                    } else {
                        other_len
                    };
                    let got = if blocking {
                        comm.bcast(&mut vec![7u8; len], 0)
                    } else {
                        comm.ibcast(vec![7u8; len], 0)
                            .and_then(|(mut r, _out)| r.wait().map(|_| ()).map_err(Into::into))
                    };
                    // The job goes on: a collective with matching lengths still works.
                    let mut after = [comm.rank() as u8; 8];
                    comm.bcast(&mut after, 0).unwrap();
                    assert_eq!(after, [0u8; 8]);
                    got.err().map(|e| e.to_string())
                });
                for (rank, e) in errors.iter().enumerate().skip(1) {
                    assert!(
                        e.is_some(),
                        "bcast over {method:?}, root {root_len} B, others {other_len} B, \
                         blocking {blocking}: rank {rank} succeeded"
                    );
                }
            }
        }
    }
}
