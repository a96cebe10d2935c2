//! Requests: one handle type for every operation in progress, how they complete, and the
//! waits and tests over them.
//!
//! This crate holds the request machinery of the viaduct communication library, usable on its
//! own: message requests completed CAR by CAR, MPI-2 generalized requests, request classes with
//! poll and batched wait hooks, request handlers with deadlines (and their handler thread),
//! statuses, errors, and the `wait_*`/`test_*` functions over mixed arrays. It depends on no
//! other crate of the library; the agent (`viaduct-agent`) builds its messaging, file I/O and
//! collectives on it and re-exports it as `viaduct_agent::request`. It is safe Rust
//! (`forbid(unsafe_code)`), and its tests also run under Miri (`cargo +nightly miri test -p
//! viaduct-request`).
//!
//! # Quick example
//!
//! A request class whose `poll` hook counts down (a stand-in for a device queue it would
//! reap), a generalized request completed by another thread, and a message request whose
//! progress driver completes its CAR, all waited for in one array:
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//! use viaduct_request::{
//!     BoxError, CarCounter, ClassOps, ClassRequest, GrequestOps, ProgressDriver, QueryStatus,
//!     Request, RequestClass, Status, wait_all,
//! };
//!
//! /// Each request of the class completes after its number of polls.
//! struct Countdown;
//! impl ClassOps for Countdown {
//!     type State = AtomicU32;
//!     fn query(&self, _: &AtomicU32, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
//!         status.set_count(1);
//!         Ok(())
//!     }
//!     fn poll(&self, request: &ClassRequest<'_, AtomicU32>) -> Result<(), BoxError> {
//!         if request.state().fetch_sub(1, Ordering::AcqRel) == 1 {
//!             request.complete()?;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! /// A generalized request's callbacks (all defaults: nothing to query, free or cancel).
//! struct Job;
//! impl GrequestOps for Job {}
//!
//! /// A progress driver standing in for a network engine: the first time a wait or test calls
//! /// it, it completes the one CAR (8 bytes) of the message request it was given.
//! struct Engine(Mutex<Option<CarCounter>>);
//! impl ProgressDriver for Engine {
//!     fn progress(&self, _timeout: Option<Duration>) -> Result<(), BoxError> {
//!         let counter = self.0.lock().map_err(|_| "engine lock poisoned")?.take();
//!         if let Some(counter) = counter {
//!             counter.complete_car(8)?;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # fn main() -> Result<(), viaduct_request::RequestError> {
//! let class = RequestClass::new(Countdown);
//! let (counted, _handle) = class.start(AtomicU32::new(3));
//! let (job, done) = Request::generalized(Job);
//! let worker = std::thread::spawn(move || done.complete());
//! let engine = Arc::new(Engine(Mutex::new(None)));
//! let (message, counter) = Request::message_driven(1, engine.clone());
//! counter.set_envelope(0, 5);
//! *engine.0.lock().unwrap() = Some(counter);
//!
//! let mut requests = [counted, job, message];
//! let mut statuses = Vec::new();
//! wait_all(&mut requests, Some(&mut statuses))?;
//! worker.join().expect("the worker completed the job")?;
//! assert_eq!(statuses[0].count(), 1);
//! assert_eq!((statuses[2].tag(), statuses[2].count()), (Some(5), 8));
//! assert!(requests.iter().all(Request::is_null));
//! # Ok(())
//! # }
//! ```
//!
//! # Vocabulary
//!
//! | Term | Meaning |
//! |---|---|
//! | request | the handle of one operation in progress ([`Request`]): waited for, tested, cancelled, freed |
//! | CAR (communication agent request) | one unit of work behind a message request; the request counts its outstanding CARs and completes when the count reaches 0 ([`CarCounter`]) |
//! | progress driver | what waits and tests of message requests call to move the operations behind them ([`ProgressDriver`]) |
//! | status | what a completed request reports: source, tag, byte count, cancellation, error ([`Status`]) |
//! | generalized request | a request the user completes (MPI's `MPI_Grequest_start`): query, free and cancel callbacks on the user's state ([`GrequestOps`]), completed from any thread with a [`CompleteHandle`] |
//! | class | a family of generalized requests with a `poll` hook (run by tests and waits) and a `wait` hook (one blocking call for every request of the class in a wait) ([`RequestClass`], [`ClassOps`]) |
//! | handler | a function run on the handler thread when a request completes or releases its resources, within a [`Deadline`], or a failure function instead ([`post_handler`], [`handler`]) |
//! | abandoned | a request whose every completing handle was dropped: it completes with [`RequestError::Abandoned`] |
//!
//! # Kinds of requests
//!
//! A [`Request`] is, underneath, a counter of outstanding CARs (communication agent requests):
//! it completes when the count reaches 0, and it then reports a [`Status`] (source,
//! tag, byte count, cancellation, error). Three kinds share the handle and mix freely in the
//! arrays given to [`wait_any`], [`wait_some`], [`wait_all`], [`test_any`], [`test_some`] and
//! [`test_all`]:
//!
//! - **message** requests ([`Request::message`]): the agent's methods complete CARs through a
//!   [`CarCounter`]; an optional [`ProgressDriver`] lets waits and tests drive the progress engine;
//! - **generalized** requests ([`Request::generalized`], MPI-2 `MPI_Grequest_start`): the user's
//!   [`GrequestOps`] callbacks (query, free, cancel) on the user's own state, completed from any
//!   thread with a [`CompleteHandle`];
//! - **class-driven** requests ([`RequestClass::start`]): a [`ClassOps`] adds a `poll` hook
//!   (called by tests and waits) and a `wait` hook (called once per blocking round with every
//!   request of the class in the wait, so one system call serves the batch).
//!
//! Handlers ([`post_handler`]) run a function when a request completes or releases its
//! resources, within a [`Deadline`], on the handler thread.
//!
//! # Progress contract
//!
//! - Every request completes exactly once, also on failure, and the first completion decides
//!   its outcome: `complete`, the last CAR, a cancellation by the owner, a failure (`fail`,
//!   `fail_car`, a failing hook or driver), or abandonment ([`RequestError::Abandoned`], when the
//!   last [`CompleteHandle`] or [`CarCounter`] of an incomplete generalized or message request is
//!   dropped). A later completion gets [`RequestError::AlreadyComplete`] and changes nothing: no
//!   error, byte count or cancellation of it shows in the status. [`Request::get_status`] and
//!   [`Request::wait`] report the same outcome.
//! - Who completes a request: a method (through [`CarCounter`]), the user (through
//!   [`CompleteHandle`], from any thread), or a class's hooks, which run only inside
//!   `test*`/`wait*`/[`Request::get_status`] calls on that request's thread. A class-driven
//!   request nobody tests or waits on does not progress (unless the class has its own thread).
//! - A blocking wait sleeps on a condition variable that completions wake, and calls wait hooks
//!   with a timeout that starts at [`MIN_HOOK_TIMEOUT`] and doubles, up to [`MAX_HOOK_TIMEOUT`],
//!   while nothing completes, so a mixed array never hangs and a completion by
//!   another thread is seen within one timeout.
//! - Callbacks, hooks and handlers never run with an internal lock held: each may call any agent
//!   function. Query, free and cancel run on the thread of the call named in [`GrequestOps`];
//!   handlers on the handler thread (see [`handler`]).
//! - Fast path: a request's memory comes from a small per-thread pool (an allocation only when
//!   the pool is empty; a callback state or class state of non-zero size adds one). A request
//!   whose callback state is empty (zero-sized, nothing to drop) goes back to the pool and out
//!   again with plain stores: its state is kept, not replaced. Completing a generalized request
//!   is one compare-and-swap on the state word; a wait on a complete request takes no lock and
//!   touches no condition variable, and the status it returns is four words built in registers;
//!   the condition variable and waiter list are used only when a wait actually blocks.
//!
//! # Building on it
//!
//! - Messaging: post a receive or send as [`Request::message`] with one outstanding CAR per
//!   descriptor (or [`CarCounter::add_outstanding`] as descriptors are posted), record the
//!   envelope with [`CarCounter::set_envelope`], complete CARs from the completion path with
//!   [`CarCounter::complete_car`] / [`CarCounter::fail_car`]; give the request a
//!   [`ProgressDriver`] ([`Request::message_driven`]) so that waits drive the progress engine.
//!   Cancellation: [`CarCounter::cancel_requested`] then [`CarCounter::complete_cancelled`].
//! - Nonblocking file I/O: a [`ClassOps`] whose state is the operation's slot in the ring,
//!   whose `poll` reaps completions without blocking and whose `wait` does one
//!   `io_uring_enter` for every file request of the wait ([`ClassRequest::complete`], or a
//!   [`CompleteHandle`] kept in the ring's table, completes the requests it reaps).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod car;
mod class;
mod core;
mod error;
mod greq;
mod handle;
pub mod handler;
mod set;
mod state;
mod status;
mod waiter;

pub use car::{CarCounter, ProgressDriver};
pub use class::{ClassOps, ClassRequest, MAX_DEFAULT_WAIT_SLEEP, RequestClass};
pub use error::{
    BoxError, Cause, ErrorKind, ErrorKinds, KindOf, RequestError, register_error_kinds,
};
pub use greq::{CompleteHandle, GrequestOps};
pub use handle::Request;
pub use handler::{Condition, Deadline, HandlerFn, RequestRef, flush_handlers, post_handler};
pub use set::{
    AnyOutcome, MAX_HOOK_TIMEOUT, MIN_HOOK_TIMEOUT, test_all, test_any, test_some, wait_all,
    wait_any, wait_some,
};
pub use status::{QueryStatus, Status};
