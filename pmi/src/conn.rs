//! A client connection to a PMI server: a Unix socket (`PMI_FD`) or TCP (`PMI_PORT`), with a
//! read timeout on every answer so no PMI call waits forever.

use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::error::{BootstrapError, io_error};
use super::wire::Message;
use super::wire1::{self, LineRead};
use super::wire2;

/// The socket under a PMI connection.
#[derive(Debug)]
pub(crate) enum PmiSocket {
    /// An inherited socket (`PMI_FD`).
    Unix(UnixStream),
    /// A TCP connection (`PMI_PORT`).
    Tcp(TcpStream),
}

impl PmiSocket {
    fn try_clone(&self) -> io::Result<Self> {
        Ok(match self {
            Self::Unix(s) => Self::Unix(s.try_clone()?),
            Self::Tcp(s) => Self::Tcp(s.try_clone()?),
        })
    }

    fn set_timeouts(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Self::Unix(s) => {
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))
            }
            Self::Tcp(s) => {
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))
            }
        }
    }

    fn shutdown(&self) {
        // Best effort: the peer may already be gone.
        let _ = match self {
            Self::Unix(s) => s.shutdown(Shutdown::Both),
            Self::Tcp(s) => s.shutdown(Shutdown::Both),
        };
    }
}

impl Read for PmiSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.read(buf),
            Self::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for PmiSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Unix(s) => s.write(buf),
            Self::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Unix(s) => s.flush(),
            Self::Tcp(s) => s.flush(),
        }
    }
}

/// A PMI client connection: buffered reads, whole-message writes, bounded waits.
#[derive(Debug)]
pub(crate) struct Conn {
    reader: BufReader<PmiSocket>,
    writer: PmiSocket,
    partial: Vec<u8>,
    timeout: Duration,
}

impl Conn {
    /// Wraps a socket; every read and write waits at most `timeout`.
    pub(crate) fn new(socket: PmiSocket, timeout: Duration) -> Result<Self, BootstrapError> {
        let op = "connect";
        socket
            .set_timeouts(timeout)
            .map_err(|e| BootstrapError::Io { op, source: e })?;
        let writer = socket
            .try_clone()
            .map_err(|e| BootstrapError::Io { op, source: e })?;
        Ok(Self {
            reader: BufReader::new(socket),
            writer,
            partial: Vec::new(),
            timeout,
        })
    }

    /// Connects over TCP to `addr` (`host:port`), trying each resolved address within `timeout`.
    pub(crate) fn connect_tcp(addr: &str, timeout: Duration) -> Result<Self, BootstrapError> {
        let connect_err = |source| BootstrapError::Connect {
            addr: addr.to_owned(),
            source,
        };
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolves to no address");
        for sock_addr in addr.to_socket_addrs().map_err(connect_err)? {
            match TcpStream::connect_timeout(&sock_addr, timeout) {
                Ok(stream) => {
                    // PMI messages are small and answered one by one: do not delay them.
                    stream.set_nodelay(true).map_err(connect_err)?;
                    return Self::new(PmiSocket::Tcp(stream), timeout);
                }
                Err(e) => last = e,
            }
        }
        Err(connect_err(last))
    }

    /// The limit on each wait.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    fn write_all(&mut self, op: &'static str, bytes: &[u8]) -> Result<(), BootstrapError> {
        self.writer
            .write_all(bytes)
            .and_then(|()| self.writer.flush())
            .map_err(|e| io_error(op, e, self.timeout))
    }

    /// Sends one PMI-1 line.
    pub(crate) fn send_v1(
        &mut self,
        op: &'static str,
        msg: &Message,
    ) -> Result<(), BootstrapError> {
        let line = wire1::encode_line(msg).map_err(|source| BootstrapError::Wire { op, source })?;
        self.write_all(op, &line)
    }

    /// Receives one PMI-1 line.
    pub(crate) fn recv_v1(&mut self, op: &'static str) -> Result<Message, BootstrapError> {
        match wire1::read_line(&mut self.reader, &mut self.partial) {
            Ok(LineRead::Line(line)) => {
                wire1::parse_line(&line).map_err(|source| BootstrapError::Wire { op, source })
            }
            Ok(LineRead::Eof) => Err(BootstrapError::Closed { op }),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => Err(BootstrapError::Protocol {
                op,
                detail: e.to_string(),
            }),
            Err(e) => {
                // A line cut by a timeout or an error cannot be resumed by the next call: drop it.
                self.partial.clear();
                Err(io_error(op, e, self.timeout))
            }
        }
    }

    /// Receives PMI-1 lines until one whose command is `cmd`; others are protocol errors.
    pub(crate) fn expect_v1(
        &mut self,
        op: &'static str,
        cmd: &str,
    ) -> Result<Message, BootstrapError> {
        let msg = self.recv_v1(op)?;
        if msg.cmd != cmd {
            return Err(BootstrapError::Protocol {
                op,
                detail: format!("expected cmd={cmd}, got cmd={}", msg.cmd),
            });
        }
        Ok(msg)
    }

    /// Sends one PMI-2 record.
    pub(crate) fn send_v2(
        &mut self,
        op: &'static str,
        msg: &Message,
    ) -> Result<(), BootstrapError> {
        let rec =
            wire2::encode_record(msg).map_err(|source| BootstrapError::Wire { op, source })?;
        self.write_all(op, &rec)
    }

    /// Receives one PMI-2 record whose command must be `cmd`.
    pub(crate) fn expect_v2(
        &mut self,
        op: &'static str,
        cmd: &str,
    ) -> Result<Message, BootstrapError> {
        let msg = match wire2::read_record(&mut self.reader) {
            Ok(Some(msg)) => msg,
            Ok(None) => return Err(BootstrapError::Closed { op }),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(BootstrapError::Protocol {
                    op,
                    detail: e.to_string(),
                });
            }
            Err(e) => return Err(io_error(op, e, self.timeout)),
        };
        if msg.cmd != cmd {
            return Err(BootstrapError::Protocol {
                op,
                detail: format!("expected cmd={cmd}, got cmd={}", msg.cmd),
            });
        }
        Ok(msg)
    }

    /// Closes both directions (after finalize or abort).
    pub(crate) fn close(&self) {
        self.writer.shutdown();
    }
}

/// Checks the `rc` field of an answer: absent or 0 is success.
pub(crate) fn check_rc(op: &'static str, msg: &Message) -> Result<(), BootstrapError> {
    match msg.get_int("rc") {
        None | Some(Ok(0)) => Ok(()),
        Some(Ok(rc)) => Err(BootstrapError::Refused {
            op,
            rc,
            msg: msg
                .get("msg")
                .or_else(|| msg.get("errmsg"))
                .unwrap_or("no message")
                .to_owned(),
        }),
        Some(Err(raw)) => Err(BootstrapError::Protocol {
            op,
            detail: format!("rc={raw:?} is not a number"),
        }),
    }
}

/// Reads a required integer field of an answer.
pub(crate) fn int_field(op: &'static str, msg: &Message, key: &str) -> Result<i64, BootstrapError> {
    match msg.get_int(key) {
        Some(Ok(v)) => Ok(v),
        Some(Err(raw)) => Err(BootstrapError::Protocol {
            op,
            detail: format!("{key}={raw:?} is not a number"),
        }),
        None => Err(BootstrapError::Protocol {
            op,
            detail: format!("cmd={} has no {key}", msg.cmd),
        }),
    }
}

/// Converts a server's rank or size to `u32`, refusing negatives.
pub(crate) fn to_u32(op: &'static str, what: &str, v: i64) -> Result<u32, BootstrapError> {
    u32::try_from(v).map_err(|_| BootstrapError::Protocol {
        op,
        detail: format!("{what}={v} is out of range"),
    })
}
