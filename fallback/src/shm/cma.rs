//! Single copy between processes with `process_vm_readv` (cross-memory attach).

use std::io;

/// Reads `dst.len()` bytes at address `src` of process `pid` into `dst`, looping over partial
/// reads. Needs ptrace permission over `pid` (same user, no Yama restriction); without it the
/// error is `EPERM`.
pub(crate) fn read_from(pid: u32, src: u64, dst: &mut [u8]) -> io::Result<()> {
    let mut done = 0usize;
    while done < dst.len() {
        let local = libc::iovec {
            // SAFETY: `done < dst.len()`, so the pointer stays inside `dst`.
            iov_base: unsafe { dst.as_mut_ptr().add(done) }.cast(),
            iov_len: dst.len() - done,
        };
        let remote = libc::iovec {
            iov_base: (src + done as u64) as *mut libc::c_void,
            iov_len: dst.len() - done,
        };
        // SAFETY: `local` describes writable memory we own; the remote iovec is only read by the
        // kernel from the other process, which checks it against that process's mappings.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
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
