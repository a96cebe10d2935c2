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

/// Completes the first complete request of the array: its index and its result.
fn finish_first(requests: &mut [Request]) -> Option<(usize, Result<Status, RequestError>)> {
    let index = requests
        .iter()
        .position(|r| r.core().is_some_and(|c| c.is_complete()))?;
    Some((index, requests[index].finish()))
}

/// Blocks until one request completes; returns its index and result, and makes it null.
/// `None` when every request is null (MPI's `MPI_UNDEFINED`).
///
/// The result is the request's own: the free callback's error, else the query's, else the
/// operation's.
pub fn wait_any(requests: &mut [Request]) -> Option<(usize, Result<Status, RequestError>)> {
    wait_until(requests, Need::Any);
    finish_first(requests)
}

/// Like [`wait_any`] but does not block: `None` when no request completed (also when every
/// request is null; check [`Request::is_null`] to tell these apart). Progress hooks get one
/// non-blocking poll.
pub fn test_any(requests: &mut [Request]) -> Option<(usize, Result<Status, RequestError>)> {
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
/// indices go to `indices`, their statuses to `statuses` (`None`: ignore statuses; queries still
/// run on a valid status, which is then dropped). Both are cleared first; `indices` stays empty
/// when every request is null.
///
/// If any of them failed the result is [`RequestError::InStatus`] and each status holds its
/// request's error (lost when statuses are ignored).
pub fn wait_some(
    requests: &mut [Request],
    indices: &mut Vec<usize>,
    statuses: Option<&mut Vec<Status>>,
) -> Result<(), RequestError> {
    wait_until(requests, Need::Any);
    finish_complete(requests, indices, statuses)
}

/// Like [`wait_some`] but does not block: `indices` stays empty when nothing completed.
pub fn test_some(
    requests: &mut [Request],
    indices: &mut Vec<usize>,
    statuses: Option<&mut Vec<Status>>,
) -> Result<(), RequestError> {
    poll_pass(requests);
    finish_complete(requests, indices, statuses)
}

fn check_len(requests: &[Request], statuses: &Option<&mut [Status]>) -> Result<(), RequestError> {
    match statuses {
        Some(s) if s.len() != requests.len() => Err(RequestError::StatusLength {
            requests: requests.len(),
            statuses: s.len(),
        }),
        _ => Ok(()),
    }
}

fn finish_all(
    requests: &mut [Request],
    mut statuses: Option<&mut [Status]>,
) -> Result<(), RequestError> {
    let mut failed = 0;
    for (i, request) in requests.iter_mut().enumerate() {
        let status = request.finish_with_error();
        failed += usize::from(status.error().is_some());
        if let Some(s) = statuses.as_deref_mut() {
            s[i] = status;
        }
    }
    if failed == 0 {
        Ok(())
    } else {
        Err(RequestError::InStatus { failed })
    }
}

/// Blocks until every request completes, then completes them all (all become null).
/// `statuses`, if given, must have one entry per request (null requests get an empty status).
/// If any failed the result is [`RequestError::InStatus`] and each status holds its request's
/// error.
pub fn wait_all(
    requests: &mut [Request],
    statuses: Option<&mut [Status]>,
) -> Result<(), RequestError> {
    check_len(requests, &statuses)?;
    wait_until(requests, Need::All);
    finish_all(requests, statuses)
}

/// If every request is complete, completes them all like [`wait_all`] and returns `true`;
/// otherwise completes none, runs no callback and returns `false`.
pub fn test_all(
    requests: &mut [Request],
    statuses: Option<&mut [Status]>,
) -> Result<bool, RequestError> {
    check_len(requests, &statuses)?;
    poll_pass(requests);
    if !satisfied(requests, Need::All) {
        return Ok(false);
    }
    finish_all(requests, statuses).map(|()| true)
}
