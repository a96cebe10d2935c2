//! [`Comm`]: communicators, ordered groups of ranks with their own communication spaces.
//!
//! A communicator has its own ranks (`0..size`, mapped to the job's world ranks) and two
//! contexts: one for point-to-point messages ([`Comm::isend`], [`Comm::irecv`], ...), one for
//! its xfer blocks and collectives, so that a collective never matches a user message and two
//! communicators never match each other's messages.
//!
//! # Context ids
//!
//! [`Comm::world`] uses contexts 0 (point-to-point, the same as the plain [`Agent`] handle)
//! and 1 (collective). Every rank keeps the lowest context id its communicators do not use yet,
//! starting at [`FIRST_CONTEXT`] (ids below it are left to [`Agent::with_context`]). A new
//! communicator ([`Comm::dup`], [`Comm::split`]) takes as its id the maximum of that counter
//! over every member of the parent, agreed in one exchange over the parent's collective
//! context; every member then moves its counter past it. Sibling communicators of one split
//! have disjoint members, so they share the id. Creating communicators is collective: every
//! member of the parent calls it, in the same order with respect to the parent's other
//! communicator creations. [`Comm::create_group`] is the exception: only the new
//! communicator's members take part, agreeing on the maximum of their own counters over the
//! parent's collective context (a tag per call tells concurrent calls apart); a non-member
//! never receives on that id, and every member's counter moves past it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::agent::Agent;
use crate::error::AgentError;
use crate::matching::{Source, TagMatch};
use crate::recv_buffer::RecvBuffer;
use crate::request::{Request, Status, wait_all};
use crate::xfer::{GatherBlock, ScatterBlock};

/// The first context id given to communicators other than the world.
pub const FIRST_CONTEXT: u32 = 16;

/// Tag of the agreement messages of `split`/`dup` (on the parent's collective context, which
/// carries no other point-to-point messages).
const SPLIT_TAG: u32 = 0x7fff_fff0;

/// Base of the tags of `create_group`'s agreement messages (the group's tag in the low 24
/// bits), on the parent's collective context, below `SPLIT_TAG`.
const GROUP_TAG_BASE: u32 = 0x7e00_0000;

/// Bytes of one member's agreement record: color, key, next free context.
const RECORD: usize = 12;

struct Inner {
    p2p: Agent,
    coll: Agent,
    rank: u32,
    /// Communicator rank -> world rank.
    world: Vec<u32>,
    /// World rank -> communicator rank (`u32::MAX`: not a member); `None` for the world.
    to_comm: Option<Arc<[u32]>>,
}

/// A communicator: an ordered group of ranks with its own point-to-point and collective
/// contexts. Cloning gives another handle on the same communicator.
#[derive(Clone)]
pub struct Comm {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.inner.rank)
            .field("size", &self.inner.world.len())
            .field("context", &self.inner.p2p.context())
            .finish()
    }
}

impl Comm {
    /// The communicator of every rank of the job (ranks are world ranks).
    pub fn world(agent: &Agent) -> Comm {
        Comm {
            inner: Arc::new(Inner {
                p2p: agent.with_context(0),
                coll: agent.with_context(1),
                rank: agent.rank(),
                world: (0..agent.size()).collect(),
                to_comm: None,
            }),
        }
    }

    /// This rank in the communicator.
    pub fn rank(&self) -> u32 {
        self.inner.rank
    }

    /// Number of ranks in the communicator.
    pub fn size(&self) -> u32 {
        self.inner.world.len() as u32
    }

    /// The world rank of communicator rank `r` (`None` outside the communicator).
    pub fn world_rank(&self, r: u32) -> Option<u32> {
        self.inner.world.get(r as usize).copied()
    }

    /// The context of the communicator's point-to-point messages.
    pub fn p2p_context(&self) -> u32 {
        self.inner.p2p.context()
    }

    /// The context of the communicator's xfer blocks and collectives.
    pub fn coll_context(&self) -> u32 {
        self.inner.coll.context()
    }

    /// The agent handle this communicator's point-to-point messages go through.
    pub fn agent(&self) -> &Agent {
        &self.inner.p2p
    }

    pub(crate) fn coll_agent(&self) -> &Agent {
        &self.inner.coll
    }

    pub(crate) fn world_ranks(&self) -> &[u32] {
        &self.inner.world
    }

    fn to_world(&self, r: u32) -> Result<u32, AgentError> {
        self.world_rank(r).ok_or(AgentError::BadRank {
            rank: r,
            size: self.size(),
        })
    }

    fn source(&self, s: Source) -> Result<Source, AgentError> {
        Ok(match s {
            Source::Any => Source::Any,
            Source::Rank(r) => Source::Rank(self.to_world(r)?),
        })
    }

    /// A new communicator with the same members and fresh contexts (collective).
    pub fn dup(&self) -> Result<Comm, AgentError> {
        let c = self.split(Some(0), self.rank() as i32)?;
        c.ok_or(AgentError::BadColor(0))
    }

    /// Splits the communicator (collective): members giving the same `color` form a new
    /// communicator, ordered by `key` and then by their rank here; a member giving `None` gets
    /// `None`. Every new communicator gets fresh contexts.
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Comm>, AgentError> {
        if color == Some(u32::MAX) {
            return Err(AgentError::BadColor(u32::MAX));
        }
        let shared = &self.inner.p2p.shared;
        let next = shared.next_context.load(Ordering::Relaxed);
        let mut mine = [0u8; RECORD];
        mine[..4].copy_from_slice(&color.unwrap_or(u32::MAX).to_le_bytes());
        mine[4..8].copy_from_slice(&key.to_le_bytes());
        mine[8..].copy_from_slice(&next.to_le_bytes());
        let records = self.exchange(&mine)?;
        let parse = |b: &[u8]| -> (u32, i32, u32) {
            let w = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
            (
                u32::from_le_bytes(w(0)),
                i32::from_le_bytes(w(4)),
                u32::from_le_bytes(w(8)),
            )
        };
        let all: Vec<(u32, i32, u32)> = records.iter().map(|r| parse(r)).collect();
        let ctx = all.iter().map(|r| r.2).max().unwrap_or(next).max(next);
        shared
            .next_context
            .fetch_max(ctx.saturating_add(2), Ordering::Relaxed);
        let Some(color) = color else {
            return Ok(None);
        };
        let mut members: Vec<(i32, u32)> = all
            .iter()
            .enumerate()
            .filter(|(_, r)| r.0 == color)
            .map(|(i, r)| (r.1, i as u32))
            .collect();
        members.sort_unstable();
        let world: Vec<u32> = members
            .iter()
            .map(|&(_, r)| self.inner.world[r as usize])
            .collect();
        Ok(Some(self.child(ctx, world)))
    }

    /// The communicator of world ranks `world` (in that order) on contexts `ctx`, `ctx + 1`.
    fn child(&self, ctx: u32, world: Vec<u32>) -> Comm {
        let shared = &self.inner.p2p.shared;
        let me = shared.rank;
        let rank = world.iter().position(|&w| w == me).unwrap_or(0) as u32;
        let mut to_comm = vec![u32::MAX; shared.size as usize];
        for (i, &w) in world.iter().enumerate() {
            to_comm[w as usize] = i as u32;
        }
        let agent = &self.inner.p2p;
        Comm {
            inner: Arc::new(Inner {
                p2p: agent.with_context(ctx),
                coll: agent.with_context(ctx + 1),
                rank,
                world,
                to_comm: Some(to_comm.into()),
            }),
        }
    }

    /// A communicator of the members `ranks` (ranks here, in the new communicator's order),
    /// collective over those members only (`MPI_Comm_create_group`): each calls it with the
    /// same `ranks` and `tag`; calls of overlapping member sets run concurrently when their
    /// tags differ (the low 24 bits of `tag` tell them apart). `None` for a rank not in
    /// `ranks`, which takes no part.
    pub fn create_group(&self, ranks: &[u32], tag: u32) -> Result<Option<Comm>, AgentError> {
        let me = self.rank();
        if !ranks.contains(&me) {
            return Ok(None);
        }
        let mut world = Vec::with_capacity(ranks.len());
        for (i, &r) in ranks.iter().enumerate() {
            if ranks[..i].contains(&r) {
                return Err(AgentError::BadRank {
                    rank: r,
                    size: self.size(),
                });
            }
            world.push(self.to_world(r)?);
        }
        let tag = GROUP_TAG_BASE | (tag & 0x00ff_ffff);
        let shared = &self.inner.p2p.shared;
        let next = shared.next_context.load(Ordering::Relaxed);
        let coll = &self.inner.coll;
        let mut reqs = Vec::new();
        let mut bufs = Vec::new();
        for &w in world.iter().filter(|&&w| w != shared.rank) {
            let (req, buf) = coll.irecv(4, Source::Rank(w), TagMatch::Tag(tag))?;
            reqs.push(req);
            bufs.push((w, buf));
        }
        for &w in world.iter().filter(|&&w| w != shared.rank) {
            reqs.push(coll.isend(w, tag, &next.to_le_bytes())?);
        }
        wait_all(&mut reqs, None)?;
        let mut ctx = next;
        for (w, b) in bufs {
            let v = b.take();
            let Ok(bytes) = <[u8; 4]>::try_from(&v[..]) else {
                return Err(AgentError::PeerFailed {
                    peer: w,
                    reason: "short communicator agreement record".into(),
                    source: None,
                });
            };
            ctx = ctx.max(u32::from_le_bytes(bytes));
        }
        shared
            .next_context
            .fetch_max(ctx.saturating_add(2), Ordering::Relaxed);
        Ok(Some(self.child(ctx, world)))
    }

    /// Every member's record, in communicator rank order.
    fn exchange(&self, mine: &[u8; RECORD]) -> Result<Vec<Vec<u8>>, AgentError> {
        let me = self.rank();
        let coll = &self.inner.coll;
        let mut reqs = Vec::new();
        let mut bufs = Vec::new();
        for r in (0..self.size()).filter(|&r| r != me) {
            let w = self.to_world(r)?;
            let (req, buf) = coll.irecv(RECORD, Source::Rank(w), TagMatch::Tag(SPLIT_TAG))?;
            reqs.push(req);
            bufs.push((r, buf));
        }
        for r in (0..self.size()).filter(|&r| r != me) {
            reqs.push(coll.isend(self.to_world(r)?, SPLIT_TAG, mine)?);
        }
        wait_all(&mut reqs, None)?;
        let mut out = vec![Vec::new(); self.size() as usize];
        out[me as usize] = mine.to_vec();
        for (r, b) in bufs {
            out[r as usize] = b.take();
        }
        if let Some(bad) = out.iter().position(|r| r.len() != RECORD) {
            return Err(AgentError::PeerFailed {
                peer: self.to_world(bad as u32)?,
                reason: "short communicator agreement record".into(),
                source: None,
            });
        }
        Ok(out)
    }

    /// Starts a send to communicator rank `dest` (see [`Agent::isend`]).
    pub fn isend(&self, dest: u32, tag: u32, data: &[u8]) -> Result<Request, AgentError> {
        self.inner.p2p.isend(self.to_world(dest)?, tag, data)
    }

    /// Starts a receive from communicator rank `source` (see [`Agent::irecv`]); the status
    /// reports communicator ranks.
    pub fn irecv(
        &self,
        capacity: usize,
        source: Source,
        tag: TagMatch,
    ) -> Result<(Request, RecvBuffer), AgentError> {
        let buf = RecvBuffer::new(capacity);
        let req = self.inner.p2p.irecv_mapped(
            buf.clone(),
            self.source(source)?,
            tag,
            self.inner.to_comm.clone(),
        )?;
        Ok((req, buf))
    }

    /// Sends to communicator rank `dest` and waits for the send to complete.
    pub fn send(&self, dest: u32, tag: u32, data: &[u8]) -> Result<(), AgentError> {
        self.inner.p2p.send(self.to_world(dest)?, tag, data)
    }

    /// Receives into `buf`; the status reports the source as a communicator rank.
    pub fn recv(
        &self,
        buf: &mut [u8],
        source: Source,
        tag: TagMatch,
    ) -> Result<Status, AgentError> {
        self.inner
            .p2p
            .recv_mapped(buf, self.source(source)?, tag, self.inner.to_comm.clone())
    }

    /// A scatter-form xfer block (`xfer_scatter_init`): at most one source `src`, any number
    /// of destinations; `tag` below `0x8000_0000`.
    pub fn xfer_scatter(&self, src: Option<u32>, tag: u32) -> ScatterBlock {
        ScatterBlock::new(self, src, tag)
    }

    /// A gather-form xfer block (`xfer_gather_init`): any number of sources, at most one
    /// destination `dest`; `tag` below `0x8000_0000`.
    pub fn xfer_gather(&self, dest: Option<u32>, tag: u32) -> GatherBlock {
        GatherBlock::new(self, dest, tag)
    }
}
