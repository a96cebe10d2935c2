//! What the file-request tests share: temporary paths and folders removed on drop, a body run
//! under a time limit, the engine (or a SKIPPED line where io_uring is unavailable), and a
//! reproducible random generator.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use viaduct_agent::fileio::FileEngine;

/// A fresh name in the temp directory: `viaduct-{tag}-{pid}-{n}-{name}`.
fn fresh(tag: &str, name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("viaduct-{tag}-{}-{n}-{name}", std::process::id()))
}

/// A path in the temp directory, removed on drop.
pub struct TempPath(pub PathBuf);

impl TempPath {
    /// A new path; `tag` names the test file, `name` the test.
    pub fn new(tag: &str, name: &str) -> Self {
        Self(fresh(tag, name))
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A folder in the temp directory, removed with its files on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new, created folder.
    pub fn new(tag: &str, name: &str) -> Self {
        let p = fresh(tag, name);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `f` on its own thread and fails the test if it takes longer than `seconds`.
pub fn within<T: Send + 'static>(seconds: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(seconds))
        .expect("the test body hung (or panicked)")
}

/// An engine with `entries` ring entries, or `None` after a SKIPPED line naming why io_uring
/// cannot be used here.
pub fn engine(entries: u32) -> Option<FileEngine> {
    match FileEngine::new(entries) {
        Ok(e) => Some(e),
        Err(e) => {
            println!("SKIPPED: io_uring unavailable here: {e}: {e:?}");
            None
        }
    }
}

/// xorshift64*: reproducible sizes, offsets and contents.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 for `n` = 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Between 1 and `max` random bytes.
    pub fn bytes(&mut self, max: u64) -> Vec<u8> {
        let len = 1 + self.below(max);
        (0..len).map(|_| self.next() as u8).collect()
    }
}
