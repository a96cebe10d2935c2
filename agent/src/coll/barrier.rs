//! `barrier`: dissemination, ⌈log2 n⌉ blocks; in block k a rank sends an empty message to
//! rank + 2^k and receives one from rank − 2^k.

use super::{start, tag};
use crate::comm::Comm;
use crate::error::AgentError;
use crate::request::Request;
use crate::xfer::schedule::Schedule;

const TAG: u32 = tag(1);

impl Comm {
    /// Starts a barrier (`MPI_Ibarrier`): the request completes once every rank entered it.
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// let mut request = world.ibarrier()?;
    /// // ... work that overlaps the barrier ...
    /// request.wait()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn ibarrier(&self) -> Result<Request, AgentError> {
        let (r, n) = (self.rank(), self.size());
        let mut s = Schedule::new(self);
        let none = s.buffer(Vec::new());
        let mut dist = 1;
        while dist < n {
            s.step(TAG);
            s.send(none, (0, 0), (r + dist) % n);
            s.recv(none, (0, 0), (r + n - dist) % n);
            dist <<= 1;
        }
        Ok(start(s, none)?.0)
    }

    /// Blocks until every rank of the communicator entered the barrier (`MPI_Barrier`).
    ///
    /// ```
    /// # use viaduct_agent::prelude::*;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let agent = Agent::singleton()?;
    /// let world = Comm::world(&agent);
    /// world.barrier()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn barrier(&self) -> Result<(), AgentError> {
        if self.switch_points().small_max > 0 {
            return self.small_barrier();
        }
        self.ibarrier()?.wait()?;
        Ok(())
    }
}
