//! The shared test bodies of `agent_common::bodies` over every method between ranks of one
//! machine (`shm`, `tcp`): ranks are threads of this process, each with its own agent,
//! connected through a real PMI-1 exchange, real sockets and shared segments, and the job-key
//! handshake. The same bodies run over the self loop in `agent_self.rs` and over verbs in
//! `agent_verbs.rs`.

#[macro_use]
mod agent_common;

mod shm {
    method_tests!(Method::Shm);
}

mod tcp {
    method_tests!(Method::Tcp);
}
