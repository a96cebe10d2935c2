//! Settings of the agent: which methods it may use, in which order, and its protocol and
//! progress limits.
//!
//! [`Config::from_env`] reads the defaults from the environment, like UCX's `UCX_TLS`:
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `VIADUCT_TRANSPORT` | comma-separated methods in order of preference (`shm`, `tcp`, `verbs`; `self` is always used for the own rank) | `shm,tcp` |
//! | `VIADUCT_EAGER_LIMIT` | messages up to this many bytes go eagerly, longer ones by rendezvous | 16320 |
//! | `VIADUCT_PEER_TIMEOUT` | seconds after which a silent or dead peer fails every request on its VC | 5 |
//! | `VIADUCT_CONNECT_TIMEOUT` | seconds allowed for connection set-up at start | 30 |
//! | `VIADUCT_XFER_CHUNK` | bytes of each piece of an xfer block's message (4096 to 4 MiB) | 16360 |
//! | `VIADUCT_RDMA_DEVICE` | the RDMA device the verbs method uses (e.g. `mlx5_0`, `rxe0`) | the first device with an active port |
//!
//! For each peer the agent takes the first listed method that can reach it: `shm` only on the
//! same node, `tcp` always, `verbs` where both sides have an active RDMA device (a rank learns
//! whether its peer has one from the peer's business card, so that choice is made after the
//! card exchange). A list that leaves some peer unreachable is an error
//! ([`AgentError::NoMethod`]) naming the peer and why each listed method cannot serve it, e.g.
//! `verbs` alone on a node without an RDMA device.

use std::time::Duration;

use crate::error::AgentError;

/// Environment variable listing the methods the agent may use.
pub const TRANSPORT_VAR: &str = "VIADUCT_TRANSPORT";
/// Environment variable with the eager limit in bytes.
pub const EAGER_LIMIT_VAR: &str = "VIADUCT_EAGER_LIMIT";
/// Environment variable with the peer timeout in seconds.
pub const PEER_TIMEOUT_VAR: &str = "VIADUCT_PEER_TIMEOUT";
/// Environment variable with the connection set-up limit in seconds.
pub const CONNECT_TIMEOUT_VAR: &str = "VIADUCT_CONNECT_TIMEOUT";
/// Environment variable with the piece size of xfer messages in bytes.
pub const XFER_CHUNK_VAR: &str = "VIADUCT_XFER_CHUNK";
/// Environment variable naming the RDMA device of the verbs method.
pub const RDMA_DEVICE_VAR: &str = "VIADUCT_RDMA_DEVICE";
/// Environment variable with the fewest progress polls a blocking call spins before it sleeps.
pub const SPIN_MIN_VAR: &str = "VIADUCT_SPIN_MIN";
/// Environment variable with the most progress polls a blocking call spins before it sleeps.
pub const SPIN_MAX_VAR: &str = "VIADUCT_SPIN_MAX";

/// A method a peer can be reached over (the own rank always uses the self loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MethodKind {
    /// Shared memory between processes of one node.
    Shm,
    /// TCP over io_uring.
    Tcp,
    /// RDMA verbs (InfiniBand, RoCE, soft-RoCE).
    Verbs,
}

impl MethodKind {
    /// The method's name as written in `VIADUCT_TRANSPORT`.
    pub fn name(self) -> &'static str {
        match self {
            MethodKind::Shm => "shm",
            MethodKind::Tcp => "tcp",
            MethodKind::Verbs => "verbs",
        }
    }
}

/// Settings of an [`Agent`](crate::agent::Agent).
#[derive(Debug, Clone)]
pub struct Config {
    /// Methods in order of preference.
    pub transports: Vec<MethodKind>,
    /// Largest payload sent eagerly (copied at once, buffered by the receiver if unexpected);
    /// longer messages wait for a matching receive (rendezvous).
    pub eager_limit: usize,
    /// Bytes of each piece of a rendezvous transfer (pieces are pipelined).
    pub rendezvous_chunk: usize,
    /// A dead or silent peer fails every request on its VC within about this long.
    pub peer_timeout: Duration,
    /// Limit on connection set-up at start.
    pub connect_timeout: Duration,
    /// Once unexpected eager messages from remote peers hold this many bytes, the agent stops
    /// reading from remote VCs until receives take some: senders then see back-pressure from
    /// their method instead of this rank's memory growing.
    pub max_unexpected_bytes: usize,
    /// Fewest progress polls a blocking progress call spins before it sleeps.
    pub spin_min: u32,
    /// Most progress polls a blocking progress call spins before it sleeps.
    pub spin_max: u32,
    /// How much the spin count grows after a spin that found work (and shrinks after one that
    /// did not).
    pub spin_increment: u32,
    /// The RDMA device of the verbs method; `None` takes the first device with an active port.
    pub rdma_device: Option<String>,
    /// Bytes of each piece of an xfer block's message: a forward passes piece k on as soon as it
    /// arrived, so smaller pieces pipeline sooner and larger ones cost less per byte.
    pub xfer_chunk: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            transports: vec![MethodKind::Shm, MethodKind::Tcp],
            eager_limit: 16 * 1024 - 64,
            rendezvous_chunk: 4 << 20,
            peer_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(30),
            max_unexpected_bytes: 256 << 20,
            spin_min: 16,
            spin_max: 4096,
            spin_increment: 64,
            rdma_device: None,
            // 16 KiB less the 24-byte piece header: a piece then fits the shared-memory
            // method's eager limit and goes through its ring in one copy. Measured against
            // 64 KiB and 256 KiB with `viaduct bench collective` (4 ranks, 1 MiB): the best
            // of the three for bcast and allreduce over both shm and tcp.
            xfer_chunk: (16 << 10) - 24,
        }
    }
}

fn bad(setting: &'static str, reason: impl Into<String>) -> AgentError {
    AgentError::Config {
        setting,
        reason: reason.into(),
    }
}

fn seconds(setting: &'static str, raw: &str) -> Result<Duration, AgentError> {
    raw.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e7)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            bad(
                setting,
                format!("{raw:?} is not a positive number of seconds"),
            )
        })
}

/// Parses a `VIADUCT_TRANSPORT` value: comma-separated method names, no duplicates.
pub fn parse_transports(raw: &str) -> Result<Vec<MethodKind>, AgentError> {
    let mut out = Vec::new();
    for name in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let kind = match name {
            "self" => continue,
            "shm" => MethodKind::Shm,
            "tcp" => MethodKind::Tcp,
            "verbs" | "rdma" | "rc" => MethodKind::Verbs,
            other => {
                return Err(bad(
                    TRANSPORT_VAR,
                    format!("unknown method {other:?} (known: self, shm, tcp, verbs)"),
                ));
            }
        };
        if out.contains(&kind) {
            return Err(bad(TRANSPORT_VAR, format!("method {name} is listed twice")));
        }
        out.push(kind);
    }
    if out.is_empty() && !raw.split(',').any(|n| n.trim() == "self") {
        return Err(bad(TRANSPORT_VAR, "no method listed"));
    }
    Ok(out)
}

fn polls(var: &'static str, v: &str) -> Result<u32, AgentError> {
    v.trim()
        .parse()
        .map_err(|_| bad(var, format!("{v:?} is not a number of polls")))
}

impl Config {
    /// The defaults, overridden by the `VIADUCT_*` variables of this process's environment.
    pub fn from_env() -> Result<Config, AgentError> {
        Self::from_vars(std::env::vars())
    }

    /// [`Config::from_env`] with the environment given as (name, value) pairs.
    pub fn from_vars<I, K, V>(vars: I) -> Result<Config, AgentError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut c = Config::default();
        for (k, v) in vars {
            let v = v.as_ref();
            match k.as_ref() {
                TRANSPORT_VAR => c.transports = parse_transports(v)?,
                EAGER_LIMIT_VAR => {
                    c.eager_limit = v.trim().parse().map_err(|_| {
                        bad(EAGER_LIMIT_VAR, format!("{v:?} is not a number of bytes"))
                    })?;
                }
                PEER_TIMEOUT_VAR => c.peer_timeout = seconds(PEER_TIMEOUT_VAR, v)?,
                CONNECT_TIMEOUT_VAR => c.connect_timeout = seconds(CONNECT_TIMEOUT_VAR, v)?,
                XFER_CHUNK_VAR => {
                    c.xfer_chunk = v.trim().parse().map_err(|_| {
                        bad(XFER_CHUNK_VAR, format!("{v:?} is not a number of bytes"))
                    })?;
                }
                RDMA_DEVICE_VAR => {
                    let name = v.trim();
                    c.rdma_device = (!name.is_empty()).then(|| name.to_owned());
                }
                SPIN_MIN_VAR => c.spin_min = polls(SPIN_MIN_VAR, v)?,
                SPIN_MAX_VAR => c.spin_max = polls(SPIN_MAX_VAR, v)?,
                _ => {}
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// Checks that the settings fit together.
    pub fn validate(&self) -> Result<(), AgentError> {
        if self.eager_limit > 64 << 10 {
            return Err(bad(
                "eager_limit",
                format!(
                    "{} exceeds the largest eager message of 65536 bytes",
                    self.eager_limit
                ),
            ));
        }
        if self.rendezvous_chunk < 4096 || self.rendezvous_chunk > 32 << 20 {
            return Err(bad("rendezvous_chunk", "must lie between 4 KiB and 32 MiB"));
        }
        if self.peer_timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(bad("peer_timeout", "timeouts must be non-zero"));
        }
        if !(4096..=4 << 20).contains(&self.xfer_chunk) {
            return Err(bad(
                "xfer_chunk",
                format!("{} must lie between 4 KiB and 4 MiB", self.xfer_chunk),
            ));
        }
        if self.spin_min > self.spin_max {
            return Err(bad(
                "spin_min",
                format!(
                    "{} exceeds spin_max {} ({SPIN_MIN_VAR}, {SPIN_MAX_VAR})",
                    self.spin_min, self.spin_max
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_lists() {
        assert_eq!(
            parse_transports("tcp, shm").unwrap(),
            vec![MethodKind::Tcp, MethodKind::Shm]
        );
        assert_eq!(parse_transports("self").unwrap(), vec![]);
        assert!(parse_transports("tcp,tcp").is_err());
        let e = parse_transports("udp").unwrap_err().to_string();
        assert!(e.contains("udp"), "{e}");
        assert!(parse_transports("").is_err());
    }

    #[test]
    fn env_overrides() {
        let c = Config::from_vars([
            (TRANSPORT_VAR, "tcp"),
            (PEER_TIMEOUT_VAR, "0.5"),
            (EAGER_LIMIT_VAR, "1024"),
        ])
        .unwrap();
        assert_eq!(c.transports, vec![MethodKind::Tcp]);
        assert_eq!(c.peer_timeout, Duration::from_millis(500));
        assert_eq!(c.eager_limit, 1024);
        assert!(Config::from_vars([(PEER_TIMEOUT_VAR, "-1")]).is_err());
        assert_eq!(c.rdma_device, None);
        let c =
            Config::from_vars([(TRANSPORT_VAR, "verbs,shm"), (RDMA_DEVICE_VAR, " rxe0 ")]).unwrap();
        assert_eq!(c.transports, vec![MethodKind::Verbs, MethodKind::Shm]);
        assert_eq!(c.rdma_device.as_deref(), Some("rxe0"));
        assert!(Config::from_vars([(EAGER_LIMIT_VAR, "1000000")]).is_err());
        assert_eq!(
            Config::from_vars([(XFER_CHUNK_VAR, "8192")])
                .unwrap()
                .xfer_chunk,
            8192
        );
        assert!(Config::from_vars([(XFER_CHUNK_VAR, "100")]).is_err());
        assert!(Config::from_vars([(XFER_CHUNK_VAR, "lots")]).is_err());
        let c = Config::from_vars([(SPIN_MIN_VAR, "100"), (SPIN_MAX_VAR, "200")]).unwrap();
        assert_eq!((c.spin_min, c.spin_max), (100, 200));
        let e = Config::from_vars([(SPIN_MIN_VAR, "5000")]).unwrap_err();
        assert!(e.to_string().contains("VIADUCT_SPIN_MIN"), "{e}");
        assert!(Config::from_vars([(SPIN_MAX_VAR, "many")]).is_err());
    }
}
