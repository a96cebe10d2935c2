//! The xfer engine inside the agent's state: running blocks (schedules of steps), the table
//! that routes arriving pieces to their block, pieces that arrived before their block, and the
//! ready queue the progress pass drains.
//!
//! Everything here runs with the agent's mutex held. Arrivals never post: a piece's arrival
//! completes its receive CAR, does what its byte range lists (store, combine) and pushes the
//! dependents (forwards, the end of a step) onto the ready queue; the progress pass then posts
//! the ready pieces through the agent's own write path ([`crate::engine::State::drain_xfer`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::Completions;
use super::xfer_buffers::RunShared;
use super::xfer_plan::{Action, OutPart, Step};
use crate::error::AgentError;
use crate::proto::{Failure, ProtocolError};
use crate::request::CarCounter;
use crate::wire;
use crate::xfer_base::XferError;

/// (context, source world rank, tag, block sequence).
type Key = (u32, u32, u32, u32);

/// The length a piece announces when its sender's block failed before the message was whole:
/// the receiving block fails with [`XferError::SenderFailed`] instead of waiting for pieces
/// that never come.
const FAILED: u64 = u64::MAX;

/// Work the progress pass must do.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ready {
    /// Pieces of an outgoing message may be ready to leave.
    Emit { run: u64, out: usize },
    /// Every message of the run's current step is finished: start the next one.
    StepDone { run: u64 },
}

/// A schedule of blocks in progress.
struct Run {
    ctx: u32,
    cur: Option<Step>,
    later: VecDeque<Step>,
    bufs: Vec<Vec<u8>>,
    counter: CarCounter,
    shared: Arc<RunShared>,
}

/// A piece that arrived before its block started.
struct Early {
    total: u64,
    data: Vec<u8>,
}

/// A piece to post: destination, wire buffer, payload bytes, the request it counts for.
pub(crate) type Piece = (u32, Vec<u8>, u64, CarCounter);

/// All xfer state of one agent.
pub(crate) struct XferEngine {
    runs: HashMap<u64, Run>,
    next_run: u64,
    routes: HashMap<Key, (u64, usize)>,
    early: HashMap<Key, VecDeque<Early>>,
    /// Bytes held in `early`: counted with the unexpected eager messages' bytes against
    /// `Config::max_unexpected_bytes`, past which the agent stops reading from remote VCs.
    early_bytes: usize,
    send_seq: HashMap<(u32, u32, u32), u32>,
    recv_seq: HashMap<(u32, u32, u32), u32>,
    ready: VecDeque<Ready>,
    /// Pieces that tell the receivers of failed runs' unfinished messages that nothing more
    /// comes (destination, wire buffer), posted by the progress pass.
    notices: VecDeque<(u32, Vec<u8>)>,
    /// Messages of failed runs still arriving: bytes seen so far; their pieces are dropped
    /// until the whole message went by.
    dead: HashMap<Key, u64>,
    chunk: usize,
    /// The agent's count of completed requests.
    done: Completions,
}

impl std::fmt::Debug for XferEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XferEngine")
            .field("runs", &self.runs.len())
            .field("early", &self.early.len())
            .field("ready", &self.ready.len())
            .finish()
    }
}

fn next(map: &mut HashMap<(u32, u32, u32), u32>, key: (u32, u32, u32)) -> u32 {
    let e = map.entry(key).or_insert(0);
    let v = *e;
    *e = e.wrapping_add(1);
    v
}

impl XferEngine {
    pub(crate) fn new(chunk: usize, done: Completions) -> XferEngine {
        XferEngine {
            runs: HashMap::new(),
            next_run: 1,
            routes: HashMap::new(),
            early: HashMap::new(),
            early_bytes: 0,
            send_seq: HashMap::new(),
            recv_seq: HashMap::new(),
            ready: VecDeque::new(),
            notices: VecDeque::new(),
            dead: HashMap::new(),
            chunk: chunk.max(1),
            done,
        }
    }

    /// Starts a schedule: numbers every message of every step in start order, then starts the
    /// first step.
    pub(crate) fn start(
        &mut self,
        ctx: u32,
        mut steps: Vec<Step>,
        bufs: Vec<Vec<u8>>,
        counter: CarCounter,
        shared: Arc<RunShared>,
    ) {
        for step in &mut steps {
            for s in &mut step.ins {
                s.seq = next(&mut self.recv_seq, (ctx, s.peer, step.tag));
            }
            for o in &mut step.outs {
                o.seq = next(&mut self.send_seq, (ctx, o.peer, step.tag));
            }
        }
        let id = self.next_run;
        self.next_run += 1;
        let mut later: VecDeque<Step> = steps.into();
        let cur = later.pop_front();
        self.runs.insert(
            id,
            Run {
                ctx,
                cur,
                later,
                bufs,
                counter,
                shared,
            },
        );
        self.activate(id);
    }

    /// Starts the current step of `rid`: routes its incoming messages, reads its local send
    /// ranges, and feeds it the pieces that arrived early.
    fn activate(&mut self, rid: u64) {
        let chunk = self.chunk;
        let Some(run) = self.runs.get_mut(&rid) else {
            return;
        };
        let Some(step) = run.cur.as_mut() else {
            self.finish(rid, None);
            return;
        };
        let ctx = run.ctx;
        let tag = step.tag;
        if !step.ins.is_empty() {
            let _ = run.counter.add_outstanding(step.ins.len() as u32);
        }
        let mut keys = Vec::with_capacity(step.ins.len());
        for (i, s) in step.ins.iter().enumerate() {
            let key = (ctx, s.peer, tag, s.seq);
            self.routes.insert(key, (rid, i));
            keys.push((key, i));
        }
        for (o, out) in step.outs.iter_mut().enumerate() {
            if out.total == 0 {
                out.parts.clear();
                out.parts.push_back(OutPart::Queue {
                    remaining: 0,
                    pieces: VecDeque::from([wire::xfer_piece(ctx, tag, out.seq, 0, &[])]),
                });
            } else {
                for part in out.parts.iter_mut() {
                    if let OutPart::Local { buf, first, last } = *part {
                        let bytes = &run.bufs[buf][first..last];
                        let pieces = bytes
                            .chunks(chunk)
                            .map(|c| wire::xfer_piece(ctx, tag, out.seq, out.total, c))
                            .collect();
                        *part = OutPart::Queue {
                            remaining: 0,
                            pieces,
                        };
                    }
                }
            }
            self.ready.push_back(Ready::Emit { run: rid, out: o });
        }
        if step.pending == 0 {
            self.ready.push_back(Ready::StepDone { run: rid });
        }
        for (key, i) in keys {
            if let Some(mut q) = self.take_early(&key) {
                while let Some(e) = q.pop_front() {
                    self.arrive(rid, i, e.total, &e.data);
                }
            }
        }
    }

    /// Handles an `XFER` piece from `peer`.
    pub(crate) fn inbound(&mut self, peer: u32, data: &[u8]) -> Result<(), ProtocolError> {
        let (Some(ctx), Some(tag), Some(seq), Some(total)) = (
            wire::u32_at(data, 0),
            wire::u32_at(data, 4),
            wire::u32_at(data, 8),
            wire::u64_at(data, 16),
        ) else {
            return Err(ProtocolError::XferTooShort { len: data.len() });
        };
        let body = &data[wire::XFER_HEADER..];
        let key = (ctx, peer, tag, seq);
        if let Some(&(rid, i)) = self.routes.get(&key) {
            self.arrive(rid, i, total, body);
        } else if let Some(seen) = self.dead.get_mut(&key) {
            *seen += body.len() as u64;
            if *seen >= total || total == FAILED {
                self.dead.remove(&key);
            }
        } else {
            self.early_bytes += body.len();
            self.early.entry(key).or_default().push_back(Early {
                total,
                data: body.to_vec(),
            });
        }
        Ok(())
    }

    /// A piece of the `i`th incoming message of run `rid` arrived: do what its ranges list and
    /// queue their dependents.
    fn arrive(&mut self, rid: u64, i: usize, total: u64, data: &[u8]) {
        let chunk = self.chunk;
        let Some(run) = self.runs.get_mut(&rid) else {
            return;
        };
        let Run {
            cur,
            bufs,
            ctx,
            counter,
            shared,
            ..
        } = run;
        let Some(step) = cur.as_mut() else {
            return;
        };
        let tag = step.tag;
        let s = &mut step.ins[i];
        let off = s.got;
        let end = off + data.len() as u64;
        s.announced = Some(total);
        if total == FAILED && !s.done {
            let err = XferError::SenderFailed { peer: s.peer };
            self.fail(rid, AgentError::Xfer(err));
            return;
        }
        if s.done || total != s.expected || end > s.expected {
            s.got = end;
            let err = XferError::LengthMismatch {
                peer: s.peer,
                len: total,
                expected: s.expected,
            };
            self.fail(rid, AgentError::Xfer(err));
            return;
        }
        shared.pieces_in.fetch_add(1, Ordering::Relaxed);
        let outs = &mut step.outs;
        // Flows that may now go ahead.
        let mut to_try: Vec<usize> = Vec::new();
        while let Some(seg) = s.segs.get_mut(s.cursor) {
            if seg.start > end {
                break;
            }
            let a = off.max(seg.start);
            let b = end.min(seg.end);
            if a < b {
                let slice = &data[(a - off) as usize..(b - off) as usize];
                let rel = (a - seg.start) as usize;
                match &seg.action {
                    Action::Store { buf, at } => {
                        bufs[*buf][at + rel..at + rel + slice.len()].copy_from_slice(slice);
                        seg.progress = rel + slice.len();
                        to_try.extend_from_slice(&seg.flows);
                    }
                    Action::Discard => {}
                    Action::Combine { buf, at, red } => {
                        let elem = red.elem_size();
                        let acc = &mut bufs[*buf];
                        let mut pos = rel - seg.carry.len();
                        let mut x = slice;
                        if !seg.carry.is_empty() {
                            let take = (elem - seg.carry.len()).min(x.len());
                            seg.carry.extend_from_slice(&x[..take]);
                            x = &x[take..];
                            if seg.carry.len() == elem {
                                red.combine(&seg.carry, &mut acc[at + pos..at + pos + elem]);
                                seg.carry.clear();
                                pos += elem;
                            }
                        }
                        let whole = x.len() / elem * elem;
                        red.combine(&x[..whole], &mut acc[at + pos..at + pos + whole]);
                        pos += whole;
                        seg.carry.extend_from_slice(&x[whole..]);
                        seg.progress = pos;
                        to_try.extend_from_slice(&seg.flows);
                    }
                }
                if let Some((o, p)) = seg.forward {
                    let out = &mut outs[o];
                    let (seq, total) = (out.seq, out.total);
                    if let Some(OutPart::Queue { remaining, pieces }) = out.part(p) {
                        for c in slice.chunks(chunk) {
                            pieces.push_back(wire::xfer_piece(*ctx, tag, seq, total, c));
                        }
                        *remaining -= slice.len() as u64;
                    }
                    self.ready.push_back(Ready::Emit { run: rid, out: o });
                }
            }
            if seg.end <= end {
                s.cursor += 1;
            } else {
                break;
            }
        }
        s.got = end;
        let done = s.got == s.expected;
        to_try.sort_unstable();
        to_try.dedup();
        for f in to_try {
            if let Some(o) = try_flow(step, bufs, f, *ctx, chunk) {
                self.ready.push_back(Ready::Emit { run: rid, out: o });
            }
        }
        let s = &mut step.ins[i];
        if done {
            s.done = true;
            self.routes.remove(&(*ctx, s.peer, tag, s.seq));
            self.done.note(counter.complete_car(s.expected));
            step.pending -= 1;
            if step.pending == 0 {
                self.ready.push_back(Ready::StepDone { run: rid });
            }
        }
    }

    /// The next work item of the progress pass.
    /// Whether any schedule is running (its blocks wait on their peers).
    pub(crate) fn running(&self) -> bool {
        !self.runs.is_empty()
    }

    /// The next piece telling a receiver that a failed run's message to it never comes.
    pub(crate) fn pop_notice(&mut self) -> Option<(u32, Vec<u8>)> {
        self.notices.pop_front()
    }

    pub(crate) fn pop_ready(&mut self) -> Option<Ready> {
        self.ready.pop_front()
    }

    /// Takes the pieces of an outgoing message that may leave now (in message order), each
    /// counted as one more CAR of the run's request.
    pub(crate) fn emit(&mut self, rid: u64, o: usize) -> Vec<Piece> {
        let Some(run) = self.runs.get_mut(&rid) else {
            return Vec::new();
        };
        let Some(step) = run.cur.as_mut() else {
            return Vec::new();
        };
        let Some(out) = step.outs.get_mut(o) else {
            return Vec::new();
        };
        let mut v = Vec::new();
        if out.done {
            return v;
        }
        while let Some(OutPart::Queue { remaining, pieces }) = out.parts.front_mut() {
            while let Some(p) = pieces.pop_front() {
                let bytes = (p.len() - wire::XFER_HEADER) as u64;
                v.push((out.peer, p, bytes, run.counter.clone()));
            }
            if *remaining == 0 {
                out.parts.pop_front();
                out.popped += 1;
            } else {
                break;
            }
        }
        if !v.is_empty() {
            let _ = run.counter.add_outstanding(v.len() as u32);
            run.shared
                .pieces_out
                .fetch_add(v.len() as u64, Ordering::Relaxed);
        }
        if out.parts.is_empty() {
            out.done = true;
            step.pending -= 1;
            if step.pending == 0 {
                self.ready.push_back(Ready::StepDone { run: rid });
            }
        }
        v
    }

    /// The current step of `rid` finished: start the next, or finish the run.
    pub(crate) fn step_done(&mut self, rid: u64) {
        let Some(run) = self.runs.get_mut(&rid) else {
            return;
        };
        if run.cur.as_ref().is_none_or(|s| s.pending != 0) {
            return;
        }
        run.shared.steps_done.fetch_add(1, Ordering::Relaxed);
        run.cur = run.later.pop_front();
        if run.cur.is_some() {
            self.activate(rid);
        } else {
            self.finish(rid, None);
        }
    }

    /// Ends a run: its buffers go back to the caller, its request completes (with `error`).
    fn finish(&mut self, rid: u64, error: Option<AgentError>) {
        let Some(run) = self.runs.remove(&rid) else {
            return;
        };
        let mut open = 0;
        if let Some(step) = &run.cur {
            for s in step.ins.iter().filter(|s| !s.done) {
                let key = (run.ctx, s.peer, step.tag, s.seq);
                self.routes.remove(&key);
                open += 1;
                if error.is_some() {
                    self.bury(key, s.got, s.announced);
                }
            }
        }
        if error.is_some() {
            // Messages of blocks that never started: drop what came, and what is still coming.
            for step in &run.later {
                for s in &step.ins {
                    self.bury((run.ctx, s.peer, step.tag, s.seq), 0, None);
                }
            }
        }
        if error
            .as_ref()
            .is_some_and(|e| !matches!(e, AgentError::Finalized))
        {
            // Every receiver of a message this run will not finish is told so, and fails
            // instead of waiting (a length mismatch upstream in a broadcast tree, say).
            let steps = run.cur.iter().chain(run.later.iter());
            for step in steps {
                for o in step.outs.iter().filter(|o| !o.done) {
                    let piece = wire::xfer_piece(run.ctx, step.tag, o.seq, FAILED, &[]);
                    self.notices.push_back((o.peer, piece));
                }
            }
        }
        *run.shared.bufs.lock().unwrap_or_else(|e| e.into_inner()) = Some(run.bufs);
        for _ in 0..open {
            self.done.note(run.counter.complete_car(0));
        }
        match error {
            None => self.done.note(run.counter.complete_car(0)),
            Some(e) => self.done.note(run.counter.fail_car(e)),
        }
    }

    /// Drops the pieces of a message nobody will receive, those here and those still coming.
    fn bury(&mut self, key: Key, mut seen: u64, mut total: Option<u64>) {
        if let Some(q) = self.take_early(&key) {
            for e in q {
                seen += e.data.len() as u64;
                total = Some(e.total);
            }
        }
        // A message whose announced length went by already is forgotten; otherwise its later
        // pieces are dropped as they come.
        if total.is_none_or(|t| seen < t && t != FAILED) {
            self.dead.insert(key, seen);
        }
    }

    fn fail(&mut self, rid: u64, error: AgentError) {
        self.finish(rid, Some(error));
    }

    /// Fails every run that still needs `peer`.
    pub(crate) fn peer_failed(&mut self, peer: u32, failure: &Failure) {
        let ids: Vec<u64> = self
            .runs
            .iter()
            .filter(|(_, r)| {
                r.cur.as_ref().is_some_and(|s| {
                    s.ins.iter().any(|i| i.peer == peer && !i.done)
                        || s.outs.iter().any(|o| o.peer == peer && !o.done)
                }) || r.later.iter().any(|s| {
                    s.ins.iter().any(|i| i.peer == peer) || s.outs.iter().any(|o| o.peer == peer)
                })
            })
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.fail(id, failure.error(peer));
        }
        // Nothing more comes from it.
        self.dead.retain(|k, _| k.1 != peer);
        let mut dropped = 0;
        self.early.retain(|k, q| {
            if k.1 == peer {
                dropped += q.iter().map(|e| e.data.len()).sum::<usize>();
            }
            k.1 != peer
        });
        self.early_bytes -= dropped;
    }

    /// Bytes of pieces that arrived before their blocks started.
    pub(crate) fn early_bytes(&self) -> usize {
        self.early_bytes
    }

    fn take_early(&mut self, key: &Key) -> Option<VecDeque<Early>> {
        let q = self.early.remove(key)?;
        self.early_bytes -= q.iter().map(|e| e.data.len()).sum::<usize>();
        Some(q)
    }

    /// Fails every run (at finalize).
    pub(crate) fn fail_all(&mut self) {
        let ids: Vec<u64> = self.runs.keys().copied().collect();
        for id in ids {
            self.fail(id, AgentError::Finalized);
        }
        self.early.clear();
        self.early_bytes = 0;
        self.dead.clear();
        self.ready.clear();
        self.notices.clear();
    }
}

/// Sends what flow `f` may send now: the prefix of its bytes that every range it depends on
/// has stored or combined. Returns the outgoing message that got pieces.
fn try_flow(step: &mut Step, bufs: &[Vec<u8>], f: usize, ctx: u32, chunk: usize) -> Option<usize> {
    let flow = &step.flows[f];
    let (buf, at, len) = (flow.buf, flow.at, flow.len);
    let mut allowed = len;
    for &(di, dj) in &flow.deps {
        let d = &step.ins[di].segs[dj];
        if let Action::Store { at: dat, .. } | Action::Combine { at: dat, .. } = d.action {
            let dend = dat + (d.end - d.start) as usize;
            let lo = (dat + d.progress).max(at);
            let hi = dend.min(at + len);
            if lo < hi {
                allowed = allowed.min(lo - at);
            }
        }
    }
    let from = flow.done;
    if allowed <= from {
        return None;
    }
    let (o, p) = flow.out;
    step.flows[f].done = allowed;
    let tag = step.tag;
    let out = &mut step.outs[o];
    let (seq, total) = (out.seq, out.total);
    let bytes = &bufs[buf][at + from..at + allowed];
    if let Some(OutPart::Queue { remaining, pieces }) = out.part(p) {
        for c in bytes.chunks(chunk) {
            pieces.push_back(wire::xfer_piece(ctx, tag, seq, total, c));
        }
        *remaining -= bytes.len() as u64;
    }
    Some(o)
}

/// The slot a run's buffers come back in.
pub(crate) type BufSlot = Mutex<Option<Vec<Vec<u8>>>>;
