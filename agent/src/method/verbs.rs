//! The verbs method: one RC queue pair per peer through `viaduct_verbs::msg`.
//!
//! A rank whose node has an RDMA device with an active port prepares one message endpoint
//! (queue pair, receive ring, send slots) per peer before the business-card round and
//! publishes its card; after the fence each pair that both published cards connects the two
//! queue pairs, and the job-key handshake runs over the new connection as for the other
//! methods. Messages that fit one receive buffer are shown in place in the registered buffer;
//! longer ones are reassembled once, by the method (see [`viaduct_verbs::msg`]). The data of a
//! rendezvous message does not travel as messages at all: the receiver RDMA-READs it from a
//! registered buffer of the sender (see [`super::rndv`]); the piecewise `DATA` protocol is left
//! for a sender that cannot register a buffer.

use viaduct_verbs::msg;
use viaduct_verbs::{Context, PortState, device};

use crate::config::Config;

/// The message-endpoint settings the agent uses.
pub(crate) fn verbs_config(config: &Config, port: u8) -> msg::Config {
    msg::Config {
        port,
        peer_timeout: config.peer_timeout,
        keepalive: (config.peer_timeout / 4).max(std::time::Duration::from_millis(10)),
        // The agent spins itself (see `progress`); a method wait is only entered to sleep.
        spin: 0,
        // Rendezvous pieces (the longest messages the agent posts) with their header fit.
        max_message: msg::Config::default()
            .max_message
            .max(config.rendezvous_chunk + 4096),
        ..msg::Config::default()
    }
}

/// The message-endpoint settings for a rank with `peers` verbs peers, and the shared receive
/// pool its endpoints draw from, of `config.verbs_recv_pool` buffers. `None` gives a ring per
/// peer: as `config.verbs_recv_pool` 0 asks; where the peers' rings together would hold no
/// more buffers than the pool (with the default 64 and windows of 32: up to 2 peers), since a
/// pool then saves no memory and costs time (through soft-RoCE, an 8-byte ping-pong of the
/// agent took 1.21-1.66x the raw method's with the pool, 0.97-1.03x with rings; a shared
/// receive queue is one more queue, and lock, between the wire and the buffer); or where the
/// device cannot make a shared receive queue.
pub(crate) fn receive_pool(
    ctx: &Context,
    config: &Config,
    port: u8,
    peers: usize,
) -> (msg::Config, Option<msg::ReceivePool>) {
    let mut c = verbs_config(config, port);
    if config.verbs_recv_pool == 0 {
        return (c, None);
    }
    let windows = u32::try_from(peers)
        .unwrap_or(u32::MAX)
        .saturating_mul(c.recv_buffers);
    if windows <= config.verbs_recv_pool {
        return (c, None);
    }
    c.pool_buffers = config.verbs_recv_pool.max(4);
    // A device without shared receive queues still serves with a ring per peer.
    match msg::ReceivePool::new(ctx, &c) {
        Ok(pool) => (c, Some(pool)),
        Err(_) => (c, None),
    }
}

/// Opens the RDMA device the agent uses: `config.rdma_device` when set, else the first
/// device with an active port; returns it with its first active port. `Err` says why there is
/// none, in words.
pub(crate) fn open_device(config: &Config) -> Result<(Context, u8), String> {
    let devices = match device::list() {
        Ok(d) => d,
        Err(e) => return Err(format!("listing RDMA devices failed: {e}")),
    };
    if devices.is_empty() {
        return Err("no RDMA device on this node".to_owned());
    }
    let active = |d: &viaduct_verbs::DeviceInfo| {
        d.ports
            .iter()
            .any(|p| p.attributes.state == PortState::Active)
    };
    let chosen = match &config.rdma_device {
        Some(name) => match devices.iter().find(|d| &d.name == name) {
            Some(d) if active(d) => d,
            Some(_) => return Err(format!("RDMA device {name} has no active port")),
            None => {
                let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
                return Err(format!(
                    "no RDMA device named {name} (present: {})",
                    names.join(", ")
                ));
            }
        },
        None => match devices.iter().find(|d| active(d)) {
            Some(d) => d,
            None => {
                let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
                return Err(format!(
                    "no RDMA device with an active port (present: {})",
                    names.join(", ")
                ));
            }
        },
    };
    let port = chosen
        .ports
        .iter()
        .find(|p| p.attributes.state == PortState::Active)
        .map_or(1, |p| p.attributes.number);
    Context::open(&chosen.name)
        .map(|c| (c, port))
        .map_err(|e| format!("opening RDMA device {}: {e}", chosen.name))
}
