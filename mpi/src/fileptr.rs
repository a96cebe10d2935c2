//! The shared file pointer of an open file (MPI 4.1 §14.4.4), kept by rank 0 of the file's
//! communicator.
//!
//! Rank 0 holds the pointer (etypes of the view). Its own accesses update it under a lock; the
//! other ranks ask it over the file's private communicator: a request (8 bytes, the amount to
//! add, tag [`TAG_ASK`]) answered with the pointer before the addition (tag [`TAG_ANSWER`]).
//! Rank 0 keeps one receive posted for requests with a handler that serves it and posts the
//! next (as the passive-target service of windows, [`crate::winlock`]), so a request is served
//! inside any agent call of rank 0. Each answer is an atomic fetch-and-add, so concurrent
//! accesses through the shared pointer get disjoint ranges of the file. Threads of one rank ask
//! one at a time (the answers carry no request number).
//!
//! The collective forms (ordered accesses, `MPI_File_seek_shared`, the reset of
//! `MPI_File_set_view`) take no request: every rank synchronises with rank 0, which updates
//! the pointer itself.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use viaduct_agent::comm::Comm;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{Condition, Deadline, HandlerFn, Request, Status};

use crate::abi::err;
use crate::error::MpiError;

/// Requests to rank 0 (on the file's private communicator, whose point-to-point context
/// carries nothing else).
const TAG_ASK: u32 = 1;
/// Rank 0's answers.
const TAG_ANSWER: u32 = 2;
/// The answer to an addition that would pass the largest pointer.
const OVERFLOW: u64 = u64::MAX;
/// How long closing the file waits for the service's last handler and answers.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rank 0's service.
#[derive(Default)]
struct Service {
    /// The posted receive of the next request.
    posted: Option<Request>,
    /// Set when the file closes: no receive is posted any more.
    closing: bool,
    /// Answers sent and maybe not complete yet.
    sends: Vec<Request>,
}

/// The shared file pointer of one open file, on one rank.
pub(crate) struct SharedPtr {
    comm: Comm,
    /// Rank 0: the pointer.
    value: Mutex<u64>,
    /// Rank 0: the service.
    service: Mutex<Service>,
    /// The other ranks: one request at a time.
    ask: Mutex<()>,
}

impl SharedPtr {
    /// The pointer (at 0) of a file opened on `comm` (the file's private communicator); rank 0
    /// starts serving the other ranks.
    pub(crate) fn new(comm: Comm) -> Result<Arc<Self>, MpiError> {
        let p = Arc::new(SharedPtr {
            comm,
            value: Mutex::new(0),
            service: Mutex::new(Service::default()),
            ask: Mutex::new(()),
        });
        if p.comm.rank() == 0 && p.comm.size() > 1 {
            start_service(&p)?;
        }
        Ok(p)
    }

    /// Adds `amount` to the pointer and gives its value before (an atomic fetch-and-add among
    /// the file's ranks).
    pub(crate) fn fetch_add(&self, amount: u64) -> Result<u64, MpiError> {
        let old = if self.comm.rank() == 0 {
            add(&mut lock(&self.value), amount)
        } else {
            let _one = lock(&self.ask);
            let mut send = self.comm.isend(0, TAG_ASK, &amount.to_le_bytes())?;
            let mut a = [0u8; 8];
            let got = self
                .comm
                .recv(&mut a, Source::Rank(0), TagMatch::Tag(TAG_ANSWER));
            send.wait()?;
            got?;
            u64::from_le_bytes(a)
        };
        if old == OVERFLOW {
            return Err(MpiError::new(
                err::ARG,
                format!(
                    "moving the shared file pointer by {amount} etypes passes its largest value"
                ),
            ));
        }
        Ok(old)
    }

    /// Collective: once every rank called it, rank 0 sets the pointer to what `to` computes
    /// from its value (`None`: left as it is, and an error of class `MPI_ERR_ARG` on every rank
    /// naming `why`); every rank gets the new value.
    pub(crate) fn set_all(
        &self,
        to: impl FnOnce(u64) -> Result<Option<u64>, MpiError>,
        why: &str,
    ) -> Result<u64, MpiError> {
        // Every rank's earlier accesses through the pointer were answered before it came here.
        self.comm.barrier()?;
        let mut b = [0u8; 9];
        if self.comm.rank() == 0 {
            let mut v = lock(&self.value);
            match to(*v) {
                Ok(Some(n)) => {
                    *v = n;
                    b[..8].copy_from_slice(&n.to_le_bytes());
                }
                Ok(None) => b[8] = 1,
                Err(e) => {
                    b[8] = 2;
                    b[..4].copy_from_slice(&e.class.to_le_bytes());
                }
            }
        }
        self.comm.bcast(&mut b, 0)?;
        match b[8] {
            0 => {
                let mut v = [0u8; 8];
                v.copy_from_slice(&b[..8]);
                Ok(u64::from_le_bytes(v))
            }
            1 => Err(MpiError::new(err::ARG, why.to_string())),
            _ => Err(MpiError::new(
                i32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                format!("rank 0 could not move the shared file pointer ({why})"),
            )),
        }
    }

    /// Collective (the ordered accesses): takes `mine` etypes for this rank and the amounts of
    /// the ranks before it from the pointer, which moves past every rank's amount; gives where
    /// this rank's part starts.
    pub(crate) fn ordered(&self, mine: u64) -> Result<u64, MpiError> {
        let n = self.comm.size() as usize;
        let mut all = vec![0u8; 8 * n];
        self.comm.allgather(&mine.to_le_bytes(), &mut all)?;
        let amounts: Vec<u64> = all
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        let me = self.comm.rank() as usize;
        let before = amounts[..me]
            .iter()
            .try_fold(0u64, |s, &a| s.checked_add(a));
        let total = amounts.iter().try_fold(0u64, |s, &a| s.checked_add(a));
        let mut b = [0u8; 8];
        if me == 0 {
            let base = match total {
                Some(t) => add(&mut lock(&self.value), t),
                None => OVERFLOW,
            };
            b = base.to_le_bytes();
        }
        if n > 1 {
            self.comm.bcast(&mut b, 0)?;
        }
        let base = u64::from_le_bytes(b);
        before
            .filter(|_| base != OVERFLOW)
            .and_then(|s| base.checked_add(s))
            .ok_or_else(|| {
                MpiError::new(
                    err::ARG,
                    "the ordered access moves the shared file pointer past its largest value",
                )
            })
    }

    /// Stops rank 0's service when the file closes (after the close's barrier: no request
    /// comes any more).
    pub(crate) fn stop(&self) {
        let posted = {
            let mut s = lock(&self.service);
            s.closing = true;
            s.posted.take()
        };
        // Only rank 0 of a file of several ranks serves.
        let Some(mut r) = posted else { return };
        let _ = r.cancel();
        let _ = r.wait_timeout(CLOSE_WAIT);
        let _ = viaduct_agent::request::flush_handlers(CLOSE_WAIT);
        let sends = std::mem::take(&mut lock(&self.service).sends);
        for mut s in sends {
            let _ = s.wait_timeout(CLOSE_WAIT);
        }
    }
}

/// Adds `amount` to `v`; gives the value before ([`OVERFLOW`], `v` unchanged, when the sum
/// does not fit).
fn add(v: &mut u64, amount: u64) -> u64 {
    match v.checked_add(amount).filter(|&n| n != OVERFLOW) {
        Some(n) => std::mem::replace(v, n),
        None => OVERFLOW,
    }
}

/// Posts the receive of the next request with the handler that serves it.
fn start_service(p: &Arc<SharedPtr>) -> Result<(), MpiError> {
    let mut s = lock(&p.service);
    if s.closing {
        return Ok(());
    }
    let (req, buf) = p.comm.irecv(8, Source::Any, TagMatch::Tag(TAG_ASK))?;
    let me = Arc::clone(p);
    req.post_handler(
        Condition::Complete,
        Some(HandlerFn::new(move |_, st| serve(&me, &buf, st))),
        None,
        Deadline::Asap,
    )?;
    s.posted = Some(req);
    Ok(())
}

/// The handler of the service's receive (on the agent's handler thread): answers the request
/// and posts the next receive.
fn serve(p: &Arc<SharedPtr>, buf: &RecvBuffer, st: &Status) {
    if st.test_cancelled() {
        return;
    }
    if let Some(e) = st.error() {
        eprintln!("viaduct MPI: the shared file pointer service of a file stopped: {e}");
        return;
    }
    let mut a = [0u8; 8];
    if let (Some(src), 8) = (st.source(), buf.copy_to(&mut a)) {
        let old = add(&mut lock(&p.value), u64::from_le_bytes(a));
        let mut s = lock(&p.service);
        s.sends
            .retain_mut(|r| !matches!(r.test(), Ok(Some(_)) | Err(_)));
        match p.comm.isend(src, TAG_ANSWER, &old.to_le_bytes()) {
            Ok(r) => s.sends.push(r),
            Err(e) => eprintln!(
                "viaduct MPI: an answer of the shared file pointer service to rank {src} failed: {e}"
            ),
        }
    }
    if let Err(e) = start_service(p) {
        eprintln!(
            "viaduct MPI: the shared file pointer service of a file stopped: {}",
            e.message
        );
    }
}
