//! The method contract's tests, written once over [`Endpoint`] and instantiated per method
//! with [`contract_tests!`](crate::contract_tests) (each test then carries the method's module
//! in its name, `shm::…`, `tcp::…`, `loopback::…`).
//!
//! A method supplies a [`Harness`]: how to make a connected pair in one process, and the few
//! things that differ between methods (descriptors that stay outstanding, how its errors are
//! told apart). The helpers ([`send`], [`recv`], [`reap`], ...) serve the methods' own tests
//! too. Every wait is bounded by [`Harness::LIMIT`], after which a test calls the run stalled
//! (not a speed); the functions panic on a broken contract, as tests do.

use std::collections::HashMap;
use std::thread;
use std::time::{Duration, Instant};

use crate::{Completion, Endpoint, EndpointError, Posted};

/// A deterministic payload of `len` bytes for message `seed`.
///
/// ```
/// use viaduct_method::contract::pattern;
/// assert_eq!(pattern(3, 1), [1, 32, 63]);
/// assert_ne!(pattern(3, 1), pattern(3, 2));
/// ```
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(seed) as u8)
        .collect()
}

/// Message sizes every method carries byte exact, from empty to beyond its eager limit.
pub const SIZES: [usize; 9] = [0, 1, 63, 64, 4095, 4096, 65536, 1 << 20, 16 << 20];

/// Messages in the small-message streams.
pub const SMALL: u64 = 1_000_000;

/// `EMSGSIZE`, the errno of a message longer than the method carries.
pub const EMSGSIZE: i32 = 90;

/// What a method supplies to the generic tests.
///
/// ```
/// use std::time::Duration;
/// use viaduct_method::contract::{self, Harness};
/// use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
/// struct Loopback;
/// impl Harness for Loopback {
///     type Ep = Endpoint;
///     const LIMIT: Duration = Duration::from_secs(30);
///     const REAP_EVERY: u64 = 1;
///     fn pair() -> (Endpoint, Endpoint) {
///         loopback::pair(Config::default()).expect("pair")
///     }
///     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
///         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
///     }
///     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
///         Self::pair() // no liveness interval to shorten
///     }
///     fn post_two_outstanding(ep: &mut Endpoint) {
///         // Sends stay outstanding until the peer consumes them.
///         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
///         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
///     }
///     fn check_dropped_peer_completion(c: &loopback::Completion) {
///         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
///     }
///     fn is_too_long(e: &Error) -> bool {
///         matches!(e, Error::TooLong { .. })
///     }
///     fn is_consume_beyond(e: &Error) -> bool {
///         matches!(e, Error::ConsumeBeyond { .. })
///     }
/// }
///
/// contract::oversized_and_invalid_requests_are_errors::<Loopback>();
/// ```
pub trait Harness {
    /// The method's endpoint.
    type Ep: Endpoint + Send + 'static;
    /// The bound after which a test calls a run stalled (not a speed).
    const LIMIT: Duration;
    /// How many sends a streaming sender posts between two reaps.
    const REAP_EVERY: u64;
    /// Messages of the small-message stream ([`million_small_messages_arrive_in_order`]): a
    /// million ([`SMALL`]) unless the method cannot carry that many within [`Harness::LIMIT`]
    /// where its tests run (soft-RoCE in an emulated guest moves a few thousand a second).
    const SMALL_MESSAGES: u64 = SMALL;

    /// A connected pair in one process, with default settings.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::contract::{self, Harness};
    /// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
    /// # struct Loopback;
    /// # impl Harness for Loopback {
    /// #     type Ep = Endpoint;
    /// #     const LIMIT: Duration = Duration::from_secs(30);
    /// #     const REAP_EVERY: u64 = 1;
    ///     fn pair() -> (Endpoint, Endpoint) {
    ///         loopback::pair(Config::default()).expect("pair")
    ///     }
    /// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
    /// #     }
    /// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
    /// #         Self::pair() // no liveness interval to shorten
    /// #     }
    /// #     fn post_two_outstanding(ep: &mut Endpoint) {
    /// #         // Sends stay outstanding until the peer consumes them.
    /// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
    /// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
    /// #     }
    /// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
    /// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
    /// #     }
    /// #     fn is_too_long(e: &Error) -> bool {
    /// #         matches!(e, Error::TooLong { .. })
    /// #     }
    /// #     fn is_consume_beyond(e: &Error) -> bool {
    /// #         matches!(e, Error::ConsumeBeyond { .. })
    /// #     }
    /// # }
    /// contract::sizes_arrive_byte_exact::<Loopback>();
    /// ```
    fn pair() -> (Self::Ep, Self::Ep);

    /// A connected pair that refuses messages longer than `max` bytes.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::contract::{self, Harness};
    /// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
    /// # struct Loopback;
    /// # impl Harness for Loopback {
    /// #     type Ep = Endpoint;
    /// #     const LIMIT: Duration = Duration::from_secs(30);
    /// #     const REAP_EVERY: u64 = 1;
    /// #     fn pair() -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config::default()).expect("pair")
    /// #     }
    ///     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
    ///         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
    ///     }
    /// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
    /// #         Self::pair() // no liveness interval to shorten
    /// #     }
    /// #     fn post_two_outstanding(ep: &mut Endpoint) {
    /// #         // Sends stay outstanding until the peer consumes them.
    /// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
    /// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
    /// #     }
    /// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
    /// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
    /// #     }
    /// #     fn is_too_long(e: &Error) -> bool {
    /// #         matches!(e, Error::TooLong { .. })
    /// #     }
    /// #     fn is_consume_beyond(e: &Error) -> bool {
    /// #         matches!(e, Error::ConsumeBeyond { .. })
    /// #     }
    /// # }
    /// contract::oversized_and_invalid_requests_are_errors::<Loopback>();
    /// ```
    fn pair_with_max_message(max: usize) -> (Self::Ep, Self::Ep);

    /// A pair for the dropped-peer test (short liveness intervals where the method has them).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::contract::{self, Harness};
    /// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
    /// # struct Loopback;
    /// # impl Harness for Loopback {
    /// #     type Ep = Endpoint;
    /// #     const LIMIT: Duration = Duration::from_secs(30);
    /// #     const REAP_EVERY: u64 = 1;
    /// #     fn pair() -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config::default()).expect("pair")
    /// #     }
    /// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
    /// #     }
    ///     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
    ///         Self::pair() // no liveness interval to shorten
    ///     }
    /// #     fn post_two_outstanding(ep: &mut Endpoint) {
    /// #         // Sends stay outstanding until the peer consumes them.
    /// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
    /// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
    /// #     }
    /// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
    /// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
    /// #     }
    /// #     fn is_too_long(e: &Error) -> bool {
    /// #         matches!(e, Error::TooLong { .. })
    /// #     }
    /// #     fn is_consume_beyond(e: &Error) -> bool {
    /// #         matches!(e, Error::ConsumeBeyond { .. })
    /// #     }
    /// # }
    /// contract::dropped_peer_fails_outstanding_descriptors::<Loopback>();
    /// ```
    fn dropped_peer_pair() -> (Self::Ep, Self::Ep) {
        Self::pair()
    }

    /// Posts two descriptors, ids 1 and 2, that stay outstanding while the peer does nothing
    /// (a long send the peer must read, a read waiting for its reply, ...).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::contract::{self, Harness};
    /// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
    /// # struct Loopback;
    /// # impl Harness for Loopback {
    /// #     type Ep = Endpoint;
    /// #     const LIMIT: Duration = Duration::from_secs(30);
    /// #     const REAP_EVERY: u64 = 1;
    /// #     fn pair() -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config::default()).expect("pair")
    /// #     }
    /// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
    /// #     }
    /// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
    /// #         Self::pair() // no liveness interval to shorten
    /// #     }
    ///     fn post_two_outstanding(ep: &mut Endpoint) {
    ///         // Sends stay outstanding until the peer consumes them.
    ///         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
    ///         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
    ///     }
    /// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
    /// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
    /// #     }
    /// #     fn is_too_long(e: &Error) -> bool {
    /// #         matches!(e, Error::TooLong { .. })
    /// #     }
    /// #     fn is_consume_beyond(e: &Error) -> bool {
    /// #         matches!(e, Error::ConsumeBeyond { .. })
    /// #     }
    /// # }
    /// contract::dropped_peer_fails_outstanding_descriptors::<Loopback>();
    /// ```
    fn post_two_outstanding(ep: &mut Self::Ep);

    /// Checks a completion of [`Harness::post_two_outstanding`] after the peer was dropped.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::contract::{self, Harness};
    /// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
    /// # struct Loopback;
    /// # impl Harness for Loopback {
    /// #     type Ep = Endpoint;
    /// #     const LIMIT: Duration = Duration::from_secs(30);
    /// #     const REAP_EVERY: u64 = 1;
    /// #     fn pair() -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config::default()).expect("pair")
    /// #     }
    /// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
    /// #     }
    /// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
    /// #         Self::pair() // no liveness interval to shorten
    /// #     }
    /// #     fn post_two_outstanding(ep: &mut Endpoint) {
    /// #         // Sends stay outstanding until the peer consumes them.
    /// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
    /// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
    /// #     }
    ///     fn check_dropped_peer_completion(c: &loopback::Completion) {
    ///         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
    ///     }
    /// #     fn is_too_long(e: &Error) -> bool {
    /// #         matches!(e, Error::TooLong { .. })
    /// #     }
    /// #     fn is_consume_beyond(e: &Error) -> bool {
    /// #         matches!(e, Error::ConsumeBeyond { .. })
    /// #     }
    /// # }
    /// contract::dropped_peer_fails_outstanding_descriptors::<Loopback>();
    /// ```
    fn check_dropped_peer_completion(c: &Completion<<Self::Ep as Endpoint>::Error>) {
        let e = c
            .result
            .as_ref()
            .expect_err("an outstanding descriptor must fail");
        assert!(e.is_peer_failure(), "{e:?}");
        assert!(e.errno() > 0);
    }

    /// Whether `e` is the method's error for a message that is too long.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::contract::{self, Harness};
    /// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
    /// # struct Loopback;
    /// # impl Harness for Loopback {
    /// #     type Ep = Endpoint;
    /// #     const LIMIT: Duration = Duration::from_secs(30);
    /// #     const REAP_EVERY: u64 = 1;
    /// #     fn pair() -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config::default()).expect("pair")
    /// #     }
    /// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
    /// #     }
    /// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
    /// #         Self::pair() // no liveness interval to shorten
    /// #     }
    /// #     fn post_two_outstanding(ep: &mut Endpoint) {
    /// #         // Sends stay outstanding until the peer consumes them.
    /// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
    /// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
    /// #     }
    /// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
    /// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
    /// #     }
    ///     fn is_too_long(e: &Error) -> bool {
    ///         matches!(e, Error::TooLong { .. })
    ///     }
    /// #     fn is_consume_beyond(e: &Error) -> bool {
    /// #         matches!(e, Error::ConsumeBeyond { .. })
    /// #     }
    /// # }
    /// contract::oversized_and_invalid_requests_are_errors::<Loopback>();
    /// ```
    fn is_too_long(e: &<Self::Ep as Endpoint>::Error) -> bool;

    /// Whether `e` is the method's error for a `consume` past the message's end.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use viaduct_method::contract::{self, Harness};
    /// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
    /// # struct Loopback;
    /// # impl Harness for Loopback {
    /// #     type Ep = Endpoint;
    /// #     const LIMIT: Duration = Duration::from_secs(30);
    /// #     const REAP_EVERY: u64 = 1;
    /// #     fn pair() -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config::default()).expect("pair")
    /// #     }
    /// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
    /// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
    /// #     }
    /// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
    /// #         Self::pair() // no liveness interval to shorten
    /// #     }
    /// #     fn post_two_outstanding(ep: &mut Endpoint) {
    /// #         // Sends stay outstanding until the peer consumes them.
    /// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
    /// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
    /// #     }
    /// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
    /// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
    /// #     }
    /// #     fn is_too_long(e: &Error) -> bool {
    /// #         matches!(e, Error::TooLong { .. })
    /// #     }
    ///     fn is_consume_beyond(e: &Error) -> bool {
    ///         matches!(e, Error::ConsumeBeyond { .. })
    ///     }
    /// # }
    /// contract::oversized_and_invalid_requests_are_errors::<Loopback>();
    /// ```
    fn is_consume_beyond(e: &<Self::Ep as Endpoint>::Error) -> bool;
}

/// Posts `buf` as an owned buffer until the method takes it, waiting on no resources.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::{contract, loopback};
/// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
/// contract::send(&mut a, Duration::from_secs(30), 1, 7, b"abc".to_vec());
/// assert_eq!(contract::recv(&mut b, Duration::from_secs(30)), (7, b"abc".to_vec()));
/// # Ok::<(), loopback::Error>(())
/// ```
pub fn send<E: Endpoint>(ep: &mut E, limit: Duration, id: u64, tag: u64, buf: Vec<u8>) {
    try_send(ep, limit, id, tag, buf).expect("post_buf");
}

/// Like [`send`], with the error of the post handed out.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::{contract, loopback};
/// let (mut a, b) = loopback::pair(loopback::Config::default())?;
/// drop(b);
/// assert!(contract::try_send(&mut a, Duration::from_secs(30), 1, 0, vec![1]).is_err());
/// # Ok::<(), loopback::Error>(())
/// ```
pub fn try_send<E: Endpoint>(
    ep: &mut E,
    limit: Duration,
    id: u64,
    tag: u64,
    buf: Vec<u8>,
) -> Result<(), E::Error> {
    let deadline = Instant::now() + limit;
    let mut buf = buf.into();
    loop {
        match ep.post_buf(id, tag, buf)? {
            Posted::InProgress => return Ok(()),
            Posted::NoResources(b) => buf = b,
        }
        assert!(Instant::now() < deadline, "send {id} made no progress");
        ep.wait(Duration::from_millis(50))?;
    }
}

/// The next whole message, consumed: its tag and bytes.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::{contract, loopback};
/// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
/// contract::send(&mut a, Duration::from_secs(30), 1, 7, vec![1, 2]);
/// assert_eq!(contract::try_recv(&mut b, Duration::from_secs(30))?, (7, vec![1, 2]));
/// # Ok::<(), loopback::Error>(())
/// ```
pub fn try_recv<E: Endpoint>(ep: &mut E, limit: Duration) -> Result<(u64, Vec<u8>), E::Error> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(m) = ep.next()? {
            let out = (m.tag, m.data.to_vec());
            ep.consume(out.1.len())?;
            return Ok(out);
        }
        assert!(Instant::now() < deadline, "no message arrived");
        ep.wait(Duration::from_millis(50))?;
    }
}

/// Like [`try_recv`], failing the test on an error.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::{contract, loopback};
/// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
/// assert!(a.post_send_parts(1, 3, &[b"x"])?.is_posted());
/// assert_eq!(contract::recv(&mut b, Duration::from_secs(30)), (3, b"x".to_vec()));
/// # Ok::<(), loopback::Error>(())
/// ```
pub fn recv<E: Endpoint>(ep: &mut E, limit: Duration) -> (u64, Vec<u8>) {
    try_recv(ep, limit).expect("recv")
}

/// Drains completions until `n` arrived; all must succeed.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::{contract, loopback};
/// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
/// let limit = Duration::from_secs(30);
/// contract::send(&mut a, limit, 1, 0, vec![1]);
/// contract::recv(&mut b, limit);
/// contract::reap(&mut a, limit, 1); // the one send completed
/// # Ok::<(), loopback::Error>(())
/// ```
pub fn reap<E: Endpoint>(ep: &mut E, limit: Duration, n: usize) {
    let deadline = Instant::now() + limit;
    let mut got = 0;
    while got < n {
        match ep.poll() {
            Some(c) => {
                if let Err(e) = c.result {
                    panic!("completion {} failed: {e:?}", c.id);
                }
                got += 1;
            }
            None => {
                assert!(Instant::now() < deadline, "only {got} of {n} completions");
                ep.wait(Duration::from_millis(50)).expect("wait");
            }
        }
    }
}

/// Sends every size of [`SIZES`] from one thread to another over `(a, b)`.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::{contract, loopback};
/// let pair = loopback::pair(loopback::Config::default())?;
/// contract::sizes_round_trip(Duration::from_secs(60), pair);
/// # Ok::<(), loopback::Error>(())
/// ```
pub fn sizes_round_trip<E: Endpoint + Send + 'static>(limit: Duration, (mut a, mut b): (E, E)) {
    let sender = thread::spawn(move || {
        for (i, &len) in SIZES.iter().enumerate() {
            send(&mut a, limit, i as u64, len as u64, pattern(len, i as u64));
        }
        reap(&mut a, limit, SIZES.len());
        a
    });
    for (i, &len) in SIZES.iter().enumerate() {
        let (tag, data) = recv(&mut b, limit);
        assert_eq!(tag, len as u64);
        assert!(
            data == pattern(len, i as u64),
            "payload of {len} bytes differs"
        );
    }
    sender.join().expect("sender thread");
}

/// Every size arrives byte exact, with the default settings.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::contract::{self, Harness};
/// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
/// # struct Loopback;
/// # impl Harness for Loopback {
/// #     type Ep = Endpoint;
/// #     const LIMIT: Duration = Duration::from_secs(30);
/// #     const REAP_EVERY: u64 = 1;
/// #     fn pair() -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config::default()).expect("pair")
/// #     }
/// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
/// #     }
/// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
/// #         Self::pair() // no liveness interval to shorten
/// #     }
/// #     fn post_two_outstanding(ep: &mut Endpoint) {
/// #         // Sends stay outstanding until the peer consumes them.
/// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
/// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
/// #     }
/// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
/// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
/// #     }
/// #     fn is_too_long(e: &Error) -> bool {
/// #         matches!(e, Error::TooLong { .. })
/// #     }
/// #     fn is_consume_beyond(e: &Error) -> bool {
/// #         matches!(e, Error::ConsumeBeyond { .. })
/// #     }
/// # }
/// contract::sizes_arrive_byte_exact::<Loopback>();
/// ```
pub fn sizes_arrive_byte_exact<H: Harness>() {
    sizes_round_trip(H::LIMIT, H::pair());
}

/// A million 8-byte messages (the harness's [`Harness::SMALL_MESSAGES`]) from one thread arrive
/// at another in post order; each send the sender reaps completed with its 8 bytes.
///
/// ```no_run
/// # use std::time::Duration;
/// # use viaduct_method::contract::{self, Harness};
/// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
/// # struct Loopback;
/// # impl Harness for Loopback {
/// #     type Ep = Endpoint;
/// #     const LIMIT: Duration = Duration::from_secs(30);
/// #     const REAP_EVERY: u64 = 1;
/// #     fn pair() -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config::default()).expect("pair")
/// #     }
/// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
/// #     }
/// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
/// #         Self::pair() // no liveness interval to shorten
/// #     }
/// #     fn post_two_outstanding(ep: &mut Endpoint) {
/// #         // Sends stay outstanding until the peer consumes them.
/// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
/// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
/// #     }
/// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
/// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
/// #     }
/// #     fn is_too_long(e: &Error) -> bool {
/// #         matches!(e, Error::TooLong { .. })
/// #     }
/// #     fn is_consume_beyond(e: &Error) -> bool {
/// #         matches!(e, Error::ConsumeBeyond { .. })
/// #     }
/// # }
/// contract::million_small_messages_arrive_in_order::<Loopback>();
/// ```
pub fn million_small_messages_arrive_in_order<H: Harness>() {
    let n = H::SMALL_MESSAGES;
    let limit = H::LIMIT;
    let (mut a, mut b) = H::pair();
    let sender = thread::spawn(move || {
        let deadline = Instant::now() + limit;
        let mut i = 0u64;
        while i < n {
            match a.post_copy(i, i, &i.to_le_bytes()).expect("post") {
                Posted::InProgress => i += 1,
                Posted::NoResources(()) => {
                    assert!(Instant::now() < deadline, "stuck at {i}");
                    a.wait(Duration::from_millis(50)).expect("wait");
                }
            }
            // Reaping only now and then lets a method send the frames posted meanwhile
            // together.
            if i % H::REAP_EVERY == 0 {
                while let Some(c) = a.poll() {
                    assert_eq!(c.result.expect("send"), 8);
                }
            }
        }
        a
    });
    let deadline = Instant::now() + limit;
    let mut expect = 0u64;
    while expect < n {
        match b.next().expect("next") {
            Some(m) => {
                assert_eq!(m.tag, expect);
                assert_eq!(m.data, &expect.to_le_bytes());
                b.consume(8).expect("consume");
                expect += 1;
            }
            None => {
                assert!(Instant::now() < deadline, "stuck at {expect}");
                b.wait(Duration::from_millis(50)).expect("wait");
            }
        }
    }
    sender.join().expect("sender");
}

/// `next` shows the unconsumed rest of a message inside the method's own buffers, `consume`
/// in odd pieces keeps every byte, an empty message arrives in order, and a consume past the
/// end is an error.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::contract::{self, Harness};
/// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
/// # struct Loopback;
/// # impl Harness for Loopback {
/// #     type Ep = Endpoint;
/// #     const LIMIT: Duration = Duration::from_secs(30);
/// #     const REAP_EVERY: u64 = 1;
/// #     fn pair() -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config::default()).expect("pair")
/// #     }
/// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
/// #     }
/// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
/// #         Self::pair() // no liveness interval to shorten
/// #     }
/// #     fn post_two_outstanding(ep: &mut Endpoint) {
/// #         // Sends stay outstanding until the peer consumes them.
/// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
/// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
/// #     }
/// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
/// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
/// #     }
/// #     fn is_too_long(e: &Error) -> bool {
/// #         matches!(e, Error::TooLong { .. })
/// #     }
/// #     fn is_consume_beyond(e: &Error) -> bool {
/// #         matches!(e, Error::ConsumeBeyond { .. })
/// #     }
/// # }
/// contract::next_points_into_own_buffers_and_consume_keeps_every_byte::<Loopback>();
/// ```
pub fn next_points_into_own_buffers_and_consume_keeps_every_byte<H: Harness>() {
    let limit = H::LIMIT;
    let (mut a, mut b) = H::pair();
    let delivered_at_post = a.attrs().delivered_at_post;
    let small = pattern(1000, 7);
    let large = pattern(300_000, 9);
    send(&mut a, limit, 1, 1, small.clone());
    send(&mut a, limit, 2, 2, large.clone());
    let empty = a.post_copy(3, 3, &[]).expect("post");
    assert_eq!(empty, Posted::InProgress);
    let mut done = Vec::new();
    for expect in [&small, &large] {
        let mut got = Vec::new();
        let deadline = Instant::now() + limit;
        while got.len() < expect.len() {
            let (addr, len, first) = match b.next().expect("next") {
                Some(m) => (
                    m.data.as_ptr() as usize,
                    m.data.len(),
                    m.data.first().copied(),
                ),
                None => {
                    assert!(Instant::now() < deadline);
                    // One thread drives both ends: the sender's queued frames leave when it
                    // makes progress.
                    done.extend(a.poll());
                    b.wait(Duration::from_millis(5)).expect("wait");
                    continue;
                }
            };
            assert_eq!(
                len,
                expect.len() - got.len(),
                "next shows the unconsumed rest"
            );
            let inside = b
                .receive_buffers()
                .iter()
                .any(|r| r.start <= addr && addr + len <= r.end);
            assert!(
                inside,
                "slice at {addr:#x}+{len} is outside the method's buffers"
            );
            // Consume in odd pieces: 1 byte, then up to 777 bytes.
            let take = if got.is_empty() { 1 } else { len.min(777) };
            let m = b.next().expect("next").expect("still there");
            assert_eq!(m.data.first().copied(), first);
            got.extend_from_slice(&m.data[..take]);
            b.consume(take).expect("consume");
        }
        assert!(&got == expect);
    }
    let deadline = Instant::now() + limit;
    loop {
        if let Some(m) = b.next().expect("next") {
            assert!(m.data.is_empty());
            break;
        }
        assert!(
            !delivered_at_post,
            "the empty message was not there once the messages before it were"
        );
        assert!(
            Instant::now() < deadline,
            "the empty message did not arrive"
        );
        done.extend(a.poll());
        b.wait(Duration::from_millis(5)).expect("wait");
    }
    let beyond = b.consume(1).expect_err("consume past the end");
    assert!(H::is_consume_beyond(&beyond), "{beyond:?}");
    b.consume(0).expect("consume empty");
    assert!(done.iter().all(|c| c.result.is_ok()));
    reap(&mut a, limit, 3 - done.len());
}

/// Dropping the peer completes both outstanding descriptors with an error, exactly once;
/// later posts and `next` report the failed peer.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::contract::{self, Harness};
/// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
/// # struct Loopback;
/// # impl Harness for Loopback {
/// #     type Ep = Endpoint;
/// #     const LIMIT: Duration = Duration::from_secs(30);
/// #     const REAP_EVERY: u64 = 1;
/// #     fn pair() -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config::default()).expect("pair")
/// #     }
/// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
/// #     }
/// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
/// #         Self::pair() // no liveness interval to shorten
/// #     }
/// #     fn post_two_outstanding(ep: &mut Endpoint) {
/// #         // Sends stay outstanding until the peer consumes them.
/// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
/// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
/// #     }
/// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
/// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
/// #     }
/// #     fn is_too_long(e: &Error) -> bool {
/// #         matches!(e, Error::TooLong { .. })
/// #     }
/// #     fn is_consume_beyond(e: &Error) -> bool {
/// #         matches!(e, Error::ConsumeBeyond { .. })
/// #     }
/// # }
/// contract::dropped_peer_fails_outstanding_descriptors::<Loopback>();
/// ```
pub fn dropped_peer_fails_outstanding_descriptors<H: Harness>() {
    let (mut a, b) = H::dropped_peer_pair();
    H::post_two_outstanding(&mut a);
    drop(b);
    let mut ids = Vec::new();
    let deadline = Instant::now() + H::LIMIT;
    while ids.len() < 2 {
        match a.poll() {
            Some(c) => {
                H::check_dropped_peer_completion(&c);
                ids.push(c.id);
            }
            None => {
                assert!(
                    Instant::now() < deadline,
                    "outstanding descriptors never completed"
                );
                a.wait(Duration::from_millis(10)).expect("wait");
            }
        }
    }
    ids.sort();
    assert_eq!(ids, [1, 2]);
    // No completion twice: nothing more comes out after a while of progress.
    let settle = Instant::now() + Duration::from_millis(50);
    while Instant::now() < settle {
        if let Some(c) = a.poll() {
            panic!("descriptor {} completed again: {:?}", c.id, c.result);
        }
        let _ = a.wait(Duration::from_millis(5));
    }
    let e = a
        .post_copy(3, 0, &[1])
        .expect_err("a post after the failure");
    assert!(e.is_peer_failure(), "{e:?}");
    let e = a.next().expect_err("next after the failure");
    assert!(e.is_peer_failure(), "{e:?}");
    assert!(a.failure().is_some());
}

/// A message longer than the limit is refused with `EMSGSIZE`; a consume with no message is
/// refused too.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::contract::{self, Harness};
/// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
/// # struct Loopback;
/// # impl Harness for Loopback {
/// #     type Ep = Endpoint;
/// #     const LIMIT: Duration = Duration::from_secs(30);
/// #     const REAP_EVERY: u64 = 1;
/// #     fn pair() -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config::default()).expect("pair")
/// #     }
/// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
/// #     }
/// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
/// #         Self::pair() // no liveness interval to shorten
/// #     }
/// #     fn post_two_outstanding(ep: &mut Endpoint) {
/// #         // Sends stay outstanding until the peer consumes them.
/// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
/// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
/// #     }
/// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
/// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
/// #     }
/// #     fn is_too_long(e: &Error) -> bool {
/// #         matches!(e, Error::TooLong { .. })
/// #     }
/// #     fn is_consume_beyond(e: &Error) -> bool {
/// #         matches!(e, Error::ConsumeBeyond { .. })
/// #     }
/// # }
/// contract::oversized_and_invalid_requests_are_errors::<Loopback>();
/// ```
pub fn oversized_and_invalid_requests_are_errors<H: Harness>() {
    let (mut a, _b) = H::pair_with_max_message(1 << 20);
    let r = a.post_buf(1, 0, vec![0; (1 << 20) + 1].into());
    let e = r.expect_err("an oversized post must fail");
    assert!(H::is_too_long(&e), "{e:?}");
    assert_eq!(e.errno(), EMSGSIZE);
    let e = a.consume(1).expect_err("consume with no message");
    assert!(H::is_consume_beyond(&e), "{e:?}");
}

/// A lent message shows the bytes in place; while it is out `next` shows nothing, sends and
/// completions go on, and after `give_back` the next message comes.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::contract::{self, Harness};
/// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
/// # struct Loopback;
/// # impl Harness for Loopback {
/// #     type Ep = Endpoint;
/// #     const LIMIT: Duration = Duration::from_secs(30);
/// #     const REAP_EVERY: u64 = 1;
/// #     fn pair() -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config::default()).expect("pair")
/// #     }
/// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
/// #     }
/// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
/// #         Self::pair() // no liveness interval to shorten
/// #     }
/// #     fn post_two_outstanding(ep: &mut Endpoint) {
/// #         // Sends stay outstanding until the peer consumes them.
/// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
/// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
/// #     }
/// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
/// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
/// #     }
/// #     fn is_too_long(e: &Error) -> bool {
/// #         matches!(e, Error::TooLong { .. })
/// #     }
/// #     fn is_consume_beyond(e: &Error) -> bool {
/// #         matches!(e, Error::ConsumeBeyond { .. })
/// #     }
/// # }
/// contract::lend_holds_the_inbound_until_given_back::<Loopback>();
/// ```
pub fn lend_holds_the_inbound_until_given_back<H: Harness>() {
    let limit = H::LIMIT;
    let (mut a, mut b) = H::pair();
    let first = pattern(3000, 1);
    let second = pattern(100, 2);
    send(&mut a, limit, 1, 1, first.clone());
    send(&mut a, limit, 2, 2, second.clone());
    let deadline = Instant::now() + limit;
    while b.next().expect("next").is_none() {
        assert!(Instant::now() < deadline, "nothing arrived");
        // One thread drives both ends: the sender's queued frames leave when it makes
        // progress.
        let _ = a.poll();
        b.wait(Duration::from_millis(5)).expect("wait");
    }
    let lease = b.lend().expect("lend").expect("a message is current");
    assert!(*lease == first[..]);
    if b.attrs().lend_in_place {
        assert!(b.next().expect("next").is_none(), "next while lent");
        // Sends go on meanwhile.
        send(&mut b, limit, 7, 7, vec![1, 2, 3]);
        assert_eq!(recv(&mut a, limit), (7, vec![1, 2, 3]));
        reap(&mut b, limit, 1);
    }
    b.give_back(lease).expect("give back");
    assert_eq!(recv(&mut b, limit), (2, second));
    reap(&mut a, limit, 2);
}

/// Every completion carries a distinct id; an id never completes twice (used by the methods'
/// own one-sided tests).
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::{contract, loopback};
/// # let (mut a, mut b) = loopback::pair(loopback::Config::default())?;
/// let _ = (a.post_send_parts(1, 0, &[b"a"])?, a.post_send_parts(2, 0, &[b"b"])?);
/// # for _ in 0..2 { b.next()?; b.consume(1)?; }
/// let done = contract::collect_completions(&mut a, Duration::from_secs(30), 2);
/// assert!(done.contains_key(&1) && done.contains_key(&2));
/// # Ok::<(), loopback::Error>(())
/// ```
pub fn collect_completions<E: Endpoint>(
    ep: &mut E,
    limit: Duration,
    n: usize,
) -> HashMap<u64, Completion<E::Error>> {
    let mut seen = HashMap::new();
    let deadline = Instant::now() + limit;
    while seen.len() < n {
        match ep.poll() {
            Some(c) => {
                let id = c.id;
                assert!(seen.insert(id, c).is_none(), "two completions for one id");
            }
            None => {
                assert!(Instant::now() < deadline, "missing completions");
                ep.wait(Duration::from_millis(20)).expect("wait");
            }
        }
    }
    seen
}

/// Instantiates the generic contract tests for a [`Harness`] in the enclosing module.
///
/// ```
/// # use std::time::Duration;
/// # use viaduct_method::contract::{self, Harness};
/// # use viaduct_method::{Endpoint as _, loopback::{self, Config, Endpoint, Error}};
/// # struct Loopback;
/// # impl Harness for Loopback {
/// #     type Ep = Endpoint;
/// #     const LIMIT: Duration = Duration::from_secs(30);
/// #     const REAP_EVERY: u64 = 1;
/// #     fn pair() -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config::default()).expect("pair")
/// #     }
/// #     fn pair_with_max_message(max_message: usize) -> (Endpoint, Endpoint) {
/// #         loopback::pair(Config { max_message, ..Config::default() }).expect("pair")
/// #     }
/// #     fn dropped_peer_pair() -> (Endpoint, Endpoint) {
/// #         Self::pair() // no liveness interval to shorten
/// #     }
/// #     fn post_two_outstanding(ep: &mut Endpoint) {
/// #         // Sends stay outstanding until the peer consumes them.
/// #         assert!(ep.post_copy(1, 1, &[1; 64]).expect("send").is_posted());
/// #         assert!(ep.post_copy(2, 2, &[2; 8]).expect("send").is_posted());
/// #     }
/// #     fn check_dropped_peer_completion(c: &loopback::Completion) {
/// #         assert!(matches!(c.result, Err(Error::PeerFailed(_))));
/// #     }
/// #     fn is_too_long(e: &Error) -> bool {
/// #         matches!(e, Error::TooLong { .. })
/// #     }
/// #     fn is_consume_beyond(e: &Error) -> bool {
/// #         matches!(e, Error::ConsumeBeyond { .. })
/// #     }
/// # }
/// mod loopback_contract {
///     // Six `#[test]` functions, each running one contract test on the loopback pair.
///     viaduct_method::contract_tests!(super::Loopback);
/// }
/// // Where a method may be missing on a machine (an RDMA device), each test first asks a
/// // function that prints why it skips and returns false then.
/// fn ready() -> bool {
///     true
/// }
/// mod loopback_contract_when_ready {
///     viaduct_method::contract_tests!(super::Loopback, skip_unless: super::ready);
/// }
/// ```
#[macro_export]
macro_rules! contract_tests {
    ($h:ty, skip_unless: $ready:expr) => {
        #[test]
        fn sizes_arrive_byte_exact() {
            if $ready() {
                $crate::contract::sizes_arrive_byte_exact::<$h>();
            }
        }

        #[test]
        fn million_small_messages_arrive_in_order() {
            if $ready() {
                $crate::contract::million_small_messages_arrive_in_order::<$h>();
            }
        }

        #[test]
        fn next_points_into_own_buffers_and_consume_keeps_every_byte() {
            if $ready() {
                $crate::contract::next_points_into_own_buffers_and_consume_keeps_every_byte::<$h>();
            }
        }

        #[test]
        fn dropped_peer_fails_outstanding_descriptors() {
            if $ready() {
                $crate::contract::dropped_peer_fails_outstanding_descriptors::<$h>();
            }
        }

        #[test]
        fn oversized_and_invalid_requests_are_errors() {
            if $ready() {
                $crate::contract::oversized_and_invalid_requests_are_errors::<$h>();
            }
        }

        #[test]
        fn lend_holds_the_inbound_until_given_back() {
            if $ready() {
                $crate::contract::lend_holds_the_inbound_until_given_back::<$h>();
            }
        }
    };
    ($h:ty) => {
        #[test]
        fn sizes_arrive_byte_exact() {
            $crate::contract::sizes_arrive_byte_exact::<$h>();
        }

        #[test]
        fn million_small_messages_arrive_in_order() {
            $crate::contract::million_small_messages_arrive_in_order::<$h>();
        }

        #[test]
        fn next_points_into_own_buffers_and_consume_keeps_every_byte() {
            $crate::contract::next_points_into_own_buffers_and_consume_keeps_every_byte::<$h>();
        }

        #[test]
        fn dropped_peer_fails_outstanding_descriptors() {
            $crate::contract::dropped_peer_fails_outstanding_descriptors::<$h>();
        }

        #[test]
        fn oversized_and_invalid_requests_are_errors() {
            $crate::contract::oversized_and_invalid_requests_are_errors::<$h>();
        }

        #[test]
        fn lend_holds_the_inbound_until_given_back() {
            $crate::contract::lend_holds_the_inbound_until_given_back::<$h>();
        }
    };
}
