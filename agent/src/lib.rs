//! The viaduct communication agent: requests, generalized requests, request handlers and
//! nonblocking file I/O.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod bootstrap;
pub mod fileio;
pub mod request;
pub mod agent;
pub mod config;
mod connect;
mod engine;
pub mod error;
mod handshake;
pub mod matching;
pub mod method;
pub mod p2p;
pub mod progress;
pub mod recv_buffer;
mod vc;
mod wire;
pub mod stream;
