//! The progress engine: who moves messages, when, and what a wait blocks on.
//!
//! # Contract
//!
//! - **Nothing runs in the background.** Messages move only inside calls into the agent:
//!   [`Agent::make_progress`], [`Agent::make_progress_blocking`], posts (which try to hand
//!   the message to the method at once), and the waits and tests of the agent's requests
//!   (`Request::wait`, `test`, `wait_any`/`some`/`all`, `test_*`), which call this engine
//!   through the request's progress driver. A rank that posts and never waits or tests makes
//!   no progress on inbound messages.
//! - **One pass** ([`Agent::make_progress`]) takes the agent's mutex once and, for every VC:
//!   reaps the method's completions (completing send CARs), reads up to 64 inbound messages in
//!   place (matching them, answering rendezvous), posts queued messages, then completes as
//!   cancelled every pending receive whose request asked for it. It returns the number of
//!   events handled; 0 means nothing happened.
//! - **Adaptive polling.** A blocking call first spins on passes, up to a spin count that
//!   adapts between `Config::spin_min` and `Config::spin_max`: when the sleep that follows a
//!   fruitless spin finds work within 1 ms (the spin was just too short) the count doubles
//!   (plus `Config::spin_increment`); when a sleep ends idle it shrinks by the increment. A
//!   busy rank thus keeps spinning, an idle one soon stops burning its core. Then it sleeps
//!   (see "The sleep" below) and runs one more pass. A rank with no remote VC does not sleep
//!   here: the request's own condition variable wakes its waiter when another thread
//!   completes it.
//! - **The sleep.** Under the mutex, after a pass that found nothing, each VC's method
//!   prepares a *sleeper*: shared memory counts this side asleep in the segment (so the peer
//!   rings its bell, a futex word there, for every message, freed ring space or close) and
//!   notes the bell's value; TCP hands duplicates of its socket and io_uring ring descriptors
//!   (sending a keepalive that fell due); verbs reads old events and arms its completion
//!   queue, and hands its completion channel. A method with something ready prepares none,
//!   and the pass runs at once. Then the thread drops the mutex and sleeps on every sleeper
//!   together: one `futex_waitv` over the bells when all VCs are shared memory, one `poll`
//!   over the descriptors when none is, one io_uring wait over both kinds (a `FUTEX_WAITV` on
//!   the bells and a poll per descriptor) for a rank with VCs of both kinds; on a kernel
//!   before Linux 6.7, which lacks that, such a rank takes a turn of at most 0.5 ms on each
//!   kind. The sleep ends when any peer sends, at the timeout, or at the
//!   shortest sleeper's longest sleep (shared memory: the liveness interval; TCP: the
//!   keepalive interval, 1 ms while operations are in flight in its ring; verbs: until the
//!   next keepalive is due), after which the thread takes the mutex again for a pass.
//! - **End of a blocking call.** A request's wait (`Request::wait`, `wait_all`, ...) blocks
//!   until one of *its* requests completed, whichever thread completed it, or its timeout
//!   (`ProgressDriver::progress_until`). Passes that only reap send completions (another
//!   thread's posts) neither end it nor keep it polling: it polls on only while passes move
//!   something else (inbound messages, queued sends posted, xfer pieces), it spins only while
//!   no other thread holds the agent's lock (a thread inside the agent makes progress itself,
//!   and a spin beside it would take the lock, and with more threads than CPUs the CPU, from
//!   it), and a long sleep that did not bring its request halves the spin count.
//!   `Agent::make_progress_blocking`, which waits on no request, returns as soon as any
//!   request of this agent completed. Each agent counts its own completions, so another agent
//!   of the same process never ends it early. `viaduct bench threads` (one thread blocked in
//!   `recv` while another posts 10,000 `isend`s; `scripts/bench-threads`, record in
//!   `docs/perf/threads.md`) measures what a sleeper costs the posts: before this rule the
//!   sleeper spun on the lock through the other thread's posts (p99 3.5-9.6x in single
//!   rounds).
//! - **Threads.** Any thread may post, wait and call progress. Passes are serialized by the
//!   mutex, and a post takes it once; a thread asleep in blocking progress does not hold it
//!   (see "The sleep"), so another thread's post never waits for a sleeper. Several threads
//!   may sleep at once (shared memory counts its sleepers; a peer's data wakes every thread
//!   sleeping on that VC). A sleeper is woken by its peers, not by this rank's other threads:
//!   a request that another thread's post or pass completes is seen when the sleep ends (at
//!   most 10 ms from request waits). Requests complete on whichever thread runs the pass that sees their last CAR; a
//!   waiting thread is woken through the request's condition variable. The only user code
//!   that runs inside a pass is a user reduction of an xfer block or collective
//!   ([`Reduction::User`](crate::xfer::Reduction::User)), called with the agent's mutex held:
//!   it must not call into the agent. Message requests have no callbacks, and handlers run on
//!   the handler thread.
//! - **Xfer blocks** ([`crate::xfer`]) are driven by the same passes: each pass handles the
//!   pieces that arrived, then drains the xfer ready queue (pieces whose data is there are
//!   posted, schedules whose block finished start their next block). A nonblocking block or
//!   collective therefore progresses in any pass of its agent, whichever request is waited on.
//! - **Failure.** A peer that dies is noticed by its method within a bounded time (see
//!   `Config::peer_timeout`); the pass that sees it fails every request on that VC. Waits
//!   therefore end, with an error, instead of hanging.
//! - **Liveness.** The agent's heartbeat thread (`viaduct-heartbeat`) keeps the rank alive to
//!   its peers whatever its user does, computing outside the library included; every pass
//!   that polls a VC, and every sleep in a method's wait, beats too (see [`crate::config`],
//!   "Peer liveness"). Blocking waits, and every 32nd non-blocking
//!   pass, check (at most every `peer_timeout / 8`, at most every 100 ms) that each peer this
//!   rank waits on has shown a sign of life within `peer_timeout`, and fail its VC otherwise.
//!
//! # Oversubscription
//!
//! Spinning is right while every rank has a CPU of its own; when ranks share CPUs, a spinning
//! rank takes the CPU from the very peer it waits for. `VIADUCT_PROGRESS`
//! ([`ProgressMode`]) chooses how a blocking call waits:
//!
//! - `spin`: the adaptive polling above.
//! - `yield`: at most `Config::yield_polls` passes (`VIADUCT_YIELD_POLLS`, default 64), with
//!   `sched_yield` (`std::thread::yield_now`) between them, then the sleep in the methods'
//!   waits; the spin count does not adapt. A yield hands the CPU to a rank sharing it (perhaps
//!   the peer awaited) and returns at once when none is runnable; a sleep instead needs the
//!   peer's wake and the scheduler's placement of the woken rank, which with ranks bound two
//!   to a core cost more than the yields (the measurement is in the `config` module table).
//! - `block`: the sleep in the methods' waits at once (it starts with a pass of its own).
//! - `auto` (the default): `yield` when this node is *oversubscribed*, else `spin`. Decided
//!   once, in [`Agent::with_bootstrap`](crate::agent::Agent::with_bootstrap): every rank of a
//!   job of two or more puts the CPUs it may run on (its `sched_getaffinity` mask, as a list
//!   such as `0-3,8`) into the bootstrap key-value space before the set-up fence, and a rank
//!   in `auto` reads those of the ranks on its node after it. The node is oversubscribed for
//!   this rank when the ranks of its node outnumber the CPUs they may run on together (the
//!   union of their masks: 4 ranks unbound on 2 CPUs, or all under `taskset -c 0`), or when
//!   more ranks than its mask has CPUs have exactly its mask (3 ranks bound to one core
//!   while a fourth may use them all). Ranks bound one to a core (`--bind-to core`) are not
//!   oversubscribed. Where a rank's mask cannot be read, the node's online CPU count
//!   (`sysconf(_SC_NPROCESSORS_ONLN)`) stands for the union.
//!   [`Agent::progress_mode`](crate::agent::Agent::progress_mode) tells the mode chosen, and
//!   `VIADUCT_REPORT=methods` prints it.

use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::agent::{Agent, Shared};
use crate::bootstrap::Bootstrap;
use crate::config::ProgressMode;
use crate::engine::State;
use crate::error::AgentError;
use crate::method;
use crate::request::{BoxError, ProgressDriver};
use crate::vc::Link;

/// A sleep that ends with work within this long counts as "the spin was too short".
const QUICK_WAKE: Duration = Duration::from_millis(1);

/// Longest sleep of a blocking call with no VC to sleep on (its requests complete on other
/// threads).
const MAX_TURN: Duration = Duration::from_micros(500);

/// Key under which rank `r` puts the CPUs it may run on.
fn cpus_key(r: u32) -> String {
    format!("viaduct-cpus-{r}")
}

/// Longest CPU list put in the key-value space (PMI servers take values of 1 KiB at least); a
/// longer one is put as `?` (unknown).
const MAX_CPU_LIST: usize = 512;

/// `cpus` (increasing) as a list of ranges: `0-3,8`; empty: `?`.
fn encode_cpus(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    let text = parts.join(",");
    if text.is_empty() || text.len() > MAX_CPU_LIST {
        "?".to_owned()
    } else {
        text
    }
}

/// Parses [`encode_cpus`]'s list; `None` for `?` or anything malformed.
fn decode_cpus(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let a: usize = part.parse().ok()?;
                (a, a)
            }
        };
        if b < a || b - a > 1 << 16 {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// Whether ranks sharing this node are oversubscribed for the rank whose mask is `own`:
/// `others` holds the masks of the other ranks of the node (`None`: unknown), `online` the
/// node's online CPUs. See the module documentation, "Oversubscription".
fn oversubscribed(own: Option<&[usize]>, others: &[Option<Vec<usize>>], online: usize) -> bool {
    let ranks = others.len() + 1;
    let known: Vec<&[usize]> = own
        .into_iter()
        .chain(others.iter().filter_map(|o| o.as_deref()))
        .collect();
    let union = if known.len() == ranks {
        let mut all: Vec<usize> = known.iter().flat_map(|m| m.iter().copied()).collect();
        all.sort_unstable();
        all.dedup();
        all.len()
    } else {
        online
    };
    if ranks > union.min(online.max(1)) {
        return true;
    }
    match own {
        Some(own) => {
            let same = 1 + others.iter().filter(|o| o.as_deref() == Some(own)).count();
            same > own.len()
        }
        None => false,
    }
}

/// Before the set-up fence: puts the CPUs this rank may run on (every rank of a job of two or
/// more does, whatever its mode, so that the ranks in `auto` can read them).
pub(crate) fn publish_cpus(boot: &mut Bootstrap) -> Result<(), AgentError> {
    if boot.size() < 2 {
        return Ok(());
    }
    let mask = viaduct_fallback::affinity::allowed_cpus().unwrap_or_default();
    boot.put(&cpus_key(boot.rank()), &encode_cpus(&mask))
        .map_err(AgentError::Bootstrap)
}

/// After the set-up fence: the mode blocking progress runs in, `requested` with `auto`
/// resolved (see the module documentation, "Oversubscription").
pub(crate) fn resolve_mode(
    boot: &mut Bootstrap,
    requested: ProgressMode,
) -> Result<ProgressMode, AgentError> {
    if requested != ProgressMode::Auto {
        return Ok(requested);
    }
    let me = boot.rank();
    let locals: Vec<u32> = boot
        .local_ranks()
        .into_iter()
        .filter(|&r| r != me)
        .collect();
    if locals.is_empty() {
        return Ok(ProgressMode::Spin);
    }
    let own = viaduct_fallback::affinity::allowed_cpus()
        .ok()
        .filter(|m| !m.is_empty());
    let mut others = Vec::with_capacity(locals.len());
    for r in locals {
        let text = boot.get(&cpus_key(r)).map_err(AgentError::Bootstrap)?;
        others.push(decode_cpus(&text).filter(|m| !m.is_empty()));
    }
    let online = viaduct_fallback::affinity::online_cpus();
    Ok(if oversubscribed(own.as_deref(), &others, online) {
        ProgressMode::Yield
    } else {
        ProgressMode::Spin
    })
}

/// Of the `work` of the pass `st` just ran, the work other than reaped send completions.
fn moved_of(st: &State, work: usize) -> usize {
    work.saturating_sub(st.last_reaped)
}

/// The progress driver of an agent's requests.
pub(crate) struct Driver {
    shared: Weak<Shared>,
}

impl Driver {
    pub(crate) fn new(shared: Weak<Shared>) -> Driver {
        Driver { shared }
    }
}

impl ProgressDriver for Driver {
    fn progress(&self, timeout: Option<Duration>) -> Result<(), BoxError> {
        let Some(shared) = self.shared.upgrade() else {
            return Err(Box::new(AgentError::Finalized));
        };
        match timeout {
            None => {
                shared.make_progress();
            }
            Some(t) => {
                shared.progress_blocking(t, None);
            }
        }
        Ok(())
    }

    fn progress_until(&self, timeout: Duration, done: &dyn Fn() -> bool) -> Result<(), BoxError> {
        let Some(shared) = self.shared.upgrade() else {
            return Err(Box::new(AgentError::Finalized));
        };
        shared.progress_blocking(timeout, Some(done));
        Ok(())
    }
}

impl Shared {
    /// One non-blocking pass; returns the work done.
    pub(crate) fn make_progress(&self) -> usize {
        self.pass(&mut self.lock()).0
    }

    /// One non-blocking pass unless another thread holds the agent's lock (`None`); returns
    /// the work done and, of it, the work other than reaped send completions.
    fn try_make_progress(&self) -> Option<(usize, usize)> {
        let mut st = self.try_lock()?;
        Some(self.pass(&mut st))
    }

    /// One non-blocking pass on the locked state: the work done and, of it, the work other
    /// than reaped send completions (nothing on a finalized agent).
    fn pass(&self, st: &mut State) -> (usize, usize) {
        if st.finalized {
            return (0, 0);
        }
        let work = st.progress();
        st.pass_done(self.config.peer_timeout);
        (work, moved_of(st, work))
    }

    /// Spins adaptively, then sleeps in the methods' waits, until `done` (when given: a
    /// request the caller waits on completed) or, without it, until any request of this agent
    /// completes, or `timeout` passed; returns the work done.
    ///
    /// With `done` the call polls on while passes *move* something (inbound messages, queued
    /// sends posted, xfer pieces: the caller's transfer may be among them), but work that only
    /// reaps send completions (other threads' posts) neither ends it nor keeps it polling:
    /// it goes on to its sleep (see the module documentation, "Threads"), so a thread blocked
    /// on a receive sleeps while another thread posts, instead of taking the agent's lock in a
    /// loop.
    pub(crate) fn progress_blocking(
        &self,
        timeout: Duration,
        done: Option<&dyn Fn() -> bool>,
    ) -> usize {
        let deadline = Instant::now() + timeout;
        let before = self.completions.count();
        let finished = || match done {
            Some(d) => d(),
            None => self.completions.count() != before,
        };
        let mut total = 0;
        let mut spin = true;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (work, moved) = self.blocking_round(left, done.is_some(), spin, &finished);
            total += work;
            // A waiter on its own request spins again only after a round that moved
            // something: a sleep that ended without its request or any movement means that
            // what it waits for is not imminent (the wake was for another thread's traffic, or
            // the sleep's longest slice). A method with a transfer under way does not sleep
            // (shared memory: a long message in ring chunks), so the transfer is polled.
            spin = done.is_none() || moved > 0;
            // A wait looks at its requests only when this returns: return once it has
            // something to look at, else go on until the timeout.
            if finished() || Instant::now() >= deadline {
                return total;
            }
        }
    }

    /// One spin and one sleep; returns the work done and, of it, the work that moved
    /// something (see [`Shared::progress_blocking`]). `targeted`: `finished` tells whether the
    /// caller's own request completed (else: whether any request of this agent did).
    fn blocking_round(
        &self,
        timeout: Duration,
        targeted: bool,
        spin: bool,
        finished: &dyn Fn() -> bool,
    ) -> (usize, usize) {
        // Without a target, any work ends the spin: the caller looks at its requests then.
        // With one, its request's completion or movement does (the caller's loop comes back).
        let ends = |work: usize, moved: usize| {
            if targeted {
                finished() || moved > 0
            } else {
                work > 0
            }
        };
        match self.progress {
            ProgressMode::Yield => {
                let mut total = 0;
                for _ in 0..self.config.yield_polls {
                    let work = self.make_progress();
                    total += work;
                    if ends(work, work) {
                        return (total, work);
                    }
                    // Let a rank sharing this CPU (perhaps the peer awaited) run.
                    std::thread::yield_now();
                }
                let (work, moved) = self.sleep_in_methods(timeout, targeted, finished);
                return (total + work, moved);
            }
            ProgressMode::Block => return self.sleep_in_methods(timeout, targeted, finished),
            ProgressMode::Spin | ProgressMode::Auto => {}
        }
        if !spin {
            return self.sleep_in_methods(timeout, targeted, finished);
        }
        let c = &self.config;
        let spins = self.spin_now.load(Ordering::Relaxed);
        let mut total = 0;
        for _ in 0..spins {
            // A waiter on its own request spins only while no other thread is in the agent:
            // one that is (posting, say) makes progress itself, and a spin beside it would
            // only take the lock from it (and, with more threads than CPUs, the CPU too).
            let (work, moved) = if targeted {
                match self.try_make_progress() {
                    Some(w) => w,
                    None => break,
                }
            } else {
                let w = self.make_progress();
                (w, w)
            };
            total += work;
            if ends(work, moved) {
                return (total, moved);
            }
            std::hint::spin_loop();
        }
        let slept = Instant::now();
        let (work, moved) = self.sleep_in_methods(timeout, targeted, finished);
        // Adaptive polling: the awaited event soon after falling asleep means the spin was
        // just too short, so spin longer next time; a sleep that did not see it means the rank
        // (or this thread) is idle, so spin less.
        let woke = if targeted { finished() } else { work > 0 };
        let quick = slept.elapsed() < QUICK_WAKE;
        let next = if woke && quick {
            spins
                .saturating_mul(2)
                .saturating_add(c.spin_increment)
                .min(c.spin_max)
        } else if targeted && !woke && !quick {
            // A long sleep that did not bring the thread's own request: halve, so that a
            // thread that waits long beside busy threads soon stops taking the lock from
            // them. (A quick wake without it, a transfer's ring space freed say, keeps the
            // count.)
            (spins / 2).max(c.spin_min)
        } else if !targeted && !woke {
            spins.saturating_sub(c.spin_increment).max(c.spin_min)
        } else {
            spins
        };
        self.spin_now.store(next, Ordering::Relaxed);
        (total + work, moved)
    }

    /// One pass; unless it ended the wait (`targeted`: `finished()` or something moved; else:
    /// it found work), a sleep in the methods' waits, taken without the agent's lock (see the
    /// module documentation, "Threads"), and one more pass. Returns the work done and, of it,
    /// the work other than reaped send completions.
    fn sleep_in_methods(
        &self,
        timeout: Duration,
        targeted: bool,
        finished: &dyn Fn() -> bool,
    ) -> (usize, usize) {
        let mut st = self.lock();
        if st.finalized {
            return (0, 0);
        }
        let work = st.progress();
        let moved = moved_of(&st, work);
        if if targeted {
            finished() || moved > 0
        } else {
            work > 0
        } {
            return (work, moved);
        }
        let waitable = st.waitable();
        if st.check_liveness(self.config.peer_timeout) > 0 {
            return (work + 1, moved + 1);
        }
        if waitable.is_empty() {
            // Nothing to sleep on here: completions come from other threads, which wake the
            // waiter through the request's condition variable.
            drop(st);
            std::thread::sleep(timeout.min(MAX_TURN));
            return (work, moved);
        }
        // Under the lock: each VC's method prepares its sleep (or says that something is
        // ready, and the pass below runs at once). The pass above took what was ready, so a
        // method has something only if it came in since.
        let mut sleepers = Vec::with_capacity(waitable.len());
        let mut peers = Vec::with_capacity(waitable.len());
        let mut failures = Vec::new();
        let mut ready = false;
        for i in waitable {
            let vc = &mut st.vcs[i];
            if let Link::Remote(m) = &mut vc.link {
                match m.sleeper() {
                    Ok(Some(s)) => {
                        sleepers.push(s);
                        peers.push(vc.peer);
                    }
                    Ok(None) => ready = true,
                    Err(e) => failures.push((vc.peer, e.to_string())),
                }
            }
        }
        if !ready && failures.is_empty() && !sleepers.is_empty() {
            // The sleep itself, without the lock: other threads post, test and make progress
            // meanwhile.
            drop(st);
            let slept = method::sleep_all(&sleepers, timeout);
            drop(sleepers);
            st = self.lock();
            if st.finalized {
                return (work, moved);
            }
            if let Err((k, e)) = slept {
                failures.push((peers[k], e.to_string()));
            }
        }
        for (peer, reason) in failures {
            st.fail_vc(peer, reason);
        }
        let after = st.progress();
        let moved_after = moved_of(&st, after);
        let checked = st.check_liveness(self.config.peer_timeout);
        (work + after + checked, moved + moved_after + checked)
    }
}

impl Agent {
    /// The mode blocking progress runs in (`spin`, `yield` or `block`): the configured
    /// `VIADUCT_PROGRESS`, with `auto` resolved at start (see the module documentation,
    /// "Oversubscription").
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use viaduct_agent::config::ProgressMode;
    ///
    /// // `auto` is resolved at start: never reported.
    /// assert_ne!(agent.progress_mode(), ProgressMode::Auto);
    /// # Ok(())
    /// # }
    /// ```
    pub fn progress_mode(&self) -> ProgressMode {
        self.shared.progress
    }

    /// One non-blocking progress pass over every VC (the agent operation `Make_progress`); returns the
    /// number of events handled (0: nothing happened).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let mut request = agent.isend(0, 1, b"x")?;
    /// # let (mut recv, _buf) = agent.irecv(1, Source::Rank(0), TagMatch::Tag(1))?;
    /// while request.test()?.is_none() {
    ///     agent.make_progress(); // or compute, and come back
    /// }
    /// # recv.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn make_progress(&self) -> usize {
        self.shared.make_progress()
    }

    /// One non-blocking progress pass over the VC of `peer` only (the agent operation
    /// `Make_progress(VC)`); returns the events handled. Cancellations are handled as in a full
    /// pass.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// // Only this VC (here the rank's own loop) is polled.
    /// agent.make_progress_vc(0)?;
    /// assert!(agent.make_progress_vc(agent.size()).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn make_progress_vc(&self, peer: u32) -> Result<usize, AgentError> {
        self.check_rank(peer)?;
        let mut st = self.shared.lock();
        if st.finalized {
            return Err(AgentError::Finalized);
        }
        Ok(st.progress_on(Some(peer)))
    }

    /// Makes progress, blocking up to `timeout` when there is nothing to do
    /// (the agent operation `Make_progress_blocking`): spins adaptively, then sleeps in the methods'
    /// waits. Returns the events handled.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// use std::time::Duration;
    ///
    /// // Nothing to do: returns after (at most) the timeout.
    /// let events = agent.make_progress_blocking(Duration::from_millis(5));
    /// println!("{events} events");
    /// # Ok(())
    /// # }
    /// ```
    pub fn make_progress_blocking(&self, timeout: Duration) -> usize {
        self.shared.progress_blocking(timeout, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        for cpus in [
            vec![0],
            vec![0, 1, 2, 3, 8],
            vec![1, 3, 5],
            (0..64).collect(),
        ] {
            let text = encode_cpus(&cpus);
            assert_eq!(decode_cpus(&text), Some(cpus), "{text}");
        }
        assert_eq!(encode_cpus(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(encode_cpus(&[]), "?");
        let sparse: Vec<usize> = (0..1000).map(|c| c * 2).collect();
        assert_eq!(encode_cpus(&sparse), "?");
        for bad in ["?", "", "a", "3-1", "1-", "0-99999999"] {
            assert_eq!(decode_cpus(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn oversubscription_rules() {
        let all2 = Some(vec![0, 1]);
        // 2 ranks on 2 CPUs: not oversubscribed; 4: oversubscribed.
        assert!(!oversubscribed(
            Some(&[0, 1]),
            std::slice::from_ref(&all2),
            2
        ));
        assert!(oversubscribed(
            Some(&[0, 1]),
            &[all2.clone(), all2.clone(), all2.clone()],
            2
        ));
        // All 4 under `taskset -c 0` on a 64-CPU node.
        let c0 = Some(vec![0]);
        assert!(oversubscribed(
            Some(&[0]),
            &[c0.clone(), c0.clone(), c0.clone()],
            64
        ));
        // Bound one to a core: not oversubscribed.
        assert!(!oversubscribed(
            Some(&[0]),
            &[Some(vec![1]), Some(vec![2]), Some(vec![3])],
            64
        ));
        // 3 bound to core 0, a fourth free: the three are, the free one is not.
        let free: Vec<usize> = (0..64).collect();
        assert!(oversubscribed(
            Some(&[0]),
            &[c0.clone(), c0.clone(), Some(free.clone())],
            64
        ));
        assert!(!oversubscribed(
            Some(&free),
            &[c0.clone(), c0.clone(), c0.clone()],
            64
        ));
        // Unknown masks: the online CPUs stand for the union.
        assert!(oversubscribed(None, &[None, None], 2));
        assert!(!oversubscribed(None, &[None], 2));
    }
}
