//! Settings of a message endpoint.

use std::time::Duration;

use super::error::Error;
use super::header::HEADER_LEN;
use crate::qp::ConnectOptions;

/// Settings of a message endpoint; each side keeps its own (the peer learns the receive ring's
/// shape from the [`Card`](super::Card)).
#[derive(Debug, Clone)]
pub struct Config {
    /// Receive buffers posted for the peer (its credits). With a shared
    /// [`ReceivePool`](super::ReceivePool) the peer's window of credits, the buffers coming
    /// from the pool.
    pub recv_buffers: u32,
    /// Buffers of a [`ReceivePool`](super::ReceivePool) made with these settings (shared by all
    /// its endpoints; unused by an endpoint with a receive ring of its own).
    pub pool_buffers: u32,
    /// Bytes of each receive buffer and send slot, header included.
    pub buffer_bytes: u32,
    /// Registered send slots (sends in flight at once).
    pub send_slots: u32,
    /// Longest message accepted or sent.
    pub max_message: usize,
    /// A peer that stops acknowledging for about this long fails the connection (the endpoint's
    /// own limit on sends outstanding without any completing; it also sets the queue pair's
    /// ACK timeout, see [`Config::connect_options`]).
    pub peer_timeout: Duration,
    /// After this long without a send, the endpoint sends a keepalive so a dead peer shows.
    pub keepalive: Duration,
    /// Polls of the completion queue `wait` spends before it sleeps on the channel.
    pub spin: u32,
    /// Port of the device.
    pub port: u8,
    /// GID index; `None` chooses one (see `Context::choose_gid`).
    pub gid_index: Option<u32>,
    /// Pieces of one-sided operations (RDMA READ / WRITE) in flight at once; the send queue
    /// has room for them on top of the send slots.
    pub rdma_ops: u32,
    /// Largest piece of a one-sided operation in bytes (the port's largest message bounds it
    /// too).
    pub rdma_piece: usize,
    /// Bytes of idle registered buffers the endpoint's registration cache keeps.
    pub cache_bytes: usize,
    /// Send a whole message whose tag the peer has seen recently with a compact header (4
    /// bytes of immediate data) instead of the 16-byte header in the payload, so a message of
    /// up to the path MTU is one packet (see the wire protocol in [`crate::msg`]). A sender's
    /// choice: a receiver takes both forms.
    pub compact_headers: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            recv_buffers: 32,
            pool_buffers: 128,
            buffer_bytes: 64 << 10,
            send_slots: 32,
            max_message: 64 << 20,
            peer_timeout: Duration::from_secs(5),
            keepalive: Duration::from_millis(500),
            spin: 2000,
            port: 1,
            gid_index: None,
            rdma_ops: 16,
            rdma_piece: 4 << 20,
            cache_bytes: 64 << 20,
            compact_headers: true,
        }
    }
}

impl Config {
    /// Checks that the settings fit together.
    pub fn validate(&self) -> Result<(), Error> {
        if self.recv_buffers < 4 || self.recv_buffers > 4096 {
            return Err(Error::Config(format!(
                "recv_buffers {} must lie in 4..=4096",
                self.recv_buffers
            )));
        }
        if self.pool_buffers < 4 || self.pool_buffers > 16384 {
            return Err(Error::Config(format!(
                "pool_buffers {} must lie in 4..=16384",
                self.pool_buffers
            )));
        }
        if self.send_slots < 2 || self.send_slots > 4096 {
            return Err(Error::Config(format!(
                "send_slots {} must lie in 2..=4096",
                self.send_slots
            )));
        }
        if (self.buffer_bytes as usize) < HEADER_LEN + 64 || self.buffer_bytes > 16 << 20 {
            return Err(Error::Config(format!(
                "buffer_bytes {} must lie between {} and 16 MiB",
                self.buffer_bytes,
                HEADER_LEN + 64
            )));
        }
        if self.rdma_ops < 1 || self.rdma_ops > 1024 {
            return Err(Error::Config(format!(
                "rdma_ops {} must lie in 1..=1024",
                self.rdma_ops
            )));
        }
        if self.rdma_piece < 4096 || self.rdma_piece > 1 << 30 {
            return Err(Error::Config(format!(
                "rdma_piece {} must lie between 4 KiB and 1 GiB",
                self.rdma_piece
            )));
        }
        if self.max_message > u32::MAX as usize {
            return Err(Error::Config("max_message must fit in 32 bits".to_owned()));
        }
        if self.peer_timeout.is_zero() || self.keepalive.is_zero() {
            return Err(Error::Config(
                "peer_timeout and keepalive must be non-zero".to_owned(),
            ));
        }
        Ok(())
    }

    /// Queue pair reliability settings: 7 retries of an ACK timeout of 4.096 us * 2^t, an
    /// eighth of `peer_timeout` but at most 2^14 (67 ms, perftest's), so a lost packet is sent
    /// again soon and a silent peer shows as retry exceeded within `peer_timeout`.
    ///
    /// The cap is what a lossy link needs: soft-RoCE sends a lost packet again only when this
    /// timeout expires where nothing after it arrives (the tail of an RDMA READ's burst of
    /// responses, dropped by a full receive backlog of the kernel). Between two soft-RoCE
    /// devices joined by a veth pair, the agent's 4 MiB reads streamed at 5.7 MB/s with 2^15
    /// (134 ms), 8.9 MB/s with 2^14, where `ib_read_bw` gave 8.2 (`docs/perf/cluster.md`). The
    /// process's own liveness is the agent's heartbeat's matter, not this timeout's: a
    /// stopped process's NIC still acknowledges.
    pub fn connect_options(&self) -> ConnectOptions {
        let retries = 7u32;
        let per_try = self.peer_timeout.as_secs_f64() / f64::from(retries + 1);
        let t = (per_try / 4.096e-6).log2().floor();
        let t = if t.is_finite() { t as i64 } else { 14 };
        ConnectOptions {
            timeout: t.clamp(8, 14) as u8,
            retry_count: retries as u8,
            // Credits keep the peer's receive queue from running dry, so receiver-not-ready
            // never lasts; a finite count makes a flow-control fault visible instead of a hang.
            rnr_retry: 6,
            ..ConnectOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_timeouts_scale() {
        let c = Config::default();
        c.validate().unwrap();
        let five = c.connect_options().timeout;
        let short = Config {
            peer_timeout: Duration::from_millis(200),
            ..Config::default()
        }
        .connect_options()
        .timeout;
        assert!(short < five, "{short} vs {five}");
        assert!(
            Config {
                recv_buffers: 1,
                ..Config::default()
            }
            .validate()
            .is_err()
        );
    }
}
