//! One sleep over shared-memory bells and descriptors together (`wait::sleepers_or_readable`,
//! `wait::any`): a ring of the bell wakes it, data on the socket wakes it, neither lets it
//! last its timeout, and many calls leave nothing armed behind them.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use viaduct_fallback::{shm, wait};

/// A sleep that nothing ends runs this long: a wake-up must come well before.
const LONG: Duration = Duration::from_secs(10);
/// A wake-up must come within this long (generous: the machine may be loaded).
const SOON: Duration = Duration::from_secs(4);
/// An idle wait's timeout, and the least it must last.
const IDLE: Duration = Duration::from_millis(200);
const IDLE_LEAST: Duration = Duration::from_millis(190);

fn shm_config() -> shm::Config {
    shm::Config {
        // No liveness check ends a sleep early.
        liveness_interval: LONG,
        ..shm::Config::default()
    }
}

/// Takes the first inbound message of `ep` within `SOON`: its tag.
fn shm_take(ep: &mut shm::Endpoint) -> u64 {
    let deadline = Instant::now() + SOON;
    loop {
        if let Some(m) = ep.next().expect("next") {
            let (tag, len) = (m.tag, m.data.len());
            ep.consume(len).expect("consume");
            return tag;
        }
        assert!(Instant::now() < deadline, "no message");
        ep.wait(Duration::from_millis(10)).expect("wait");
    }
}

/// How long one idle mixed wait on a fresh sleeper of `ep` and on `sock` lasts.
fn idle_wait(ep: &mut shm::Endpoint, sock: &UnixStream) -> Duration {
    let s = ep.sleeper().expect("sleeper").expect("nothing ready");
    let start = Instant::now();
    wait::sleepers_or_readable(&[&s], &[sock.as_fd()], IDLE).expect("wait");
    start.elapsed()
}

#[test]
fn the_kernel_offers_one_wait_over_futexes_and_descriptors() {
    // The machines this project runs on have Linux 6.7 or later; on an older kernel the
    // other tests pass through the turns instead, and this one says why.
    assert!(
        wait::supported(),
        "io_uring lacks IORING_OP_FUTEX_WAITV here (Linux 6.7+): sleeps take turns"
    );
}

#[test]
fn neither_kind_lets_the_wait_last_its_timeout() {
    let (_a, mut b) = shm::pair(shm_config()).expect("pair");
    let (_w, r) = UnixStream::pair().expect("socket pair");
    let took = idle_wait(&mut b, &r);
    assert!(
        took >= IDLE_LEAST,
        "an idle wait of {IDLE:?} returned after {took:?}"
    );
    assert!(took < SOON, "an idle wait of {IDLE:?} took {took:?}");
}

#[test]
fn a_ring_of_the_bell_from_another_thread_wakes_the_wait() {
    let (mut a, mut b) = shm::pair(shm_config()).expect("pair");
    let (_w, r) = UnixStream::pair().expect("socket pair");
    let s = b.sleeper().expect("sleeper").expect("nothing ready");
    let sleeping = thread::spawn(move || {
        let start = Instant::now();
        wait::sleepers_or_readable(&[&s], &[r.as_fd()], LONG).expect("wait");
        start.elapsed()
    });
    thread::sleep(Duration::from_millis(100));
    assert!(a.post_send(1, 7, b"ring").expect("post").is_posted());
    let slept = sleeping.join().expect("sleeping thread");
    assert!(slept < SOON, "slept {slept:?} although the bell rang");
    assert_eq!(shm_take(&mut b), 7);
}

#[test]
fn data_on_the_socket_wakes_the_wait() {
    let (_a, mut b) = shm::pair(shm_config()).expect("pair");
    let (mut w, r) = UnixStream::pair().expect("socket pair");
    let s = b.sleeper().expect("sleeper").expect("nothing ready");
    let sleeping = thread::spawn(move || {
        let start = Instant::now();
        wait::sleepers_or_readable(&[&s], &[r.as_fd()], LONG).expect("wait");
        (start.elapsed(), r)
    });
    thread::sleep(Duration::from_millis(100));
    w.write_all(b"x").expect("write");
    let (slept, mut r) = sleeping.join().expect("sleeping thread");
    assert!(slept < SOON, "slept {slept:?} although a byte arrived");
    let mut byte = [0u8; 1];
    r.read_exact(&mut byte).expect("read");
}

#[test]
fn many_waits_leave_nothing_armed() {
    let (mut a, mut b) = shm::pair(shm_config()).expect("pair");
    let (mut w, mut r) = UnixStream::pair().expect("socket pair");
    let s = b.sleeper().expect("sleeper").expect("nothing ready");
    // 1000 short waits that time out, each arming a futex wait and a poll.
    for _ in 0..1000 {
        wait::sleepers_or_readable(&[&s], &[r.as_fd()], Duration::from_micros(50))
            .expect("short wait");
    }
    drop(s);
    // 200 waits that a byte ends at once: the futex wait is cancelled each time.
    for _ in 0..200 {
        w.write_all(b"y").expect("write");
        let s = b.sleeper().expect("sleeper").expect("nothing ready");
        let start = Instant::now();
        wait::sleepers_or_readable(&[&s], &[r.as_fd()], LONG).expect("wait");
        assert!(start.elapsed() < SOON, "a byte did not end the wait");
        let mut byte = [0u8; 1];
        r.read_exact(&mut byte).expect("read");
    }
    // 200 waits that the bell ends at once (rung before the wait): the poll is cancelled.
    for i in 0..200 {
        let s = b.sleeper().expect("sleeper").expect("nothing ready");
        assert!(a.post_send(i, 9, b"ring").expect("post").is_posted());
        let start = Instant::now();
        wait::sleepers_or_readable(&[&s], &[r.as_fd()], LONG).expect("wait");
        assert!(start.elapsed() < SOON, "a ring did not end the wait");
        drop(s);
        assert_eq!(shm_take(&mut b), 9);
        while a.poll().is_some() {}
    }
    // Nothing left armed: an idle wait lasts its timeout (a leftover poll or futex wait
    // completing would end it early).
    let took = idle_wait(&mut b, &r);
    assert!(
        took >= IDLE_LEAST,
        "after many waits an idle wait of {IDLE:?} returned after {took:?}"
    );
    // And the next ring wakes the next wait, once.
    let s = b.sleeper().expect("sleeper").expect("nothing ready");
    let sleeping = thread::spawn(move || {
        let start = Instant::now();
        wait::sleepers_or_readable(&[&s], &[r.as_fd()], LONG).expect("wait");
        (start.elapsed(), r)
    });
    thread::sleep(Duration::from_millis(100));
    assert!(a.post_send(1, 8, b"ring").expect("post").is_posted());
    let (slept, r) = sleeping.join().expect("sleeping thread");
    assert!(slept < SOON, "slept {slept:?} although the bell rang");
    assert_eq!(shm_take(&mut b), 8);
    let took = idle_wait(&mut b, &r);
    assert!(
        took >= IDLE_LEAST,
        "after the ring an idle wait of {IDLE:?} returned after {took:?}"
    );
}

#[test]
fn futex_words_and_descriptors_alone_or_none() {
    use std::sync::atomic::AtomicU32;
    let word = AtomicU32::new(3);
    // A word that no longer holds the expected value ends the wait at once.
    let start = Instant::now();
    wait::any(&[(&word, 2)], &[], LONG).expect("changed word");
    assert!(start.elapsed() < SOON);
    // A word alone, unchanged: the timeout.
    let start = Instant::now();
    wait::any(&[(&word, 3)], &[], IDLE).expect("unchanged word");
    assert!(start.elapsed() >= IDLE_LEAST);
    // A descriptor alone, readable: at once.
    let (mut w, r) = UnixStream::pair().expect("socket pair");
    w.write_all(b"z").expect("write");
    let start = Instant::now();
    wait::any(&[], &[r.as_fd()], LONG).expect("readable");
    assert!(start.elapsed() < SOON);
    // Nothing to wait on: at once.
    wait::any(&[], &[], LONG).expect("nothing");
    // Too many words: an error naming the bound.
    let many: Vec<(&AtomicU32, u32)> = (0..=wait::MAX_WORDS).map(|_| (&word, 3)).collect();
    let err = wait::any(&many, &[], IDLE).unwrap_err();
    assert!(err.to_string().contains("at most 128"), "{err}");
}
