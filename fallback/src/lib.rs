//! Plain-hardware transports for viaduct: an io_uring engine, a TCP method and a shared-memory
//! method, all with descriptor semantics (post, then exactly one completion per descriptor).
#![deny(missing_docs)]

pub mod affinity;
pub mod fd;
pub mod file;
pub mod frame;
pub mod shm;
pub mod tcp;
pub mod uring;
