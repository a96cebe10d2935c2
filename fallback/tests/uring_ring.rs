//! The io_uring engine against the running kernel: batches, timed waits, overflow, cancel,
//! eventfd wake-ups, provided buffers, and the diagnosis of a refused ring.

use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use viaduct_fallback::uring::io_uring::{opcode, squeue, types};
use viaduct_fallback::uring::{Completion, Ring, RingConfig, UringError};

/// A ring, or `None` after printing why the test is skipped.
fn ring<P>(config: &RingConfig) -> Option<Ring<P>> {
    match Ring::new(config) {
        Ok(r) => Some(r),
        Err(e) => {
            println!("SKIPPED: io_uring unavailable here: {e}");
            None
        }
    }
}

fn nop() -> squeue::Entry {
    opcode::Nop::new().build()
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are new and owned here.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

#[test]
fn nop_batches_complete_once_each() {
    let Some(mut ring) = ring::<u64>(&RingConfig::new(32)) else {
        return;
    };
    let n = 1000u64;
    for i in 0..n {
        // SAFETY: a NOP carries no pointers.
        unsafe { ring.push(nop(), i, i * 3) }.unwrap();
    }
    let mut out = Vec::new();
    while out.len() < n as usize {
        let before = out.len();
        ring.wait(n as usize - before, Some(Duration::from_secs(10)), &mut out)
            .unwrap();
        assert!(out.len() > before, "no progress waiting for NOPs");
    }
    let mut seen = vec![false; n as usize];
    for c in &out {
        assert_eq!(c.result, 0);
        assert!(!c.more());
        assert_eq!(c.payload, Some(c.token * 3));
        assert!(!seen[c.token as usize], "token {} completed twice", c.token);
        seen[c.token as usize] = true;
    }
    assert!(seen.iter().all(|s| *s));
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn timed_wait_returns_empty_on_idle_op() {
    for timeout_op in [false, true] {
        let Some(mut ring) = ring::<Vec<u8>>(&RingConfig::new(8).timeout_op(timeout_op)) else {
            return;
        };
        let (rx, _tx) = pipe();
        let mut buf = vec![0u8; 16];
        let entry = opcode::Read::new(types::Fd(rx.as_raw_fd()), buf.as_mut_ptr(), 16).build();
        // SAFETY: the read targets `buf`'s heap memory, owned by the ring until completion.
        let op = unsafe { ring.push(entry, 1, buf) }.unwrap();
        let mut out = Vec::new();
        let n = ring
            .wait(1, Some(Duration::from_millis(50)), &mut out)
            .unwrap();
        assert_eq!(
            n, 0,
            "a read on an empty pipe completed (timeout_op={timeout_op})"
        );
        assert_eq!(ring.in_flight(), 1);
        ring.cancel(op).unwrap();
        ring.wait(1, Some(Duration::from_secs(10)), &mut out)
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].result, -libc::ECANCELED);
        assert_eq!(out[0].payload.as_ref().map(Vec::len), Some(16));
    }
}

#[test]
fn wait_without_ops_does_not_block() {
    let Some(mut ring) = ring::<()>(&RingConfig::new(8)) else {
        return;
    };
    let mut out = Vec::new();
    assert_eq!(ring.wait(5, None, &mut out).unwrap(), 0);
}

#[test]
fn cq_overflow_loses_nothing() {
    let Some(mut ring) = ring::<u32>(&RingConfig::new(4).cq_entries(4).eventfd(false)) else {
        return;
    };
    assert!(ring.features().cq_entries <= 8, "the CQ is not small");
    let n = 2000u32;
    for i in 0..n {
        // SAFETY: a NOP carries no pointers.
        unsafe { ring.push(nop(), u64::from(i), i) }.unwrap();
        if i % 4 == 3 {
            ring.submit().unwrap();
        }
    }
    ring.submit().unwrap();
    let mut out: Vec<Completion<u32>> = Vec::new();
    for _ in 0..10_000 {
        if out.len() == n as usize {
            break;
        }
        ring.wait(1, Some(Duration::from_secs(5)), &mut out)
            .unwrap();
    }
    assert_eq!(out.len(), n as usize, "completions lost to CQ overflow");
    let mut tokens: Vec<u64> = out.iter().map(|c| c.token).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), n as usize);
    assert_eq!(ring.in_flight(), 0);
}

#[test]
fn cancel_after_completion_is_refused_and_stale_id_misses() {
    let Some(mut ring) = ring::<Vec<u8>>(&RingConfig::new(8)) else {
        return;
    };
    // SAFETY: a NOP carries no pointers.
    let a = unsafe { ring.push(nop(), 1, Vec::new()) }.unwrap();
    let mut out = Vec::new();
    ring.wait(1, Some(Duration::from_secs(5)), &mut out)
        .unwrap();
    assert_eq!(out.len(), 1);
    assert!(matches!(ring.cancel(a), Err(UringError::NotInFlight(_))));
    // The slot is reused by the next operation; the old id must not reach it.
    let (rx, _tx) = pipe();
    let mut buf = vec![0u8; 1];
    let entry = opcode::Read::new(types::Fd(rx.as_raw_fd()), buf.as_mut_ptr(), 1).build();
    // SAFETY: the read targets `buf`'s heap memory, owned by the ring until completion.
    let b = unsafe { ring.push(entry, 2, buf) }.unwrap();
    assert_ne!(a, b);
    assert!(ring.cancel(a).is_err());
    ring.cancel(b).unwrap();
    out.clear();
    ring.wait(1, Some(Duration::from_secs(5)), &mut out)
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].token, 2);
    assert_eq!(out[0].result, -libc::ECANCELED);
    assert_eq!(out[0].payload.as_deref(), Some(&[0u8][..]));
}

#[test]
fn eventfd_wakes_a_blocked_waiter() {
    let Some(mut ring) = ring::<Box<types::Timespec>>(&RingConfig::new(8)) else {
        return;
    };
    let efd = ring
        .eventfd()
        .expect("eventfd registered by default")
        .as_fd()
        .try_clone_to_owned()
        .unwrap();
    efd_clear(&efd);
    let waiter = std::thread::spawn(move || {
        let mut pfd = libc::pollfd {
            fd: efd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 10_000) }
    });
    std::thread::sleep(Duration::from_millis(20));
    let ts = Box::new(types::Timespec::new().nsec(1_000_000));
    let entry = opcode::Timeout::new(&raw const *ts).build();
    // SAFETY: the timespec is boxed and owned by the ring as payload.
    unsafe { ring.push(entry, 9, ts) }.unwrap();
    ring.submit().unwrap();
    let rc = waiter.join().unwrap();
    assert_eq!(
        rc, 1,
        "the waiter timed out instead of being woken by the eventfd"
    );
    let mut out = Vec::new();
    ring.wait(1, Some(Duration::from_secs(5)), &mut out)
        .unwrap();
    assert_eq!(out[0].result, -libc::ETIME);
}

fn efd_clear(fd: &OwnedFd) {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into `v` from a nonblocking eventfd.
    unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) };
}

#[test]
fn provided_buffers_receive_and_recycle() {
    let Some(mut ring) = ring::<()>(&RingConfig::new(8)) else {
        return;
    };
    if !ring.features().pbuf_ring {
        println!("SKIPPED: kernel has no provided-buffer rings");
        return;
    }
    let bufs = ring.register_buf_ring(3, 4, 64).unwrap();
    let mut sv = [0; 2];
    // SAFETY: socketpair writes two descriptors.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0);
    // SAFETY: both descriptors are new and owned here.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    let mut out = Vec::new();
    for round in 0..10u8 {
        let msg = [round; 10];
        // SAFETY: writes 10 bytes from a live array.
        let n = unsafe { libc::write(b.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
        assert_eq!(n, 10);
        let entry = opcode::Recv::new(types::Fd(a.as_raw_fd()), std::ptr::null_mut(), 64)
            .buf_group(bufs.group())
            .build()
            .flags(squeue::Flags::BUFFER_SELECT);
        // SAFETY: the receive writes only into a provided buffer, which the ring keeps alive.
        unsafe { ring.push(entry, u64::from(round), ()) }.unwrap();
        out.clear();
        ring.wait(1, Some(Duration::from_secs(5)), &mut out)
            .unwrap();
        assert_eq!(out.len(), 1);
        let c = &out[0];
        assert_eq!(c.result, 10);
        let got = bufs
            .take(c.flags, c.result as usize)
            .expect("a selected buffer");
        assert_eq!(&*got, &msg[..]);
        assert_eq!(bufs.taken(), 1);
        assert!(
            bufs.take(c.flags, 10).is_none(),
            "the same buffer was taken twice"
        );
        drop(got);
        assert_eq!(bufs.taken(), 0);
    }
}

/// Child half of `refused_ring_names_seccomp`: runs only when the parent asks for it.
#[test]
fn seccomp_child() {
    if std::env::var_os("VIADUCT_SECCOMP_CHILD").is_none() {
        return;
    }
    install_filter_refusing_io_uring_setup();
    match Ring::<()>::new(&RingConfig::new(8)) {
        Ok(_) => println!("CHILD-RESULT: ring created despite the filter"),
        Err(e) => println!("CHILD-RESULT: {e}"),
    }
}

#[test]
fn refused_ring_names_seccomp() {
    if !cfg!(target_arch = "x86_64") {
        println!("SKIPPED: the seccomp filter here is written for x86_64");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "seccomp_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("VIADUCT_SECCOMP_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("CHILD-RESULT"))
        .unwrap_or_else(|| panic!("child printed no result: {stdout}"));
    if std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|s| s.trim() != "0")
        .unwrap_or(false)
    {
        assert!(line.contains("io_uring_disabled"), "{line}");
        return;
    }
    assert!(line.contains("EPERM") && line.contains("seccomp"), "{line}");
    println!("{line}");
}

/// Installs a classic BPF seccomp filter returning EPERM for `io_uring_setup` (x86_64: 425).
fn install_filter_refusing_io_uring_setup() {
    const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const BPF_JMP_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const BPF_RET_K: u16 = 0x06;
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const NR_IO_URING_SETUP: u32 = 425;
    let stmt = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code, k, jt, jf| libc::sock_filter { code, jt, jf, k };
    let filter = [
        stmt(BPF_LD_W_ABS, 4), // seccomp_data.arch
        jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
        stmt(BPF_LD_W_ABS, 0), // seccomp_data.nr
        jump(BPF_JMP_JEQ_K, NR_IO_URING_SETUP, 0, 1),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    assert_eq!(
        rc,
        0,
        "PR_SET_NO_NEW_PRIVS: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `prog` points at `filter`, both alive for the call; the kernel copies the program.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &raw const prog,
            0,
            0,
        )
    };
    assert_eq!(rc, 0, "PR_SET_SECCOMP: {}", std::io::Error::last_os_error());
}

#[test]
fn multishot_receive_reports_more_then_one_final() {
    let Some(mut ring) = ring::<()>(&RingConfig::new(8)) else {
        return;
    };
    if !ring.features().multishot_recv {
        println!("SKIPPED: kernel has no multishot receive");
        return;
    }
    let bufs = ring.register_buf_ring(5, 8, 128).unwrap();
    let mut sv = [0; 2];
    // SAFETY: socketpair writes two descriptors.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0);
    // SAFETY: both descriptors are new and owned here.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) };
    let entry = opcode::RecvMulti::new(types::Fd(a.as_raw_fd()), bufs.group()).build();
    // SAFETY: the receive writes only into provided buffers, which the ring keeps alive.
    let op = unsafe { ring.push(entry, 77, ()) }.unwrap();
    let mut out = Vec::new();
    for round in 0..3u8 {
        let msg = [round + 1; 5];
        // SAFETY: writes 5 bytes from a live array.
        let n = unsafe { libc::write(b.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
        assert_eq!(n, 5);
        out.clear();
        ring.wait(1, Some(Duration::from_secs(5)), &mut out)
            .unwrap();
        assert_eq!(out.len(), 1);
        let c = &out[0];
        assert!(c.more(), "a multishot completion without MORE: {c:?}");
        assert!(c.payload.is_none());
        assert_eq!(c.token, 77);
        let got = bufs.take(c.flags, c.result as usize).unwrap();
        assert_eq!(&*got, &msg[..]);
    }
    assert_eq!(ring.in_flight(), 1);
    ring.cancel(op).unwrap();
    out.clear();
    ring.wait(1, Some(Duration::from_secs(5)), &mut out)
        .unwrap();
    assert_eq!(out.len(), 1);
    assert!(!out[0].more());
    assert_eq!(out[0].result, -libc::ECANCELED);
    assert_eq!(out[0].payload, Some(()));
    assert_eq!(ring.in_flight(), 0);
    assert_eq!(bufs.taken(), 0);
}

#[test]
fn features_probe_reports() {
    match viaduct_fallback::uring::Features::probe() {
        Ok(f) => {
            let text = f.to_string();
            assert!(text.contains("kernel: ") && text.contains("multishot recv: "));
            assert!(f.read_write && f.async_cancel, "{text}");
            assert!(text.contains("defer_taskrun (single issuer): "), "{text}");
            // SINGLE_ISSUER | DEFER_TASKRUN arrived in Linux 6.1.
            let mut v = f.kernel_release.split(|c: char| !c.is_ascii_digit());
            let major: u32 = v.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            let minor: u32 = v.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            if (major, minor) >= (6, 1) {
                assert!(
                    f.defer_taskrun,
                    "kernel {} refused a single-issuer ring",
                    f.kernel_release
                );
            } else {
                println!(
                    "SKIPPED (in part): kernel {} predates DEFER_TASKRUN",
                    f.kernel_release
                );
            }
        }
        Err(e) => println!("SKIPPED: io_uring unavailable here: {e}"),
    }
}

#[test]
fn dropping_a_ring_with_ops_in_flight_waits_for_them() {
    let Some(mut ring) = ring::<Vec<u8>>(&RingConfig::new(8)) else {
        return;
    };
    let (rx, _tx) = pipe();
    for i in 0..4 {
        let mut buf = vec![0u8; 32];
        let entry = opcode::Read::new(types::Fd(rx.as_raw_fd()), buf.as_mut_ptr(), 32).build();
        // SAFETY: the read targets `buf`'s heap memory, owned by the ring until completion.
        unsafe { ring.push(entry, i, buf) }.unwrap();
    }
    ring.submit().unwrap();
    assert_eq!(ring.in_flight(), 4);
    // Drop cancels the reads and waits for their completions before freeing the buffers.
    drop(ring);
}

#[test]
fn engines_can_move_between_threads() {
    fn is_send<T: Send>() {}
    is_send::<Ring<Vec<u8>>>();
    is_send::<viaduct_fallback::file::FileIo>();
    is_send::<viaduct_fallback::file::FileOp>();
    is_send::<viaduct_fallback::uring::ProvidedBuf>();
}

#[test]
fn a_single_issuer_ring_refuses_another_thread_by_name() {
    let Some(mut ring) = ring::<u64>(&RingConfig::new(8).single_issuer(true)) else {
        return;
    };
    if !ring.features().defer_taskrun {
        println!(
            "SKIPPED: kernel {} refused SINGLE_ISSUER | DEFER_TASKRUN",
            ring.features().kernel_release
        );
        return;
    }
    // The creating thread may submit and reap.
    // SAFETY: a NOP carries no pointers.
    unsafe { ring.push(nop(), 1, 1) }.unwrap();
    let mut out = Vec::new();
    ring.wait(1, Some(Duration::from_secs(5)), &mut out)
        .unwrap();
    assert_eq!(out.len(), 1);
    // Another thread may not.
    let err = std::thread::spawn(move || {
        // SAFETY: a NOP carries no pointers.
        unsafe { ring.push(nop(), 2, 2) }.unwrap();
        let e = ring.submit().expect_err("a non-issuer thread submitted");
        drop(ring);
        e
    })
    .join()
    .unwrap();
    assert!(matches!(err, UringError::NotIssuer(_)), "{err:?}");
    assert_eq!(err.raw_os_error(), Some(libc::EEXIST));
    let text = err.to_string();
    assert!(
        text.contains("single issuer") && text.contains("other than the one that created it"),
        "{text}"
    );
}

#[test]
fn unsubmitted_counts_what_the_kernel_has_not_taken() {
    let Some(mut ring) = ring::<u64>(&RingConfig::new(8)) else {
        return;
    };
    assert_eq!(ring.unsubmitted(), 0);
    for i in 0..3 {
        // SAFETY: a NOP carries no pointers.
        unsafe { ring.push(nop(), i, i) }.unwrap();
    }
    assert_eq!(ring.unsubmitted(), 3, "pushes alone do not submit");
    ring.submit().unwrap();
    assert_eq!(ring.unsubmitted(), 0);
    let mut out = Vec::new();
    ring.wait(3, Some(Duration::from_secs(5)), &mut out)
        .unwrap();
    assert_eq!(out.len(), 3);
}
