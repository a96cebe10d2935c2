//! Plain-hardware transports for viaduct: an io_uring engine, a TCP method and a shared-memory
//! method, all with descriptor semantics (post, then exactly one completion per descriptor).
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
#![deny(missing_docs)]

pub mod affinity;
pub mod fd;
pub mod file;
pub mod frame;
pub mod netif;
pub mod process;
pub mod shm;
pub mod tcp;
pub mod uring;
