//! One rank of the demo: the tour over each method, then file I/O and a handler.
//!
//! Rank 0 prints one `@@stage TEXT` line as each stage starts and, at the end, one
//! `@@result JSON` line with the [`Report`]; `viaduct demo` reads these from the launcher's
//! output. Every rank fails with a message naming the stage if anything goes wrong.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use viaduct_agent::agent::Agent;
use viaduct_agent::bootstrap::Bootstrap;
use viaduct_agent::comm::Comm;
use viaduct_agent::fileio::{File, FileEngine, FileRequest, IoBuffer, OpenOptions};
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::{Condition, Deadline, HandlerFn, Request, post_handler};
use viaduct_agent::xfer::{Datatype, ReduceOp};

use super::collective::{allreduce_sum, broadcast};
use super::error::DemoError;
use super::mesh::{Mesh, Method, Waiting};
use super::p2p::{AgentPeers, PointToPoint};
use super::report::{
    AgentReport, Bandwidth, Collective, FileReport, HandlerReport, Latency, MethodReport, Report,
};

/// What one rank is asked to do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Folder for the files.
    pub out: PathBuf,
    /// Folder for the shared-memory method's rendezvous sockets.
    pub sockets: PathBuf,
    /// The methods to tour, in order.
    pub methods: Vec<Method>,
    /// Shorter runs (for tests).
    pub quick: bool,
}

/// Tag of a ping (low bit: 1 on the last one).
const PING: u64 = 3 << 40;
/// Tag of a message of a bandwidth stream.
const STREAM: u64 = 4 << 40;
/// Tag of the end of a bandwidth stream, and of its acknowledgement.
const STREAM_END: u64 = 5 << 40;
/// Payload of the file stage's state file.
const STATE_BYTES: usize = 8 << 20;
/// Size of each state write request.
const STATE_CHUNK: usize = 1 << 20;

struct Budget {
    latency: Duration,
    bandwidth: Duration,
    allreduce_iters: u32,
    bcast_iters: u32,
}

impl Budget {
    fn new(quick: bool) -> Self {
        if quick {
            Budget {
                latency: Duration::from_millis(100),
                bandwidth: Duration::from_millis(100),
                allreduce_iters: 10,
                bcast_iters: 5,
            }
        } else {
            Budget {
                latency: Duration::from_millis(500),
                bandwidth: Duration::from_millis(500),
                allreduce_iters: 100,
                bcast_iters: 30,
            }
        }
    }
}

/// Prints a stage line on rank 0.
fn stage(rank: u32, text: &str) {
    if rank == 0 {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "@@stage {text}");
        let _ = out.flush();
    }
}

/// Runs this rank's part of the demo.
pub fn run(plan: &Plan) -> Result<(), DemoError> {
    let started = Instant::now();
    let mut boot = Bootstrap::from_env()?;
    let (rank, size) = (boot.rank(), boot.size());
    if size < 2 {
        return Err(DemoError::Job(
            "the demo needs at least 2 ranks (run `viaduct demo`, which starts them)".into(),
        ));
    }
    let budget = Budget::new(plan.quick);
    let mut meshes = Vec::new();
    let mut reports = Vec::new();
    for &method in &plan.methods {
        let m = method.name();
        stage(rank, &format!("{m}: connecting {size} ranks"));
        let t = Instant::now();
        let mut mesh = Mesh::connect(&mut boot, method, &plan.sockets)?;
        mesh.flush()?;
        boot.fence()?;
        let connect_ms = t.elapsed().as_secs_f64() * 1e3;

        stage(rank, &format!("{m}: ping-pong latency, rank 0 <-> rank 1"));
        let mut latency = Vec::new();
        for s in [8usize, 4096] {
            if let Some(l) = pingpong(&mut mesh, s, budget.latency)? {
                latency.push(l);
            }
        }
        boot.fence()?;

        stage(rank, &format!("{m}: bandwidth, rank 0 -> rank 1"));
        let mut bandwidth = Vec::new();
        for s in [64usize << 10, 1 << 20] {
            if let Some(b) = stream(&mut mesh, s, budget.bandwidth)? {
                bandwidth.push(b);
            }
        }
        boot.fence()?;

        stage(rank, &format!("{m}: allreduce (sum) over {size} ranks"));
        let allreduce = allreduce_stage(&mut mesh, budget.allreduce_iters)?;
        stage(rank, &format!("{m}: broadcast from rank 0 to {size} ranks"));
        let broadcast = broadcast_stage(&mut mesh, budget.bcast_iters)?;
        mesh.flush()?;
        boot.fence()?;
        reports.push(MethodReport {
            method: m.to_string(),
            note: mesh.note(if rank == 0 { 1 } else { 0 }),
            connect_ms,
            latency,
            bandwidth,
            allreduce,
            broadcast,
        });
        meshes.push(mesh);
    }
    let mesh = meshes
        .first_mut()
        .ok_or_else(|| DemoError::Job("no method to run the demo over".into()))?;

    stage(
        rank,
        &format!(
            "nonblocking file I/O: every rank writes its results and {} MiB of state while running allreduces ({})",
            STATE_BYTES >> 20,
            mesh.method().name()
        ),
    );
    let file = file_stage(mesh, &plan.out, &reports)?;

    stage(
        rank,
        "handler with a deadline: a request completed by a timer thread, and one deadline missed on purpose",
    );
    let handler = handler_stage(mesh)?;
    mesh.flush()?;
    boot.fence()?;
    drop(meshes);
    if rank == 0 {
        let report = Report {
            ranks: size,
            bootstrap: format!("{:?}", boot.protocol()),
            methods: reports,
            agent: Vec::new(),
            file,
            handler,
            verbs: None,
            verbs_skipped: None,
            seconds: started.elapsed().as_secs_f64(),
        };
        let json = serde_json::to_string(&report)
            .map_err(|e| DemoError::Job(format!("cannot encode the report: {e}")))?;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "@@result {json}");
        let _ = out.flush();
    }
    boot.finalize()?;
    Ok(())
}

/// Runs this rank's part of the agent round: the communication agent started from the
/// environment (`VIADUCT_TRANSPORT` picks its method), then [`agent_stage`]. Rank 0 prints
/// `@@agent JSON` with the [`AgentReport`].
pub fn run_agent(quick: bool) -> Result<(), DemoError> {
    let agent = Agent::init()?;
    let rank = agent.rank();
    if agent.size() < 2 {
        return Err(DemoError::Job(
            "the agent round needs at least 2 ranks".into(),
        ));
    }
    let mut peers = AgentPeers { agent };
    let report = agent_stage(&mut peers, &Budget::new(quick))?;
    peers.agent.finalize()?;
    if rank == 0 {
        let json = serde_json::to_string(&report)
            .map_err(|e| DemoError::Job(format!("cannot encode the report: {e}")))?;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "@@agent {json}");
        let _ = out.flush();
    }
    Ok(())
}

/// Tag of the agent stage's pings.
const AGENT_PING: u32 = 7;
/// Tag of rank 0's go-ahead to the ranks that sat out the ping-pong.
const AGENT_GO: u32 = 9;
/// Tag of the message the receive handler waits for.
const AGENT_HANDLED: u32 = 8;

/// The agent's own round: tagged ping-pong, allreduce, and a handler on a receive request.
fn agent_stage(peers: &mut AgentPeers, budget: &Budget) -> Result<AgentReport, DemoError> {
    let rank = peers.agent.rank();
    let other = if rank == 0 { 1 } else { 0 };
    let method = peers.agent.method_of(other).unwrap_or("?").to_string();
    // Ping-pong between ranks 0 and 1.
    let mut latency = None;
    if rank <= 1 {
        let data = [0xA5u8; 8];
        let mut buf = [0u8; 8];
        let start = Instant::now();
        let warm = budget.latency / 5;
        let mut samples = Vec::new();
        loop {
            // Rank 0 decides when to stop and says so in the ping's first byte.
            let last = rank == 0 && start.elapsed() > budget.latency + warm;
            if rank == 0 {
                let t = Instant::now();
                let mut ping = data;
                ping[0] = u8::from(last);
                peers.send_u32(1, AGENT_PING, &ping)?;
                peers.recv_u32(1, AGENT_PING, &mut buf)?;
                if start.elapsed() > warm {
                    samples.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
                }
                if last {
                    break;
                }
            } else {
                peers.recv_u32(0, AGENT_PING, &mut buf)?;
                peers.send_u32(0, AGENT_PING, &buf)?;
                if buf[0] == 1 {
                    break;
                }
            }
        }
        samples.sort_by(f64::total_cmp);
        latency = Some(Latency {
            size: 8,
            iters: samples.len() as u64,
            median_us: samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN),
            waiting: "agent progress (adaptive spin, then method wait)".into(),
        });
        if rank == 0 {
            for r in 2..peers.agent.size() {
                peers.send_u32(r, AGENT_GO, &[])?;
            }
        }
    } else {
        // Sleep between tests while ranks 0 and 1 measure, instead of competing for the cores.
        let (mut go, _) = peers
            .agent
            .irecv(0, Source::Rank(0), TagMatch::Tag(AGENT_GO))?;
        let started = Instant::now();
        while go.test()?.is_none() {
            if started.elapsed() > STEP {
                return Err(DemoError::Timeout {
                    what: format!("rank 0's go-ahead to rank {rank}"),
                    limit: STEP,
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    // The agent's own collectives (xfer blocks): a few rounds, every result checked.
    let world = Comm::world(&peers.agent);
    let allreduce = comm_allreduce_stage(&world, budget.allreduce_iters.min(20))?;
    let broadcast = comm_broadcast_stage(&world, budget.bcast_iters)?;

    // A handler with a deadline on a receive request: rank 0 posts the receive and the
    // handler; rank 1 sends 20 ms later.
    let deadline = Duration::from_millis(100);
    let mut on_time = true;
    if rank == 0 {
        let shared: Shared = Arc::default();
        let (mut req, data) =
            peers
                .agent
                .irecv(64, Source::Rank(1), TagMatch::Tag(AGENT_HANDLED))?;
        post(&req, &shared, Deadline::After(deadline))?;
        let started = Instant::now();
        let outcome = loop {
            {
                let (lock, _) = &*shared;
                let o = lock.lock().unwrap_or_else(|p| p.into_inner());
                if o.handler_at.is_some() || o.failure_at.is_some() {
                    break (o.handler_at, o.failure_at);
                }
            }
            if started.elapsed() > STEP {
                return Err(DemoError::Timeout {
                    what: "the handler of the agent's receive".into(),
                    limit: STEP,
                });
            }
            peers.progress();
        };
        req.wait_timeout(STEP)?.ok_or_else(|| DemoError::Timeout {
            what: "the handled receive".into(),
            limit: STEP,
        })?;
        if data.take() != b"handled" {
            return Err(DemoError::Wrong(
                "the handled receive holds other bytes".into(),
            ));
        }
        on_time = matches!(outcome, (Some(_), None));
        if !on_time {
            return Err(DemoError::Wrong(format!(
                "the handler on the agent's receive did not start within {deadline:?}"
            )));
        }
    } else if rank == 1 {
        std::thread::sleep(Duration::from_millis(20));
        peers.send_u32(0, AGENT_HANDLED, b"handled")?;
    }
    Ok(AgentReport {
        method,
        latency,
        allreduce,
        broadcast,
        receive_handler_on_time: on_time,
        deadline_ms: deadline.as_secs_f64() * 1e3,
    })
}

/// `Comm::allreduce` (sum of f64, in place) on the agent's communicator, checked.
fn comm_allreduce_stage(world: &Comm, iters: u32) -> Result<Collective, DemoError> {
    let (rank, size) = (world.rank(), world.size());
    let mut t = Instant::now();
    for seq in 0..=iters {
        if seq == 1 {
            t = Instant::now(); // round 0 is the warm-up
        }
        let mut buf = Vec::with_capacity(ALLREDUCE_LEN * 8);
        for i in 0..ALLREDUCE_LEN {
            buf.extend_from_slice(&contribution(rank, i, seq).to_ne_bytes());
        }
        world.allreduce(&mut buf, Datatype::F64, ReduceOp::Sum)?;
        for (i, c) in buf.chunks_exact(8).enumerate() {
            let x = f64::from_ne_bytes(c.try_into().unwrap_or_default());
            let want = expected_sum(size, i, seq);
            if x != want {
                return Err(DemoError::Wrong(format!(
                    "agent allreduce {seq} on rank {rank}: element {i} is {x}, expected {want}"
                )));
            }
        }
    }
    Ok(Collective {
        bytes: ALLREDUCE_LEN * 8,
        iters,
        mean_us: t.elapsed().as_secs_f64() * 1e6 / f64::from(iters.max(1)),
    })
}

/// `Comm::bcast` of [`BCAST_BYTES`] from rank 0 on the agent's communicator, checked.
fn comm_broadcast_stage(world: &Comm, iters: u32) -> Result<Collective, DemoError> {
    let rank = world.rank();
    let mut buf = vec![0u8; BCAST_BYTES];
    let t = Instant::now();
    for seq in 0..iters {
        if rank == 0 {
            for (j, b) in buf.iter_mut().enumerate() {
                *b = bcast_pattern(seq, j);
            }
        } else {
            buf.fill(0);
        }
        world.bcast(&mut buf, 0)?;
        if let Some(j) = (0..buf.len()).find(|&j| buf[j] != bcast_pattern(seq, j)) {
            return Err(DemoError::Wrong(format!(
                "agent broadcast {seq} on rank {rank}: byte {j} differs from rank 0's"
            )));
        }
    }
    Ok(Collective {
        bytes: BCAST_BYTES,
        iters,
        mean_us: t.elapsed().as_secs_f64() * 1e6 / f64::from(iters.max(1)),
    })
}

/// Limit on one step of the agent stage.
const STEP: Duration = Duration::from_secs(20);

/// Ping-pong between ranks 0 and 1 (the others wait); rank 0 gets the figure.
fn pingpong(mesh: &mut Mesh, size: usize, budget: Duration) -> Result<Option<Latency>, DemoError> {
    let rank = mesh.rank();
    if rank > 1 {
        return Ok(None);
    }
    mesh.waiting = ping_waiting(mesh.method());
    let result = if rank == 0 {
        let data = vec![0xA5u8; size];
        let mut samples = Vec::new();
        let start = Instant::now();
        let warm = budget / 5;
        let mut n = 0u64;
        loop {
            let last = start.elapsed() > budget + warm || n >= 1_000_000;
            let t = Instant::now();
            mesh.send(1, PING | u64::from(last), &data)?;
            let got = mesh.recv(1, PING | u64::from(last), |d| d.len())?;
            if got != size {
                return Err(DemoError::Wrong(format!(
                    "rank 1 echoed {got} bytes of a {size}-byte ping"
                )));
            }
            if start.elapsed() > warm {
                samples.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
            }
            n += 1;
            if last {
                break;
            }
        }
        samples.sort_by(f64::total_cmp);
        Some(Latency {
            size,
            iters: samples.len() as u64,
            median_us: samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN),
            waiting: match mesh.waiting {
                Waiting::Busy => "busy-poll".into(),
                Waiting::Sleep => "method wait".into(),
            },
        })
    } else {
        let mut echo = Vec::new();
        loop {
            let tag = mesh.recv_with(0, |t, d| {
                echo.clear();
                echo.extend_from_slice(d);
                Ok(t)
            })?;
            if tag & !1 != PING {
                return Err(DemoError::Protocol(format!(
                    "rank 1 expected a ping, got tag {tag:#x}"
                )));
            }
            mesh.send(0, tag, &echo)?;
            if tag & 1 == 1 {
                break;
            }
        }
        None
    };
    mesh.flush()?;
    mesh.waiting = Waiting::Sleep;
    Ok(result)
}

/// How the ping-pong ends wait: set `VIADUCT_DEMO_WAIT=busy|sleep` to choose; by default
/// shared memory busy-polls and TCP uses the method's own wait (it spins on the completion
/// queue, then sleeps in `io_uring_enter`), which leaves the kernel's network work a core.
fn ping_waiting(method: Method) -> Waiting {
    match std::env::var("VIADUCT_DEMO_WAIT").as_deref() {
        Ok("busy") => Waiting::Busy,
        Ok("sleep") => Waiting::Sleep,
        _ if method == Method::Tcp => Waiting::Sleep,
        _ => Waiting::Busy,
    }
}

/// A stream of `size`-byte messages from rank 0 to rank 1 for `budget`; rank 0 gets the figure.
fn stream(mesh: &mut Mesh, size: usize, budget: Duration) -> Result<Option<Bandwidth>, DemoError> {
    let rank = mesh.rank();
    if rank > 1 {
        return Ok(None);
    }
    mesh.waiting = Waiting::Busy;
    let result = if rank == 0 {
        let data = vec![0x5Au8; size];
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < budget {
            mesh.send(1, STREAM, &data)?;
            sent += 1;
        }
        mesh.send(1, STREAM_END, &[])?;
        // Rank 1 acknowledges with the number of whole messages it took.
        let got = mesh.recv(1, STREAM_END, |d| {
            <[u8; 8]>::try_from(d).map(u64::from_le_bytes).ok()
        })?;
        let secs = start.elapsed().as_secs_f64();
        if got != Some(sent) {
            return Err(DemoError::Wrong(format!(
                "rank 0 streamed {sent} messages of {size} bytes, rank 1 counted {got:?}"
            )));
        }
        Some(Bandwidth {
            size,
            messages: sent,
            gbytes_per_s: (sent as f64 * size as f64) / secs / 1e9,
        })
    } else {
        let mut got = 0u64;
        loop {
            let (tag, len) = mesh.recv_with(0, |t, d| Ok((t, d.len())))?;
            match tag {
                STREAM if len == size => got += 1,
                STREAM_END => break,
                _ => {
                    return Err(DemoError::Protocol(format!(
                        "rank 1 got tag {tag:#x} with {len} bytes in a {size}-byte stream"
                    )));
                }
            }
        }
        mesh.send(0, STREAM_END, &got.to_le_bytes())?;
        None
    };
    mesh.flush()?;
    mesh.waiting = Waiting::Sleep;
    Ok(result)
}

/// Elements of the allreduce vector.
const ALLREDUCE_LEN: usize = 1024;

/// What rank `rank` contributes at element `i` in round `seq`: small integers, so the f64 sum
/// is exact and can be checked for equality.
fn contribution(rank: u32, i: usize, seq: u32) -> f64 {
    f64::from(rank + 1) * ((i % 7) as f64 + 1.0) + f64::from(seq % 5)
}

fn expected_sum(size: u32, i: usize, seq: u32) -> f64 {
    (0..size).map(|r| contribution(r, i, seq)).sum()
}

/// One checked allreduce with sequence number `seq`.
fn checked_allreduce<P: PointToPoint>(mesh: &mut P, seq: u32) -> Result<(), DemoError> {
    let (rank, size) = (mesh.rank(), mesh.size());
    let mut v: Vec<f64> = (0..ALLREDUCE_LEN)
        .map(|i| contribution(rank, i, seq))
        .collect();
    allreduce_sum(mesh, &mut v, seq)?;
    for (i, x) in v.iter().enumerate() {
        let want = expected_sum(size, i, seq);
        if *x != want {
            return Err(DemoError::Wrong(format!(
                "allreduce {seq} on rank {rank}: element {i} is {x}, expected {want}"
            )));
        }
    }
    Ok(())
}

fn allreduce_stage<P: PointToPoint>(mesh: &mut P, iters: u32) -> Result<Collective, DemoError> {
    checked_allreduce(mesh, 0)?;
    let t = Instant::now();
    for seq in 1..=iters {
        checked_allreduce(mesh, seq)?;
    }
    Ok(Collective {
        bytes: ALLREDUCE_LEN * 8,
        iters,
        mean_us: t.elapsed().as_secs_f64() * 1e6 / f64::from(iters.max(1)),
    })
}

/// Bytes of the broadcast buffer.
const BCAST_BYTES: usize = 256 << 10;

fn bcast_pattern(seq: u32, j: usize) -> u8 {
    (j as u32)
        .wrapping_mul(31)
        .wrapping_add(seq.wrapping_mul(7)) as u8
}

fn broadcast_stage<P: PointToPoint>(mesh: &mut P, iters: u32) -> Result<Collective, DemoError> {
    let rank = mesh.rank();
    let mut buf = vec![0u8; BCAST_BYTES];
    let t = Instant::now();
    // Sequence numbers apart from the allreduces' (whose broadcast half uses the same tags).
    for seq in 1_000_000..1_000_000 + iters {
        if rank == 0 {
            for (j, b) in buf.iter_mut().enumerate() {
                *b = bcast_pattern(seq, j);
            }
        } else {
            buf.fill(0);
        }
        broadcast(mesh, 0, &mut buf, seq)?;
        if let Some(j) = (0..buf.len()).find(|&j| buf[j] != bcast_pattern(seq, j)) {
            return Err(DemoError::Wrong(format!(
                "broadcast {seq} on rank {rank}: byte {j} differs from rank 0's"
            )));
        }
    }
    Ok(Collective {
        bytes: BCAST_BYTES,
        iters,
        mean_us: t.elapsed().as_secs_f64() * 1e6 / f64::from(iters.max(1)),
    })
}

fn state_byte(rank: u32, j: usize) -> u8 {
    (j as u32 ^ rank.wrapping_mul(0x9E37)).wrapping_mul(2_654_435_761) as u8 >> 1
}

/// Completes the file requests that are done, recording their byte counts; true when all are.
fn test_files(reqs: &mut [FileRequest], counts: &mut [Option<u64>]) -> Result<bool, DemoError> {
    let mut all = true;
    for (r, count) in reqs.iter_mut().zip(counts.iter_mut()) {
        if count.is_some() {
            continue;
        }
        match r.request.test()? {
            Some(status) => *count = Some(status.count()),
            None => all = false,
        }
    }
    Ok(all)
}

fn wait_file(req: FileRequest, what: &str) -> Result<(u64, Option<IoBuffer>), DemoError> {
    let (mut request, claim) = req.into_parts();
    let status = request
        .wait_timeout(Duration::from_secs(20))?
        .ok_or_else(|| DemoError::Timeout {
            what: what.to_string(),
            limit: Duration::from_secs(20),
        })?;
    Ok((status.count(), claim.take().and_then(|b| b.into_one())))
}

fn file_stage(
    mesh: &mut Mesh,
    out: &Path,
    reports: &[MethodReport],
) -> Result<FileReport, DemoError> {
    let (rank, size) = (mesh.rank(), mesh.size());
    let engine = FileEngine::new(64)?;
    let results_path = out.join(format!("rank-{rank}.json"));
    let state_path = out.join(format!("rank-{rank}.state"));
    let results = File::open(&engine, &results_path, &OpenOptions::create_rw())?;
    let state = File::open(&engine, &state_path, &OpenOptions::create_rw())?;

    let mine = serde_json::json!({
        "rank": rank,
        "ranks": size,
        "methods": reports.iter().map(|m| serde_json::json!({
            "method": m.method,
            "connect_ms": m.connect_ms,
            "allreduce_mean_us": m.allreduce.mean_us,
            "broadcast_mean_us": m.broadcast.mean_us,
            "latency": m.latency,
            "bandwidth": m.bandwidth,
        })).collect::<Vec<_>>(),
    });
    let text = format!("{mine:#}\n").into_bytes();
    let text_len = text.len() as u64;

    let t = Instant::now();
    let mut writes = vec![results.iwrite_at(IoBuffer::from(text.clone()), 0)];
    for off in (0..STATE_BYTES).step_by(STATE_CHUNK) {
        let chunk: Vec<u8> = (off..off + STATE_CHUNK)
            .map(|j| state_byte(rank, j))
            .collect();
        writes.push(state.iwrite_at(IoBuffer::from(chunk), off as u64));
    }
    let requests = writes.len() as u32;
    // Keep communicating while the writes are in flight: at least one allreduce, then as many
    // as fit until every write has completed.
    let mut during = 0u64;
    let mut seq = 2_000_000u32;
    let mut counts = vec![None; writes.len()];
    loop {
        checked_allreduce(mesh, seq)?;
        seq += 1;
        during += 1;
        // Every rank must run the same number of allreduces: go on while any rank still
        // has writes in flight (a one-element allreduce of "still writing" flags).
        let mine = !test_files(&mut writes, &mut counts)? && t.elapsed() < Duration::from_secs(20);
        let mut writing = [f64::from(u8::from(mine))];
        allreduce_sum(mesh, &mut writing, seq)?;
        seq += 1;
        if writing[0] == 0.0 {
            break;
        }
    }
    let mut written = 0u64;
    for (i, (w, count)) in writes.into_iter().zip(counts).enumerate() {
        written += match count {
            Some(n) => n,
            None => wait_file(w, &format!("file write {i} of rank {rank}"))?.0,
        };
    }
    let expect = text_len + STATE_BYTES as u64;
    if written != expect {
        return Err(DemoError::Wrong(format!(
            "rank {rank} wrote {written} bytes, expected {expect}"
        )));
    }
    wait_file(results.isync(), "sync of the results file")?;
    wait_file(state.isync(), "sync of the state file")?;
    let write_ms = t.elapsed().as_secs_f64() * 1e3;

    // Read both back through the same engine and compare.
    let (n1, b1) = wait_file(
        results.iread_at(IoBuffer::from(vec![0u8; text.len()]), 0),
        "read back of the results file",
    )?;
    let (n2, b2) = wait_file(
        state.iread_at(IoBuffer::from(vec![0u8; STATE_BYTES]), 0),
        "read back of the state file",
    )?;
    let ok_text = n1 == text_len && b1.as_deref() == Some(&text[..]);
    let ok_state = n2 == STATE_BYTES as u64
        && b2
            .as_deref()
            .is_some_and(|b| b.iter().enumerate().all(|(j, &x)| x == state_byte(rank, j)));
    let bad = f64::from(u8::from(!(ok_text && ok_state)));

    // Sum over ranks: allreduces during writes, and how many ranks found a mismatch.
    let mut v = vec![during as f64, bad];
    allreduce_sum(mesh, &mut v, seq)?;
    if v[1] != 0.0 {
        return Err(DemoError::Wrong(format!(
            "{} rank(s) read back something other than what they wrote",
            v[1]
        )));
    }
    let mut files = Vec::new();
    for r in 0..size {
        files.push(out.join(format!("rank-{r}.json")).display().to_string());
    }
    for r in 0..size {
        files.push(out.join(format!("rank-{r}.state")).display().to_string());
    }
    Ok(FileReport {
        files,
        bytes_per_rank: expect,
        requests_per_rank: requests,
        allreduces_during_writes: v[0] as u64,
        write_ms,
        verified: true,
    })
}

/// What a handler posting saw.
#[derive(Default)]
struct Outcome {
    handler_at: Option<Instant>,
    failure_at: Option<Instant>,
}

type Shared = Arc<(Mutex<Outcome>, Condvar)>;

fn record(shared: &Shared, handler: bool) {
    let (lock, cv) = &**shared;
    let mut o = lock.lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    if handler {
        o.handler_at = Some(now);
    } else {
        o.failure_at = Some(now);
    }
    cv.notify_all();
}

fn post(req: &Request, shared: &Shared, deadline: Deadline) -> Result<(), DemoError> {
    let (h, f) = (Arc::clone(shared), Arc::clone(shared));
    post_handler(
        req,
        Condition::Complete,
        Some(HandlerFn::new(move |_, _| record(&h, true))),
        Some(HandlerFn::new(move |_, _| record(&f, false))),
        deadline,
    )?;
    Ok(())
}

fn await_outcome(
    shared: &Shared,
    what: &str,
) -> Result<(Option<Instant>, Option<Instant>), DemoError> {
    let (lock, cv) = &**shared;
    let limit = Duration::from_secs(10);
    let o = lock.lock().unwrap_or_else(|p| p.into_inner());
    let (o, _) = cv
        .wait_timeout_while(o, limit, |o| {
            o.handler_at.is_none() && o.failure_at.is_none()
        })
        .unwrap_or_else(|p| p.into_inner());
    if o.handler_at.is_none() && o.failure_at.is_none() {
        return Err(DemoError::Timeout {
            what: what.to_string(),
            limit,
        });
    }
    Ok((o.handler_at, o.failure_at))
}

fn handler_stage(mesh: &mut Mesh) -> Result<HandlerReport, DemoError> {
    let (rank, size) = (mesh.rank(), mesh.size());
    let deadline = Duration::from_millis(100);
    let on_time: Shared = Arc::default();
    let missed: Shared = Arc::default();
    let (mut req, done) = Request::generalized(());
    let (mut late_req, late_done) = Request::generalized(());
    post(&req, &on_time, Deadline::After(deadline))?;
    // This one must start by 5 ms from now, but its request completes only after 40 ms: the
    // failure function runs at the deadline instead.
    post(
        &late_req,
        &missed,
        Deadline::At(Instant::now() + Duration::from_millis(5)),
    )?;
    let completed_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let at = Arc::clone(&completed_at);
    let timer = std::thread::Builder::new()
        .name("demo-timer".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            *at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            let a = done.complete();
            std::thread::sleep(Duration::from_millis(20));
            let b = late_done.complete();
            a.and(b)
        })
        .map_err(|e| DemoError::os("starting the timer thread", e))?;
    let limit = Duration::from_secs(10);
    let timed_out = |what: &str| DemoError::Timeout {
        what: what.to_string(),
        limit,
    };
    req.wait_timeout(limit)?
        .ok_or_else(|| timed_out("completion of the timer's request"))?;
    late_req
        .wait_timeout(limit)?
        .ok_or_else(|| timed_out("completion of the second timer request"))?;
    timer
        .join()
        .map_err(|_| DemoError::Job("the timer thread panicked".into()))??;
    let (handler_at, failure_at) = await_outcome(&on_time, "the handler")?;
    let completed = completed_at
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .ok_or_else(|| DemoError::Job("the timer recorded no completion time".into()))?;
    let delay = match (handler_at, failure_at) {
        (Some(h), None) => h.saturating_duration_since(completed),
        _ => {
            return Err(DemoError::Wrong(format!(
                "rank {rank}: the handler did not start within its {deadline:?} deadline (its failure function ran)"
            )));
        }
    };
    let (late_handler, late_failure) = await_outcome(&missed, "the failure function")?;
    let failure_ran = late_failure.is_some() && late_handler.is_none();
    if !failure_ran {
        return Err(DemoError::Wrong(format!(
            "rank {rank}: a handler whose deadline passed before completion ran anyway"
        )));
    }
    // Every rank's delay at its own index; the sum gives all of them.
    let mut v = vec![0.0; size as usize];
    v[rank as usize] = delay.as_secs_f64() * 1e6;
    allreduce_sum(mesh, &mut v, 3_000_000)?;
    Ok(HandlerReport {
        deadline_ms: deadline.as_secs_f64() * 1e3,
        delay_us: delay.as_secs_f64() * 1e6,
        max_delay_us: v.iter().copied().fold(0.0, f64::max),
        missed_deadline_failure_ran: failure_ran,
    })
}
