//! `reduce`: a binomial tree of gather blocks; a rank combines its children's contributions
//! into its own and sends each combined piece to its parent as soon as every child's piece of
//! those bytes was combined. The blocking `reduce` up to the small switch point runs the same
//! tree as point-to-point messages (module `small`).

use super::tree::binomial;
use super::{CollBuffer, check_reduction, check_root, finish, start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer::schedule::Schedule;
use crate::xfer::{Datatype, ReduceOp, Reduction};

const TAG: u32 = tag(6);

impl Comm {
    /// Starts a reduction of every rank's `buf` (all of one length) into the root's
    /// [`CollBuffer`] (`MPI_Ireduce`); on other ranks the buffer holds a partial result.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// # use viaduct_agent::coll::{Datatype, ReduceOp, Reduction};
    /// let world = Comm::world(&agent);
    /// let sum = Reduction::Builtin(Datatype::U32, ReduceOp::Sum);
    /// let (mut request, mut out) = world.ireduce(1u32.to_le_bytes().to_vec(), &sum, 0)?;
    /// request.wait()?;
    /// if world.rank() == 0 {
    ///     let total = u32::from_le_bytes(out.take().expect("complete")[..4].try_into()?);
    ///     assert_eq!(total, world.size());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn ireduce(
        &self,
        buf: Vec<u8>,
        red: &Reduction,
        root: u32,
    ) -> Result<(Request, CollBuffer), AgentError> {
        let n = self.size();
        check_root("reduce", root, n)?;
        check_reduction("reduce", red, buf.len())?;
        let vr = (self.rank() + n - root) % n;
        let real = |v: u32| (v + root) % n;
        let len = buf.len();
        let (parent, children) = binomial(vr, n);
        let mut s = Schedule::new(self);
        let acc = s.buffer(buf);
        s.step(TAG);
        for c in children.iter().rev() {
            s.recv_mop(acc, (0, len), red, real(*c));
        }
        if let Some(p) = parent {
            s.send(acc, (0, len), real(p));
        }
        start(s, acc)
    }

    /// Reduces every rank's `buf` with `op` on elements of `dtype` into the root's `buf`, in
    /// place (`MPI_Reduce` with `MPI_IN_PLACE` at the root); other ranks' `buf` is unchanged.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// # use viaduct_agent::coll::{Datatype, ReduceOp, Reduction};
    /// let world = Comm::world(&agent);
    /// let mut buf = 2i32.to_le_bytes();
    /// world.reduce(&mut buf, Datatype::I32, ReduceOp::Prod, 0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn reduce(
        &self,
        buf: &mut [u8],
        dtype: Datatype,
        op: ReduceOp,
        root: u32,
    ) -> Result<(), AgentError> {
        self.reduce_with(buf, &Reduction::Builtin(dtype, op), root)
    }

    /// [`Comm::reduce`] with any [`Reduction`] (a user function included).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// # use viaduct_agent::coll::{Datatype, ReduceOp, Reduction};
    /// let world = Comm::world(&agent);
    /// let mut buf = 10u64.to_le_bytes();
    /// world.reduce_with(&mut buf, &Reduction::Builtin(Datatype::U64, ReduceOp::Min), 0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn reduce_with(
        &self,
        buf: &mut [u8],
        red: &Reduction,
        root: u32,
    ) -> Result<(), AgentError> {
        if buf.len() <= self.switch_points().small_max {
            check_root("reduce", root, self.size())?;
            check_reduction("reduce", red, buf.len())?;
            return self.small_reduce(buf, red, root);
        }
        let started = self.ireduce(buf.to_vec(), red, root)?;
        if self.rank() == root {
            finish(started, buf)
        } else {
            finish(started, &mut [])
        }
    }
}
