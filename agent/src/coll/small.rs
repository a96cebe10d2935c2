//! Blocking collectives on small buffers as point-to-point messages: `barrier`, `bcast`,
//! `reduce`, `allreduce` and `allgather` (of a result) below [`SMALL_MAX`](super::SMALL_MAX) bytes, and
//! [`Comm::allgatherv_in_place`].
//!
//! A schedule of xfer blocks costs a request, a schedule, owned block buffers and a pass of
//! the dependency graph per block; for a few bytes that is most of the time. Below the switch
//! point the blocking calls run the same algorithms (dissemination barrier, binomial-tree
//! broadcast and reduce, recursive-doubling allreduce with the same fold for a non-power of
//! two, so an allreduce combines in the same order) as plain messages on the communicator's collective
//! context, which take the blocking `send`/`recv` fast paths (`crate::fast`): an eager message
//! is gathered straight into the method and read straight out of it into the caller's buffer.
//!
//! The choice depends only on the length and the switch point, which are the same on every
//! rank (the variable must be set alike on all ranks, as for the other switch points), so all
//! ranks of a call take the same path. These messages are tagged point-to-point messages on
//! the collective context, which xfer blocks never match, so they cannot mix with a
//! nonblocking collective still in flight. An exchange longer than the eager limit posts its
//! send before its receive, so two partners never wait on each other's rendezvous.

use super::tree::{binomial, folded, pof2, unfolded};
use super::{bad, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::matching::{Source, TagMatch};
use crate::xfer::Reduction;

const BARRIER: u32 = tag(0x101);
const BCAST: u32 = tag(0x102);
const ALLREDUCE: u32 = tag(0x107);
const ALLGATHER: u32 = tag(0x105);
const REDUCE: u32 = tag(0x106);

/// The error for a message of `got` bytes from communicator rank `from` where this rank
/// passed `want` (the ranks passed buffers of different lengths).
fn same_count(what: &'static str, from: u32, got: u64, want: usize) -> Result<(), AgentError> {
    if got == want as u64 {
        return Ok(());
    }
    Err(bad(
        what,
        format!("rank {from} passed {got} bytes where this rank passed {want}"),
    ))
}

impl Comm {
    pub(super) fn world_of(&self, r: u32) -> u32 {
        self.world_ranks()[r as usize]
    }

    /// Receives exactly `buf.len()` bytes from communicator rank `from`.
    pub(super) fn small_recv(
        &self,
        what: &'static str,
        from: u32,
        t: u32,
        buf: &mut [u8],
    ) -> Result<(), AgentError> {
        let st =
            self.coll_agent()
                .recv(buf, Source::Rank(self.world_of(from)), TagMatch::Tag(t))?;
        same_count(what, from, st.count(), buf.len())
    }

    /// Sends `data` to `to` and receives as many bytes from `from` into `buf` (past the eager
    /// limit both at once, in place: `Agent::exchange_in_caller`).
    pub(super) fn small_exchange(
        &self,
        what: &'static str,
        t: u32,
        to: u32,
        data: &[u8],
        from: u32,
        buf: &mut [u8],
    ) -> Result<(), AgentError> {
        let agent = self.coll_agent();
        if data.len() <= agent.config().eager_limit {
            agent.send(self.world_of(to), t, data)?;
            return self.small_recv(what, from, t, buf);
        }
        // Both directions at once, read from and written into the caller's memory in place.
        let want = buf.len();
        let st = agent.exchange_in_caller(self.world_of(to), t, data, self.world_of(from), buf)?;
        same_count(what, from, st.count(), want)
    }

    /// Whether this is a communicator of two ranks joined by the TCP method (the same answer
    /// on both: a pair of ranks uses one method). There a rendezvous handshake costs a round
    /// trip through both kernels before the data moves, so the two-rank paths send long
    /// messages in eager pieces; over shared memory and verbs the handshake is cheap and one
    /// message is sent whole.
    pub(super) fn pair_over_tcp(&self) -> bool {
        self.size() == 2
            && self.coll_agent().method_of(self.world_of(1 - self.rank())) == Some("tcp")
    }

    /// [`Comm::small_exchange`] of a long buffer in pieces of at most the eager limit: every
    /// piece of `data` is posted to `to` as an eager send before the pieces from `from` are
    /// received, in order, into their places in `buf`. No piece waits for a rendezvous
    /// handshake, and both directions flow at once. Both partners split alike (the eager
    /// limit is the same on every rank) and the last piece is always shorter than the others
    /// (empty where the length is a multiple of the piece), so a partner that passed another
    /// length is told by a piece of the wrong length, never by waiting for a piece that does
    /// not come.
    pub(super) fn pieces_exchange(
        &self,
        what: &'static str,
        t: u32,
        to: u32,
        data: &[u8],
        from: u32,
        buf: &mut [u8],
    ) -> Result<(), AgentError> {
        let agent = self.coll_agent();
        let piece = agent.config().eager_limit.max(1);
        let mut sends = Vec::with_capacity(data.len() / piece + 1);
        let mut first_error = None;
        for (a, b) in pieces(data.len(), piece) {
            match agent.isend(self.world_of(to), t, &data[a..b]) {
                Ok(r) => sends.push(r),
                Err(e) => {
                    first_error = Some(e);
                    break;
                }
            }
        }
        if first_error.is_none() {
            for (a, b) in pieces(buf.len(), piece) {
                if let Err(e) = self.small_recv(what, from, t, &mut buf[a..b]) {
                    first_error = Some(e);
                    break;
                }
            }
        }
        // Every started send is waited for, also after an error.
        for mut s in sends {
            if let Err(e) = s.wait() {
                first_error.get_or_insert(AgentError::from(e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Dissemination barrier of empty messages.
    pub(crate) fn small_barrier(&self) -> Result<(), AgentError> {
        let (r, n) = (self.rank(), self.size());
        let mut dist = 1;
        while dist < n {
            self.small_exchange(
                "barrier",
                BARRIER,
                (r + dist) % n,
                &[],
                (r + n - dist) % n,
                &mut [],
            )?;
            dist <<= 1;
        }
        Ok(())
    }

    /// Binomial-tree broadcast of `buf` from `root`.
    pub(crate) fn small_bcast(&self, buf: &mut [u8], root: u32) -> Result<(), AgentError> {
        let n = self.size();
        let vr = (self.rank() + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let (parent, children) = binomial(vr, n);
        if let Some(p) = parent {
            let from = Source::Rank(self.world_of(real(p)));
            let got = self.coll_agent().recv(buf, from, TagMatch::Tag(BCAST));
            let sent = match &got {
                Ok(st) => Some(st.count()),
                Err(e) => crate::error::truncated_len(e),
            };
            if let Some(sent) = sent.filter(|&s| s != buf.len() as u64) {
                // The root passed another length than this rank (an erroneous program): the
                // children get a message of the root's length, so that each of them fails
                // too instead of waiting for a message that never comes.
                self.pass_on_mismatch(&children, root, buf, sent);
                return Err(bad(
                    "bcast",
                    format!(
                        "rank {} passed {sent} bytes where this rank passed {}",
                        real(p),
                        buf.len()
                    ),
                ));
            }
            got?;
        }
        for c in children {
            self.coll_agent().send(self.world_of(real(c)), BCAST, buf)?;
        }
        Ok(())
    }

    /// Sends each of `children` (ranks counted from `root`) a message of `len` bytes, the
    /// start of `buf` padded with zeros, after this rank received `len` bytes where it passed
    /// `buf.len()`. A failed send is left: this rank fails the call anyway.
    fn pass_on_mismatch(&self, children: &[u32], root: u32, buf: &[u8], len: u64) {
        let Ok(len) = usize::try_from(len) else {
            return;
        };
        let mut msg = vec![0u8; len];
        let k = len.min(buf.len());
        msg[..k].copy_from_slice(&buf[..k]);
        let n = self.size();
        for &c in children {
            let _ = self
                .coll_agent()
                .send(self.world_of((c + root) % n), BCAST, &msg);
        }
    }

    /// Binomial-tree reduce of every rank's `buf` into the root's `buf`; other ranks' `buf`
    /// is unchanged. A rank combines its children's contributions into its own in a fixed
    /// order, smallest subtree first, so repeated calls give the same bits (the xfer reduce
    /// combines them in the order they arrive).
    pub(crate) fn small_reduce(
        &self,
        buf: &mut [u8],
        red: &Reduction,
        root: u32,
    ) -> Result<(), AgentError> {
        let n = self.size();
        let vr = (self.rank() + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let (parent, children) = binomial(vr, n);
        let mut own = Vec::new();
        let acc: &mut [u8] = if parent.is_none() || children.is_empty() {
            buf
        } else {
            own.extend_from_slice(buf);
            &mut own
        };
        if !children.is_empty() {
            let mut incoming = vec![0u8; acc.len()];
            for c in children.iter().rev() {
                self.small_recv("reduce", real(*c), REDUCE, &mut incoming)?;
                red.combine(&incoming, acc);
            }
        }
        if let Some(p) = parent {
            self.coll_agent()
                .send(self.world_of(real(p)), REDUCE, acc)?;
        }
        Ok(())
    }

    /// Recursive-doubling allreduce of `buf` in place, with the power-of-two fold.
    pub(crate) fn small_allreduce(
        &self,
        buf: &mut [u8],
        red: &Reduction,
    ) -> Result<(), AgentError> {
        let (r, n) = (self.rank(), self.size());
        if n == 1 {
            return Ok(());
        }
        let mut incoming = vec![0u8; buf.len()];
        let rem = n - pof2(n);
        if r < 2 * rem {
            if r % 2 == 0 {
                self.coll_agent()
                    .send(self.world_of(r + 1), ALLREDUCE, buf)?;
            } else {
                self.small_recv("allreduce", r - 1, ALLREDUCE, &mut incoming)?;
                red.combine(&incoming, buf);
            }
        }
        if let Some(nr) = folded(r, n) {
            let mut mask = 1;
            while mask < pof2(n) {
                let partner = unfolded(nr ^ mask, n);
                self.small_exchange("allreduce", ALLREDUCE, partner, buf, partner, &mut incoming)?;
                red.combine(&incoming, buf);
                mask <<= 1;
            }
        }
        if r < 2 * rem {
            if r % 2 == 0 {
                self.small_recv("allreduce", r + 1, ALLREDUCE, buf)?;
            } else {
                self.coll_agent()
                    .send(self.world_of(r - 1), ALLREDUCE, buf)?;
            }
        }
        Ok(())
    }
}

/// The byte ranges of the pieces of [`Comm::pieces_exchange`]: `len / piece` full pieces, then
/// one of the rest (`len % piece` bytes, maybe none).
fn pieces(len: usize, piece: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..=len / piece).map(move |i| (i * piece, ((i + 1) * piece).min(len)))
}

/// `buf[s]` to read and `buf[r]` to write, when the two ranges do not overlap.
fn disjoint(buf: &mut [u8], s: (usize, usize), r: (usize, usize)) -> Option<(&[u8], &mut [u8])> {
    if s.0 + s.1 <= r.0 {
        let (a, b) = buf.split_at_mut(r.0);
        Some((&a[s.0..s.0 + s.1], &mut b[..r.1]))
    } else if r.0 + r.1 <= s.0 {
        let (a, b) = buf.split_at_mut(s.0);
        Some((&b[..s.1], &mut a[r.0..r.0 + r.1]))
    } else {
        None
    }
}

impl Comm {
    /// Sends `buf[s]` to `to` and receives `buf[r]` from `from` (a copy of `buf[s]` is sent
    /// when the two ranges overlap).
    fn exchange_parts(
        &self,
        t: u32,
        to: u32,
        s: (usize, usize),
        from: u32,
        r: (usize, usize),
        buf: &mut [u8],
    ) -> Result<(), AgentError> {
        match disjoint(buf, s, r) {
            Some((data, into)) => self.small_exchange("allgather", t, to, data, from, into),
            None => {
                let data = buf[s.0..s.0 + s.1].to_vec();
                self.small_exchange("allgather", t, to, &data, from, &mut buf[r.0..r.0 + r.1])
            }
        }
    }

    /// Allgather of variable parts as point-to-point messages, in place: `parts[i]` is the
    /// `(offset, length)` in `buf` of rank `i`'s part, and this rank's part holds its data on
    /// entry; on return every part holds its rank's data (`MPI_Allgatherv` with
    /// `MPI_IN_PLACE`), by a ring of `n - 1` exchanges.
    ///
    /// Every rank must pass parts of the same lengths (their offsets may differ). Meant for small results (below
    /// [`Comm::coll_small_max`]): it takes the blocking `send`/`recv` fast paths, and an
    /// exchange above the eager limit posts its send first, so any size completes.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// // Rank i contributes i + 1 bytes.
    /// let n = world.size() as usize;
    /// let mut parts = Vec::new();
    /// let mut at = 0;
    /// for i in 0..n {
    ///     parts.push((at, i + 1));
    ///     at += i + 1;
    /// }
    /// let mut buf = vec![0u8; at];
    /// let (off, len) = parts[world.rank() as usize];
    /// buf[off..off + len].fill(world.rank() as u8);
    /// world.allgatherv_in_place(&mut buf, &parts)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn allgatherv_in_place(
        &self,
        buf: &mut [u8],
        parts: &[(usize, usize)],
    ) -> Result<(), AgentError> {
        let (r, n) = (self.rank() as usize, self.size() as usize);
        if parts.len() != n {
            return Err(bad(
                "allgatherv",
                format!("{} parts for {n} ranks", parts.len()),
            ));
        }
        if let Some(i) = parts
            .iter()
            .position(|&(o, l)| o.checked_add(l).is_none_or(|e| e > buf.len()))
        {
            return Err(bad(
                "allgatherv",
                format!(
                    "part {i} ({} bytes at {}) lies past the buffer of {} bytes",
                    parts[i].1,
                    parts[i].0,
                    buf.len()
                ),
            ));
        }
        if n == 1 {
            return Ok(());
        }
        let left = ((r + n - 1) % n) as u32;
        let right = ((r + 1) % n) as u32;
        for k in 0..n - 1 {
            let s = parts[(r + n - k) % n];
            let got = parts[(r + n - k - 1) % n];
            self.exchange_parts(ALLGATHER, right, s, left, got, buf)?;
        }
        Ok(())
    }

    /// Recursive-doubling allgather in place of `size` parts of `c` bytes each, one after the
    /// other in rank order (`log2 n` exchanges; the size is a power of two).
    pub(crate) fn small_allgather(&self, buf: &mut [u8], c: usize) -> Result<(), AgentError> {
        let (r, n) = (self.rank() as usize, self.size() as usize);
        let span = |first: usize, count: usize| (first * c, count * c);
        let mut mask = 1;
        while mask < n {
            // After this step, this rank holds the parts of the aligned block of `2 * mask`
            // ranks around it.
            let partner = r ^ mask;
            let mine = span(r / mask * mask, mask);
            let theirs = span(partner / mask * mask, mask);
            self.exchange_parts(ALLGATHER, partner as u32, mine, partner as u32, theirs, buf)?;
            mask <<= 1;
        }
        Ok(())
    }

    /// Bytes up to which the blocking collectives run as point-to-point messages (the
    /// switch point [`SMALL_MAX`](super::SMALL_MAX), or its setting).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// println!("point-to-point collectives up to {} bytes", world.coll_small_max());
    /// # Ok(())
    /// # }
    /// ```
    pub fn coll_small_max(&self) -> usize {
        self.switch_points().small_max
    }
}
