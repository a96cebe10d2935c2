//! A broadcast and an allreduce written on point-to-point messages ([`PointToPoint`]: the
//! demo's own mesh of method endpoints, or the agent): binomial trees, correct for any number
//! of ranks.
//!
//! These are the demo's own collectives, built from sends and receives; they show the methods
//! carrying a collective's traffic pattern, not an optimized collective library. The allreduce
//! is a binomial reduce to rank 0 followed by a binomial broadcast (2 log2(N) steps).

use super::error::DemoError;
use super::p2p::PointToPoint;

/// Tag space of the broadcast (the low bits carry a sequence number).
const BCAST: u64 = 1 << 40;
/// Tag space of the reduce.
const REDUCE: u64 = 2 << 40;

/// The rank `vr` steps away from `root`, and back.
fn real(vr: u32, root: u32, size: u32) -> u32 {
    (vr + root) % size
}

/// Broadcasts `buf` from `root` to every rank (every rank passes a buffer of the same length).
/// `seq` tells this broadcast's messages from other ones.
pub fn broadcast<P: PointToPoint>(
    mesh: &mut P,
    root: u32,
    buf: &mut [u8],
    seq: u32,
) -> Result<(), DemoError> {
    let (rank, size) = (mesh.rank(), mesh.size());
    let tag = BCAST | u64::from(seq);
    let vr = (rank + size - root) % size;
    let mut mask = 1u32;
    while mask < size {
        if vr & mask != 0 {
            mesh.recv_into(real(vr - mask, root, size), tag, buf)?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < size {
            mesh.send(real(vr + mask, root, size), tag, buf)?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// Sums `data` element-wise over all ranks onto `root` (other ranks' `data` is left partial).
pub fn reduce_sum<P: PointToPoint>(
    mesh: &mut P,
    root: u32,
    data: &mut [f64],
    seq: u32,
) -> Result<(), DemoError> {
    let (rank, size) = (mesh.rank(), mesh.size());
    let tag = REDUCE | u64::from(seq);
    let vr = (rank + size - root) % size;
    let mut mask = 1u32;
    let mut bytes = vec![0u8; data.len() * 8];
    while mask < size {
        if vr & mask == 0 {
            let src = vr | mask;
            if src < size {
                mesh.recv_into(real(src, root, size), tag, &mut bytes)?;
                for (d, b) in data.iter_mut().zip(bytes.chunks_exact(8)) {
                    *d += f64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
                }
            }
        } else {
            encode(data, &mut bytes);
            mesh.send(real(vr & !mask, root, size), tag, &bytes)?;
            break;
        }
        mask <<= 1;
    }
    Ok(())
}

/// Sums `data` element-wise over all ranks; every rank gets the sum.
pub fn allreduce_sum<P: PointToPoint>(
    mesh: &mut P,
    data: &mut [f64],
    seq: u32,
) -> Result<(), DemoError> {
    reduce_sum(mesh, 0, data, seq)?;
    let mut bytes = vec![0u8; data.len() * 8];
    encode(data, &mut bytes);
    broadcast(mesh, 0, &mut bytes, seq)?;
    for (d, b) in data.iter_mut().zip(bytes.chunks_exact(8)) {
        *d = f64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    }
    Ok(())
}

fn encode(data: &[f64], bytes: &mut [u8]) {
    for (d, b) in data.iter().zip(bytes.chunks_exact_mut(8)) {
        b.copy_from_slice(&d.to_le_bytes());
    }
}
