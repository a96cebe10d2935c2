//! Benchmark `verbs-lat`: RC SEND ping-pong latency over verbs, measured like perftest's
//! `ib_send_lat`.
//!
//! Two processes: a server and a client exchange queue pair endpoints over TCP, then the client
//! sends, the server answers each message with one of its own, and so on. The client takes a
//! timestamp at each send; half of the time between two sends is one latency sample, and the
//! median of the samples is reported (perftest's `t_typical`). Timestamps come from the CPU's
//! time-stamp counter, as in perftest (an OS clock read would weigh on the figure in an
//! emulated guest). Both sides busy-poll their completion queues, send and receive apart, and
//! wait for each send's completion before going on (perftest's TX depth of 1). Without
//! `--server` or `--connect`, one invocation starts the server as a child process of its own
//! and runs the client against it on the loopback address.
//!
//! `scripts/bench-rxe` runs this next to `ib_send_lat` in the soft-RoCE VM and prints the ratio.

use std::error::Error;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use viaduct_verbs::clock::{self, TickRate};
use viaduct_verbs::{
    Access, Completion, CompletionQueue, Completions, ConnectOptions, Context, Endpoint, Opcode,
    ProtectionDomain, QueuePair, RecvRequest, Segment, SendOp, SendRequest, Status,
};

/// Options of this benchmark.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct bench verbs-lat -d rxe0 -s 8 -n 1000\n  \
    viaduct bench verbs-lat --server -p 18515      (one host)\n  \
    viaduct bench verbs-lat --connect HOST -p 18515  (the other)"
)]
pub struct Args {
    /// RDMA device (default: the first one found).
    #[arg(short = 'd', long)]
    pub device: Option<String>,
    /// Port of the device.
    #[arg(short = 'i', long, default_value_t = 1)]
    pub ib_port: u8,
    /// GID index to send from (default: the RoCE v2 IPv4 GID, or index 0 on InfiniBand).
    #[arg(short = 'x', long)]
    pub gid_index: Option<u32>,
    /// Ping-pong iterations.
    #[arg(short = 'n', long, default_value_t = 1000)]
    pub iters: usize,
    /// Message size in bytes.
    #[arg(short = 's', long, default_value_t = 2)]
    pub size: usize,
    /// Send messages up to this size inline (copied into the work request during the post);
    /// 0, the default, sends from a registered buffer, as perftest does on soft-RoCE (its
    /// "Max inline data: 0").
    #[arg(short = 'I', long, default_value_t = 0)]
    pub inline_size: u32,
    /// TCP port for exchanging endpoints.
    #[arg(short = 'p', long, default_value_t = 18_515)]
    pub port: u16,
    /// Run only the server side, waiting for a client.
    #[arg(long, conflicts_with = "connect")]
    pub server: bool,
    /// Run only the client side, connecting to this server host.
    #[arg(long)]
    pub connect: Option<String>,
    /// Print one JSON object per result line instead of a table.
    #[arg(long)]
    pub json: bool,
}

type BoxResult<T> = Result<T, Box<dyn Error>>;

const WAIT: Duration = Duration::from_secs(30);
const RX_DEPTH: usize = 16;

/// Runs the benchmark and prints its results.
pub fn run(args: &Args) -> BoxResult<()> {
    if args.server {
        return serve(args);
    }
    if let Some(host) = &args.connect {
        let (samples, rate) = client(args, host)?;
        return report(args, &samples, rate);
    }
    // One invocation: start the server as a child, then run the client against it. Fail here,
    // once, when the device is missing.
    drop(open(args)?);
    // The same command line plus `--server` makes the server.
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(std::env::args_os().skip(1))
        .arg("--server")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn()?;
    // The server prints one line once it listens.
    let mut ready = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut ready)?;
    }
    if !ready.starts_with("listening") {
        let _ = child.kill();
        let status = child.wait()?;
        return Err(format!("the server process did not start ({status}): {ready:?}").into());
    }
    let result = client(args, "127.0.0.1");
    if result.is_err() {
        // The server may still wait for a connection that will never come.
        let _ = child.kill();
    }
    let status = child.wait()?;
    let (samples, rate) = result?;
    if !status.success() {
        return Err(format!("the server process failed: {status}").into());
    }
    report(args, &samples, rate)
}

struct Side {
    qp: QueuePair,
    send_cq: CompletionQueue,
    recv_cq: CompletionQueue,
    /// The send buffer while no send owns it (kept as the segment list a request takes, so
    /// reposting allocates nothing).
    send_buf: Option<Vec<Segment>>,
    send_done: Completions,
    recv_done: Completions,
    /// Whether sends go inline (decided once, from the granted inline size).
    inline: bool,
}

fn open(args: &Args) -> BoxResult<Context> {
    Ok(match &args.device {
        Some(d) => Context::open(d)?,
        None => Context::open_first()?,
    })
}

/// Builds the QP, posts the receives, exchanges endpoints over `stream`, connects.
fn setup(args: &Args, stream: &mut TcpStream) -> BoxResult<Side> {
    let ctx = open(args)?;
    let pd: ProtectionDomain = ctx.alloc_pd()?;
    // Separate send and receive queues, as perftest has them.
    let send_cq = ctx.create_cq(64)?;
    let recv_cq = ctx.create_cq(2 * RX_DEPTH as u32)?;
    let mut b = pd
        .queue_pair(&send_cq, &recv_cq)
        .port(args.ib_port)
        .max_send_wr(16)
        .max_recv_wr(RX_DEPTH as u32)
        .max_inline_data(args.inline_size);
    if let Some(x) = args.gid_index {
        b = b.gid_index(x);
    }
    let prepared = b.build()?;
    let recvs = (0..RX_DEPTH)
        .map(|i| {
            Ok(RecvRequest::new(
                i as u64,
                pd.allocate(args.size, Access::LOCAL_WRITE)?,
            ))
        })
        .collect::<Result<Vec<_>, viaduct_verbs::Error>>()?;
    prepared.post_recv(recvs)?;
    stream.write_all(&prepared.endpoint().to_bytes())?;
    let mut peer = [0u8; Endpoint::ENCODED_LEN];
    stream.read_exact(&mut peer)?;
    let peer = Endpoint::from_bytes(&peer)?;
    let qp = prepared.connect(&peer, &ConnectOptions::default())?;
    let mut send_buf = pd.allocate(args.size, Access::empty())?;
    send_buf.fill(0xa5);
    let inline = args.inline_size > 0 && args.size <= qp.capabilities().max_inline_data as usize;
    Ok(Side {
        inline,
        qp,
        send_cq,
        recv_cq,
        send_buf: Some(vec![Segment::whole(send_buf)]),
        send_done: Completions::with_batch(4),
        recv_done: Completions::with_batch(4),
    })
}

/// Busy-polls `cq` until `done` holds a completion. The clock is read only after many empty
/// polls: in an emulated guest a clock read can cost as much as the poll itself.
fn busy_wait(cq: &CompletionQueue, done: &mut Completions, what: &str) -> BoxResult<Completion> {
    let mut spins = 0u32;
    let mut since: Option<Instant> = None;
    loop {
        if let Some(c) = done.pop() {
            if c.status != Status::Success {
                return Err(format!("{what} {} failed: {}", c.id, c.status).into());
            }
            return Ok(c);
        }
        cq.poll(done)?;
        spins = spins.wrapping_add(1);
        if spins % 65_536 == 0 {
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() > WAIT {
                return Err(format!("no {what} completion within 30 s").into());
            }
        }
    }
}

impl Side {
    /// Sends one message and busy-polls its completion (perftest's TX depth of 1): inline
    /// (bytes copied during the post) or from the owned buffer, which the completion hands
    /// back.
    fn send(&mut self, args: &Args, id: u64) -> BoxResult<()> {
        if self.inline {
            let data = [0xa5u8; 256];
            self.qp
                .post_send_inline(id, SendOp::Send, &data[..args.size], true)?;
            busy_wait(&self.send_cq, &mut self.send_done, "send")?;
        } else {
            let buf = self.send_buf.take().ok_or("send buffer still lent")?;
            self.qp
                .post_send([SendRequest::new(id, SendOp::Send, buf)])?;
            let mut c = busy_wait(&self.send_cq, &mut self.send_done, "send")?;
            self.send_buf = Some(std::mem::take(&mut c.segments));
        }
        Ok(())
    }

    /// Busy-polls one receive and posts its buffer again.
    fn wait_recv(&mut self) -> BoxResult<()> {
        let mut c = busy_wait(&self.recv_cq, &mut self.recv_done, "receive")?;
        if c.opcode != Opcode::Recv {
            return Err(
                format!("unexpected completion {:?} on the receive queue", c.opcode).into(),
            );
        }
        let segments = std::mem::take(&mut c.segments);
        self.qp
            .post_recv([RecvRequest::with_segments(c.id, segments)])?;
        Ok(())
    }
}

fn serve(args: &Args) -> BoxResult<()> {
    let listener = TcpListener::bind(("0.0.0.0", args.port))?;
    println!("listening on port {}", args.port);
    std::io::stdout().flush()?;
    let (mut stream, _) = listener.accept()?;
    stream.set_read_timeout(Some(WAIT))?;
    let mut side = setup(args, &mut stream)?;
    // Tell the client our QP is connected before it sends.
    stream.write_all(&[1])?;
    for i in 0..args.iters {
        side.wait_recv()?;
        side.send(args, i as u64)?;
    }
    // Wait for the client to finish before tearing down.
    let mut end = [0u8; 1];
    let _ = stream.read_exact(&mut end);
    Ok(())
}

fn client(args: &Args, host: &str) -> BoxResult<(Vec<f64>, TickRate)> {
    let start = Instant::now();
    let mut stream = loop {
        match TcpStream::connect((host, args.port)) {
            Ok(s) => break s,
            Err(e) if start.elapsed() < Duration::from_secs(10) => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(format!("connecting to {host}:{}: {e}", args.port).into()),
        }
    };
    stream.set_read_timeout(Some(WAIT))?;
    let mut side = setup(args, &mut stream)?;
    let mut ready = [0u8; 1];
    stream.read_exact(&mut ready)?;
    let mut stamps = Vec::with_capacity(args.iters + 1);
    let probe = TickRate::start();
    for i in 0..args.iters {
        stamps.push(clock::ticks());
        side.send(args, i as u64)?;
        side.wait_recv()?;
    }
    stamps.push(clock::ticks());
    let rate = probe.finish(Duration::from_millis(100));
    stream.write_all(&[2])?;
    let samples = stamps
        .windows(2)
        .map(|w| rate.to_us(w[1].wrapping_sub(w[0])) / 2.0)
        .collect();
    Ok((samples, rate))
}

fn report(args: &Args, samples: &[f64], rate: TickRate) -> BoxResult<()> {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return Err("no samples (iters = 0)".into());
    }
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    let avg = v.iter().sum::<f64>() / v.len() as f64;
    let (min, median, p99, max) = (v[0], at(0.5), at(0.99), v[v.len() - 1]);
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "bench": "verbs-lat",
                "op": "send",
                "size": args.size,
                "iters": args.iters,
                "inline": args.inline_size > 0 && args.size <= args.inline_size as usize,
                "min_us": min,
                "median_us": median,
                "avg_us": avg,
                "p99_us": p99,
                "max_us": max,
                "ticks_per_us": rate.per_us(),
            })
        );
    } else {
        println!(
            "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "bytes", "iters", "t_min[us]", "t_max[us]", "t_typical", "t_avg[us]", "99%[us]"
        );
        println!(
            "{:>8} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            args.size, args.iters, min, max, median, avg, p99
        );
    }
    Ok(())
}
