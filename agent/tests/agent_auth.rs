//! A whole job in which one rank holds another job's key: its connections are refused by the
//! job-key handshake, both sides end set-up with an error that names the cause, and nobody
//! hangs. Ranks are threads of this process with their own agents, over real shm and tcp.

mod agent_common;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use agent_common::{config, rank_env};
use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JobKey};
use viaduct_agent::config::MethodKind;

fn job_with_a_stranger(method: MethodKind) {
    let server = Pmi1Server::start(ServerConfig::new(2)).expect("PMI server");
    let keys = [
        JobKey::generate().expect("key"),
        JobKey::generate().expect("key"),
    ];
    let (tx, rx) = mpsc::channel();
    for rank in 0..2u32 {
        let vars = rank_env(&server, rank, 2, &keys[rank as usize]);
        let mut cfg = config(method);
        cfg.connect_timeout = Duration::from_secs(3);
        let tx = tx.clone();
        thread::spawn(move || {
            let boot = Bootstrap::from_vars(vars).expect("bootstrap");
            let result = Agent::with_bootstrap(boot, cfg).map(|_| ());
            let _ = tx.send((rank, result.map_err(|e| format!("{e}: {e:?}"))));
        });
    }
    let mut errors = vec![String::new(); 2];
    for _ in 0..2 {
        let (rank, result) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a rank hung in set-up");
        match result {
            Ok(()) => panic!("rank {rank} joined a job whose key it does not hold"),
            Err(e) => errors[rank as usize] = e,
        }
    }
    server.shutdown();
    // Rank 1 connects to rank 0 and is refused by the handshake.
    assert!(
        errors[1].contains("authentication with rank 0") && errors[1].contains("StrangerAcceptor"),
        "rank 1's error does not name the refused handshake: {}",
        errors[1]
    );
    // Rank 0 never got an authenticated connection from rank 1.
    assert!(
        errors[0].contains("no connection from rank(s) 1"),
        "rank 0's error does not name the missing rank: {}",
        errors[0]
    );
    println!(
        "{method:?}: rank 0: {}\n{method:?}: rank 1: {}",
        errors[0], errors[1]
    );
}

#[test]
fn a_rank_with_another_jobs_key_is_refused_over_tcp() {
    job_with_a_stranger(MethodKind::Tcp);
}

#[test]
fn a_rank_with_another_jobs_key_is_refused_over_shm() {
    job_with_a_stranger(MethodKind::Shm);
}
