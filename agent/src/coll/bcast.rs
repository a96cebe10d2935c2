//! `bcast`: one block, a binomial tree (small messages) or a chain (large ones), pipelined:
//! each rank sends every piece on to its children as soon as it arrived; the blocking
//! broadcast on two ranks as one point-to-point message (over TCP from the switch point
//! `SwitchPoints::bcast_pair_p2p_min`); and the broadcast in place
//! ([`Comm::bcast_in_place`]), whole point-to-point messages along the binomial tree (on more
//! than two ranks up to the switch point `SwitchPoints::bcast_p2p_max`) straight from and
//! into the caller's memory.

use std::sync::Arc;

use super::tree::binomial;
use super::{CollBuffer, bad, check_root, finish, start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::matching::{Source, TagMatch};
use crate::p2p::SharedBytes;
use crate::recv_buffer::RecvBuffer;
use crate::request::Request;
use crate::xfer::schedule::Schedule;

const TAG: u32 = tag(2);

impl Comm {
    /// Starts a broadcast of `buf` from `root` (`MPI_Ibcast`); every rank passes a buffer of
    /// the same length, and gets the root's bytes back in the [`CollBuffer`].
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let data = if world.rank() == 0 { b"from root".to_vec() } else { vec![0; 9] };
    /// let (mut request, mut out) = world.ibcast(data, 0)?;
    /// request.wait()?;
    /// assert_eq!(out.take().expect("complete"), b"from root");
    /// # Ok(())
    /// # }
    /// ```
    pub fn ibcast(&self, buf: Vec<u8>, root: u32) -> Result<(Request, CollBuffer), AgentError> {
        let n = self.size();
        check_root("bcast", root, n)?;
        let vr = (self.rank() + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let len = buf.len();
        let (parent, children) = if len >= self.switch_points().bcast_chain_min {
            (
                (vr > 0).then(|| vr - 1),
                (vr + 1 < n).then_some(vr + 1).into_iter().collect(),
            )
        } else {
            binomial(vr, n)
        };
        let mut s = Schedule::new(self);
        let b = s.buffer(buf);
        s.step(TAG);
        if let Some(p) = parent {
            s.recv(b, (0, len), real(p));
        }
        for c in children {
            s.send(b, (0, len), real(c));
        }
        start(s, b)
    }

    /// Broadcasts `buf` from `root` to every rank (`MPI_Bcast`). Up to the small switch point,
    /// and on two ranks (over TCP from `SwitchPoints::bcast_pair_p2p_min`), the message goes whole along the binomial tree as
    /// point-to-point messages; otherwise as the pipelined xfer broadcast ([`Comm::ibcast`]).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let mut buf = [0u8; 4];
    /// if world.rank() == 0 {
    ///     buf = *b"root";
    /// }
    /// world.bcast(&mut buf, 0)?;
    /// assert_eq!(&buf, b"root");
    /// # Ok(())
    /// # }
    /// ```
    pub fn bcast(&self, buf: &mut [u8], root: u32) -> Result<(), AgentError> {
        if self.bcast_whole(buf.len(), false) {
            check_root("bcast", root, self.size())?;
            return self.small_bcast(buf, root);
        }
        let started = self.ibcast(buf.to_vec(), root)?;
        finish(started, buf)
    }
}

/// Tag of the broadcast in place (point-to-point messages on the collective context).
const IN_PLACE_TAG: u32 = tag(0x202);

/// The default of the switch point up to which a broadcast on more than two ranks goes whole
/// along the binomial tree, in place for [`Comm::bcast_in_place`]: [`super::BCAST_P2P_MAX`]
/// (`VIADUCT_COLL_BCAST_P2P_MAX` sets the switch point).
pub const BCAST_IN_PLACE_MAX: usize = super::BCAST_P2P_MAX;

impl Comm {
    /// Whether a broadcast of `len` bytes goes whole along the binomial tree as
    /// point-to-point messages: up to the small switch point, on two ranks (over TCP from
    /// `SwitchPoints::bcast_pair_p2p_min`; one hop: nothing to pipeline, and the rendezvous
    /// handshake is paid once for a long message), and, in place, on more ranks up to `SwitchPoints::bcast_p2p_max`; a
    /// switch point of 0 turns it off past the small switch point, two ranks included. (The
    /// blocking broadcast on more ranks takes the xfer broadcast past the small switch point:
    /// its copies into and out of the agent's memory cost the whole messages more than the
    /// pipeline does, see the module `coll`.)
    fn bcast_whole(&self, len: usize, in_place: bool) -> bool {
        let sp = self.switch_points();
        let pair = self.size() < 2
            || (self.size() == 2 && (len >= sp.bcast_pair_p2p_min || !self.pair_over_tcp()));
        len <= sp.small_max
            || (sp.bcast_p2p_max > 0
                && (pair || (self.size() > 2 && in_place && len <= sp.bcast_p2p_max)))
    }

    /// Broadcasts `mem` from `root` to every rank (`MPI_Bcast`), in place: `mem` is the
    /// caller's memory, which every rank passes with the same length; a non-root rank receives
    /// the root's bytes straight into it and sends them on to its children from it, without a
    /// copy of its own (the receiver's method still copies out of it). `mem` is consumed: the
    /// caller keeps its own way to the memory (MPI's face: a pointer to the caller's buffer,
    /// left to the library until the call returns). Messages up to the small switch point
    /// (`SwitchPoints::small_max`) and, on more than two ranks, longer than
    /// `SwitchPoints::bcast_p2p_max` take [`Comm::bcast`]'s paths.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let mem = vec![7u8; 1 << 16]; // owned memory the broadcast uses in place
    /// world.bcast_in_place(mem, 0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn bcast_in_place<M>(&self, mut mem: M, root: u32) -> Result<(), AgentError>
    where
        M: AsRef<[u8]> + AsMut<[u8]> + Send + Sync + 'static,
    {
        let n = self.size();
        check_root("bcast", root, n)?;
        let len = mem.as_ref().len();
        if len <= self.switch_points().small_max || !self.bcast_whole(len, true) {
            return self.bcast(mem.as_mut(), root);
        }
        let vr = (self.rank() + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let world = |v: u32| self.world_ranks()[real(v) as usize];
        let agent = self.coll_agent();
        let (parent, children) = binomial(vr, n);
        let mem = match parent {
            None => mem,
            Some(p) => {
                let buf = RecvBuffer::caller_of(mem);
                let got = agent
                    .irecv_into(
                        buf.clone(),
                        Source::Rank(world(p)),
                        TagMatch::Tag(IN_PLACE_TAG),
                    )
                    .and_then(|mut r| r.wait().map_err(AgentError::from));
                let mem = buf.detach_as::<M>();
                let st = got?;
                if st.count() != len as u64 {
                    return Err(bad(
                        "bcast",
                        format!(
                            "rank {} passed {} bytes where this rank passed {len}",
                            real(p),
                            st.count()
                        ),
                    ));
                }
                match mem {
                    Some(m) => m,
                    None => return Err(bad("bcast", "the receive lost its memory".into())),
                }
            }
        };
        if children.is_empty() {
            return Ok(());
        }
        let shared: SharedBytes = Arc::new(ReadOnly(mem));
        let mut sends = Vec::with_capacity(children.len());
        let mut first_error = None;
        for c in children {
            match agent.isend_shared(world(c), IN_PLACE_TAG, Arc::clone(&shared)) {
                Ok(r) => sends.push(r),
                Err(e) => {
                    first_error = Some(e);
                    break;
                }
            }
        }
        // Every started send is waited for, also after an error: none reads the memory
        // after this returns.
        for mut s in sends {
            if let Err(e) = s.wait() {
                first_error.get_or_insert(AgentError::from(e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Memory lent to sends: read only.
struct ReadOnly<M>(M);

impl<M: AsRef<[u8]>> AsRef<[u8]> for ReadOnly<M> {
    fn as_ref(&self) -> &[u8] {
        self.0.as_ref()
    }
}
