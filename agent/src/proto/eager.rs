//! The eager protocol: a small message travels whole, its envelope in an 8-byte header
//! (`EAGER`) or in the method tag (`EAGER_PACKED`, see [`crate::wire`]), and is delivered to
//! the oldest matching posted receive or queued as unexpected.

use crate::matching::{Envelope, MatchQueues};
use crate::proto::recv::{Completions, InPlaceData, PostedRecv, Unexpected};
use crate::wire::{self, Kind};

/// Method tag and payload of an eager message to send: packed when the context fits a tag.
#[inline]
pub(crate) fn encode(context: u32, tag: u32, data: &[u8]) -> (u64, Vec<u8>) {
    match wire::eager_packed_tag(context, tag) {
        Some(packed) => (packed, data.to_vec()),
        None => (
            wire::method_tag(Kind::Eager, 0),
            wire::eager(context, tag, data),
        ),
    }
}

/// Envelope and data of an inbound eager message of `kind` from `peer`; `Err` with the
/// payload's length when it is shorter than its header.
#[inline]
pub(crate) fn parse(peer: u32, tag: u64, data: &[u8]) -> Result<(Envelope, &[u8]), usize> {
    let (context, t, body) = wire::eager_parts(tag, data).ok_or(data.len())?;
    Ok((
        Envelope {
            context,
            source: peer,
            tag: t,
        },
        body,
    ))
}

/// Delivers `data` into the matched receive `r` and completes it (an in-place receive gets a
/// copy in the agent's memory).
pub(crate) fn deliver(done: &Completions, r: PostedRecv, env: &Envelope, data: &[u8]) {
    if r.lease.is_some() {
        return deliver_owned(done, r, env, data.to_vec());
    }
    r.counter.set_envelope(r.source_of(env.source), env.tag);
    r.buf.fill(data);
    done.finish_recv(&r.counter, &r.buf, data.len() as u64);
}

/// Delivers `data`, which the agent owns already (an unexpected message), into the matched
/// receive `r`: an in-place receive takes the buffer itself (no copy); others copy it.
pub(crate) fn deliver_owned(done: &Completions, r: PostedRecv, env: &Envelope, data: Vec<u8>) {
    let Some(slot) = &r.lease else {
        return deliver(done, r, env, &data);
    };
    let len = data.len() as u64;
    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(InPlaceData::Owned(data));
    r.counter.set_envelope(r.source_of(env.source), env.tag);
    done.note(r.counter.complete_car(len));
}

/// Completes the in-place receive `r` with `data` (`len` payload bytes).
pub(crate) fn deliver_in_place(
    done: &Completions,
    r: PostedRecv,
    env: &Envelope,
    data: InPlaceData,
    len: usize,
) {
    if let Some(slot) = &r.lease {
        *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(data);
    }
    r.counter.set_envelope(r.source_of(env.source), env.tag);
    done.note(r.counter.complete_car(len as u64));
}

/// An eager message arrived: into the oldest matching posted receive, else to the unexpected
/// queue (counted in `unexpected_bytes`). A matching in-place receive is given back, not
/// delivered: the caller lends it the message in the method's memory.
pub(crate) fn arrive(
    queues: &mut MatchQueues<PostedRecv, Unexpected>,
    unexpected_bytes: &mut usize,
    done: &Completions,
    env: Envelope,
    body: &[u8],
) -> Option<PostedRecv> {
    match queues.arrive(&env) {
        Some((_, r)) if r.lease.is_some() => return Some(r),
        Some((_, r)) => deliver(done, r, &env, body),
        None => {
            *unexpected_bytes += body.len();
            queues.push_unexpected(
                env,
                Unexpected::Eager {
                    data: body.to_vec(),
                    sync: None,
                },
            );
        }
    }
    None
}
