//! Messages lent out of an endpoint (`lend`/`give_back`) over shared memory and TCP: the lease
//! shows the message in the method's receive memory; while it is out `next` shows nothing and
//! `consume` refuses; given back, the messages behind it come in order; a lease of another
//! endpoint is dropped; a lease outlives its endpoint. Each pair is driven from one thread.

use std::time::{Duration, Instant};

use viaduct_fallback::{shm, tcp};

const LIMIT: Duration = Duration::from_secs(20);

/// The operations the checks need, over both methods.
trait Ep {
    type Lease: std::ops::Deref<Target = [u8]>;
    fn send(&mut self, tag: u64, data: &[u8]);
    fn drive(&mut self);
    fn next_tag(&mut self) -> Option<u64>;
    fn consume_all(&mut self) -> bool;
    fn lend(&mut self) -> Option<Self::Lease>;
    fn give_back(&mut self, l: Self::Lease);
    fn memory(&self) -> Vec<std::ops::Range<usize>>;
}

impl Ep for shm::Endpoint {
    type Lease = shm::Lease;
    fn send(&mut self, tag: u64, data: &[u8]) {
        assert!(self.post_send(tag, tag, data).expect("post").is_posted());
    }
    fn drive(&mut self) {
        while self.poll().is_some() {}
    }
    fn next_tag(&mut self) -> Option<u64> {
        self.next().expect("next").map(|m| m.tag)
    }
    fn consume_all(&mut self) -> bool {
        let n = match self.next().expect("next") {
            Some(m) => m.data.len(),
            None => return false,
        };
        self.consume(n).is_ok()
    }
    fn lend(&mut self) -> Option<shm::Lease> {
        shm::Endpoint::lend(self).expect("lend")
    }
    fn give_back(&mut self, l: shm::Lease) {
        shm::Endpoint::give_back(self, l).expect("give back");
    }
    fn memory(&self) -> Vec<std::ops::Range<usize>> {
        vec![self.segment_range()]
    }
}

impl Ep for tcp::Endpoint {
    type Lease = tcp::Lease;
    fn send(&mut self, tag: u64, data: &[u8]) {
        assert!(self.post_send(tag, tag, data).expect("post").is_posted());
    }
    fn drive(&mut self) {
        while self.poll().is_some() {}
    }
    fn next_tag(&mut self) -> Option<u64> {
        self.next().expect("next").map(|m| m.tag)
    }
    fn consume_all(&mut self) -> bool {
        let n = match self.next().expect("next") {
            Some(m) => m.data.len(),
            None => return false,
        };
        self.consume(n).is_ok()
    }
    fn lend(&mut self) -> Option<tcp::Lease> {
        tcp::Endpoint::lend(self).expect("lend")
    }
    fn give_back(&mut self, l: tcp::Lease) {
        tcp::Endpoint::give_back(self, l).expect("give back");
    }
    fn memory(&self) -> Vec<std::ops::Range<usize>> {
        self.receive_buffers()
    }
}

fn msg(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 7 + seed) as u8).collect()
}

/// Drives both ends until `b` shows a message.
fn arrive<E: Ep>(a: &mut E, b: &mut E) -> u64 {
    let deadline = Instant::now() + LIMIT;
    loop {
        a.drive();
        if let Some(tag) = b.next_tag() {
            return tag;
        }
        assert!(Instant::now() < deadline, "no message arrived");
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn lend_and_give_back<E: Ep>(mut a: E, mut b: E) {
    for tag in 1..=3 {
        a.send(tag, &msg(tag, 100 * tag as usize));
    }
    assert_eq!(arrive(&mut a, &mut b), 1);
    let lease = b.lend().expect("a message to lend");
    assert_eq!(&lease[..], &msg(1, 100)[..]);
    let at = lease.as_ptr() as usize;
    assert!(
        b.memory()
            .iter()
            .any(|r| r.start <= at && at + lease.len() <= r.end),
        "the lease is not in the method's memory"
    );
    // While it is out: nothing shows, consume refuses, a second lend gets nothing.
    std::thread::sleep(Duration::from_millis(20));
    a.drive();
    assert_eq!(b.next_tag(), None, "a message came out behind the lease");
    assert!(!b.consume_all());
    assert!(b.lend().is_none());
    b.give_back(lease);
    for tag in 2..=3 {
        assert_eq!(arrive(&mut a, &mut b), tag, "order behind the lease");
        assert!(b.consume_all());
    }
}

fn foreign_lease_and_outliving<E: Ep>(mut a: E, mut b: E, mut c: E, mut d: E) {
    a.send(5, &msg(5, 64));
    c.send(6, &msg(6, 64));
    assert_eq!(arrive(&mut a, &mut b), 5);
    assert_eq!(arrive(&mut c, &mut d), 6);
    let from_d = d.lend().expect("lend");
    // A lease of another endpoint is dropped: b stays as it was.
    b.give_back(from_d);
    assert_eq!(b.next_tag(), Some(5));
    // d's own message stays lent (its lease is gone): d shows nothing more.
    assert_eq!(d.next_tag(), None);
    let from_b = b.lend().expect("lend");
    drop(b);
    drop(a);
    assert_eq!(
        &from_b[..],
        &msg(5, 64)[..],
        "the lease changed after its endpoint went"
    );
    drop(from_b);
}

#[test]
fn shm_lend_and_give_back() {
    let (a, b) = shm::pair(shm::Config::default()).expect("pair");
    lend_and_give_back(a, b);
}

#[test]
fn tcp_lend_and_give_back() {
    let (a, b) = tcp::pair(tcp::Config::default()).expect("pair");
    lend_and_give_back(a, b);
}

#[test]
fn shm_foreign_lease_and_a_lease_outliving_its_endpoint() {
    let (a, b) = shm::pair(shm::Config::default()).expect("pair");
    let (c, d) = shm::pair(shm::Config::default()).expect("pair");
    foreign_lease_and_outliving(a, b, c, d);
}

#[test]
fn tcp_foreign_lease_and_a_lease_outliving_its_endpoint() {
    let (a, b) = tcp::pair(tcp::Config::default()).expect("pair");
    let (c, d) = tcp::pair(tcp::Config::default()).expect("pair");
    foreign_lease_and_outliving(a, b, c, d);
}
