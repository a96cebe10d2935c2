//! Nonblocking file I/O requests against real files: results and byte counts through request
//! statuses, mixed waits, cancellation, errors named in the request's cause.

use std::time::Duration;

use viaduct_agent::fileio::{File, FileError, IoBuffer, OpenOptions};
use viaduct_agent::request::{RequestError, test_any, wait_all, wait_any};

mod fileio_common;
use fileio_common::{Rng, TempPath, engine, within};

/// Names of this file's temporary files.
const TAG: &str = "fileio";
/// Limit on one test body, seconds.
const LIMIT_S: u64 = 30;

#[test]
fn write_then_read_reports_counts_and_returns_buffers() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let path = TempPath::new(TAG, "rw");
        let file = File::open(&engine, &path.0, &OpenOptions::create_rw()).unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let (status, bufs) = file
            .iwrite_at(IoBuffer::from(data.clone()), 100)
            .wait()
            .unwrap();
        assert_eq!(status.count(), 10_000);
        assert!(!status.test_cancelled());
        assert_eq!(*bufs.into_one().unwrap(), data[..]);
        let (status, _) = file.isync().wait().unwrap();
        assert_eq!(status.count(), 0);
        let (status, bufs) = file
            .iread_at(IoBuffer::from(vec![0; 20_000]), 100)
            .wait()
            .unwrap();
        assert_eq!(
            status.count(),
            10_000,
            "a read at end of file counts what it read"
        );
        assert_eq!(bufs.into_one().unwrap()[..10_000], data[..]);
        // Vectored.
        let parts = vec![IoBuffer::from(vec![1u8; 3]), IoBuffer::from(vec![2u8; 5])];
        let (status, _) = file.iwritev_at(parts, 0).wait().unwrap();
        assert_eq!(status.count(), 8);
        let (status, bufs) = file
            .ireadv_at(
                vec![IoBuffer::from(vec![0; 4]), IoBuffer::from(vec![0; 4])],
                0,
            )
            .wait()
            .unwrap();
        assert_eq!(status.count(), 8);
        let got: Vec<u8> = bufs.into_vec().iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(got, [1, 1, 1, 2, 2, 2, 2, 2]);
        assert_eq!(engine.outstanding(), 0);
    });
}

#[test]
fn many_requests_in_one_wait_all_and_wait_any() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let path = TempPath::new(TAG, "many");
        std::fs::write(&path.0, vec![9u8; 64 * 1024]).unwrap();
        let file = File::open(&engine, &path.0, &OpenOptions::read()).unwrap();
        let mut claims = Vec::new();
        let mut requests = Vec::new();
        for i in 0..64u64 {
            let (r, c) = file
                .iread_at(IoBuffer::from(vec![0; 1024]), i * 1024)
                .into_parts();
            requests.push(r);
            claims.push(c);
        }
        let mut statuses = Vec::new();
        wait_all(&mut requests, Some(&mut statuses)).unwrap();
        assert!(statuses.iter().all(|s| s.count() == 1024));
        for c in claims {
            assert!(
                c.take()
                    .unwrap()
                    .into_one()
                    .unwrap()
                    .iter()
                    .all(|&b| b == 9)
            );
        }
        let mut requests: Vec<_> = (0..4u64)
            .map(|i| file.iread_at(IoBuffer::from(vec![0; 10]), i).into_parts().0)
            .collect();
        let mut seen = 0;
        while let Some((_, r)) = wait_any(&mut requests).completed() {
            assert_eq!(r.unwrap().count(), 10);
            seen += 1;
        }
        assert_eq!(seen, 4);
    });
}

#[test]
fn cancel_of_a_blocked_read_reports_cancelled() {
    let Some(engine) = engine(64) else { return };
    let path = TempPath::new(TAG, "fifo");
    let made = std::process::Command::new("mkfifo").arg(&path.0).status();
    if !made.is_ok_and(|s| s.success()) {
        println!("SKIPPED: mkfifo is not available");
        return;
    }
    within(LIMIT_S, move || {
        // Read and write, so opening does not wait for a writer; reads block on the empty FIFO.
        let options = OpenOptions {
            read: true,
            write: true,
            ..OpenOptions::default()
        };
        let fifo = File::open(&engine, &path.0, &options).unwrap();
        let mut req = fifo.iread_at(IoBuffer::from(vec![5; 16]), 0);
        assert!(req.request.test().unwrap().is_none());
        let mut pending = [req.request];
        assert!(test_any(&mut pending).is_pending());
        pending[0].cancel().unwrap();
        let [request] = pending;
        req.request = request;
        let (status, bufs) = req.wait().unwrap();
        assert!(status.test_cancelled());
        assert_eq!(status.count(), 0);
        assert_eq!(*bufs.into_one().unwrap(), [5; 16]);
        assert_eq!(engine.outstanding(), 0);
    });
}

#[test]
fn cancel_after_completion_is_not_cancelled() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let path = TempPath::new(TAG, "late");
        std::fs::write(&path.0, [3u8; 8]).unwrap();
        let file = File::open(&engine, &path.0, &OpenOptions::read()).unwrap();
        let req = file.iread_at(IoBuffer::from(vec![0; 8]), 0);
        let status = loop {
            if req.request.get_status().unwrap().is_some() {
                break req.request.get_status().unwrap().unwrap();
            }
            std::thread::yield_now();
        };
        assert_eq!(status.count(), 8);
        req.request.cancel().unwrap();
        let (status, _) = req.wait().unwrap();
        assert!(!status.test_cancelled());
        assert_eq!(status.count(), 8);
    });
}

#[test]
fn write_to_read_only_file_fails_with_ebadf() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let path = TempPath::new(TAG, "ro");
        std::fs::write(&path.0, b"x").unwrap();
        let file = File::open(&engine, &path.0, &OpenOptions::read()).unwrap();
        let (err, bufs) = file
            .iwrite_at(IoBuffer::from(vec![1; 4]), 0)
            .wait()
            .unwrap_err()
            .into_parts();
        assert_eq!(err.errno(), Some(libc::EBADF), "{err}");
        assert!(err.to_string().contains("read-only"), "{err}");
        assert_eq!(bufs.unwrap().into_one().unwrap().len(), 4);
    });
}

#[test]
fn freeing_incomplete_requests_leaks_no_buffers() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let path = TempPath::new(TAG, "free");
        std::fs::write(&path.0, vec![1u8; 4096]).unwrap();
        let file = File::open(&engine, &path.0, &OpenOptions::read()).unwrap();
        for _ in 0..1000 {
            let (r, _claim) = file.iread_at(IoBuffer::from(vec![0; 512]), 0).into_parts();
            r.free().unwrap();
        }
        // Later requests drive the engine, which releases the freed ones as they finish.
        for _ in 0..1000 {
            if engine.outstanding() == 0 {
                break;
            }
            let _ = file.iread_at(IoBuffer::from(vec![0; 1]), 0).wait().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(engine.outstanding(), 0);
    });
}

#[test]
fn o_direct_misaligned_request_fails_with_the_alignment() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let path = TempPath::new(TAG, "direct");
        let options = OpenOptions {
            direct: true,
            ..OpenOptions::create_rw()
        };
        let file = match File::open(&engine, &path.0, &options) {
            Ok(f) => f,
            Err(e) => {
                println!("SKIPPED: the temp filesystem refuses O_DIRECT: {e}");
                return;
            }
        };
        let (err, bufs) = file
            .iwrite_at(IoBuffer::aligned(100, 4096).unwrap(), 0)
            .wait()
            .unwrap_err()
            .into_parts();
        let RequestError::Operation(cause) = &err else {
            panic!("unexpected error {err}");
        };
        let fe = cause.downcast_ref::<FileError>().expect("a file error");
        assert!(matches!(fe, FileError::Misaligned { len: 100, .. }), "{fe}");
        assert!(bufs.is_some());
    });
}

#[test]
fn file_requests_mix_with_generalized_requests() {
    use viaduct_agent::request::{GrequestOps, Request};
    struct Plain;
    impl GrequestOps for Plain {}
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let path = TempPath::new(TAG, "mixed");
        std::fs::write(&path.0, [6u8; 64]).unwrap();
        let file = File::open(&engine, &path.0, &OpenOptions::read()).unwrap();
        let (greq, handle) = Request::generalized(Plain);
        let (fread, claim) = file.iread_at(IoBuffer::from(vec![0; 64]), 0).into_parts();
        let completer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            handle.complete().unwrap();
        });
        let mut requests = [greq, fread];
        let mut statuses = Vec::new();
        wait_all(&mut requests, Some(&mut statuses)).unwrap();
        completer.join().unwrap();
        assert_eq!(statuses[1].count(), 64);
        assert!(
            claim
                .take()
                .unwrap()
                .into_one()
                .unwrap()
                .iter()
                .all(|&b| b == 6)
        );
    });
}

/// Child half of `write_past_the_file_size_limit_fails_with_efbig`: runs under
/// `prlimit --fsize` with SIGXFSZ ignored (set by the parent's shell, kept across exec).
#[test]
fn efbig_child() {
    let Some(path) = std::env::var_os("VIADUCT_AGENT_EFBIG_CHILD") else {
        return;
    };
    let Some(engine) = engine(64) else { return };
    let file = File::open(&engine, &path, &OpenOptions::create_rw()).unwrap();
    let mut req = file.iwrite_at(IoBuffer::from(vec![1; 4096]), 2 << 20);
    let result = req
        .request
        .wait_timeout(Duration::from_secs(30))
        .map(|s| s.map(|s| s.count()));
    match result {
        Err(RequestError::Operation(cause)) => match cause.downcast_ref::<FileError>() {
            Some(fe) => println!("CHILD-RESULT: errno={:?} {fe}", fe.errno()),
            None => println!("CHILD-RESULT: not a file error: {cause}"),
        },
        other => println!("CHILD-RESULT: {other:?}"),
    }
    let back = req.buffers.take().map(|b| b.total_len());
    println!("CHILD-BUFFERS: {back:?}");
}

#[test]
fn write_past_the_file_size_limit_fails_with_efbig() {
    if engine(64).is_none() {
        return;
    }
    let runs = std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        println!("SKIPPED: prlimit (util-linux) is not available");
        return;
    }
    let path = TempPath::new(TAG, "efbig");
    let exe = std::env::current_exe().unwrap();
    let out = within(LIMIT_S, move || {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(r#"trap '' XFSZ; exec prlimit --fsize=1048576 "$0" --exact efbig_child --nocapture --test-threads=1"#)
            .arg(&exe)
            .env("VIADUCT_AGENT_EFBIG_CHILD", &path.0)
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("CHILD-RESULT"))
        .unwrap_or_else(|| panic!("child printed no result: {stdout} {out:?}"));
    assert!(
        line.contains(&format!("errno=Some({})", libc::EFBIG)) && line.contains("EFBIG"),
        "{line}"
    );
    assert!(stdout.contains("CHILD-BUFFERS: Some(4096)"), "{stdout}");
}

/// Writes of random sizes from 1 byte to 64 MiB at random offsets through `File::iwrite_at`,
/// all in flight together and waited with `wait_all`, then read back at random split points
/// through `File::iread_at`: every byte as written.
#[test]
fn random_offsets_and_sizes_up_to_64_mib_are_byte_exact() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let path = TempPath::new(TAG, "random-large");
        let file = File::open(&engine, &path.0, &OpenOptions::create_rw()).unwrap();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        // Sizes: 1 B, 64 MiB, and random ones between, at random gaps.
        let mut sizes = vec![1usize, 64 << 20];
        sizes.extend((0..14).map(|_| 1 + rng.below(8 << 20) as usize));
        let mut layout = Vec::new();
        let mut off = 0u64;
        for (i, len) in sizes.into_iter().enumerate() {
            off += rng.below(4096);
            let data: Vec<u8> = (0..len)
                .map(|j| {
                    (j as u32)
                        .wrapping_mul(2_654_435_761)
                        .wrapping_add(i as u32) as u8
                })
                .collect();
            layout.push((off, data));
            off += len as u64;
        }
        let mut requests = Vec::new();
        let mut claims = Vec::new();
        for (off, data) in &layout {
            let (r, c) = file
                .iwrite_at(IoBuffer::from(data.clone()), *off)
                .into_parts();
            requests.push(r);
            claims.push(c);
        }
        let mut statuses = Vec::new();
        wait_all(&mut requests, Some(&mut statuses)).unwrap();
        for ((_, data), s) in layout.iter().zip(&statuses) {
            assert_eq!(s.count(), data.len() as u64);
        }
        drop(claims);
        for (off, data) in &layout {
            // Read each region back in two requests split at a random point.
            let cut = rng.below(data.len() as u64 + 1) as usize;
            let mut back = Vec::with_capacity(data.len());
            for (start, len) in [(0, cut), (cut, data.len() - cut)] {
                if len == 0 {
                    continue;
                }
                let (status, bufs) = file
                    .iread_at(IoBuffer::from(vec![0; len]), off + start as u64)
                    .wait()
                    .unwrap();
                assert_eq!(status.count(), len as u64);
                back.extend_from_slice(&bufs.into_one().unwrap());
            }
            assert!(back == *data, "{} bytes at offset {off} differ", data.len());
        }
    });
}
