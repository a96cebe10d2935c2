//! Plain-hardware transports for viaduct: an io_uring engine, a TCP method and a shared-memory
//! method, all with descriptor semantics (post, then exactly one completion per descriptor).
//! It needs no RDMA library to build (only Linux with io_uring, 5.19 or later, at run time).
//!
//! - [`uring`]: a ring owned by one thread, a slot table from `user_data` to the operation and
//!   the buffers it owns, batched submission, provided buffer rings, feature probing, errors
//!   that name why io_uring is unavailable.
//! - [`tcp`] and [`shm`]: one connection per peer pair with the same shape: `post_send` /
//!   `post_send_buf` (accepted, or no resources), `poll` (exactly one completion per accepted
//!   descriptor, also after a failure), `next` / `consume` (inbound bytes in place, in the
//!   method's own receive memory), `wait`, emulated one-sided write and read.
//! - [`file`](mod@file): owned-buffer file operations on the io_uring engine.
//! - [`frame`]: the 32-byte message header both methods share.
//!
//! # Quick start: two shared-memory endpoints in one process
//!
//! ```
//! use std::time::Duration;
//! use viaduct_fallback::shm;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let path = std::env::temp_dir().join(format!("viaduct-doc-{}.sock", std::process::id()));
//! let listener = shm::Listener::bind(&path)?;
//! let server = std::thread::spawn(move || listener.accept(shm::Config::default()));
//! let mut a = shm::connect(&path, shm::Config::default())?;
//! let mut b = server.join().expect("accept thread")?;
//! assert!(a.post_send(1, 42, b"ping")?.is_posted());
//! loop {
//!     if let Some(m) = b.next()? {
//!         assert_eq!((m.tag, m.data), (42, &b"ping"[..]));
//!         b.consume(4)?;
//!         break;
//!     }
//!     b.wait(Duration::from_millis(10))?;
//! }
//! while a.poll().is_none() {} // the send's one completion
//! # let _ = std::fs::remove_file(&path);
//! # Ok(())
//! # }
//! ```
//!
//! These are the methods under `viaduct-agent`; most programs use the agent (its crate page
//! has the quick start of tagged messaging) and never touch a method directly.
//!
//! # Glossary
//!
//! | word | what it is |
//! | --- | --- |
//! | method | a transport between two processes: [`tcp`] or [`shm`] here, verbs in `viaduct-verbs` |
//! | endpoint | this side of one connection ([`tcp::Endpoint`], [`shm::Endpoint`]); the agent's VC to a peer holds one |
//! | descriptor | one posted operation (send, emulated write or read) with the caller's id; the agent's CARs are descriptors |
//! | completion | the one report of a descriptor, success or failure, returned by `poll` ([`tcp::Completion`], [`shm::Completion`]) |
//! | no resources | a post the method cannot accept now (the peer's window or the ring is full): a status ([`tcp::Posted::NoResources`]), not an error; the buffer comes back untouched |
//! | next / consume | `next` borrows the unconsumed bytes of the current inbound message in the method's own receive memory; `consume(n)` hands `n` of them back, releasing the memory once the message is consumed whole |
//! | frame | the 32-byte header (tag, length, kind) before each message ([`frame`]) |
//! | eager / rendezvous | a short message is copied into the method's memory at once; a long one waits until the receiver can take it (shared memory: one `process_vm_readv` copy) |
//! | emulated one-sided write/read | `post_write` / `post_read` on a region the peer registered, served by the peer's progress calls |
//!
//! # Progress and threads
//!
//! - **Nothing runs in the background**: `next`, `poll` and `wait` of an endpoint reap the
//!   ring's completions, send queued frames and serve the peer's requests; only `wait`
//!   blocks (up to its timeout). A post sends at once when it can; otherwise its frame leaves
//!   at the next of those calls, so call one regularly, also after the last post.
//! - **Threads**: an endpoint is `Send` but used through `&mut self`: one thread at a time
//!   (the agent keeps its endpoints behind its mutex). An io_uring [`uring`] ring is owned by
//!   one thread.
//! - **Liveness**: a peer that dies or stops is noticed through the connection (closed
//!   socket, dead process) or the heartbeat counters ([`shm::Endpoint::heartbeat`]); every
//!   outstanding descriptor then completes with an error.
//!
//! ```
//! fn movable<T: Send>() {}
//! movable::<viaduct_fallback::tcp::Endpoint>();
//! movable::<viaduct_fallback::shm::Endpoint>();
//! ```
#![deny(missing_docs)]

pub mod affinity;
pub mod copy;
pub mod cputime;
pub mod fd;
pub mod file;
pub mod frame;
pub mod lend;
pub mod memory;
pub mod netif;
pub mod process;
pub mod sendbuf;
pub mod shm;
pub mod tcp;
pub mod uring;
pub mod wait;
