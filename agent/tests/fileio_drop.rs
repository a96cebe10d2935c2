//! Dropping and freeing many agent file requests without waiting leaks neither descriptors nor
//! buffers, and the buffers that do come back are intact (canary pattern). Alone in its binary
//! so the descriptor count is its own. `VIADUCT_DROP_COUNT` lowers the count (for runs under
//! valgrind).

use std::time::{Duration, Instant};

use viaduct_agent::fileio::{File, FileEngine, IoBuffer, OpenOptions};

/// Requests dropped unless `VIADUCT_DROP_COUNT` says otherwise.
const DEFAULT_COUNT: u64 = 100_000;
const FILE_LEN: u64 = 1 << 20;
const CANARY: [u8; 8] = *b"viaduct!";
const LIMIT: Duration = Duration::from_secs(60);

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn canary(len: usize) -> Vec<u8> {
    CANARY.iter().copied().cycle().take(len).collect()
}

fn count() -> u64 {
    std::env::var("VIADUCT_DROP_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_COUNT)
}

#[test]
fn dropping_100k_agent_file_requests_leaks_nothing() {
    let path = std::env::temp_dir().join(format!("viaduct-fileio-drop-{}", std::process::id()));
    let n = count();
    let fds_before = open_fds();
    {
        let engine = match FileEngine::new(128) {
            Ok(e) => e,
            Err(e) => {
                println!("SKIPPED: io_uring unavailable here: {e}: {e:?}");
                return;
            }
        };
        std::fs::write(&path, vec![5u8; FILE_LEN as usize]).unwrap();
        let file = File::open(
            &engine,
            &path,
            &OpenOptions {
                read: true,
                write: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
        // Reads and writes given up in three ways: the whole request dropped, the request freed
        // with its buffer claim dropped, the claim dropped first and the request later.
        for i in 0..n {
            let off = (i * 4096) % FILE_LEN;
            match i % 4 {
                0 => drop(file.iread_at(IoBuffer::from(vec![0; 512]), off)),
                1 => drop(file.iwrite_at(IoBuffer::from(canary(512)), off)),
                2 => {
                    let (r, claim) = file
                        .iread_at(IoBuffer::from(vec![0; 512]), off)
                        .into_parts();
                    drop(claim);
                    r.free().unwrap();
                }
                _ => {
                    let (r, claim) = file
                        .iwrite_at(IoBuffer::from(canary(512)), off)
                        .into_parts();
                    drop(claim);
                    drop(r);
                }
            }
            if i % 1000 == 999 {
                engine.poll().unwrap();
            }
        }
        // Writes whose buffers come back keep their canary; so do reads of what they wrote into
        // buffers filled with something else. A buffer freed while the kernel still wrote into
        // it would show up here as a changed byte.
        let mut writes: Vec<_> = (0..64u64)
            .map(|i| file.iwrite_at(IoBuffer::from(canary(4096)), i * 4096))
            .collect();
        for w in &mut writes {
            let st = w.request.wait_timeout(LIMIT).unwrap().expect("write done");
            assert_eq!(st.count(), 4096);
            let back = w.buffers.take().unwrap().into_one().unwrap();
            assert_eq!(*back, canary(4096)[..]);
        }
        let mut reads: Vec<_> = (0..64u64)
            .map(|i| file.iread_at(IoBuffer::from(vec![0xab; 4096]), i * 4096))
            .collect();
        for r in &mut reads {
            let st = r.request.wait_timeout(LIMIT).unwrap().expect("read done");
            assert_eq!(st.count(), 4096);
            let back = r.buffers.take().unwrap().into_one().unwrap();
            assert_eq!(*back, canary(4096)[..]);
        }
        // Every dropped request's buffer is given back once the kernel is done with it.
        let deadline = Instant::now() + LIMIT;
        while engine.outstanding() > 0 {
            assert!(
                Instant::now() < deadline,
                "dropped requests never drained: {} outstanding",
                engine.outstanding()
            );
            engine.poll().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(engine.outstanding(), 0);
        drop(file);
        drop(engine);
    }
    let _ = std::fs::remove_file(&path);
    assert_eq!(open_fds(), fds_before, "descriptors leaked");
}
