//! `reserve_write` / `set_marker`: a place held in a VC's outgoing stream keeps its order
//! whatever order the buffers are bound in.

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};

use crate::agent_common::scale::Scale;

/// Length of the rendezvous-sized message bound to the second place.
const LONG: usize = 50_000;

/// Rank 0 reserves two places, sends a third message, binds the second place (a rendezvous
/// message) and only then the first: the third cannot complete while a place before it is
/// empty, and rank 1 receives them in reservation order, byte-exact. Two ranks only: the self
/// loop has no outgoing stream.
pub fn markers_keep_order(agent: Agent, _s: &Scale) {
    if agent.rank() == 0 {
        let m1 = agent.reserve_write(1).unwrap();
        let m2 = agent.reserve_write(1).unwrap();
        let mut c = agent.isend(1, 0, b"c").unwrap();
        let mut b = agent.set_marker(m2, 0, &vec![b'b'; LONG]).unwrap();
        assert!(
            c.test().unwrap().is_none(),
            "a message overtook a reserved place"
        );
        let mut a = agent.set_marker(m1, 0, b"a").unwrap();
        a.wait().unwrap();
        b.wait().unwrap();
        c.wait().unwrap();
    } else {
        let mut got = Vec::new();
        for _ in 0..3 {
            let (mut r, buf) = agent.irecv(LONG, Source::Rank(0), TagMatch::Any).unwrap();
            r.wait().unwrap();
            got.push(buf.take());
        }
        assert_eq!(got, vec![b"a".to_vec(), vec![b'b'; LONG], b"c".to_vec()]);
    }
}
