//! The shared test bodies of `agent_common::bodies` over the verbs method (RC queue pairs),
//! between ranks that are threads of this process, each with its own agent, connected through
//! a real PMI-1 exchange, real queue pairs on one RDMA device (soft-RoCE `rxe0` in the VM of
//! `scripts/rxe-vm`), and the job-key handshake; at the verbs scale of `agent_common::scale`
//! (smaller counts and sizes, same checks). Then the fallback when no device can serve, and a
//! rank killed mid-transfer.
//!
//! Without a device the tests that need one print `SKIPPED: ...` and return, unless
//! `VIADUCT_REQUIRE_RDMA=1` is set (the VM sets it), where a missing device fails them. Run one
//! at a time: `--test-threads=1`.
#![cfg(feature = "rdma")]

#[macro_use]
mod agent_common;

mod verbs {
    method_tests!(Method::Verbs);
}

use std::sync::mpsc;
use std::time::Duration;

use agent_common::killed;
use agent_common::method::Method;
use agent_common::{job, rank_env};
use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JobKey};
use viaduct_agent::config::{Config, MethodKind};
use viaduct_agent::error::AgentError;

#[test]
fn verbs_listed_first_falls_back_to_tcp_without_a_device() {
    let has = !viaduct_verbs::device::names()
        .unwrap_or_default()
        .is_empty();
    let cfg = Config {
        transports: vec![MethodKind::Verbs, MethodKind::Tcp],
        // In the VM a device exists: name one that does not, so verbs cannot be offered.
        rdma_device: has.then(|| "no-such-device".to_owned()),
        ..Method::Verbs.config()
    };
    let kinds = job(2, cfg, |a| a.method_of(1 - a.rank()).unwrap());
    assert_eq!(kinds, vec!["tcp", "tcp"]);
}

/// `verbs` alone where it cannot work fails at init, on every rank, naming the cause.
#[test]
fn verbs_alone_without_a_device_fails_at_init_naming_the_cause() {
    let has = !viaduct_verbs::device::names()
        .unwrap_or_default()
        .is_empty();
    let cfg = Config {
        rdma_device: has.then(|| "no-such-device".to_owned()),
        connect_timeout: Duration::from_secs(20),
        ..Method::Verbs.config()
    };
    let server = Pmi1Server::start(ServerConfig::new(2)).expect("PMI server");
    let key = JobKey::generate().expect("job key");
    let (tx, rx) = mpsc::channel();
    for rank in 0..2 {
        let vars = rank_env(&server, rank, 2, &key);
        let (tx, cfg) = (tx.clone(), cfg.clone());
        std::thread::spawn(move || {
            let boot = Bootstrap::from_vars(vars).expect("bootstrap");
            let r = Agent::with_bootstrap(boot, cfg).map(|_| ());
            let _ = tx.send((rank, r));
        });
    }
    for _ in 0..2 {
        let (rank, r) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("init must fail, not hang");
        let e = r.expect_err("init over verbs alone must fail");
        let text = e.to_string();
        println!("rank {rank}: {text}");
        assert!(matches!(e, AgentError::NoMethod { .. }), "{e:?}");
        let cause = if has {
            "no RDMA device named no-such-device"
        } else {
            "no RDMA device"
        };
        assert!(text.contains(cause), "{text}");
    }
    server.shutdown();
}

/// The killed rank, started as a child process by
/// `a_killed_rank_fails_every_request_on_its_vc`.
#[test]
#[ignore = "child process of the killed-rank test"]
fn verbs_child_rank() {
    killed::child_rank();
}

/// The shared killed-rank body over verbs.
#[test]
fn a_killed_rank_fails_every_request_on_its_vc() {
    killed::killed_mid_transfer(Method::Verbs, "verbs_child_rank");
}
