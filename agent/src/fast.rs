//! Fast paths of the blocking `send` and `recv`: the common case handled in one lock round,
//! with no request, no receive buffer and no wake-up.
//!
//! # Send
//!
//! A blocking [`Agent::send`] of an eager message to a peer whose VC has nothing queued is
//! posted as a **copy**: the method gathers header and data into its own send memory (the
//! shared-memory ring cell, the buffer of an io_uring send, the registered send slot of
//! verbs) before the post returns. The caller's buffer is free at once, which is all
//! `MPI_Send` promises, so no request is made and nothing is waited for. The method's
//! completion for the descriptor still arrives, exactly once, and is counted off by the
//! progress pass (its id is a [`DescId::fast`]); a failed one fails the VC like any other.
//! `finalize` waits for these too.
//!
//! A nonblocking [`Agent::isend`] of such a message is posted the same way and its request
//! is **complete when `isend` returns**, for the same reason (the copy is on its way, and the
//! buffer is free), as MPICH completes its small eager sends at once. Before, the request
//! waited for the method's completion, and another thread that ran the next pass did that
//! work for every send posted meanwhile, under the agent's lock: measured with `viaduct bench
//! threads --transport tcp`, a thread asleep in `recv` woke every 10 ms and completed some
//! 200 sends in one pass of 100-170 us, and a post that came then waited for it.
//!
//! Anything else (a rendezvous size, a queued or reserved VC, a method without resources, a
//! failed VC, the own rank, a synchronous send) takes the general path: a request that
//! completes with the method's completions.
//!
//! # Receive
//!
//! A blocking [`Agent::recv`] first looks for an eager message in the unexpected queue (which
//! holds every matching message that arrived earlier, in order). Failing that, it spins on the
//! VCs it can receive from: each turn **looks at the next inbound message in place** (`next`)
//! and takes the completions of their descriptors (every turn over verbs, whose `next` finds
//! them; every [`REAP_EVERY`] turns over shared memory and TCP, whose `next` makes the
//! method's progress on its own, so that a turn stays short): an eager message that the
//! receive accepts, that no posted receive accepts (those were posted first and come first),
//! and that fits, is copied straight
//! from the method's receive memory into the caller's buffer and consumed; the status is built
//! from its envelope. Any other message is handed to the general progress pass for that VC,
//! which matches it against the posted receives or queues it as unexpected, answers rendezvous,
//! and notices failures; then the unexpected queue is looked at again. Every 64 turns a full
//! pass over every VC runs, so traffic on other VCs keeps moving.
//!
//! After a bounded number of turns (the adaptive spin count of the progress engine) without a
//! message, or at anything unusual (a rendezvous announcement, a message longer than the
//! buffer, a failed or finalized VC, stream bytes at the head), the receive falls back to the
//! general path: it posts a receive and waits on its request, which sleeps in the methods,
//! reports errors and truncation, and never hangs on a dead peer. Messages seen in the fast
//! phase were either delivered or queued in arrival order, so the fallback keeps MPI's
//! non-overtaking order.

use crate::agent::Agent;
use crate::engine::{State, Unexpected};
use crate::matching::{Envelope, Pattern, Source, TagMatch};
use crate::proto::DescId;
use crate::request::CarCounter;
use crate::request::Status;
use crate::vc::Link;
use crate::wire::{self, Kind};
use viaduct_fallback::copy::copy;

/// A full progress pass over every VC runs every this many turns of a fast receive.
const FULL_PASS_EVERY: u32 = 64;

/// The first this many turns of a fast receive follow each other at once; later turns pause
/// first (`spin_loop`, the x86 `pause`, 25 ns on this machine): a message of a ping-pong comes
/// within the first few turns, and a pause there delays seeing it by up to its length
/// (measured: 7% of an 8-byte shared-memory ping-pong). The raw method benchmark polls the
/// same way (`viaduct bench method`).
const HOT_TURNS: u32 = 64;

/// Over shared memory and TCP, a fast receive takes completions on its first turn and then
/// every this many turns. Their completions are of sends, which a ping-pong's receive has just
/// made: polling for them on every turn lengthened the turn, and with it the time from a
/// message's arrival to the turn that sees it (measured: 3-4% of an 8-byte shared-memory
/// ping-pong).
const REAP_EVERY: u32 = 8;

/// What one turn of the receive fast path found.
enum Turn {
    /// The message is in the caller's buffer.
    Done(Status),
    /// Nothing yet: spin again.
    Nothing,
    /// Leave the fast path for the general one.
    Fallback,
}

impl Agent {
    /// Posts an eager message to a peer as a copy when that can be done now; `false` when the
    /// general path must take it.
    pub(crate) fn send_now(&self, dest: u32, tag: u32, data: &[u8]) -> bool {
        let shared = &self.shared;
        if dest == shared.rank || dest >= shared.size || tag == u32::MAX {
            return false;
        }
        let mut st = shared.lock();
        if st.finalized || data.len() > st.book.eager_limit {
            return false;
        }
        st.fast_send(dest, self.context, tag, data)
    }

    /// Receives into `buf` without a request when the message comes soon and simply; `None`
    /// when the general path must take over (nothing lost: see the module docs).
    ///
    /// Inlined, with its turn functions, into the caller: passed through three frames, the
    /// status and turn went through the stack, and at some stack offsets (the start of the
    /// stack moves from run to run) those copies cost 20-50 extra cycles per receive on each
    /// side (measured by shifting the stack with the environment's size, ASLR off).
    #[inline(always)]
    pub(crate) fn recv_now(&self, buf: &mut [u8], source: Source, tag: TagMatch) -> Option<Status> {
        if tag == TagMatch::Tag(u32::MAX) {
            return None;
        }
        let pattern = Pattern {
            context: self.context,
            source,
            tag,
        };
        let spins = self
            .shared
            .spin_now
            .load(std::sync::atomic::Ordering::Relaxed);
        for turn in 0..spins.max(1) {
            let mut st = self.shared.lock();
            if st.finalized {
                return None;
            }
            if turn % FULL_PASS_EVERY == FULL_PASS_EVERY - 1 {
                st.progress();
            }
            match recv_turn(&mut st, &pattern, buf, turn % REAP_EVERY == 0) {
                Turn::Done(status) => return Some(status),
                Turn::Fallback => return None,
                Turn::Nothing => {}
            }
            drop(st);
            if turn >= HOT_TURNS {
                std::hint::spin_loop();
            }
        }
        None
    }
}

impl State {
    /// Posts an eager message with a request (`isend`) straight to the method when the VC of
    /// `dest` has nothing queued, gathering header and data without a staging `Vec`, and
    /// completes the request (the method holds the copy: see the module documentation); gives
    /// the counter back when the general path must take it.
    pub(crate) fn eager_now(
        &mut self,
        dest: u32,
        context: u32,
        tag: u32,
        data: &[u8],
        counter: CarCounter,
    ) -> Result<(), CarCounter> {
        if !self.fast_send(dest, context, tag, data) {
            return Err(counter);
        }
        // The method holds the copy: the request is complete (see the module documentation).
        self.book.done.note(counter.complete_car(data.len() as u64));
        Ok(())
    }

    /// Posts an eager message to `dest` as a fast send (a [`DescId::fast`] id, counted off
    /// when the method's completion comes) when the method takes it now; `false` when the
    /// general path must take it.
    fn fast_send(&mut self, dest: u32, context: u32, tag: u32, data: &[u8]) -> bool {
        let id = DescId::fast(self.book.id()).raw();
        if !self.post_eager(id, dest, context, tag, data) {
            return false;
        }
        self.book.fast_send_posted(dest);
        true
    }

    /// Posts eager message `id` to `dest` straight to the method when its VC has nothing
    /// queued (header and data gathered by the method); `false` when the general path must
    /// take it (a method error fails the VC first, so that path reports it).
    fn post_eager(&mut self, id: u64, dest: u32, context: u32, tag: u32, data: &[u8]) -> bool {
        let vc = &mut self.vcs[dest as usize];
        if vc.failed.is_some() || vc.has_queued() {
            return false;
        }
        let Link::Remote(m) = &mut vc.link else {
            return false;
        };
        let posted = match wire::eager_packed_tag(context, tag) {
            Some(packed) => m.post_parts(id, packed, &[data]),
            None => {
                let header = wire::eager_header(context, tag);
                m.post_parts(id, wire::method_tag(Kind::Eager, 0), &[&header, data])
            }
        };
        match posted {
            Ok(posted) => posted,
            Err(e) => {
                self.fail_vc(dest, crate::engine::chain(&e));
                false
            }
        }
    }
}

impl Agent {
    /// Keeps the memory of a finished blocking receive for the next large message (see
    /// [`crate::spare`]), once its bytes were copied out.
    pub(crate) fn recycle(&self, data: &crate::recv_buffer::RecvBuffer) {
        if data.capacity() >= crate::spare::MIN_BYTES {
            if let Some(v) = data.take_memory() {
                if v.capacity() >= crate::spare::MIN_BYTES {
                    self.shared.lock().book.spare.put(v);
                }
            }
        }
    }
}

/// One turn of the receive fast path, with the agent's state locked; `reap`: take the
/// completions of shared-memory and TCP VCs on this turn.
#[inline(always)]
fn recv_turn(st: &mut State, pattern: &Pattern, buf: &mut [u8], reap: bool) -> Turn {
    if let Some(t) = from_unexpected(st, pattern, buf) {
        return t;
    }
    let (first, last) = match pattern.source {
        Source::Rank(r) => (r as usize, r as usize + 1),
        Source::Any => (0, st.vcs.len()),
    };
    for i in first..last {
        match in_place(st, i, pattern, buf, reap) {
            Turn::Nothing => {}
            done => return done,
        }
    }
    Turn::Nothing
}

/// Takes the oldest matching eager message from the unexpected queue.
fn from_unexpected(st: &mut State, pattern: &Pattern, buf: &mut [u8]) -> Option<Turn> {
    if st.book.queues.unexpected_len() == 0 {
        return None;
    }
    let fits =
        |u: &Unexpected| matches!(u, Unexpected::Eager { data, .. } if data.len() <= buf.len());
    let Ok((env, Unexpected::Eager { data, sync })) =
        st.book.queues.take_unexpected_if(pattern, fits)?
    else {
        return Some(Turn::Fallback);
    };
    st.book.unexpected_bytes -= data.len();
    copy(&mut buf[..data.len()], &data);
    if let Some(s) = sync {
        st.book.done.note(s.complete_car(data.len() as u64));
    }
    Some(Turn::Done(Status::message(
        env.source,
        env.tag,
        data.len() as u64,
    )))
}

/// What a turn found at the head of a VC's inbound messages.
enum Head {
    /// An eager message for this receive, copied out: envelope, payload and whole length.
    Taken(Envelope, usize, usize),
    /// Something the general pass must handle (another message, stream bytes, an error).
    Other,
}

/// Looks at the next inbound message of VC `i` in place, and reaps its completions (over
/// shared memory and TCP only when `reap`).
#[inline(always)]
fn in_place(st: &mut State, i: usize, pattern: &Pattern, buf: &mut [u8], reap: bool) -> Turn {
    let State { vcs, book, .. } = st;
    let vc = &mut vcs[i];
    let peer = vc.peer;
    if !matches!(vc.link, Link::Remote(_)) {
        return match pattern.source {
            // A receive from the own rank only ever matches the unexpected queue.
            Source::Rank(_) => Turn::Fallback,
            Source::Any => Turn::Nothing,
        };
    }
    if vc.failed.is_some() || vc.drained || vc.stream_at_head || vc.held {
        return match pattern.source {
            Source::Rank(_) => Turn::Fallback,
            Source::Any => Turn::Nothing,
        };
    }
    // Verbs: one pass of the method per turn; `next` makes it and the completions it found
    // are taken after it. Shared memory and TCP: completions first (a pass) on the turns that
    // reap, then `next`, so a message found goes to the caller at once.
    let after = matches!(&vc.link, Link::Remote(m) if m.next_finds_completions());
    if !after && reap {
        if let (_, Some(reason)) = crate::engine::reap(vc, book) {
            st.fail_vc(peer, reason);
            return Turn::Fallback;
        }
    }
    let Link::Remote(m) = &mut vc.link else {
        return Turn::Fallback;
    };
    let head = match m.next() {
        Ok(None) => None,
        Ok(Some((tag, data))) => {
            let eager = wire::eager_parts(tag, data).map(|(context, tag, body)| {
                let env = Envelope {
                    context,
                    source: peer,
                    tag,
                };
                (env, body)
            });
            match eager {
                Some((env, body))
                    if body.len() <= buf.len()
                        && pattern.accepts(&env)
                        && !book.queues.any_posted(|p, _| p.accepts(&env)) =>
                {
                    copy(&mut buf[..body.len()], body);
                    Some(Head::Taken(env, body.len(), data.len()))
                }
                _ => Some(Head::Other),
            }
        }
        Err(_) => Some(Head::Other),
    };
    let turn = match head {
        None => Turn::Nothing,
        Some(Head::Taken(env, n, whole)) => {
            let done = Turn::Done(Status::message(env.source, env.tag, n as u64));
            if let Err(e) = m.consume(whole) {
                // The message was taken; the VC is broken for what follows.
                st.fail_vc(peer, crate::engine::chain(&e));
                return done;
            }
            done
        }
        Some(Head::Other) => {
            // Not ours, or not simple: the general pass handles it, then look again.
            st.progress_on(Some(peer));
            return from_unexpected(st, pattern, buf).unwrap_or(Turn::Nothing);
        }
    };
    // Completions are taken on every turn (here without a pass), so a rank whose receives
    // always find their message at once still counts off its sends.
    if after {
        if let (_, Some(reason)) = crate::engine::reap_after_next(vc, book) {
            st.fail_vc(peer, reason);
            if matches!(turn, Turn::Nothing) {
                return Turn::Fallback;
            }
        }
    }
    turn
}
