//! The viaduct communication agent: requests, generalized requests, request handlers and
//! nonblocking file I/O.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod bootstrap;
pub mod fileio;
pub mod request;
