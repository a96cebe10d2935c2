//! Connection set-up: TCP connect/accept, socket options, and a handshake that exchanges each
//! side's receive window and largest frame.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use super::config::Config;
use super::endpoint::Endpoint;
use super::error::Error;

const MAGIC: &[u8; 8] = b"viaductT";
const HELLO_LEN: usize = 24;

fn sock_err(step: &'static str) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::Socket { step, source }
}

fn set_int(fd: &TcpStream, level: i32, name: i32, value: i32) -> Result<(), Error> {
    // SAFETY: `value` is a valid int for the duration of the call; the fd is open.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(Error::Socket {
            step: "set option",
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Socket options and the handshake; returns the peer's window and largest frame.
fn prepare(stream: &mut TcpStream, config: &Config) -> Result<(usize, u32), Error> {
    config.validate()?;
    stream
        .set_nodelay(true)
        .map_err(sock_err("set TCP_NODELAY"))?;
    let timeout_ms = config.peer_timeout.as_millis().min(i32::MAX as u128) as i32;
    set_int(
        stream,
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        timeout_ms,
    )?;
    set_int(stream, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    let idle = (config.peer_timeout.as_secs() as i32).max(1);
    set_int(stream, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle)?;
    set_int(stream, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 1)?;
    set_int(stream, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3)?;
    stream
        .set_read_timeout(Some(config.connect_timeout))
        .map_err(sock_err("set timeout"))?;
    stream
        .set_write_timeout(Some(config.connect_timeout))
        .map_err(sock_err("set timeout"))?;
    let mut hello = [0u8; HELLO_LEN];
    hello[..8].copy_from_slice(MAGIC);
    hello[8..16].copy_from_slice(&(config.window() as u64).to_le_bytes());
    hello[16..20].copy_from_slice(&config.max_frame.to_le_bytes());
    stream
        .write_all(&hello)
        .map_err(sock_err("handshake send"))?;
    let mut peer = [0u8; HELLO_LEN];
    stream
        .read_exact(&mut peer)
        .map_err(sock_err("handshake receive"))?;
    if &peer[..8] != MAGIC {
        return Err(Error::Handshake(
            "the peer is not a viaduct TCP endpoint".into(),
        ));
    }
    let window = u64::from_le_bytes(peer[8..16].try_into().unwrap_or([0; 8]));
    let max_frame = u32::from_le_bytes(peer[16..20].try_into().unwrap_or([0; 4]));
    if window < 4096 {
        return Err(Error::Handshake(format!(
            "the peer's window of {window} bytes is too small"
        )));
    }
    stream
        .set_read_timeout(None)
        .map_err(sock_err("set timeout"))?;
    stream
        .set_write_timeout(None)
        .map_err(sock_err("set timeout"))?;
    Ok((window.min(usize::MAX as u64) as usize, max_frame))
}

fn establish(mut stream: TcpStream, config: Config) -> Result<Endpoint, Error> {
    let (window, peer_max) = prepare(&mut stream, &config)?;
    Endpoint::new(stream, window, peer_max, config)
}

/// Accepts TCP connections.
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
}

impl Listener {
    /// Listens on `addr` (port 0 picks a free port; see [`Listener::local_addr`]).
    pub fn bind(addr: SocketAddr) -> Result<Listener, Error> {
        Ok(Listener {
            inner: TcpListener::bind(addr).map_err(sock_err("bind"))?,
        })
    }

    /// The address peers connect to (the method's business-card entry).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.inner.local_addr().map_err(sock_err("local address"))
    }

    /// Waits for one peer and sets up a connection with it.
    pub fn accept(&self, config: Config) -> Result<Endpoint, Error> {
        let (stream, _) = self.inner.accept().map_err(sock_err("accept"))?;
        establish(stream, config)
    }

    /// Takes one connection off the queue without setting it up, so that a caller can set
    /// several up at once, each on its own thread and deadline ([`accept_on`]).
    pub fn accept_socket(&self) -> Result<TcpStream, Error> {
        let (stream, _) = self.inner.accept().map_err(sock_err("accept"))?;
        Ok(stream)
    }
}

/// Sets a connection up on a socket from [`Listener::accept_socket`]; the handshake waits at
/// most `config.connect_timeout` for the peer.
pub fn accept_on(stream: TcpStream, config: Config) -> Result<Endpoint, Error> {
    establish(stream, config)
}

/// Connects to a [`Listener`] at `addr`.
pub fn connect(addr: SocketAddr, config: Config) -> Result<Endpoint, Error> {
    let stream =
        TcpStream::connect_timeout(&addr, config.connect_timeout).map_err(sock_err("connect"))?;
    establish(stream, config)
}

/// Two connected endpoints over 127.0.0.1 in this process (for two threads, or a loopback).
///
/// One of them is set up on a helper thread, so [`Config::single_issuer`] is refused: connect
/// each end on the thread that uses it instead.
pub fn pair(config: Config) -> Result<(Endpoint, Endpoint), Error> {
    if config.single_issuer {
        return Err(Error::Config(
            "pair sets one endpoint up on a helper thread, which a single-issuer endpoint \
             cannot leave: connect each end on the thread that uses it"
                .into(),
        ));
    }
    let listener = Listener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let addr = listener.local_addr()?;
    let cfg = config.clone();
    let other = std::thread::spawn(move || connect(addr, cfg));
    let first = listener.accept(config);
    let second = other
        .join()
        .map_err(|_| Error::Handshake("the connecting thread panicked".into()))?;
    Ok((first?, second?))
}
