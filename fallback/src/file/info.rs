//! What the engine needs to know about an open file: `O_DIRECT` and its alignment rules.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Weak};

/// `O_DIRECT` state and alignment of one open file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileInfo {
    /// Opened with `O_DIRECT`.
    pub direct: bool,
    /// Memory alignment `O_DIRECT` buffers need.
    pub mem_align: u32,
    /// Offset and length alignment (logical block size).
    pub block: u32,
}

impl FileInfo {
    fn of(file: &File) -> Self {
        let fd = file.as_raw_fd();
        // SAFETY: F_GETFL on a descriptor we hold open takes no pointers.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        let direct = flags >= 0 && flags & libc::O_DIRECT != 0;
        let (mem_align, block) = if direct { dio_align(fd) } else { (1, 1) };
        Self {
            direct,
            mem_align,
            block,
        }
    }
}

/// `(memory alignment, offset alignment)` for direct I/O, from `statx(STATX_DIOALIGN)` (Linux
/// 6.1); 512 for both where the kernel or filesystem does not say (the smallest logical block).
fn dio_align(fd: i32) -> (u32, u32) {
    // SAFETY: statx is plain data; all-zero is a valid value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an empty C path with AT_EMPTY_PATH names `fd`; `stx` is a valid out buffer.
    let rc = unsafe {
        libc::statx(
            fd,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0 && stx.stx_dio_offset_align != 0 {
        (stx.stx_dio_mem_align.max(1), stx.stx_dio_offset_align)
    } else {
        (512, 512)
    }
}

/// File infos keyed by the address of the `Arc<File>` they were computed for.
#[derive(Debug, Default)]
pub(crate) struct InfoCache {
    map: HashMap<usize, (Weak<File>, FileInfo)>,
    prune_at: usize,
}

impl InfoCache {
    pub(crate) fn get(&mut self, file: &Arc<File>) -> FileInfo {
        let key = Arc::as_ptr(file) as usize;
        // The weak reference keeps the allocation, so its address cannot be reused by another
        // `Arc` while the entry exists: a live entry under this key is this file.
        if let Some((weak, info)) = self.map.get(&key) {
            if weak.strong_count() > 0 {
                return *info;
            }
        }
        let info = FileInfo::of(file);
        if self.map.len() >= self.prune_at.max(64) {
            self.map.retain(|_, (w, _)| w.strong_count() > 0);
            self.prune_at = self.map.len() * 2;
        }
        self.map.insert(key, (Arc::downgrade(file), info));
        info
    }
}
