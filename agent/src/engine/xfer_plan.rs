//! A block's ops, checked and turned into the CAR graph the engine runs: per source an
//! incoming message whose byte ranges list what depends on them (store, combine, forward),
//! per destination an outgoing message made of parts (local bytes, forwarded bytes).

use std::collections::VecDeque;

use crate::xfer_base::{Reduction, XferError};

/// What an op does.
#[derive(Debug, Clone)]
pub(crate) enum OpKind {
    /// Receive into the buffer.
    Recv,
    /// Send from the buffer.
    Send,
    /// Receive into the buffer and forward what arrived.
    RecvForward,
    /// Forward bytes without keeping them.
    Forward,
    /// Combine what arrives into the buffer.
    RecvMop(Reduction),
    /// Combine what arrives into the buffer and forward the result.
    RecvMopForward(Reduction),
}

impl OpKind {
    fn receives(&self) -> bool {
        !matches!(self, OpKind::Send)
    }

    fn sends(&self) -> bool {
        !matches!(self, OpKind::Recv | OpKind::RecvMop(_))
    }
}

/// One op as issued: peers are communicator ranks.
#[derive(Debug, Clone)]
pub(crate) struct OpSpec {
    pub(crate) kind: OpKind,
    /// The buffer (`None` for a plain forward).
    pub(crate) buf: Option<usize>,
    pub(crate) first: usize,
    pub(crate) last: usize,
    pub(crate) src: Option<u32>,
    pub(crate) dest: Option<u32>,
}

/// One block of a schedule: its tag and ops.
#[derive(Debug, Clone)]
pub(crate) struct StepSpec {
    pub(crate) tag: u32,
    pub(crate) ops: Vec<OpSpec>,
}

/// What a range of an incoming message does on arrival.
#[derive(Debug)]
pub(crate) enum Action {
    Store {
        buf: usize,
        at: usize,
    },
    Combine {
        buf: usize,
        at: usize,
        red: Reduction,
    },
    Discard,
}

/// A range of an incoming message and its dependents.
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) action: Action,
    /// The outgoing message and part that the range's bytes (after combining) are forwarded to.
    pub(crate) forward: Option<(usize, usize)>,
    /// Bytes of a partly arrived element of a combine.
    pub(crate) carry: Vec<u8>,
    /// Bytes of the range stored or combined so far (a prefix).
    pub(crate) progress: usize,
    /// The flows that wait on this range (indices into [`Step::flows`]).
    pub(crate) flows: Vec<usize>,
}

/// Bytes of a buffer that leave as the receives writing them progress: a combining forward
/// (after its own combine and every earlier combine into the same bytes), or a send of bytes
/// that earlier receive ops of the block write (the agent design's progress dependency).
#[derive(Debug)]
pub(crate) struct Flow {
    pub(crate) buf: usize,
    pub(crate) at: usize,
    pub(crate) len: usize,
    /// Outgoing message and part number the bytes go to.
    pub(crate) out: (usize, usize),
    /// The ranges (incoming message, segment) whose progress gates these bytes.
    pub(crate) deps: Vec<(usize, usize)>,
    /// Bytes sent so far (a prefix).
    pub(crate) done: usize,
}

/// The message from one source.
#[derive(Debug)]
pub(crate) struct InStream {
    pub(crate) peer: u32,
    pub(crate) seq: u32,
    pub(crate) expected: u64,
    pub(crate) got: u64,
    /// The length the sender announced, once a piece arrived.
    pub(crate) announced: Option<u64>,
    pub(crate) segs: Vec<Segment>,
    /// First segment not yet complete.
    pub(crate) cursor: usize,
    pub(crate) done: bool,
}

/// A part of an outgoing message.
#[derive(Debug)]
pub(crate) enum OutPart {
    /// Bytes of a buffer, read when the step starts.
    Local {
        buf: usize,
        first: usize,
        last: usize,
    },
    /// Pieces ready to leave (wire buffers) and the bytes still to come.
    Queue {
        remaining: u64,
        pieces: VecDeque<Vec<u8>>,
    },
}

/// The message to one destination.
#[derive(Debug)]
pub(crate) struct OutStream {
    pub(crate) peer: u32,
    pub(crate) seq: u32,
    pub(crate) total: u64,
    pub(crate) parts: VecDeque<OutPart>,
    /// Parts already sent and dropped from the front (part numbers are kept absolute).
    pub(crate) popped: usize,
    pub(crate) done: bool,
}

impl OutStream {
    /// Part number `p` (counted from the first part of the message), if not sent yet.
    pub(crate) fn part(&mut self, p: usize) -> Option<&mut OutPart> {
        let at = p.checked_sub(self.popped)?;
        self.parts.get_mut(at)
    }
}

/// A block ready to run: its messages, and how many of them are not finished.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) tag: u32,
    pub(crate) ins: Vec<InStream>,
    pub(crate) outs: Vec<OutStream>,
    pub(crate) flows: Vec<Flow>,
    pub(crate) pending: usize,
}

/// What the plan needs to know of the communicator.
pub(crate) struct Frame<'a> {
    pub(crate) me: u32,
    pub(crate) size: u32,
    /// Communicator rank -> world rank.
    pub(crate) world: &'a [u32],
}

fn overlap(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

/// Checks every op of a step against the buffers and the communicator.
pub(crate) fn validate(
    spec: &StepSpec,
    frame: &Frame<'_>,
    buf_lens: &[usize],
) -> Result<(), XferError> {
    if spec.tag & crate::xfer_base::COLL_TAG_BIT != 0 {
        return Err(XferError::ReservedTag(spec.tag));
    }
    validate_ops(&spec.ops, frame, buf_lens)
}

/// [`validate`] without the tag check (collectives use the reserved tags).
pub(crate) fn validate_ops(
    ops: &[OpSpec],
    frame: &Frame<'_>,
    buf_lens: &[usize],
) -> Result<(), XferError> {
    let rank_ok = |op: usize, r: u32| -> Result<(), XferError> {
        if r >= frame.size {
            return Err(XferError::UnknownRank {
                rank: r,
                size: frame.size,
            });
        }
        if r == frame.me {
            return Err(XferError::SelfPeer { op, rank: r });
        }
        Ok(())
    };
    for (i, op) in ops.iter().enumerate() {
        if op.first > op.last {
            return Err(XferError::ReversedRange {
                op: i,
                first: op.first,
                last: op.last,
            });
        }
        if let Some(b) = op.buf {
            let len = *buf_lens
                .get(b)
                .ok_or(XferError::UnknownBuffer { op: i, buf: b })?;
            if op.last > len {
                return Err(XferError::RangePastBuffer {
                    op: i,
                    buf: b,
                    first: op.first,
                    last: op.last,
                    len,
                });
            }
        }
        if op.kind.receives() {
            rank_ok(i, op.src.ok_or(XferError::ReceiveWithoutSource { op: i })?)?;
        }
        if op.kind.sends() {
            rank_ok(
                i,
                op.dest.ok_or(XferError::SendWithoutDestination { op: i })?,
            )?;
        }
        if let OpKind::RecvMop(red) | OpKind::RecvMopForward(red) = &op.kind {
            red.check()?;
            let len = op.last - op.first;
            if len % red.elem_size() != 0 {
                return Err(XferError::PartialElement {
                    op: i,
                    len,
                    elem_size: red.elem_size(),
                });
            }
        }
    }
    // Stored ranges may not overlap any other receive; combined ranges may overlap each other.
    let writes: Vec<(usize, &OpSpec)> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.kind.receives() && o.buf.is_some())
        .collect();
    for (a, (i, x)) in writes.iter().enumerate() {
        for (j, y) in writes.iter().skip(a + 1) {
            let stored = matches!(x.kind, OpKind::Recv | OpKind::RecvForward)
                || matches!(y.kind, OpKind::Recv | OpKind::RecvForward);
            if stored && x.buf == y.buf && overlap((x.first, x.last), (y.first, y.last)) {
                return Err(XferError::OverlappingReceives {
                    first: *i,
                    second: *j,
                    buf: x.buf.unwrap_or(0),
                });
            }
        }
    }
    Ok(())
}

/// Builds the step of validated ops (sequence numbers are filled in by the engine).
pub(crate) fn build(spec: &StepSpec, frame: &Frame<'_>) -> Step {
    let mut ins: Vec<InStream> = Vec::new();
    let mut outs: Vec<OutStream> = Vec::new();
    let mut flows: Vec<Flow> = Vec::new();
    fn out_of(outs: &mut Vec<OutStream>, peer: u32) -> usize {
        match outs.iter().position(|o| o.peer == peer) {
            Some(i) => i,
            None => {
                outs.push(OutStream {
                    peer,
                    seq: 0,
                    total: 0,
                    parts: VecDeque::new(),
                    popped: 0,
                    done: false,
                });
                outs.len() - 1
            }
        }
    }
    // Receive ranges placed so far, in issue order: (incoming message, segment, buffer, first,
    // last, whether it combines).
    let mut placed: Vec<(usize, usize, usize, usize, usize, bool)> = Vec::new();
    for op in &spec.ops {
        let len = op.last - op.first;
        let buf = op.buf.unwrap_or(0);
        // Where the op's outgoing bytes go: a new part of the message to its destination.
        let out = if op.kind.sends() {
            let dest = frame.world[op.dest.unwrap_or(0) as usize];
            let o = out_of(&mut outs, dest);
            outs[o].total += len as u64;
            Some((o, outs[o].parts.len()))
        } else {
            None
        };
        let earlier = |placed: &[(usize, usize, usize, usize, usize, bool)],
                       combines_only: bool| {
            placed
                .iter()
                .filter(|p| {
                    (!combines_only || p.5)
                        && p.2 == buf
                        && op.buf.is_some()
                        && overlap((p.3, p.4), (op.first, op.last))
                })
                .map(|p| (p.0, p.1))
                .collect::<Vec<_>>()
        };
        if let OpKind::Send = op.kind {
            let (o, p) = out.unwrap_or((0, 0));
            let deps = earlier(&placed, false);
            if deps.is_empty() {
                outs[o].parts.push_back(OutPart::Local {
                    buf,
                    first: op.first,
                    last: op.last,
                });
            } else {
                outs[o].parts.push_back(OutPart::Queue {
                    remaining: len as u64,
                    pieces: VecDeque::new(),
                });
                for &(i, j) in &deps {
                    ins[i].segs[j].flows.push(flows.len());
                }
                flows.push(Flow {
                    buf,
                    at: op.first,
                    len,
                    out: (o, p),
                    deps,
                    done: 0,
                });
            }
            continue;
        }
        if let Some((o, _)) = out {
            outs[o].parts.push_back(OutPart::Queue {
                remaining: len as u64,
                pieces: VecDeque::new(),
            });
        }
        let src = frame.world[op.src.unwrap_or(0) as usize];
        let i = match ins.iter().position(|s| s.peer == src) {
            Some(i) => i,
            None => {
                ins.push(InStream {
                    peer: src,
                    seq: 0,
                    expected: 0,
                    got: 0,
                    announced: None,
                    segs: Vec::new(),
                    cursor: 0,
                    done: false,
                });
                ins.len() - 1
            }
        };
        let j = ins[i].segs.len();
        let (action, forward, combines) = match &op.kind {
            OpKind::Recv => (Action::Store { buf, at: op.first }, None, false),
            OpKind::RecvForward => (Action::Store { buf, at: op.first }, out, false),
            OpKind::Forward | OpKind::Send => (Action::Discard, out, false),
            OpKind::RecvMop(red) => (
                Action::Combine {
                    buf,
                    at: op.first,
                    red: red.clone(),
                },
                None,
                true,
            ),
            OpKind::RecvMopForward(red) => {
                // The combined bytes leave as a flow gated by this range and every earlier
                // combine into the same bytes.
                let mut deps = earlier(&placed, true);
                deps.push((i, j));
                for &(di, dj) in &deps {
                    if di != i || dj != j {
                        ins[di].segs[dj].flows.push(flows.len());
                    }
                }
                flows.push(Flow {
                    buf,
                    at: op.first,
                    len,
                    out: out.unwrap_or((0, 0)),
                    deps,
                    done: 0,
                });
                (
                    Action::Combine {
                        buf,
                        at: op.first,
                        red: red.clone(),
                    },
                    None,
                    true,
                )
            }
        };
        let own_flow = matches!(op.kind, OpKind::RecvMopForward(_)).then(|| flows.len() - 1);
        let s = &mut ins[i];
        s.segs.push(Segment {
            start: s.expected,
            end: s.expected + len as u64,
            action,
            forward,
            carry: Vec::new(),
            progress: 0,
            flows: own_flow.into_iter().collect(),
        });
        s.expected += len as u64;
        if op.buf.is_some() {
            placed.push((i, j, buf, op.first, op.last, combines));
        }
    }
    let pending = ins.len() + outs.len();
    Step {
        tag: spec.tag,
        ins,
        outs,
        flows,
        pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xfer_base::{Datatype, ReduceOp};

    fn op(kind: OpKind, range: (usize, usize), src: Option<u32>, dest: Option<u32>) -> OpSpec {
        OpSpec {
            kind,
            buf: Some(0),
            first: range.0,
            last: range.1,
            src,
            dest,
        }
    }

    const WORLD: [u32; 4] = [10, 11, 12, 13];

    fn frame() -> Frame<'static> {
        Frame {
            me: 0,
            size: 4,
            world: &WORLD,
        }
    }

    #[test]
    fn sends_of_received_bytes_wait_on_the_receive() {
        // Receive 100 bytes from rank 1, then relay them to ranks 2 and 3; a send of other
        // bytes reads the buffer at start.
        let spec = StepSpec {
            tag: 1,
            ops: vec![
                op(OpKind::Recv, (0, 100), Some(1), None),
                op(OpKind::Send, (0, 100), None, Some(2)),
                op(OpKind::Send, (50, 150), None, Some(3)),
                op(OpKind::Send, (100, 120), None, Some(3)),
            ],
        };
        validate(&spec, &frame(), &[200]).unwrap();
        let step = build(&spec, &frame());
        assert_eq!(step.ins.len(), 1);
        assert_eq!(step.ins[0].peer, 11);
        assert_eq!(step.ins[0].expected, 100);
        assert_eq!(step.flows.len(), 2);
        assert_eq!(step.ins[0].segs[0].flows, vec![0, 1]);
        assert_eq!(step.flows[1].deps, vec![(0, 0)]);
        let to3 = &step.outs[1];
        assert_eq!((to3.peer, to3.total), (13, 120));
        assert!(matches!(
            to3.parts[0],
            OutPart::Queue { remaining: 100, .. }
        ));
        assert!(matches!(
            to3.parts[1],
            OutPart::Local {
                first: 100,
                last: 120,
                ..
            }
        ));
        assert_eq!(step.pending, 3);
    }

    #[test]
    fn combining_forward_waits_on_earlier_combines() {
        let red = Reduction::Builtin(Datatype::I32, ReduceOp::Sum);
        let spec = StepSpec {
            tag: 1,
            ops: vec![
                op(OpKind::RecvMop(red.clone()), (0, 64), Some(1), None),
                op(OpKind::RecvMop(red.clone()), (32, 64), Some(2), None),
                op(OpKind::RecvMopForward(red), (0, 64), Some(3), Some(1)),
            ],
        };
        validate(&spec, &frame(), &[64]).unwrap();
        let step = build(&spec, &frame());
        assert_eq!(step.flows.len(), 1);
        assert_eq!(step.flows[0].deps, vec![(0, 0), (1, 0), (2, 0)]);
        for i in 0..3 {
            assert_eq!(step.ins[i].segs[0].flows, vec![0]);
        }
    }

    #[test]
    fn stored_ranges_may_not_overlap_combined_ones() {
        let red = Reduction::Builtin(Datatype::I32, ReduceOp::Sum);
        let spec = StepSpec {
            tag: 1,
            ops: vec![
                op(OpKind::RecvMop(red), (0, 8), Some(1), None),
                op(OpKind::Recv, (4, 8), Some(2), None),
            ],
        };
        assert_eq!(
            validate(&spec, &frame(), &[8]),
            Err(XferError::OverlappingReceives {
                first: 0,
                second: 1,
                buf: 0
            })
        );
    }
}
