//! Authenticating a fresh method connection with the job key, in-band.
//!
//! The methods set their connections up themselves (socket, segment, window exchange), so the
//! job-key challenge of [`crate::bootstrap::auth`] runs over the new connection as its first
//! messages, before the agent sends anything else on it. A peer that fails it is dropped (its
//! connection closed) and the refusal is logged with the claimed rank.
//!
//! Over shared memory the handshake runs on the set-up socket instead, before the segment
//! exists ([`connector_socket`], [`acceptor_socket`]), so nothing is handed to a peer that has
//! not proved it holds the key.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use crate::bootstrap::JobKey;
use crate::bootstrap::auth::{self, AuthError};
use crate::method::Method;

/// Descriptor id used by handshake messages (never used by the agent's traffic).
const HANDSHAKE_ID: u64 = u64::MAX;
/// Method tag of handshake messages.
const HANDSHAKE_TAG: u64 = (crate::wire::Kind::Handshake as u64) << 56;

/// A byte stream over a method connection, for the handshake only.
struct MethodStream<'a> {
    method: &'a mut Method,
    deadline: Instant,
}

fn timeout_err() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "handshake timed out")
}

fn method_err(e: crate::method::MethodError) -> io::Error {
    let kind = if e.is_peer_failure() {
        io::ErrorKind::UnexpectedEof
    } else {
        io::ErrorKind::Other
    };
    io::Error::new(kind, e)
}

impl MethodStream<'_> {
    fn pause(&mut self) -> io::Result<()> {
        let now = Instant::now();
        if now >= self.deadline {
            return Err(timeout_err());
        }
        let left = (self.deadline - now).min(Duration::from_millis(10));
        self.method.wait(left).map_err(method_err)
    }

    /// Reaps handshake send completions (they carry no state).
    fn reap(&mut self) -> io::Result<()> {
        while let Some((_, result)) = self.method.poll() {
            result.map_err(method_err)?;
        }
        Ok(())
    }
}

impl Read for MethodStream<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            self.reap()?;
            let n = match self.method.next().map_err(method_err)? {
                Some((_, data)) => {
                    let n = data.len().min(out.len());
                    out[..n].copy_from_slice(&data[..n]);
                    n
                }
                None => {
                    self.pause()?;
                    continue;
                }
            };
            self.method.consume(n).map_err(method_err)?;
            return Ok(n);
        }
    }
}

impl Write for MethodStream<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        loop {
            self.reap()?;
            if self
                .method
                .post_copy(HANDSHAKE_ID, HANDSHAKE_TAG, data)
                .map_err(method_err)?
            {
                return Ok(data.len());
            }
            self.pause()?;
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.reap()
    }
}

/// A set-up socket with one deadline for the whole handshake (a peer that sends a byte now
/// and then still has to finish by it).
struct SocketStream<'a> {
    sock: &'a mut UnixStream,
    deadline: Instant,
}

impl SocketStream<'_> {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timeout_err());
        }
        Ok(left)
    }
}

fn timed_out(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => timeout_err(),
        _ => e,
    }
}

impl Read for SocketStream<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.sock.set_read_timeout(Some(left))?;
        self.sock.read(out).map_err(timed_out)
    }
}

impl Write for SocketStream<'_> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.sock.set_write_timeout(Some(left))?;
        self.sock.write(data).map_err(timed_out)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// [`connector`] over a set-up socket, before the method connection exists.
pub(crate) fn connector_socket(
    sock: &mut UnixStream,
    key: &JobKey,
    my_rank: u32,
    limit: Duration,
) -> Result<(), AuthError> {
    let mut s = SocketStream {
        sock,
        deadline: Instant::now() + limit,
    };
    auth::connect(&mut s, key, my_rank)
}

/// [`acceptor`] over a set-up socket, before the method connection exists.
pub(crate) fn acceptor_socket(
    sock: &mut UnixStream,
    key: &JobKey,
    what: &str,
    limit: Duration,
) -> Result<u32, AuthError> {
    let mut s = SocketStream {
        sock,
        deadline: Instant::now() + limit,
    };
    auth::accept(&mut s, key, what)
}

/// Proves to the accepting peer that this rank holds `key` (connector side).
pub(crate) fn connector(
    method: &mut Method,
    key: &JobKey,
    my_rank: u32,
    limit: Duration,
) -> Result<(), AuthError> {
    let mut s = MethodStream {
        method,
        deadline: Instant::now() + limit,
    };
    auth::connect(&mut s, key, my_rank)
}

/// Challenges the connecting peer; returns the rank it proved to be (acceptor side). Refusals
/// are written to standard error.
pub(crate) fn acceptor(
    method: &mut Method,
    key: &JobKey,
    what: &str,
    limit: Duration,
) -> Result<u32, AuthError> {
    let mut s = MethodStream {
        method,
        deadline: Instant::now() + limit,
    };
    auth::accept(&mut s, key, what)
}

#[cfg(test)]
mod tests {
    use super::*;
    use viaduct_fallback::{shm, tcp};

    fn both(
        a: Method,
        b: Method,
        key_a: JobKey,
        key_b: JobKey,
    ) -> (Result<u32, AuthError>, Result<(), AuthError>) {
        let limit = Duration::from_secs(5);
        let mut b = b;
        let t = std::thread::spawn(move || connector(&mut b, &key_b, 3, limit));
        let mut a = a;
        let got = acceptor(&mut a, &key_a, "test peer", limit);
        // The acceptor drops its end on refusal, as the agent does.
        drop(a);
        (got, t.join().unwrap())
    }

    #[test]
    fn same_key_is_accepted_over_tcp_and_shm() {
        let k = JobKey::from_bytes([7; 32]);
        let (a, b) = tcp::pair(tcp::Config::default()).unwrap();
        let (acc, con) = both(
            Method::Tcp(Box::new(a)),
            Method::Tcp(Box::new(b)),
            k.clone(),
            k.clone(),
        );
        assert_eq!(acc.unwrap(), 3);
        con.unwrap();
        let (a, b) = shm::pair(shm::Config::default()).unwrap();
        let (acc, con) = both(
            Method::Shm(Box::new(a)),
            Method::Shm(Box::new(b)),
            k.clone(),
            k,
        );
        assert_eq!(acc.unwrap(), 3);
        con.unwrap();
    }

    #[test]
    fn stranger_is_refused_over_tcp_and_shm() {
        let k = JobKey::from_bytes([7; 32]);
        let stranger = JobKey::from_bytes([8; 32]);
        let (a, b) = tcp::pair(tcp::Config::default()).unwrap();
        let (acc, con) = both(
            Method::Tcp(Box::new(a)),
            Method::Tcp(Box::new(b)),
            k.clone(),
            stranger.clone(),
        );
        assert!(
            matches!(acc, Err(AuthError::StrangerConnector { claimed_rank: 3 })),
            "{acc:?}"
        );
        assert!(con.is_err());
        let (a, b) = shm::pair(shm::Config::default()).unwrap();
        let (acc, con) = both(
            Method::Shm(Box::new(a)),
            Method::Shm(Box::new(b)),
            k,
            stranger,
        );
        assert!(
            matches!(acc, Err(AuthError::StrangerConnector { claimed_rank: 3 })),
            "{acc:?}"
        );
        assert!(con.is_err());
    }
}
