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
//! starting past the world's reserved duplicates (see below), which start at
//! [`FIRST_CONTEXT`] (ids below it are left to [`Agent::with_context`]). A new
//! communicator ([`Comm::dup`], [`Comm::split`]) takes as its id the maximum of that counter
//! over every member of the parent, agreed in one exchange over the parent's collective
//! context; a second exchange confirms that every member could claim the new ids on its
//! rank, where another creation running at once (another thread) may have claimed them first
//! (else the members agree again past them: see the module `creation`); every member then
//! moves its counter past it. Sibling communicators of one split
//! have disjoint members, so they share the id. Creating communicators is collective: every
//! member of the parent calls it, in the same order with respect to the parent's other
//! communicator creations. [`Comm::create_group`] is the exception: only the new
//! communicator's members take part, agreeing on the maximum of their own counters over the
//! parent's collective context (a tag per call tells concurrent calls apart); a non-member
//! never receives on that id, and every member's counter moves past it.
//!
//! # Duplicates without messages
//!
//! Every communicator made by an agreement (and the world) also reserves the
//! [`RESERVED_DUPS`] context pairs right after its own: every member moves its counter past
//! them too. [`Comm::idup`] takes the next of them with no message at all, so a nonblocking
//! duplicate (`MPI_Comm_idup`) completes at once and never waits for a member that is busy
//! elsewhere; every member takes the same pair because every member calls it the same number
//! of times in the same order (it is collective). No other communicator of a member can hold
//! those ids: the ones made before have lower ids, the ones made after higher. A duplicate
//! made so reserves [`NESTED_DUPS`] of its own (from the same block), theirs none;
//! [`Intercomm::idup`] does the same with groups of four. A rank that would pass the last
//! context id fails the creation with [`AgentError::ContextsExhausted`] (ids are never
//! reused).
//!
//! # Live communicators
//!
//! A rank holds at most [`MAX_LIVE_COMMS`] communicators on contexts of their own at once (as
//! MPICH holds at most 2048 context ids). A member that holds as many offers `u32::MAX` as its
//! next free context in the agreement of a new communicator, so that every member (of both
//! groups, for an intercommunicator) finds no context ids left and fails the creation with
//! [`AgentError::ContextsExhausted`] alike, before anything is made; freeing communicators
//! makes room again. A duplicate without messages ([`Comm::idup`]) takes contexts reserved
//! before and is never refused.
//!
//! [`Comm::intercomm_create`] makes an [`Intercomm`] of two disjoint groups: each group agrees
//! the maximum of its members' counters, the two leaders swap theirs (and their groups) over a
//! peer communicator, and every member of both groups takes four contexts from the larger:
//! the intercommunicator's point-to-point and collective contexts and the local group's own
//! pair. [`Intercomm::dup`] and [`Intercomm::merge`] agree the same way over the
//! intercommunicator.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::agent::Agent;
use crate::creation::Creation;
use crate::error::AgentError;
use crate::matching::{Source, TagMatch};
use crate::recv_buffer::RecvBuffer;
use crate::request::{Request, Status, wait_all};

/// The first context id given to communicators other than the world.
pub const FIRST_CONTEXT: u32 = 16;

pub use crate::limits::MAX_LIVE_COMMS;

use crate::reserve::Reserve;
pub use crate::reserve::{NESTED_DUPS, RESERVED_DUPS};

/// A communicator creation on the rank of `shared` (see `crate::creation`).
fn creation(shared: &crate::agent::Shared) -> Creation<'_> {
    Creation::enter(&shared.creations, &shared.next_context, &shared.live_comms)
}

/// The ids every member of a new communicator on contexts from `ctx` moves past: `width` of
/// its own, then those of its reserved duplicates ([`Reserve::span`]).
fn past(ctx: u32, width: u32) -> Result<u32, AgentError> {
    ctx.checked_add(width)
        .and_then(|c| c.checked_add(Reserve::new(0, width).span()))
        .ok_or(AgentError::ContextsExhausted)
}

/// Tag of the agreement messages of `split`/`dup` (on the parent's collective context, which
/// carries no other point-to-point messages).
const SPLIT_TAG: u32 = 0x7fff_fff0;

/// Base of the tags of `create_group`'s agreement messages (the group's tag in the low 24
/// bits), on the parent's collective context, below `SPLIT_TAG`.
const GROUP_TAG_BASE: u32 = 0x7e00_0000;

/// Tag of the intercommunicator agreements within the local group (on its collective
/// context, next to `SPLIT_TAG`).
const INTER_TAG: u32 = 0x7fff_fff1;

/// Tag of the agreements between the two leaders of an intercommunicator (on its collective
/// context, which carries only collective messages).
const LEADER_TAG: u32 = 0x7fff_fff2;

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
    /// The contexts reserved for duplicates without messages (`None`: made so itself).
    reserve: Option<Reserve>,
    /// Whether the communicator counts among the rank's live ones (all but the world's
    /// handles; see [`MAX_LIVE_COMMS`]).
    counted: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.counted {
            self.p2p.shared.live_comms.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A communicator: an ordered group of ranks with its own point-to-point and collective
/// contexts. Cloning gives another handle on the same communicator.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// let world = Comm::world(&agent);
/// let mut sum = (world.rank() as u64 + 1).to_le_bytes();
/// world.allreduce(&mut sum, viaduct_agent::coll::Datatype::U64, viaduct_agent::coll::ReduceOp::Sum)?;
/// assert_eq!(u64::from_le_bytes(sum), 1);
/// # Ok(())
/// # }
/// ```
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
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// assert_eq!((world.rank(), world.size()), (agent.rank(), agent.size()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn world(agent: &Agent) -> Comm {
        Comm {
            inner: Arc::new(Inner {
                p2p: agent.with_context(0),
                coll: agent.with_context(1),
                rank: agent.rank(),
                world: (0..agent.size()).collect(),
                to_comm: None,
                reserve: Some(agent.shared.world_dups.clone()),
                counted: false,
            }),
        }
    }

    /// This rank in the communicator.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// println!("rank {} of {}", world.rank(), world.size());
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank(&self) -> u32 {
        self.inner.rank
    }

    /// Number of ranks in the communicator.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// assert_eq!(world.size(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn size(&self) -> u32 {
        self.inner.world.len() as u32
    }

    /// The world rank of communicator rank `r` (`None` outside the communicator).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// assert_eq!(world.world_rank(0), Some(0));
    /// assert_eq!(world.world_rank(1), None);
    /// # Ok(())
    /// # }
    /// ```
    pub fn world_rank(&self, r: u32) -> Option<u32> {
        self.inner.world.get(r as usize).copied()
    }

    /// The context of the communicator's point-to-point messages.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let copy = world.dup()?;
    /// assert_ne!(world.p2p_context(), copy.p2p_context());
    /// # Ok(())
    /// # }
    /// ```
    pub fn p2p_context(&self) -> u32 {
        self.inner.p2p.context()
    }

    /// The context of the communicator's xfer blocks and collectives.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// assert_ne!(world.coll_context(), world.p2p_context());
    /// # Ok(())
    /// # }
    /// ```
    pub fn coll_context(&self) -> u32 {
        self.inner.coll.context()
    }

    /// The agent handle this communicator's point-to-point messages go through.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// assert_eq!(world.agent().context(), world.p2p_context());
    /// # Ok(())
    /// # }
    /// ```
    pub fn agent(&self) -> &Agent {
        &self.inner.p2p
    }

    pub(crate) fn coll_agent(&self) -> &Agent {
        &self.inner.coll
    }

    /// The world ranks of the members, in communicator rank order.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// assert_eq!(world.world_ranks(), &[0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn world_ranks(&self) -> &[u32] {
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
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let library = world.dup()?; // a library's own messages never match the caller's
    /// library.barrier()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn dup(&self) -> Result<Comm, AgentError> {
        let c = self.split(Some(0), self.rank() as i32)?;
        c.ok_or(AgentError::BadColor(0))
    }

    /// Splits the communicator (collective): members giving the same `color` form a new
    /// communicator, ordered by `key` and then by their rank here; a member giving `None` gets
    /// `None`. Every new communicator gets fresh contexts.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// // Even and odd ranks apart, ordered by world rank.
    /// let half = world.split(Some(world.rank() % 2), world.rank() as i32)?.expect("colored");
    /// assert_eq!(half.rank(), world.rank() / 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Comm>, AgentError> {
        if color == Some(u32::MAX) {
            return Err(AgentError::BadColor(u32::MAX));
        }
        let mut creation = creation(&self.inner.p2p.shared);
        let parse = |b: &[u8]| -> (u32, i32, u32) {
            let w = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
            (
                u32::from_le_bytes(w(0)),
                i32::from_le_bytes(w(4)),
                u32::from_le_bytes(w(8)),
            )
        };
        let (ctx, all) = loop {
            let next = creation.offer();
            let mut mine = [0u8; RECORD];
            mine[..4].copy_from_slice(&color.unwrap_or(u32::MAX).to_le_bytes());
            mine[4..8].copy_from_slice(&key.to_le_bytes());
            mine[8..].copy_from_slice(&next.to_le_bytes());
            let records = self.exchange(&mine)?;
            let all: Vec<(u32, i32, u32)> = records.iter().map(|r| parse(r)).collect();
            let ctx = all.iter().map(|r| r.2).max().unwrap_or(next).max(next);
            let to = past(ctx, 2)?;
            let held = creation.claim(ctx, to);
            if creation.settle(self.all_true(held)?, to) {
                break (ctx, all);
            }
        };
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

    /// The communicator of world ranks `world` (in that order) on contexts `ctx`, `ctx + 1`,
    /// with the pairs after them reserved for its duplicates.
    fn child(&self, ctx: u32, world: Vec<u32>) -> Comm {
        self.child_on(ctx, ctx + 1, world, Some(Reserve::new(ctx + 2, 2)))
    }

    /// A duplicate of this communicator made without messages, on the next context pair
    /// reserved when it was made (see the module's documentation); `None` when it has none
    /// left (after [`RESERVED_DUPS`], or [`NESTED_DUPS`] for a duplicate made so, none for a
    /// duplicate of one): then [`Comm::dup`] agrees new ones. Collective as [`Comm::dup`] is: every member calls it, in the same order with
    /// respect to the communicator's other duplicates, and gets the same contexts.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let copy = world.idup().expect("the world reserves duplicates");
    /// assert_eq!((copy.rank(), copy.size()), (world.rank(), world.size()));
    /// let again = copy.idup().expect("a duplicate reserves a few of its own");
    /// assert!(again.idup().is_none()); // theirs reserve none
    /// # Ok(())
    /// # }
    /// ```
    pub fn idup(&self) -> Option<Comm> {
        let (ctx, nested) = self.inner.reserve.as_ref()?.take()?;
        Some(self.child_on(ctx, ctx + 1, self.inner.world.clone(), nested))
    }

    /// The communicator of world ranks `world` (in that order) on contexts `p2p` (its
    /// point-to-point messages) and `coll`, with contexts `reserve` for its duplicates.
    fn child_on(&self, p2p: u32, coll: u32, world: Vec<u32>, reserve: Option<Reserve>) -> Comm {
        let shared = &self.inner.p2p.shared;
        let me = shared.rank;
        let rank = world.iter().position(|&w| w == me).unwrap_or(0) as u32;
        let mut to_comm = vec![u32::MAX; shared.size as usize];
        for (i, &w) in world.iter().enumerate() {
            to_comm[w as usize] = i as u32;
        }
        let agent = &self.inner.p2p;
        shared.live_comms.fetch_add(1, Ordering::Relaxed);
        Comm {
            inner: Arc::new(Inner {
                p2p: agent.with_context(p2p),
                coll: agent.with_context(coll),
                rank,
                world,
                to_comm: Some(to_comm.into()),
                reserve,
                counted: true,
            }),
        }
    }

    /// A communicator of the members `ranks` (ranks here, in the new communicator's order),
    /// collective over those members only (`MPI_Comm_create_group`): each calls it with the
    /// same `ranks` and `tag`; calls of overlapping member sets run concurrently when their
    /// tags differ (the low 24 bits of `tag` tell them apart). `None` for a rank not in
    /// `ranks`, which takes no part.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let firsts = world.create_group(&[0], 11)?;
    /// assert_eq!(firsts.map(|c| c.size()), Some(1));
    /// # Ok(())
    /// # }
    /// ```
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
        let mut creation = creation(shared);
        let ctx = loop {
            let ctx = self.group_round(&world, tag, creation.offer())?;
            let to = past(ctx, 2)?;
            let held = creation.claim(ctx, to);
            // The second round carries 1 from a member whose claim failed.
            let failed = self.group_round(&world, tag, u32::from(!held))?;
            if creation.settle(failed == 0, to) {
                break ctx;
            }
        };
        Ok(Some(self.child(ctx, world)))
    }

    /// One round of `create_group`'s agreement: every member's `next` (an offer, or whether
    /// its claim failed) to every other member; gives the maximum.
    fn group_round(&self, world: &[u32], tag: u32, next: u32) -> Result<u32, AgentError> {
        let shared = &self.inner.p2p.shared;
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
        Ok(ctx)
    }

    /// Whether every member gives `mine` true (collective, over the collective context).
    fn all_true(&self, mine: bool) -> Result<bool, AgentError> {
        let mut record = [0u8; RECORD];
        record[0] = u8::from(mine);
        Ok(self.exchange(&record)?.iter().all(|r| r[0] == 1))
    }

    /// The highest next free context id over the members (collective).
    fn max_next(&self, creation: &Creation<'_>) -> Result<u32, AgentError> {
        let next = creation.offer();
        let mut mine = [0u8; RECORD];
        mine[8..].copy_from_slice(&next.to_le_bytes());
        let all = self.exchange(&mine)?;
        Ok(all
            .iter()
            .map(|r| u32::from_le_bytes([r[8], r[9], r[10], r[11]]))
            .fold(next, u32::max))
    }

    /// Sends `words` from the local leader to every other member, who get them (collective
    /// over this communicator, on its collective context).
    fn leader_bcast(&self, leader: u32, words: Vec<u32>) -> Result<Vec<u32>, AgentError> {
        let coll = &self.inner.coll;
        if self.rank() == leader {
            let bytes = words_to_bytes(&words);
            let mut reqs = Vec::new();
            for r in (0..self.size()).filter(|&r| r != leader) {
                reqs.push(coll.isend(self.to_world(r)?, INTER_TAG, &bytes)?);
            }
            wait_all(&mut reqs, None)?;
            return Ok(words);
        }
        let w = self.to_world(leader)?;
        let cap = 4 * (self.inner.p2p.shared.size as usize + 4);
        let (req, buf) = coll.irecv(cap, Source::Rank(w), TagMatch::Tag(INTER_TAG))?;
        wait_all(&mut [req], None)?;
        bytes_to_words(&buf.take(), w)
    }

    /// Whether every member of this group and of the remote one (over `peer`, between the
    /// leaders, as in `intercomm_create`) gives `mine` true.
    fn both_groups_true(
        &self,
        mine: bool,
        leader: u32,
        peer: Option<&Comm>,
        remote_leader: u32,
        tag: u32,
    ) -> Result<bool, AgentError> {
        let here = self.all_true(mine)?;
        let words = if self.rank() == leader {
            let peer = peer.ok_or(AgentError::BadRank {
                rank: remote_leader,
                size: 0,
            })?;
            let w = peer.to_world(remote_leader)?;
            let (rreq, buf) = peer.irecv(4, Source::Rank(remote_leader), TagMatch::Tag(tag))?;
            let sreq = peer.isend(remote_leader, tag, &words_to_bytes(&[u32::from(here)]))?;
            wait_all(&mut [rreq, sreq], None)?;
            let there = bytes_to_words(&buf.take(), w)?;
            self.leader_bcast(leader, vec![u32::from(here && there == [1])])?
        } else {
            self.leader_bcast(leader, Vec::new())?
        };
        Ok(words == [1])
    }

    /// `MPI_Intercomm_create` (collective over this communicator, the local group, and over
    /// the remote group's): the two leaders (`leader` here, `remote_leader` in `peer`) swap
    /// their groups' world ranks and next free contexts over `peer`'s point-to-point context
    /// with `tag`; every member of both groups then takes the same four fresh contexts (the
    /// maximum of every member's next free context): two for the intercommunicator, two for
    /// the local group's own communicator. `peer` matters at the leader only.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let world = Comm::world(&agent);
    /// // Two groups: world ranks 0 and 1 (needs 2 ranks); the leaders are their rank 0.
    /// let mine = world.split(Some(world.rank() % 2), 0)?.expect("colored");
    /// let other_leader = 1 - world.rank() % 2;
    /// let inter = mine.intercomm_create(0, Some(&world), other_leader, 77)?;
    /// inter.remote.send(0, 1, b"hi, other group")?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn intercomm_create(
        &self,
        leader: u32,
        peer: Option<&Comm>,
        remote_leader: u32,
        tag: u32,
    ) -> Result<Intercomm, AgentError> {
        self.to_world(leader)?;
        let mut creation = creation(&self.inner.p2p.shared);
        let words = loop {
            let next = self.max_next(&creation)?;
            let words = if self.rank() == leader {
                match self.leader_swap(next, peer, remote_leader, tag) {
                    Ok(out) => self.leader_bcast(leader, out)?,
                    Err(e) => {
                        // The other members learn of the failure from an empty record.
                        let _ = self.leader_bcast(leader, Vec::new());
                        return Err(e);
                    }
                }
            } else {
                self.leader_bcast(leader, Vec::new())?
            };
            let Some(&ctx) = words.first() else {
                return Err(AgentError::PeerFailed {
                    peer: self.to_world(leader)?,
                    reason: "short intercommunicator agreement record".into(),
                    source: None,
                });
            };
            let to = past(ctx, 4)?;
            let held = creation.claim(ctx, to);
            let all_held = self.both_groups_true(held, leader, peer, remote_leader, tag)?;
            if creation.settle(all_held, to) {
                break words;
            }
        };
        let (&ctx, remote) = words.split_first().ok_or(AgentError::ContextsExhausted)?;
        Ok(self.inter_on(ctx, self.world_ranks().to_vec(), remote.to_vec()))
    }

    /// The local leader's part of `intercomm_create`: swaps `[next, size, world ranks...]`
    /// with the remote leader; gives `[context, remote world ranks...]` for the group.
    fn leader_swap(
        &self,
        next: u32,
        peer: Option<&Comm>,
        remote_leader: u32,
        tag: u32,
    ) -> Result<Vec<u32>, AgentError> {
        let peer = peer.ok_or(AgentError::BadRank {
            rank: remote_leader,
            size: 0,
        })?;
        let w = peer.to_world(remote_leader)?;
        if self.world_ranks().contains(&w) {
            return Err(AgentError::BadRank {
                rank: remote_leader,
                size: peer.size(),
            });
        }
        let size = self.inner.p2p.shared.size;
        let mut mine = vec![next, self.size()];
        mine.extend_from_slice(self.world_ranks());
        let cap = 4 * (size as usize + 4);
        let (rreq, buf) = peer.irecv(cap, Source::Rank(remote_leader), TagMatch::Tag(tag))?;
        let sreq = peer.isend(remote_leader, tag, &words_to_bytes(&mine))?;
        wait_all(&mut [rreq, sreq], None)?;
        let theirs = bytes_to_words(&buf.take(), w)?;
        check_group(&theirs, w, size, self.world_ranks())?;
        let mut out = vec![next.max(theirs[0])];
        out.extend_from_slice(&theirs[2..]);
        Ok(out)
    }

    /// The intercommunicator of groups `local` and `remote` (world ranks) on contexts
    /// `ctx..ctx + 4`.
    fn inter_on(&self, ctx: u32, local: Vec<u32>, remote: Vec<u32>) -> Intercomm {
        Intercomm {
            remote: self.child_on(ctx, ctx + 1, remote.clone(), None),
            coll: self.child_on(ctx + 1, ctx + 1, remote, None),
            local: self.child_on(ctx + 2, ctx + 3, local, None),
            reserve: Some(Reserve::new(ctx + 4, 4)),
        }
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
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let send = world.isend(0, 1, b"c")?;
    /// let (recv, _buf) = world.irecv(1, Source::Rank(0), TagMatch::Tag(1))?;
    /// wait_all(&mut [send, recv], None)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn isend(&self, dest: u32, tag: u32, data: &[u8]) -> Result<Request, AgentError> {
        self.inner.p2p.isend(self.to_world(dest)?, tag, data)
    }

    /// Starts a receive from communicator rank `source` (see [`Agent::irecv`]); the status
    /// reports communicator ranks.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let (mut recv, buf) = world.irecv(8, Source::Any, TagMatch::Tag(1))?;
    /// world.send(0, 1, b"comm")?;
    /// assert_eq!(recv.wait()?.source(), Some(0)); // a communicator rank
    /// assert_eq!(buf.take(), b"comm");
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// world.send(0, 1, b"sent")?;
    /// # world.recv(&mut [0u8; 4], Source::Rank(0), TagMatch::Tag(1))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn send(&self, dest: u32, tag: u32, data: &[u8]) -> Result<(), AgentError> {
        self.inner.p2p.send(self.to_world(dest)?, tag, data)
    }

    /// Receives into `buf`; the status reports the source as a communicator rank.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// world.send(0, 1, b"back")?;
    /// let mut buf = [0u8; 4];
    /// let status = world.recv(&mut buf, Source::Any, TagMatch::Tag(1))?;
    /// assert_eq!(status.source(), Some(0));
    /// # Ok(())
    /// # }
    /// ```
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

    /// Receives a tagged message in place (see [`Agent::recv_in_place`] and the
    /// [`in_place`](crate::in_place) module): the returned [`Received`](crate::Received) shows
    /// the bytes where the method put them, its status names the source by its rank in this
    /// communicator; dropping it hands the memory back.
    ///
    /// ```no_run
    /// # fn demo(comm: &viaduct_agent::Comm) -> Result<(), viaduct_agent::AgentError> {
    /// use std::time::Duration;
    /// use viaduct_agent::{Source, TagMatch};
    ///
    /// let msg = comm.recv_in_place(Source::Any, TagMatch::Tag(3), Duration::from_secs(5))?;
    /// println!("{} bytes from rank {:?}", msg.len(), msg.status().source());
    /// # Ok(()) }
    /// ```
    pub fn recv_in_place(
        &self,
        source: Source,
        tag: TagMatch,
        timeout: Duration,
    ) -> Result<crate::Received, AgentError> {
        match self.inner.p2p.in_place_mapped(
            self.source(source)?,
            tag,
            Some(timeout),
            self.inner.to_comm.clone(),
        )? {
            Some(r) => Ok(r),
            None => Err(AgentError::Timeout {
                what: "in-place receive",
                seconds: timeout.as_secs(),
            }),
        }
    }

    /// Like [`Comm::recv_in_place`] after one progress pass: `Ok(None)` when no message
    /// matched.
    ///
    /// ```no_run
    /// # fn demo(comm: &viaduct_agent::Comm) -> Result<(), viaduct_agent::AgentError> {
    /// use viaduct_agent::{Source, TagMatch};
    ///
    /// while let Some(msg) = comm.try_recv_in_place(Source::Any, TagMatch::Any)? {
    ///     println!("{} bytes", msg.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_recv_in_place(
        &self,
        source: Source,
        tag: TagMatch,
    ) -> Result<Option<crate::Received>, AgentError> {
        self.inner
            .p2p
            .in_place_mapped(self.source(source)?, tag, None, self.inner.to_comm.clone())
    }
}

fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn bytes_to_words(b: &[u8], from: u32) -> Result<Vec<u32>, AgentError> {
    if b.len() % 4 != 0 {
        return Err(AgentError::PeerFailed {
            peer: from,
            reason: "intercommunicator agreement record of a partial word".into(),
            source: None,
        });
    }
    Ok(b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Checks the remote leader's record `[next, n, world ranks...]`.
fn check_group(words: &[u32], from: u32, world: u32, local: &[u32]) -> Result<(), AgentError> {
    let bad = |reason: &str| AgentError::PeerFailed {
        peer: from,
        reason: reason.into(),
        source: None,
    };
    if words.len() < 2 || words.len() != 2 + words[1] as usize || words[1] == 0 {
        return Err(bad("malformed intercommunicator group record"));
    }
    if words[2..].iter().any(|&w| w >= world) {
        return Err(bad(
            "intercommunicator group record names a rank outside the job",
        ));
    }
    if words[2..].iter().any(|w| local.contains(w)) {
        return Err(bad("the two groups of an intercommunicator overlap"));
    }
    Ok(())
}

/// An intercommunicator (`MPI_Intercomm_create`): two disjoint groups, each member addressing
/// the other group's ranks. Creating one, [`Intercomm::dup`] and [`Intercomm::merge`] are
/// collective over both groups.
///
/// ```no_run
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::init()?;
/// let world = Comm::world(&agent);
/// let group = world.split(Some(world.rank() % 2), 0)?.expect("colored");
/// let inter = group.intercomm_create(0, Some(&world), 1 - world.rank() % 2, 5)?;
/// println!("{} local ranks, {} remote", inter.local.size(), inter.remote.size());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Intercomm {
    /// Point-to-point with the remote group: ranks name the remote group's members; a
    /// received status names the remote rank.
    pub remote: Comm,
    /// The remote group on the intercommunicator's collective context, for collectives built
    /// of point-to-point messages (never matches `remote`'s messages).
    pub coll: Comm,
    /// The local group as a communicator of its own (own contexts): this rank and size.
    pub local: Comm,
    /// The contexts reserved for duplicates without messages (`None`: made so itself).
    reserve: Option<Reserve>,
}

impl Intercomm {
    /// The remote leader's words for this group's `mine` (collective over both groups): the
    /// local leaders (rank 0 of each group) swap them over the collective context, then tell
    /// their group.
    fn swap(&self, mine: Vec<u32>) -> Result<Vec<u32>, AgentError> {
        if self.local.rank() != 0 {
            return self.local.leader_bcast(0, Vec::new());
        }
        let w = self.coll.to_world(0)?;
        let cap = 4 * (self.local.inner.p2p.shared.size as usize + 4);
        let (rreq, buf) = self
            .coll
            .irecv(cap, Source::Rank(0), TagMatch::Tag(LEADER_TAG))?;
        let sreq = self.coll.isend(0, LEADER_TAG, &words_to_bytes(&mine))?;
        wait_all(&mut [rreq, sreq], None)?;
        let theirs = bytes_to_words(&buf.take(), w)?;
        self.local.leader_bcast(0, theirs)
    }

    /// The first context free on every member of both groups (collective over both).
    fn agree(&self, creation: &Creation<'_>, word: u32) -> Result<(u32, u32), AgentError> {
        let next = self.local.max_next(creation)?;
        let theirs = self.swap(vec![next, word])?;
        let [their_next, their_word] = theirs[..] else {
            return Err(AgentError::PeerFailed {
                peer: self.coll.to_world(0)?,
                reason: "malformed intercommunicator agreement record".into(),
                source: None,
            });
        };
        Ok((next.max(their_next), their_word))
    }

    /// [`Intercomm::agree`] and the claims on the agreed contexts (see `crate::creation`),
    /// run until every member of both groups held its claim; every member then moves past
    /// `width` contexts from the agreed one and their reserved duplicates.
    fn agreed(&self, word: u32, width: u32) -> Result<(u32, u32), AgentError> {
        let mut creation = creation(&self.local.inner.p2p.shared);
        loop {
            let (ctx, theirs) = self.agree(&creation, word)?;
            let to = past(ctx, width)?;
            let held = creation.claim(ctx, to);
            let here = self.local.all_true(held)?;
            let there = self.swap(vec![u32::from(here)])?;
            if creation.settle(here && there == [1], to) {
                return Ok((ctx, theirs));
            }
        }
    }

    /// A duplicate made without messages, on the next four contexts reserved when this
    /// intercommunicator was made (as [`Comm::idup`]; `None` when none are left). Every member of both groups calls it the same number of times.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let world = Comm::world(&agent);
    /// let group = world.split(Some(world.rank() % 2), 0)?.expect("colored");
    /// let inter = group.intercomm_create(0, Some(&world), 1 - world.rank() % 2, 5)?;
    /// let copy = inter.idup().expect("reserved");
    /// assert_eq!(copy.remote.size(), inter.remote.size());
    /// # Ok(())
    /// # }
    /// ```
    pub fn idup(&self) -> Option<Intercomm> {
        let (ctx, nested) = self.reserve.as_ref()?.take()?;
        let mut copy = self.local.inter_on(
            ctx,
            self.local.world_ranks().to_vec(),
            self.remote.world_ranks().to_vec(),
        );
        copy.reserve = nested;
        Some(copy)
    }

    /// A new intercommunicator of the same groups on fresh contexts (`MPI_Comm_dup`).
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let world = Comm::world(&agent);
    /// let group = world.split(Some(world.rank() % 2), 0)?.expect("colored");
    /// let inter = group.intercomm_create(0, Some(&world), 1 - world.rank() % 2, 5)?;
    /// let copy = inter.dup()?;
    /// assert_eq!(copy.remote.size(), inter.remote.size());
    /// # Ok(())
    /// # }
    /// ```
    pub fn dup(&self) -> Result<Intercomm, AgentError> {
        let (ctx, _) = self.agreed(0, 4)?;
        Ok(self.local.inter_on(
            ctx,
            self.local.world_ranks().to_vec(),
            self.remote.world_ranks().to_vec(),
        ))
    }

    /// `MPI_Intercomm_merge`: the communicator of both groups, the group giving `high` false
    /// first (when both give the same, the group whose leader has the lower world rank
    /// first), each in its own rank order, on fresh contexts.
    ///
    /// ```no_run
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::init()?;
    /// let world = Comm::world(&agent);
    /// let group = world.split(Some(world.rank() % 2), 0)?.expect("colored");
    /// let inter = group.intercomm_create(0, Some(&world), 1 - world.rank() % 2, 5)?;
    /// // The even ranks first.
    /// let merged = inter.merge(world.rank() % 2 == 1)?;
    /// assert_eq!(merged.size(), world.size());
    /// # Ok(())
    /// # }
    /// ```
    pub fn merge(&self, high: bool) -> Result<Comm, AgentError> {
        let (ctx, their_high) = self.agreed(u32::from(high), 2)?;
        let mine = self.local.world_ranks();
        let theirs = self.remote.world_ranks();
        let me_first = match (u32::from(high)).cmp(&their_high) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => mine[0] < theirs[0],
        };
        let world: Vec<u32> = if me_first {
            mine.iter().chain(theirs).copied().collect()
        } else {
            theirs.iter().chain(mine).copied().collect()
        };
        Ok(self.local.child(ctx, world))
    }
}
