//! Single copy between processes with `process_vm_readv` (cross-memory attach).

use std::io;

/// Reads `dst.len()` bytes at address `src` of process `pid` into `dst`, looping over partial
/// reads. Needs ptrace permission over `pid` (same user, no Yama restriction); without it the
/// error is `EPERM`.
pub(crate) fn read_from(pid: u32, src: u64, dst: &mut [u8]) -> io::Result<()> {
    transfer(pid, src, dst.as_mut_ptr(), dst.len(), Direction::Read)
}

/// Reads `n` bytes at address `src` of process `pid`, appended to `dst` (no zeroing of the new
/// bytes first). On an error `dst` keeps its length (bytes partly read stay unused capacity).
pub(crate) fn read_append(pid: u32, src: u64, dst: &mut Vec<u8>, n: usize) -> io::Result<()> {
    dst.reserve(n);
    let spare = dst.spare_capacity_mut();
    transfer(pid, src, spare.as_mut_ptr().cast(), n, Direction::Read)?;
    // SAFETY: `reserve` made room for `n` bytes past the length, and `transfer` returned Ok,
    // so the kernel wrote every one of them (it loops until the whole range is copied).
    unsafe { dst.set_len(dst.len() + n) };
    Ok(())
}

/// Writes `src` to address `dst` of process `pid`, looping over partial writes. Needs the same
/// permission as [`read_from`].
pub(crate) fn write_to(pid: u32, dst: u64, src: &[u8]) -> io::Result<()> {
    // The kernel only reads the local buffer of a write, so the pointer's mutability is nominal.
    transfer(
        pid,
        dst,
        src.as_ptr().cast_mut(),
        src.len(),
        Direction::Write,
    )
}

#[derive(Clone, Copy)]
enum Direction {
    Read,
    Write,
}

fn transfer(
    pid: u32,
    remote_at: u64,
    local: *mut u8,
    len: usize,
    dir: Direction,
) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            // SAFETY: `done < len`, so the pointer stays inside the caller's buffer of `len`.
            iov_base: unsafe { local.add(done) }.cast(),
            iov_len: len - done,
        };
        let remote = libc::iovec {
            iov_base: (remote_at + done as u64) as *mut libc::c_void,
            iov_len: len - done,
        };
        let pid = pid as libc::pid_t;
        let n = match dir {
            // SAFETY: `local` describes memory the caller lends us mutably (`read_from`); the
            // kernel checks the remote iovec against the other process's mappings.
            Direction::Read => unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) },
            // SAFETY: `local` describes memory the caller lends us (`write_to`), which the kernel
            // only reads; it checks the remote iovec against the other process's mappings.
            Direction::Write => unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) },
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        done += n as usize;
    }
    Ok(())
}

/// Whether this process may read `len` bytes at `addr` of `pid` and finds `expected` there.
pub(crate) fn probe(pid: u32, addr: u64, expected: u64) -> bool {
    let mut got = [0u8; 8];
    read_from(pid, addr, &mut got).is_ok() && u64::from_le_bytes(got) == expected
}
