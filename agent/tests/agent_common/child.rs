//! A job of two ranks where rank 1 is a child process: this test binary run again for one of
//! its ignored tests, which plays the child's part and prints `ready` on stderr once it is
//! set up (the tests that kill a rank use it).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use viaduct_agent::bootstrap::server::{Pmi1Server, ServerConfig};
use viaduct_agent::bootstrap::{Bootstrap, JobKey};

use super::rank_env;

/// The PMI server of the job, the child (rank 1), and word of its readiness.
pub struct ChildJob {
    server: Pmi1Server,
    key: JobKey,
    /// The child process, rank 1.
    pub child: Child,
    ready: mpsc::Receiver<()>,
}

impl ChildJob {
    /// Starts rank 1: this binary running the ignored test `child_test`, with `var` set to
    /// `value` (how the child test knows it is the child, and what to do).
    pub fn spawn(child_test: &str, var: &str, value: &str) -> ChildJob {
        let server = Pmi1Server::start(ServerConfig::new(2)).expect("PMI server");
        let key = JobKey::generate().expect("job key");
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--ignored",
                "--exact",
                child_test,
                "--nocapture",
                "--test-threads=1",
            ])
            .envs(rank_env(&server, 1, 2, &key))
            .env(var, value)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the child rank");
        let stderr = child.stderr.take().expect("child stderr");
        let (tx, ready) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.trim() == "ready" {
                    let _ = tx.send(());
                }
            }
        });
        ChildJob {
            server,
            key,
            child,
            ready,
        }
    }

    /// The bootstrap of rank 0 (this process).
    pub fn bootstrap(&self) -> Bootstrap {
        Bootstrap::from_vars(rank_env(&self.server, 0, 2, &self.key)).expect("bootstrap")
    }

    /// Waits (at most 60 s) until the child printed `ready`; kills it and fails the test
    /// otherwise.
    pub fn wait_ready(&mut self) {
        if self.ready.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!("the child rank did not get ready within 60 s");
        }
    }

    /// Kills the child (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        self.child.kill().expect("killing the child rank");
        self.child.wait().expect("reaping the child rank");
    }

    /// Stops the job's PMI server.
    pub fn shutdown(self) {
        self.server.shutdown();
    }
}
