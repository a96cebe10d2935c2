//! Running a job of several ranks inside one test process (a PMI-1 server, one thread per
//! rank, each with its own agent connected over real methods), and the test bodies every
//! method runs: [`bodies`] holds them, [`scale`] their sizes per method, [`method`] the runner,
//! [`killed`] the rank killed mid-transfer. [`method_tests!`] and [`self_tests!`] turn the
//! bodies into tests, so that `self`, `shm`, `tcp` and `verbs` run the same checks.

#![allow(dead_code, unused_macros)]

pub mod bodies;
pub mod child;
pub mod killed;
pub mod method;
pub mod scale;

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JOB_KEY_VAR, JobKey};
use viaduct_agent::config::{Config, MethodKind};

/// Upper bound on one job of a test. Generous: a 4-rank job over soft-RoCE in the emulated VM
/// took 41 s on a loaded host and over 90 s once when the host was busier still; the suite's
/// own per-test bound (`VIADUCT_RXE_TEST_TIMEOUT`, 240 s) stays above it.
pub const LIMIT: Duration = Duration::from_secs(180);

/// The PMI environment of `rank` in a job served by `server`.
pub fn rank_env(server: &Pmi1Server, rank: u32, size: u32, key: &JobKey) -> Vec<(String, String)> {
    vec![
        ("PMI_PORT".to_owned(), server.port_env()),
        ("PMI_ID".to_owned(), rank.to_string()),
        ("PMI_RANK".to_owned(), rank.to_string()),
        ("PMI_SIZE".to_owned(), size.to_string()),
        ("VIADUCT_PMI_TIMEOUT".to_owned(), "60".to_owned()),
        (JOB_KEY_VAR.to_owned(), key.to_hex()),
    ]
}

/// Settings using only `method`.
pub fn config(method: MethodKind) -> Config {
    Config {
        transports: vec![method],
        connect_timeout: Duration::from_secs(30),
        ..Config::default()
    }
}

/// Runs `body` on every rank of a job of `size` ranks over `config`, each rank a thread with
/// its own agent, and finalizes the agents afterwards; returns the ranks' results in rank
/// order. Fails the test if a rank panics or the job outlives [`LIMIT`].
pub fn job<T, F>(size: u32, config: Config, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Agent) -> T + Send + Sync + 'static,
{
    run_job(size, config, true, body)
}

/// Like [`job`], leaving each agent to `body` (which finalizes or drops it).
pub fn job_owned<T, F>(size: u32, config: Config, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Agent) -> T + Send + Sync + 'static,
{
    run_job(size, config, false, body)
}

fn run_job<T, F>(size: u32, config: Config, finalize: bool, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Agent) -> T + Send + Sync + 'static,
{
    let server = Pmi1Server::start(ServerConfig::new(size)).expect("PMI server");
    let key = JobKey::generate().expect("job key");
    let results = run_ranks(
        size,
        |rank| rank_env(&server, rank, size, &key),
        config,
        finalize,
        body,
    );
    server.shutdown();
    results
}

/// Runs `body` on `size` ranks, one thread each, rank `r` bootstrapped from `vars(r)` (a PMI
/// environment, see [`rank_env`]); finalizes each agent after `body` when `finalize`. Returns
/// the results in rank order; a rank's panic is raised again here, and a rank that does not
/// finish within [`LIMIT`] fails the test.
pub fn run_ranks<T, F>(
    size: u32,
    vars: impl Fn(u32) -> Vec<(String, String)>,
    config: Config,
    finalize: bool,
    body: F,
) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Agent) -> T + Send + Sync + 'static,
{
    let body = Arc::new(body);
    let (tx, rx) = mpsc::channel();
    for rank in 0..size {
        let vars = vars(rank);
        let (tx, body, config) = (tx.clone(), Arc::clone(&body), config.clone());
        thread::Builder::new()
            .name(format!("rank-{rank}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let boot = Bootstrap::from_vars(vars).expect("bootstrap");
                    let agent = Agent::with_bootstrap(boot, config).expect("agent init");
                    if !finalize {
                        return body(agent);
                    }
                    let out = body(agent.clone());
                    agent.finalize().expect("finalize");
                    out
                }));
                let _ = tx.send((rank, result));
            })
            .expect("rank thread");
    }
    drop(tx);
    let mut results: Vec<Option<T>> = (0..size).map(|_| None).collect();
    for _ in 0..size {
        let (rank, result) = rx
            .recv_timeout(LIMIT)
            .unwrap_or_else(|_| panic!("a rank did not finish within {LIMIT:?}"));
        match result {
            Ok(v) => results[rank as usize] = Some(v),
            Err(p) => std::panic::resume_unwind(p),
        }
    }
    results
        .into_iter()
        .map(|r| r.expect("every rank reported"))
        .collect()
}

/// One test per shared body that needs two or more ranks, over `$method` (a
/// [`method::Method`]), at that method's [`scale`].
macro_rules! method_tests {
    ($method:expr) => {
        use $crate::agent_common::bodies;
        use $crate::agent_common::method::{Method, run, run_with};

        #[test]
        fn ping_pong() {
            run($method, 2, bodies::p2p::ping_pong);
        }

        #[test]
        fn posted_and_unexpected() {
            run($method, 2, bodies::p2p::posted_and_unexpected);
        }

        #[test]
        fn big_message() {
            run($method, 2, bodies::p2p::big_message);
        }

        #[test]
        fn synchronous_send() {
            run($method, 2, bodies::p2p::synchronous_send);
        }

        #[test]
        fn threads_share_one_agent() {
            run($method, 2, bodies::p2p::threads_share_one_agent);
        }

        #[test]
        fn all_to_all_any_source_3_ranks() {
            run($method, 3, bodies::matching::all_to_all_any_source);
        }

        #[test]
        fn all_to_all_any_source_full() {
            let ranks = $method.scale().all_to_all_ranks;
            run($method, ranks, bodies::matching::all_to_all_any_source);
        }

        #[test]
        fn non_overtaking() {
            run($method, 2, bodies::matching::non_overtaking);
        }

        #[test]
        fn truncation() {
            run($method, 2, bodies::matching::truncation);
        }

        #[test]
        fn cancel_pending_receive() {
            run($method, 2, bodies::matching::cancel_pending_receive);
        }

        #[test]
        fn unexpected_messages() {
            run($method, 2, bodies::unexpected::many_unexpected);
        }

        #[test]
        fn unexpected_memory_bounded() {
            run_with(
                $method,
                2,
                bodies::unexpected::small_limit($method.config()),
                bodies::unexpected::memory_is_bounded,
            );
        }

        #[test]
        fn reserve_write_set_marker() {
            run($method, 2, bodies::order::markers_keep_order);
        }

        #[test]
        fn stream_next_and_consume() {
            run($method, 2, bodies::stream::byte_stream);
        }
    };
}

/// One test per shared body that makes sense on one rank, over the self loop. Left out:
/// unexpected memory bounded by back-pressure (a rank sending to itself cannot be held back
/// by itself), `reserve_write`/`set_marker` and the byte stream (both refused for one's own
/// rank, checked by the self-only tests), and the killed rank.
macro_rules! self_tests {
    () => {
        use $crate::agent_common::bodies;
        use $crate::agent_common::method::{Method, run};

        #[test]
        fn ping_pong() {
            run(Method::SelfLoop, 1, bodies::p2p::ping_pong);
        }

        #[test]
        fn posted_and_unexpected() {
            run(Method::SelfLoop, 1, bodies::p2p::posted_and_unexpected);
        }

        #[test]
        fn big_message() {
            run(Method::SelfLoop, 1, bodies::p2p::big_message);
        }

        #[test]
        fn synchronous_send() {
            run(Method::SelfLoop, 1, bodies::p2p::synchronous_send);
        }

        #[test]
        fn threads_share_one_agent() {
            run(Method::SelfLoop, 1, bodies::p2p::threads_share_one_agent);
        }

        #[test]
        fn all_to_all_any_source() {
            run(Method::SelfLoop, 1, bodies::matching::all_to_all_any_source);
        }

        #[test]
        fn non_overtaking() {
            run(Method::SelfLoop, 1, bodies::matching::non_overtaking);
        }

        #[test]
        fn truncation() {
            run(Method::SelfLoop, 1, bodies::matching::truncation);
        }

        #[test]
        fn cancel_pending_receive() {
            run(
                Method::SelfLoop,
                1,
                bodies::matching::cancel_pending_receive,
            );
        }

        #[test]
        fn unexpected_messages() {
            run(Method::SelfLoop, 1, bodies::unexpected::many_unexpected);
        }
    };
}
