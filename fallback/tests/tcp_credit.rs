//! TCP method flow control: credit is returned for the frames a peer counted against its window
//! (messages and requests), and only for those. Two endpoints over 127.0.0.1, driven from one
//! thread so that every step happens in a known order.

use std::time::{Duration, Instant};

use viaduct_fallback::tcp::{self, Config, Endpoint, Posted};

const LIMIT: Duration = Duration::from_secs(20);

/// Drives `ep` (`next`) for `d`.
fn idle_for(ep: &mut Endpoint, d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        assert!(ep.next().expect("next").is_none(), "no message expected");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Drives both ends until `b` holds a message; returns its length after consuming it.
fn recv_one(a: &mut Endpoint, b: &mut Endpoint) -> usize {
    let deadline = Instant::now() + LIMIT;
    loop {
        let _ = a.poll();
        if let Some(m) = b.next().expect("next") {
            let n = m.data.len();
            b.consume(n).expect("consume");
            return n;
        }
        assert!(Instant::now() < deadline, "no message arrived");
        std::thread::sleep(Duration::from_micros(100));
    }
}

#[test]
fn a_polling_receiver_holds_credit_back_and_returns_it_once_before_it_sleeps() {
    let (mut a, mut b) = tcp::pair(Config::default()).expect("pair");
    assert!(a.post_send(1, 7, &[0x5A; 100]).expect("post").is_posted());
    assert_eq!(recv_one(&mut a, &mut b), 100);
    // Both ends poll with nothing to say. The receiver holds the message's credit back (less
    // than an eighth of the window): a frame of its own would wake a sleeping peer thread for
    // nothing.
    let end = Instant::now() + Duration::from_millis(300);
    while Instant::now() < end {
        assert!(a.next().expect("next a").is_none());
        assert!(b.next().expect("next b").is_none());
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(
        b.credit_frames_sent(),
        0,
        "a polling end sent a credit frame"
    );
    assert!(
        a.unacked() >= 100,
        "the credit came back while the receiver polled ({} bytes unacknowledged)",
        a.unacked()
    );
    // About to sleep, the receiver returns it, once; the credit frame itself is not counted,
    // so it must not be answered: before that rule the two ends bounced credit frames to each
    // other for as long as they waited.
    let deadline = Instant::now() + LIMIT;
    while a.unacked() != 0 {
        b.wait(Duration::from_millis(1)).expect("wait b");
        assert!(a.next().expect("next a").is_none());
        assert!(
            Instant::now() < deadline,
            "the sleeping receiver returned no credit"
        );
    }
    for _ in 0..50 {
        a.wait(Duration::from_millis(1)).expect("wait a");
        b.wait(Duration::from_millis(1)).expect("wait b");
        assert!(a.next().expect("next a").is_none());
        assert!(b.next().expect("next b").is_none());
    }
    assert_eq!(
        b.credit_frames_sent(),
        1,
        "one credit frame for the message"
    );
    assert_eq!(a.credit_frames_sent(), 0, "a credit frame earns no credit");
    assert_eq!(a.frames_sent(), 1, "only the message left a");
    assert_eq!(b.frames_sent(), 1, "only the credit left b");
}

#[test]
fn replies_earn_no_credit_so_the_window_keeps_counting_unconsumed_messages() {
    let (mut a, mut b) = tcp::pair(Config::default()).expect("pair");
    const REPLY: usize = 1 << 20;
    const MSG: usize = 200 << 10;
    let key = a.register(vec![0xC3; REPLY]);
    assert!(matches!(
        b.post_read(1, key, 0, vec![0; REPLY]).expect("post_read"),
        Posted::InProgress
    ));
    // a serves the read: its 1 MiB reply is an uncounted frame.
    let deadline = Instant::now() + LIMIT;
    while a.frames_sent() == 0 {
        let _ = a.poll();
        assert!(Instant::now() < deadline, "a never served the read");
        std::thread::sleep(Duration::from_micros(100));
    }
    // A counted message follows the reply in the stream; b will not consume it yet.
    assert!(matches!(
        a.post_send_buf(2, 9, vec![0x11; MSG])
            .expect("post_send_buf"),
        Posted::InProgress
    ));
    let header_and_payload = a.unacked();
    assert!(header_and_payload > MSG);
    let read = loop {
        if let Some(c) = b.poll() {
            break c;
        }
        let _ = a.poll();
        assert!(Instant::now() < deadline, "the read never completed");
        std::thread::sleep(Duration::from_micros(100));
    };
    assert_eq!(read.id, 1);
    assert_eq!(read.result.expect("read"), REPLY);
    assert!(read.buffer.expect("buffer").iter().all(|&x| x == 0xC3));
    // Let any credit b sent reach a. Crediting the reply back would have wiped out a's count
    // of the unconsumed message, so a could overrun b's receive buffers.
    idle_for(&mut a, Duration::from_millis(100));
    assert!(
        a.unacked() >= MSG,
        "a counts {} unacknowledged bytes while b holds {MSG} unconsumed",
        a.unacked()
    );
    // Once b consumes the message, all of it comes back.
    assert_eq!(recv_one(&mut a, &mut b), MSG);
    let deadline = Instant::now() + LIMIT;
    while a.unacked() != 0 {
        // b goes to sleep, so it returns the credit it holds back while polling.
        b.wait(Duration::from_millis(1)).expect("wait b");
        assert!(b.next().expect("next b").is_none());
        assert!(a.next().expect("next a").is_none());
        assert!(
            Instant::now() < deadline,
            "credit never came back: {} bytes unacknowledged",
            a.unacked()
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A receiver that only ever polls (it never sleeps, so it never returns its held-back credit)
/// still keeps a sender of four windows' worth of messages going: the credit it holds back is
/// less than an eighth of the window, and the rest comes back in credit frames.
#[test]
fn a_receiver_that_only_polls_never_stalls_the_sender() {
    let config = Config {
        recv_buffers: 4,
        recv_buffer_bytes: 16 << 10,
        ..Config::default()
    };
    let window = config.window();
    let (mut a, mut b) = tcp::pair(config).expect("pair");
    const LEN: usize = 1000;
    let total = 4 * window / LEN + 1;
    let (mut sent, mut got, mut completed) = (0usize, 0usize, 0usize);
    let deadline = Instant::now() + LIMIT;
    while got < total {
        assert!(
            Instant::now() < deadline,
            "stalled: {sent} sent, {got} received, {} bytes unacknowledged of a {window}-byte window",
            a.unacked()
        );
        if sent < total {
            let msg = [(sent % 251) as u8; LEN];
            if a.post_send(sent as u64, 3, &msg).expect("post").is_posted() {
                sent += 1;
            }
        }
        while let Some(c) = a.poll() {
            c.result.expect("send");
            completed += 1;
        }
        assert!(
            a.unacked() <= window + LEN + 64,
            "{} bytes in flight beyond the window",
            a.unacked()
        );
        if let Some(m) = b.next().expect("next") {
            assert!(
                m.data.iter().all(|&x| x == (got % 251) as u8),
                "message {got}"
            );
            b.consume(LEN).expect("consume");
            got += 1;
        }
    }
    assert!(
        b.credit_frames_sent() > 0,
        "no credit came back while polling"
    );
    while completed < total {
        assert!(Instant::now() < deadline, "sends never completed");
        if let Some(c) = a.poll() {
            c.result.expect("send");
            completed += 1;
        }
    }
}
