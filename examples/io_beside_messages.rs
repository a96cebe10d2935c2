//! Nonblocking file writes beside a message exchange, waited on together, and request handlers
//! with deadlines: one that is met, one that is missed.
//!
//! Every rank
//! 1. starts `WRITES` writes of 64 KiB to a file of its own (io_uring; each write is a
//!    generalized request of the agent) and, beside them, an exchange of one message with each
//!    ring neighbour;
//! 2. posts a handler on the receive, to run within 2 s of the message's arrival (it will),
//!    and one on a receive nothing will match, with a 50 ms deadline (missed: its failure
//!    function runs instead, and the program then cancels that receive);
//! 3. waits for the writes and the messages with one `wait_all`, reads the file back and checks
//!    it, and prints
//!
//! ```text
//! io_beside_messages: rank R of N ok: 8 writes and 2 messages; handler ran on time; deadline missed as expected
//! ```
//!
//! ```text
//! viaduct launch -n 2 -- target/debug/examples/io_beside_messages
//! mpiexec -n 2 target/debug/examples/io_beside_messages
//! ```
//!
//! The file goes to the temporary folder and is removed at the end.

use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use viaduct_agent::fileio::{File, FileEngine, IoBuffer, OpenOptions};
use viaduct_agent::prelude::*;
use viaduct_agent::request::{Condition, Deadline, HandlerFn, flush_handlers};

/// Writes per rank.
const WRITES: usize = 8;
/// Bytes per write.
const CHUNK: usize = 64 << 10;

/// The byte at `offset` of rank `rank`'s file.
fn byte(rank: u32, offset: usize) -> u8 {
    (offset as u32).wrapping_mul(31).wrapping_add(rank) as u8
}

fn run() -> Result<String, Box<dyn std::error::Error>> {
    let agent = Agent::init()?;
    let world = Comm::world(&agent);
    let (rank, size) = (world.rank(), world.size());
    if size < 2 {
        return Err("run with at least 2 ranks (viaduct launch -n 2 -- ...)".into());
    }
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);

    // 1. The writes and the exchange, all started before any wait.
    let engine = FileEngine::new(64)?;
    let path = std::env::temp_dir().join(format!(
        "viaduct-io-beside-messages-{}-{rank}.bin",
        std::process::id()
    ));
    let file = File::open(&engine, &path, &OpenOptions::create_rw())?;
    let mut requests = Vec::new();
    let mut claims = Vec::new();
    for k in 0..WRITES {
        let data: Vec<u8> = (k * CHUNK..(k + 1) * CHUNK)
            .map(|o| byte(rank, o))
            .collect();
        // A file request splits into a plain request (to wait on beside others) and the claim
        // on its buffers, given back once it completed.
        let (request, claim) = file
            .iwrite_at(IoBuffer::from(data), (k * CHUNK) as u64)
            .into_parts();
        requests.push(request);
        claims.push(claim);
    }
    let (recv, buf) = world.irecv(4, Source::Rank(prev), TagMatch::Tag(1))?;

    // 2. A handler that will run: on the receive, within 2 s of its completion.
    let (said, heard) = mpsc::channel::<&'static str>();
    let (on_time, late) = (said.clone(), said.clone());
    recv.post_handler(
        Condition::Complete,
        Some(HandlerFn::new(move |_, status| {
            let _ = on_time.send(if status.count() == 4 {
                "ran"
            } else {
                "wrong count"
            });
        })),
        Some(HandlerFn::new(move |_, _| {
            let _ = late.send("missed");
        })),
        Deadline::After(Duration::from_secs(2)),
    )?;
    requests.push(recv);
    requests.push(world.isend(next, 1, &rank.to_le_bytes())?);

    // A handler that cannot run: nothing is ever sent with tag 2, so its 50 ms deadline passes
    // and the failure function runs instead (on the agent's handler thread, by a timer).
    let (mut never, _never_buf) = world.irecv(4, Source::Rank(prev), TagMatch::Tag(2))?;
    let (ran, failed) = (said.clone(), said);
    never.post_handler(
        Condition::Complete,
        Some(HandlerFn::new(move |_, _| {
            let _ = ran.send("never: ran");
        })),
        Some(HandlerFn::new(move |_, _| {
            let _ = failed.send("never: missed");
        })),
        Deadline::At(std::time::Instant::now() + Duration::from_millis(50)),
    )?;

    // 3. One wait for writes and messages together.
    wait_all(&mut requests, None)?;
    for claim in &claims {
        claim
            .take()
            .ok_or("a write's buffers were not given back")?;
    }
    let got = u32::from_le_bytes(buf.take()[..4].try_into()?);
    if got != prev {
        return Err(format!("the message from rank {prev} carried {got}").into());
    }
    // The handlers whose condition was reached have run once this returns.
    flush_handlers(Duration::from_secs(10))?;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        seen.push(
            heard.recv_timeout(Duration::from_secs(10)).map_err(|_| {
                format!("only {seen:?} of the two handlers' words came within 10 s")
            })?,
        );
    }
    seen.sort_unstable();
    if seen != ["never: missed", "ran"] {
        return Err(format!("handlers said {seen:?}").into());
    }
    // The receive nobody answers: cancelled, and its status says so.
    never.cancel()?;
    let status = never.wait()?;
    if !status.test_cancelled() {
        return Err("the unmatched receive was not cancelled".into());
    }

    // The file, read back with one more nonblocking read.
    file.isync().wait()?;
    let (_, back) = file
        .iread_at(IoBuffer::from(vec![0u8; WRITES * CHUNK]), 0)
        .wait()?;
    let back = back.into_one().ok_or("the read gave no buffer back")?;
    if let Some(at) = (0..WRITES * CHUNK).find(|&o| back[o] != byte(rank, o)) {
        return Err(format!("{}: wrong byte at offset {at}", path.display()).into());
    }
    std::fs::remove_file(&path)?;
    world.barrier()?;
    agent.finalize()?;
    Ok(format!(
        "rank {rank} of {size} ok: {WRITES} writes and 2 messages; handler ran on time; deadline missed as expected"
    ))
}

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("io_beside_messages: {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The agent's errors carry their whole cause chain in their text.
            eprintln!("io_beside_messages: error: {e}");
            ExitCode::FAILURE
        }
    }
}
