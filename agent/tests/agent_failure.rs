//! A rank killed with SIGKILL in the middle of transfers, over shm and tcp: the shared body of
//! `agent_common::killed` (verbs runs it in `agent_verbs.rs`).

mod agent_common;

use agent_common::killed;
use agent_common::method::Method;

/// The killed rank, started as a child process by the tests below.
#[test]
#[ignore = "child process of the killed-rank tests"]
fn child_rank() {
    killed::child_rank();
}

#[test]
fn killed_rank_over_shm() {
    killed::killed_mid_transfer(Method::Shm, "child_rank");
}

#[test]
fn killed_rank_over_tcp() {
    killed::killed_mid_transfer(Method::Tcp, "child_rank");
}

#[test]
fn killed_during_blocking_calls_over_shm() {
    killed::killed_during_blocking_calls(Method::Shm, "child_rank");
}

#[test]
fn killed_during_blocking_calls_over_tcp() {
    killed::killed_during_blocking_calls(Method::Tcp, "child_rank");
}
