//! Connection set-up: the segment's memfd travels over a unix socket (`SCM_RIGHTS`), then each
//! side probes whether it may read the other's memory with `process_vm_readv`.
//!
//! Set-up runs in two steps. Accepting or connecting yields a [`Pending`] connection: the
//! socket and the peer process as the kernel reports it (`SO_PEERCRED`). Nothing has been
//! sent yet, so the caller can refuse a peer of another user ([`Pending::require_same_user`])
//! and authenticate the peer over [`Pending::stream`] first; only [`Pending::establish`]
//! creates (or receives) the segment. The peer's pid used for `process_vm_readv`/`writev` is
//! the kernel's, never one the peer claims.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use super::cma;
use super::config::Config;
use super::endpoint::Endpoint;
use super::error::Error;
use super::segment::Segment;

const HELLO_LEN: usize = 32;

fn sock_err(step: &'static str) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::Socket { step, source }
}

/// What each side tells the other: its pid (informational only: the peer's pid is taken from
/// `SO_PEERCRED`), where to probe its memory, and (in the second and third message) whether
/// the probe of the other side worked.
struct Hello {
    pid: u32,
    can_read_you: bool,
    probe_addr: u64,
    probe_value: u64,
}

impl Hello {
    fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&self.pid.to_le_bytes());
        b[4] = self.can_read_you as u8;
        b[8..16].copy_from_slice(&self.probe_addr.to_le_bytes());
        b[16..24].copy_from_slice(&self.probe_value.to_le_bytes());
        b[24..32].copy_from_slice(b"viaduct1");
        b
    }

    fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, Error> {
        if &b[24..32] != b"viaduct1" || b[4] > 1 {
            return Err(Error::Handshake(
                "peer is not a viaduct shared-memory endpoint".into(),
            ));
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Ok(Hello {
            pid: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            can_read_you: b[4] == 1,
            probe_addr: u64_at(8),
            probe_value: u64_at(16),
        })
    }
}

fn probe_value() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (t ^ (std::process::id() as u64) << 32).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1
}

fn send_with_fd(sock: &UnixStream, data: &[u8], fd: &OwnedFd) -> Result<(), Error> {
    let raw = fd.as_raw_fd();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: a zeroed msghdr is a valid empty header; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at a control buffer of CMSG_SPACE(int) bytes, so the first header
    // and its data (one int) fit; `iov` and `cbuf` outlive the sendmsg call.
    let rc = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), raw);
        libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    // Interrupted before anything was sent (EINTR): send again.
    let rc = if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
        loop {
            // SAFETY: `msg` is the header built above, still valid (`iov` and `cbuf` live).
            let rc = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
            if rc >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break rc;
            }
        }
    } else {
        rc
    };
    if rc < 0 {
        return Err(Error::Socket {
            step: "send",
            source: io::Error::last_os_error(),
        });
    }
    if rc as usize != data.len() {
        return Err(Error::Handshake("short send of the set-up message".into()));
    }
    Ok(())
}

fn recv_with_fd(sock: &UnixStream, data: &mut [u8; HELLO_LEN]) -> Result<OwnedFd, Error> {
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    let mut cbuf = vec![0u64; space.div_ceil(8)];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: a zeroed msghdr is a valid empty header; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // A signal (a handler, a debugger or tracer attaching) interrupts a receive that has a
    // timeout with EINTR even under SA_RESTART: nothing was received then, so try again.
    let n = loop {
        // SAFETY: `msg` describes writable buffers that outlive the call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(Error::Socket {
                step: "receive",
                source: e,
            });
        }
    };
    if n as usize != HELLO_LEN {
        return Err(Error::Handshake(format!("set-up message of {n} bytes")));
    }
    // SAFETY: the kernel filled `msg`; CMSG_FIRSTHDR checks msg_controllen before returning a
    // header, and a SCM_RIGHTS header of CMSG_LEN(int) bytes carries one descriptor.
    let fd = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        if c.is_null()
            || (*c).cmsg_level != libc::SOL_SOCKET
            || (*c).cmsg_type != libc::SCM_RIGHTS
            || (*c).cmsg_len as usize
                != libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize
        {
            return Err(Error::Handshake(
                "set-up message carries no segment descriptor".into(),
            ));
        }
        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>())
    };
    // SAFETY: SCM_RIGHTS installed a new descriptor in this process that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn read_hello(sock: &mut UnixStream) -> Result<Hello, Error> {
    let mut b = [0u8; HELLO_LEN];
    sock.read_exact(&mut b).map_err(sock_err("receive"))?;
    Hello::decode(&b)
}

/// The process at the other end of `sock` as the kernel recorded it when the socket was
/// connected (`SO_PEERCRED`): its pid (0 when it is not visible in this pid namespace) and uid.
fn peer_cred(sock: &UnixStream) -> Result<(u32, u32), Error> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes for the duration of the call and `len`
    // holds the size of `cred`; the descriptor is open.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(Error::Socket {
            step: "peer credentials",
            source: io::Error::last_os_error(),
        });
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(Error::Handshake(
            "the kernel gave no peer credentials".into(),
        ));
    }
    Ok((cred.pid.max(0) as u32, cred.uid))
}

/// This process's effective user id.
fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether this side may read `pid`'s memory, probing `addr` for `value` (never for an
/// unknown pid).
fn may_read(config: &Config, pid: u32, addr: u64, value: u64) -> bool {
    config.single_copy && pid != 0 && cma::probe(pid, addr, value)
}

fn prepare(sock: &UnixStream, config: &Config) -> Result<(), Error> {
    config.validate()?;
    sock.set_read_timeout(Some(config.connect_timeout))
        .map_err(sock_err("set timeout"))?;
    sock.set_write_timeout(Some(config.connect_timeout))
        .map_err(sock_err("set timeout"))
}

/// Side 0: creates the segment and sends it. `peer_pid` is the kernel's ([`peer_cred`]).
fn accept_on(mut sock: UnixStream, peer_pid: u32, config: Config) -> Result<Endpoint, Error> {
    prepare(&sock, &config)?;
    let probe = Box::new(probe_value());
    let seg = Segment::create(config.ring_bytes, probe_value())?;
    let hello = Hello {
        pid: std::process::id(),
        can_read_you: false,
        probe_addr: &*probe as *const u64 as u64,
        probe_value: *probe,
    };
    send_with_fd(&sock, &hello.encode(), seg.fd())?;
    let peer = read_hello(&mut sock)?;
    let can_read = may_read(&config, peer_pid, peer.probe_addr, peer.probe_value);
    let reply = Hello {
        can_read_you: can_read,
        probe_addr: 0,
        probe_value: 0,
        ..hello
    };
    sock.write_all(&reply.encode()).map_err(sock_err("send"))?;
    drop(probe);
    Endpoint::new(seg, 0, sock, peer_pid, peer.can_read_you, can_read, config)
}

/// Side 1: receives the segment and attaches to it. `peer_pid` is the kernel's
/// ([`peer_cred`]).
fn connect_on(mut sock: UnixStream, peer_pid: u32, config: Config) -> Result<Endpoint, Error> {
    prepare(&sock, &config)?;
    let mut b = [0u8; HELLO_LEN];
    let fd = recv_with_fd(&sock, &mut b)?;
    let peer = Hello::decode(&b)?;
    let seg = Segment::attach(fd)?;
    let probe = Box::new(probe_value());
    let can_read = may_read(&config, peer_pid, peer.probe_addr, peer.probe_value);
    let hello = Hello {
        pid: std::process::id(),
        can_read_you: can_read,
        probe_addr: &*probe as *const u64 as u64,
        probe_value: *probe,
    };
    sock.write_all(&hello.encode()).map_err(sock_err("send"))?;
    let last = read_hello(&mut sock)?;
    drop(probe);
    Endpoint::new(seg, 1, sock, peer_pid, last.can_read_you, can_read, config)
}

/// A connection whose peer is known (by the kernel) but to which nothing was sent yet: no
/// segment exists for it. Authenticate the peer over [`Pending::stream`] if needed, then
/// [`Pending::establish`] the connection; dropping it closes the socket.
#[derive(Debug)]
pub struct Pending {
    sock: UnixStream,
    peer_pid: u32,
    peer_uid: u32,
    /// Side 0 creates the segment (the accepting end), side 1 attaches.
    side: usize,
}

impl Pending {
    /// The peer's process id as the kernel reports it (`SO_PEERCRED`; 0 when the peer is not
    /// visible in this pid namespace, which rules out single copy).
    pub fn peer_pid(&self) -> u32 {
        self.peer_pid
    }

    /// The peer's user id as the kernel reports it (`SO_PEERCRED`).
    pub fn peer_uid(&self) -> u32 {
        self.peer_uid
    }

    /// Refuses a peer that runs as another user than this process (an error naming its pid
    /// and user); drop the connection then.
    pub fn require_same_user(&self) -> Result<(), Error> {
        let me = my_uid();
        if self.peer_uid != me {
            return Err(Error::Handshake(format!(
                "refused the connection of process {}: it runs as user {}, this process as \
                 user {me}",
                self.peer_pid, self.peer_uid
            )));
        }
        Ok(())
    }

    /// The set-up socket, for an exchange (such as an authentication) before the segment is
    /// set up. Whatever is read or written here must be complete when
    /// [`Pending::establish`] is called on both ends.
    pub fn stream(&mut self) -> &mut UnixStream {
        &mut self.sock
    }

    /// Sets the connection up: the accepting end creates the segment and hands it over, the
    /// connecting end receives and maps it; then both probe single copy.
    pub fn establish(self, config: Config) -> Result<Endpoint, Error> {
        // An exchange over `stream` may have left timeouts; set-up sets its own.
        if self.side == 0 {
            accept_on(self.sock, self.peer_pid, config)
        } else {
            connect_on(self.sock, self.peer_pid, config)
        }
    }
}

/// Accepts shared-memory connections on a unix socket path.
#[derive(Debug)]
pub struct Listener {
    inner: UnixListener,
    path: PathBuf,
}

impl Listener {
    /// Binds a unix socket at `path` (removed again when the listener drops).
    pub fn bind(path: impl AsRef<Path>) -> Result<Listener, Error> {
        let path = path.as_ref().to_path_buf();
        let inner = UnixListener::bind(&path).map_err(sock_err("bind"))?;
        Ok(Listener { inner, path })
    }

    /// The socket path peers connect to (the method's business-card entry).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits for one peer and sets up a connection with it. The segment is created here, so
    /// this side's `ring_bytes` applies.
    pub fn accept(&self, config: Config) -> Result<Endpoint, Error> {
        self.accept_pending()?.establish(config)
    }

    /// Waits for one peer and learns who it is (see [`Pending`]); sends it nothing.
    pub fn accept_pending(&self) -> Result<Pending, Error> {
        let (sock, _) = self.inner.accept().map_err(sock_err("accept"))?;
        let (peer_pid, peer_uid) = peer_cred(&sock)?;
        Ok(Pending {
            sock,
            peer_pid,
            peer_uid,
            side: 0,
        })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Connects to a [`Listener`] at `path`.
pub fn connect(path: impl AsRef<Path>, config: Config) -> Result<Endpoint, Error> {
    connect_pending(path)?.establish(config)
}

/// Connects to a [`Listener`] at `path` and learns who listens there (see [`Pending`]);
/// nothing is exchanged yet.
pub fn connect_pending(path: impl AsRef<Path>) -> Result<Pending, Error> {
    let sock = UnixStream::connect(path).map_err(sock_err("connect"))?;
    let (peer_pid, peer_uid) = peer_cred(&sock)?;
    Ok(Pending {
        sock,
        peer_pid,
        peer_uid,
        side: 1,
    })
}

/// Two connected endpoints in this process (for two threads, or a loopback).
pub fn pair(config: Config) -> Result<(Endpoint, Endpoint), Error> {
    pair_with(config.clone(), config)
}

/// Like [`pair`] with settings of its own for each end (the first end's `ring_bytes` wins).
pub fn pair_with(first: Config, second: Config) -> Result<(Endpoint, Endpoint), Error> {
    let (a, b) = UnixStream::pair().map_err(sock_err("socketpair"))?;
    let (pa, pb) = (peer_cred(&a)?.0, peer_cred(&b)?.0);
    let other = std::thread::spawn(move || connect_on(b, pb, second));
    let first = accept_on(a, pa, first);
    let second = other
        .join()
        .map_err(|_| Error::Handshake("the connecting thread panicked".into()))?;
    Ok((first?, second?))
}

#[cfg(test)]
mod eintr_tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    extern "C" fn nothing(_: libc::c_int) {}

    #[test]
    fn receive_survives_signals() {
        // SAFETY: installs a handler that does nothing, without SA_RESTART, for SIGUSR2, which
        // nothing else in this test binary uses.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        }
        let (a, b) = UnixStream::pair().unwrap();
        b.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let receiver = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tx.send(unsafe { libc::pthread_self() } as usize).unwrap();
            let mut data = [0u8; HELLO_LEN];
            recv_with_fd(&b, &mut data).map(|_| data)
        });
        let thread = rx.recv().unwrap() as libc::pthread_t;
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(10));
            // SAFETY: the receiver thread is alive until it got the message sent below.
            unsafe { libc::pthread_kill(thread, libc::SIGUSR2) };
        }
        let file = std::fs::File::open("/dev/null").unwrap();
        send_with_fd(&a, &[7u8; HELLO_LEN], &OwnedFd::from(file)).unwrap();
        let got = receiver
            .join()
            .unwrap()
            .expect("the receive retries after a signal");
        assert_eq!(got, [7u8; HELLO_LEN]);
    }
}
