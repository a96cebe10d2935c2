//! Dropping many file operations without waiting leaks neither descriptors nor buffers, and the
//! buffers that do come back are intact. Alone in its binary so the descriptor count is its own.

use std::fs::{File, OpenOptions};
use std::sync::Arc;
use std::time::{Duration, Instant};

use viaduct_fallback::file::{FileIo, FileIoConfig, IoBuffer};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

const CANARY: [u8; 8] = *b"viaduct!";

fn canary(len: usize) -> Vec<u8> {
    CANARY.iter().copied().cycle().take(len).collect()
}

#[test]
fn dropping_100k_ops_leaks_nothing() {
    let path = std::env::temp_dir().join(format!("viaduct-file-drop-{}", std::process::id()));
    let fds_before = open_fds();
    {
        let mut io = match FileIo::new(&FileIoConfig::default()) {
            Ok(io) => io,
            Err(e) => {
                println!("SKIPPED: io_uring unavailable here: {e}");
                return;
            }
        };
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap(),
        );
        std::fs::write(&path, vec![5u8; 1 << 20]).unwrap();

        // 100,000 reads and writes, handles dropped at once; progress made now and then.
        for i in 0..100_000u64 {
            let off = (i * 4096) % (1 << 20);
            if i % 2 == 0 {
                drop(io.read_at(&file, IoBuffer::from(vec![0; 512]), off));
            } else {
                drop(io.write_at(&file, IoBuffer::from(canary(512)), off));
            }
            if i % 1000 == 999 {
                io.poll().unwrap();
            }
        }
        // Writes whose buffers are taken back keep their canary.
        let kept: Vec<_> = (0..64u64)
            .map(|i| io.write_at(&file, IoBuffer::from(canary(4096)), i * 4096))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        for op in kept {
            assert!(io.wait(&op, Some(Duration::from_secs(30))).unwrap());
            let c = io.take(op).unwrap();
            assert_eq!(c.result.unwrap(), 4096);
            assert_eq!(*c.buffers.into_one().unwrap(), canary(4096)[..]);
        }
        while io.in_flight() > 0 || io.outstanding() > 0 {
            assert!(
                Instant::now() < deadline,
                "dropped operations never drained"
            );
            io.poll().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(io.outstanding(), 0);
        let mut check = vec![0u8; 4096];
        std::os::unix::fs::FileExt::read_exact_at(&*file, &mut check, 0).unwrap();
        assert_eq!(check, canary(4096));
        drop::<Arc<File>>(file);
    }
    let _ = std::fs::remove_file(&path);
    assert_eq!(open_fds(), fds_before, "descriptors leaked");
}
