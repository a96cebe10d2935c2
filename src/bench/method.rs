//! Benchmark `method`: ping-pong latency and streaming bandwidth of the TCP and shared-memory
//! methods, between two processes this command starts itself (each pinned to its own core with
//! `taskset`, when present).
//!
//! Latency is half the round trip of a ping-pong (the median over batches of 16 round trips, see
//! `clock`, and the 99th percentile of single round trips; one clock read per round trip);
//! bandwidth is
//! bytes delivered per second while the sender keeps a window of messages in flight and the
//! receiver consumes each message in place. `--mode busy` polls without sleeping;
//! `--mode blocking` sleeps in the method's wait (futex for shm, io_uring wait for TCP) whenever
//! nothing is ready (shm polls about a microsecond first, as `ucx_perftest -E sleep` does while
//! it arms its worker). `scripts/bench-methods` runs the peer tools side by side and prints ratios.

use std::error::Error;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::clock;
use viaduct_fallback::{shm, tcp};
use viaduct_method::Posted;
use viaduct_method::sendbuf::SendBuf;

type BoxError = Box<dyn Error>;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Test {
    /// Ping-pong, half round trip.
    Latency,
    /// One-way stream, bytes per second.
    Bandwidth,
}

/// Which method carries the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    /// TCP over 127.0.0.1 through io_uring.
    Tcp,
    /// Shared-memory rings.
    Shm,
}

/// How an end waits for the next event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Poll without sleeping.
    Busy,
    /// Sleep in the method's wait when nothing is ready.
    Blocking,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Role {
    Launch,
    Server,
    Client,
}

/// Options of this benchmark.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct bench method latency --transport shm --sizes 8,64,4096\n  \
    viaduct bench method bandwidth --transport tcp --sizes 65536,4194304 --json\n  \
    viaduct bench method latency --transport tcp --mode blocking"
)]
pub struct Args {
    /// What to measure.
    #[arg(value_enum, default_value = "latency")]
    pub test: Test,
    /// The method to measure.
    #[arg(long, value_enum, default_value = "shm")]
    pub transport: Transport,
    /// Message sizes in bytes, comma separated (default 8,64,4096 for latency,
    /// 65536,4194304 for bandwidth).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Busy-poll or blocking waits.
    #[arg(long, value_enum, default_value = "busy")]
    pub mode: Mode,
    /// Most timed iterations (ping-pongs or messages) per size.
    #[arg(long, default_value_t = 200_000)]
    pub iters: u64,
    /// Most seconds of timing per size.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// The two cores to pin the two processes to.
    #[arg(long, value_delimiter = ',', default_values_t = [0usize, 1])]
    pub cpus: Vec<usize>,
    /// Print one JSON object per result line instead of a table.
    #[arg(long)]
    pub json: bool,
    /// TCP: payload size from which sends use `SEND_ZC` (default: the method's default).
    #[arg(long)]
    pub zero_copy_threshold: Option<usize>,
    /// TCP: each end's ring is single-issuer with deferred task work
    /// (`tcp::Config::single_issuer`; here each end is set up and used by one thread). The
    /// note says whether the kernel took it. Ignored over shm.
    #[arg(long)]
    pub single_issuer: bool,
    /// shm: carry long messages through the ring in chunks instead of `process_vm_readv`.
    #[arg(long)]
    pub ring_chunks: bool,
    /// shm: the receiver copies long messages alone (no split single copy, see
    /// `shm::Config::split_copy`).
    #[arg(long)]
    pub no_split_copy: bool,
    /// shm: bytes of each direction's ring (default: the method's default).
    #[arg(long)]
    pub ring_bytes: Option<usize>,
    /// shm: long messages up to this many bytes go through the ring in pipelined chunks even
    /// where single copy is permitted (`shm::Config::ring_copy_max`; 0: never; default: the
    /// method's default).
    #[arg(long)]
    pub ring_copy_max: Option<usize>,
    /// shm: chunk size of that ring copy (`shm::Config::ring_copy_chunk`; default: the
    /// method's default).
    #[arg(long)]
    pub ring_copy_chunk: Option<usize>,
    /// Bandwidth: messages in flight, each from its own owned buffer (so also the number of
    /// distinct send buffers: 16 of 4 MiB are 64 MiB, more than a typical last-level cache).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub window: u32,
    /// Internal: which end this process plays.
    #[arg(long, value_enum, default_value = "launch", hide = true)]
    role: Role,
    /// Internal: where the server listens.
    #[arg(long, hide = true)]
    addr: Option<String>,
}

/// Tag of the message that ends a run.
const STOP: u64 = u64::MAX;
/// Tag of the server's acknowledgement of a bandwidth run.
const ACK: u64 = u64::MAX - 1;
/// Set-up and per-size limit for the processes.
const LIMIT: Duration = Duration::from_secs(60);

/// The benchmark's view of a connected method.
pub(super) trait Link {
    /// Posts a copy of `data`; false when the method has no resources now.
    fn send(&mut self, tag: u64, data: &[u8]) -> Result<bool, BoxError>;
    /// Posts an owned buffer; gives it back when the method has no resources now.
    fn send_buf(&mut self, tag: u64, buf: Vec<u8>) -> Result<Option<Vec<u8>>, BoxError>;
    /// Reaps completions, keeping returned buffers in `spare`.
    fn reap(&mut self, spare: &mut Vec<Vec<u8>>) -> Result<(), BoxError>;
    /// Hands the next inbound message to `f` and consumes it; false when none is ready. `f`'s
    /// third argument tells whether the bytes lie in memory the receiving side wrote itself
    /// (see [`Note::sender_memory`]).
    fn recv(&mut self, f: &mut dyn FnMut(u64, &[u8], bool)) -> Result<bool, BoxError>;
    /// Sleeps until something may be ready.
    fn wait(&mut self) -> Result<(), BoxError>;
    /// Extra facts for the report.
    fn note(&self) -> String;
}

/// What the report says of a method endpoint, besides the numbers.
pub(super) trait Note {
    /// Extra facts for the report.
    fn note(&self) -> String;
    /// The addresses where a message that `next` shows still lies in memory the *sender*
    /// wrote (a shared-memory ring): a receive that reads it there leaves its cache lines with
    /// the sender, so the benchmark copies such a message out, as a library's receive into a
    /// user buffer does. Outside this range the receiving side has already copied the bytes
    /// into its own memory (the reassembly buffer of a long shared-memory message, TCP's and
    /// verbs' receive buffers), and the benchmark reads them there, as the method's contract
    /// delivers them, with no second copy. Empty by default.
    fn sender_memory(&self) -> std::ops::Range<usize> {
        0..0
    }
}

/// `Link` for every method endpoint, through the method contract
/// ([`viaduct_method::Endpoint`]): one copy of the code, a direct call of each method's own
/// post, poll, next and consume. A completion's owned buffer (where the method gives it back)
/// goes to `spare`.
impl<E: viaduct_method::Endpoint + Note> Link for E {
    fn send(&mut self, tag: u64, data: &[u8]) -> Result<bool, BoxError> {
        Ok(self.post_copy(0, tag, data)?.is_posted())
    }
    fn send_buf(&mut self, tag: u64, buf: Vec<u8>) -> Result<Option<Vec<u8>>, BoxError> {
        Ok(match self.post_buf(0, tag, SendBuf::Owned(buf))? {
            Posted::InProgress => None,
            Posted::NoResources(b) => b.into_owned(),
        })
    }
    fn reap(&mut self, spare: &mut Vec<Vec<u8>>) -> Result<(), BoxError> {
        while let Some(c) = viaduct_method::Endpoint::poll(self) {
            c.result?;
            spare.extend(c.buffer);
        }
        Ok(())
    }
    fn recv(&mut self, f: &mut dyn FnMut(u64, &[u8], bool)) -> Result<bool, BoxError> {
        let sender = Note::sender_memory(self);
        let n = match viaduct_method::Endpoint::next(self)? {
            Some(m) => {
                f(m.tag, m.data, !sender.contains(&(m.data.as_ptr() as usize)));
                m.data.len()
            }
            None => return Ok(false),
        };
        viaduct_method::Endpoint::consume(self, n)?;
        Ok(true)
    }
    fn wait(&mut self) -> Result<(), BoxError> {
        Ok(viaduct_method::Endpoint::wait(
            self,
            Duration::from_millis(100),
        )?)
    }
    fn note(&self) -> String {
        Note::note(self)
    }
}

impl Note for shm::Endpoint {
    fn note(&self) -> String {
        match self.long_messages() {
            shm::LongMessages::SingleCopy if self.config().split_copy => {
                "long messages by split single copy (process_vm_readv + process_vm_writev)"
                    .to_string()
            }
            shm::LongMessages::SingleCopy => "long messages by process_vm_readv alone".to_string(),
            shm::LongMessages::RingChunks => "long messages in ring chunks".to_string(),
        }
    }
    fn sender_memory(&self) -> std::ops::Range<usize> {
        self.segment_range()
    }
}

impl Note for tcp::Endpoint {
    fn note(&self) -> String {
        let sends = match self.config().zero_copy_threshold {
            usize::MAX => "copying sends".to_string(),
            t => format!("SEND_ZC from {t} B"),
        };
        // Both forms name the request, so its rows never mix with the shared ring's.
        match (
            self.config().single_issuer,
            self.ring_features().defer_taskrun,
        ) {
            (true, true) => format!("{sends}, single issuer"),
            (true, false) => format!("{sends}, single issuer refused by the kernel (shared ring)"),
            _ => sends,
        }
    }
}

// The verbs method's message endpoint (`bench latency --against-raw` over verbs); its
// completions hand nothing back.
#[cfg(feature = "rdma")]
impl Note for viaduct_verbs::msg::Endpoint {
    fn note(&self) -> String {
        "verbs message endpoint".to_string()
    }
}

/// Polls the shared-memory wait makes in `--mode blocking` before it sleeps on the futex (the
/// count adapts between a sixteenth of this and this): about a microsecond here, what the
/// blocking peer row's `ucx_perftest -E sleep` spends arming its worker (it drains its signal
/// socket, then looks at its FIFO once more) before it sleeps. With none, every round trip of
/// a ping-pong slept, since the reply comes a few hundred nanoseconds after the request. The
/// wait's quick-wake rule keeps a ping-pong from settling into sleeping on both ends: before
/// it, one late reply halved the count, both ends then slept for every message, and runs of
/// 8-byte ping-pongs gave 0.13 us or 19-23 us by chance (now 0.12-0.14 us in 8 of 8).
const BLOCKING_SHM_POLLS: u32 = 64;

fn shm_config(a: &Args) -> shm::Config {
    let mut c = shm::Config::default();
    if a.mode == Mode::Blocking {
        c.spin = BLOCKING_SHM_POLLS;
    }
    if a.ring_chunks {
        c.single_copy = false;
    }
    if a.no_split_copy {
        c.split_copy = false;
    }
    if let Some(b) = a.ring_bytes {
        c.ring_bytes = b;
        c.eager_limit = c.eager_limit.min(b / 4 - 64);
        c.chunk_bytes = c.chunk_bytes.min(b / 4 - 64);
        c.ring_copy_chunk = c.ring_copy_chunk.min(b / 4 - 64);
    }
    if let Some(m) = a.ring_copy_max {
        c.ring_copy_max = m;
    }
    if let Some(k) = a.ring_copy_chunk {
        c.ring_copy_chunk = k;
    }
    c
}

fn tcp_config(a: &Args) -> tcp::Config {
    let mut c = tcp::Config {
        busy_poll: a.mode == Mode::Busy,
        single_issuer: a.single_issuer,
        ..tcp::Config::default()
    };
    if let Some(t) = a.zero_copy_threshold {
        c.zero_copy_threshold = t;
    }
    c
}

/// Posts `data` (copied), waiting for resources; reaps completions on the way. The clock is
/// read only once a post was refused, so the ping-pong's path between a receive and the next
/// send holds no clock read (the agent's has none either).
pub(super) fn send_copy(
    l: &mut dyn Link,
    mode: Mode,
    tag: u64,
    data: &[u8],
) -> Result<(), BoxError> {
    let mut deadline = None;
    let mut spare = Vec::new();
    while !l.send(tag, data)? {
        l.reap(&mut spare)?;
        idle(l, mode)?;
        let limit = *deadline.get_or_insert_with(|| Instant::now() + LIMIT);
        if Instant::now() > limit {
            return Err("the peer stopped taking messages".into());
        }
    }
    l.reap(&mut spare)
}

fn idle(l: &mut dyn Link, mode: Mode) -> Result<(), BoxError> {
    match mode {
        Mode::Busy => {
            std::hint::spin_loop();
            Ok(())
        }
        Mode::Blocking => l.wait(),
    }
}

/// Busy polls of a receive made before each further poll pauses (`spin_loop`).
const HOT_POLLS: u32 = 64;

/// Waits for one message, handing it to `f`; the clock is first read after 4096 empty polls.
pub(super) fn recv_one(
    l: &mut dyn Link,
    mode: Mode,
    f: &mut dyn FnMut(u64, &[u8], bool),
) -> Result<(), BoxError> {
    let mut deadline = None;
    let mut n = 0u32;
    while !l.recv(f)? {
        // Busy: the first polls follow each other at once, later ones pause first, as the
        // agent's fast receive does (`HOT_TURNS` there).
        if mode == Mode::Blocking || n >= HOT_POLLS {
            idle(l, mode)?;
        }
        n = n.wrapping_add(1);
        if n % 4096 == 0 {
            let limit = *deadline.get_or_insert_with(|| Instant::now() + LIMIT);
            if Instant::now() > limit {
                return Err("no message from the peer".into());
            }
        }
    }
    Ok(())
}

/// Takes a received message as a receive into the application's buffer would: copies it into
/// `into` where it still lies in the sender's memory, reads it in place where the receiving
/// side already copied it into its own (`landed`, see [`Note::sender_memory`]).
fn take(into: &mut [u8], d: &[u8], landed: bool) {
    if landed {
        std::hint::black_box(d);
    } else if let Some(dst) = into.get_mut(..d.len()) {
        dst.copy_from_slice(d);
    }
}

/// One round trip of the client's side of a ping-pong: posts `data` with `tag`, waits for
/// the reply and takes it into `echo` (which must be as long as `data`; see [`take`]).
pub(super) fn ping(
    l: &mut dyn Link,
    mode: Mode,
    tag: u64,
    data: &[u8],
    echo: &mut [u8],
) -> Result<(), BoxError> {
    send_copy(l, mode, tag, data)?;
    let mut got = usize::MAX;
    recv_one(l, mode, &mut |_, d, landed| {
        got = d.len();
        take(echo, d, landed);
    })?;
    if got != data.len() {
        return Err(format!("echo of {got} bytes for {}", data.len()).into());
    }
    Ok(())
}

/// The server's buffers: where it takes a message (as the client does, see [`take`]) and the
/// reply it sends from, as long as the message (its own send buffer, as `osu_latency`'s and
/// `ucx_perftest`'s servers send from theirs).
#[derive(Debug, Default)]
pub(super) struct Scratch {
    into: Vec<u8>,
    reply: Vec<u8>,
}

impl Scratch {
    /// Takes message `d`; returns its length.
    fn take(&mut self, d: &[u8], landed: bool) -> usize {
        if self.into.len() < d.len() {
            self.into.resize(d.len(), 0);
            self.reply.resize(d.len(), 0x5A);
        }
        take(&mut self.into, d, landed);
        d.len()
    }
}

/// The server's side of one round trip: takes a message (see [`take`]) and replies with as
/// many bytes of its own.
pub(super) fn pong(l: &mut dyn Link, mode: Mode, scratch: &mut Scratch) -> Result<(), BoxError> {
    let mut tag = 0;
    let mut len = 0;
    recv_one(l, mode, &mut |t, d, landed| {
        tag = t;
        len = scratch.take(d, landed);
    })?;
    send_copy(l, mode, tag, &scratch.reply[..len])
}

fn serve(l: &mut dyn Link, test: Test, mode: Mode) -> Result<(), BoxError> {
    let mut scratch = Scratch::default();
    loop {
        let mut tag = 0;
        let mut len = 0;
        recv_one(l, mode, &mut |t, d, landed| {
            tag = t;
            if test == Test::Latency {
                len = scratch.take(d, landed);
            }
        })?;
        match (tag, test) {
            (STOP, _) => {
                send_copy(l, mode, ACK, &[])?;
                break;
            }
            (ACK, Test::Bandwidth) => send_copy(l, mode, ACK, &[])?,
            (_, Test::Latency) => send_copy(l, mode, tag, &scratch.reply[..len])?,
            _ => {}
        }
    }
    // Let the last acknowledgement reach the client before the connection goes.
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end && l.recv(&mut |_, _, _| {}).is_ok() {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

struct Report {
    size: usize,
    iters: u64,
    value: f64,
    p99: f64,
}

fn latency(l: &mut dyn Link, mode: Mode, size: usize, a: &Args) -> Result<Report, BoxError> {
    let data = vec![0xA5u8; size];
    // The reply is taken into the application's buffer where it still lies in the sender's
    // memory, as the server takes the message (and as a receive of the agent, MPI or UCX
    // delivers it): a client that only looked at the length would leave the payload's cache
    // lines with the peer and time less than a receive. Where the receiving side already
    // copied it into its own memory it is read there (see `take`).
    let mut echo = vec![0u8; size];
    let budget = Duration::from_secs_f64(a.seconds);
    let mut tag = 0u64;
    let mut round_trip = |l: &mut dyn Link| -> Result<(), BoxError> {
        ping(l, mode, tag, &data, &mut echo)?;
        tag += 1;
        Ok(())
    };
    // Warm up for a fifth of the budget (at most a tenth of the iterations).
    let warm_until = Instant::now() + budget / 5;
    for _ in 0..(a.iters / 10).max(100) {
        round_trip(l)?;
        if Instant::now() > warm_until {
            break;
        }
    }
    let mut samples = clock::half_round_trips(a.iters, Some(budget), || round_trip(l))?;
    // The median over batches of round trips (the clock's step, see `clock`), as the agent
    // benchmark reports it; the tail figure from single round trips.
    let median = clock::median_of_batches(&samples).ok_or("no round trip was timed")?;
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p) as usize];
    Ok(Report {
        size,
        iters: samples.len() as u64,
        value: median,
        p99: at(0.99),
    })
}

fn bandwidth(l: &mut dyn Link, mode: Mode, size: usize, a: &Args) -> Result<Report, BoxError> {
    let window = a.window as usize;
    let mut spare: Vec<Vec<u8>> = (0..window).map(|_| vec![0x5Au8; size]).collect();
    let budget = Duration::from_secs_f64(a.seconds);
    let deadline = Instant::now() + LIMIT;
    // One short warm-up stream, then the timed one.
    let mut result = None;
    for (round, limit) in [(0, budget / 5), (1, budget)] {
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < a.iters && start.elapsed() < limit {
            match spare.pop() {
                Some(buf) => match l.send_buf(round, buf)? {
                    None => sent += 1,
                    Some(buf) => {
                        spare.push(buf);
                        l.reap(&mut spare)?;
                        idle(l, mode)?;
                    }
                },
                None => {
                    l.reap(&mut spare)?;
                    if spare.is_empty() {
                        idle(l, mode)?;
                    }
                }
            }
            if Instant::now() > deadline {
                return Err("bandwidth run made no progress".into());
            }
        }
        while spare.len() < window {
            l.reap(&mut spare)?;
            idle(l, mode)?;
            if Instant::now() > deadline {
                return Err("sends never completed".into());
            }
        }
        send_copy(l, mode, ACK, &[])?;
        recv_one(l, mode, &mut |_, _, _| {})?;
        let secs = start.elapsed().as_secs_f64();
        result = Some(Report {
            size,
            iters: sent,
            value: sent as f64 * size as f64 / secs / 1e9,
            p99: f64::NAN,
        });
    }
    result.ok_or_else(|| "no bandwidth round ran".into())
}

/// Rounds a figure for the JSON line (a tenth of a nanosecond is below any clock's precision).
fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn client(l: &mut dyn Link, a: &Args, transport: &str) -> Result<(), BoxError> {
    let mode_name = match a.mode {
        Mode::Busy => "busy",
        Mode::Blocking => "blocking",
    };
    for &size in &a.sizes {
        let r = match a.test {
            Test::Latency => latency(l, a.mode, size, a)?,
            Test::Bandwidth => bandwidth(l, a.mode, size, a)?,
        };
        let note = l.note();
        match (a.test, a.json) {
            (Test::Latency, true) => println!(
                "{}",
                serde_json::json!({"test": "latency", "transport": transport, "mode": mode_name,
                    "size": r.size, "iters": r.iters, "median_us": round4(r.value),
                    "p99_us": round4(r.p99),
                    "note": note})
            ),
            (Test::Bandwidth, true) => println!(
                "{}",
                serde_json::json!({"test": "bandwidth", "transport": transport, "mode": mode_name,
                    "size": r.size, "messages": r.iters, "gbytes_per_s": r.value, "window": a.window,
                    "note": note})
            ),
            (Test::Latency, false) => println!(
                "{transport:4} {mode_name:8} {:>9} B  median {:8.3} us  p99 {:8.3} us  ({} iters; {note})",
                r.size, r.value, r.p99, r.iters
            ),
            (Test::Bandwidth, false) => println!(
                "{transport:4} {mode_name:8} {:>9} B  {:8.3} GB/s  ({} messages, window {}; {note})",
                r.size, r.value, r.iters, a.window
            ),
        }
    }
    send_copy(l, a.mode, STOP, &[])?;
    recv_one(l, a.mode, &mut |_, _, _| {})
}

fn connect_retry<T, E: std::fmt::Display>(
    mut f: impl FnMut() -> Result<T, E>,
) -> Result<T, BoxError> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() > deadline => return Err(format!("connect: {e}").into()),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn play(a: &Args) -> Result<(), BoxError> {
    let addr = a.addr.clone().ok_or("--addr is required for --role")?;
    match (a.transport, a.role) {
        (Transport::Shm, Role::Server) => {
            let listener = shm::Listener::bind(&addr)?;
            let mut ep = listener.accept(shm_config(a))?;
            drop(listener);
            serve(&mut ep, a.test, a.mode)
        }
        (Transport::Shm, _) => {
            let mut ep = connect_retry(|| shm::connect(&addr, shm_config(a)))?;
            client(&mut ep, a, "shm")
        }
        (Transport::Tcp, Role::Server) => {
            let listener = tcp::Listener::bind(addr.parse()?)?;
            let mut ep = listener.accept(tcp_config(a))?;
            serve(&mut ep, a.test, a.mode)
        }
        (Transport::Tcp, _) => {
            let sa: std::net::SocketAddr = addr.parse()?;
            let mut ep = connect_retry(|| tcp::connect(sa, tcp_config(a)))?;
            client(&mut ep, a, "tcp")
        }
    }
}

fn spawn_end(a: &Args, role: &str, addr: &str, cpu: usize) -> Result<Child, BoxError> {
    let exe = std::env::current_exe()?;
    let taskset = std::path::Path::new("/usr/bin/taskset").exists();
    let mut cmd = if taskset {
        let mut c = Command::new("/usr/bin/taskset");
        c.arg("-c").arg(cpu.to_string()).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    let test = match a.test {
        Test::Latency => "latency",
        Test::Bandwidth => "bandwidth",
    };
    let sizes: Vec<String> = a.sizes.iter().map(|s| s.to_string()).collect();
    cmd.args(["bench", "method", test, "--role", role, "--addr", addr])
        .args([
            "--transport",
            if a.transport == Transport::Tcp {
                "tcp"
            } else {
                "shm"
            },
        ])
        .args([
            "--mode",
            if a.mode == Mode::Busy {
                "busy"
            } else {
                "blocking"
            },
        ])
        .args(["--sizes", &sizes.join(",")])
        .args([
            "--iters",
            &a.iters.to_string(),
            "--seconds",
            &a.seconds.to_string(),
        ])
        .stdin(Stdio::null());
    if a.json {
        cmd.arg("--json");
    }
    if a.ring_chunks {
        cmd.arg("--ring-chunks");
    }
    if a.no_split_copy {
        cmd.arg("--no-split-copy");
    }
    if a.single_issuer {
        cmd.arg("--single-issuer");
    }
    if let Some(t) = a.zero_copy_threshold {
        cmd.args(["--zero-copy-threshold", &t.to_string()]);
    }
    if let Some(b) = a.ring_bytes {
        cmd.args(["--ring-bytes", &b.to_string()]);
    }
    if let Some(m) = a.ring_copy_max {
        cmd.args(["--ring-copy-max", &m.to_string()]);
    }
    if let Some(k) = a.ring_copy_chunk {
        cmd.args(["--ring-copy-chunk", &k.to_string()]);
    }
    cmd.args(["--window", &a.window.to_string()]);
    Ok(cmd.spawn()?)
}

fn reap_child(mut child: Child, what: &str, deadline: Instant) -> Result<(), BoxError> {
    loop {
        if let Some(st) = child.try_wait()? {
            return if st.success() {
                Ok(())
            } else {
                Err(format!("{what} exited with {st}").into())
            };
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what} did not finish in time").into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs the benchmark and prints its results.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    // As an agent does (`VIADUCT_MALLOC_KEEP`): the ends' per-message buffers are then reused
    // memory, not fresh pages each time, like the peers' preallocated buffers.
    viaduct_fallback::memory::keep_large_blocks(32 << 20);
    let mut a = Args {
        sizes: args.sizes.clone(),
        cpus: args.cpus.clone(),
        addr: args.addr.clone(),
        ..*args
    };
    if a.sizes.is_empty() {
        a.sizes = match a.test {
            Test::Latency => vec![8, 64, 4096],
            Test::Bandwidth => vec![65536, 4194304],
        };
    }
    if a.role != Role::Launch {
        return play(&a);
    }
    let addr = match a.transport {
        Transport::Shm => std::env::temp_dir()
            .join(format!("viaduct-bench-{}.sock", std::process::id()))
            .display()
            .to_string(),
        Transport::Tcp => {
            // Let the kernel pick a free port, then hand it to the server.
            let probe = std::net::TcpListener::bind("127.0.0.1:0")?;
            probe.local_addr()?.to_string()
        }
    };
    let (c0, c1) = (
        a.cpus.first().copied().unwrap_or(0),
        a.cpus.get(1).copied().unwrap_or(1),
    );
    let server = spawn_end(&a, "server", &addr, c1)?;
    let client = match spawn_end(&a, "client", &addr, c0) {
        Ok(c) => c,
        Err(e) => {
            let mut server = server;
            let _ = server.kill();
            let _ = server.wait();
            return Err(e);
        }
    };
    let per_size = Duration::from_secs_f64(a.seconds * 2.0 + 5.0);
    let deadline = Instant::now() + LIMIT + per_size * a.sizes.len() as u32;
    let c = reap_child(client, "client", deadline);
    let s = reap_child(server, "server", Instant::now() + Duration::from_secs(10));
    if a.transport == Transport::Shm {
        let _ = std::fs::remove_file(&addr);
    }
    c.and(s)
}
