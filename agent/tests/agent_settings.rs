//! Settings checked at start: values that do not parse, and settings that must be the same on
//! every rank but are not (each rank a thread with its own settings, over a real PMI-1 server
//! and real TCP connections).

mod agent_common;

use std::sync::mpsc;
use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JobKey};
use viaduct_agent::config::Config;

use agent_common::rank_env;

/// Starts a job of two ranks whose settings come from `vars(rank)`; returns each rank's
/// outcome of `Agent::with_bootstrap` (as text), rank 0 first.
fn start_two(vars: fn(u32) -> Vec<(&'static str, &'static str)>) -> Vec<Result<(), String>> {
    let server = Pmi1Server::start(ServerConfig::new(2)).expect("PMI server");
    let key = JobKey::generate().expect("job key");
    let (tx, rx) = mpsc::channel();
    for rank in 0..2 {
        let env = rank_env(&server, rank, 2, &key);
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut v = vec![
                ("VIADUCT_TRANSPORT", "tcp"),
                ("VIADUCT_CONNECT_TIMEOUT", "20"),
            ];
            v.extend(vars(rank));
            let config = Config::from_vars(v).expect("settings of one rank");
            let boot = Bootstrap::from_vars(env).expect("bootstrap");
            let r = Agent::with_bootstrap(boot, config)
                .map(drop)
                .map_err(|e| format!("{e}: {e:?}"));
            let _ = tx.send((rank, r));
        });
    }
    let mut out = vec![None, None];
    for _ in 0..2 {
        let (rank, r) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a rank neither started nor failed within 60 s");
        out[rank as usize] = Some(r);
    }
    server.shutdown();
    out.into_iter().map(Option::unwrap).collect()
}

#[test]
fn differing_coll_small_max_fails_at_init_on_both_ranks() {
    let results = start_two(|rank| {
        if rank == 1 {
            vec![("VIADUCT_COLL_SMALL_MAX", "0")]
        } else {
            vec![]
        }
    });
    for (rank, r) in results.iter().enumerate() {
        let e = r
            .as_ref()
            .expect_err(&format!("rank {rank} started with differing settings"));
        assert!(e.contains("VIADUCT_COLL_SMALL_MAX"), "rank {rank}: {e}");
        assert!(
            e.contains("rank 0") && e.contains("rank 1"),
            "rank {rank}: {e}"
        );
        assert!(
            e.contains("4096") && e.contains("has 0"),
            "rank {rank}: {e}"
        );
    }
}

#[test]
fn differing_eager_limit_fails_at_init() {
    let results = start_two(|rank| vec![("VIADUCT_EAGER_LIMIT", ["1024", "2048"][rank as usize])]);
    for (rank, r) in results.iter().enumerate() {
        let e = r.as_ref().expect_err("differing eager limits");
        assert!(e.contains("VIADUCT_EAGER_LIMIT"), "rank {rank}: {e}");
    }
}

#[test]
fn equal_settings_start() {
    let results = start_two(|_| {
        vec![
            ("VIADUCT_COLL_SMALL_MAX", "0"),
            ("VIADUCT_PEER_TIMEOUT", "3"),
        ]
    });
    for (rank, r) in results.iter().enumerate() {
        assert!(r.is_ok(), "rank {rank}: {r:?}");
    }
}

#[test]
fn unparsable_values_name_the_variable_and_value() {
    for (var, value) in [
        ("VIADUCT_EAGER_LIMIT", "abc"),
        ("VIADUCT_COLL_SMALL_MAX", "lots"),
        ("VIADUCT_COLL_BCAST_CHAIN_MIN", "-1"),
        ("VIADUCT_COLL_ALLREDUCE_RSAG_MIN", "1k"),
        ("VIADUCT_COLL_ALLGATHER_RING_MIN", ""),
        ("VIADUCT_XFER_CHUNK", "x"),
        ("VIADUCT_PEER_TIMEOUT", "soon"),
        ("VIADUCT_SPIN_MAX", "many"),
    ] {
        let e = Config::from_vars([(var, value)])
            .expect_err(&format!("{var}={value:?} was accepted"))
            .to_string();
        assert!(e.contains(var), "{var}: {e}");
        assert!(e.contains(&format!("{value:?}")), "{var}: {e}");
    }
}

#[test]
fn timeouts_are_checked_under_their_own_names() {
    for var in ["VIADUCT_CONNECT_TIMEOUT", "VIADUCT_PEER_TIMEOUT"] {
        for value in ["1e-12", "0", "-3", "inf", "NaN", "1e300", "0.0000001"] {
            let e = Config::from_vars([(var, value)])
                .expect_err(&format!("{var}={value} was accepted"))
                .to_string();
            assert!(e.contains(var), "{var}={value}: {e}");
            let other = if var == "VIADUCT_PEER_TIMEOUT" {
                "VIADUCT_CONNECT_TIMEOUT"
            } else {
                "VIADUCT_PEER_TIMEOUT"
            };
            assert!(!e.contains(other), "{var}={value}: {e}");
        }
        let c = Config::from_vars([(var, "0.25")]).unwrap();
        assert!(
            c.peer_timeout == Duration::from_millis(250)
                || c.connect_timeout == Duration::from_millis(250)
        );
    }
    // Explicit settings are checked too, under the variable's name.
    let c = Config {
        connect_timeout: Duration::from_nanos(1),
        ..Config::default()
    };
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("VIADUCT_CONNECT_TIMEOUT"), "{e}");
}
