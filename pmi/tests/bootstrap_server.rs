//! The PMI-1 client against viaduct's own PMI-1 server, over loopback TCP, in one process:
//! full exchanges, job keys, refusals, broken barriers, aborts, timeouts.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use viaduct_pmi::pmi1::Pmi1Client;
use viaduct_pmi::server::{Pmi1Server, ServerConfig, ServerEvent};
use viaduct_pmi::{Bootstrap, BootstrapError, JOB_KEY_VAR, JobKey, Protocol};

const TIMEOUT: Duration = Duration::from_secs(20);

fn rank_env(
    server: &Pmi1Server,
    rank: u32,
    size: u32,
    key: Option<&JobKey>,
) -> Vec<(String, String)> {
    let mut vars = vec![
        ("PMI_PORT".to_owned(), server.port_env()),
        ("PMI_ID".to_owned(), rank.to_string()),
        ("PMI_RANK".to_owned(), rank.to_string()),
        ("PMI_SIZE".to_owned(), size.to_string()),
        (
            "VIADUCT_PMI_TIMEOUT".to_owned(),
            TIMEOUT.as_secs().to_string(),
        ),
    ];
    if let Some(key) = key {
        vars.push((JOB_KEY_VAR.to_owned(), key.to_hex()));
    }
    vars
}

/// Waits (bounded) for the first server event matching `pred`.
fn wait_event(server: &Pmi1Server, pred: impl Fn(&ServerEvent) -> bool) -> ServerEvent {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        if let Some(e) = server.take_events().into_iter().find(|e| pred(e)) {
            return e;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("no matching server event within {TIMEOUT:?}");
}

fn exchange(size: u32, key: Option<JobKey>) -> Vec<(u32, JobKey, Vec<u32>, Vec<String>)> {
    let server = Pmi1Server::start(ServerConfig::new(size)).unwrap();
    let handles: Vec<_> = (0..size)
        .map(|rank| {
            let vars = rank_env(&server, rank, size, key.as_ref());
            thread::spawn(move || {
                let mut boot = Bootstrap::from_vars(vars).unwrap();
                assert_eq!(boot.protocol(), Protocol::Pmi1);
                assert_eq!((boot.rank(), boot.size()), (rank, size));
                boot.publish("card", &format!("tcp:127.0.0.1:{}", 5000 + rank))
                    .unwrap();
                boot.fence().unwrap();
                let cards = (0..size).map(|p| boot.lookup("card", p).unwrap()).collect();
                let out = (rank, boot.job_key().clone(), boot.local_ranks(), cards);
                boot.finalize().unwrap();
                out
            })
        })
        .collect();
    let results = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(server.take_events().is_empty());
    server.shutdown();
    results
}

#[test]
fn four_ranks_exchange_cards_with_the_launcher_key() {
    let key = JobKey::generate().unwrap();
    let results = exchange(4, Some(key.clone()));
    for (rank, job_key, local, cards) in results {
        assert_eq!(job_key, key, "rank {rank}");
        assert_eq!(local, vec![0, 1, 2, 3]);
        let expected: Vec<String> = (0..4)
            .map(|p| format!("tcp:127.0.0.1:{}", 5000 + p))
            .collect();
        assert_eq!(cards, expected);
    }
}

#[test]
fn without_a_launcher_key_rank_zero_hands_one_out() {
    let results = exchange(3, None);
    let first = results[0].1.clone();
    assert!(results.iter().all(|r| r.1 == first));
}

#[test]
fn puts_are_visible_only_after_the_barrier() {
    let server = Pmi1Server::start(ServerConfig::new(1)).unwrap();
    let mut client = Pmi1Client::connect(&server.port_env(), 0, Some(0), Some(1), TIMEOUT).unwrap();
    assert_eq!(
        client.get("PMI_process_mapping").unwrap().as_deref(),
        Some("(vector,(0,1,1))")
    );
    client.put("a", "1").unwrap();
    assert_eq!(client.get("a").unwrap(), None);
    client.barrier().unwrap();
    assert_eq!(client.get("a").unwrap().as_deref(), Some("1"));
    // A key is put once.
    assert!(matches!(
        client.put("a", "2"),
        Err(BootstrapError::Refused { .. })
    ));
    // What the wire cannot carry is refused before sending.
    assert!(matches!(
        client.put("a b", "2"),
        Err(BootstrapError::Invalid { .. })
    ));
    assert!(matches!(
        client.put("b", "two words"),
        Err(BootstrapError::Invalid { .. })
    ));
    let too_long = "x".repeat(client.maxes().value + 1);
    assert!(matches!(
        client.put("b", &too_long),
        Err(BootstrapError::Invalid { .. })
    ));
    client.finalize().unwrap();
    server.shutdown();
}

#[test]
fn strangers_are_refused() {
    let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    let talk = |line: &str| {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        s.write_all(line.as_bytes()).unwrap();
        let mut answer = String::new();
        // The server closes a refused connection without answering.
        BufReader::new(s).read_line(&mut answer).unwrap();
        answer
    };
    assert_eq!(talk("cmd=initack pmiid=9\n"), "");
    assert!(matches!(
        wait_event(&server, |_| true),
        ServerEvent::Refused { .. }
    ));
    assert_eq!(talk("cmd=get key=PMI_process_mapping\n"), "");
    let ServerEvent::Refused { reason, .. } = wait_event(&server, |_| true) else {
        panic!("expected a refusal");
    };
    assert!(reason.contains("not initack"), "{reason}");

    // The real rank 0 takes its id; a second claim of it is refused.
    let _rank0 = Pmi1Client::connect(&server.port_env(), 0, None, None, TIMEOUT).unwrap();
    assert_eq!(talk("cmd=initack pmiid=0\n"), "");
    let ServerEvent::Refused { reason, .. } = wait_event(&server, |_| true) else {
        panic!("expected a refusal");
    };
    assert!(reason.contains("already connected"), "{reason}");
    // A stranger claiming the rank's id makes the rank's own connection fail, visibly.
    assert_eq!(talk("cmd=initack pmiid=1\n"), "cmd=initack\n");
    let err = Pmi1Client::connect(&server.port_env(), 1, None, None, TIMEOUT).unwrap_err();
    assert!(matches!(err, BootstrapError::Closed { .. }), "{err}");
    server.shutdown();
}

#[test]
fn a_rank_leaving_breaks_the_barrier_and_the_launcher_is_told() {
    let server = Pmi1Server::start(ServerConfig::new(3)).unwrap();
    let addr = server.port_env();
    let waiter = thread::spawn(move || {
        let mut c = Pmi1Client::connect(&addr, 0, None, None, TIMEOUT).unwrap();
        c.barrier()
    });
    // Rank 1 connects and finalizes without entering the barrier; rank 2 never connects but
    // its process exits.
    let mut leaver = Pmi1Client::connect(&server.port_env(), 1, None, None, TIMEOUT).unwrap();
    leaver.finalize().unwrap();
    let ServerEvent::BarrierBroken { waiting, gone } =
        wait_event(&server, |e| matches!(e, ServerEvent::BarrierBroken { .. }))
    else {
        unreachable!()
    };
    assert_eq!(gone, vec![1]);
    assert_eq!(waiting, vec![0]);
    server.rank_exited(2);
    // Ending the server ends the wait: the waiting rank gets an error, not a hang.
    server.shutdown();
    let err = waiter.join().unwrap().unwrap_err();
    assert!(matches!(err, BootstrapError::Closed { .. }), "{err}");
}

#[test]
fn abort_and_protocol_errors_reach_the_launcher() {
    let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    let mut c = Pmi1Client::connect(&server.port_env(), 0, None, None, TIMEOUT).unwrap();
    c.abort(7, "cannot open the input file").unwrap();
    let event = wait_event(&server, |e| matches!(e, ServerEvent::Abort { .. }));
    assert_eq!(
        event,
        ServerEvent::Abort {
            rank: 0,
            exit_code: 7,
            message: Some("cannot_open_the_input_file".into()),
        }
    );

    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.write_all(b"cmd=initack pmiid=1\nthis is not pmi\n")
        .unwrap();
    let event = wait_event(&server, |e| matches!(e, ServerEvent::ProtocolError { .. }));
    assert!(
        matches!(event, ServerEvent::ProtocolError { rank: 1, .. }),
        "{event:?}"
    );
    server.shutdown();
}

#[test]
fn a_fence_nobody_joins_times_out() {
    let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    let limit = Duration::from_millis(300);
    let mut c = Pmi1Client::connect(&server.port_env(), 0, None, None, limit).unwrap();
    let started = Instant::now();
    let err = c.barrier().unwrap_err();
    assert!(
        matches!(err, BootstrapError::Timeout { op: "barrier", .. }),
        "{err}"
    );
    assert!(started.elapsed() < TIMEOUT);
    server.shutdown();
}

#[test]
fn mismatched_environment_is_caught() {
    let server = Pmi1Server::start(ServerConfig::new(2)).unwrap();
    let err = Pmi1Client::connect(&server.port_env(), 1, Some(0), Some(2), TIMEOUT).unwrap_err();
    assert!(
        matches!(
            err,
            BootstrapError::Mismatch {
                what: "rank",
                from_env: 0,
                from_server: 1
            }
        ),
        "{err}"
    );
    server.shutdown();
}

#[test]
fn connecting_to_nothing_is_a_clear_error() {
    // Bind and drop to find a port with no listener.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = Bootstrap::from_vars([
        ("PMI_PORT", format!("127.0.0.1:{port}")),
        ("PMI_ID", "0".into()),
    ])
    .unwrap_err();
    assert!(matches!(err, BootstrapError::Connect { .. }), "{err}");
}

/// Threads of this process named like the server's connection threads.
fn connection_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "pmi-conn")
        .count()
}

/// Writes one byte every 200 ms (never a newline) until the server closes the connection;
/// returns how long that took, or `None` if it is still open after `limit`.
fn trickle_until_closed(server: &Pmi1Server, limit: Duration) -> Option<Duration> {
    let s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let started = Instant::now();
    let mut byte = [0u8; 1];
    while started.elapsed() < limit {
        if (&s).write_all(b"c").is_err() {
            return Some(started.elapsed());
        }
        // Waits up to 200 ms: the end of the stream (or a reset) means the server closed it.
        match s.peek(&mut byte) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => thread::sleep(Duration::from_millis(200)),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}

#[test]
fn a_trickling_stranger_is_cut_off_at_the_hello_deadline() {
    // One byte every 200 ms never lets a read time out; the hello deadline is for the whole
    // first line all the same.
    let mut config = ServerConfig::new(2);
    config.hello_timeout = Duration::from_millis(800);
    let server = Pmi1Server::start(config).unwrap();
    let closed = trickle_until_closed(&server, Duration::from_secs(10));
    assert!(
        closed.is_some(),
        "a connection trickling bytes is still open after 10 s (hello deadline 0.8 s)"
    );
    let ServerEvent::Refused { reason, .. } =
        wait_event(&server, |e| matches!(e, ServerEvent::Refused { .. }))
    else {
        unreachable!()
    };
    assert!(reason.contains("initack"), "{reason}");
    server.shutdown();
}

#[test]
fn idle_strangers_do_not_grow_the_server_without_bound() {
    let mut config = ServerConfig::new(1);
    config.hello_timeout = Duration::from_secs(60);
    let limit = config.max_pending;
    let server = Pmi1Server::start(config).unwrap();
    let conns: Vec<TcpStream> = (0..limit + 100)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    // The connections past the bound are closed at once (the hello deadline is a minute away).
    let last = conns.last().unwrap();
    last.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut byte = [0u8; 1];
    let closed = match last.peek(&mut byte) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(closed, "a connection past the bound was kept open");
    // Other tests of this binary run servers beside this one: allow for their ranks.
    let threads = connection_threads();
    assert!(
        threads <= limit + 16,
        "{threads} connection threads for {} idle connections (bound {limit})",
        conns.len()
    );
    let event = wait_event(&server, |e| matches!(e, ServerEvent::Overloaded { .. }));
    assert!(
        matches!(event, ServerEvent::Overloaded { refused, limit: l } if refused >= 1 && l == limit),
        "{event:?}"
    );
    // The rank itself is still served once the strangers are gone.
    drop(conns);
    let deadline = Instant::now() + TIMEOUT;
    let mut client = loop {
        match Pmi1Client::connect(&server.port_env(), 0, None, None, TIMEOUT) {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("rank 0 cannot connect: {e}"),
        }
    };
    client.finalize().unwrap();
    server.shutdown();
}

#[test]
fn a_rank_cannot_put_without_bound() {
    let config = ServerConfig::new(1);
    let (max_keys, max_bytes) = (config.max_keys, config.max_bytes);
    let server = Pmi1Server::start(config).unwrap();
    let mut client = Pmi1Client::connect(&server.port_env(), 0, None, None, TIMEOUT).unwrap();
    for i in 0..max_keys {
        client.put(&format!("k{i}"), "v").unwrap();
    }
    let err = client.put("one-too-many", "v").unwrap_err();
    assert!(
        matches!(&err, BootstrapError::Refused { msg, .. } if msg.contains("too_many_keys")),
        "{err}"
    );
    let event = wait_event(&server, |e| matches!(e, ServerEvent::LimitReached { .. }));
    assert!(
        matches!(&event, ServerEvent::LimitReached { rank: 0, detail } if detail.contains("VIADUCT_PMI_MAX_KEYS")),
        "{event:?}"
    );
    // The rank is still served: gets work, and the server did not hang up.
    assert!(client.get("PMI_process_mapping").unwrap().is_some());
    client.finalize().unwrap();
    server.shutdown();

    // Bytes: a few big values reach the byte bound long before the key bound.
    let mut config = ServerConfig::new(1);
    config.max_bytes = 4096;
    let server = Pmi1Server::start(config).unwrap();
    let mut client = Pmi1Client::connect(&server.port_env(), 0, None, None, TIMEOUT).unwrap();
    let value = "x".repeat(1000);
    for i in 0..4 {
        client.put(&format!("big{i}"), &value).unwrap();
    }
    let err = client.put("big4", &value).unwrap_err();
    assert!(
        matches!(&err, BootstrapError::Refused { msg, .. } if msg.contains("too_many_bytes")),
        "{err}"
    );
    client.finalize().unwrap();
    server.shutdown();
    assert!(max_bytes >= max_keys, "{max_bytes} {max_keys}");
}

#[test]
fn bounds_come_from_the_environment_and_bad_values_are_named() {
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |var: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let config = ServerConfig::from_vars(
        4,
        vars(&[
            ("VIADUCT_PMI_MAX_PENDING", "7"),
            ("VIADUCT_PMI_MAX_KEYS", "9"),
            ("VIADUCT_PMI_MAX_BYTES", "4096"),
        ]),
    )
    .unwrap();
    assert_eq!(
        (config.max_pending, config.max_keys, config.max_bytes),
        (7, 9, 4096)
    );
    let defaults = ServerConfig::from_vars(4, vars(&[])).unwrap();
    assert_eq!(defaults.max_pending, 4 + 64);
    let err = ServerConfig::from_vars(4, vars(&[("VIADUCT_PMI_MAX_KEYS", "0")])).unwrap_err();
    assert!(err.contains("VIADUCT_PMI_MAX_KEYS"), "{err}");
    let err = ServerConfig::from_vars(4, vars(&[("VIADUCT_PMI_MAX_BYTES", "lots")])).unwrap_err();
    assert!(err.contains("VIADUCT_PMI_MAX_BYTES"), "{err}");
}
