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

mod threads {
    use std::thread;
    use std::time::{Duration, Instant};

    use viaduct_agent::config::{MethodKind, ProgressMode};
    use viaduct_agent::matching::{Source, TagMatch};
    use viaduct_agent::request::wait_all;

    use crate::agent_common::{config, job};

    /// How long the sleeping thread's blocking call may sleep.
    const SLEEP: Duration = Duration::from_secs(3);
    /// A post must go through well before the sleep could have ended.
    const POST_BOUND: Duration = Duration::from_secs(1);

    /// A thread asleep in blocking progress (nothing arrives for it) does not hold the agent:
    /// another thread's post goes through while it sleeps, and the message arrives. With
    /// `ranks` above 2, rank 0 sleeps on several VCs at once; ranks 2 and up only take part.
    fn post_while_another_thread_sleeps(method: MethodKind, ranks: u32) {
        let mut settings = config(method);
        // Sleep at once, without a spin first.
        settings.progress = ProgressMode::Block;
        job(ranks, settings, |agent| {
            if agent.rank() > 1 {
                return;
            }
            if agent.rank() == 1 {
                let mut b = [0u8; 16];
                let st = agent
                    .recv(&mut b, Source::Rank(0), TagMatch::Tag(5))
                    .unwrap();
                assert_eq!(&b[..st.count() as usize], b"past the sleeper");
                return;
            }
            let sleeper = {
                let agent = agent.clone();
                thread::spawn(move || agent.make_progress_blocking(SLEEP))
            };
            // Let the sleeper fall asleep.
            thread::sleep(Duration::from_millis(200));
            let start = Instant::now();
            let s = agent.isend(1, 5, b"past the sleeper").unwrap();
            let took = start.elapsed();
            wait_all(&mut [s], None).unwrap();
            sleeper.join().unwrap();
            assert!(
                took < POST_BOUND,
                "the post waited {took:?} for the thread asleep in blocking progress"
            );
        });
    }

    #[test]
    fn shm_post_while_another_thread_sleeps() {
        post_while_another_thread_sleeps(MethodKind::Shm, 2);
    }

    #[test]
    fn shm_post_while_another_thread_sleeps_on_several_vcs() {
        post_while_another_thread_sleeps(MethodKind::Shm, 3);
    }

    #[test]
    fn tcp_post_while_another_thread_sleeps() {
        post_while_another_thread_sleeps(MethodKind::Tcp, 2);
    }

    #[test]
    fn tcp_post_while_another_thread_sleeps_on_several_vcs() {
        post_while_another_thread_sleeps(MethodKind::Tcp, 3);
    }
}
