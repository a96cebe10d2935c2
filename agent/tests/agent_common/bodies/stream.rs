//! The VC's byte stream: messages shown in place through `next`, consumed in parts, in order
//! with the tagged messages around them.

use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::error::AgentError;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::wait_all;

use super::pattern;
use crate::agent_common::scale::Scale;

/// Rank 0 writes a short message, sends a tagged one, writes [`Scale::stream_len`] bytes;
/// rank 1 consumes the first in two parts, receives the tagged one, then reads the long one
/// (in as many pieces as the method shows it), byte-exact; then nothing is left, the self
/// loop has no stream, and a write longer than one rendezvous piece is refused. Two ranks
/// only.
pub fn byte_stream(agent: Agent, s: &Scale) {
    let limit = Duration::from_secs(30);
    let len = s.stream_len;
    if agent.rank() == 0 {
        let mut reqs = vec![
            agent.write(1, b"first".to_vec()).unwrap(),
            agent.isend(1, 7, b"tagged").unwrap(),
            agent.write(1, pattern(len, 5)).unwrap(),
        ];
        wait_all(&mut reqs, None).unwrap();
    } else {
        let mut got = Vec::new();
        let n = agent
            .next_timeout(0, limit, |d| {
                got.extend_from_slice(&d[..2]);
                2
            })
            .unwrap();
        assert_eq!(n, Some(2));
        let n = agent
            .next_timeout(0, limit, |d| {
                got.extend_from_slice(d);
                d.len()
            })
            .unwrap();
        assert_eq!(n, Some(3));
        assert_eq!(got, b"first");
        let mut b = [0u8; 6];
        agent
            .recv(&mut b, Source::Rank(0), TagMatch::Tag(7))
            .unwrap();
        assert_eq!(&b, b"tagged");
        let mut big = Vec::new();
        while big.len() < len {
            let n = agent
                .next_timeout(0, limit, |d| {
                    big.extend_from_slice(d);
                    d.len()
                })
                .unwrap();
            assert!(matches!(n, Some(k) if k > 0), "the stream ended early");
        }
        assert!(big == pattern(len, 5), "the long write differs");
        assert_eq!(agent.next(0, |d| d.len()).unwrap(), None);
        assert!(matches!(
            agent.write(1, vec![1]),
            Err(AgentError::SelfStream)
        ));
        let too_long = agent.config().rendezvous_chunk + 1;
        assert!(matches!(
            agent.write(0, vec![0; too_long]),
            Err(AgentError::StreamTooLong { len, .. }) if len == too_long
        ));
    }
}
