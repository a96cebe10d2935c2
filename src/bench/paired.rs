//! `viaduct bench latency --against-raw`: the agent's tagged ping-pong and the raw method's
//! ping-pong between the same two processes, interleaved in blocks, so that both see the same
//! cores, buffers and phase of the machine.
//!
//! The two ranks (started by `viaduct launch`) connect a second, raw endpoint of the method
//! their VC uses (shared memory: a `shm::Listener` socket in the temporary directory; TCP: a
//! listener on 127.0.0.1, both with the settings of `viaduct bench method --mode busy`; verbs:
//! a `viaduct_verbs::msg` endpoint, the agent's verbs method, on the agent's device). For each
//! size, after a warm-up of each, rank 0 times [`BLOCKS`] rounds; each round runs one block of
//! round trips of the raw method and one of the agent, the order alternating from round to
//! round. Both use the same buffers in the same roles, as `viaduct bench method` does: rank 0
//! sends from one buffer and takes the echo into another; rank 1 takes the message into a
//! third and sends it back from there (raw: copied out of the method's memory; agent: a
//! blocking `recv`, then a blocking `send`). Where a buffer starts within a cache line moves a
//! 4 KiB figure by about 5 %, so sharing them keeps that out of the ratio.
//!
//! Reported per size: both medians (over batches of round trips, see `clock`) and the ratio
//! agent / raw, as the ratio of the medians and as the median of the per-round ratios.

use std::error::Error;
use std::time::Duration;

use viaduct_agent::agent::Agent;
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_fallback::{shm, tcp};

use super::clock::{self, TickRate, ticks};
use super::method::{Link, Mode, Scratch, ping, pong};

type BoxError = Box<dyn Error>;

/// Rounds of interleaved blocks per size.
pub const BLOCKS: u32 = 21;
/// Untimed round trips of each variant before a size's rounds.
const WARMUP: u32 = 500;
/// Tag of the agent's ping-pong messages.
const TAG: u32 = 1;
/// Tag of the set-up message carrying the raw endpoint's address.
const SETUP_TAG: u32 = 2;

/// The ping-pong variants, in the order of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// The method's own ping-pong (`viaduct bench method`).
    Raw,
    /// The agent's blocking `send` and `recv`.
    Agent,
}

const VARIANTS: [Variant; 2] = [Variant::Raw, Variant::Agent];

/// One size's result, half round trips in microseconds.
#[derive(Debug, Clone)]
pub struct Paired {
    /// Message size in bytes.
    pub size: usize,
    /// Median of the raw method.
    pub raw: f64,
    /// Median of the agent.
    pub agent: f64,
    /// Median over rounds of agent / raw.
    pub round_ratio: f64,
}

impl Paired {
    /// Prints the result: a line of text, or one JSON object.
    pub fn print(&self, method: &str, json: bool) {
        let ratio = self.agent / self.raw;
        if json {
            println!(
                "{}",
                serde_json::json!({"bench": "agent-vs-raw", "transport": method,
                    "size": self.size, "raw_us": round4(self.raw),
                    "agent_us": round4(self.agent), "ratio": round4(ratio),
                    "round_ratio": round4(self.round_ratio)})
            );
        } else {
            println!(
                "agent vs raw over {method}: {:>7} B  raw {:.4} us  agent {:.4} us  agent / raw {ratio:.3} (per round {:.3})",
                self.size, self.raw, self.agent, self.round_ratio
            );
        }
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// Connects the raw endpoint beside the agent's VC (`method`: the VC's method name).
fn connect_raw(agent: &Agent, method: &str) -> Result<Box<dyn Link>, BoxError> {
    let me = agent.rank();
    let shm_config = shm::Config::default;
    let tcp_config = || tcp::Config {
        busy_poll: true,
        ..tcp::Config::default()
    };
    match (method, me) {
        ("shm", 1) => {
            let path = std::env::temp_dir().join(format!("viaduct-paired-{}", std::process::id()));
            let listener = shm::Listener::bind(&path)?;
            agent.send(0, SETUP_TAG, path.to_string_lossy().as_bytes())?;
            Ok(Box::new(listener.accept(shm_config())?))
        }
        ("shm", _) => {
            let path = String::from_utf8(recv_setup(agent, 1)?)?;
            Ok(Box::new(shm::connect(path, shm_config())?))
        }
        ("tcp", 1) => {
            let listener = tcp::Listener::bind("127.0.0.1:0".parse()?)?;
            let addr = listener.local_addr()?.to_string();
            agent.send(0, SETUP_TAG, addr.as_bytes())?;
            Ok(Box::new(listener.accept(tcp_config())?))
        }
        ("tcp", _) => {
            let addr = String::from_utf8(recv_setup(agent, 1)?)?;
            Ok(Box::new(tcp::connect(addr.parse()?, tcp_config())?))
        }
        #[cfg(feature = "rdma")]
        ("verbs", _) => verbs::connect(agent),
        (other, _) => Err(format!(
            "--against-raw needs a shm, tcp or verbs VC between the ranks, not {other}"
        )
        .into()),
    }
}

/// The raw verbs method: the message endpoint (`viaduct_verbs::msg`) the agent's verbs VCs
/// use, on the agent's device, connected by a card exchange over the agent.
#[cfg(feature = "rdma")]
mod verbs {
    use super::{BoxError, Link, recv_setup};
    use viaduct_agent::agent::Agent;
    use viaduct_verbs::PortState;
    use viaduct_verbs::device::{self, Context};
    use viaduct_verbs::msg::{self, Card, Prepared};

    /// Opens the agent's device (`VIADUCT_RDMA_DEVICE`, else the first with an active port),
    /// prepares an endpoint on its first active port, swaps cards with the peer and connects.
    pub(super) fn connect(agent: &Agent) -> Result<Box<dyn Link>, BoxError> {
        let devices = device::list()?;
        let info = devices
            .iter()
            .filter(|d| {
                agent
                    .config()
                    .rdma_device
                    .as_ref()
                    .is_none_or(|n| *n == d.name)
            })
            .find(|d| {
                d.ports
                    .iter()
                    .any(|p| p.attributes.state == PortState::Active)
            })
            .ok_or("no RDMA device with an active port for the raw endpoint")?;
        let port = info
            .ports
            .iter()
            .find(|p| p.attributes.state == PortState::Active)
            .map(|p| p.attributes.number)
            .ok_or("no active port")?;
        let ctx = Context::open(&info.name)?;
        let prepared = Prepared::new(
            &ctx,
            msg::Config {
                port,
                ..msg::Config::default()
            },
        )?;
        let peer = 1 - agent.rank();
        agent.send(peer, super::SETUP_TAG, &prepared.card().to_bytes())?;
        let card = Card::from_bytes(&recv_setup(agent, peer)?)?;
        Ok(Box::new(prepared.connect(&card)?))
    }
}

/// The set-up message from `from`.
fn recv_setup(agent: &Agent, from: u32) -> Result<Vec<u8>, BoxError> {
    let mut buf = vec![0u8; 4096];
    let st = agent.recv(&mut buf, Source::Rank(from), TagMatch::Tag(SETUP_TAG))?;
    buf.truncate(st.count() as usize);
    Ok(buf)
}

/// The two ranks' state for the interleaved ping-pongs.
struct Pair<'a> {
    agent: &'a Agent,
    raw: Box<dyn Link>,
    peer: u32,
    client: bool,
    buf: Vec<u8>,
    echo: Vec<u8>,
    scratch: Vec<u8>,
    raw_scratch: Scratch,
    tag: u64,
}

impl Pair<'_> {
    /// Runs `n` round trips of `v`, returning each one's clock ticks (rank 0's are timed).
    fn block(&mut self, v: Variant, n: u32) -> Result<Vec<u64>, BoxError> {
        let mut out = Vec::with_capacity(n as usize);
        let from = (Source::Rank(self.peer), TagMatch::Tag(TAG));
        let mut prev = ticks();
        for _ in 0..n {
            match (v, self.client) {
                (Variant::Raw, true) => {
                    ping(
                        self.raw.as_mut(),
                        Mode::Busy,
                        self.tag,
                        &self.buf,
                        &mut self.echo,
                    )?;
                    self.tag += 1;
                }
                (Variant::Raw, false) => {
                    pong(self.raw.as_mut(), Mode::Busy, &mut self.raw_scratch)?
                }
                (Variant::Agent, true) => {
                    self.agent.send(self.peer, TAG, &self.buf)?;
                    self.agent.recv(&mut self.echo, from.0, from.1)?;
                }
                (Variant::Agent, false) => {
                    // Replies from its own buffer, as the raw server does.
                    self.agent.recv(&mut self.scratch, from.0, from.1)?;
                    self.agent.send(self.peer, TAG, &self.buf)?;
                }
            }
            let now = ticks();
            out.push(now.wrapping_sub(prev));
            prev = now;
        }
        Ok(out)
    }
}

/// Runs the interleaved ping-pongs for every size; rank 0 gets the results, rank 1 an empty
/// list. `iters`: timed round trips of each variant per size.
pub fn run(agent: &Agent, sizes: &[usize], iters: u32) -> Result<Vec<Paired>, BoxError> {
    let peer = 1 - agent.rank();
    let method = agent.method_of(peer).unwrap_or("none");
    let raw = connect_raw(agent, method)?;
    let mut pair = Pair {
        agent,
        raw,
        peer,
        client: agent.rank() == 0,
        buf: Vec::new(),
        echo: Vec::new(),
        scratch: Vec::new(),
        raw_scratch: Scratch::default(),
        tag: 0,
    };
    let per_block = (iters / BLOCKS).max(clock::BATCH as u32);
    let mut results = Vec::new();
    for &size in sizes {
        pair.buf = vec![0xA5; size];
        pair.echo = vec![0; size];
        pair.scratch = vec![0; size];
        for v in VARIANTS {
            pair.block(v, WARMUP)?;
        }
        let probe = TickRate::start();
        // Per variant: every round's ticks.
        let mut rounds: [Vec<Vec<u64>>; 2] = Default::default();
        for round in 0..BLOCKS as usize {
            for k in 0..VARIANTS.len() {
                let i = (round + k) % VARIANTS.len();
                rounds[i].push(pair.block(VARIANTS[i], per_block)?);
            }
        }
        let rate = probe.finish(Duration::from_millis(100));
        if pair.client {
            results.push(summarize(size, &rounds, &rate));
        }
    }
    Ok(results)
}

fn summarize(size: usize, rounds: &[Vec<Vec<u64>>; 2], rate: &TickRate) -> Paired {
    let us = |t: &[u64]| -> Vec<f64> { t.iter().map(|&x| rate.to_us(x) / 2.0).collect() };
    let median = |rs: &[Vec<u64>]| {
        let all: Vec<f64> = rs.iter().flat_map(|r| us(r)).collect();
        clock::median_of_batches(&all).unwrap_or(f64::NAN)
    };
    let per_round = |rs: &[Vec<u64>]| -> Vec<f64> {
        rs.iter()
            .map(|r| clock::median_of_batches(&us(r)).unwrap_or(f64::NAN))
            .collect()
    };
    let mut ratios: Vec<f64> = per_round(&rounds[1])
        .iter()
        .zip(per_round(&rounds[0]))
        .map(|(a, b)| a / b)
        .collect();
    ratios.sort_by(f64::total_cmp);
    Paired {
        size,
        raw: median(&rounds[0]),
        agent: median(&rounds[1]),
        round_ratio: ratios
            .get(ratios.len().saturating_sub(1) / 2)
            .copied()
            .unwrap_or(f64::NAN),
    }
}
