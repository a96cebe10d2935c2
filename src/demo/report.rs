//! What a demo run measured and checked, and how it is printed.

use serde::{Deserialize, Serialize};

/// Ping-pong latency at one size: half the round trip.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Latency {
    /// Message size in bytes.
    pub size: usize,
    /// Timed round trips.
    pub iters: u64,
    /// Median half round trip, microseconds.
    pub median_us: f64,
    /// How the two ends waited: `busy-poll`, or `method wait` (spin, then sleep in the
    /// method's futex or `io_uring_enter`).
    #[serde(default)]
    pub waiting: String,
}

/// Streaming bandwidth at one size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bandwidth {
    /// Message size in bytes.
    pub size: usize,
    /// Messages delivered.
    pub messages: u64,
    /// Bytes per second / 1e9.
    pub gbytes_per_s: f64,
}

/// A timed, checked collective.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Collective {
    /// Payload bytes per rank.
    pub bytes: usize,
    /// Times it ran (every result checked).
    pub iters: u32,
    /// Mean time per call on rank 0, microseconds.
    pub mean_us: f64,
}

/// The tour over one method.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MethodReport {
    /// `shm` or `tcp`.
    pub method: String,
    /// How long messages travel.
    pub note: String,
    /// Time to connect every rank to every other, milliseconds (rank 0).
    pub connect_ms: f64,
    /// Ping-pong between ranks 0 and 1, busy-polling.
    pub latency: Vec<Latency>,
    /// Stream from rank 0 to rank 1.
    pub bandwidth: Vec<Bandwidth>,
    /// Sum of a vector of f64 over all ranks.
    pub allreduce: Collective,
    /// A buffer from rank 0 to every rank.
    pub broadcast: Collective,
}

/// The nonblocking file I/O stage.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileReport {
    /// The files written, one per rank.
    pub files: Vec<String>,
    /// Bytes each rank wrote.
    pub bytes_per_rank: u64,
    /// Write requests each rank had in flight at once.
    pub requests_per_rank: u32,
    /// Allreduces every rank completed while its writes were in flight (sum over ranks).
    pub allreduces_during_writes: u64,
    /// Time from the first write to the completed sync on rank 0, milliseconds.
    pub write_ms: f64,
    /// Every rank read its file back and found what it wrote.
    pub verified: bool,
}

/// The handler stage.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HandlerReport {
    /// The deadline the handler was posted with, milliseconds after completion.
    pub deadline_ms: f64,
    /// From the request's completion to the handler's start, microseconds (rank 0).
    pub delay_us: f64,
    /// Largest such delay over all ranks, microseconds.
    pub max_delay_us: f64,
    /// A second posting with a deadline that had passed before completion ran its failure
    /// function instead (on every rank).
    pub missed_deadline_failure_ran: bool,
}

/// The round through the communication agent (tagged messages, VCs, matching).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentReport {
    /// The method the agent picked between ranks 0 and 1.
    pub method: String,
    /// 8-byte tagged ping-pong between ranks 0 and 1 (rank 0's figure).
    pub latency: Option<Latency>,
    /// The agent's allreduce (`Comm::allreduce`, xfer blocks).
    pub allreduce: Collective,
    /// The agent's broadcast (`Comm::bcast`, xfer blocks).
    pub broadcast: Collective,
    /// A handler posted on a receive request started within its deadline.
    pub receive_handler_on_time: bool,
    /// That deadline, milliseconds after completion.
    pub deadline_ms: f64,
}

/// Verbs ping-pong latency, where an RDMA device exists.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VerbsReport {
    /// The device used.
    pub device: String,
    /// Message size in bytes.
    pub size: usize,
    /// Median half round trip, microseconds.
    pub median_us: f64,
    /// The command that measured it.
    pub command: String,
}

/// Everything a demo run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Ranks in the job.
    pub ranks: u32,
    /// How the ranks found each other.
    pub bootstrap: String,
    /// One entry per method toured.
    pub methods: Vec<MethodReport>,
    /// The rounds through the communication agent, one per method.
    pub agent: Vec<AgentReport>,
    /// Nonblocking file I/O.
    pub file: FileReport,
    /// Handler with a deadline.
    pub handler: HandlerReport,
    /// Verbs, when a device exists.
    pub verbs: Option<VerbsReport>,
    /// Why verbs was left out, when it was.
    pub verbs_skipped: Option<String>,
    /// Wall-clock seconds of the whole run.
    pub seconds: f64,
}

fn size_name(b: usize) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

impl Report {
    /// The human summary: one table of figures, then the checks and where the files went.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let mut row = |what: &str, method: &str, figure: String, note: &str| {
            s.push_str(&format!("  {what:<34} {method:<6} {figure:>14}  {note}\n"));
        };
        for m in &self.methods {
            for l in &m.latency {
                row(
                    &format!("ping-pong latency {}", size_name(l.size)),
                    &m.method,
                    format!("{:.2} us", l.median_us),
                    &format!(
                        "median half round trip, {} round trips, {}",
                        l.iters, l.waiting
                    ),
                );
            }
            for b in &m.bandwidth {
                row(
                    &format!("bandwidth {}", size_name(b.size)),
                    &m.method,
                    format!("{:.2} GB/s", b.gbytes_per_s),
                    &format!("{} messages, rank 0 -> 1; {}", b.messages, m.note),
                );
            }
            row(
                &format!(
                    "allreduce {} x {} ranks",
                    size_name(m.allreduce.bytes),
                    self.ranks
                ),
                &m.method,
                format!("{:.1} us", m.allreduce.mean_us),
                &format!("mean of {}, every result checked", m.allreduce.iters),
            );
            row(
                &format!(
                    "broadcast {} to {} ranks",
                    size_name(m.broadcast.bytes),
                    self.ranks
                ),
                &m.method,
                format!("{:.1} us", m.broadcast.mean_us),
                &format!("mean of {}, every copy checked", m.broadcast.iters),
            );
            row(
                "connect all ranks",
                &m.method,
                format!("{:.1} ms", m.connect_ms),
                "full mesh through the launcher's key-value space",
            );
        }
        for a in &self.agent {
            let m = format!("agent/{}", a.method);
            if let Some(l) = &a.latency {
                row(
                    "tagged ping-pong latency 8 B",
                    &m,
                    format!("{:.2} us", l.median_us),
                    &format!(
                        "isend/irecv through the agent, {} round trips, {}",
                        l.iters, l.waiting
                    ),
                );
            }
            row(
                &format!(
                    "allreduce {} x {} ranks",
                    size_name(a.allreduce.bytes),
                    self.ranks
                ),
                &m,
                format!("{:.1} us", a.allreduce.mean_us),
                &format!(
                    "Comm::allreduce (xfer blocks), mean of {}, every result checked",
                    a.allreduce.iters
                ),
            );
            row(
                &format!(
                    "broadcast {} to {} ranks",
                    size_name(a.broadcast.bytes),
                    self.ranks
                ),
                &m,
                format!("{:.1} us", a.broadcast.mean_us),
                &format!(
                    "Comm::bcast (xfer blocks), mean of {}, every copy checked",
                    a.broadcast.iters
                ),
            );
            row(
                "handler on a receive request",
                &m,
                if a.receive_handler_on_time {
                    "on time"
                } else {
                    "LATE"
                }
                .to_string(),
                &format!("deadline {:.0} ms after the message arrived", a.deadline_ms),
            );
        }
        if let Some(v) = &self.verbs {
            row(
                &format!("ping-pong latency {}", size_name(v.size)),
                "verbs",
                format!("{:.2} us", v.median_us),
                &format!("RC SEND on {}, 2 processes: {}", v.device, v.command),
            );
        }
        let f = &self.file;
        row(
            "nonblocking file write + sync",
            "uring",
            format!("{:.1} ms", f.write_ms),
            &format!(
                "{} per rank in {} requests; {} allreduces ran meanwhile; read back: {}",
                size_name(f.bytes_per_rank as usize),
                f.requests_per_rank,
                f.allreduces_during_writes,
                if f.verified { "ok" } else { "MISMATCH" }
            ),
        );
        let h = &self.handler;
        row(
            "handler after completion",
            "-",
            format!("{:.0} us", h.delay_us),
            &format!(
                "deadline {:.0} ms, slowest rank {:.0} us; missed deadline ran failure fn: {}",
                h.deadline_ms,
                h.max_delay_us,
                if h.missed_deadline_failure_ran {
                    "yes"
                } else {
                    "NO"
                }
            ),
        );
        let mut out = format!(
            "viaduct demo: {} ranks ({}), {:.1} s\n\n  {:<34} {:<6} {:>14}  {}\n",
            self.ranks, self.bootstrap, self.seconds, "what", "method", "figure", "how"
        );
        out.push_str(&s);
        if let Some(why) = &self.verbs_skipped {
            out.push_str(&format!("\n  verbs: not run ({why})\n"));
        }
        out.push_str(
            "\nFiles written with nonblocking I/O (results and state, one of each per rank):\n",
        );
        for path in &f.files {
            out.push_str(&format!("  {path}\n"));
        }
        out.push_str(
            "\nLatency and bandwidth are single-run figures on a shared machine; \
             scripts/bench-peers compares them with peer tools.\n",
        );
        out
    }
}
