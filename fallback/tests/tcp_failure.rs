//! TCP method: every accepted descriptor completes exactly once when the peer fails, whether
//! its frame was still queued behind the `sendmsg` in flight, inside that `sendmsg`, or
//! already sent and waiting for a reply (emulated writes and reads). The peer is this test
//! binary again, in another process, which stops reading and is killed, stalls until the
//! connection's `peer_timeout` cuts it off, or reads a while and exits.

use std::collections::HashMap;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use viaduct_fallback::tcp::{self, Config, Endpoint, Error, Op, RegionKey};

/// Bound of every wait in these tests.
const LIMIT: Duration = Duration::from_secs(10);
const ROLE: &str = "VIADUCT_TCP_FAILURE_ROLE";
const ADDR: &str = "VIADUCT_TCP_FAILURE_ADDR";
/// Tag of the peer's first message: it is connected and about to stop reading.
const UP: u64 = 7;

/// Entry point of the peer process; does nothing in an ordinary test run.
#[test]
fn peer_process_entry() {
    let (Ok(role), Ok(addr)) = (std::env::var(ROLE), std::env::var(ADDR)) else {
        return;
    };
    let mut ep = tcp::connect(addr.parse().expect("address"), Config::default()).expect("connect");
    let deadline = Instant::now() + LIMIT;
    while !ep.post_send(0, UP, b"up").expect("post").is_posted() {
        assert!(Instant::now() < deadline, "could not post");
        ep.wait(Duration::from_millis(10)).expect("wait");
    }
    match role.as_str() {
        // Never reads again and never drives the endpoint: the parent's sends fill the
        // socket buffers and stall, until the parent kills this process or times it out.
        "stall" => {
            while Instant::now() < deadline + LIMIT {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        // Reads (and so credits back) a few megabytes, then exits without a word.
        "read-then-exit" => {
            let mut got = 0usize;
            while got < 8 << 20 {
                assert!(Instant::now() < deadline, "only {got} bytes arrived");
                match ep.next().expect("next") {
                    Some(m) => {
                        let n = m.data.len();
                        got += n;
                        ep.consume(n).expect("consume");
                    }
                    None => ep.wait(Duration::from_millis(10)).expect("wait"),
                }
            }
            // The last credits leave, then the process ends without closing anything itself.
            let end = Instant::now() + Duration::from_millis(20);
            while Instant::now() < end {
                while ep.poll().is_some() {}
                let _ = ep.wait(Duration::from_millis(2));
            }
            std::process::exit(0);
        }
        other => panic!("unknown role {other}"),
    }
}

/// The peer process; killed (SIGKILL) and reaped when dropped, also when a test fails.
struct Peer(Child);

impl Peer {
    fn kill(mut self) {
        self.0.kill().expect("SIGKILL");
        self.0.wait().expect("reap");
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_peer(role: &str, addr: std::net::SocketAddr) -> Peer {
    let child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "peer_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ROLE, role)
        .env(ADDR, addr.to_string())
        .spawn()
        .expect("spawn peer");
    Peer(child)
}

/// Accepts the peer and waits for its first message.
fn accept(role: &str, config: Config) -> (Endpoint, Peer) {
    let l = tcp::Listener::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let child = spawn_peer(role, l.local_addr().expect("local address"));
    let mut ep = l.accept(config).expect("accept");
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Some(m) = ep.next().expect("next") {
            assert_eq!(m.tag, UP);
            let n = m.data.len();
            ep.consume(n).expect("consume");
            return (ep, child);
        }
        assert!(Instant::now() < deadline, "the peer did not come up");
        ep.wait(Duration::from_millis(10)).expect("wait");
    }
}

/// The descriptors accepted by the endpoint and the completions seen for them.
#[derive(Default)]
struct Ledger {
    accepted: HashMap<u64, Op>,
    done: HashMap<u64, Result<usize, Error>>,
    next_id: u64,
}

impl Ledger {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Takes every completion `poll` has now; a completion for an id never accepted, or a
    /// second one for an id, fails the test.
    fn drain(&mut self, ep: &mut Endpoint) {
        while let Some(c) = ep.poll() {
            let op = self.accepted.get(&c.id);
            assert_eq!(op, Some(&c.op), "completion {} was never posted", c.id);
            let first = self.done.insert(c.id, c.result);
            assert!(first.is_none(), "descriptor {} completed twice", c.id);
        }
    }

    fn outstanding(&self) -> usize {
        self.accepted.len() - self.done.len()
    }

    /// One round of posts without driving the endpoint in between (after the first, every
    /// frame is posted while a `sendmsg` is in flight): small copied sends, owned buffers, a
    /// large owned buffer, emulated writes and reads, until the peer's window is full.
    /// Returns whether anything was accepted.
    fn post_round(&mut self, ep: &mut Endpoint, large: usize) -> Result<bool, Error> {
        let mut any = false;
        for i in 0..2000usize {
            let id = self.id();
            let (op, posted) = match i % 97 {
                13 => (
                    Op::Write,
                    ep.post_write(id, RegionKey(1), 0, &[3u8; 1000])?
                        .is_posted(),
                ),
                29 => (
                    Op::Read,
                    ep.post_read(id, RegionKey(1), 0, vec![0u8; 4096])?
                        .is_posted(),
                ),
                50 => (
                    Op::Send,
                    ep.post_send_buf(id, 5, vec![4u8; large])?.is_posted(),
                ),
                n if n % 3 == 0 => (
                    Op::Send,
                    ep.post_send_buf(id, 6, vec![5u8; 64 << 10])?.is_posted(),
                ),
                _ => (Op::Send, ep.post_send(id, 7, &[6u8; 200])?.is_posted()),
            };
            if posted {
                self.accepted.insert(id, op);
                any = true;
            } else if op == Op::Send {
                break;
            }
        }
        Ok(any)
    }

    /// Polls until every accepted descriptor completed (bounded), then checks the outcome:
    /// sends delivered to the connection or failed with the peer's failure, writes and reads
    /// refused by the peer or failed with its failure.
    fn settle(&mut self, ep: &mut Endpoint) {
        let deadline = Instant::now() + LIMIT;
        loop {
            self.drain(ep);
            if self.outstanding() == 0 {
                break;
            }
            if Instant::now() > deadline {
                let mut missing: Vec<(u64, Op)> = self
                    .accepted
                    .iter()
                    .filter(|(id, _)| !self.done.contains_key(id))
                    .map(|(id, op)| (*id, *op))
                    .collect();
                missing.sort_by_key(|m| m.0);
                panic!(
                    "{} of {} accepted descriptors never completed after the peer failed \
                     (failure: {:?}, first: {:?}); {ep:?}",
                    missing.len(),
                    self.accepted.len(),
                    ep.failure(),
                    &missing[..missing.len().min(8)]
                );
            }
            let _ = ep.wait(Duration::from_millis(10));
        }
        for (id, result) in &self.done {
            match (self.accepted[id], result) {
                (Op::Send, Ok(_)) => {}
                (_, Err(Error::PeerFailed(_))) => {}
                // A peer that serves requests refuses the made-up region key.
                (Op::Write | Op::Read, Err(Error::RemoteAccess(_))) => {}
                (op, other) => panic!("descriptor {id} ({op:?}) ended with {other:?}"),
            }
        }
        assert!(
            self.done.values().any(|r| r.is_err()),
            "nothing was outstanding when the peer failed"
        );
    }
}

/// After the failure every post fails at once and nothing else completes.
fn later_posts_fail(ep: &mut Endpoint, ledger: &mut Ledger) {
    assert!(ep.failure().is_some());
    let peer_failed = |r: &Error| matches!(r, Error::PeerFailed(_));
    assert!(peer_failed(&ep.post_send(1 << 40, 1, b"late").unwrap_err()));
    assert!(peer_failed(
        &ep.post_send_buf(1 << 40, 1, vec![1; 10]).unwrap_err()
    ));
    assert!(peer_failed(
        &ep.post_write(1 << 40, RegionKey(1), 0, b"late")
            .unwrap_err()
    ));
    assert!(peer_failed(
        &ep.post_read(1 << 40, RegionKey(1), 0, vec![0; 4])
            .unwrap_err()
    ));
    ledger.drain(ep);
    assert_eq!(ledger.outstanding(), 0);
}

#[test]
fn killed_peer_completes_queued_and_in_flight_descriptors_once() {
    let (mut ep, child) = accept("stall", Config::default());
    let mut ledger = Ledger::default();
    assert!(ledger.post_round(&mut ep, 2 << 20).expect("post"));
    // Some batches leave, until the peer's socket buffers are full and a `sendmsg` stalls.
    for _ in 0..20 {
        ledger.drain(&mut ep);
        let _ = ep.wait(Duration::from_millis(5));
    }
    // Posted behind the stalled `sendmsg` (as far as the window still allows).
    ledger.post_round(&mut ep, 8 << 20).expect("post");
    child.kill();
    ledger.settle(&mut ep);
    later_posts_fail(&mut ep, &mut ledger);
}

#[test]
fn killed_peer_completes_descriptors_never_driven() {
    let (mut ep, child) = accept("stall", Config::default());
    let mut ledger = Ledger::default();
    // The first frame's `sendmsg` is in flight, every other frame waits in the queue.
    assert!(ledger.post_round(&mut ep, 1 << 20).expect("post"));
    child.kill();
    ledger.settle(&mut ep);
    later_posts_fail(&mut ep, &mut ledger);
}

#[test]
fn stalled_peer_cut_off_by_timeout_completes_every_descriptor_once() {
    let config = Config {
        peer_timeout: Duration::from_secs(1),
        ..Config::default()
    };
    let (mut ep, child) = accept("stall", config);
    let mut ledger = Ledger::default();
    assert!(ledger.post_round(&mut ep, 32 << 20).expect("post"));
    // The peer's kernel stops taking data; `TCP_USER_TIMEOUT` ends the connection.
    ledger.settle(&mut ep);
    later_posts_fail(&mut ep, &mut ledger);
    child.kill();
}

#[test]
fn exiting_peer_completes_every_descriptor_posted_up_to_the_failure() {
    let (mut ep, child) = accept("read-then-exit", Config::default());
    let mut ledger = Ledger::default();
    // Posts without polling: the endpoint makes progress only inside posts that find the
    // window full, so one of them sees the peer's last credits and its end of stream in the
    // same pass.
    let deadline = Instant::now() + LIMIT;
    let mut i = 0u64;
    loop {
        assert!(Instant::now() < deadline, "the peer never went away");
        let id = ledger.id();
        let (op, posted) = if i % 10 == 5 {
            (
                Op::Write,
                ep.post_write(id, RegionKey(1), 0, &[1u8; 1000])
                    .map(|p| p.is_posted()),
            )
        } else {
            (
                Op::Send,
                ep.post_send_buf(id, 1, vec![2u8; 256 << 10])
                    .map(|p| p.is_posted()),
            )
        };
        match posted {
            Ok(true) => {
                ledger.accepted.insert(id, op);
                i += 1;
            }
            // Long enough for the peer to take what was sent, credit it back and exit.
            Ok(false) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                assert!(matches!(e, Error::PeerFailed(_)), "{e}");
                break;
            }
        }
    }
    ledger.settle(&mut ep);
    later_posts_fail(&mut ep, &mut ledger);
    drop(child);
}
