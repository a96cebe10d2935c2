//! The connection handshake over loopback TCP: same key accepted, wrong key refused and logged.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use viaduct_pmi::JobKey;
use viaduct_pmi::auth::{self, AuthError};

const TIMEOUT: Duration = Duration::from_secs(10);

fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    for s in [&client, &server] {
        s.set_read_timeout(Some(TIMEOUT)).unwrap();
        s.set_write_timeout(Some(TIMEOUT)).unwrap();
    }
    (client, server)
}

/// Runs one handshake: acceptor with `acceptor_key`, connector (rank 5) with `connector_key`.
fn handshake(
    acceptor_key: &JobKey,
    connector_key: &JobKey,
) -> (Result<u32, AuthError>, Result<(), AuthError>, Vec<String>) {
    let (mut client, mut server) = pair();
    let connector_key = connector_key.clone();
    let connector = thread::spawn(move || auth::connect(&mut client, &connector_key, 5));
    let mut log = Vec::new();
    let accepted = auth::accept_with_log(&mut server, acceptor_key, "127.0.0.1:test", &mut |l| {
        log.push(l.to_owned());
    });
    drop(server);
    (accepted, connector.join().unwrap(), log)
}

#[test]
fn same_key_is_accepted_both_ways() {
    let key = JobKey::generate().unwrap();
    let (accepted, connected, log) = handshake(&key, &key);
    assert_eq!(accepted.unwrap(), 5);
    connected.unwrap();
    assert!(log.is_empty());
}

#[test]
fn wrong_key_is_refused_and_logged() {
    let ours = JobKey::generate().unwrap();
    let theirs = JobKey::generate().unwrap();
    let (accepted, connected, log) = handshake(&ours, &theirs);
    assert!(matches!(
        accepted,
        Err(AuthError::StrangerConnector { claimed_rank: 5 })
    ));
    assert!(matches!(connected, Err(AuthError::StrangerAcceptor)));
    assert_eq!(log.len(), 1);
    assert!(
        log[0].contains("refused connection from 127.0.0.1:test"),
        "{}",
        log[0]
    );
    assert!(
        log[0].contains("does not hold this job's key"),
        "{}",
        log[0]
    );
}

#[test]
fn a_peer_speaking_something_else_is_refused() {
    let key = JobKey::generate().unwrap();
    let (mut client, mut server) = pair();
    let writer = thread::spawn(move || {
        client.write_all(&[b'G'; 76]).unwrap();
        client
    });
    let mut log = Vec::new();
    let result = auth::accept_with_log(&mut server, &key, "stranger", &mut |l| {
        log.push(l.to_owned())
    });
    assert!(matches!(result, Err(AuthError::BadMagic)));
    assert_eq!(log.len(), 1);
    drop(writer.join().unwrap());
}

#[test]
fn a_silent_peer_ends_in_an_error_not_a_hang() {
    let key = JobKey::generate().unwrap();
    let (_client, mut server) = pair();
    server
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let result = auth::accept_with_log(&mut server, &key, "silent", &mut |_| {});
    assert!(matches!(result, Err(AuthError::Io(_))));
}

#[test]
fn a_connector_facing_a_closed_acceptor_fails() {
    let key = JobKey::generate().unwrap();
    let (mut client, server) = pair();
    drop(server);
    assert!(matches!(
        auth::connect(&mut client, &key, 0),
        Err(AuthError::Io(_))
    ));
}
