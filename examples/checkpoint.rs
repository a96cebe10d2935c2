//! Nonblocking checkpoint writing: every rank starts writing its checkpoint with nonblocking
//! file I/O, keeps computing while the writes are in flight, then waits for them, syncs, and
//! reads the checkpoint back to check it.
//!
//! The "computation" is a few steps of a 1-D heat equation on the rank's own slab; the
//! checkpoint is the slab as it was when the writes started (the buffers belong to the writes
//! until they complete, so the computation works on its own copy). Progress between steps is a
//! `test_all` on the file requests: no helper thread, and no blocking until the end.
//!
//! ```text
//! viaduct launch -n 2 -- target/debug/examples/checkpoint [DIR]
//! mpiexec -n 2 target/debug/examples/checkpoint [DIR]
//! ```
//!
//! Files go to `DIR/ckpt-RANDOM-RANK.bin` (default: the temporary folder), where RANDOM is 16
//! fresh random hex digits, so concurrent jobs do not collide and the name tells nothing about
//! the job (in particular not its key); each rank removes its file after the check unless
//! `--keep` is given. Every file error names the file and its cause.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use viaduct_agent::bootstrap::{Bootstrap, JobKey};
use viaduct_agent::fileio::{File, FileEngine, IoBuffer, OpenOptions};
use viaduct_agent::request::{BoxError, Request, Status, test_all};

/// Cells of each rank's slab.
const CELLS: usize = 1 << 20;
/// Cells per write request.
const CHUNK: usize = 1 << 17;
/// The longest the example waits for its writes.
const LIMIT: Duration = Duration::from_secs(30);

fn encode(cells: &[f64]) -> Vec<u8> {
    cells.iter().flat_map(|c| c.to_le_bytes()).collect()
}

/// One explicit step of the heat equation with fixed ends.
fn step(u: &mut [f64], scratch: &mut Vec<f64>) {
    scratch.clear();
    scratch.extend_from_slice(u);
    for i in 1..u.len() - 1 {
        u[i] = scratch[i] + 0.25 * (scratch[i - 1] - 2.0 * scratch[i] + scratch[i + 1]);
    }
}

fn run(dir: Option<PathBuf>, keep: bool) -> Result<String, BoxError> {
    let mut boot = Bootstrap::from_env()?;
    let (rank, size) = (boot.rank(), boot.size());
    let dir = dir.unwrap_or_else(std::env::temp_dir);
    // Random, not derived from the job key: the name is visible to every user of the machine.
    let tag: String = JobKey::generate()
        .map_err(|e| format!("cannot draw a random file name: {e}"))?
        .to_hex()
        .chars()
        .take(16)
        .collect();
    let path = dir.join(format!("ckpt-{tag}-{rank}.bin"));
    let shown = path.display().to_string();
    let on_file = |what: &str, e: &dyn std::fmt::Display| format!("{shown}: {what}: {e}");

    // The slab: a hot spot whose place depends on the rank.
    let mut u: Vec<f64> = (0..CELLS)
        .map(|i| {
            if i % 4096 == (rank as usize * 97) % 4096 {
                100.0
            } else {
                0.0
            }
        })
        .collect();
    let engine = FileEngine::new(32)?;
    let file = File::open(&engine, &path, &OpenOptions::create_rw())?;

    // Start the checkpoint: one write request per chunk, all in flight at once.
    let image = encode(&u);
    let started = Instant::now();
    let mut requests: Vec<Request> = Vec::new();
    let mut claims = Vec::new();
    for (k, chunk) in image.chunks(CHUNK * 8).enumerate() {
        let (request, claim) = file
            .iwrite_at(IoBuffer::from(chunk.to_vec()), (k * CHUNK * 8) as u64)
            .into_parts();
        requests.push(request);
        claims.push(claim);
    }

    // Keep computing; look at the writes between steps without blocking.
    let mut scratch = Vec::with_capacity(CELLS);
    let mut steps = 0u32;
    let mut statuses = Vec::with_capacity(requests.len());
    let mut done = false;
    while !done && started.elapsed() < LIMIT {
        step(&mut u, &mut scratch);
        steps += 1;
        done = test_all(&mut requests, Some(&mut statuses)).map_err(|e| on_file("writing", &e))?;
    }
    if !done {
        // Out of time for overlap: wait for each write, still with a limit.
        statuses.clear();
        for r in &mut requests {
            statuses.push(
                r.wait_timeout(LIMIT)
                    .map_err(|e| on_file("writing", &e))?
                    .ok_or_else(|| on_file("writing", &"a write did not finish within 30 s"))?,
            );
        }
    }
    let overlap_ms = started.elapsed().as_secs_f64() * 1e3;
    let written: u64 = statuses.iter().map(Status::count).sum();
    if written != image.len() as u64 {
        return Err(on_file(
            "writing",
            &format!("wrote {written} bytes of {}", image.len()),
        )
        .into());
    }
    for claim in &claims {
        // The buffers came back with the completions; dropping them here frees them.
        drop(claim.take());
    }
    let sync = file.isync();
    sync.wait().map_err(|e| on_file("syncing", e.error()))?;

    // Read the checkpoint back and compare with the image taken at the start.
    let (status, buffers) = file
        .iread_at(IoBuffer::from(vec![0u8; image.len()]), 0)
        .wait()
        .map_err(|e| on_file("reading back", e.error()))?;
    let back = buffers
        .into_one()
        .ok_or_else(|| on_file("reading back", &"the read gave no buffer back"))?;
    if status.count() != image.len() as u64 || back[..] != image[..] {
        return Err(format!(
            "checkpoint {} does not read back as written",
            path.display()
        )
        .into());
    }
    if !keep {
        std::fs::remove_file(&path).map_err(|e| on_file("removing", &e))?;
    }
    boot.fence()?;
    boot.finalize()?;
    Ok(format!(
        "rank {rank} of {size}: wrote {} MiB in {} requests to {} while computing {steps} steps \
         ({overlap_ms:.1} ms), synced, read back and checked{}",
        image.len() >> 20,
        claims.len(),
        path.display(),
        if keep { "" } else { "; removed" }
    ))
}

fn main() -> ExitCode {
    // The library's warnings on stderr, filtered by VIADUCT_LOG (default: warnings).
    viaduct::agent::log::install_subscriber();
    let mut dir = None;
    let mut keep = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--keep" => keep = true,
            a if !a.starts_with('-') && dir.is_none() => dir = Some(PathBuf::from(a)),
            _ => {
                eprintln!("usage: checkpoint [--keep] [DIR]");
                return ExitCode::from(2);
            }
        }
    }
    match run(dir, keep) {
        Ok(line) => {
            println!("checkpoint: {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("checkpoint: error: {e}");
            ExitCode::FAILURE
        }
    }
}
