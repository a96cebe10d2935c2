//! The PMI-1 server of `viaduct launch` (`viaduct_pmi::server`), reading a connection's lines
//! over a real TCP socket, as a rank or any local process could send them.
//!
//! Input: byte 0 bit 0 says whether the connection first identifies itself properly
//! (`cmd=initack pmiid=0`), so that the fuzzer reaches the commands after it; the rest is
//! sent, then the sending side is closed. Checks: nothing panics; the server answers with
//! valid PMI-1 lines only, is never unable to answer, and closes the connection once the
//! stream ended (no hang).
#![no_main]

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use viaduct_pmi::server::{Pmi1Server, ServerConfig, ServerEvent};
use viaduct_pmi::wire1::parse_line;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    let mut config = ServerConfig::new(1);
    config.hello_timeout = Duration::from_secs(5);
    let server = Pmi1Server::start(config).expect("start the PMI-1 server");
    let mut conn = TcpStream::connect(server.addr()).expect("connect to the PMI-1 server");
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut sent = if mode & 1 != 0 {
        conn.write_all(b"cmd=initack pmiid=0\n")
    } else {
        Ok(())
    };
    if sent.is_ok() {
        sent = conn.write_all(input);
    }
    // The server may have closed the connection already (a refused line).
    let _ = sent;
    let _ = conn.shutdown(Shutdown::Write);
    let mut answers = Vec::new();
    match conn.read_to_end(&mut answers) {
        Ok(_) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("the server kept the connection open 20 s after its stream ended");
        }
        // A reset: the server closed with unread bytes (after refusing a line).
        Err(_) => {}
    }
    for line in answers.split_inclusive(|&b| b == b'\n') {
        if line.ends_with(b"\n")
            && let Err(e) = parse_line(line)
        {
            panic!("the server sent {:?}: {e}", String::from_utf8_lossy(line));
        }
    }
    // The client read everything the server wrote, so a failure to answer is the server's
    // own: an answer it cannot encode (from a value it accepted, say).
    let events = server.take_events();
    server.shutdown();
    for e in events {
        if let ServerEvent::ProtocolError { detail, .. } = &e {
            assert!(!detail.starts_with("cannot answer"), "{e:?}");
        }
    }
});
