//! Sleepers: a thread sleeps on endpoints it does not hold (the bells of shared-memory
//! endpoints, the descriptors of TCP endpoints), one or several at once, and wakes when a peer
//! sends on any of them.

use std::thread;
use std::time::{Duration, Instant};

use viaduct_fallback::{fd, shm, tcp};

/// A sleep that nothing ends runs this long: a wake-up must come well before.
const LONG: Duration = Duration::from_secs(10);
/// A wake-up must come within this long (generous: the machine may be loaded).
const SOON: Duration = Duration::from_secs(4);

fn shm_config() -> shm::Config {
    shm::Config {
        // No liveness check ends a sleep early.
        liveness_interval: LONG,
        ..shm::Config::default()
    }
}

fn tcp_config() -> tcp::Config {
    tcp::Config {
        keepalive: None,
        ..tcp::Config::default()
    }
}

/// The first inbound message of `ep` within `SOON`: its tag and bytes.
fn shm_take(ep: &mut shm::Endpoint) -> (u64, Vec<u8>) {
    let deadline = Instant::now() + SOON;
    loop {
        if let Some(m) = ep.next().expect("next") {
            let out = (m.tag, m.data.to_vec());
            ep.consume(out.1.len()).expect("consume");
            return out;
        }
        assert!(Instant::now() < deadline, "no message");
        ep.wait(Duration::from_millis(10)).expect("wait");
    }
}

#[test]
fn shm_sleepers_on_several_bells_wake_for_any_of_them() {
    let (_a1, mut b1) = shm::pair(shm_config()).expect("pair 1");
    let (mut a2, mut b2) = shm::pair(shm_config()).expect("pair 2");
    let s1 = b1
        .sleeper()
        .expect("sleeper 1")
        .expect("nothing ready on 1");
    let s2 = b2
        .sleeper()
        .expect("sleeper 2")
        .expect("nothing ready on 2");
    // Nothing sent: the sleep lasts its timeout.
    let start = Instant::now();
    shm::sleep_any(&[&s1, &s2], Duration::from_millis(200)).expect("sleep_any");
    let idle = start.elapsed();
    assert!(
        idle >= Duration::from_millis(150),
        "woke after {idle:?} with nothing sent"
    );
    let sleeping = thread::spawn(move || {
        let start = Instant::now();
        shm::sleep_any(&[&s1, &s2], LONG).expect("sleep_any");
        start.elapsed()
    });
    thread::sleep(Duration::from_millis(100));
    assert!(a2.post_send(1, 7, b"ring").expect("post").is_posted());
    let slept = sleeping.join().expect("sleeping thread");
    assert!(
        slept < SOON,
        "the sleeper slept {slept:?} although the second endpoint's peer sent"
    );
    assert_eq!(shm_take(&mut b2), (7, b"ring".to_vec()));
}

#[test]
fn shm_sleeper_wakes_at_once_for_a_message_sent_after_it_was_prepared() {
    let (mut a, mut b) = shm::pair(shm_config()).expect("pair");
    let s = b.sleeper().expect("sleeper").expect("nothing ready");
    assert!(a.post_send(1, 3, b"early").expect("post").is_posted());
    let start = Instant::now();
    s.sleep(LONG).expect("sleep");
    let slept = start.elapsed();
    assert!(slept < SOON, "slept {slept:?} past a message already sent");
    drop(s);
    assert_eq!(shm_take(&mut b), (3, b"early".to_vec()));
    // Something is ready now: no sleep is prepared.
    assert!(a.post_send(2, 4, b"more").expect("post").is_posted());
    let deadline = Instant::now() + SOON;
    while b.sleeper().expect("sleeper").is_some() {
        assert!(
            Instant::now() < deadline,
            "the message never showed as ready"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn tcp_sleepers_on_several_connections_wake_for_any_of_them() {
    let (_a1, mut b1) = tcp::pair(tcp_config()).expect("pair 1");
    let (mut a2, mut b2) = tcp::pair(tcp_config()).expect("pair 2");
    let s1 = b1
        .sleeper()
        .expect("sleeper 1")
        .expect("nothing ready on 1");
    let s2 = b2
        .sleeper()
        .expect("sleeper 2")
        .expect("nothing ready on 2");
    let start = Instant::now();
    let mut fds = s1.fds();
    fds.extend(s2.fds());
    fd::wait_readable(&fds, Duration::from_millis(200)).expect("wait_readable");
    let idle = start.elapsed();
    assert!(
        idle >= Duration::from_millis(150),
        "woke after {idle:?} with nothing sent"
    );
    drop(fds);
    let sleeping = thread::spawn(move || {
        let start = Instant::now();
        let mut fds = s1.fds();
        fds.extend(s2.fds());
        fd::wait_readable(&fds, LONG).expect("wait_readable");
        start.elapsed()
    });
    thread::sleep(Duration::from_millis(100));
    assert!(a2.post_send(1, 7, b"ring").expect("post").is_posted());
    let slept = sleeping.join().expect("sleeping thread");
    assert!(
        slept < SOON,
        "the sleeper slept {slept:?} although the second connection's peer sent"
    );
    let deadline = Instant::now() + SOON;
    loop {
        if let Some(m) = b2.next().expect("next") {
            assert_eq!((m.tag, m.data), (7, &b"ring"[..]));
            break;
        }
        assert!(Instant::now() < deadline, "no message");
        b2.wait(Duration::from_millis(10)).expect("wait");
    }
}

#[test]
fn a_sleeper_outlives_its_endpoint() {
    let (a, mut b) = shm::pair(shm_config()).expect("pair");
    let s = b.sleeper().expect("sleeper").expect("nothing ready");
    drop(b);
    drop(a);
    // The segment stays mapped for the sleeper: a short sleep is still sound.
    s.sleep(Duration::from_millis(5)).expect("sleep");
    let (_c, mut d) = tcp::pair(tcp_config()).expect("tcp pair");
    let t = d.sleeper().expect("sleeper").expect("nothing ready");
    drop(d);
    // The peer's end closes with `_c` below; the duplicated descriptors stay valid.
    t.sleep(Duration::from_millis(5)).expect("sleep");
}
