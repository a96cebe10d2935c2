//! Nonblocking collectives overlapped with point-to-point traffic on the same communicator:
//! user receives with any source and any tag never take a collective's messages, and a
//! collective progresses while only an unrelated point-to-point request is waited on. Over
//! `shm` (5 ranks) and `tcp` (3 ranks).

mod agent_common;

use std::time::{Duration, Instant};

use agent_common::{config, job};
use viaduct_agent::comm::Comm;
use viaduct_agent::config::MethodKind;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, wait_all};
use viaduct_agent::xfer::{Datatype, ReduceOp, Reduction};

const LIMIT: Duration = Duration::from_secs(60);

fn overlap(method: MethodKind, n: u32) {
    job(n, config(method), |agent| {
        let comm = Comm::world(&agent);
        let (r, n) = (comm.rank(), comm.size());
        let len = 256 << 10;
        let mine: Vec<u8> = (0..len / 8)
            .flat_map(|j| (j as u64 + u64::from(r)).to_ne_bytes())
            .collect();
        let sum = Reduction::Builtin(Datatype::U64, ReduceOp::Sum);
        let (mut ar, mut ar_buf) = comm.iallreduce(mine, &sum).unwrap();
        let (mut bc, mut bc_buf) = comm
            .ibcast(
                if r == 1 {
                    vec![7; 10_000]
                } else {
                    vec![0; 10_000]
                },
                1,
            )
            .unwrap();
        let (mut ag, mut ag_buf) = comm.iallgather(vec![r as u8; 3]).unwrap();
        let mut bar = comm.ibarrier().unwrap();

        // User traffic around a ring, with wildcard receives.
        let right = (r + 1) % n;
        const ROUNDS: u32 = 50;
        let mut sends: Vec<Request> = Vec::new();
        for i in 0..ROUNDS {
            let msg = [r.to_le_bytes(), i.to_le_bytes()].concat();
            sends.push(comm.isend(right, 100 + i, &msg).unwrap());
        }
        let left = (r + n - 1) % n;
        for i in 0..ROUNDS {
            let mut buf = [0u8; 16];
            let st = comm.recv(&mut buf, Source::Any, TagMatch::Any).unwrap();
            assert_eq!(st.count(), 8, "a user receive took a collective's message");
            assert_eq!((st.source(), st.tag()), (Some(left), Some(100 + i)));
            assert_eq!(
                &buf[..8],
                &[left.to_le_bytes(), i.to_le_bytes()].concat()[..]
            );
        }
        wait_all(&mut sends, None).unwrap();

        // Only an unrelated receive is waited on from here; the collectives still finish.
        let (mut idle, _) = comm.irecv(1, Source::Any, TagMatch::Tag(999)).unwrap();
        let deadline = Instant::now() + LIMIT;
        while !(ar.is_complete() && bc.is_complete() && ag.is_complete() && bar.is_complete()) {
            assert!(Instant::now() < deadline, "collectives did not progress");
            assert!(
                idle.wait_timeout(Duration::from_millis(2))
                    .unwrap()
                    .is_none()
            );
        }
        idle.cancel().unwrap();
        assert!(idle.wait().unwrap().test_cancelled());

        ar.wait().unwrap();
        bc.wait().unwrap();
        ag.wait().unwrap();
        bar.wait().unwrap();
        let total = ar_buf.take().unwrap();
        let tri = u64::from(n * (n - 1) / 2);
        for (j, c) in total.chunks_exact(8).enumerate() {
            assert_eq!(
                u64::from_ne_bytes(c.try_into().unwrap()),
                j as u64 * u64::from(n) + tri
            );
        }
        assert_eq!(bc_buf.take().unwrap(), vec![7; 10_000]);
        let all: Vec<u8> = (0..n).flat_map(|i| [i as u8; 3]).collect();
        assert_eq!(ag_buf.take().unwrap(), all);
        comm.barrier().unwrap();
    });
}

#[test]
fn overlap_shm() {
    overlap(MethodKind::Shm, 5);
}

#[test]
fn overlap_tcp() {
    overlap(MethodKind::Tcp, 3);
}
