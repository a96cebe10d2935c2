//! Reads of the peer's memory for a rendezvous its user runs above the endpoint.
//!
//! The endpoint's own long messages arrive in its reassembly buffer, from which the user
//! copies them once more. A user that names the sender's buffer in a message of its own (the
//! agent's `RTS_READ` over shared memory) reads it here straight into the final destination:
//! one copy, by the receiver alone, with no step by the sender (a sender that computes does
//! not hold the receiver up).

use super::super::cma;
use super::super::error::Error;
use super::{Endpoint, LongMessages};

impl Endpoint {
    /// Copies `dst.len()` bytes at address `addr` of the peer process into `dst`
    /// (`process_vm_readv`). Needs [`LongMessages::SingleCopy`] for inbound messages
    /// ([`Endpoint::long_messages_in`]); a peer that went away fails the endpoint.
    pub fn read_peer(&mut self, addr: u64, dst: &mut [u8]) -> Result<(), Error> {
        self.may_read_peer(dst.len())?;
        let r = cma::read_from(self.peer_pid, addr, dst);
        self.peer_read_done(dst.len(), r)
    }

    /// Like [`Endpoint::read_peer`], appending `n` bytes to `dst` without zeroing them first.
    pub fn read_peer_append(
        &mut self,
        addr: u64,
        n: usize,
        dst: &mut Vec<u8>,
    ) -> Result<(), Error> {
        self.may_read_peer(n)?;
        let r = cma::read_append(self.peer_pid, addr, dst, n);
        self.peer_read_done(n, r)
    }

    fn may_read_peer(&self, len: usize) -> Result<(), Error> {
        self.check_open()?;
        if self.long_in != LongMessages::SingleCopy {
            return Err(Error::SingleCopy {
                len,
                source: std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "this process may not read the peer's memory (the set-up probe failed)",
                ),
            });
        }
        Ok(())
    }

    /// The outcome of a read of `len` bytes from the peer: a peer that went away fails the
    /// endpoint; another error is [`Error::SingleCopy`].
    pub(super) fn peer_read_done(
        &mut self,
        len: usize,
        r: std::io::Result<()>,
    ) -> Result<(), Error> {
        let Err(source) = r else {
            return Ok(());
        };
        if source.raw_os_error() == Some(libc::ESRCH) {
            self.fail("the peer process went away");
            return Err(Error::PeerFailed("the peer process went away"));
        }
        Err(Error::SingleCopy { len, source })
    }
}
