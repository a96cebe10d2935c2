//! `viaduct bench ...`: benchmarks, each in its own module with a clap `Args` and a `run`.

pub mod agent;
pub mod clock;
pub mod collective;
pub mod greq;
pub mod io;
pub mod launched;
pub mod method;
pub mod paired;
pub mod stats;
pub mod threads;
#[cfg(feature = "rdma")]
pub mod verbs_lat;
