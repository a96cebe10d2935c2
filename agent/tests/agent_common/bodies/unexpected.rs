//! Unexpected-message bodies: many messages held before any receive is posted, with exact
//! accounting, and a cap on the memory they hold.

use viaduct_agent::agent::Agent;
use viaduct_agent::config::Config;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Request, wait_all};

use super::one_way;
use crate::agent_common::scale::Scale;

/// [`Scale::unexpected_messages`] messages of 4 bytes, all arrived before any receive is
/// posted: the agent holds exactly their count and their payload bytes (no hidden buffer of
/// eager size per message), and hands them out in send order.
pub fn many_unexpected(agent: Agent, s: &Scale) {
    let count = s.unexpected_messages;
    one_way(
        &agent,
        |dest| {
            for i in 0..count {
                agent
                    .isend(dest, 1, &i.to_le_bytes())
                    .unwrap()
                    .wait()
                    .unwrap();
            }
            vec![agent.issend(dest, 2, b"done").unwrap()]
        },
        |src| {
            let mut b = [0u8; 4];
            // Taking the last message first makes every earlier one unexpected.
            agent
                .recv(&mut b, Source::Rank(src), TagMatch::Tag(2))
                .unwrap();
            assert_eq!(agent.unexpected(), (count as usize, 4 * count as usize));
            for i in 0..count {
                agent.recv(&mut b, Source::Any, TagMatch::Tag(1)).unwrap();
                assert_eq!(u32::from_le_bytes(b), i);
            }
            assert_eq!(agent.unexpected(), (0, 0));
        },
    );
}

/// `settings` with unexpected payload capped at 64 KiB, for [`memory_is_bounded`].
pub fn small_limit(settings: Config) -> Config {
    Config {
        max_unexpected_bytes: 64 << 10,
        ..settings
    }
}

/// Length of the messages of [`memory_is_bounded`].
const BOUNDED_LEN: usize = 1024;

/// With a small `max_unexpected_bytes` (see [`small_limit`]), a receiver that posts no receive
/// holds at most about that much unexpected payload: the rest waits in the method
/// (back-pressure on the sender), and every message still arrives, in order, once receives
/// are posted. Two ranks only: a rank sending to itself cannot be held back by itself.
pub fn memory_is_bounded(agent: Agent, s: &Scale) {
    let count = s.bounded_messages;
    let limit = agent.config().max_unexpected_bytes;
    if agent.rank() == 0 {
        let mut reqs: Vec<Request> = (0..count)
            .map(|i| agent.isend(1, 1, &[i as u8; BOUNDED_LEN]).unwrap())
            .collect();
        wait_all(&mut reqs, None).unwrap();
    } else {
        let mut rounds = 0;
        while agent.unexpected().1 < limit && rounds < 20_000 {
            agent.make_progress_blocking(std::time::Duration::from_millis(1));
            rounds += 1;
        }
        assert!(
            agent.unexpected().1 >= limit,
            "the sender never filled the limit"
        );
        for _ in 0..1000 {
            agent.make_progress();
        }
        // One pass may take one burst of 64 messages past the limit, no more.
        let held = agent.unexpected().1;
        assert!(
            held <= limit + 64 * BOUNDED_LEN,
            "{held} bytes held for a limit of {limit}"
        );
        for i in 0..count {
            let mut b = [0u8; BOUNDED_LEN];
            agent
                .recv(&mut b, Source::Rank(0), TagMatch::Tag(1))
                .unwrap();
            assert_eq!(b[0], i as u8);
        }
        assert_eq!(agent.unexpected(), (0, 0));
    }
}
