//! Safe API over libibverbs (through `rdma-sys`): devices, protection domains, memory regions,
//! completion queues and channels, reliable-connected queue pairs, work requests and
//! completions, asynchronous events.
//!
//! # Ownership
//!
//! Objects hold what they depend on (`Arc<...Inner>` freeing in `Drop`): a queue pair holds its
//! completion queues and protection domain, a memory region its protection domain, everything
//! its device context. Teardown order is right by construction.
//!
//! Memory handed to the NIC is owned by the operation: posting moves a [`SendRequest`] or
//! [`RecvRequest`] (holding [`MemoryRegion`]s) into the queue pair, and the [`Completion`]
//! polled from the completion queue gives the regions back. No safe call can free or reuse
//! them earlier; a queue pair dropped with outstanding requests is moved to the error state and
//! destroyed before their memory is released. Every posted request completes exactly once,
//! with an error status when it failed or was flushed. [`QueuePair::post_send_raw`] is the
//! `unsafe` path over raw scatter/gather entries.
//!
//! # Set-up
//!
//! ```no_run
//! use std::time::Duration;
//! use viaduct_verbs::{Access, Completions, ConnectOptions, Context, RecvRequest, SendRequest};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = Context::open("rxe0")?;
//! let pd = ctx.alloc_pd()?;
//! let cq = ctx.create_cq(256)?;
//! let prepared = pd.queue_pair(&cq, &cq).build()?;
//! let remote = prepared.endpoint(); // exchange endpoints with the peer (here: itself)
//! let qp = prepared.connect(&remote, &ConnectOptions::default())?;
//! let buf = pd.allocate(4096, Access::LOCAL_WRITE)?;
//! qp.post_recv([RecvRequest::new(1, buf)])?;
//! let msg = pd.allocate(4096, Access::empty())?;
//! qp.post_send([SendRequest::send(2, msg)])?;
//! let mut done = Completions::default();
//! cq.wait(&mut done, 2, Duration::from_secs(5))?;
//! for c in done.drain() {
//!     assert!(c.status.is_success(), "{}", c.status);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Device summary
//!
//! [`device::list`] returns every device with its ports (state, link layer, MTU, LID) and GID
//! tables (index, type, address) as plain data; empty on machines without RDMA.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod channel;
pub mod clock;
pub mod cq;
pub mod device;
pub mod error;
pub mod event;
pub mod mr;
pub mod msg;
pub mod pacer;
pub mod pd;
pub mod qp;
pub mod regcache;
pub mod wc;
pub mod wr;

pub use channel::CompletionChannel;
pub use cq::{CompletionQueue, Completions};
pub use device::{
    Context, DeviceAttributes, DeviceInfo, Gid, GidEntry, GidType, LinkLayer, Mtu, PortAttributes,
    PortInfo, PortState,
};
pub use error::{Error, Result};
pub use event::{AsyncEvent, AsyncEventKind, EventSubject};
pub use mr::{Access, AlignedBuffer, MemoryRegion, RemoteRegion};
pub use pd::ProtectionDomain;
pub use qp::{
    Capabilities, ConnectOptions, Endpoint, PreparedQueuePair, QueuePair, QueuePairBuilder,
};
pub use regcache::{CacheStats, Pooled, RegCache};
pub use wc::{Completion, Opcode, Status};
pub use wr::{PostError, RawSendRequest, RawSge, RecvRequest, Segment, SendOp, SendRequest};
