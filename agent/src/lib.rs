//! The viaduct communication agent: requests, generalized requests, request handlers and
//! nonblocking file I/O.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod agent;
pub mod bootstrap;
pub mod coll;
pub mod comm;
pub mod config;
mod connect;
mod engine;
pub mod error;
mod fast;
pub mod fileio;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handshake;
mod liveness;
pub mod matching;
pub mod method;
pub mod p2p;
pub mod progress;
pub mod recv_buffer;
pub mod report;
pub mod request;
mod spare;
pub mod stream;
mod vc;
mod wire;
pub mod xfer;
