//! TCP method, plain non-blocking sends and receives (`Config::immediate_io`): a batch the
//! socket takes in part or not at all goes on through the ring in stream order, frames queued
//! behind it keep their order, every descriptor completes exactly once, a peer that closes in
//! the middle of a message fails the connection without delivering a piece of it, and a
//! blocking `wait` still sleeps and still wakes for data, and a quiet endpoint's empty polls
//! (which end after the `recv`) miss nothing. The far end is a plain socket of this
//! test (so its reading is under the test's control) or another endpoint.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use viaduct_fallback::frame::{HEADER_LEN, Header, Kind};
use viaduct_fallback::tcp::{self, Config, Endpoint, Error, Posted};

/// Bound of every wait in these tests.
const LIMIT: Duration = Duration::from_secs(20);
/// Bytes of the connection handshake each side sends (see `tcp::setup`).
const HELLO: usize = 24;

fn set_buf(s: &impl AsRawFd, opt: i32, bytes: i32) {
    // SAFETY: setsockopt on an open socket of this test with a pointer to a live i32.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&bytes as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt {opt}");
}

/// An endpoint whose socket has a small send buffer, connected to a plain socket with a small
/// receive buffer that answers the handshake and then reads only when the test says so.
fn endpoint_and_plain_peer(config: Config) -> (Endpoint, TcpStream) {
    let l = tcp::Listener::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
    let addr = l.local_addr().expect("addr");
    let peer = std::thread::spawn(move || {
        let s = socket_with_rcvbuf(addr);
        let mut s = s;
        s.set_read_timeout(Some(LIMIT)).expect("timeout");
        // Answer the endpoint's hello with its own words: same window and frame limit.
        let mut hello = [0u8; HELLO];
        s.read_exact(&mut hello).expect("hello");
        s.write_all(&hello).expect("hello back");
        s
    });
    let stream = l.accept_socket().expect("accept");
    set_buf(&stream, libc::SO_SNDBUF, 4096);
    let ep = tcp::accept_on(stream, config).expect("handshake");
    (ep, peer.join().expect("peer thread"))
}

/// A socket with a 4 KiB receive buffer (set before connecting, so the window is small from
/// the start) connected to `addr`.
fn socket_with_rcvbuf(addr: std::net::SocketAddr) -> TcpStream {
    // SAFETY: a new socket; its descriptor is owned by the TcpStream made from it below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0, "socket");
    // SAFETY: `fd` is a fresh socket owned by nobody else.
    let s = unsafe { <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    set_buf(&s, libc::SO_RCVBUF, 4096);
    let std::net::SocketAddr::V4(v4) = addr else {
        panic!("IPv4 expected")
    };
    // SAFETY: an all-zero sockaddr_in is valid; the fields are set below.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = v4.port().to_be();
    sa.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
    // SAFETY: connect with a valid sockaddr_in of the size given.
    let r = unsafe {
        libc::connect(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
    s
}

/// Byte `j` of message `i`.
fn pattern(i: u64, j: usize) -> u8 {
    (i as usize * 7 + j * 13 + (j >> 8)) as u8
}

fn message(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|j| pattern(i, j)).collect()
}

/// Reads one frame from the plain socket: its header and data.
fn read_frame(s: &mut TcpStream) -> (Header, Vec<u8>) {
    let mut h = [0u8; HEADER_LEN];
    s.read_exact(&mut h).expect("frame header");
    let header = Header::decode(&h, 64 << 20).expect("a well-formed header");
    let mut data = vec![0u8; header.len as usize];
    s.read_exact(&mut data).expect("frame data");
    (header, data)
}

/// Polls `ep` until every id in `want` completed; each must complete once, with `Ok(len)`.
fn complete_all(ep: &mut Endpoint, want: &HashMap<u64, usize>) {
    let deadline = Instant::now() + LIMIT;
    let mut seen = HashMap::new();
    while seen.len() < want.len() {
        assert!(
            Instant::now() < deadline,
            "{} of {} completed",
            seen.len(),
            want.len()
        );
        match ep.poll() {
            Some(c) => {
                let len = c.result.expect("send completes without error");
                assert_eq!(Some(&len), want.get(&c.id), "id {} length", c.id);
                assert!(
                    seen.insert(c.id, ()).is_none(),
                    "id {} completed twice",
                    c.id
                );
            }
            None => std::thread::sleep(Duration::from_micros(50)),
        }
    }
    // And nothing more comes.
    let end = Instant::now() + Duration::from_millis(50);
    while Instant::now() < end {
        if let Some(c) = ep.poll() {
            panic!("completion {} after all completed", c.id);
        }
    }
}

#[test]
fn a_copying_post_with_nothing_queued_leaves_at_once_from_its_parts() {
    let (mut ep, mut peer) = endpoint_and_plain_peer(Config::default());
    let (a, b, c) = (message(1, 5), message(2, 0), message(3, 300));
    let mut want = HashMap::new();
    let mut seqs = Vec::new();
    for (id, parts) in [
        (1u64, vec![&a[..], &b[..], &c[..]]),
        (2, vec![&c[..]]),
        (3, vec![]),
    ] {
        assert!(
            ep.post_send_parts(id, 40 + id, &parts)
                .expect("post")
                .is_posted()
        );
        let whole: Vec<u8> = parts.concat();
        want.insert(id, whole.len());
        // Sent by the post itself, before any progress call: the peer reads the frame now.
        let (h, data) = read_frame(&mut peer);
        assert_eq!(
            (h.kind, h.tag, h.len as usize),
            (Kind::Send, 40 + id, whole.len())
        );
        assert_eq!(data, whole, "message {id}: the parts in order");
        seqs.push(h.seq);
    }
    assert_eq!(
        seqs,
        [seqs[0], seqs[0] + 1, seqs[0] + 2],
        "consecutive sequence numbers"
    );
    let p = ep.send_paths();
    assert_eq!(
        (p.immediate, p.partial, p.would_block, p.ring),
        (3, 0, 0, 0),
        "{p:?}"
    );
    complete_all(&mut ep, &want);
}

#[test]
fn a_send_the_socket_takes_in_part_goes_on_in_order_with_the_sends_queued_behind_it() {
    // Small batches: when the ring's send is done, the frames queued behind it leave in
    // several batches, each tried with a plain send first, so that a batch cut short has
    // frames queued behind it too.
    let config = Config {
        max_batch: 3,
        ..Config::default()
    };
    let (mut ep, mut peer) = endpoint_and_plain_peer(config);
    // The peer reads nothing yet: 60000 bytes do not fit its 4 KiB buffer and the sender's.
    let mut want = HashMap::new();
    let first = message(0, 60_000);
    assert!(ep.post_send(0, 0, &first).expect("post").is_posted());
    want.insert(0, first.len());
    let p = ep.send_paths();
    assert_eq!(
        (p.immediate, p.partial + p.would_block, p.ring),
        (0, 1, 1),
        "the plain send took part of the frame (or nothing), the ring the rest: {p:?}"
    );
    // Sends posted now wait behind the one in the ring: copied and owned buffers alike.
    for i in 1..=100u64 {
        let len = (i as usize * 37) % 3000;
        let posted = if i % 2 == 0 {
            ep.post_send(i, i, &message(i, len)).expect("post")
        } else {
            match ep.post_send_buf(i, i, message(i, len)).expect("post") {
                Posted::InProgress => Posted::InProgress,
                Posted::NoResources(_) => Posted::NoResources(()),
            }
        };
        assert!(posted.is_posted(), "message {i} within the window");
        want.insert(i, len);
    }
    assert_eq!(
        ep.send_paths().immediate,
        0,
        "nothing overtook the cut frame"
    );
    // The peer reads everything (in another thread); every frame arrives whole, in order.
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..=100 {
            let (h, data) = read_frame(&mut peer);
            assert_eq!(h.kind, Kind::Send);
            let ok = data
                .iter()
                .enumerate()
                .all(|(j, &b)| b == pattern(h.tag, j));
            got.push((h.tag, data.len(), ok));
        }
        (got, peer)
    });
    complete_all(&mut ep, &want);
    let (got, _peer) = reader.join().expect("reader");
    for (i, (tag, len, ok)) in got.into_iter().enumerate() {
        assert_eq!(tag, i as u64, "frame {i} in stream order");
        assert_eq!(Some(&len), want.get(&tag), "message {tag} whole");
        assert!(ok, "message {tag} intact");
    }
}

#[test]
fn sends_to_a_socket_without_room_go_through_the_ring_and_complete_once() {
    let (mut ep, mut peer) = endpoint_and_plain_peer(Config::default());
    peer.set_nonblocking(true).expect("nonblocking");
    // Small sends until one finds the socket without room at all (EAGAIN). The peer reads
    // nothing while they are posted; when a send was cut instead, it reads what has arrived
    // until the ring finished that send, and stops again.
    let deadline = Instant::now() + LIMIT;
    let mut want = HashMap::new();
    let mut done = HashMap::new();
    let mut stream = Vec::new();
    let mut scratch = vec![0u8; 1024];
    let mut i = 0u64;
    while ep.send_paths().would_block == 0 {
        assert!(
            Instant::now() < deadline,
            "no send found the socket full: {:?}",
            ep.send_paths()
        );
        let len = 1 + (i as usize * 131) % 700;
        assert!(
            ep.post_send(i, i, &message(i, len))
                .expect("post")
                .is_posted(),
            "the window filled before a send met a full socket: {:?}",
            ep.send_paths()
        );
        want.insert(i, len);
        i += 1;
        if ep.send_paths().partial > 0 {
            while reap(&mut ep, &want, &mut done) < want.len() {
                assert!(Instant::now() < deadline, "the ring's send never completed");
                match peer.read(&mut scratch) {
                    Ok(0) => panic!("the endpoint closed"),
                    Ok(n) => stream.extend_from_slice(&scratch[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => panic!("read: {e}"),
                }
            }
        }
    }
    let p = ep.send_paths();
    assert!(p.ring >= p.would_block + p.partial, "{p:?}");
    // Everything still on its way arrives, in order, each descriptor completing once.
    peer.set_nonblocking(false).expect("blocking");
    peer.set_read_timeout(Some(LIMIT)).expect("timeout");
    let total: usize = want.values().map(|l| HEADER_LEN + l).sum();
    let reader = std::thread::spawn(move || {
        let mut rest = vec![0u8; total - stream.len()];
        peer.read_exact(&mut rest).expect("the rest of the stream");
        stream.extend_from_slice(&rest);
        (stream, peer)
    });
    while reap(&mut ep, &want, &mut done) < want.len() {
        assert!(
            Instant::now() < deadline,
            "{} of {} completed",
            done.len(),
            want.len()
        );
        std::thread::sleep(Duration::from_micros(50));
    }
    let (stream, _peer) = reader.join().expect("reader");
    let mut at = 0;
    for id in 0..i {
        let h = Header::decode(&stream[at..at + HEADER_LEN], 64 << 20).expect("header");
        assert_eq!((h.kind, h.tag, h.len as usize), (Kind::Send, id, want[&id]));
        let data = &stream[at + HEADER_LEN..at + HEADER_LEN + want[&id]];
        assert!(
            data.iter().enumerate().all(|(j, &b)| b == pattern(id, j)),
            "message {id}"
        );
        at += HEADER_LEN + want[&id];
    }
    assert_eq!(at, stream.len(), "nothing but the messages");
    // And no descriptor completes again.
    let end = Instant::now() + Duration::from_millis(50);
    while Instant::now() < end {
        assert!(ep.poll().is_none(), "a completion after all completed");
    }
}

/// Takes the completions there are into `done` (each id once, with its length); returns how
/// many descriptors completed so far.
fn reap(ep: &mut Endpoint, want: &HashMap<u64, usize>, done: &mut HashMap<u64, ()>) -> usize {
    while let Some(c) = ep.poll() {
        let len = c.result.expect("send completes without error");
        assert_eq!(Some(&len), want.get(&c.id), "id {} length", c.id);
        assert!(
            done.insert(c.id, ()).is_none(),
            "id {} completed twice",
            c.id
        );
    }
    done.len()
}

#[test]
fn a_peer_that_closes_in_the_middle_of_a_message_fails_the_connection() {
    for (claimed, sent) in [(1000usize, 500usize), (100_000, 70_000), (64, 0)] {
        let l = tcp::Listener::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let addr = l.local_addr().expect("addr");
        let peer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).expect("connect");
            let mut hello = [0u8; HELLO];
            s.read_exact(&mut hello).expect("hello");
            s.write_all(&hello).expect("hello back");
            // One whole message, then a frame cut short (or only its header's first half),
            // then the end of the stream.
            let mut h = Header::new(Kind::Send, 3);
            h.tag = 1;
            s.write_all(&h.encode()).expect("header");
            s.write_all(b"abc").expect("data");
            let mut h = Header::new(Kind::Send, claimed as u32);
            h.tag = 2;
            h.seq = 1;
            if sent == 0 {
                s.write_all(&h.encode()[..HEADER_LEN / 2])
                    .expect("half a header");
            } else {
                s.write_all(&h.encode()).expect("header");
                s.write_all(&vec![7u8; sent]).expect("part of the data");
            }
        });
        let mut ep = l.accept(Config::default()).expect("accept");
        peer.join().expect("peer");
        let deadline = Instant::now() + LIMIT;
        let mut whole = Vec::new();
        let err = loop {
            assert!(
                Instant::now() < deadline,
                "the end of the stream was not noticed"
            );
            match ep.next() {
                Ok(Some(m)) => {
                    let (tag, data) = (m.tag, m.data.to_vec());
                    ep.consume(data.len()).expect("consume");
                    whole.push((tag, data));
                }
                Ok(None) => ep.wait(Duration::from_millis(10)).expect("wait"),
                Err(e) => break e,
            }
        };
        assert_eq!(
            whole,
            vec![(1, b"abc".to_vec())],
            "only the whole message ({claimed}/{sent})"
        );
        assert!(matches!(err, Error::PeerFailed(_)), "{err:?}");
        // A post after the failure fails at once.
        assert!(matches!(
            ep.post_send(9, 9, b"x"),
            Err(Error::PeerFailed(_))
        ));
    }
}

/// Polls `next` until it returns a message or an error (at most `LIMIT`).
fn next_event(ep: &mut Endpoint) -> Result<(u64, Vec<u8>), Error> {
    let deadline = Instant::now() + LIMIT;
    loop {
        assert!(Instant::now() < deadline, "nothing came");
        if let Some(m) = ep.next()? {
            return Ok((m.tag, m.data.to_vec()));
        }
    }
}

#[test]
fn a_quiet_endpoint_polled_empty_still_takes_a_frame_in_pieces_and_the_end_of_the_stream() {
    // A quiet endpoint's empty poll ends right after its `recv`; a frame that arrives in
    // pieces (half a header, then the rest of it and part of the data, then the rest) is
    // still taken whole, a frame left in the receive buffer behind another is still shown,
    // and the end of the stream still fails the connection.
    let (mut ep, mut peer) = endpoint_and_plain_peer(Config::default());
    for _ in 0..1000 {
        assert!(ep.next().expect("next").is_none(), "nothing was sent");
    }
    let mut h = Header::new(Kind::Send, 8);
    h.tag = 5;
    let frame = [h.encode().to_vec(), b"12345678".to_vec()].concat();
    for piece in [
        &frame[..HEADER_LEN / 2],
        &frame[HEADER_LEN / 2..HEADER_LEN + 3],
    ] {
        peer.write_all(piece).expect("piece");
        for _ in 0..1000 {
            assert!(ep.next().expect("next").is_none(), "no whole message yet");
        }
    }
    peer.write_all(&frame[HEADER_LEN + 3..]).expect("the rest");
    assert_eq!(
        next_event(&mut ep).expect("message"),
        (5, b"12345678".to_vec())
    );
    ep.consume(8).expect("consume");
    // Two frames in one write: the second lies in the receive buffer when the socket has
    // nothing more, and the poll after the first is consumed still shows it.
    let two: Vec<u8> = [(6u64, 1u32), (7, 2)]
        .iter()
        .flat_map(|&(tag, seq)| {
            let mut h = Header::new(Kind::Send, 1);
            h.tag = tag;
            h.seq = seq;
            [h.encode().to_vec(), vec![tag as u8]].concat()
        })
        .collect();
    peer.write_all(&two).expect("two frames");
    for tag in [6u64, 7] {
        assert_eq!(
            next_event(&mut ep).expect("message"),
            (tag, vec![tag as u8])
        );
        ep.consume(1).expect("consume");
    }
    drop(peer);
    let err = next_event(&mut ep).expect_err("the end of the stream");
    assert!(matches!(err, Error::PeerFailed(_)), "{err:?}");
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    // SAFETY: an all-zero timespec is valid; clock_gettime writes it.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a pointer to a live timespec.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(r, 0);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[test]
fn a_blocking_wait_sleeps_and_wakes_for_data_and_for_the_end_of_the_stream() {
    let blocking = Config {
        busy_poll: false,
        ..Config::default()
    };
    let (mut a, mut b) = tcp::pair(blocking).expect("pair");
    // Nothing arrives: the wait sleeps its timeout out, without spinning.
    let (t0, c0) = (Instant::now(), thread_cpu());
    a.wait(Duration::from_millis(300)).expect("wait");
    let (slept, cpu) = (t0.elapsed(), thread_cpu() - c0);
    assert!(
        slept >= Duration::from_millis(250),
        "woke after {slept:?} with nothing to do"
    );
    assert!(
        cpu < slept / 2,
        "used {cpu:?} of CPU in {slept:?} of waiting"
    );
    // A message sent while `a` sleeps wakes it long before the timeout.
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        assert!(b.post_send(1, 5, b"wake").expect("post").is_posted());
        let deadline = Instant::now() + LIMIT;
        while b.poll().is_none() {
            assert!(Instant::now() < deadline, "the send never completed");
            b.wait(Duration::from_millis(10)).expect("wait");
        }
        b
    });
    let t0 = Instant::now();
    let mut got = None;
    while got.is_none() {
        assert!(t0.elapsed() < LIMIT, "the message never arrived");
        a.wait(LIMIT).expect("wait");
        if let Some(m) = a.next().expect("next") {
            got = Some((m.tag, m.data.to_vec()));
            let n = m.data.len();
            a.consume(n).expect("consume");
        }
    }
    assert!(
        t0.elapsed() < LIMIT / 2,
        "a wait of {LIMIT:?} did not wake for the message"
    );
    assert_eq!(got, Some((5, b"wake".to_vec())));
    // The peer goes away while `a` sleeps: the wait wakes and the failure shows.
    let b = sender.join().expect("sender");
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        drop(b);
    });
    let t0 = Instant::now();
    a.wait(LIMIT).expect("wait");
    assert!(
        t0.elapsed() < LIMIT / 2,
        "the end of the stream did not wake the wait"
    );
    closer.join().expect("closer");
    let deadline = Instant::now() + LIMIT;
    loop {
        match a.next() {
            Err(Error::PeerFailed(_)) => break,
            Ok(None) => a.wait(Duration::from_millis(10)).expect("wait"),
            other => panic!("expected the failure, got {:?}", other.map(|m| m.is_some())),
        }
        assert!(Instant::now() < deadline, "the failure never showed");
    }
}

#[test]
fn the_ring_path_still_works_when_plain_calls_are_off() {
    let config = Config {
        immediate_io: false,
        ..Config::default()
    };
    let (mut a, mut b) = tcp::pair(config).expect("pair");
    let deadline = Instant::now() + LIMIT;
    for i in 0..200u64 {
        let len = (i as usize * 97) % 5000;
        assert!(
            a.post_send(i, i, &message(i, len))
                .expect("post")
                .is_posted()
        );
        loop {
            assert!(Instant::now() < deadline, "message {i} never arrived");
            while a.poll().is_some() {}
            if let Some(m) = b.next().expect("next") {
                assert_eq!(m.tag, i);
                assert!(m.data.iter().enumerate().all(|(j, &x)| x == pattern(i, j)));
                let n = m.data.len();
                b.consume(n).expect("consume");
                break;
            }
        }
    }
    let p = a.send_paths();
    assert_eq!((p.immediate, p.partial, p.would_block), (0, 0, 0), "{p:?}");
    assert!(p.ring >= 1);
}
