//! Nonblocking file I/O on the io_uring engine: positional reads and writes (plain and vectored),
//! `fsync` and `fdatasync`, each owning its buffers until it completes.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//! use viaduct_fallback::file::{FileIo, FileIoConfig, IoBuffer};
//!
//! let mut io = FileIo::new(&FileIoConfig::default())?;
//! let file = Arc::new(std::fs::File::open("/etc/hostname")?);
//! let op = io.read_at(&file, IoBuffer::from(vec![0; 4096]), 0);
//! if io.wait(&op, Some(Duration::from_secs(5)))? {
//!     let done = io.take(op).expect("finished");
//!     let n = done.result?;
//!     println!("{n} bytes");
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A buffer belongs to its operation until the completion hands it back, so it cannot be touched
//! while the kernel may write it:
//!
//! ```compile_fail
//! # use std::sync::Arc;
//! # use viaduct_fallback::file::{FileIo, FileIoConfig, IoBuffer};
//! # let mut io = FileIo::new(&FileIoConfig::default()).unwrap();
//! # let file = Arc::new(std::fs::File::open("/etc/hostname").unwrap());
//! let mut buf = IoBuffer::from(vec![0; 4096]);
//! let op = io.read_at(&file, buf, 0);
//! buf[0] = 1; // error: `buf` was moved into the operation
//! ```

mod buffer;
mod error;
mod info;
mod io;
mod op;
mod pending;
mod region;
mod retry;

pub use buffer::{Buffers, IoBuffer};
pub use error::{FileError, OpKind, errno_name};
pub use io::{FileIo, FileIoConfig};
pub use op::{FileCompletion, FileOp};
pub use retry::RetryStats;
