//! Error paths of file operations on real files and the real kernel: `ENOSPC` (a full device, a
//! full small tmpfs), `EIO` (a shut-down ext4 filesystem, an unmapped address of
//! `/proc/self/mem`), and what is retried rather than reported: descriptors in `O_NONBLOCK` mode
//! that are not ready (`EAGAIN`) and signals delivered during a blocking wait (`EINTR`).
//!
//! Tests that need a namespace or a mount run their engine in a child process (this test binary
//! run again with an environment variable naming the child's job) and print `SKIPPED: <reason>`
//! when the machine does not allow it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use viaduct_fallback::file::{FileCompletion, FileError, FileIo, FileIoConfig, FileOp, IoBuffer};

const WAIT: Option<Duration> = Some(Duration::from_secs(30));

/// A path in the temp directory, removed (file or empty directory) on drop.
struct TempPath(PathBuf);

impl TempPath {
    fn new(name: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        Self(std::env::temp_dir().join(format!("viaduct-ferr-{}-{n}-{name}", std::process::id())))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir(&self.0);
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

fn finish(io: &mut FileIo, op: FileOp) -> FileCompletion {
    assert!(
        io.wait(&op, WAIT).unwrap(),
        "operation did not finish in time"
    );
    io.take(op).expect("finished operation")
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A pipe whose descriptors both have `flags` (`O_NONBLOCK` or 0) besides `O_CLOEXEC`.
fn pipe(flags: i32) -> (Arc<File>, Arc<File>) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | flags) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned here.
    unsafe {
        (
            Arc::new(File::from_raw_fd(fds[0])),
            Arc::new(File::from_raw_fd(fds[1])),
        )
    }
}

/// Runs this test binary again as `child` (a test name) with `VIADUCT_FERR_JOB=arg`, under
/// `wrapper` (a command line that ends by running what follows it) and a time limit of 120 s;
/// returns its output.
fn run_child(wrapper: &[&str], child: &str, arg: &Path) -> std::process::Output {
    let exe = std::env::current_exe().unwrap();
    // `timeout` ends a child that hangs (a mount that never returns), so the test cannot hang.
    Command::new("timeout")
        .args(["-k", "5", "120"])
        .args(wrapper)
        .arg(exe)
        .args(["--exact", child, "--nocapture", "--test-threads=1"])
        .env("VIADUCT_FERR_JOB", arg)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", wrapper.join(" ")))
}

/// The `CHILD-RESULT` line of a child's output, or why there is none.
fn child_result(out: &std::process::Output) -> Result<String, String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(line) = stdout.lines().find(|l| l.contains("CHILD-SKIPPED")) {
        return Err(line.to_owned());
    }
    stdout
        .lines()
        .find(|l| l.contains("CHILD-RESULT"))
        .map(str::to_owned)
        .ok_or_else(|| {
            format!(
                "exit {:?}, stderr: {}",
                out.status.code(),
                stderr.trim().lines().last().unwrap_or("")
            )
        })
}

fn job() -> Option<PathBuf> {
    std::env::var_os("VIADUCT_FERR_JOB").map(PathBuf::from)
}

fn describe(c: &FileCompletion) -> String {
    match &c.result {
        Ok(n) => format!("ok={n}"),
        Err(e) => format!("errno={:?} msg={e}", e.errno()),
    }
}

#[test]
fn enospc_from_a_full_device_is_named() {
    let Some(mut io) = engine() else { return };
    let full = match OpenOptions::new().write(true).open("/dev/full") {
        Ok(f) => Arc::new(f),
        Err(e) => {
            println!("SKIPPED: /dev/full cannot be opened for writing: {e}");
            return;
        }
    };
    let op = io.write_at(&full, IoBuffer::from(pattern(4096, 1)), 0);
    let c = finish(&mut io, op);
    let err = c.result.unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENOSPC));
    assert!(matches!(err, FileError::Os { done: 0, .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("write at offset 0 failed with ENOSPC after 0 bytes")
            && msg.contains("no space left on the device"),
        "{msg}"
    );
    let source = std::error::Error::source(&err).expect("the OS error as source");
    assert!(source.to_string().contains("No space left"), "{source}");
    assert_eq!(*c.buffers.into_one().unwrap(), pattern(4096, 1)[..]);

    let op = io.writev_at(
        &full,
        vec![IoBuffer::from(vec![1; 100]), IoBuffer::from(vec![2; 200])],
        0,
    );
    let c = finish(&mut io, op);
    let err = c.result.unwrap_err();
    assert_eq!(err.errno(), Some(libc::ENOSPC));
    assert!(
        err.to_string()
            .starts_with("writev at offset 0 failed with ENOSPC")
    );
    assert_eq!(c.buffers.into_vec().len(), 2);
    assert_eq!(io.outstanding(), 0);
}

/// Child half of `enospc_on_a_full_tmpfs_reports_the_bytes_written`: runs inside a mount
/// namespace with a 64 KiB tmpfs mounted on the job directory.
#[test]
fn tmpfs_child() {
    let Some(dir) = job() else { return };
    let mut io = FileIo::new(&FileIoConfig::default()).unwrap();
    let path = dir.join("data");
    let file = Arc::new(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap(),
    );
    // Four times what the filesystem holds: the first write is short, its continuation fails.
    let op = io.write_at(&file, IoBuffer::from(pattern(256 << 10, 7)), 0);
    let c = finish(&mut io, op);
    let done = match &c.result {
        Err(FileError::Os { done, .. }) => *done,
        _ => usize::MAX,
    };
    let len = std::fs::metadata(&path).unwrap().len();
    let mut back = vec![0; len as usize];
    (&*file).read_exact(&mut back).unwrap();
    let intact = back == pattern(256 << 10, 7)[..back.len()];
    println!(
        "CHILD-RESULT: done={done} len={len} intact={intact} {}",
        describe(&c)
    );
}

#[test]
fn enospc_on_a_full_tmpfs_reports_the_bytes_written() {
    if engine().is_none() {
        return;
    }
    let dir = TempPath::new("tmpfs");
    std::fs::create_dir(&dir.0).unwrap();
    let mount = "mount -t tmpfs -o size=64k viaduct-test \"$0\" && exec \"$@\"";
    // A user namespace (so that no privilege is needed) with its own mount namespace: the tmpfs
    // exists only there and goes away with the child.
    let dir_str = dir.0.to_str().unwrap();
    let out = run_child(
        &[
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            "sh",
            "-c",
            mount,
            dir_str,
        ],
        "tmpfs_child",
        &dir.0,
    );
    let line = match child_result(&out) {
        Ok(l) => l,
        Err(why) => {
            println!("SKIPPED: a 64 KiB tmpfs in a user+mount namespace is not available: {why}");
            return;
        }
    };
    let field = |name: &str| -> u64 {
        let start = line.find(&format!("{name}=")).unwrap() + name.len() + 1;
        line[start..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("{name} in {line}"))
    };
    assert!(
        line.contains(&format!("errno=Some({})", libc::ENOSPC)),
        "{line}"
    );
    let done = field("done");
    assert!(done > 0 && done < 256 << 10, "{line}");
    assert_eq!(field("len"), done, "{line}");
    assert!(line.contains("intact=true"), "{line}");
    assert!(
        line.contains(&format!(
            "write at offset 0 failed with ENOSPC after {done} bytes: no space left on the device"
        )),
        "{line}"
    );
}

/// `EXT4_IOC_SHUTDOWN` (`_IOR('X', 125, __u32)`) and its "do not flush the log" flag.
const EXT4_IOC_SHUTDOWN: libc::c_ulong =
    (2 << 30) | (4 << 16) | ((b'X' as libc::c_ulong) << 8) | 125;
const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;

/// Child half of `eio_from_a_shut_down_filesystem_is_named`: runs inside a mount namespace with
/// a small ext4 image loop-mounted on the job directory.
#[test]
fn eio_child() {
    let Some(dir) = job() else { return };
    let mut io = FileIo::new(&FileIoConfig::default()).unwrap();
    let file = Arc::new(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.join("data"))
            .unwrap(),
    );
    let op = io.write_at(&file, IoBuffer::from(pattern(8192, 3)), 0);
    let before = finish(&mut io, op);
    let op = io.fsync(&file);
    let synced = finish(&mut io, op);
    let root = File::open(&dir).unwrap();
    let flag = EXT4_GOING_FLAGS_NOLOGFLUSH;
    // SAFETY: EXT4_IOC_SHUTDOWN reads one u32 through the pointer, which is valid.
    let rc = unsafe { libc::ioctl(root.as_raw_fd(), EXT4_IOC_SHUTDOWN, &raw const flag) };
    if rc != 0 {
        println!(
            "CHILD-SKIPPED: EXT4_IOC_SHUTDOWN failed: {}",
            std::io::Error::last_os_error()
        );
        return;
    }
    let op = io.read_at(&file, IoBuffer::from(vec![0; 4096]), 0);
    let read = finish(&mut io, op);
    let op = io.write_at(&file, IoBuffer::from(vec![5; 4096]), 4096);
    let write = finish(&mut io, op);
    println!(
        "CHILD-RESULT: before=[{}] sync=[{}] read=[{}] write=[{}]",
        describe(&before),
        describe(&synced),
        describe(&read),
        describe(&write)
    );
}

#[test]
fn eio_from_a_shut_down_filesystem_is_named() {
    if engine().is_none() {
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED: mounting an ext4 image needs root (EIO comes from its forced shutdown)");
        return;
    }
    let image = TempPath::new("ext4.img");
    File::create(&image.0).unwrap().set_len(8 << 20).unwrap();
    match Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&image.0)
        .output()
    {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!(
                "SKIPPED: mkfs.ext4 failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            println!("SKIPPED: mkfs.ext4 is not available: {e}");
            return;
        }
    }
    let dir = TempPath::new("ext4");
    std::fs::create_dir(&dir.0).unwrap();
    // A private mount namespace: the mount (and its loop device, released on unmount) exists
    // only for the child.
    let script = "mount -o loop \"$0\" \"$1\" && shift && exec \"$@\"";
    let out = run_child(
        &[
            "unshare",
            "--mount",
            "sh",
            "-c",
            script,
            image.0.to_str().unwrap(),
            dir.0.to_str().unwrap(),
        ],
        "eio_child",
        &dir.0,
    );
    let line = match child_result(&out) {
        Ok(l) => l,
        Err(why) => {
            println!("SKIPPED: a loop-mounted ext4 in a mount namespace is not available: {why}");
            return;
        }
    };
    assert!(line.contains("before=[ok=8192] sync=[ok=0]"), "{line}");
    let eio = libc::EIO;
    assert!(
        line.contains(&format!(
            "read=[errno=Some({eio}) msg=read at offset 0 failed with EIO after 0 bytes: the \
             device or filesystem reported an I/O error]"
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "write=[errno=Some({eio}) msg=write at offset 4096 failed with EIO after 0 bytes: \
             the device or filesystem reported an I/O error]"
        )),
        "{line}"
    );
}

#[test]
fn eio_from_an_unmapped_address_of_proc_self_mem() {
    let Some(mut io) = engine() else { return };
    let mem = match OpenOptions::new().read(true).open("/proc/self/mem") {
        Ok(f) => Arc::new(f),
        Err(e) => {
            println!("SKIPPED: /proc/self/mem cannot be opened: {e}");
            return;
        }
    };
    // Address 0 is never mapped: the kernel answers EIO for the read.
    let op = io.read_at(&mem, IoBuffer::from(vec![0xab; 64]), 0);
    let c = finish(&mut io, op);
    let err = c.result.unwrap_err();
    assert_eq!(err.errno(), Some(libc::EIO), "{err}");
    assert!(
        err.to_string().contains(
            "failed with EIO after 0 bytes: the device or filesystem reported an I/O error"
        ),
        "{err}"
    );
    assert_eq!(*c.buffers.into_one().unwrap(), [0xab; 64]);
    // The same file reads a mapped address: the engine is fine after the error.
    let data = pattern(64, 9);
    let addr = data.as_ptr() as u64;
    let op = io.read_at(&mem, IoBuffer::from(vec![0; 64]), addr);
    let c = finish(&mut io, op);
    assert_eq!(c.result.unwrap(), 64);
    assert_eq!(*c.buffers.into_one().unwrap(), data[..]);
}

/// What the engine saw of `EAGAIN` while a transfer on a descriptor in `O_NONBLOCK` mode was not
/// ready. Kernels that answer such a transfer with `EAGAIN` make the engine poll for readiness in
/// the kernel, which must not resubmit while nothing changes; kernels that poll on their own
/// never show the engine an `EAGAIN` (Linux 6.18 does so for pipes, sockets, eventfds, ptys,
/// inotify, signalfd and timerfd descriptors). Either way the transfer must complete whole.
fn check_not_ready(io: &mut FileIo, op: &FileOp) {
    assert!(!io.wait(op, Some(Duration::from_millis(50))).unwrap());
    let first = io.retries().eagain;
    assert!(!io.wait(op, Some(Duration::from_millis(100))).unwrap());
    let second = io.retries().eagain;
    if first == 0 {
        println!(
            "NOTE: the kernel polled the O_NONBLOCK descriptor itself (no EAGAIN reached the engine)"
        );
    }
    assert!(
        second <= first + 1,
        "resubmitted {} times in 100 ms while the descriptor was not ready",
        second - first
    );
}

#[test]
fn nonblocking_pipe_read_completes_whole_once_data_comes() {
    let Some(mut io) = engine() else { return };
    let (rx, tx) = pipe(libc::O_NONBLOCK);
    let op = io.read_at(&rx, IoBuffer::from(vec![0xcc; 64]), 0);
    check_not_ready(&mut io, &op);
    (&*tx).write_all(&[1; 30]).unwrap();
    // A short read, continued: the rest is not there yet.
    check_not_ready(&mut io, &op);
    (&*tx).write_all(&[2; 34]).unwrap();
    let c = finish(&mut io, op);
    assert_eq!(c.result.unwrap(), 64);
    let buf = c.buffers.into_one().unwrap();
    assert_eq!(buf[..30], [1; 30]);
    assert_eq!(buf[30..], [2; 34]);
    assert_eq!(io.in_flight(), 0);
}

#[test]
fn nonblocking_pipe_write_larger_than_the_pipe_completes_whole() {
    let Some(mut io) = engine() else { return };
    let (rx, tx) = pipe(libc::O_NONBLOCK);
    let data = pattern(1 << 20, 5);
    let op = io.write_at(&tx, IoBuffer::from(data.clone()), 0);
    // The pipe fills (64 KiB) and nobody reads yet.
    check_not_ready(&mut io, &op);
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        let mut chunk = vec![0; 65536];
        let limit = Instant::now() + Duration::from_secs(30);
        while got.len() < 1 << 20 && Instant::now() < limit {
            match (&*rx).read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("reading the pipe: {e}"),
            }
        }
        got
    });
    let c = finish(&mut io, op);
    assert_eq!(c.result.unwrap(), 1 << 20);
    assert!(reader.join().unwrap() == data);
}

static SIGNALS: AtomicU32 = AtomicU32::new(0);

/// Stops and joins the signalling thread when dropped, on panics too.
struct Stopper {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Stopper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

extern "C" fn count_signal(_: libc::c_int) {
    SIGNALS.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn signals_during_a_blocking_wait_are_retried() {
    let Some(mut io) = engine() else { return };
    // A handler without SA_RESTART: a signal makes a blocked io_uring_enter return EINTR.
    // SAFETY: sigaction is plain data; all-zero is a valid value to fill in.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = count_signal as extern "C" fn(libc::c_int) as usize;
    // SAFETY: installs a handler that only touches an atomic; the old action is not needed.
    let rc = unsafe { libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()) };
    assert_eq!(rc, 0, "sigaction: {}", std::io::Error::last_os_error());
    let (rx, tx) = pipe(0);
    let op = io.read_at(&rx, IoBuffer::from(vec![0; 4096]), 0);
    io.submit().unwrap();
    // SAFETY: pthread_self has no preconditions.
    let waiter = unsafe { libc::pthread_self() };
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let data = pattern(4096, 11);
    let data2 = data.clone();
    let signaller = std::thread::spawn(move || {
        // Signals while the test thread blocks in io_uring_enter, then the data, then more
        // signals until the wait is over.
        for i in 0.. {
            if stop2.load(Ordering::Acquire) {
                break;
            }
            // SAFETY: the waiting thread sets `stop` and joins this thread before it ends (also
            // when it panics, through `Stopper`), so its id is valid here.
            unsafe { libc::pthread_kill(waiter, libc::SIGUSR1) };
            std::thread::sleep(Duration::from_millis(2));
            if i == 100 {
                (&*tx).write_all(&data2[..1000]).unwrap();
            }
            if i == 150 {
                (&*tx).write_all(&data2[1000..]).unwrap();
            }
        }
    });
    let stopper = Stopper {
        stop,
        thread: Some(signaller),
    };
    let c = finish(&mut io, op);
    drop(stopper);
    assert_eq!(c.result.unwrap(), 4096);
    assert_eq!(*c.buffers.into_one().unwrap(), data[..]);
    let retries = io.retries();
    assert!(SIGNALS.load(Ordering::Relaxed) >= 100);
    assert!(
        retries.interrupted_enters >= 1,
        "no wait was interrupted: {retries:?}"
    );
}
