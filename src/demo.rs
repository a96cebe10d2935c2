//! `viaduct demo`: a short tour of what viaduct does on this machine.
//!
//! With no options it starts 4 local ranks through `viaduct launch` (the same launcher and PMI
//! bootstrap a user's job gets) and runs, once per method (shared memory and TCP):
//!
//! - ping-pong latency (8 B, 4 KiB) and streaming bandwidth (64 KiB, 1 MiB) between ranks 0
//!   and 1, while the other ranks sleep in a launcher fence. Shared memory busy-polls; TCP uses
//!   the method's own wait (spin, then `io_uring_enter`), which on a 2-core machine leaves the
//!   kernel's network work a core (`VIADUCT_DEMO_WAIT=busy|sleep` overrides both);
//! - an allreduce (sum of 1024 f64) and a broadcast (256 KiB) over all ranks, every result
//!   checked. These are the demo's own binomial-tree collectives written on point-to-point
//!   messages (see `collective`), not a collective library.
//!
//! Those rounds drive the methods' endpoints (`viaduct_fallback::{shm, tcp}`) directly,
//! connected as a full mesh through the launcher's key-value space. Then every rank writes its
//! results and an 8 MiB state file with nonblocking file I/O (io_uring) while it keeps running
//! allreduces, reads both back and checks them; and every rank posts a handler with a deadline
//! on a generalized request completed by a timer thread (plus one whose deadline passes on
//! purpose, whose failure function must run instead).
//!
//! Then one more job per method runs the same kind of traffic through the communication agent
//! (`Agent`: VCs, tagged matching, requests; `VIADUCT_TRANSPORT` picks its method): tagged
//! ping-pong, the agent's own collectives on a communicator (`Comm::allreduce` and
//! `Comm::bcast`, built from xfer blocks), and a handler with a deadline posted on a receive
//! request. Where an RDMA device exists (or inside `scripts/rxe-vm`), one more agent round runs
//! over the agent's verbs method (RC queue pairs), and `viaduct bench verbs-lat` measures raw
//! verbs ping-pong latency between two processes. (The first rounds drive the shm and TCP
//! endpoints directly; verbs has no such raw round.)
//!
//! It prints a line per stage while it runs, then a summary table (or JSON with `--json`) and
//! where the files went. Any failing part ends it with a non-zero exit and the ranks' errors.
//!
//! ```text
//! viaduct demo              # 4 ranks, table
//! viaduct demo --json       # one JSON object, for scripts
//! viaduct demo --quick -n 2 # shorter runs, 2 ranks
//! ```

mod collective;
mod error;
mod link;
mod mesh;
mod p2p;
mod report;
mod worker;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

pub use error::DemoError;
use mesh::Method;
use report::{Report, VerbsReport};

use crate::progress::Progress;

/// Options of `viaduct demo`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct demo\n  viaduct demo --json > demo.json\n  \
    viaduct demo --quick -n 2 --out /tmp/demo\n  mpiexec -n 4 viaduct demo --worker --out DIR  \
    (one rank per process, under another launcher)"
)]
pub struct Args {
    /// Number of local ranks to start.
    #[arg(short = 'n', long = "np", default_value_t = 4)]
    pub ranks: u32,
    /// Shorter measurements (about a fifth of the time).
    #[arg(long)]
    pub quick: bool,
    /// Print one JSON object instead of the table (progress goes to standard error).
    #[arg(long)]
    pub json: bool,
    /// Folder for the files the ranks write (default: a new folder under the temporary
    /// folder).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Methods to tour, comma separated (default: shm,tcp).
    #[arg(long, value_delimiter = ',', value_name = "METHODS")]
    pub methods: Vec<String>,
    /// Leave out verbs even where an RDMA device exists.
    #[arg(long)]
    pub no_verbs: bool,
    /// Run as one rank of a job started by a launcher (what `viaduct demo` starts).
    #[arg(long)]
    pub worker: bool,
    /// With --worker: the folder for the shared-memory method's rendezvous sockets.
    #[arg(long, value_name = "DIR", requires = "worker")]
    pub sockets: Option<PathBuf>,
    /// With --worker: run only the round through the communication agent.
    #[arg(long, requires = "worker")]
    pub agent_round: bool,
}

/// The longest the ranks may run before the launcher ends them.
const JOB_TIMEOUT_S: u32 = 120;

/// Runs `viaduct demo`.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut methods = Vec::new();
    let names: Vec<String> = if args.methods.is_empty() {
        vec!["shm".into(), "tcp".into()]
    } else {
        args.methods.clone()
    };
    for n in &names {
        let m = Method::parse(n).ok_or_else(|| {
            DemoError::Job(format!(
                "--methods {n:?}: the demo's rank-to-rank methods are shm and tcp \
                 (verbs is added by itself where an RDMA device exists)"
            ))
        })?;
        if !methods.contains(&m) {
            methods.push(m);
        }
    }
    if args.worker && args.agent_round {
        return worker::run_agent(args.quick).map_err(|e| {
            let rank = std::env::var("PMI_RANK").unwrap_or_else(|_| "?".into());
            format!("demo rank {rank}: {e}").into()
        });
    }
    if args.worker {
        let out = args
            .out
            .clone()
            .ok_or_else(|| DemoError::Job("--worker needs --out DIR".into()))?;
        let plan = worker::Plan {
            sockets: args.sockets.clone().unwrap_or_else(|| out.clone()),
            out,
            methods,
            quick: args.quick,
        };
        return worker::run(&plan).map_err(|e| {
            // Name the rank: the launcher prefixes lines, other launchers may not.
            let rank = std::env::var("PMI_RANK").unwrap_or_else(|_| "?".into());
            format!("demo rank {rank}: {e}").into()
        });
    }
    if !(2..=64).contains(&args.ranks) {
        return Err(
            DemoError::Job(format!("-n must be between 2 and 64, got {}", args.ranks)).into(),
        );
    }
    let started = Instant::now();
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("viaduct-demo-{}", std::process::id())),
    };
    std::fs::create_dir_all(&out)
        .map_err(|e| DemoError::os(format!("creating {}", out.display()), e))?;
    let out = out
        .canonicalize()
        .map_err(|e| DemoError::os(format!("resolving {}", out.display()), e))?;
    // A unix socket path must fit in 108 bytes; the shm rendezvous sockets live in `out`.
    if out.as_os_str().len() > 80 {
        return Err(DemoError::Job(format!(
            "--out {} is too long for the shared-memory sockets kept there; pick a shorter folder",
            out.display()
        ))
        .into());
    }
    let sockets = SocketDir::pick(&out)?;
    // Stages: per method connect, latency, bandwidth, allreduce, broadcast; then file I/O and
    // the handler; one agent round per method (and over verbs); verbs-lat; the start line.
    let verbs = verbs_device(args.no_verbs);
    let stages = 5 * names.len() + 2 + names.len() + 2 * usize::from(verbs.is_ok()) + 1;
    let mut progress = Progress::new(stages, args.json);
    progress.step(&format!(
        "starting {} ranks with `viaduct launch` (methods: {}; files in {})",
        args.ranks,
        names.join(", "),
        out.display()
    ));
    let worker_args = vec![
        "--methods".to_string(),
        names.join(","),
        "--out".to_string(),
        out.display().to_string(),
        "--sockets".to_string(),
        sockets.path.display().to_string(),
    ];
    let found = run_job(args, &worker_args, None, &sockets, &progress)?;
    let mut report: Report = parse_marker(found.result.as_deref(), "report")?;

    // The same kind of traffic through the communication agent, one job per method (the agent
    // takes its method from VIADUCT_TRANSPORT, which `viaduct launch --transport` sets).
    let mut agent_rounds = names.clone();
    if verbs.is_ok() {
        agent_rounds.push("verbs".to_string());
    }
    for m in &agent_rounds {
        progress.step(&format!("agent round over {m}: {} ranks", args.ranks));
        let found = run_job(
            args,
            &["--agent-round".to_string()],
            Some(m),
            &sockets,
            &progress,
        )?;
        report
            .agent
            .push(parse_marker(found.agent.as_deref(), "agent report")?);
    }

    match verbs {
        Ok(device) => {
            progress.step(&format!(
                "verbs: ping-pong latency on {device} (viaduct bench verbs-lat, 2 processes)"
            ));
            report.verbs = Some(verbs_latency(&device, args.quick)?);
        }
        Err(why) => report.verbs_skipped = Some(why),
    }
    report.seconds = started.elapsed().as_secs_f64();
    progress.line("done");
    progress.finish();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!();
        print!("{}", report.table());
    }
    Ok(())
}

/// A folder where unix sockets can be made (not every filesystem allows them: a 9p or
/// some network mounts do not), removed at the end when the demo made it.
struct SocketDir {
    path: PathBuf,
    made: bool,
}

impl SocketDir {
    /// The first of the temporary folder, `/tmp`, `/dev/shm` and `out` where a socket can be
    /// bound (a fresh subfolder of it).
    fn pick(out: &std::path::Path) -> Result<SocketDir, DemoError> {
        let name = format!("viaduct-demo-sockets-{}", std::process::id());
        let candidates = [
            std::env::temp_dir(),
            PathBuf::from("/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        for base in candidates {
            let dir = base.join(&name);
            if std::fs::create_dir_all(&dir).is_err() {
                continue;
            }
            let probe = dir.join("probe.sock");
            let ok = dir.as_os_str().len() < 70
                && std::os::unix::net::UnixListener::bind(&probe).is_ok();
            let _ = std::fs::remove_file(&probe);
            if ok {
                return Ok(SocketDir {
                    path: dir,
                    made: true,
                });
            }
            let _ = std::fs::remove_dir(&dir);
        }
        Ok(SocketDir {
            path: out.to_path_buf(),
            made: false,
        })
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        if self.made {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The marker lines rank 0 printed.
#[derive(Default)]
struct Found {
    result: Option<String>,
    agent: Option<String>,
}

fn parse_marker<T: serde::de::DeserializeOwned>(
    json: Option<&str>,
    what: &str,
) -> Result<T, DemoError> {
    let json = json.ok_or_else(|| {
        DemoError::Job(format!("the ranks finished but rank 0 printed no {what}"))
    })?;
    serde_json::from_str(json)
        .map_err(|e| DemoError::Job(format!("rank 0's {what} does not parse: {e}")))
}

/// Starts the ranks under `viaduct launch` (`viaduct demo --worker EXTRA`), shows their
/// stages, and returns what rank 0 reported.
fn run_job(
    args: &Args,
    extra: &[String],
    transport: Option<&str>,
    sockets: &SocketDir,
    progress: &Progress,
) -> Result<Found, DemoError> {
    let exe = std::env::current_exe().map_err(|e| DemoError::os("finding this program", e))?;
    let mut cmd = Command::new(&exe);
    cmd.args(["launch", "-n", &args.ranks.to_string()])
        .args(["--timeout", &JOB_TIMEOUT_S.to_string()]);
    if let Some(t) = transport {
        cmd.args(["--transport", t]);
    }
    cmd.arg("--")
        .arg(&exe)
        .args(["demo", "--worker"])
        .args(extra);
    // The agent keeps its shared-memory rendezvous sockets in the temporary folder: point it
    // at one where sockets can be made.
    cmd.env("TMPDIR", &sockets.path);
    if args.quick {
        cmd.arg("--quick");
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| DemoError::os(format!("starting {}", exe.display()), e))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| DemoError::Job("no output pipe from the launcher".into()))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| DemoError::Job("no error pipe from the launcher".into()))?;
    // Errors of the ranks and the launcher: shown as they come, kept for the failure message.
    let (err_tx, err_rx) = mpsc::channel::<String>();
    let mut found = Found::default();
    let mut stage = match transport {
        Some(t) => format!("start-up of the agent round over {t}"),
        None => "start-up".to_string(),
    };
    let mut other = Vec::new();
    let status = std::thread::scope(|scope| {
        let err_thread = scope.spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                progress.raw(&line);
                let _ = err_tx.send(line);
            }
        });
        let mut reader = BufReader::new(stdout);
        let mut raw = Vec::new();
        loop {
            raw.clear();
            match reader.by_ref().take(16 << 20).read_until(b'\n', &mut raw) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end();
            // The launcher prefixes each line with "[RANK] ".
            let body = line.split_once("] ").map_or(line, |(_, b)| b);
            if let Some(text) = body.strip_prefix("@@stage ") {
                stage = text.to_string();
                progress.step(text);
            } else if let Some(json) = body.strip_prefix("@@result ") {
                found.result = Some(json.to_string());
            } else if let Some(json) = body.strip_prefix("@@agent ") {
                found.agent = Some(json.to_string());
            } else {
                other.push(line.to_string());
            }
        }
        let status = child
            .wait()
            .map_err(|e| DemoError::os("waiting for the launcher", e));
        let _ = err_thread.join();
        status
    })?;
    let errors: Vec<String> = err_rx.try_iter().collect();
    if !status.success() {
        let mut msg = format!("the demo failed during \"{stage}\" ({status})");
        let tail: Vec<&String> = errors.iter().chain(other.iter()).rev().take(6).collect();
        if !tail.is_empty() {
            msg.push(':');
            for l in tail.into_iter().rev() {
                msg.push_str("\n  ");
                msg.push_str(l);
            }
        }
        return Err(DemoError::Job(msg));
    }
    Ok(found)
}

/// The RDMA device to use, or why there is none.
fn verbs_device(no_verbs: bool) -> Result<String, String> {
    if no_verbs {
        return Err("--no-verbs".into());
    }
    #[cfg(feature = "rdma")]
    {
        match viaduct_verbs::device::list() {
            Ok(devices) => devices.into_iter().next().map(|d| d.name).ok_or_else(|| {
                "no RDMA device on this machine; scripts/rxe-vm runs the demo with soft-RoCE"
                    .to_string()
            }),
            Err(e) => Err(format!("cannot list RDMA devices: {e}")),
        }
    }
    #[cfg(not(feature = "rdma"))]
    {
        Err("built without the `rdma` feature".into())
    }
}

/// Runs `viaduct bench verbs-lat` on `device` and reads its median.
fn verbs_latency(device: &str, quick: bool) -> Result<VerbsReport, DemoError> {
    let exe = std::env::current_exe().map_err(|e| DemoError::os("finding this program", e))?;
    let iters = if quick { "200" } else { "1000" };
    let port = 18_600 + (std::process::id() % 1000);
    let args = [
        "bench",
        "verbs-lat",
        "-d",
        device,
        "-n",
        iters,
        "-s",
        "8",
        "-p",
        &port.to_string(),
        "--json",
    ];
    let output = Command::new(&exe)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| DemoError::os("starting viaduct bench verbs-lat", e))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(DemoError::Job(format!(
            "verbs ping-pong on {device} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let median = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("median_us").and_then(serde_json::Value::as_f64))
        .ok_or_else(|| DemoError::Job(format!("verbs-lat printed no median: {text}")))?;
    Ok(VerbsReport {
        device: device.to_string(),
        size: 8,
        median_us: median,
        command: format!("viaduct {}", args.join(" ")),
    })
}
