//! Envelope matching: the posted-receive queue and the unexpected-message queue.
//!
//! An envelope is (context, source rank, tag). A receive names a [`Pattern`]: a
//! context, a source or [`Source::Any`], a tag or [`TagMatch::Any`]. The rules:
//!
//! - An arriving message matches the **oldest** posted receive whose pattern accepts its
//!   envelope; if none does, it joins the end of the unexpected queue.
//! - A new receive matches the **oldest** unexpected message its pattern accepts; if none does,
//!   it joins the end of the posted queue.
//! - Messages from one source are offered to [`MatchQueues::arrive`] in the order they were
//!   sent (the VC keeps order), so two messages from one sender that both match one receive
//!   are received in send order: messages do not overtake each other.
//!
//! This module is pure logic, generic over what a posted receive (`R`) and an unexpected message
//! (`U`) carry, so it is tested on its own.

use std::collections::VecDeque;

/// Which sender a receive accepts.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// agent.send(0, 1, b"a")?;
/// let mut buf = [0u8; 1];
/// let from_anyone = agent.recv(&mut buf, Source::Any, TagMatch::Tag(1))?;
/// assert_eq!(from_anyone.source(), Some(0));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// Any rank (`MPI_ANY_SOURCE`).
    Any,
    /// Only this rank.
    Rank(u32),
}

/// Which tags a receive accepts.
///
/// ```
/// # use viaduct_agent::prelude::*;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::singleton()?;
/// agent.send(0, 42, b"a")?;
/// let any_tag = agent.recv(&mut [0u8; 1], Source::Rank(0), TagMatch::Any)?;
/// assert_eq!(any_tag.tag(), Some(42));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TagMatch {
    /// Any tag (`MPI_ANY_TAG`).
    Any,
    /// Only this tag.
    Tag(u32),
}

/// The envelope of a message: context, source rank, tag.
///
/// ```
/// use viaduct_agent::matching::Envelope;
///
/// let env = Envelope { context: 0, source: 3, tag: 9 };
/// assert_eq!(env.source, 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// The context (communication space) the message was sent in.
    pub context: u32,
    /// The sending rank.
    pub source: u32,
    /// The message tag.
    pub tag: u32,
}

/// What a receive accepts: one context, a source (or any) and a tag (or any).
///
/// ```
/// use viaduct_agent::matching::{Envelope, Pattern};
/// use viaduct_agent::{Source, TagMatch};
///
/// let pattern = Pattern { context: 0, source: Source::Any, tag: TagMatch::Tag(9) };
/// assert!(pattern.accepts(&Envelope { context: 0, source: 3, tag: 9 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pattern {
    /// The context; never a wildcard.
    pub context: u32,
    /// The source rank, or any.
    pub source: Source,
    /// The tag, or any.
    pub tag: TagMatch,
}

impl Pattern {
    /// Whether this pattern accepts `env`.
    ///
    /// ```
    /// use viaduct_agent::matching::{Envelope, Pattern};
    /// use viaduct_agent::{Source, TagMatch};
    ///
    /// let from_1 = Pattern { context: 0, source: Source::Rank(1), tag: TagMatch::Any };
    /// assert!(from_1.accepts(&Envelope { context: 0, source: 1, tag: 5 }));
    /// assert!(!from_1.accepts(&Envelope { context: 2, source: 1, tag: 5 })); // other context
    /// ```
    #[inline]
    pub fn accepts(&self, env: &Envelope) -> bool {
        self.context == env.context
            && match self.source {
                Source::Any => true,
                Source::Rank(r) => r == env.source,
            }
            && match self.tag {
                TagMatch::Any => true,
                TagMatch::Tag(t) => t == env.tag,
            }
    }
}

/// The two queues of envelope matching.
///
/// ```
/// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
/// # use viaduct_agent::{Source, TagMatch};
/// # let env = Envelope { context: 0, source: 1, tag: 7 };
/// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
/// let mut q: MatchQueues<&str, &str> = MatchQueues::new();
/// q.push_posted(any, "receive");
/// assert_eq!(q.arrive(&env).map(|(_, r)| r), Some("receive"));
/// ```
#[derive(Debug)]
pub struct MatchQueues<R, U> {
    posted: VecDeque<(Pattern, R)>,
    unexpected: VecDeque<(Envelope, U)>,
}

impl<R, U> Default for MatchQueues<R, U> {
    fn default() -> Self {
        MatchQueues {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
        }
    }
}

impl<R, U> MatchQueues<R, U> {
    /// Empty queues.
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let q: MatchQueues<u32, Vec<u8>> = MatchQueues::new();
    /// assert_eq!((q.posted_len(), q.unexpected_len()), (0, 0));
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// A message with `env` arrived: returns the oldest posted receive that accepts it (removed
    /// from the queue), or gives the message back when none does (the caller then decides what
    /// to keep of it and calls [`MatchQueues::push_unexpected`]).
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<u32, ()> = MatchQueues::new();
    /// assert!(q.arrive(&env).is_none()); // nothing posted: goes to the unexpected queue
    /// q.push_posted(any, 1);
    /// assert_eq!(q.arrive(&env).map(|(_, r)| r), Some(1));
    /// ```
    pub fn arrive(&mut self, env: &Envelope) -> Option<(Pattern, R)> {
        let at = self.posted.iter().position(|(p, _)| p.accepts(env))?;
        self.posted.remove(at)
    }

    /// Appends a message that matched no posted receive to the unexpected queue.
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<(), &str> = MatchQueues::new();
    /// q.push_unexpected(env, "early message");
    /// assert_eq!(q.unexpected_len(), 1);
    /// ```
    pub fn push_unexpected(&mut self, env: Envelope, message: U) {
        self.unexpected.push_back((env, message));
    }

    /// A receive with `pattern` is posted: returns the oldest unexpected message it accepts
    /// (removed), or gives the receive back when none does (then call
    /// [`MatchQueues::push_posted`]).
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<(), &str> = MatchQueues::new();
    /// q.push_unexpected(env, "early");
    /// assert_eq!(q.take_unexpected(&any).map(|(_, m)| m), Some("early"));
    /// ```
    pub fn take_unexpected(&mut self, pattern: &Pattern) -> Option<(Envelope, U)> {
        let at = self
            .unexpected
            .iter()
            .position(|(e, _)| pattern.accepts(e))?;
        self.unexpected.remove(at)
    }

    /// Like [`MatchQueues::take_unexpected`], but takes the oldest message `pattern` accepts
    /// only if `take` says so: `None` when none is accepted, `Some(Err(()))` when `take`
    /// refused it (it stays where it is), else the message. One scan of the queue.
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<(), usize> = MatchQueues::new();
    /// q.push_unexpected(env, 100);
    /// // Refused (too long for the receive): it stays.
    /// assert!(matches!(q.take_unexpected_if(&any, |len| *len <= 64), Some(Err(()))));
    /// assert_eq!(q.unexpected_len(), 1);
    /// ```
    pub fn take_unexpected_if(
        &mut self,
        pattern: &Pattern,
        take: impl FnOnce(&U) -> bool,
    ) -> Option<Result<(Envelope, U), ()>> {
        let at = self
            .unexpected
            .iter()
            .position(|(e, _)| pattern.accepts(e))?;
        if !take(&self.unexpected[at].1) {
            return Some(Err(()));
        }
        self.unexpected.remove(at).map(Ok)
    }

    /// The oldest unexpected message `pattern` accepts, left in place (for probe).
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<(), &str> = MatchQueues::new();
    /// q.push_unexpected(env, "probed");
    /// assert!(q.peek_unexpected(&any).is_some());
    /// assert_eq!(q.unexpected_len(), 1); // still there
    /// ```
    pub fn peek_unexpected(&self, pattern: &Pattern) -> Option<(&Envelope, &U)> {
        self.unexpected
            .iter()
            .find(|(e, _)| pattern.accepts(e))
            .map(|(e, u)| (e, u))
    }

    /// Appends a receive that matched no unexpected message to the posted queue.
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<&str, ()> = MatchQueues::new();
    /// q.push_posted(any, "waiting");
    /// assert_eq!(q.posted_len(), 1);
    /// ```
    pub fn push_posted(&mut self, pattern: Pattern, receive: R) {
        self.posted.push_back((pattern, receive));
    }

    /// Removes and returns every posted receive for which `remove` says yes, keeping the order of
    /// the others (cancellation, failure of a peer).
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<u32, ()> = MatchQueues::new();
    /// q.push_posted(any, 1);
    /// q.push_posted(any, 2);
    /// assert_eq!(q.drain_posted(|_, r| *r == 1), [1]);
    /// assert_eq!(q.posted_len(), 1);
    /// ```
    pub fn drain_posted(&mut self, mut remove: impl FnMut(&Pattern, &R) -> bool) -> Vec<R> {
        let mut out = Vec::new();
        let mut kept = VecDeque::with_capacity(self.posted.len());
        for (p, r) in self.posted.drain(..) {
            if remove(&p, &r) {
                out.push(r);
            } else {
                kept.push_back((p, r));
            }
        }
        self.posted = kept;
        out
    }

    /// Removes and returns every unexpected message for which `remove` says yes, keeping the
    /// order of the others.
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<(), u32> = MatchQueues::new();
    /// q.push_unexpected(env, 1);
    /// let gone = q.drain_unexpected(|e, _| e.source == 1);
    /// assert_eq!(gone.len(), 1);
    /// ```
    pub fn drain_unexpected(
        &mut self,
        mut remove: impl FnMut(&Envelope, &U) -> bool,
    ) -> Vec<(Envelope, U)> {
        let mut out = Vec::new();
        let mut kept = VecDeque::with_capacity(self.unexpected.len());
        for (e, u) in self.unexpected.drain(..) {
            if remove(&e, &u) {
                out.push((e, u));
            } else {
                kept.push_back((e, u));
            }
        }
        self.unexpected = kept;
        out
    }

    /// Whether any posted receive satisfies `f` (cheap check before a drain).
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<u32, ()> = MatchQueues::new();
    /// q.push_posted(any, 7);
    /// assert!(q.any_posted(|_, r| *r == 7));
    /// ```
    pub fn any_posted(&self, mut f: impl FnMut(&Pattern, &R) -> bool) -> bool {
        self.posted.iter().any(|(p, r)| f(p, r))
    }

    /// Number of posted receives waiting for a message.
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<u32, ()> = MatchQueues::new();
    /// q.push_posted(any, 7);
    /// assert_eq!(q.posted_len(), 1);
    /// ```
    pub fn posted_len(&self) -> usize {
        self.posted.len()
    }

    /// Number of messages waiting for a receive.
    ///
    /// ```
    /// # use viaduct_agent::matching::{Envelope, MatchQueues, Pattern};
    /// # use viaduct_agent::{Source, TagMatch};
    /// # let env = Envelope { context: 0, source: 1, tag: 7 };
    /// # let any = Pattern { context: 0, source: Source::Any, tag: TagMatch::Any };
    /// let mut q: MatchQueues<(), u32> = MatchQueues::new();
    /// q.push_unexpected(env, 7);
    /// assert_eq!(q.unexpected_len(), 1);
    /// ```
    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(source: u32, tag: u32) -> Envelope {
        Envelope {
            context: 0,
            source,
            tag,
        }
    }

    fn pat(source: Source, tag: TagMatch) -> Pattern {
        Pattern {
            context: 0,
            source,
            tag,
        }
    }

    #[test]
    fn wildcards_and_context() {
        let e = env(3, 7);
        assert!(pat(Source::Any, TagMatch::Any).accepts(&e));
        assert!(pat(Source::Rank(3), TagMatch::Tag(7)).accepts(&e));
        assert!(!pat(Source::Rank(2), TagMatch::Any).accepts(&e));
        assert!(!pat(Source::Any, TagMatch::Tag(8)).accepts(&e));
        let other = Pattern {
            context: 1,
            ..pat(Source::Any, TagMatch::Any)
        };
        assert!(!other.accepts(&e));
    }

    #[test]
    fn arrival_takes_oldest_matching_receive() {
        let mut q: MatchQueues<u32, ()> = MatchQueues::new();
        q.push_posted(pat(Source::Rank(1), TagMatch::Tag(5)), 10);
        q.push_posted(pat(Source::Any, TagMatch::Any), 11);
        q.push_posted(pat(Source::Any, TagMatch::Tag(5)), 12);
        assert_eq!(q.arrive(&env(2, 5)).map(|(_, r)| r), Some(11));
        assert_eq!(q.arrive(&env(1, 5)).map(|(_, r)| r), Some(10));
        assert_eq!(q.arrive(&env(1, 6)).map(|(_, r)| r), None);
        assert_eq!(q.arrive(&env(1, 5)).map(|(_, r)| r), Some(12));
        assert_eq!(q.posted_len(), 0);
    }

    #[test]
    fn receive_takes_oldest_unexpected_in_arrival_order() {
        let mut q: MatchQueues<(), u32> = MatchQueues::new();
        for i in 0..5 {
            q.push_unexpected(env(i % 2, 9), i);
        }
        let p = pat(Source::Rank(1), TagMatch::Any);
        assert_eq!(q.peek_unexpected(&p).map(|(_, u)| *u), Some(1));
        assert_eq!(q.take_unexpected(&p).map(|(_, u)| u), Some(1));
        assert_eq!(q.take_unexpected(&p).map(|(_, u)| u), Some(3));
        assert!(q.take_unexpected(&p).is_none());
        let any = pat(Source::Any, TagMatch::Tag(9));
        let order: Vec<u32> =
            std::iter::from_fn(|| q.take_unexpected(&any).map(|(_, u)| u)).collect();
        assert_eq!(order, vec![0, 2, 4]);
    }

    #[test]
    fn drain_keeps_order_of_the_rest() {
        let mut q: MatchQueues<u32, ()> = MatchQueues::new();
        for i in 0..6 {
            q.push_posted(pat(Source::Rank(i % 3), TagMatch::Any), i);
        }
        let gone = q.drain_posted(|p, _| p.source == Source::Rank(1));
        assert_eq!(gone, vec![1, 4]);
        let rest: Vec<u32> = (0..4)
            .filter_map(|_| {
                q.arrive(&env(0, 0))
                    .or_else(|| q.arrive(&env(2, 0)))
                    .map(|(_, r)| r)
            })
            .collect();
        assert_eq!(rest, vec![0, 3, 2, 5]);
    }

    proptest::proptest! {
        /// Whatever the order of posts and arrivals, messages of one (source, tag) reach
        /// receives in send order, and nothing is lost or duplicated.
        #[test]
        fn non_overtaking(ops in proptest::collection::vec((0u8..2, 0u32..3, 0u32..2), 1..60)) {
            let mut q: MatchQueues<(u32, u32, usize), (u32, u32, u32)> = MatchQueues::new();
            let mut sent = [[0u32; 2]; 3];
            let mut got: Vec<(u32, u32, u32)> = Vec::new();
            let mut receives = 0usize;
            for (kind, src, tag) in ops {
                if kind == 0 {
                    let seq = sent[src as usize][tag as usize];
                    sent[src as usize][tag as usize] += 1;
                    match q.arrive(&env(src, tag)) {
                        Some(_) => got.push((src, tag, seq)),
                        None => q.push_unexpected(env(src, tag), (src, tag, seq)),
                    }
                } else {
                    let p = pat(Source::Rank(src), TagMatch::Tag(tag));
                    match q.take_unexpected(&p) {
                        Some((_, m)) => got.push(m),
                        None => q.push_posted(p, (src, tag, receives)),
                    }
                    receives += 1;
                }
            }
            for src in 0..3 {
                for tag in 0..2 {
                    let seqs: Vec<u32> = got.iter().filter(|m| m.0 == src && m.1 == tag).map(|m| m.2).collect();
                    let expect: Vec<u32> = (0..seqs.len() as u32).collect();
                    proptest::prop_assert_eq!(seqs, expect);
                }
            }
        }
    }
}
