//! Waiting on and testing arrays of requests: `wait_any`, `wait_some`, `wait_all`, `test_any`,
//! `test_some`, `test_all`.
//!
//! A blocking wait takes turns between two ways to sleep so that a mixed array never hangs:
//! requests completed by other threads wake a condition variable registered on each of them;
//! requests driven by progress hooks get their class's `wait` hook (all of the class's requests of
//! the array in one call) with a bounded timeout that starts at [`MIN_HOOK_TIMEOUT`] and doubles
//! up to [`MAX_HOOK_TIMEOUT`] while nothing happens (adaptive polling). After the hooks return the
//! array is looked at again at once, so a completion by another thread is seen within one
//! timeout; an array with no hooks sleeps on the condition variable. A wait on one request
//! driven by a hook registers no waiter at all: the hook alone polls and sleeps.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::core::CoreRef;
use super::error::RequestError;
use super::handle::Request;
use super::status::Status;
use super::waiter::Waiter;

/// First timeout given to wait hooks in a blocking wait.
pub const MIN_HOOK_TIMEOUT: Duration = Duration::from_micros(50);
/// Largest timeout given to wait hooks: the longest a completion by another thread can go
/// unnoticed while a wait sits in a hook.
pub const MAX_HOOK_TIMEOUT: Duration = Duration::from_millis(10);
/// A wait with no hooks sleeps on its condition variable and rechecks at least this often.
const IDLE_RECHECK: Duration = Duration::from_millis(100);

/// What a blocking wait waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// At least one active request complete (or none active).
    Any,
    /// Every active request complete.
    All,
}

fn satisfied(requests: &[Request], need: Need) -> bool {
    let mut active = requests.iter().filter_map(Request::core).peekable();
    if active.peek().is_none() {
        return true;
    }
    match need {
        Need::Any => active.any(|c| c.is_complete()),
        Need::All => active.all(|c| c.is_complete()),
    }
}

/// Incomplete requests with a progress hook, grouped by hook (one group per class or driver).
fn hook_groups(requests: &[Request]) -> Vec<(usize, Vec<&CoreRef>)> {
    let mut groups: Vec<(usize, Vec<&CoreRef>)> = Vec::new();
    for core in requests.iter().filter_map(Request::core) {
        let Some(key) = core.body.hook_key() else {
            continue;
        };
        if core.is_complete() {
            continue;
        }
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(core),
            None => groups.push((key, vec![core])),
        }
    }
    groups
}

/// One non-blocking progress pass: every hook group polls its incomplete requests once.
pub(crate) fn poll_pass(requests: &[Request]) {
    if requests
        .iter()
        .filter_map(Request::core)
        .all(|c| c.body.hook_key().is_none())
    {
        return;
    }
    for (_, members) in hook_groups(requests) {
        members[0].body.poll_group(&members);
    }
}

/// Blocks until `need` holds for `requests`.
pub(crate) fn wait_until(requests: &[Request], need: Need) {
    wait_until_deadline(requests, need, None);
}

/// Blocks until `need` holds for `requests` or `deadline` passed; returns whether it holds.
pub(crate) fn wait_until_deadline(
    requests: &[Request],
    need: Need,
    deadline: Option<Instant>,
) -> bool {
    if let [one] = requests {
        if let Some(core) = one.core() {
            if core.body.hook_key().is_some() {
                return wait_one_hooked(core, deadline);
            }
        }
    }
    let mut waiter: Option<Arc<Waiter>> = None;
    let mut hook_timeout = MIN_HOOK_TIMEOUT;
    let satisfied = loop {
        poll_pass(requests);
        if satisfied(requests, need) {
            break true;
        }
        let left = match deadline {
            None => Duration::MAX,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => break false,
            },
        };
        let Some(w) = &waiter else {
            // Register, then look again: a completion between the look and the registration
            // would otherwise be missed.
            let w = Arc::new(Waiter::default());
            for core in requests.iter().filter_map(Request::core) {
                core.register(&w);
            }
            waiter = Some(w);
            continue;
        };
        let groups = hook_groups(requests);
        if groups.is_empty() {
            w.wait_timeout(IDLE_RECHECK.min(left));
            continue;
        }
        let round = hook_timeout.min(left);
        for (i, (_, members)) in groups.iter().enumerate() {
            // Each hook may block for the whole round: once the wait is satisfied (a hook
            // completed something, or another thread did), the next hooks are not entered, so a
            // completion is seen within one round however many classes the array mixes.
            if i > 0 && satisfied(requests, need) {
                break;
            }
            members[0].body.wait_group(members, round);
        }
        // No sleep on the condition variable here: a hook that returned early did so because
        // something happened, and the next turn looks at once; requests completed by other
        // threads are seen by that look too.
        hook_timeout = (hook_timeout * 2).min(MAX_HOOK_TIMEOUT);
    };
    if let Some(w) = &waiter {
        for core in requests.iter().filter_map(Request::core) {
            core.unregister(w);
        }
    }
    satisfied
}

/// [`wait_until_deadline`] for one request driven by a progress hook: the hook polls and
/// sleeps (its wait is bounded by the growing hook timeout, so a completion by another thread is
/// seen within one timeout); no waiter is registered, so its completion wakes nobody.
fn wait_one_hooked(core: &CoreRef, deadline: Option<Instant>) -> bool {
    let members = [core];
    let mut hook_timeout = MIN_HOOK_TIMEOUT;
    loop {
        core.body.poll_group(&members);
        if core.is_complete() {
            return true;
        }
        let round = match deadline {
            None => hook_timeout,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => hook_timeout.min(left),
                _ => return false,
            },
        };
        core.body.wait_group(&members, round);
        if core.is_complete() {
            return true;
        }
        hook_timeout = (hook_timeout * 2).min(MAX_HOOK_TIMEOUT);
    }
}

/// What [`wait_any`] and [`test_any`] found (MPI's `MPI_Waitany`/`MPI_Testany` outcomes).
///
/// - [`AnyOutcome::Completed`]: one request completed: its index in the array and its result;
///   it is now null (MPI: `flag = true`, `index = i`).
/// - [`AnyOutcome::Pending`]: active requests remain but none completed (only [`test_any`]
///   returns it; MPI: `flag = false`, `index = MPI_UNDEFINED`).
/// - [`AnyOutcome::AllNull`]: no request of the array is active (every one is null, or the array
///   is empty): there is nothing to wait for (MPI: `flag = true`, `index = MPI_UNDEFINED`,
///   empty status).
///
/// ```
/// use viaduct_request::{AnyOutcome, Request, test_any, wait_any};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (first, handle) = Request::generalized(());
/// let mut requests = [Request::null(), first];
/// assert!(test_any(&mut requests).is_pending());
/// handle.complete()?;
/// match wait_any(&mut requests) {
///     AnyOutcome::Completed(index, result) => {
///         assert_eq!(index, 1);
///         result?;
///     }
///     other => panic!("expected a completion, got {other:?}"),
/// }
/// assert!(test_any(&mut requests).is_all_null());
/// assert!(wait_any(&mut requests).is_all_null());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a completed request's result may hold an error"]
pub enum AnyOutcome {
    /// The request at this index completed (it is now null) with this result: the free
    /// callback's error, else the query's, else the operation's.
    Completed(usize, Result<Status, RequestError>),
    /// Active requests remain and none completed (never returned by [`wait_any`]).
    Pending,
    /// No request of the array is active: every one is null, or the array is empty.
    AllNull,
}

impl AnyOutcome {
    /// The index and result of the completed request; `None` for [`AnyOutcome::Pending`] and
    /// [`AnyOutcome::AllNull`].
    pub fn completed(self) -> Option<(usize, Result<Status, RequestError>)> {
        match self {
            AnyOutcome::Completed(index, result) => Some((index, result)),
            AnyOutcome::Pending | AnyOutcome::AllNull => None,
        }
    }

    /// Whether active requests remain and none completed.
    pub fn is_pending(&self) -> bool {
        matches!(self, AnyOutcome::Pending)
    }

    /// Whether no request of the array was active.
    pub fn is_all_null(&self) -> bool {
        matches!(self, AnyOutcome::AllNull)
    }
}

/// Completes the first complete request of the array: its index and its result.
fn finish_first(requests: &mut [Request]) -> AnyOutcome {
    if requests.iter().all(Request::is_null) {
        return AnyOutcome::AllNull;
    }
    match requests
        .iter()
        .position(|r| r.core().is_some_and(|c| c.is_complete()))
    {
        Some(index) => AnyOutcome::Completed(index, requests[index].finish()),
        None => AnyOutcome::Pending,
    }
}

/// Blocks until one request completes and makes it null: [`AnyOutcome::Completed`] with its
/// index and result, or [`AnyOutcome::AllNull`] at once when no request is active. Never
/// [`AnyOutcome::Pending`].
///
/// The result is the request's own: the free callback's error, else the query's, else the
/// operation's.
pub fn wait_any(requests: &mut [Request]) -> AnyOutcome {
    wait_until(requests, Need::Any);
    finish_first(requests)
}

/// Like [`wait_any`] but does not block: [`AnyOutcome::Pending`] when active requests remain
/// and none completed, [`AnyOutcome::AllNull`] when none is active. Progress hooks get one
/// non-blocking poll.
pub fn test_any(requests: &mut [Request]) -> AnyOutcome {
    poll_pass(requests);
    finish_first(requests)
}

/// Completes every complete request; fills `indices` (and `statuses` if given, one per index).
fn finish_complete(
    requests: &mut [Request],
    indices: &mut Vec<usize>,
    mut statuses: Option<&mut Vec<Status>>,
) -> Result<(), RequestError> {
    indices.clear();
    if let Some(s) = statuses.as_deref_mut() {
        s.clear();
    }
    let mut failed = 0;
    for (i, request) in requests.iter_mut().enumerate() {
        if !request.core().is_some_and(|c| c.is_complete()) {
            continue;
        }
        let status = request.finish_with_error();
        failed += usize::from(status.error().is_some());
        indices.push(i);
        if let Some(s) = statuses.as_deref_mut() {
            s.push(status);
        }
    }
    if failed == 0 {
        Ok(())
    } else {
        Err(RequestError::InStatus { failed })
    }
}

/// Blocks until at least one request completes, then completes every complete one: their
/// indices go to `indices`, their statuses to `statuses` (one per index, in the same order).
/// Both are cleared first; `indices` stays empty when every request is null.
///
/// `statuses` follows one rule in all four of `wait_some`, `test_some`, `wait_all` and
/// `test_all`: `None` ignores statuses (queries still run on a valid status, which is then
/// dropped); `Some(v)` clears `v` and fills it with the statuses of the requests completed by
/// the call.
///
/// If any of them failed the result is [`RequestError::InStatus`] and each status holds its
/// request's error (lost when statuses are ignored).
///
/// ```
/// use viaduct_request::{Request, wait_some};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (a, done) = Request::generalized(());
/// let (b, _pending) = Request::generalized(());
/// let mut requests = [a, b];
/// done.complete()?;
/// let (mut indices, mut statuses) = (Vec::new(), Vec::new());
/// wait_some(&mut requests, &mut indices, Some(&mut statuses))?;
/// assert_eq!(indices, [0]);
/// assert_eq!(statuses.len(), 1);
/// # Ok(())
/// # }
/// ```
pub fn wait_some(
    requests: &mut [Request],
    indices: &mut Vec<usize>,
    statuses: Option<&mut Vec<Status>>,
) -> Result<(), RequestError> {
    wait_until(requests, Need::Any);
    finish_complete(requests, indices, statuses)
}

/// Like [`wait_some`] but does not block: `indices` (and `statuses`) stay empty when nothing
/// completed.
pub fn test_some(
    requests: &mut [Request],
    indices: &mut Vec<usize>,
    statuses: Option<&mut Vec<Status>>,
) -> Result<(), RequestError> {
    poll_pass(requests);
    finish_complete(requests, indices, statuses)
}

fn finish_all(
    requests: &mut [Request],
    mut statuses: Option<&mut Vec<Status>>,
) -> Result<(), RequestError> {
    let mut failed = 0;
    for request in requests.iter_mut() {
        let status = request.finish_with_error();
        failed += usize::from(status.error().is_some());
        if let Some(s) = statuses.as_deref_mut() {
            s.push(status);
        }
    }
    if failed == 0 {
        Ok(())
    } else {
        Err(RequestError::InStatus { failed })
    }
}

/// Blocks until every request completes, then completes them all (all become null).
///
/// `statuses`, if given, is cleared and filled with one status per request, in the array's
/// order (a null request gets [`Status::empty`]); see [`wait_some`] for the rule all four
/// calls share. If any failed the result is [`RequestError::InStatus`] and each status holds
/// its request's error.
///
/// ```
/// use viaduct_request::{Request, wait_all};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (a, done) = Request::generalized(());
/// let mut requests = [a, Request::null()];
/// done.complete()?;
/// let mut statuses = Vec::new();
/// wait_all(&mut requests, Some(&mut statuses))?;
/// assert_eq!(statuses.len(), 2);
/// assert!(requests.iter().all(Request::is_null));
/// # Ok(())
/// # }
/// ```
pub fn wait_all(
    requests: &mut [Request],
    mut statuses: Option<&mut Vec<Status>>,
) -> Result<(), RequestError> {
    if let Some(s) = statuses.as_deref_mut() {
        s.clear();
    }
    wait_until(requests, Need::All);
    finish_all(requests, statuses)
}

/// If every request is complete, completes them all like [`wait_all`] (filling `statuses` the
/// same way) and returns `true`; otherwise completes none, runs no callback, leaves `statuses`
/// empty and returns `false`.
pub fn test_all(
    requests: &mut [Request],
    mut statuses: Option<&mut Vec<Status>>,
) -> Result<bool, RequestError> {
    if let Some(s) = statuses.as_deref_mut() {
        s.clear();
    }
    poll_pass(requests);
    if !satisfied(requests, Need::All) {
        return Ok(false);
    }
    finish_all(requests, statuses).map(|()| true)
}
