//! File operations on real files in the temp directory: contents byte-exact under random offsets
//! and sizes, end of file, named errors, O_DIRECT checks, cancel.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use viaduct_fallback::file::{FileCompletion, FileError, FileIo, FileIoConfig, FileOp, IoBuffer};

const WAIT: Option<Duration> = Some(Duration::from_secs(30));

/// A file path in the temp directory, removed on drop.
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        Self(std::env::temp_dir().join(format!("viaduct-file-{}-{n}-{name}", std::process::id())))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn engine() -> Option<FileIo> {
    match FileIo::new(&FileIoConfig::default()) {
        Ok(io) => Some(io),
        Err(e) => {
            println!("SKIPPED: io_uring unavailable here: {e}");
            None
        }
    }
}

fn rw_file(path: &TempPath) -> Arc<File> {
    Arc::new(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path.0)
            .unwrap(),
    )
}

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

fn finish(io: &mut FileIo, op: FileOp) -> FileCompletion {
    assert!(
        io.wait(&op, WAIT).unwrap(),
        "operation did not finish in time"
    );
    io.take(op).expect("finished operation")
}

fn run(io: &mut FileIo, start: impl FnOnce(&mut FileIo) -> FileOp) -> FileCompletion {
    let op = start(io);
    finish(io, op)
}

#[test]
fn random_offsets_and_sizes_are_byte_exact() {
    let Some(mut io) = engine() else { return };
    let path = TempPath::new("random");
    let file = rw_file(&path);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    const SIZE: usize = 8 << 20;
    let mut model = vec![0u8; SIZE];
    rng.fill(&mut model);

    // Fill the file with non-overlapping writes of random sizes, all in flight together, some
    // vectored.
    let mut ops = Vec::new();
    let mut off = 0usize;
    while off < SIZE {
        let len = (1 + rng.below(3 << 20) as usize).min(SIZE - off);
        let data = model[off..off + len].to_vec();
        let op = if rng.below(3) == 0 && len > 2 {
            let cut = 1 + rng.below(len as u64 - 1) as usize;
            let bufs = vec![
                IoBuffer::from(data[..cut].to_vec()),
                IoBuffer::from(data[cut..].to_vec()),
            ];
            io.writev_at(&file, bufs, off as u64)
        } else {
            io.write_at(&file, IoBuffer::from(data), off as u64)
        };
        ops.push((op, len));
        off += len;
    }
    for (op, len) in ops {
        let c = finish(&mut io, op);
        assert_eq!(c.result.unwrap(), len);
    }
    let c = run(&mut io, |io| io.fdatasync(&file));
    assert_eq!(c.result.unwrap(), 0);

    // Random reads, 32 in flight, some crossing the end of file, some vectored.
    for _round in 0..4 {
        let mut ops = Vec::new();
        for _ in 0..32 {
            let off = rng.below(SIZE as u64 + 4096) as usize;
            let len = 1 + rng.below(3 << 20) as usize;
            let op = if rng.below(4) == 0 && len > 1 {
                let cut = 1 + rng.below(len as u64 - 1) as usize;
                io.readv_at(
                    &file,
                    vec![
                        IoBuffer::from(vec![0xee; cut]),
                        IoBuffer::from(vec![0xee; len - cut]),
                    ],
                    off as u64,
                )
            } else {
                io.read_at(&file, IoBuffer::from(vec![0xee; len]), off as u64)
            };
            ops.push((op, off, len));
        }
        for (op, off, len) in ops {
            let c = finish(&mut io, op);
            let n = c.result.unwrap();
            let expect = len.min(SIZE.saturating_sub(off));
            assert_eq!(n, expect, "read of {len} at {off}");
            let mut got = Vec::with_capacity(len);
            for b in c.buffers.into_vec() {
                got.extend_from_slice(&b);
            }
            assert_eq!(&got[..n], &model[off..off + n], "bytes of read at {off}");
            assert!(
                got[n..].iter().all(|&b| b == 0xee),
                "bytes past EOF were touched"
            );
        }
    }
}

#[test]
fn one_64_mib_write_and_read() {
    let Some(mut io) = engine() else { return };
    let path = TempPath::new("big");
    let file = rw_file(&path);
    const SIZE: usize = 64 << 20;
    let mut data = vec![0u8; SIZE];
    Rng(42).fill(&mut data);
    let c = run(&mut io, |io| io.write_at(&file, IoBuffer::from(data), 0));
    assert_eq!(c.result.unwrap(), SIZE);
    let written = c.buffers.into_one().unwrap();
    let c = run(&mut io, |io| io.fsync(&file));
    assert_eq!(c.result.unwrap(), 0);
    let c = run(&mut io, |io| {
        io.read_at(&file, IoBuffer::from(vec![0u8; SIZE]), 0)
    });
    assert_eq!(c.result.unwrap(), SIZE);
    assert!(*c.buffers.into_one().unwrap() == *written);
}

#[test]
fn read_at_end_of_file_reports_bytes_read() {
    let Some(mut io) = engine() else { return };
    let path = TempPath::new("eof");
    std::fs::write(&path.0, [7u8; 100]).unwrap();
    let file = Arc::new(File::open(&path.0).unwrap());
    let c = run(&mut io, |io| {
        io.read_at(&file, IoBuffer::from(vec![0xa5; 4096]), 0)
    });
    assert_eq!(c.result.unwrap(), 100);
    let buf = c.buffers.into_one().unwrap();
    assert!(buf[..100].iter().all(|&b| b == 7));
    assert!(
        buf[100..].iter().all(|&b| b == 0xa5),
        "canary past EOF overwritten"
    );
    for off in [100, 5000] {
        let c = run(&mut io, |io| {
            io.read_at(&file, IoBuffer::from(vec![0; 10]), off)
        });
        assert_eq!(c.result.unwrap(), 0, "read at {off}");
    }
    let c = run(&mut io, |io| {
        io.read_at(&file, IoBuffer::from(Vec::new()), 0)
    });
    assert_eq!(c.result.unwrap(), 0);
}

#[test]
fn write_to_read_only_file_names_ebadf() {
    let Some(mut io) = engine() else { return };
    let path = TempPath::new("ro");
    std::fs::write(&path.0, b"x").unwrap();
    let file = Arc::new(File::open(&path.0).unwrap());
    let c = run(&mut io, |io| {
        io.write_at(&file, IoBuffer::from(vec![1; 10]), 0)
    });
    let err = c.result.unwrap_err();
    assert_eq!(err.errno(), Some(libc::EBADF));
    let msg = err.to_string();
    assert!(msg.contains("EBADF") && msg.contains("read-only"), "{msg}");
    assert_eq!(c.buffers.into_one().unwrap().len(), 10);
}

#[test]
fn o_direct_misalignment_is_refused_up_front() {
    let Some(mut io) = engine() else { return };
    let path = TempPath::new("direct");
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path.0)
    {
        Ok(f) => Arc::new(f),
        Err(e) => {
            println!("SKIPPED: the temp filesystem refuses O_DIRECT: {e}");
            return;
        }
    };
    let aligned = IoBuffer::aligned(4096, 4096).unwrap();
    let c = run(&mut io, |io| io.write_at(&file, aligned, 0));
    match c.result {
        Ok(n) => assert_eq!(n, 4096),
        Err(e) if e.errno() == Some(libc::EINVAL) => {
            println!("SKIPPED: the temp filesystem refuses O_DIRECT writes: {e}");
            return;
        }
        Err(e) => panic!("aligned O_DIRECT write failed: {e}"),
    }
    let short = IoBuffer::aligned(100, 4096).unwrap();
    let c = run(&mut io, |io| io.write_at(&file, short, 0));
    let err = c.result.unwrap_err();
    assert!(
        matches!(err, FileError::Misaligned { len: 100, .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("buffer address") && msg.contains("logical block size"),
        "{msg}"
    );
    let c = run(&mut io, |io| {
        io.read_at(&file, IoBuffer::aligned(4096, 4096).unwrap(), 1)
    });
    assert!(matches!(
        c.result,
        Err(FileError::Misaligned { offset: 1, .. })
    ));
}

/// Child half of `write_past_fsize_limit_is_efbig`.
#[test]
fn efbig_child() {
    if std::env::var_os("VIADUCT_EFBIG_CHILD").is_none() {
        return;
    }
    let path = PathBuf::from(std::env::var_os("VIADUCT_EFBIG_CHILD").unwrap());
    // SAFETY: ignoring a signal installs no handler code.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let lim = libc::rlimit {
        rlim_cur: 1 << 20,
        rlim_max: 1 << 20,
    };
    // SAFETY: setrlimit reads one valid rlimit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &lim) }, 0);
    let mut io = FileIo::new(&FileIoConfig::default()).unwrap();
    let file = Arc::new(
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap(),
    );
    let c = run(&mut io, |io| {
        io.write_at(&file, IoBuffer::from(vec![1; 4096]), 2 << 20)
    });
    match c.result {
        Ok(n) => println!("CHILD-RESULT: wrote {n} bytes past the limit"),
        Err(e) => println!("CHILD-RESULT: errno={:?} {e}", e.errno()),
    }
}

#[test]
fn write_past_fsize_limit_is_efbig() {
    if engine().is_none() {
        return;
    }
    let path = TempPath::new("efbig");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "efbig_child", "--nocapture", "--test-threads=1"])
        .env("VIADUCT_EFBIG_CHILD", &path.0)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("CHILD-RESULT"))
        .unwrap_or_else(|| panic!("child printed no result: {stdout}"));
    assert!(
        line.contains(&format!("errno=Some({})", libc::EFBIG)) && line.contains("EFBIG"),
        "{line}"
    );
}

fn pipe_files() -> (Arc<File>, File) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    use std::os::fd::FromRawFd;
    // SAFETY: both descriptors are new and owned here.
    unsafe {
        (
            Arc::new(File::from_raw_fd(fds[0])),
            File::from_raw_fd(fds[1]),
        )
    }
}

#[test]
fn cancel_before_completion_returns_buffer() {
    let Some(mut io) = engine() else { return };
    let (rx, _tx) = pipe_files();
    let op = io.read_at(&rx, IoBuffer::from(vec![3; 64]), 0);
    assert!(!io.wait(&op, Some(Duration::from_millis(20))).unwrap());
    assert!(io.cancel(&op).unwrap());
    let c = finish(&mut io, op);
    assert!(
        matches!(c.result, Err(FileError::Cancelled { done: 0, .. })),
        "{:?}",
        c.result
    );
    assert_eq!(c.result.unwrap_err().errno(), Some(libc::ECANCELED));
    assert_eq!(*c.buffers.into_one().unwrap(), [3; 64]);
    assert_eq!(io.outstanding(), 0);
    assert_eq!(io.in_flight(), 0);
}

#[test]
fn cancel_after_completion_is_not_cancelled() {
    let Some(mut io) = engine() else { return };
    let path = TempPath::new("cancel");
    std::fs::write(&path.0, [9u8; 10]).unwrap();
    let file = Arc::new(File::open(&path.0).unwrap());
    let op = io.read_at(&file, IoBuffer::from(vec![0; 10]), 0);
    assert!(io.wait(&op, WAIT).unwrap());
    assert!(
        !io.cancel(&op).unwrap(),
        "a finished op reported as cancelled"
    );
    let c = io.take(op).unwrap();
    assert_eq!(c.result.unwrap(), 10);
}

#[test]
fn wait_any_returns_the_finished_one() {
    let Some(mut io) = engine() else { return };
    let (rx, _tx) = pipe_files();
    let path = TempPath::new("any");
    std::fs::write(&path.0, [1u8; 10]).unwrap();
    let file = Arc::new(File::open(&path.0).unwrap());
    let stuck = io.read_at(&rx, IoBuffer::from(vec![0; 8]), 0);
    let quick = io.read_at(&file, IoBuffer::from(vec![0; 8]), 0);
    let i = io.wait_any(&[&stuck, &quick], WAIT).unwrap();
    assert_eq!(i, Some(1));
    assert_eq!(
        io.wait_any(&[&stuck], Some(Duration::from_millis(10)))
            .unwrap(),
        None
    );
    assert!(io.cancel(&stuck).unwrap());
    let c = finish(&mut io, stuck);
    assert!(c.result.is_err());
    assert_eq!(io.take(quick).unwrap().result.unwrap(), 8);
}

#[test]
fn fixed_buffers_and_files_are_byte_exact() {
    let Ok(mut io) = FileIo::new(&FileIoConfig {
        fixed_files: 4,
        ..FileIoConfig::default()
    }) else {
        println!("SKIPPED: io_uring unavailable here");
        return;
    };
    let path = TempPath::new("fixed");
    let file = rw_file(&path);
    io.register_file(&file).unwrap();
    let mut bufs = match io.register_buffers(8, 8192) {
        Ok(b) => b,
        Err(e) => {
            println!("SKIPPED: registering buffers failed (memlock limit?): {e}");
            return;
        }
    };
    assert!(bufs.iter().all(IoBuffer::is_fixed));
    let mut rng = Rng(7);
    for b in &mut bufs {
        rng.fill(b);
    }
    let expect: Vec<Vec<u8>> = bufs.iter().map(|b| b.to_vec()).collect();
    let ops: Vec<FileOp> = bufs
        .into_iter()
        .enumerate()
        .map(|(i, b)| io.write_at(&file, b, i as u64 * 8192))
        .collect();
    let mut bufs = Vec::new();
    for op in ops {
        let c = finish(&mut io, op);
        assert_eq!(c.result.unwrap(), 8192);
        let mut b = c.buffers.into_one().unwrap();
        b.fill(0);
        bufs.push(b);
    }
    let ops: Vec<FileOp> = bufs
        .into_iter()
        .enumerate()
        .map(|(i, b)| io.read_at(&file, b, i as u64 * 8192))
        .collect();
    for (i, op) in ops.into_iter().enumerate() {
        let c = finish(&mut io, op);
        assert_eq!(c.result.unwrap(), 8192);
        assert_eq!(*c.buffers.into_one().unwrap(), expect[i][..]);
    }
    io.unregister_file(&file).unwrap();
    let c = run(&mut io, |io| {
        io.read_at(&file, IoBuffer::from(vec![0; 16]), 0)
    });
    assert_eq!(c.result.unwrap(), 16);
}

#[test]
fn sqpoll_engine_reads() {
    let Ok(mut io) = FileIo::new(&FileIoConfig {
        sqpoll_idle_ms: Some(10),
        ..FileIoConfig::default()
    }) else {
        println!("SKIPPED: SQPOLL ring unavailable here");
        return;
    };
    let path = TempPath::new("sqpoll");
    std::fs::write(&path.0, [4u8; 300]).unwrap();
    let file = Arc::new(File::open(&path.0).unwrap());
    for _ in 0..3 {
        let c = run(&mut io, |io| {
            io.read_at(&file, IoBuffer::from(vec![0; 512]), 0)
        });
        assert_eq!(c.result.unwrap(), 300);
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn short_reads_are_continued_until_end_of_file() {
    use std::io::Write;
    let Some(mut io) = engine() else { return };
    let (rx, mut tx) = pipe_files();
    let op = io.read_at(&rx, IoBuffer::from(vec![0xcc; 64]), 0);
    // Three pieces, each completing the read short; then end of file.
    for piece in [&[1u8; 10][..], &[2u8; 20][..], &[3u8; 5][..]] {
        tx.write_all(piece).unwrap();
        assert!(!io.wait(&op, Some(Duration::from_millis(20))).unwrap());
    }
    drop(tx);
    let c = finish(&mut io, op);
    assert_eq!(c.result.unwrap(), 35);
    let buf = c.buffers.into_one().unwrap();
    assert_eq!(buf[..10], [1; 10]);
    assert_eq!(buf[10..30], [2; 20]);
    assert_eq!(buf[30..35], [3; 5]);
    assert!(buf[35..].iter().all(|&b| b == 0xcc));
}

#[test]
fn writes_larger_than_a_pipe_complete_whole() {
    use std::io::Read;
    let Some(mut io) = engine() else { return };
    let (rx, tx) = pipe_files();
    let tx = Arc::new(tx);
    let mut data = vec![0u8; 1 << 20];
    Rng(99).fill(&mut data);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        (&*rx).read_to_end(&mut got).unwrap();
        got
    });
    let c = run(&mut io, |io| {
        io.write_at(&tx, IoBuffer::from(data.clone()), 0)
    });
    assert_eq!(c.result.unwrap(), data.len());
    drop(io);
    drop(tx);
    assert!(reader.join().unwrap() == data);
}

#[test]
fn large_registered_buffers_are_disjoint_and_byte_exact() {
    let Ok(mut io) = FileIo::new(&FileIoConfig::default()) else {
        println!("SKIPPED: io_uring unavailable here");
        return;
    };
    const LEN: usize = (1 << 20) + 100;
    // Over 2 MiB in all: carved from one huge-page-aligned mapping.
    let mut bufs = match io.register_buffers(4, LEN) {
        Ok(b) => b,
        Err(e) => {
            println!("SKIPPED: registering buffers failed (memlock limit?): {e}");
            return;
        }
    };
    let mut addrs: Vec<usize> = bufs.iter().map(IoBuffer::addr).collect();
    assert!(addrs.iter().all(|a| a % 4096 == 0), "{addrs:x?}");
    addrs.sort_unstable();
    assert!(addrs.windows(2).all(|w| w[1] - w[0] >= LEN), "{addrs:x?}");
    let mut rng = Rng(0x5eed);
    for b in &mut bufs {
        assert_eq!(b.len(), LEN);
        assert!(b.iter().all(|&x| x == 0));
        rng.fill(b);
    }
    let expect: Vec<Vec<u8>> = bufs.iter().map(|b| b.to_vec()).collect();
    let path = TempPath::new("large-fixed");
    let file = rw_file(&path);
    let ops: Vec<FileOp> = bufs
        .into_iter()
        .enumerate()
        .map(|(i, b)| io.write_at(&file, b, (i * LEN) as u64))
        .collect();
    let mut bufs = Vec::new();
    for op in ops {
        let c = finish(&mut io, op);
        assert_eq!(c.result.unwrap(), LEN);
        let mut b = c.buffers.into_one().unwrap();
        b.fill(0);
        bufs.push(b);
    }
    // Read back in reverse order into the other buffers.
    bufs.reverse();
    let ops: Vec<FileOp> = bufs
        .into_iter()
        .enumerate()
        .map(|(i, b)| io.read_at(&file, b, (i * LEN) as u64))
        .collect();
    for (i, op) in ops.into_iter().enumerate() {
        let c = finish(&mut io, op);
        assert_eq!(c.result.unwrap(), LEN);
        assert!(
            *c.buffers.into_one().unwrap() == expect[i][..],
            "buffer {i}"
        );
    }
    let disk = std::fs::read(&path.0).unwrap();
    assert!(disk == expect.concat());
}
