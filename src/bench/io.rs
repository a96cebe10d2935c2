//! Benchmark `io`: file I/O through viaduct's io_uring file engine, the same workloads as fio.
//!
//! Keeps `--depth` operations in flight on one file, waits for completions in batches of
//! `--batch` and reissues each finished operation with the same (registered) buffer, submitting
//! the refills each time `--batch` of them are queued, as fio's `--iodepth_batch_submit` and
//! `--iodepth_batch_complete_min` do. (Submitting all refills at the next wait instead left an
//! O_DIRECT device idle while the whole batch was prepared: 0.92x fio, against 0.97-0.98x.)
//! `scripts/bench-io` runs fio on the same file in the same run and prints the ratio.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use viaduct_fallback::file::{FileIo, FileIoConfig, FileOp, IoBuffer};

/// The access pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Pattern {
    /// Reads at random block-aligned offsets.
    Randread,
    /// Writes at random block-aligned offsets.
    Randwrite,
    /// Writes at increasing offsets, wrapping at `--size`.
    Seqwrite,
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Self::Randread => "randread",
            Self::Randwrite => "randwrite",
            Self::Seqwrite => "seqwrite",
        }
    }
}

/// Options of this benchmark.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct bench io --pattern randread --bs 4096 --depth 32\n  \
    viaduct bench io --pattern seqwrite --bs 1048576 --json\n  \
    viaduct bench io --pattern randread --direct --file /var/tmp/io.dat\n  \
    scripts/bench-io   (side by side with fio)"
)]
pub struct Args {
    /// Access pattern.
    #[arg(long, value_enum, default_value_t = Pattern::Randread)]
    pub pattern: Pattern,
    /// Block size in bytes (each operation moves one block).
    #[arg(long, default_value_t = 4096)]
    pub bs: usize,
    /// Operations kept in flight.
    #[arg(long, default_value_t = 32)]
    pub depth: usize,
    /// Completions waited for per wait, and refills submitted per `io_uring_enter`.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Open the file with O_DIRECT (bypass the page cache).
    #[arg(long)]
    pub direct: bool,
    /// Do not register buffers and the file with the ring.
    #[arg(long)]
    pub no_fixed: bool,
    /// File to use (created and filled up to `--size` if shorter); default: a temporary file.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Bytes of the file the offsets cover.
    #[arg(long, default_value_t = 256 << 20)]
    pub size: u64,
    /// Seconds to run.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Print one JSON object per result line instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// xorshift64*: cheap offsets.
struct Offsets {
    state: u64,
    next_seq: u64,
    blocks: u64,
    bs: u64,
    pattern: Pattern,
}

impl Offsets {
    fn next(&mut self) -> u64 {
        let block = if self.pattern == Pattern::Seqwrite {
            let b = self.next_seq;
            self.next_seq = (self.next_seq + 1) % self.blocks;
            b
        } else {
            self.state ^= self.state >> 12;
            self.state ^= self.state << 25;
            self.state ^= self.state >> 27;
            self.state.wrapping_mul(0x2545_f491_4f6c_dd1d) % self.blocks
        };
        block * self.bs
    }
}

/// Opens `path` with `opts`, refusing anything but a regular file. `O_NONBLOCK` keeps the open
/// itself from waiting (a FIFO with no peer would block it for ever); it means nothing for the
/// regular file that is then all this accepts.
fn open_regular(opts: &mut OpenOptions, path: &Path, extra_flags: i32) -> Result<File, String> {
    let file = opts
        .custom_flags(libc::O_NONBLOCK | extra_flags)
        .open(path)
        .map_err(|e| format!("{}: cannot open: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: cannot look at it: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(not_regular(path, &meta));
    }
    Ok(file)
}

fn not_regular(path: &Path, meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a plain file"
    };
    format!(
        "{}: not a regular file ({kind}); --file needs a regular file",
        path.display()
    )
}

/// Makes sure `path` holds at least `size` bytes of data (not a hole).
fn lay_out(path: &Path, size: u64) -> Result<(), String> {
    let have = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if have >= size {
        return Ok(());
    }
    let mut f = open_regular(
        OpenOptions::new().write(true).create(true).truncate(false),
        path,
        0,
    )?;
    let write_err = |e: std::io::Error| format!("{}: cannot write: {e}", path.display());
    let chunk: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let mut written = 0;
    while written < size {
        let n = (size - written).min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).map_err(write_err)?;
        written += n as u64;
    }
    f.sync_all().map_err(write_err)?;
    Ok(())
}

/// Reads the file once so page-cache runs start warm (fio with `--invalidate=0` does the same
/// after laying out its file).
fn warm(path: &Path) -> Result<(), String> {
    let mut f = open_regular(OpenOptions::new().read(true), path, 0)?;
    std::io::copy(&mut f, &mut std::io::sink())
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    Ok(())
}

struct Outcome {
    ops: u64,
    elapsed: Duration,
    /// CPU time (user + system, all threads of the process) spent in the timed loop.
    cpu: Duration,
    fixed: bool,
}

/// User + system CPU time of the whole process so far, all threads (the kernel workers of its
/// rings included), from `/proc/self/stat` in `USER_HZ` (100 per second on Linux) ticks.
fn process_cpu() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the command name (which is in parentheses and may hold spaces): state is
    // field 3, utime field 14, stime field 15.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn drive(args: &Args, file: &Arc<File>) -> Result<Outcome, Box<dyn std::error::Error>> {
    let depth = args.depth.max(1);
    let batch = args.batch.clamp(1, depth);
    let mut io = FileIo::new(&FileIoConfig {
        depth: depth.next_power_of_two() as u32,
        fixed_files: if args.no_fixed { 0 } else { 1 },
        ..FileIoConfig::default()
    })?;
    let mut fixed = false;
    let mut bufs = Vec::with_capacity(depth);
    if !args.no_fixed {
        io.register_file(file)?;
        match io.register_buffers(depth as u16, args.bs) {
            Ok(b) => {
                bufs = b;
                fixed = true;
            }
            Err(e) => eprintln!("viaduct: registering buffers failed ({e}); using plain buffers"),
        }
    }
    if bufs.is_empty() {
        for _ in 0..depth {
            bufs.push(IoBuffer::aligned(args.bs, 4096)?);
        }
    }
    let writing = args.pattern != Pattern::Randread;
    if writing {
        for b in &mut bufs {
            for (i, x) in b.iter_mut().enumerate() {
                *x = (i % 253) as u8;
            }
        }
    }
    let mut offsets = Offsets {
        state: 0x9e37_79b9_7f4a_7c15,
        next_seq: 0,
        blocks: (args.size / args.bs as u64).max(1),
        bs: args.bs as u64,
        pattern: args.pattern,
    };
    let issue = |io: &mut FileIo, buf: IoBuffer, off: u64| -> FileOp {
        if writing {
            io.write_at(file, buf, off)
        } else {
            io.read_at(file, buf, off)
        }
    };
    let mut slots: Vec<Option<FileOp>> = bufs
        .into_iter()
        .map(|b| Some(issue(&mut io, b, offsets.next())))
        .collect();
    let mut in_flight = depth;
    let mut ops = 0u64;
    let limit = Duration::from_secs_f64(args.seconds.max(0.01));
    let start = Instant::now();
    let cpu_start = process_cpu();
    let mut stopping = false;
    while in_flight > 0 {
        let want = if stopping { 1 } else { batch };
        io.wait_for(want, Some(Duration::from_secs(10)))?;
        // Refills queued since the wait submitted what was queued before it.
        let mut queued = 0;
        if !stopping && start.elapsed() >= limit {
            stopping = true;
        }
        for slot in &mut slots {
            let Some(op) = slot.take() else { continue };
            let op = match io.take(op) {
                Ok(done) => {
                    let n = done.result?;
                    if n != args.bs {
                        return Err(format!("short transfer: {n} of {} bytes", args.bs).into());
                    }
                    ops += 1;
                    let buf = done.buffers.into_one().ok_or("operation lost its buffer")?;
                    if stopping {
                        in_flight -= 1;
                        continue;
                    }
                    let op = issue(&mut io, buf, offsets.next());
                    // Submitted in batches as they fill, as fio's `iodepth_batch_submit`
                    // does: the device starts on the first batch while the next is prepared.
                    queued += 1;
                    if queued == batch {
                        io.submit()?;
                        queued = 0;
                    }
                    op
                }
                Err(op) => op,
            };
            *slot = Some(op);
        }
    }
    Ok(Outcome {
        ops,
        elapsed: start.elapsed(),
        cpu: process_cpu().saturating_sub(cpu_start),
        fixed,
    })
}

/// Runs the benchmark and prints its results.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.bs == 0 || args.bs > u16::MAX as usize * 4096 {
        return Err(format!("--bs must be in 1..=256 MiB, got {}", args.bs).into());
    }
    if args.depth == 0 || args.depth > u16::MAX as usize {
        return Err(format!(
            "--depth (operations kept in flight) must be in 1..=65535, got {}",
            args.depth
        )
        .into());
    }
    if args.size < args.bs as u64 {
        return Err("--size must hold at least one block".into());
    }
    let temp = args.file.is_none();
    let path = args.file.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("viaduct-bench-io-{}", std::process::id()))
    });
    // Refused up front: laying out or opening a FIFO, say, would wait for a peer for ever.
    if let Ok(meta) = std::fs::metadata(&path)
        && !meta.is_file()
    {
        return Err(not_regular(&path, &meta).into());
    }
    let result = (|| -> Result<Outcome, String> {
        lay_out(&path, args.size)?;
        if !args.direct {
            warm(&path)?;
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(args.pattern != Pattern::Randread);
        let direct = if args.direct { libc::O_DIRECT } else { 0 };
        let file = Arc::new(open_regular(&mut opts, &path, direct)?);
        drive(args, &file).map_err(|e| format!("{}: {e}", path.display()))
    })();
    if temp {
        let _ = std::fs::remove_file(&path);
    }
    let out = result?;
    let secs = out.elapsed.as_secs_f64();
    let iops = out.ops as f64 / secs;
    let mbytes = out.ops as f64 * args.bs as f64 / secs / 1e6;
    let cpu = out.cpu.as_secs_f64();
    let per_cpu = if cpu > 0.0 {
        out.ops as f64 / cpu
    } else {
        f64::NAN
    };
    if args.json {
        let v = serde_json::json!({
            "bench": "io",
            "pattern": args.pattern.name(),
            "bs": args.bs,
            "depth": args.depth,
            "batch": args.batch,
            "direct": args.direct,
            "fixed": out.fixed,
            "seconds": secs,
            "ops": out.ops,
            "iops": iops,
            "mbytes_per_s": mbytes,
            "cpu_s": cpu,
            "ops_per_cpu_s": per_cpu,
        });
        println!("{v}");
    } else {
        println!(
            "pattern={} bs={} depth={} batch={} direct={} fixed={} seconds={secs:.2} ops={} \
             iops={iops:.0} mbytes_per_s={mbytes:.1} cpu_s={cpu:.2} ops_per_cpu_s={per_cpu:.0}",
            args.pattern.name(),
            args.bs,
            args.depth,
            args.batch,
            args.direct,
            out.fixed,
            out.ops
        );
    }
    Ok(())
}
