//! The methods the shared bodies run over, and the runner that starts a job over one of them.

use viaduct_agent::agent::Agent;
use viaduct_agent::config::{Config, MethodKind};

use super::scale::{self, Scale};
use super::{config, job};

/// A method between the ranks of a test job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// One rank talking to itself (the self loop): the job has a single rank.
    SelfLoop,
    /// Shared memory between ranks.
    Shm,
    /// TCP over io_uring.
    Tcp,
    /// RDMA verbs (soft-RoCE in the VM).
    Verbs,
}

impl Method {
    /// The name `Agent::method_of` reports for a VC over this method.
    pub fn name(self) -> &'static str {
        match self {
            Method::SelfLoop => "self",
            Method::Shm => "shm",
            Method::Tcp => "tcp",
            Method::Verbs => "verbs",
        }
    }

    /// The sizes and counts the bodies use over this method.
    pub fn scale(self) -> &'static Scale {
        match self {
            Method::Verbs => &scale::VERBS,
            _ => &scale::HOST,
        }
    }

    /// Settings using only this method (any list for the self loop, which needs none).
    pub fn config(self) -> Config {
        config(match self {
            Method::SelfLoop | Method::Shm => MethodKind::Shm,
            Method::Tcp => MethodKind::Tcp,
            Method::Verbs => MethodKind::Verbs,
        })
    }

    /// Whether this machine can run the method; prints `SKIPPED: ...` when it cannot.
    pub fn available(self) -> bool {
        match self {
            Method::Verbs => have_rdma(),
            _ => true,
        }
    }
}

/// Whether an RDMA device exists. Without one it prints `SKIPPED: ...` and says no, unless
/// `VIADUCT_REQUIRE_RDMA=1` (set inside the VM), where a missing device fails the test.
#[cfg(feature = "rdma")]
pub fn have_rdma() -> bool {
    let names = viaduct_verbs::device::names().unwrap_or_default();
    if names.is_empty() {
        assert!(
            std::env::var("VIADUCT_REQUIRE_RDMA").as_deref() != Ok("1"),
            "VIADUCT_REQUIRE_RDMA=1 but this machine has no RDMA device"
        );
        println!("SKIPPED: no RDMA device (run through scripts/rxe-vm)");
        return false;
    }
    true
}

/// Without the `rdma` feature there is no verbs method.
#[cfg(not(feature = "rdma"))]
pub fn have_rdma() -> bool {
    println!("SKIPPED: built without the rdma feature");
    false
}

/// A body shared by every method: runs on each rank with that rank's agent.
pub type Body = fn(Agent, &'static Scale);

/// Runs `body` over `method` on `ranks` ranks (one rank for the self loop) with the method's
/// own settings.
pub fn run(method: Method, ranks: u32, body: Body) {
    run_with(method, ranks, method.config(), body);
}

/// [`run`] with explicit settings. Before the body, every rank checks that each VC uses the
/// method asked for (the self loop for its own rank).
pub fn run_with(method: Method, ranks: u32, settings: Config, body: Body) {
    if !method.available() {
        return;
    }
    let ranks = if method == Method::SelfLoop { 1 } else { ranks };
    let scale = method.scale();
    job(ranks, settings, move |agent| {
        let me = agent.rank();
        for peer in 0..agent.size() {
            let want = if peer == me { "self" } else { method.name() };
            assert_eq!(
                agent.method_of(peer),
                Some(want),
                "rank {me}: VC to rank {peer}"
            );
        }
        body(agent, scale);
    });
}
