//! Nonblocking file I/O whose requests are generalized requests completed by io_uring.
//!
//! A [`FileEngine`] is one io_uring ring behind a request class ([`UringClass`]); a [`File`]
//! opened on it starts reads, writes and syncs with `i*` calls that return a [`FileRequest`]: an
//! agent [`Request`](crate::request::Request) (usable in every `wait*`/`test*` array, mixed with
//! other requests) plus the claim on the operation's buffers, which come back when it completes.
//!
//! Progress: a test on a file request reaps the ring without blocking (the class's
//! `poll` hook); a blocking wait hands **every** incomplete file request of the engine in its
//! array to the class's `wait` hook, which is one `io_uring_enter` with a timeout. No helper
//! thread is involved: a file request nobody tests or waits on does not progress (its operation
//! still runs in the kernel). The status count is the number of bytes moved; a cancelled request
//! reports [`Status::test_cancelled`](crate::request::Status::test_cancelled).
//!
//! Handlers ([`post_handler`](crate::request::post_handler)) can be posted on a file request
//! like on any request; since a file request progresses only in tests and waits, its handler
//! runs (on the handler thread) after the test or wait that completed it.
//!
//! Network to file: see [`network`] for the ways a received message is written to a file without
//! a copy by the program, and when its buffer is given back.

mod class;
mod engine;
mod error;
mod file;
pub mod network;
mod request;

pub use class::{OpState, UringClass};
pub use engine::FileEngine;
pub use error::FileIoError;
pub use file::{File, OpenOptions};
pub use request::{BufferClaim, FileRequest, FileWaitError};
pub use viaduct_fallback::file::{Buffers, FileError, IoBuffer, OpKind, RetryStats};
