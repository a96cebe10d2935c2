//! The method contract for the loopback endpoint: the generic suite instantiated for it, and
//! the failure injection that only loopback has (`close`).

use std::time::{Duration, Instant};

use viaduct_method::contract::{self, Harness};
use viaduct_method::loopback::{self, Config, Endpoint, Error};
use viaduct_method::{Endpoint as _, EndpointError, Posted};

const LIMIT: Duration = Duration::from_secs(60);

struct Loopback;

impl Harness for Loopback {
    type Ep = Endpoint;
    const LIMIT: Duration = LIMIT;
    const REAP_EVERY: u64 = 1;

    fn pair() -> (Endpoint, Endpoint) {
        loopback::pair(Config::default()).expect("pair")
    }

    fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
        loopback::pair(Config {
            max_message,
            ..Config::default()
        })
        .expect("pair")
    }

    /// Two sends: they stay outstanding until the peer consumes them.
    fn post_two_outstanding(ep: &mut Endpoint) {
        contract::send(ep, LIMIT, 1, 1, vec![1u8; 4 << 20]);
        assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
    }

    fn check_dropped_peer_completion(c: &loopback::Completion) {
        assert_eq!(
            c.result,
            Err(Error::PeerFailed("the peer closed its endpoint"))
        );
        assert_eq!(c.result.as_ref().err().map(Error::errno), Some(32));
    }

    fn is_too_long(e: &Error) -> bool {
        matches!(e, Error::TooLong { .. })
    }

    fn is_consume_beyond(e: &Error) -> bool {
        matches!(e, Error::ConsumeBeyond { .. })
    }
}

viaduct_method::contract_tests!(Loopback);

#[test]
fn close_fails_each_outstanding_post_exactly_once_on_both_sides() {
    let (mut a, mut b) = loopback::pair(Config::default()).expect("pair");
    for id in 0..5 {
        assert!(a.post_copy(id, id, &[id as u8]).expect("post").is_posted());
    }
    assert!(b.post_copy(10, 0, b"x").expect("post").is_posted());
    // One message consumed before the close: that send succeeds.
    let (tag, data) = contract::recv(&mut b, LIMIT);
    assert_eq!((tag, data), (0, vec![0]));
    b.close();
    let mut seen = Vec::new();
    let deadline = Instant::now() + LIMIT;
    while seen.len() < 5 {
        match a.poll() {
            Some(c) => {
                assert_eq!(c.result.is_ok(), c.id == 0, "{c:?}");
                if c.id != 0 {
                    assert!(c.result.as_ref().unwrap_err().is_peer_failure());
                }
                seen.push(c.id);
            }
            None => {
                assert!(Instant::now() < deadline, "missing completions: {seen:?}");
                a.wait(Duration::from_millis(10)).expect("wait");
            }
        }
    }
    seen.sort();
    assert_eq!(seen, [0, 1, 2, 3, 4]);
    // The message that arrived before the close still comes out, then the failure.
    assert_eq!(contract::recv(&mut a, LIMIT), (0, b"x".to_vec()));
    assert!(matches!(a.next(), Err(Error::PeerFailed(_))));
    assert!(a.poll().is_none(), "a descriptor completed twice");
    // The closed side: its own send completed with `Closed`, once; posts fail.
    let c = b.poll().expect("the closed side's send");
    assert_eq!((c.id, c.result), (10, Err(Error::Closed)));
    assert!(b.poll().is_none());
    assert_eq!(b.post_copy(11, 0, b"y").unwrap_err(), Error::Closed);
    assert!(matches!(a.post_copy(5, 0, b"z"), Err(Error::PeerFailed(_))));
}

#[test]
fn a_full_queue_answers_no_resources_and_gives_the_buffer_back() {
    let (mut a, mut b) = loopback::pair(Config {
        max_queued: 2,
        ..Config::default()
    })
    .expect("pair");
    assert!(a.post_buf(1, 0, vec![1].into()).expect("post").is_posted());
    assert!(a.post_buf(2, 0, vec![2].into()).expect("post").is_posted());
    match a.post_buf(3, 0, vec![3, 3].into()).expect("post") {
        Posted::NoResources(b) => assert_eq!(&b[..], &[3, 3]),
        Posted::InProgress => panic!("a third message past max_queued was accepted"),
    }
    assert_eq!(contract::recv(&mut b, LIMIT), (0, vec![1]));
    // The owned buffer comes back in the completion.
    let c = a.poll().expect("completion");
    assert_eq!((c.id, c.result, c.buffer), (1, Ok(1), Some(vec![1])));
    assert!(a.post_buf(3, 0, vec![3].into()).expect("post").is_posted());
    assert!(matches!(
        loopback::pair(Config {
            max_queued: 0,
            ..Config::default()
        }),
        Err(Error::Config(_))
    ));
}

#[test]
fn a_sleeper_wakes_for_a_post_and_not_before() {
    let (mut a, mut b) = loopback::pair(Config::default()).expect("pair");
    let sleeper = b.sleeper().expect("sleeper").expect("nothing is ready");
    // Nothing happens: the sleep lasts its timeout (a "must not happen before" bound).
    let t = Instant::now();
    sleeper.sleep(Duration::from_millis(30)).expect("sleep");
    assert!(t.elapsed() >= Duration::from_millis(30));
    let poster = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        assert!(a.post_copy(1, 1, b"wake").expect("post").is_posted());
        a
    });
    let t = Instant::now();
    sleeper.sleep(LIMIT).expect("sleep");
    assert!(t.elapsed() < LIMIT, "the post did not wake the sleeper");
    assert!(
        b.sleeper().expect("sleeper").is_none(),
        "a message is ready"
    );
    let _a = poster.join().expect("poster");
}
