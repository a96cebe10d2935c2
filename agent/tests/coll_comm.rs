//! Communicators: `dup` and `split` give fresh contexts whose messages never match another
//! communicator's, ranks and statuses in communicator ranks, collectives on the new
//! communicators; `create_group` among a subset only, while the others build their own; the
//! limit of live communicators, refused on every member alike; threads of every rank creating
//! communicators at once from parents of their own never share a context, and a creation
//! waiting for a busy member never keeps another from completing.
//! Over `shm` with 5 ranks and `tcp` with 3.

mod agent_common;

use agent_common::{config, job};
use viaduct_agent::comm::{Comm, MAX_LIVE_COMMS};
use viaduct_agent::config::MethodKind;
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::xfer::{Datatype, ReduceOp};

fn comms(method: MethodKind, n: u32) {
    job(n, config(method), |agent| {
        let world = Comm::world(&agent);
        let (r, n) = (world.rank(), world.size());
        let dup = world.dup().unwrap();
        assert_eq!((dup.rank(), dup.size()), (r, n));
        assert_ne!(dup.p2p_context(), world.p2p_context());
        assert_ne!(dup.coll_context(), world.coll_context());
        assert_ne!(dup.p2p_context(), dup.coll_context());

        // The same tag on two communicators: the message sent first (on the world) is not
        // taken by a wildcard receive on the duplicate.
        let right = (r + 1) % n;
        let left = (r + n - 1) % n;
        world.send(right, 1, b"world").unwrap();
        dup.send(right, 1, b"dup").unwrap();
        let mut b = [0u8; 8];
        let st = dup.recv(&mut b, Source::Any, TagMatch::Any).unwrap();
        assert_eq!(
            (&b[..3], st.source(), st.count()),
            (&b"dup"[..], Some(left), 3)
        );
        let st = world.recv(&mut b, Source::Any, TagMatch::Any).unwrap();
        assert_eq!((&b[..5], st.source()), (&b"world"[..], Some(left)));

        // Split into evens and odds, ranks reversed by the key; the last rank stays out.
        let color = (r + 1 < n).then_some(r % 2);
        let sub = world.split(color, -(r as i32)).unwrap();
        assert_eq!(sub.is_some(), r + 1 < n);
        if let Some(sub) = &sub {
            let members: Vec<u32> = (0..n - 1).filter(|w| w % 2 == r % 2).rev().collect();
            assert_eq!(sub.size() as usize, members.len());
            assert_eq!(sub.world_rank(sub.rank()), Some(r));
            for (i, w) in members.iter().enumerate() {
                assert_eq!(sub.world_rank(i as u32), Some(*w));
            }
            assert_ne!(sub.p2p_context(), world.p2p_context());
            assert_ne!(sub.p2p_context(), dup.p2p_context());
            let mut x = u64::from(r).to_ne_bytes().to_vec();
            sub.allreduce(&mut x, Datatype::U64, ReduceOp::Sum).unwrap();
            let want: u64 = members.iter().map(|&w| u64::from(w)).sum();
            assert_eq!(x, want.to_ne_bytes());
            if sub.size() > 1 {
                // Statuses name communicator ranks.
                let to = (sub.rank() + 1) % sub.size();
                let from = (sub.rank() + sub.size() - 1) % sub.size();
                sub.send(to, 9, &[sub.rank() as u8]).unwrap();
                let st = sub.recv(&mut b, Source::Any, TagMatch::Tag(9)).unwrap();
                assert_eq!((st.source(), b[0]), (Some(from), from as u8));
            }
            // A split of the split, and a dup of it: fresh contexts again.
            let half = sub.split(Some(0), 0).unwrap().unwrap();
            assert_eq!(half.size(), sub.size());
            assert_ne!(half.p2p_context(), sub.p2p_context());
            half.barrier().unwrap();
        }
        let again = world.dup().unwrap();
        if let Some(sub) = &sub {
            assert_ne!(again.p2p_context(), sub.p2p_context());
        }
        let mut v = vec![r as u8; 5];
        again.bcast(&mut v, n - 1).unwrap();
        assert_eq!(v, vec![(n - 1) as u8; 5]);
        world.barrier().unwrap();
    });
}

#[test]
fn comms_shm() {
    comms(MethodKind::Shm, 5);
}

#[test]
fn comms_tcp() {
    comms(MethodKind::Tcp, 3);
}

/// `create_group`: the even ranks build a communicator (reversed order) without the odd ranks
/// taking part, while the odd ranks build theirs with another tag; its contexts are fresh,
/// collectives run on it, and a later `dup` of the world does not reuse its contexts.
fn groups(method: MethodKind, n: u32) {
    job(n, config(method), move |agent| {
        let world = Comm::world(&agent);
        let r = world.rank();
        let mine: Vec<u32> = (0..n).filter(|w| w % 2 == r % 2).rev().collect();
        let g = world
            .create_group(&mine, 7 + r % 2)
            .unwrap()
            .expect("a member gets the communicator");
        assert_eq!(g.size() as usize, mine.len());
        assert_eq!(g.world_rank(g.rank()), Some(r));
        for (i, w) in mine.iter().enumerate() {
            assert_eq!(g.world_rank(i as u32), Some(*w));
        }
        assert_ne!(g.p2p_context(), world.p2p_context());
        let mut x = u64::from(r).to_ne_bytes().to_vec();
        g.allreduce(&mut x, Datatype::U64, ReduceOp::Sum).unwrap();
        let want: u64 = mine.iter().map(|&w| u64::from(w)).sum();
        assert_eq!(x, want.to_ne_bytes());
        // Not a member: no communicator, nothing exchanged.
        let others: Vec<u32> = (0..n).filter(|w| w % 2 != r % 2).collect();
        if !others.is_empty() {
            assert!(world.create_group(&others, 9).unwrap().is_none());
        }
        // A rank given twice is refused.
        assert!(world.create_group(&[r, r], 10).is_err());
        let d = world.dup().unwrap();
        assert_ne!(d.p2p_context(), g.p2p_context());
        world.barrier().unwrap();
    });
}

#[test]
fn create_group_shm() {
    groups(MethodKind::Shm, 5);
}

#[test]
fn create_group_tcp() {
    groups(MethodKind::Tcp, 3);
}

/// The limit of live communicators: rank 0 alone fills it with duplicates of a communicator
/// of its own, after which a duplicate of the world fails on every rank alike (none is made);
/// once rank 0 dropped its duplicates, the world's duplicate succeeds everywhere.
fn live_limit(method: MethodKind, n: u32) {
    job(n, config(method), |agent| {
        let world = Comm::world(&agent);
        let r = world.rank();
        let own = world.split(Some(r), 0).unwrap().expect("colored");
        let mut kept = Vec::new();
        if r == 0 {
            while let Ok(c) = own.dup() {
                kept.push(c);
            }
            assert!(kept.len() < MAX_LIVE_COMMS as usize);
        }
        assert!(matches!(world.dup(), Err(AgentError::ContextsExhausted)));
        drop(kept);
        let d = world.dup().unwrap();
        d.barrier().unwrap();
    });
}

#[test]
fn live_limit_shm() {
    live_limit(MethodKind::Shm, 3);
}

/// Intercommunicators over the world split into evens and odds: fresh contexts unused by the
/// members' other communicators, point-to-point with remote ranks and statuses naming them,
/// a duplicate whose messages stay apart, and merges (by `high`, and on a tie by the leaders'
/// world ranks) on which a collective runs.
fn intercomms(method: MethodKind, n: u32) {
    job(n, config(method), move |agent| {
        let world = Comm::world(&agent);
        let r = world.rank();
        let color = r % 2;
        let local = world.split(Some(color), r as i32).unwrap().unwrap();
        let other = world.dup().unwrap();
        let ic = local
            .intercomm_create(0, Some(&world), 1 - color, 7)
            .unwrap();
        let mine: Vec<u32> = (0..n).filter(|w| w % 2 == color).collect();
        let theirs: Vec<u32> = (0..n).filter(|w| w % 2 != color).collect();
        assert_eq!(ic.local.world_ranks(), &mine[..]);
        assert_eq!(ic.remote.world_ranks(), &theirs[..]);
        assert_eq!(ic.local.rank(), r / 2);
        let used = [
            world.p2p_context(),
            world.coll_context(),
            local.p2p_context(),
            local.coll_context(),
            other.p2p_context(),
            other.coll_context(),
        ];
        let fresh = [
            ic.remote.p2p_context(),
            ic.coll.p2p_context(),
            ic.local.p2p_context(),
            ic.local.coll_context(),
        ];
        for c in fresh {
            assert!(
                !used.contains(&c),
                "context {c} of the intercommunicator is in use"
            );
        }
        let mut sorted = fresh.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 4);

        // Every rank sends to remote rank 0; remote rank 0 receives from any source.
        let dup = ic.dup().unwrap();
        assert_ne!(dup.remote.p2p_context(), ic.remote.p2p_context());
        dup.remote.send(0, 3, &[1]).unwrap();
        ic.remote.send(0, 3, &[r as u8]).unwrap();
        if ic.local.rank() == 0 {
            let mut seen = Vec::new();
            for _ in 0..theirs.len() {
                let mut b = [0u8; 1];
                let st = ic
                    .remote
                    .recv(&mut b, Source::Any, TagMatch::Tag(3))
                    .unwrap();
                let src = st.source().unwrap();
                assert_eq!(theirs[src as usize], u32::from(b[0]));
                seen.push(src);
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..theirs.len() as u32).collect::<Vec<_>>());
            for _ in 0..theirs.len() {
                let mut b = [0u8; 1];
                dup.remote
                    .recv(&mut b, Source::Any, TagMatch::Tag(3))
                    .unwrap();
                assert_eq!(b, [1]);
            }
        }

        // Merge by high: odds first; then a tie: the evens (leader world rank 0) first.
        for (high, odds_first) in [(color == 0, true), (false, false)] {
            let m = ic.merge(high).unwrap();
            let evens = (0..n).filter(|w| w % 2 == 0);
            let odds = (0..n).filter(|w| w % 2 == 1);
            let want: Vec<u32> = if odds_first {
                odds.chain(evens).collect()
            } else {
                evens.chain(odds).collect()
            };
            assert_eq!(m.world_ranks(), &want[..]);
            let mut x = u64::from(r).to_ne_bytes().to_vec();
            m.allreduce(&mut x, Datatype::U64, ReduceOp::Sum).unwrap();
            assert_eq!(x, u64::from(n * (n - 1) / 2).to_ne_bytes());
        }
    });
}

#[test]
fn intercomm_shm() {
    intercomms(MethodKind::Shm, 5);
}

#[test]
fn intercomm_tcp() {
    intercomms(MethodKind::Tcp, 3);
}

/// Threads of every rank create communicators at once, each from a parent of its own
/// (`dup`, `split`, `create_group`, `intercomm_create`, `Intercomm::dup` and `merge`, as
/// MPICH's `idup_comm_gen` under `MPI_THREAD_MULTIPLE`): no two communicators a rank is a
/// member of ever get the same context, and every one of them works (an allreduce of the
/// members' world ranks).
fn concurrent_creations(method: MethodKind, n: u32, threads: u32, rounds: u32) {
    job(n, config(method), move |agent| {
        let world = Comm::world(&agent);
        let r = world.rank();
        let parents: Vec<Comm> = (0..threads).map(|_| world.dup().unwrap()).collect();
        let sum = |c: &Comm| {
            let mut x = u64::from(r).to_ne_bytes().to_vec();
            c.allreduce(&mut x, Datatype::U64, ReduceOp::Sum).unwrap();
            let want: u64 = c.world_ranks().iter().map(|&w| u64::from(w)).sum();
            assert_eq!(x, want.to_ne_bytes(), "allreduce on a new communicator");
        };
        let made: Vec<Vec<u32>> = std::thread::scope(|s| {
            let handles: Vec<_> = parents
                .iter()
                .enumerate()
                .map(|(t, parent)| {
                    s.spawn(move || {
                        let mut contexts = Vec::new();
                        // The leaders meet over a communicator whose ranks are the world's
                        // reversed.
                        let peer = parent.split(Some(0), (n - r) as i32).unwrap().unwrap();
                        assert_eq!(peer.rank(), n - 1 - r);
                        contexts.push(peer.p2p_context());
                        for _ in 0..rounds {
                            let d = parent.dup().unwrap();
                            sum(&d);
                            contexts.push(d.p2p_context());
                            let half = parent.split(Some(r % 2), (n - r) as i32).unwrap().unwrap();
                            sum(&half);
                            contexts.push(half.p2p_context());
                            let high: Vec<u32> = (n / 2..n).collect();
                            if let Some(g) = parent.create_group(&high, t as u32).unwrap() {
                                sum(&g);
                                contexts.push(g.p2p_context());
                            }
                            let local = parent
                                .split(Some(u32::from(r < n / 2)), r as i32)
                                .unwrap()
                                .unwrap();
                            contexts.push(local.p2p_context());
                            let leader = if r < n / 2 { n / 2 } else { 0 };
                            let ic = local
                                .intercomm_create(0, Some(&peer), n - 1 - leader, 99)
                                .unwrap();
                            contexts.push(ic.remote.p2p_context());
                            contexts.push(ic.local.p2p_context());
                            let icd = ic.dup().unwrap();
                            contexts.push(icd.remote.p2p_context());
                            contexts.push(icd.local.p2p_context());
                            let m = ic.merge(r < n / 2).unwrap();
                            sum(&m);
                            contexts.push(m.p2p_context());
                        }
                        contexts
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<u32> = made.into_iter().flatten().collect();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(
            all.len(),
            count,
            "rank {r}: two communicators made at once share a context"
        );
    });
}

#[test]
fn concurrent_creations_shm() {
    concurrent_creations(MethodKind::Shm, 4, 4, 5);
}

#[test]
fn concurrent_creations_tcp() {
    concurrent_creations(MethodKind::Tcp, 3, 3, 3);
}

/// A creation waiting for a member that makes another communicator first never keeps that
/// other creation from completing: rank 0 makes `x` and `y` (and a duplicate of a one-member
/// communicator, as `MPI_Comm_dup(MPI_COMM_SELF)`) on three threads at once, while rank 1
/// makes `y` first and `x` only after it.
fn creation_waits_for_nobody(method: MethodKind) {
    job(2, config(method), move |agent| {
        let world = Comm::world(&agent);
        let r = world.rank();
        let x = world.dup().unwrap();
        let y = world.dup().unwrap();
        let alone = world.split(Some(r), 0).unwrap().unwrap();
        let made = if r == 0 {
            std::thread::scope(|s| {
                let a = s.spawn(|| x.dup().unwrap().p2p_context());
                let b = s.spawn(|| {
                    let one = alone.dup().unwrap().p2p_context();
                    (one, y.dup().unwrap().p2p_context())
                });
                let (one, yd) = b.join().unwrap();
                vec![a.join().unwrap(), one, yd]
            })
        } else {
            let yd = y.dup().unwrap().p2p_context();
            let one = alone.dup().unwrap().p2p_context();
            vec![x.dup().unwrap().p2p_context(), one, yd]
        };
        let mut distinct = made.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "rank {r}: contexts {made:?}");
    });
}

#[test]
fn creation_waits_for_nobody_shm() {
    creation_waits_for_nobody(MethodKind::Shm);
}
