//! One-sided communication, general active target synchronisation (MPI 4.x chapter 12.5.2):
//! `MPI_Win_post`, `MPI_Win_start`, `MPI_Win_complete`, `MPI_Win_wait`, `MPI_Win_test`.
//!
//! `MPI_Win_start` records the access epoch's targets; operations are queued as in any epoch
//! (see [`crate::win`]). `MPI_Win_complete` sends each target a length (0 when nothing is
//! queued for it) and its batch, and waits for the replies (error code, then the data of the
//! gets and fetches) of the targets it sent a batch.
//!
//! `MPI_Win_post` posts, for every origin of its group, the receive of that origin's length
//! with a request handler: the handler runs on the agent's handler thread once the receive
//! completes, which it does inside any agent call of this process (the program may wait in
//! `MPI_Recv` between post and wait, as the standard's progress rule asks), reads the batch,
//! applies it to the window's memory and replies. `MPI_Win_wait` waits for every origin to be
//! served; `MPI_Win_test` tells whether they are. A rank may be in its own post and start
//! groups: its batch goes to itself and its own handler serves it.

use std::ffi::c_int;
use std::sync::{Arc, Condvar, Mutex};

use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{Condition, Deadline, HandlerFn, Request, Status};

use crate::abi::{self, Handle, err};
use crate::comm::put;
use crate::error::MpiError;
use crate::state::rt;
use crate::win::{
    self, ERR_RMA_SYNC, TAG_BATCH, TAG_LEN, TAG_REPLY, Win, check_assert, lock, xfer,
};

/// What the handlers of an exposure epoch report.
#[derive(Default)]
struct Served {
    /// Origins served so far.
    count: usize,
    /// Replies sent.
    sends: Vec<Request>,
}

/// The progress of an exposure epoch, shared with its handlers.
#[derive(Default)]
struct Progress {
    served: Mutex<Served>,
    cv: Condvar,
}

/// An exposure epoch (`MPI_Win_post`).
struct Exposure {
    /// Origins (window ranks).
    origins: usize,
    /// The receives of every origin's length, each with its handler posted.
    recvs: Vec<Request>,
    progress: Arc<Progress>,
}

/// Post/start state of a window.
#[derive(Default)]
pub(crate) struct Pscw {
    /// The exposure epoch, after `MPI_Win_post`.
    exposed: Option<Exposure>,
    /// Targets of the access epoch (window ranks), after `MPI_Win_start`.
    access: Option<Vec<u32>>,
}

/// The window ranks of the members of group `g` (`MPI_ERR_GROUP` for one not in the window).
fn group_ranks(w: &Win, g: Handle) -> Result<Vec<u32>, MpiError> {
    let members = rt()?.group(g)?;
    let world = w.comm.world_ranks();
    let mut out = Vec::with_capacity(members.len());
    for &m in members.iter() {
        let r = world.iter().position(|&x| x == m).ok_or_else(|| {
            MpiError::new(
                err::GROUP,
                format!("world rank {m} of the group is not in the window"),
            )
        })?;
        out.push(r as u32);
    }
    out.sort_unstable();
    Ok(out)
}

/// The handler of origin `o`'s length receive (on the agent's handler thread): reads the
/// batch, applies it, replies, and counts the origin served.
fn serve(w: &Win, o: u32, buf: &RecvBuffer, st: &Status, p: &Progress) {
    let mut send = None;
    if !st.test_cancelled() && st.error().is_none() {
        let mut len = [0u8; 8];
        buf.copy_to(&mut len);
        let len = u64::from_le_bytes(len) as usize;
        if len > 0 {
            // The batch follows its length at once.
            let mut b = vec![0u8; len];
            let reply = match w
                .comm
                .recv(&mut b, Source::Rank(o), TagMatch::Tag(TAG_BATCH))
            {
                // The window's memory: the program does not touch it while the exposure
                // epoch is open (the separate model).
                Ok(_) => win::apply(w, &b),
                Err(_) => err::INTERN.to_le_bytes().to_vec(),
            };
            match w.comm.isend(o, TAG_REPLY, &reply) {
                Ok(r) => send = Some(r),
                Err(e) => eprintln!("viaduct MPI: a one-sided reply to rank {o} failed: {e}"),
            }
        }
    }
    let mut s = lock(&p.served);
    s.count += 1;
    s.sends.extend(send);
    p.cv.notify_all();
}

mpi_fn! {
    /// `MPI_Win_post`: opens an exposure epoch to the origins of `group` (this rank may be
    /// one), each served by a request handler as soon as its batch comes.
    MPI_Win_post / PMPI_Win_post(group: Handle, assert: c_int, win: Handle) on win => {
        let w = win::win(win)?;
        check_assert(assert)?;
        let origins = group_ranks(&w, group)?;
        let mut s = lock(&w.pscw);
        if s.exposed.is_some() {
            return Err(MpiError::new(ERR_RMA_SYNC, "an exposure epoch is open already"));
        }
        let progress = Arc::new(Progress::default());
        let mut recvs = Vec::with_capacity(origins.len());
        for &o in &origins {
            let (req, buf) = w.comm.irecv(8, Source::Rank(o), TagMatch::Tag(TAG_LEN)).map_err(xfer)?;
            let (me, p) = (Arc::clone(&w), Arc::clone(&progress));
            req.post_handler(
                Condition::Complete,
                Some(HandlerFn::new(move |_, st| serve(&me, o, &buf, st, &p))),
                None,
                Deadline::Asap,
            )?;
            recvs.push(req);
        }
        s.exposed = Some(Exposure { origins: origins.len(), recvs, progress });
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_start`: opens an access epoch to the targets of `group` (this rank may be one).
    MPI_Win_start / PMPI_Win_start(group: Handle, assert: c_int, win: Handle) on win => {
        let w = win::win(win)?;
        check_assert(assert)?;
        let targets = group_ranks(&w, group)?;
        let mut s = lock(&w.pscw);
        if s.access.is_some() {
            return Err(MpiError::new(ERR_RMA_SYNC, "an access epoch is open already"));
        }
        s.access = Some(targets);
        // A start ends the fence epoch (as in MPICH).
        w.fenced.store(false, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

/// Whether the access epoch of `MPI_Win_start` this rank has open on `w` covers target `t`
/// (`None`: none is open).
pub(crate) fn access_to(w: &Win, t: u32) -> Option<bool> {
    lock(&w.pscw).access.as_ref().map(|g| g.contains(&t))
}

/// Whether this rank has an exposure epoch of `MPI_Win_post` open on `w`.
pub(crate) fn exposure_open(w: &Win) -> bool {
    lock(&w.pscw).exposed.is_some()
}

/// Whether this rank has an access epoch of `MPI_Win_start` open on `w`.
pub(crate) fn access_open(w: &Win) -> bool {
    lock(&w.pscw).access.is_some()
}

/// `MPI_Win_complete`: sends each target its batch and takes the replies.
fn complete(w: &Win) -> Result<(), MpiError> {
    let targets = lock(&w.pscw)
        .access
        .take()
        .ok_or_else(|| MpiError::new(ERR_RMA_SYNC, "no access epoch is open (MPI_Win_start)"))?;
    let (batches, pendings) = win::take_queue(w, &targets)?;
    let mut sends = Vec::new();
    let mut replies = Vec::new();
    for &t in &targets {
        let b = &batches[t as usize];
        sends.push(
            w.comm
                .isend(t, TAG_LEN, &(b.len() as u64).to_le_bytes())
                .map_err(xfer)?,
        );
        if !b.is_empty() {
            sends.push(w.comm.isend(t, TAG_BATCH, b).map_err(xfer)?);
            let want = 4 + pendings[t as usize].iter().map(|p| p.len).sum::<usize>();
            let (req, buf) = w
                .comm
                .irecv(want, Source::Rank(t), TagMatch::Tag(TAG_REPLY))
                .map_err(xfer)?;
            replies.push((t, want, req, buf));
        }
    }
    let mut code = abi::SUCCESS;
    for (t, want, mut req, buf) in replies {
        req.wait().map_err(xfer)?;
        let reply = buf.take();
        win::take_reply(&reply, want, &pendings[t as usize], &mut code)?;
    }
    for mut s in sends {
        s.wait().map_err(xfer)?;
    }
    win::refused(code)
}

mpi_fn! {
    /// `MPI_Win_complete`: ends the access epoch once every target applied its operations
    /// (waiting for the targets' `MPI_Win_post`, not for their `MPI_Win_wait`).
    MPI_Win_complete / PMPI_Win_complete(win: Handle) on win => {
        let w = win::win(win)?;
        complete(&w)
    }
}

/// `MPI_Win_wait` (`block`) or `MPI_Win_test`: whether every origin of the exposure epoch was
/// served (then the epoch ends, once its replies left).
fn wait(w: &Win, block: bool) -> Result<bool, MpiError> {
    let mut x = lock(&w.pscw)
        .exposed
        .take()
        .ok_or_else(|| MpiError::new(ERR_RMA_SYNC, "no exposure epoch is open (MPI_Win_post)"))?;
    // The receives complete inside agent calls: waiting on (or testing) them makes progress.
    let mut arrived = true;
    for r in &mut x.recvs {
        let done = if block { r.wait().map(Some) } else { r.test() };
        match done {
            Ok(d) => arrived &= d.is_some(),
            Err(e) => {
                lock(&w.pscw).exposed = Some(x);
                return Err(xfer(e));
            }
        }
    }
    let sends = {
        let mut s = lock(&x.progress.served);
        // Once every origin's message is in, its handler (on the handler thread) is queued or
        // running: `MPI_Win_test` waits for those too, so that it does not answer false for
        // an epoch whose origins all completed (their handlers only serve what is here).
        if block || arrived {
            while s.count < x.origins {
                s = x.progress.cv.wait(s).unwrap_or_else(|e| e.into_inner());
            }
        }
        if !arrived || s.count < x.origins {
            drop(s);
            lock(&w.pscw).exposed = Some(x);
            return Ok(false);
        }
        std::mem::take(&mut s.sends)
    };
    for mut s in sends {
        s.wait().map_err(xfer)?;
    }
    Ok(true)
}

/// Ends an exposure epoch still open when window `w` is freed: its receives are cancelled.
pub(crate) fn drop_exposure(w: &Win) {
    let x = lock(&w.pscw).exposed.take();
    if let Some(x) = x {
        for r in x.recvs {
            let _ = r.cancel();
        }
    }
}

mpi_fn! {
    /// `MPI_Win_wait`: ends the exposure epoch once every origin completed its access.
    MPI_Win_wait / PMPI_Win_wait(win: Handle) on win => {
        let w = win::win(win)?;
        wait(&w, true).map(|_| ())
    }
}

mpi_fn! {
    /// `MPI_Win_test`: `MPI_Win_wait` that returns at once; `flag` tells whether the epoch
    /// ended.
    MPI_Win_test / PMPI_Win_test(win: Handle, flag: *mut c_int) on win => {
        let w = win::win(win)?;
        if flag.is_null() {
            return Err(MpiError::new(err::ARG, "flag is NULL"));
        }
        let done = wait(&w, false)?;
        // SAFETY: the caller's int, checked not NULL.
        unsafe { put(flag, c_int::from(done), "flag") }
    }
}
