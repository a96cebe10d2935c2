//! The collectives that move whole parts as point-to-point messages, checked exact at every
//! size around their switch points, against the xfer paths at the same sizes: `alltoall` and
//! `alltoall_into` around `SwitchPoints::alltoall_p2p_min` and the eager limit, `bcast` on two
//! ranks around the small switch point and with the point-to-point broadcast off
//! (`bcast_p2p_max` 0), `bcast_in_place` on three ranks around `bcast_p2p_max`; ranks as
//! threads of this process with their own agents, over shm and tcp.

mod agent_common;

use std::sync::{Arc, Mutex};

use agent_common::{config, job};
use viaduct_agent::comm::Comm;
use viaduct_agent::config::{Config, MethodKind};

/// Bytes that differ with `seed` and with the position.
fn msg(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(31)
                .wrapping_add(seed.wrapping_mul(7)) as u8
        })
        .collect()
}

/// Caller memory that hands its bytes back when the collective lets go of it.
struct Probe {
    data: Vec<u8>,
    out: Arc<Mutex<Option<Vec<u8>>>>,
}

impl AsRef<[u8]> for Probe {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl AsMut<[u8]> for Probe {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        *self.out.lock().unwrap() = Some(std::mem::take(&mut self.data));
    }
}

/// The part rank `from` sends to rank `to`.
fn part(from: u32, to: u32, len: usize) -> Vec<u8> {
    msg(from * 64 + to + len as u32, len)
}

/// `alltoall` and `alltoall_into` of parts of `len` bytes, checked against what every rank
/// sent.
fn check_alltoall(comm: &Comm, len: usize) {
    let (r, n) = (comm.rank(), comm.size());
    let send: Vec<u8> = (0..n).flat_map(|to| part(r, to, len)).collect();
    let mut recv = vec![0xEE; send.len()];
    comm.alltoall(&send, &mut recv).unwrap();
    for from in 0..n as usize {
        assert!(
            recv[from * len..(from + 1) * len] == part(from as u32, r, len)[..],
            "alltoall of {len} B parts on {n} ranks: part of rank {from} at rank {r}"
        );
    }

    let sends: Vec<Vec<u8>> = (0..n).map(|to| part(r, to, len)).collect();
    let outs: Vec<_> = (0..n).map(|_| Arc::new(Mutex::new(None))).collect();
    let recvs: Vec<Probe> = outs
        .iter()
        .map(|o| Probe {
            data: vec![0xEE; len],
            out: Arc::clone(o),
        })
        .collect();
    comm.alltoall_into(sends, recvs).unwrap();
    for (from, o) in outs.iter().enumerate() {
        let got = o.lock().unwrap().take();
        let got = got.expect("alltoall_into let go of the memory by its return");
        assert!(
            got == part(from as u32, r, len),
            "alltoall_into of {len} B parts on {n} ranks: part of rank {from} at rank {r}"
        );
    }
}

/// Parts around the switch point `min` and around the eager limit, with point-to-point parts
/// from `min` on.
fn alltoall_around(method: MethodKind, ranks: u32, min: usize) {
    let mut c = config(method);
    c.switch_points.alltoall_p2p_min = min;
    let eager = c.eager_limit;
    let sizes = [
        0,
        1,
        min - 1,
        min,
        min + 1,
        eager - 1,
        eager,
        eager + 1,
        (256 << 10) + 3,
    ];
    job(ranks, c, move |agent| {
        let comm = Comm::world(&agent);
        for len in sizes {
            check_alltoall(&comm, len);
        }
        comm.barrier().unwrap();
    });
}

#[test]
fn alltoall_around_switch_points_shm() {
    alltoall_around(MethodKind::Shm, 2, 1000);
    alltoall_around(MethodKind::Shm, 3, 1000);
}

#[test]
fn alltoall_around_switch_points_tcp() {
    alltoall_around(MethodKind::Tcp, 2, 1000);
}

/// Every alltoall of the default (point-to-point at every size) and of xfer blocks only.
#[test]
fn alltoall_default_and_xfer_only_shm() {
    for min in [Config::default().switch_points.alltoall_p2p_min, usize::MAX] {
        let mut c = config(MethodKind::Shm);
        c.switch_points.alltoall_p2p_min = min;
        job(2, c, |agent| {
            let comm = Comm::world(&agent);
            for len in [0, 8, 4096, 100_000, 1 << 20] {
                check_alltoall(&comm, len);
            }
        });
    }
}

/// Bad parts: a wrong count of parts or parts of different lengths are errors naming them,
/// with nothing sent; ranks passing parts of different lengths get errors, and return.
#[test]
fn alltoall_into_bad_parts() {
    job(2, config(MethodKind::Shm), |agent| {
        let comm = Comm::world(&agent);
        let e = comm
            .alltoall_into(vec![vec![0u8; 4]], vec![vec![0u8; 4]; 2])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("1 send parts and 2 receive parts for 2 ranks"),
            "{e}"
        );
        let e = comm
            .alltoall_into(vec![vec![0u8; 4], vec![0u8; 5]], vec![vec![0u8; 4]; 2])
            .unwrap_err()
            .to_string();
        assert!(e.contains("part 1 sends 5"), "{e}");
        for len in [16usize, 200_000] {
            let mine = if comm.rank() == 0 { len } else { len + 8 };
            let r = comm.alltoall_into(vec![vec![1u8; mine]; 2], vec![vec![0u8; mine]; 2]);
            assert!(r.is_err(), "rank {} passed {mine} B parts", comm.rank());
            comm.barrier().unwrap();
        }
        // The communicator still works.
        check_alltoall(&comm, 100);
    });
}

/// `bcast` on two ranks from each root, with the point-to-point broadcast on (the default)
/// and off.
fn bcast_two(method: MethodKind, p2p_max: usize) {
    let mut c = config(method);
    c.switch_points.bcast_p2p_max = p2p_max;
    let small = c.switch_points.small_max;
    let eager = c.eager_limit;
    job(2, c, move |agent| {
        let comm = Comm::world(&agent);
        let me = comm.rank();
        for len in [small - 1, small, small + 1, eager, eager + 1, (1 << 20) + 5] {
            for root in 0..2 {
                let want = msg(root * 100 + len as u32, len);
                let mut buf = if me == root {
                    want.clone()
                } else {
                    vec![0xEE; len]
                };
                comm.bcast(&mut buf, root).unwrap();
                assert!(buf == want, "bcast of {len} B from {root} at rank {me}");
            }
        }
    });
}

#[test]
fn bcast_two_ranks_around_switch_points_shm() {
    bcast_two(
        MethodKind::Shm,
        Config::default().switch_points.bcast_p2p_max,
    );
    bcast_two(MethodKind::Shm, 0);
}

#[test]
fn bcast_two_ranks_tcp() {
    bcast_two(
        MethodKind::Tcp,
        Config::default().switch_points.bcast_p2p_max,
    );
}

/// `bcast_in_place` and `bcast` on three ranks around a `bcast_p2p_max` of 10000 bytes.
#[test]
fn bcast_three_ranks_around_p2p_max_shm() {
    let max = 10_000;
    let mut c = config(MethodKind::Shm);
    c.switch_points.bcast_p2p_max = max;
    job(3, c, move |agent| {
        let comm = Comm::world(&agent);
        let me = comm.rank();
        for len in [max - 1, max, max + 1] {
            for root in [0, 2] {
                let want = msg(root * 10 + len as u32, len);
                let fresh = || {
                    if me == root {
                        want.clone()
                    } else {
                        vec![0xEE; len]
                    }
                };
                let out = Arc::new(Mutex::new(None));
                let probe = Probe {
                    data: fresh(),
                    out: Arc::clone(&out),
                };
                comm.bcast_in_place(probe, root).unwrap();
                let got = out.lock().unwrap().take();
                assert!(
                    got.as_ref() == Some(&want),
                    "bcast_in_place of {len} B from {root} at rank {me}"
                );
                let mut buf = fresh();
                comm.bcast(&mut buf, root).unwrap();
                assert!(buf == want, "bcast of {len} B from {root} at rank {me}");
            }
        }
    });
}

/// f64 contributions whose sum depends on the order of the additions.
fn floats(rank: u32, len: usize) -> Vec<u8> {
    (0..len / 8)
        .flat_map(|j| {
            let x = (j as f64 + 1.0) * 0.1 * f64::from(rank * 7 + 1) + 1e16 * f64::from(rank % 2);
            x.to_ne_bytes()
        })
        .collect()
}

/// The root's result of a reduce (f64 sum) of `len` bytes to `root` on `ranks` ranks with
/// small switch point `small`; checks that no other rank's buffer changed.
fn reduce_result(ranks: u32, small: usize, len: usize, root: u32) -> Vec<u8> {
    let mut c = config(MethodKind::Shm);
    c.switch_points.small_max = small;
    let out = job(ranks, c, move |agent| {
        let comm = Comm::world(&agent);
        let r = comm.rank();
        let mut buf = floats(r, len);
        comm.reduce(
            &mut buf,
            viaduct_agent::xfer::Datatype::F64,
            viaduct_agent::xfer::ReduceOp::Sum,
            root,
        )
        .unwrap();
        if r != root {
            assert!(buf == floats(r, len), "reduce changed rank {r}'s buffer");
        }
        buf
    });
    out[root as usize].clone()
}

/// Children of `vr` in a binomial tree of `n` ranks rooted at 0, largest subtree first.
fn children(vr: u32, n: u32) -> Vec<u32> {
    let mut mask = 1;
    while mask < n && vr & mask == 0 {
        mask <<= 1;
    }
    let mut out = Vec::new();
    let mut m = mask >> 1;
    while m > 0 {
        if vr + m < n {
            out.push(vr + m);
        }
        m >>= 1;
    }
    out
}

/// The f64 sum of the subtree of `vr` as the point-to-point reduce computes it: a rank's own
/// contribution, then each child's result added, smallest subtree first.
fn tree_sum(vr: u32, n: u32, root: u32, len: usize) -> Vec<f64> {
    let own = floats((vr + root) % n, len);
    let mut acc: Vec<f64> = own
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    for c in children(vr, n).into_iter().rev() {
        for (a, x) in acc.iter_mut().zip(tree_sum(c, n, root, len)) {
            *a += x;
        }
    }
    acc
}

/// The blocking reduce as point-to-point messages (up to the small switch point) adds in its
/// fixed order (exact bits), and the xfer reduce past it (and with the small switch point at
/// 0) adds up to the same sum, around the switch point, for several shapes of the tree.
#[test]
fn reduce_around_the_small_switch_point() {
    let small = Config::default().switch_points.small_max;
    for ranks in [2, 3, 5] {
        let root = ranks - 1;
        for len in [8, small - 8, small, small + 8] {
            let want = tree_sum(0, ranks, root, len);
            for small_max in [small, 0] {
                let got = reduce_result(ranks, small_max, len, root);
                let got: Vec<f64> = got
                    .chunks_exact(8)
                    .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
                    .collect();
                assert_eq!(got.len(), want.len());
                for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                    if len <= small_max {
                        assert!(
                            g.to_bits() == w.to_bits(),
                            "reduce of {len} B on {ranks} ranks, element {j}: {g} vs {w}"
                        );
                    } else {
                        assert!(
                            (g - w).abs() <= 8.0,
                            "reduce of {len} B on {ranks} ranks (xfer), element {j}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }
}

/// `allgather` and `allgather_in_place` on two ranks (one exchange of the two parts at every
/// length) and, for the same lengths, on three ranks (xfer blocks past the small switch point),
/// checked against every rank's part.
fn allgather_at(method: MethodKind, ranks: u32) {
    let c = config(method);
    let small = c.switch_points.small_max;
    let eager = c.eager_limit;
    job(ranks, c, move |agent| {
        let comm = Comm::world(&agent);
        let (me, n) = (comm.rank(), comm.size());
        for len in [
            1,
            small / 2,
            small / 2 + 1,
            small,
            eager,
            eager + 1,
            (1 << 20) + 3,
        ] {
            let want: Vec<u8> = (0..n).flat_map(|r| part(r, 99, len)).collect();
            let mut all = vec![0xEE; len * n as usize];
            comm.allgather(&part(me, 99, len), &mut all).unwrap();
            assert!(
                all == want,
                "allgather of {len} B parts at rank {me} of {n}"
            );
            let mut buf = vec![0xEE; len * n as usize];
            let at = me as usize * len;
            buf[at..at + len].copy_from_slice(&part(me, 99, len));
            comm.allgather_in_place(&mut buf).unwrap();
            assert!(
                buf == want,
                "allgather in place of {len} B parts at rank {me} of {n}"
            );
        }
    });
}

#[test]
fn allgather_two_ranks_shm() {
    allgather_at(MethodKind::Shm, 2);
}

#[test]
fn allgather_two_ranks_tcp() {
    allgather_at(MethodKind::Tcp, 2);
}

#[test]
fn allgather_three_ranks_shm() {
    allgather_at(MethodKind::Shm, 3);
}
