//! User-level failure mitigation, MPICH's `MPIX_` names: `MPIX_Comm_revoke`,
//! `MPIX_Comm_shrink`, `MPIX_Comm_agree`, `MPIX_Comm_failure_ack`,
//! `MPIX_Comm_failure_get_acked`.
//!
//! A process learns that a peer failed from the agent: a wait on a dead peer ends with a
//! peer failure (class `MPIX_ERR_PROC_FAILED`), after which `Agent::connect` reports that
//! peer's VC failed. The agreements of shrink and agree run on a control context of their
//! own (never matched by the program's messages, and usable on a revoked communicator): every
//! live member sends every member it does not know failed its failed set (and agree's flag),
//! and receives from each; a receive that ends with a peer failure adds that peer. Two such
//! rounds make every survivor hold the same set when no process fails during the call.
//!
//! A revoke marks the communicator here and sends a notice to every other member on a second
//! control context, where each process keeps a receive posted from the runtime's start
//! ([`listen`]; its handler marks the communicator when the agent's progress took the notice
//! in). A later call on a revoked communicator fails with `MPIX_ERR_REVOKED`, except the local
//! calls (rank, size, free, names, error handlers, ...) and shrink, agree and the failure
//! calls; an operation already waiting is not ended by the notice.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use viaduct_agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Condition, Deadline, HandlerFn, Request};

use crate::abi::{self, Handle, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::state::{CommEntry, rt};

/// `MPIX_ERR_REVOKED`.
pub const ERR_REVOKED: c_int = 103;

/// Context bit of the control contexts (above every communicator's context id, below the
/// partitioned requests' bit).
const CONTROL_BIT: u32 = 1 << 30;
/// Control context of revoke notices (the tag is the revoked communicator's context).
const REVOKE_CONTEXT: u32 = CONTROL_BIT;
/// Control context of the shrink and agree rounds (the tag is the communicator's context).
const AGREE_CONTEXT: u32 = CONTROL_BIT | 1;
/// The body of a revoke notice (the tag names the communicator).
const NOTICE: [u8; 1] = [1];
/// Rounds of an agreement.
const ROUNDS: u32 = 2;

/// Whether some communicator was revoked (here or by a notice): lookups then check theirs.
static ANY_REVOKED: AtomicBool = AtomicBool::new(false);

/// The pending receive of revoke notices.
static LISTENER: Mutex<Option<Request>> = Mutex::new(None);

/// What this process knows: failed world ranks, revoked contexts, acknowledged failures.
#[derive(Default)]
struct Known {
    failed: BTreeSet<u32>,
    revoked: HashSet<u32>,
    /// Communicator context -> the world ranks acknowledged failed on it.
    acked: HashMap<u32, BTreeSet<u32>>,
}

fn known() -> MutexGuard<'static, Known> {
    static K: OnceLock<Mutex<Known>> = OnceLock::new();
    K.get_or_init(|| Mutex::new(Known::default()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Posts the receive of the next revoke notice, from any process (at the runtime's start and
/// after each notice). Its handler, on the request handlers' thread, marks the communicator
/// revoked as soon as the agent's progress (any call of any thread) took the notice in; at
/// finalize the receive fails and is not posted again.
pub fn listen(agent: &Agent) {
    let ctl = agent.with_context(REVOKE_CONTEXT);
    let Ok((req, _buf)) = ctl.irecv(NOTICE.len(), Source::Any, TagMatch::Any) else {
        return;
    };
    let again = agent.clone();
    let handler = HandlerFn::new(move |_, st| {
        let done = LISTENER.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut r) = done {
            let _ = r.wait();
        }
        if st.error().is_some() || st.test_cancelled() {
            return;
        }
        if let Some(ctx) = st.tag() {
            known().revoked.insert(ctx);
            ANY_REVOKED.store(true, Ordering::Release);
        }
        listen(&again);
    });
    // The slot is held while posting: a handler that runs at once waits for the request.
    let mut slot = LISTENER.lock().unwrap_or_else(|e| e.into_inner());
    let posted = req.post_handler(Condition::Complete, Some(handler), None, Deadline::Asap);
    if posted.is_ok() {
        *slot = Some(req);
    }
}

/// `Err` with `MPIX_ERR_REVOKED` when communicator `c` was revoked (here or by a notice that
/// arrived); one atomic load while no communicator was revoked.
pub fn check(c: &CommEntry) -> Result<(), MpiError> {
    if !ANY_REVOKED.load(Ordering::Acquire) {
        return Ok(());
    }
    if known().revoked.contains(&c.comm.p2p_context()) {
        return Err(MpiError::new(ERR_REVOKED, "the communicator was revoked"));
    }
    Ok(())
}

/// The intracommunicator `h` for a ULFM call (revoked or not).
fn entry(h: Handle) -> Result<std::sync::Arc<CommEntry>, MpiError> {
    let c = rt()?.comm_local(h)?;
    if c.inter.is_some() {
        return Err(MpiError::new(
            err::UNSUPPORTED_OPERATION,
            format!("{h:#x} is an intercommunicator; the ULFM calls take intracommunicators here"),
        ));
    }
    Ok(c)
}

/// The members of `c` whose VC failed, with those known failed (world ranks).
fn failed_members(c: &CommEntry) -> BTreeSet<u32> {
    let agent = c.comm.agent();
    let mut k = known();
    for &w in c.comm.world_ranks() {
        if agent.connect(w).is_err() {
            k.failed.insert(w);
        }
    }
    c.comm
        .world_ranks()
        .iter()
        .copied()
        .filter(|w| k.failed.contains(w))
        .collect()
}

/// The agreement over the live members of `c`: the failed members and the AND of `flag`.
fn agree_over(c: &CommEntry, mut flag: u32) -> Result<(BTreeSet<u32>, u32), MpiError> {
    let agent = c.comm.agent();
    let me = agent.rank();
    let ctl = agent.with_context(AGREE_CONTEXT);
    let tag = c.comm.p2p_context();
    let mut failed = failed_members(c);
    for _ in 0..ROUNDS {
        let peers: Vec<u32> = c
            .comm
            .world_ranks()
            .iter()
            .copied()
            .filter(|w| *w != me && !failed.contains(w))
            .collect();
        let mut words = vec![flag];
        words.extend(failed.iter().copied());
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let cap = 4 * (c.comm.size() as usize + 1);
        let mut recvs = Vec::new();
        for &w in &peers {
            recvs.push((w, ctl.irecv(cap, Source::Rank(w), TagMatch::Tag(tag))?));
        }
        let mut sends = Vec::new();
        for &w in &peers {
            sends.push(ctl.isend(w, tag, &bytes)?);
        }
        let mut found = failed.clone();
        for (w, (mut req, buf)) in recvs {
            match req.wait() {
                Ok(_) => {
                    let v = buf.take();
                    let mut it = v
                        .chunks_exact(4)
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                    flag &= it.next().unwrap_or(u32::MAX);
                    found.extend(it);
                }
                Err(_) => {
                    found.insert(w);
                }
            }
        }
        for mut s in sends {
            // A send to a peer that died during the round fails; the receive said so.
            let _ = s.wait();
        }
        failed = found;
    }
    known().failed.extend(failed.iter().copied());
    Ok((failed, flag))
}

mpi_fn! {
    /// `MPIX_Comm_revoke`: marks `comm` revoked here and sends each other live member a
    /// notice; later calls on it fail with `MPIX_ERR_REVOKED` (see the module's text).
    MPIX_Comm_revoke / PMPIX_Comm_revoke(comm: Handle) on comm => {
        let c = entry(comm)?;
        let ctx = c.comm.p2p_context();
        known().revoked.insert(ctx);
        ANY_REVOKED.store(true, Ordering::Release);
        let agent = c.comm.agent();
        let ctl = agent.with_context(REVOKE_CONTEXT);
        let me = agent.rank();
        let failed = failed_members(&c);
        let mut sends = Vec::new();
        for &w in c.comm.world_ranks().iter().filter(|w| **w != me && !failed.contains(w)) {
            if let Ok(r) = ctl.isend(w, ctx, &NOTICE) {
                sends.push(r);
            }
        }
        for mut s in sends {
            let _ = s.wait();
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPIX_Comm_shrink` (collective over the live members, also on a revoked
    /// communicator): the live members agree on the failed ones and make a communicator of
    /// the others, in `comm`'s order, with `comm`'s error handler.
    MPIX_Comm_shrink / PMPIX_Comm_shrink(comm: Handle, newcomm: *mut Handle) on comm => {
        // SAFETY: the caller's handle (or NULL).
        unsafe { crate::comm::clear_new_comm(newcomm) };
        let c = entry(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(err::ARG, "newcomm is NULL"));
        }
        let (failed, _) = agree_over(&c, u32::MAX)?;
        let rt = rt()?;
        let world = rt.comm_local(abi::COMM_WORLD)?;
        let mut ranks = Vec::new();
        for &w in c.comm.world_ranks().iter().filter(|w| !failed.contains(w)) {
            ranks.push(world.rank_of_world(w).ok_or_else(|| {
                MpiError::new(err::INTERN, format!("world rank {w} is not a process of this job"))
            })?);
        }
        // The tag tells this shrink from others over the same members.
        let tag = c.comm.p2p_context() ^ 0x00a5_0000;
        let n = world.comm.create_group(&ranks, tag)?.ok_or_else(|| {
            MpiError::new(err::INTERN, "the shrunk communicator was not made for a survivor")
        })?;
        let h = rt.add_comm(CommEntry::new(n, c.errhandler.load(Ordering::Relaxed), rt.agent.size()));
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(newcomm, h, "newcomm") }
    }
}

mpi_fn! {
    /// `MPIX_Comm_agree` (collective over the live members): `*flag` becomes the bitwise AND
    /// of the live members' flags; `MPIX_ERR_PROC_FAILED` (with the flag written) when a
    /// member failed whose failure this process has not acknowledged with
    /// `MPIX_Comm_failure_ack`.
    MPIX_Comm_agree / PMPIX_Comm_agree(comm: Handle, flag: *mut c_int) on comm => {
        let c = entry(comm)?;
        if flag.is_null() {
            return Err(MpiError::new(err::ARG, "flag is NULL"));
        }
        // SAFETY: the caller's int, checked not NULL.
        let mine = unsafe { *flag } as u32;
        let (failed, all) = agree_over(&c, mine)?;
        // SAFETY: as above.
        unsafe { put(flag, all as c_int, "flag") }?;
        let k = known();
        let acked = k.acked.get(&c.comm.p2p_context());
        let unacked: Vec<u32> = failed.iter().copied().filter(|w| !acked.is_some_and(|a| a.contains(w))).collect();
        if !unacked.is_empty() {
            return Err(MpiError::new(
                err::PROC_FAILED,
                format!("world rank(s) {unacked:?} of the communicator failed and were not acknowledged"),
            ));
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPIX_Comm_failure_ack`: acknowledges the failures of `comm`'s members known so far
    /// (those `MPIX_Comm_failure_get_acked` then gives; `MPIX_Comm_agree` no longer fails
    /// for them).
    MPIX_Comm_failure_ack / PMPIX_Comm_failure_ack(comm: Handle) on comm => {
        let c = entry(comm)?;
        let failed = failed_members(&c);
        known().acked.entry(c.comm.p2p_context()).or_default().extend(failed);
        Ok(())
    }
}

mpi_fn! {
    /// `MPIX_Comm_failure_get_acked`: the group of `comm`'s members whose failure was
    /// acknowledged (in `comm`'s order; `MPI_GROUP_EMPTY` when none).
    MPIX_Comm_failure_get_acked / PMPIX_Comm_failure_get_acked(comm: Handle, failedgrp: *mut Handle) on comm => {
        let c = entry(comm)?;
        if failedgrp.is_null() {
            return Err(MpiError::new(err::ARG, "failedgrp is NULL"));
        }
        let acked = known().acked.get(&c.comm.p2p_context()).cloned().unwrap_or_default();
        let members: Vec<u32> = c.comm.world_ranks().iter().copied().filter(|w| acked.contains(w)).collect();
        let h = if members.is_empty() { abi::GROUP_EMPTY } else { rt()?.add_group(members) };
        // SAFETY: the caller's handle, checked not NULL.
        unsafe { put(failedgrp, h, "failedgrp") }
    }
}
