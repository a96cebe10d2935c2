//! `viaduct launch`: start N ranks of a program on this machine and serve them PMI-1.
//!
//! Each rank gets `PMI_PORT` (the launcher's PMI server on 127.0.0.1), `PMI_ID` and `PMI_RANK`
//! (its rank), `PMI_SIZE`, `VIADUCT_JOB_KEY` (a fresh random key for this job) and, with
//! `--transport`, `VIADUCT_TRANSPORT`. Its standard output and error come back line by line,
//! prefixed with `[RANK] `; rank 0 reads the launcher's standard input. The job ends when every rank has exited (exit code 0 when all exited
//! with 0), or at the first failure: a rank exiting non-zero or killed by a signal, a rank calling
//! PMI abort, a barrier that can no longer complete, or the `--timeout`. Then the other ranks are
//! killed and the launcher names the cause and exits non-zero. With `VIADUCT_LAUNCH_KEEP_GOING=1`
//! ([`KEEP_GOING_VAR`]) a rank's exit or death alone does not end the job: the others go on.
//!
//! The PMI server bounds what ranks and other local processes can make it hold (see
//! `viaduct_pmi::server`): `VIADUCT_PMI_MAX_PENDING` connections waiting to
//! identify themselves (default: the number of ranks plus 64), `VIADUCT_PMI_MAX_KEYS` keys
//! (default 1024) and `VIADUCT_PMI_MAX_BYTES` bytes (default 1 MiB) put per rank. Refusals are
//! written to standard error, also when a rank's failure ends the job at the same moment.
//!
//! Ranks stay in the launcher's process group, so Ctrl-C in a terminal reaches all of them. A
//! signal sent to the launcher alone (e.g. `kill PID`, even `kill -9`) ends the launcher, and the
//! kernel then ends each rank with `SIGKILL` (a parent-death signal set in the rank before its
//! program starts), so no rank is left running on its own; a watcher process the launcher starts
//! beside them (`crate::watch`) writes on the launcher's standard error which ranks ended with
//! it. Processes a rank starts itself are not covered: they see their parent end.

use std::error::Error;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread;
use std::time::{Duration, Instant};

use viaduct_fallback::affinity;
use viaduct_fallback::process::kill_when_parent_dies;
use viaduct_pmi::env::{DIALECT_VAR, PMI_VARS};
use viaduct_pmi::server::{MAX_PENDING_VAR, Pmi1Server, ServerConfig, ServerEvent};
use viaduct_pmi::{JOB_KEY_VAR, JobKey};

/// Environment variable naming the transport ranks should use.
const TRANSPORT_VAR: &str = "VIADUCT_TRANSPORT";
/// Longest time between two looks of the launcher at its ranks; a rank whose output ends
/// (it exited, as a rule) wakes it at once.
const TICK: Duration = Duration::from_millis(100);
/// Longest piece of output forwarded as one line.
const MAX_LINE: u64 = 64 * 1024;
/// How long output of killed ranks is still drained.
const DRAIN: Duration = Duration::from_secs(2);
/// Exit code for a job ended by `--timeout` (as timeout(1) uses).
const TIMEOUT_EXIT: i32 = 124;

/// Options of `viaduct launch`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct launch -n 4 -- target/debug/examples/pingpong\n  \
    viaduct launch -n 2 --transport tcp --bind-to core -- viaduct bench latency\n  \
    viaduct launch -n 8 --timeout 60 -- ./my-program --its-options"
)]
pub struct Args {
    /// Number of ranks to start.
    #[arg(short = 'n', long = "np", default_value_t = 1)]
    pub ranks: u32,
    /// End the job with an error when it runs longer than this (seconds).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
    /// Transport the ranks should use (passed on as VIADUCT_TRANSPORT, e.g. tcp, shm, verbs).
    #[arg(long, value_name = "METHOD")]
    pub transport: Option<String>,
    /// Bind each rank to one CPU (`core`: rank i on the i-th CPU this launcher may use,
    /// round robin), like `mpiexec -bind-to core`; `none` leaves placement to the kernel.
    #[arg(long = "bind-to", value_enum, default_value = "none")]
    pub bind_to: Bind,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

/// Where ranks may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Bind {
    /// Wherever the kernel puts them.
    None,
    /// One CPU per rank.
    Core,
}

/// Set to `1`, a rank exiting non-zero or killed by a signal does not end the job: the other
/// ranks go on (a program that survives failures, e.g. with MPICH's `MPIX_Comm_shrink`), their
/// PMI barriers (their `MPI_Finalize`, say) complete without the failed ranks, and the
/// launcher exits with the first failure's code once every rank has exited. A PMI abort, a
/// barrier broken by a rank that exited with 0 outside it, and the `--timeout` still end the
/// job.
pub const KEEP_GOING_VAR: &str = "VIADUCT_LAUNCH_KEEP_GOING";

/// Largest job this launcher starts on one machine.
const MAX_RANKS: u32 = 1024;

/// Runs the job; returns the exit code the launcher should exit with.
pub fn run(args: &Args) -> Result<i32, Box<dyn Error>> {
    if args.ranks == 0 || args.ranks > MAX_RANKS {
        return Err(format!("-n must be between 1 and {MAX_RANKS}, got {}", args.ranks).into());
    }
    let timeout = match args.timeout {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Some(Duration::from_secs_f64(s)),
        Some(s) => {
            return Err(format!("--timeout must be a positive number of seconds, got {s}").into());
        }
    };
    let bad_name = |t: &String| {
        t.is_empty()
            || !t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    if let Some(t) = args.transport.as_ref().filter(|t| bad_name(t)) {
        return Err(
            format!("--transport {t:?}: expected a method name such as tcp, shm or verbs").into(),
        );
    }
    let (program, program_args) = args
        .command
        .split_first()
        .ok_or("no program given after --")?;

    let cpus = match args.bind_to {
        Bind::None => Vec::new(),
        Bind::Core => affinity::allowed_cpus()
            .map_err(|e| format!("--bind-to core: cannot read this process's CPU set: {e}"))?,
    };
    let config = ServerConfig::from_env(args.ranks)?;
    let key = JobKey::generate().map_err(|e| format!("cannot make a job key: {e}"))?;
    let server =
        Pmi1Server::start(config).map_err(|e| format!("cannot start the PMI server: {e}"))?;
    let mut job = Job::new(args.ranks);
    // Says so, should this launcher be killed outright while the job runs; the job goes on
    // without it (the ranks still end with the launcher), so a failure is only reported.
    let mut watcher = crate::watch::Watcher::start()
        .map_err(|e| eprintln!("viaduct launch: cannot start the watcher: {e}"))
        .ok();
    for rank in 0..args.ranks {
        let mut cmd = Command::new(program);
        // Like mpiexec, rank 0 reads the launcher's standard input; the others read nothing.
        let stdin = if rank == 0 {
            Stdio::inherit()
        } else {
            Stdio::null()
        };
        cmd.args(program_args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for var in PMI_VARS.iter().chain([&DIALECT_VAR]) {
            cmd.env_remove(var);
        }
        cmd.env("PMI_PORT", server.port_env())
            .env("PMI_ID", rank.to_string())
            .env("PMI_RANK", rank.to_string())
            .env("PMI_SIZE", args.ranks.to_string())
            .env(JOB_KEY_VAR, key.to_hex());
        if let Some(t) = &args.transport {
            cmd.env(TRANSPORT_VAR, t);
        }
        // A launcher killed outright (SIGKILL, the OOM killer) takes its ranks with it instead
        // of leaving them running on their own. Ranks are spawned from this thread, which lives
        // as long as the launcher.
        kill_when_parent_dies(&mut cmd);
        if !cpus.is_empty() {
            let cpu = cpus[rank as usize % cpus.len()];
            if let Err(e) = affinity::bind_command(&mut cmd, cpu) {
                job.kill_all();
                server.shutdown();
                job.drain_output();
                return Err(format!("--bind-to core: rank {rank} on CPU {cpu}: {e}").into());
            }
        }
        match cmd.spawn() {
            Ok(child) => {
                if let Some(w) = watcher.as_mut()
                    && let Err(e) = w.rank_started(rank, child.id())
                {
                    eprintln!("viaduct launch: cannot tell the watcher of rank {rank}: {e}");
                    watcher = None;
                }
                job.add(rank, child)
            }
            Err(e) => {
                job.kill_all();
                server.shutdown();
                job.drain_output();
                return Err(format!("cannot start rank {rank} ({program}): {e}").into());
            }
        }
    }

    let outcome = job.watch(&server, timeout);
    if let Outcome::Failed { message, .. } = &outcome {
        let running = job.running();
        if !running.is_empty() {
            eprintln!(
                "viaduct launch: {message}; killing rank{} {}",
                if running.len() == 1 { "" } else { "s" },
                list(&running)
            );
        }
        job.kill_all();
    }
    server.shutdown();
    job.drain_output();
    Ok(match outcome {
        Outcome::Success => 0,
        Outcome::Failed { message, code } => {
            eprintln!("viaduct launch: job failed: {message}");
            code
        }
    })
}

/// What the launcher knows of the ranks that ended badly.
struct Ended {
    /// `VIADUCT_LAUNCH_KEEP_GOING=1`: the job goes on without them.
    keep_going: bool,
    /// The first of their failures: the job's outcome once every rank ended.
    first_failure: Option<Outcome>,
    /// Their ranks (with `keep_going`).
    failed: Vec<u32>,
}

/// How long a rank whose PMI connection ended may take to show its exit.
const EXIT_GRACE: Duration = Duration::from_secs(1);

enum Outcome {
    Success,
    Failed { message: String, code: i32 },
}

struct Job {
    children: Vec<Option<Child>>,
    done_tx: Sender<()>,
    done_rx: Receiver<()>,
    forwarders: usize,
}

impl Job {
    fn new(size: u32) -> Self {
        let (done_tx, done_rx) = mpsc::channel();
        Self {
            children: (0..size).map(|_| None).collect(),
            done_tx,
            done_rx,
            forwarders: 0,
        }
    }

    fn add(&mut self, rank: u32, mut child: Child) {
        if let Some(out) = child.stdout.take() {
            self.forward(rank, out, false);
        }
        if let Some(err) = child.stderr.take() {
            self.forward(rank, err, true);
        }
        self.children[rank as usize] = Some(child);
    }

    fn forward(&mut self, rank: u32, source: impl Read + Send + 'static, to_stderr: bool) {
        let done = self.done_tx.clone();
        let spawned = thread::Builder::new()
            .name(format!("rank{rank}-output"))
            .spawn(move || {
                forward_lines(rank, source, to_stderr);
                // The launcher may have stopped waiting; nothing to do then.
                let _ = done.send(());
            });
        match spawned {
            Ok(_) => self.forwarders += 1,
            Err(e) => eprintln!("viaduct launch: rank {rank}: cannot forward its output: {e}"),
        }
    }

    fn running(&self) -> Vec<u32> {
        (0..self.children.len() as u32)
            .filter(|r| self.children[*r as usize].is_some())
            .collect()
    }

    /// Polls ranks and server until the job succeeds or fails.
    fn watch(&mut self, server: &Pmi1Server, timeout: Option<Duration>) -> Outcome {
        let started = Instant::now();
        let keep_going = std::env::var_os(KEEP_GOING_VAR).is_some_and(|v| v == "1");
        let mut ended = Ended {
            keep_going,
            first_failure: None,
            failed: Vec::new(),
        };
        loop {
            for rank in 0..self.children.len() {
                let Some(child) = self.children[rank].as_mut() else {
                    continue;
                };
                let status = match child.try_wait() {
                    Ok(None) => continue,
                    Ok(Some(status)) => status,
                    Err(e) => {
                        return Outcome::Failed {
                            message: format!("cannot watch rank {rank}: {e}"),
                            code: 1,
                        };
                    }
                };
                if let Some(outcome) = self.exited(rank as u32, status, server, &mut ended) {
                    return outcome;
                }
            }
            for event in server.take_events() {
                if let ServerEvent::BarrierBroken { gone, .. } = &event
                    && keep_going
                    && self.all_failed(gone, server, &mut ended)
                {
                    // The server saw their connections end before this launcher saw them
                    // die; left out of the barrier now, they no longer hold it.
                    continue;
                }
                if let Some(outcome) = judge(event) {
                    return outcome;
                }
            }
            if self.children.iter().all(Option::is_none) {
                return ended.first_failure.unwrap_or(Outcome::Success);
            }
            if let Some(limit) = timeout.filter(|limit| started.elapsed() >= *limit) {
                {
                    return Outcome::Failed {
                        message: format!(
                            "timed out after {:.1} s with rank{} {} still running",
                            limit.as_secs_f64(),
                            if self.running().len() == 1 { "" } else { "s" },
                            list(&self.running())
                        ),
                        code: TIMEOUT_EXIT,
                    };
                }
            }
            // Sleep until a rank's output ends or the tick passed: no busy polling beside ranks
            // that may be spinning on every core.
            if self.done_rx.recv_timeout(TICK).is_ok() {
                self.forwarders -= 1;
            }
        }
    }

    /// Handles rank `rank`'s exit with `status`: the job's end, or `None` when it goes on.
    fn exited(
        &mut self,
        rank: u32,
        status: ExitStatus,
        server: &Pmi1Server,
        ended: &mut Ended,
    ) -> Option<Outcome> {
        self.children[rank as usize] = None;
        if status.success() {
            server.rank_exited(rank);
            return None;
        }
        let failed = Outcome::Failed {
            message: format!("rank {rank} {}", describe(status)),
            code: exit_code_for(status),
        };
        if !ended.keep_going {
            server.rank_exited(rank);
            // What the server saw before the exit (a refused connection, an abort) is often
            // why the rank failed: say it before ending the job.
            report_pending(server);
            return Some(failed);
        }
        // The job goes on without it: barriers complete among the others, and the server's
        // events (a barrier broken by another rank, say) are judged, not only reported.
        server.rank_failed(rank);
        ended.failed.push(rank);
        eprintln!(
            "viaduct launch: rank {rank} {}; the other ranks go on ({KEEP_GOING_VAR}=1)",
            describe(status)
        );
        ended.first_failure.get_or_insert(failed);
        None
    }

    /// Whether every rank of `gone` failed (exited non-zero or was killed), waiting a moment
    /// for the exit of each still running: its connection may end just before its exit
    /// shows.
    fn all_failed(&mut self, gone: &[u32], server: &Pmi1Server, ended: &mut Ended) -> bool {
        for &rank in gone {
            let deadline = Instant::now() + EXIT_GRACE;
            while !ended.failed.contains(&rank) {
                let Some(child) = self
                    .children
                    .get_mut(rank as usize)
                    .and_then(Option::as_mut)
                else {
                    return false;
                };
                match child.try_wait() {
                    Ok(Some(status)) => {
                        if self.exited(rank, status, server, ended).is_some() || status.success() {
                            return false;
                        }
                    }
                    Ok(None) if Instant::now() < deadline => {
                        thread::sleep(Duration::from_millis(10))
                    }
                    _ => return false,
                }
            }
        }
        true
    }

    /// Kills the ranks still running and reaps them (bounded: SIGKILL cannot be ignored).
    fn kill_all(&mut self) {
        for (rank, slot) in self.children.iter_mut().enumerate() {
            if let Some(mut child) = slot.take() {
                if let Err(e) = child.kill() {
                    eprintln!("viaduct launch: cannot kill rank {rank}: {e}");
                }
                let deadline = Instant::now() + Duration::from_secs(5);
                while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                    thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }

    /// Waits a bounded time for the output of exited ranks to be written out. Output still held
    /// open by a rank's own children after that is left behind.
    fn drain_output(&mut self) {
        let deadline = Instant::now() + DRAIN;
        while self.forwarders > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done_rx.recv_timeout(left) {
                Ok(()) => self.forwarders -= 1,
                Err(_) => break,
            }
        }
    }
}

/// Reports the server's pending events when the job already ends for another reason: those
/// that would have ended it are written out too.
fn report_pending(server: &Pmi1Server) {
    for event in server.take_events() {
        if let Some(Outcome::Failed { message, .. }) = judge(event) {
            eprintln!("viaduct launch: {message}");
        }
    }
}

/// Turns a server event into the job's end, or reports it and goes on.
fn judge(event: ServerEvent) -> Option<Outcome> {
    match event {
        ServerEvent::Abort {
            rank,
            exit_code,
            message,
        } => Some(Outcome::Failed {
            message: format!(
                "rank {rank} aborted the job (exit code {exit_code}){}",
                message.map(|m| format!(": {m}")).unwrap_or_default()
            ),
            // An abort with code 0 ends the job, which then exits with 0 (as MPICH's
            // `mpiexec` does): the program asked for that code.
            code: if exit_code == 0 {
                0
            } else {
                exit_code.clamp(1, 255)
            },
        }),
        ServerEvent::BarrierBroken { waiting, gone } => Some(Outcome::Failed {
            message: format!(
                "rank{} {} left the job without entering the barrier that {} {} {} in",
                if gone.len() == 1 { "" } else { "s" },
                list(&gone),
                if waiting.len() == 1 { "rank" } else { "ranks" },
                list(&waiting),
                if waiting.len() == 1 { "waits" } else { "wait" },
            ),
            code: 1,
        }),
        ServerEvent::ProtocolError { rank, detail } => Some(Outcome::Failed {
            message: format!("rank {rank} broke the PMI protocol: {detail}"),
            code: 1,
        }),
        ServerEvent::Refused { peer, reason } => {
            eprintln!("viaduct launch: refused a PMI connection from {peer}: {reason}");
            None
        }
        ServerEvent::Overloaded { refused, limit } => {
            eprintln!(
                "viaduct launch: closed {refused} PMI connection{} on arrival: {limit} others \
                 were already waiting to identify themselves ({MAX_PENDING_VAR})",
                if refused == 1 { "" } else { "s" }
            );
            None
        }
        ServerEvent::LimitReached { rank, detail } => {
            eprintln!("viaduct launch: rank {rank}: {detail}");
            None
        }
    }
}

fn forward_lines(rank: u32, source: impl Read, to_stderr: bool) {
    let mut reader = BufReader::new(source);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.by_ref().take(MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        let mut out = format!("[{rank}] ").into_bytes();
        out.extend_from_slice(&line);
        if !line.ends_with(b"\n") {
            out.push(b'\n');
        }
        // A closed terminal or pipe on our side must not stop the rank: keep draining.
        let _ = if to_stderr {
            io::stderr().lock().write_all(&out)
        } else {
            let mut stdout = io::stdout().lock();
            stdout.write_all(&out).and_then(|()| stdout.flush())
        };
    }
}

/// "exited with code 3", "was killed by signal 9 (SIGKILL)".
fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    if let Some(sig) = status.signal() {
        let core = if status.core_dumped() {
            ", core dumped"
        } else {
            ""
        };
        return match signal_name(sig) {
            Some(name) => format!("was killed by signal {sig} ({name}{core})"),
            None => format!("was killed by signal {sig}{core}"),
        };
    }
    format!("ended with status {status}")
}

fn exit_code_for(status: ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(code), _) if code != 0 => code,
        (_, Some(sig)) => 128 + sig,
        _ => 1,
    }
}

fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        10 => "SIGUSR1",
        11 => "SIGSEGV",
        12 => "SIGUSR2",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return None,
    })
}

fn list(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
