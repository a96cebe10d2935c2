//! A hostile peer of the shared-memory method: it lies about its pid in the set-up hello,
//! and it writes garbage records into the ring it shares (absurd lengths, offsets, kinds).
//! The pid used for single copy is the kernel's; every garbage record is refused with a
//! protocol error that names the peer, and nothing crashes or reads outside the ring.
//!
//! The garbage is written the way a peer holding the segment would: through the segment's
//! memfd (reopened from `/proc/self/fd`), with plain positioned writes.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use viaduct_fallback::shm::{self, Config, Endpoint, Error};

/// Bytes of the control page in front of the rings (the segment layout).
const CONTROL: u64 = 4096;
/// Offset of the salt in the control page.
const SALT_AT: u64 = 24;
/// Offset of the ring size in the control page.
const RING_BYTES_AT: u64 = 16;

/// Bytes of each ring of the test pairs.
const RING: usize = 1 << 20;

/// One pair at a time: a test finds its pair's segment as the new one among this process's
/// descriptors.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The memfds of shared segments open in this process: descriptor path and the segment's inode
/// (a descriptor number closed by another test and reused for a new segment is told apart by
/// its inode).
fn segment_fds() -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if let Ok(l) = std::fs::read_link(e.path())
            && l.to_string_lossy().starts_with("/memfd:viaduct-shm")
            && let Ok(m) = std::fs::metadata(e.path())
        {
            out.push((e.path().to_string_lossy().into_owned(), m.ino()));
        }
    }
    out
}

/// A pair of endpoints and the segment they share, opened for writing as a peer would.
fn pair_and_segment() -> (Endpoint, Endpoint, File, MutexGuard<'static, ()>) {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let before = segment_fds();
    let (a, b) = shm::pair(Config {
        ring_bytes: RING,
        ..Config::default()
    })
    .expect("pair");
    let (fd, _) = segment_fds()
        .into_iter()
        .find(|(_, ino)| !before.iter().any(|(_, b)| b == ino))
        .expect("the pair's segment among this process's descriptors");
    let seg = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fd)
        .expect("reopen the segment");
    (a, b, seg, guard)
}

fn u64_at(seg: &File, at: u64) -> u64 {
    let mut b = [0u8; 8];
    seg.read_exact_at(&mut b, at).unwrap();
    u64::from_le_bytes(b)
}

/// Writes a record at ring position `pos` of ring 0 (sent by side 0, read by side 1): stamp,
/// then the 32-byte header, then `payload`.
fn forge(seg: &File, pos: u64, header: [u8; 32], payload: &[u8]) {
    let salt = u64_at(seg, SALT_AT);
    let size = u64_at(seg, RING_BYTES_AT);
    let off = CONTROL + pos % size;
    seg.write_all_at(&header, off + 8).unwrap();
    seg.write_all_at(payload, off + 40).unwrap();
    let stamp = ((pos + 1) ^ salt) | 1 << 63;
    seg.write_all_at(&stamp.to_le_bytes(), off).unwrap();
}

fn header(len: u32, kind: u8, flags: u8, seq: u32, key: u32, offset: u64) -> [u8; 32] {
    let mut h = [0u8; 32];
    h[0..4].copy_from_slice(&len.to_le_bytes());
    h[4] = kind;
    h[5] = flags;
    h[8..12].copy_from_slice(&seq.to_le_bytes());
    h[12..16].copy_from_slice(&key.to_le_bytes());
    h[16..24].copy_from_slice(&0x7a67u64.to_le_bytes());
    h[24..32].copy_from_slice(&offset.to_le_bytes());
    h
}

/// Runs side 1's `next` until it fails; returns the error (fails the test after 10 s).
fn next_error(ep: &mut Endpoint) -> Error {
    let start = Instant::now();
    loop {
        match ep.next() {
            Err(e) => return e,
            Ok(Some(m)) => panic!("a garbage record came out as a message of {}", m.data.len()),
            Ok(None) => {}
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the garbage record was not noticed"
        );
        let _ = ep.wait(Duration::from_millis(10));
    }
}

#[test]
fn garbage_records_are_refused_naming_the_peer() {
    let size = RING as u32;
    let cases: Vec<(&str, [u8; 32], Vec<u8>)> = vec![
        ("absurd length", header(u32::MAX, 1, 0, 0, 0, 0), vec![]),
        (
            "length past the ring's end",
            header(size - 40 + 1, 1, 0, 0, 0, 0),
            vec![],
        ),
        ("unknown kind", header(8, 0xee, 0, 0, 0, 0), vec![]),
        ("unknown flags", header(8, 1, 0x80, 0, 0, 0), vec![]),
        ("out of sequence", header(8, 1, 0, 77, 0, 0), vec![]),
        (
            "chunked message of absurd total",
            header(8, 9, 1, 0, 0, u64::MAX),
            vec![0; 8],
        ),
        (
            "chunk overrunning its message",
            header(64, 9, 1, 0, 0, 16),
            vec![0; 64],
        ),
        ("chunk outside a message", header(8, 9, 0, 0, 0, 0), vec![]),
        (
            "rendezvous of absurd length",
            header(16, 8, 0, 0, 0, 0),
            [0x1000u64.to_le_bytes(), u64::MAX.to_le_bytes()].concat(),
        ),
        (
            "rendezvous record of the wrong size",
            header(9, 8, 0, 0, 0, 0),
            vec![0; 9],
        ),
        ("reply to nothing", header(0, 3, 0, 0, 0, 0), vec![]),
    ];
    for (what, h, payload) in cases {
        let (a, mut b, seg, _one) = pair_and_segment();
        forge(&seg, 0, h, &payload);
        let e = next_error(&mut b);
        let text = e.to_string();
        assert!(
            matches!(e, Error::Protocol(_)),
            "{what}: not a protocol error: {text}"
        );
        assert!(
            text.contains(&format!("process {}", std::process::id())),
            "{what}: the error does not name the peer: {text}"
        );
        println!("{what}: {text}");
        drop((a, b));
    }
}

/// An emulated RDMA write with an absurd region offset is refused with an access error
/// (answered to the peer), and the endpoint stays usable.
#[test]
fn garbage_region_offsets_are_answered_with_an_error() {
    let (mut a, mut b, seg, _one) = pair_and_segment();
    let key = b.register(vec![0u8; 64]);
    let mut h = header(8, 2, 0, 0, 0, u64::MAX - 3);
    h[12..16].copy_from_slice(&key.0.to_le_bytes());
    forge(&seg, 0, h, &[1; 8]);
    // Side 1 serves the write (refusing it) and replies; side 0 then sees a reply to an
    // operation it never posted: a protocol error on its side, which names side 1.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        assert!(
            b.next()
                .expect("side 1 refuses the write quietly")
                .is_none()
        );
        match a.next() {
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains("unknown operation"), "{text}");
                assert!(
                    b.region(key).unwrap().iter().all(|x| *x == 0),
                    "the refused write changed the region"
                );
                return;
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    panic!("side 0 never saw the reply");
}

/// A peer that claims another pid in its set-up hello: the endpoint uses the pid the kernel
/// reports for the socket (`SO_PEERCRED`), not the claim.
#[test]
fn the_peer_pid_is_the_kernels_not_the_claimed_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = std::env::temp_dir().join(format!("viaduct-hostile-{}", std::process::id()));
    let _ = std::fs::create_dir(&dir);
    let path = dir.join("l.sock");
    let _ = std::fs::remove_file(&path);
    let listener = shm::Listener::bind(&path).expect("bind");
    let p2 = path.clone();
    let liar = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&p2).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // The acceptor's hello (its descriptor is discarded by a plain read).
        let mut hello = [0u8; 32];
        s.read_exact(&mut hello).expect("the acceptor's hello");
        // Claim to be process 1, offer nothing to probe.
        let mut mine = [0u8; 32];
        mine[0..4].copy_from_slice(&1u32.to_le_bytes());
        mine[24..32].copy_from_slice(b"viaduct1");
        s.write_all(&mine).expect("hello");
        let mut last = [0u8; 32];
        s.read_exact(&mut last).expect("the acceptor's last hello");
        s
    });
    let ep = listener
        .accept(Config {
            connect_timeout: Duration::from_secs(10),
            ..Config::default()
        })
        .expect("accept");
    let _s = liar.join().expect("the lying peer");
    assert_eq!(
        ep.peer_pid(),
        std::process::id(),
        "the endpoint took the peer's claimed pid"
    );
    drop(listener);
    let _ = std::fs::remove_dir_all(&dir);
}

const OTHER_USER_PATH: &str = "VIADUCT_SHM_HOSTILE_CONNECT";

/// The peer of [`a_peer_of_another_user_is_refused`]: connects to the socket and waits for it
/// to close (does nothing unless started by that test).
#[test]
fn other_user_child() {
    let Ok(path) = std::env::var(OTHER_USER_PATH) else {
        return;
    };
    let mut s = UnixStream::connect(&path).expect("connect as another user");
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(buf.is_empty(), "a peer of another user was sent {buf:?}");
}

/// A process of another user that reaches the socket (made world-writable here) is known by
/// its user before anything is sent to it, and refused by `require_same_user` naming its pid
/// and user. Needs root to start that process; skipped otherwise.
#[test]
fn a_peer_of_another_user_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: starting a process of another user needs root");
        return;
    }
    let dir = std::env::temp_dir().join(format!("viaduct-other-user-{}", std::process::id()));
    let _ = std::fs::create_dir(&dir);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join("l.sock");
    let _ = std::fs::remove_file(&path);
    let listener = shm::Listener::bind(&path).expect("bind");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "other_user_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(OTHER_USER_PATH, &path)
        .uid(65534)
        .gid(65534)
        .spawn()
        .expect("start a process of another user");
    let pending = listener.accept_pending().expect("accept");
    assert_eq!(pending.peer_uid(), 65534);
    assert_eq!(pending.peer_pid(), child.id());
    let e = pending
        .require_same_user()
        .expect_err("a peer of another user was accepted");
    drop(pending);
    let text = e.to_string() + &format!(" {e:?}");
    assert!(
        text.contains(&format!("process {}", child.id())) && text.contains("user 65534"),
        "the refusal does not name the peer: {text}"
    );
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the child hung");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "the other user's process saw data");
    drop(listener);
    let _ = std::fs::remove_dir_all(&dir);
}
