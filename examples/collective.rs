//! Collectives through the viaduct agent, between the ranks of a job started by
//! `viaduct launch -n N -- collective` or MPICH's `mpiexec -n N collective`.
//!
//! Every rank, checking every result against what it computes on its own:
//!
//! 1. broadcasts 1 MiB from rank 0 (`Comm::bcast`),
//! 2. sums one i64 per rank with `allreduce` (the sum of 1..=N on every rank),
//! 3. finds the largest value and the rank holding it with a **user reduction** on 16-byte
//!    (value, rank) elements, the `MPI_MAXLOC` of MPI,
//! 4. splits the job into even and odd ranks (`Comm::split`) and gathers every member's world
//!    rank with `allgather` inside its half,
//! 5. starts a nonblocking `iallreduce` of 64 Ki f64, passes a token around a ring of
//!    point-to-point messages while it runs, then waits for it.
//!
//! Each rank prints one line and exits 0; any failure prints the error and exits 1:
//!
//! ```text
//! collective: rank R of N ok: bcast 1048576 B, allreduce, maxloc, split (even|odd of K), iallreduce + ring
//! ```

use std::process::ExitCode;

use viaduct_agent::agent::Agent;
use viaduct_agent::comm::Comm;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::xfer::{Datatype, ReduceOp, Reduction};

type BoxError = Box<dyn std::error::Error>;

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), BoxError> {
    if ok { Ok(()) } else { Err(what().into()) }
}

fn bcast(world: &Comm) -> Result<usize, BoxError> {
    let len = 1 << 20;
    let expect: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let mut buf = if world.rank() == 0 {
        expect.clone()
    } else {
        vec![0u8; len]
    };
    world.bcast(&mut buf, 0)?;
    check(buf == expect, || {
        "bcast: the buffer differs from rank 0's".into()
    })?;
    Ok(len)
}

fn allreduce(world: &Comm) -> Result<(), BoxError> {
    let n = i64::from(world.size());
    let mut v = (i64::from(world.rank()) + 1).to_ne_bytes();
    world.allreduce(&mut v, Datatype::I64, ReduceOp::Sum)?;
    let got = i64::from_ne_bytes(v);
    check(got == n * (n + 1) / 2, || {
        format!("allreduce: sum is {got}, expected {}", n * (n + 1) / 2)
    })
}

/// (value, rank) pairs as 16 bytes; the larger value wins, the lower rank on a tie.
fn maxloc(world: &Comm) -> Result<(), BoxError> {
    let value = |r: u32| f64::from((r * 37) % 11);
    let mut elem = [0u8; 16];
    elem[..8].copy_from_slice(&value(world.rank()).to_ne_bytes());
    elem[8..].copy_from_slice(&u64::from(world.rank()).to_ne_bytes());
    let red = Reduction::user(16, |incoming, acc| {
        for (i, a) in incoming.chunks_exact(16).zip(acc.chunks_exact_mut(16)) {
            let vi = f64::from_ne_bytes(i[..8].try_into().unwrap_or_default());
            let va = f64::from_ne_bytes(a[..8].try_into().unwrap_or_default());
            let ri = u64::from_ne_bytes(i[8..].try_into().unwrap_or_default());
            let ra = u64::from_ne_bytes(a[8..].try_into().unwrap_or_default());
            if vi > va || (vi == va && ri < ra) {
                a.copy_from_slice(i);
            }
        }
    });
    world.allreduce_with(&mut elem, &red)?;
    let (mut best, mut at) = (f64::MIN, 0u32);
    for r in 0..world.size() {
        if value(r) > best {
            (best, at) = (value(r), r);
        }
    }
    let got_v = f64::from_ne_bytes(elem[..8].try_into()?);
    let got_r = u64::from_ne_bytes(elem[8..].try_into()?);
    check(got_v == best && got_r == u64::from(at), || {
        format!("maxloc: got ({got_v}, {got_r}), expected ({best}, {at})")
    })
}

fn split(world: &Comm) -> Result<(u32, u32), BoxError> {
    let color = world.rank() % 2;
    let half = world
        .split(Some(color), world.rank() as i32)?
        .ok_or("split: a rank with a color got no communicator")?;
    let mine = world.rank().to_ne_bytes();
    let mut all = vec![0u8; 4 * half.size() as usize];
    half.allgather(&mine, &mut all)?;
    let got: Vec<u32> = all
        .chunks_exact(4)
        .map(|c| u32::from_ne_bytes(c.try_into().unwrap_or_default()))
        .collect();
    let expect: Vec<u32> = (0..world.size()).filter(|r| r % 2 == color).collect();
    check(got == expect, || {
        format!("split: half {color} gathered {got:?}, expected {expect:?}")
    })?;
    Ok((color, half.size()))
}

fn overlap(world: &Comm) -> Result<(), BoxError> {
    let n = world.size();
    let (me, elems) = (world.rank(), 64 * 1024);
    let mut data = Vec::with_capacity(elems * 8);
    for i in 0..elems {
        data.extend_from_slice(&((i as f64) + f64::from(me)).to_ne_bytes());
    }
    let sum = Reduction::Builtin(Datatype::F64, ReduceOp::Sum);
    let (mut request, mut result) = world.iallreduce(data, &sum)?;
    // A token once around the ring while the allreduce is in flight.
    if n > 1 {
        let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
        let mut token = [0u8; 4];
        if me == 0 {
            world.send(next, 9, &1u32.to_ne_bytes())?;
            world.recv(&mut token, Source::Rank(prev), TagMatch::Tag(9))?;
            let hops = u32::from_ne_bytes(token);
            check(hops == n, || {
                format!("ring: token made {hops} hops, expected {n}")
            })?;
        } else {
            world.recv(&mut token, Source::Rank(prev), TagMatch::Tag(9))?;
            let hops = u32::from_ne_bytes(token) + 1;
            world.send(next, 9, &hops.to_ne_bytes())?;
        }
    }
    request.wait()?;
    let out = result
        .take()
        .ok_or("iallreduce: no result after completion")?;
    let ranks = f64::from(n);
    let base = f64::from(n * (n - 1) / 2);
    for (i, c) in out.chunks_exact(8).enumerate() {
        let got = f64::from_ne_bytes(c.try_into()?);
        let expect = (i as f64) * ranks + base;
        check(got == expect, || {
            format!("iallreduce: element {i} is {got}, expected {expect}")
        })?;
    }
    Ok(())
}

fn run() -> Result<String, BoxError> {
    let agent = Agent::init()?;
    let world = Comm::world(&agent);
    let len = bcast(&world)?;
    allreduce(&world)?;
    maxloc(&world)?;
    let (color, half) = split(&world)?;
    overlap(&world)?;
    let line = format!(
        "collective: rank {} of {} ok: bcast {len} B, allreduce, maxloc, split ({} of {half}), iallreduce + ring",
        world.rank(),
        world.size(),
        if color == 0 { "even" } else { "odd" }
    );
    drop(world);
    agent.finalize()?;
    Ok(line)
}

fn main() -> ExitCode {
    // The library's warnings on stderr, filtered by VIADUCT_LOG (default: warnings).
    viaduct::agent::log::install_subscriber();
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let rank = std::env::var("PMI_RANK").unwrap_or_else(|_| "?".into());
            eprintln!("collective: rank {rank}: {e}");
            ExitCode::FAILURE
        }
    }
}
