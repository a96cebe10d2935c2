//! Safe API over libibverbs (through `rdma-sys`): devices, protection domains, memory regions,
//! completion queues and channels, reliable-connected queue pairs, work requests and
//! completions, asynchronous events.
//!
//! Building this crate needs rdma-core's `libibverbs-dev` and libclang (`rdma-sys` generates
//! its bindings with bindgen). A program that should build without them depends on `viaduct`,
//! `viaduct-agent` or `viaduct-mpi` with `default-features = false` (no `rdma` feature): this
//! crate is then left out and TCP and shared memory remain.
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
//!
//! This is the verbs method under `viaduct-agent`; most programs use the agent (its crate page
//! has the quick start of tagged messaging) and never touch a queue pair directly.
//!
//! # Glossary
//!
//! | word | what it is |
//! | --- | --- |
//! | context | an open RDMA device ([`Context`]) |
//! | protection domain | the scope that memory regions and queue pairs share ([`ProtectionDomain`]) |
//! | memory region | memory registered with the NIC, with its local and remote keys ([`MemoryRegion`]) |
//! | completion queue | where the NIC reports finished work requests ([`CompletionQueue`]); a completion channel wakes a thread when one arrives ([`CompletionChannel`]) |
//! | queue pair | a reliable-connected (RC) endpoint to one peer ([`QueuePair`]); the agent's verbs VC holds one |
//! | work request / descriptor | one posted send, receive, RDMA write or read ([`SendRequest`], [`RecvRequest`]); the agent's CARs are descriptors |
//! | completion | the one report of a work request, success or failure, with the memory it owned ([`Completion`]) |
//! | endpoint | what a peer needs to connect: queue pair number, LID, GID (part of a rank's business card in the agent) |
//!
//! # Progress and threads
//!
//! - The NIC moves the data of posted work requests by itself; nothing else runs in the
//!   background. A completion is seen only when the completion queue is polled or waited on
//!   ([`CompletionQueue::wait`]); the memory of a work request comes back only then.
//! - **Threads**: a [`QueuePair`] and a [`CompletionQueue`] are `Clone + Send + Sync`: clone
//!   them to post and poll from several threads.
//!
//! ```
//! fn shareable<T: Clone + Send + Sync>() {}
//! shareable::<viaduct_verbs::QueuePair>();
//! shareable::<viaduct_verbs::CompletionQueue>();
//! ```
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
pub mod srq;
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
pub use srq::SharedReceiveQueue;
pub use wc::{Completion, Opcode, Status};
pub use wr::{PostError, RawSendRequest, RawSge, RecvRequest, Segment, SendOp, SendRequest};
