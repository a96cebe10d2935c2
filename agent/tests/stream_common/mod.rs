//! Running a job of several ranks inside one test process for the byte-stream tests: a PMI-1
//! server, one thread per rank, each with its own agent connected over a real method.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JOB_KEY_VAR, JobKey};
use viaduct_agent::config::{Config, MethodKind};

/// Upper bound on one job of a test.
pub const LIMIT: Duration = Duration::from_secs(90);

/// Upper bound on one wait inside a test.
pub const WAIT: Duration = Duration::from_secs(60);

/// Settings using only `method`, with a short failure-detection time.
pub fn config(method: MethodKind) -> Config {
    Config {
        transports: vec![method],
        connect_timeout: Duration::from_secs(30),
        peer_timeout: Duration::from_secs(2),
        ..Config::default()
    }
}

fn rank_env(server: &Pmi1Server, rank: u32, size: u32, key: &JobKey) -> Vec<(String, String)> {
    vec![
        ("PMI_PORT".to_owned(), server.port_env()),
        ("PMI_ID".to_owned(), rank.to_string()),
        ("PMI_RANK".to_owned(), rank.to_string()),
        ("PMI_SIZE".to_owned(), size.to_string()),
        ("VIADUCT_PMI_TIMEOUT".to_owned(), "60".to_owned()),
        (JOB_KEY_VAR.to_owned(), key.to_hex()),
    ]
}

/// Runs `body` on every rank of a job of `size` ranks over `config`, each rank a thread with
/// its own agent, and finalizes the agents afterwards; returns the ranks' results in rank
/// order. Fails the test if a rank panics or the job outlives [`LIMIT`].
pub fn job<T, F>(size: u32, config: Config, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Agent) -> T + Send + Sync + 'static,
{
    run(size, config, true, body)
}

/// Like [`job`], leaving each agent to `body` (which finalizes or drops it).
pub fn job_owned<T, F>(size: u32, config: Config, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Agent) -> T + Send + Sync + 'static,
{
    run(size, config, false, body)
}

fn run<T, F>(size: u32, config: Config, finalize: bool, body: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(Agent) -> T + Send + Sync + 'static,
{
    let server = Pmi1Server::start(ServerConfig::new(size)).expect("PMI server");
    let key = JobKey::generate().expect("job key");
    let body = Arc::new(body);
    let (tx, rx) = mpsc::channel();
    for rank in 0..size {
        let vars = rank_env(&server, rank, size, &key);
        let (tx, body, config) = (tx.clone(), Arc::clone(&body), config.clone());
        thread::Builder::new()
            .name(format!("rank-{rank}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let boot = Bootstrap::from_vars(vars).expect("bootstrap");
                    let agent = Agent::with_bootstrap(boot, config).expect("agent init");
                    if finalize {
                        let out = body(agent.clone());
                        agent.finalize().expect("finalize");
                        out
                    } else {
                        body(agent)
                    }
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
    server.shutdown();
    results
        .into_iter()
        .map(|r| r.expect("every rank reported"))
        .collect()
}
