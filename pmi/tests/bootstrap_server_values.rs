//! The PMI-1 server against a rank that puts values it could never send back: the put is
//! refused with a clear answer, and the server keeps answering (over loopback TCP).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use viaduct_pmi::server::{Pmi1Server, ServerConfig, ServerEvent};
use viaduct_pmi::wire1::parse_line;

/// Sends `line` and returns the server's answer line (bounded by the socket's timeout).
fn ask(conn: &mut TcpStream, reader: &mut BufReader<TcpStream>, line: &str) -> String {
    conn.write_all(line.as_bytes()).unwrap();
    let mut answer = String::new();
    let n = reader
        .read_line(&mut answer)
        .unwrap_or_else(|e| panic!("no answer to {line:?}: {e}"));
    assert!(
        n > 0,
        "the server closed the connection instead of answering {line:?}"
    );
    answer
}

#[test]
fn an_empty_value_is_refused_and_the_server_keeps_answering() {
    let server = Pmi1Server::start(ServerConfig::new(1)).unwrap();
    let mut conn = TcpStream::connect(server.addr()).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    assert_eq!(
        ask(&mut conn, &mut reader, "cmd=initack pmiid=0\n"),
        "cmd=initack\n"
    );
    for _ in 0..3 {
        let mut set = String::new();
        reader.read_line(&mut set).unwrap();
        assert!(set.starts_with("cmd=set "), "{set:?}");
    }

    let put =
        parse_line(ask(&mut conn, &mut reader, "cmd=put key=empty value=\n").as_bytes()).unwrap();
    assert_eq!(put.cmd, "put_result");
    assert_eq!(put.get("rc"), Some("-1"), "{put:?}");
    assert_eq!(put.get("msg"), Some("empty_value"), "{put:?}");

    let barrier = ask(&mut conn, &mut reader, "cmd=barrier_in\n");
    assert_eq!(barrier, "cmd=barrier_out\n");
    let get = parse_line(ask(&mut conn, &mut reader, "cmd=get key=empty\n").as_bytes()).unwrap();
    assert_eq!(get.cmd, "get_result");
    assert_eq!(get.get("rc"), Some("-1"), "{get:?}");
    assert_eq!(get.get("msg"), Some("key_not_found"), "{get:?}");

    assert_eq!(
        ask(&mut conn, &mut reader, "cmd=finalize\n"),
        "cmd=finalize_ack\n"
    );
    let events = server.take_events();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ServerEvent::ProtocolError { .. })),
        "{events:?}"
    );
    server.shutdown();
}
