//! Settings of a TCP connection.

use std::time::Duration;

use super::error::Error;

/// Settings of a TCP connection; each side keeps its own.
#[derive(Debug, Clone)]
pub struct Config {
    /// Receive buffers in the provided-buffer ring (a power of two).
    pub recv_buffers: u16,
    /// Bytes of each receive buffer.
    pub recv_buffer_bytes: u32,
    /// Largest frame payload accepted or sent.
    pub max_frame: u32,
    /// Sends whose batch carries a payload of at least this many bytes use `SEND_ZC`
    /// (zero-copy); `usize::MAX` never does. See `docs/perf/methods.md` for the measurement
    /// behind the default.
    pub zero_copy_threshold: usize,
    /// Most frames gathered into one `sendmsg`.
    pub max_batch: usize,
    /// Most emulated RDMA operations outstanding at once.
    pub max_outstanding: usize,
    /// Unacknowledged data older than this kills the connection (`TCP_USER_TIMEOUT`); a peer
    /// that closed or died is noticed at once through the connection itself.
    pub peer_timeout: Duration,
    /// Sends a keepalive frame (an empty credit frame) after this long without a frame sent,
    /// from `poll` and `wait` (which wakes for it while it sleeps), so that
    /// the peer sees this end alive ([`Endpoint::peer_heard`](super::Endpoint::peer_heard))
    /// while it has nothing to send. `None` (the default) sends none.
    pub keepalive: Option<Duration>,
    /// Whether `wait` polls the completion queue for a while before it sleeps in the kernel.
    pub busy_poll: bool,
    /// Polls of the completion queue `wait` spends before it sleeps (with `busy_poll`); with
    /// [`Config::immediate_io`] every eighth also tries the socket with a `recv`.
    pub spin: u32,
    /// Submission queue entries of the connection's ring.
    pub ring_entries: u32,
    /// Limit for connecting and for the handshake.
    pub connect_timeout: Duration,
    /// The endpoint is created and used by one thread only (the one that calls
    /// [`connect`](super::connect) or [`Listener::accept`](super::Listener::accept)): its ring is
    /// set up single-issuer with deferred task work
    /// ([`RingConfig::single_issuer`](crate::uring::RingConfig::single_issuer)), which makes
    /// receives cheaper to complete (measured: 3 % of a 64-byte ping-pong). A call from another
    /// thread is refused before it reaches the ring, with an error that says so
    /// ([`UringError::NotIssuer`](crate::uring::UringError::NotIssuer)); the connection and its
    /// descriptors are left as they were (`poll` there finds nothing). Off by default (the
    /// agent's endpoints serve every thread of a rank); [`pair`](super::pair) refuses it.
    pub single_issuer: bool,
    /// Moves bytes with plain non-blocking socket calls where the data or the room is already
    /// there, and uses the ring only for what has to wait (the default). A batch of frames
    /// (not zero-copy, at most 64 KiB) first tries one `send`/`sendmsg` with `MSG_DONTWAIT`
    /// (a copying post with nothing queued before it, at once, without queue or batch); what
    /// the socket does not take goes on through the ring in order. Receives are
    /// `recv(MSG_DONTWAIT)` calls into the endpoint's own receive buffers made by `next`,
    /// `poll` and `wait`; `wait` arms a one-shot readiness poll in the ring before it sleeps.
    /// A receive that waits for the ring's task work costs an interrupt of the receiving thread
    /// and a completion, a send a ring submission and completion; the plain calls cost a
    /// syscall each, as for any socket program (a 64-byte busy ping-pong: 5.5 us through the
    /// ring, about 4.1 us with plain calls, as sockperf). Bytes stay in the kernel's socket
    /// buffer until the endpoint is called. `false`: every send and receive goes through the
    /// ring (a multishot receive into the provided-buffer ring, which keeps draining the socket
    /// while the owner does not call the endpoint).
    pub immediate_io: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            recv_buffers: 64,
            recv_buffer_bytes: 64 << 10,
            max_frame: 64 << 20,
            zero_copy_threshold: usize::MAX,
            max_batch: 64,
            max_outstanding: 64,
            peer_timeout: Duration::from_secs(5),
            keepalive: None,
            busy_poll: true,
            spin: 20_000,
            ring_entries: 64,
            connect_timeout: Duration::from_secs(5),
            single_issuer: false,
            immediate_io: true,
        }
    }
}

impl Config {
    /// Bytes the peer may have in flight towards this side: three quarters of the receive
    /// buffers, leaving room for replies and credit frames, which are not counted.
    pub fn window(&self) -> usize {
        self.recv_buffers as usize * self.recv_buffer_bytes as usize / 4 * 3
    }

    /// Checks that the settings fit together.
    pub fn validate(&self) -> Result<(), Error> {
        if !self.recv_buffers.is_power_of_two() || self.recv_buffers < 4 {
            return Err(Error::Config(format!(
                "recv_buffers {} must be a power of two, at least 4",
                self.recv_buffers
            )));
        }
        if self.recv_buffer_bytes < 4096 {
            return Err(Error::Config(
                "recv_buffer_bytes must be at least 4096".into(),
            ));
        }
        if self.max_batch == 0 || self.max_batch > 256 || self.max_outstanding == 0 {
            return Err(Error::Config(
                "max_batch must lie in 1..=256 and max_outstanding be non-zero".into(),
            ));
        }
        if self.keepalive.is_some_and(|k| k.is_zero()) {
            return Err(Error::Config("keepalive must be non-zero".into()));
        }
        if self.peer_timeout.is_zero() || self.ring_entries < 8 {
            return Err(Error::Config(
                "peer_timeout must be non-zero, ring_entries >= 8".into(),
            ));
        }
        Ok(())
    }
}
