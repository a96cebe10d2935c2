//! File requests in the same arrays as message and generalized requests: 1,000 reads and writes
//! on real files at once, waited with `wait_all`, `wait_any` and `wait_some`, every status and
//! every byte checked; handlers posted on file requests.

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use viaduct_agent::agent::Agent;
use viaduct_agent::fileio::{BufferClaim, File, IoBuffer, OpenOptions};
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::recv_buffer::RecvBuffer;
use viaduct_agent::request::{
    BoxError, CarCounter, CompleteHandle, Condition, Deadline, GrequestOps, HandlerFn, QueryStatus,
    Request, Status, post_handler, wait_all, wait_any, wait_some,
};

mod fileio_common;
use fileio_common::{Rng, TempDir, engine, within};

/// Names of this file's temporary files.
const TAG: &str = "fileio-mixed";
/// Limit on one test body, seconds.
const LIMIT_S: u64 = 60;

/// File requests per round.
const FILE_REQUESTS: usize = 1000;
/// Message requests completed by a thread, generalized requests, and self-loop receive/send
/// pairs per round.
const OTHERS: usize = 50;
/// Size of each source file.
const SOURCE_LEN: u64 = 1 << 20;
const FILES: usize = 4;

/// The byte at `pos` of source file `file`.
fn source_byte(file: usize, pos: u64) -> u8 {
    (pos.wrapping_mul(31) ^ (pos >> 9) ^ (file as u64 * 77)) as u8
}

/// What one request of the array must end with.
enum Expect {
    Read {
        file: usize,
        offset: u64,
        lens: Vec<usize>,
        claim: BufferClaim,
    },
    Write {
        file: usize,
        offset: u64,
        parts: Vec<Vec<u8>>,
        claim: BufferClaim,
    },
    Message {
        bytes: u64,
        tag: u32,
    },
    Grequest {
        count: u64,
    },
    SelfRecv {
        tag: u32,
        data: Vec<u8>,
        buf: RecvBuffer,
    },
    SelfSend {
        len: u64,
    },
}

/// A generalized request reporting a fixed count.
struct Counted(u64);

impl GrequestOps for Counted {
    fn query(&self, status: &mut QueryStatus<'_>) -> Result<(), BoxError> {
        status.set_count(self.0);
        Ok(())
    }
}

struct Setup {
    _dir: TempDir,
    sources: Vec<File>,
    dests: Vec<File>,
    agent: Agent,
}

fn setup(name: &str) -> Option<Setup> {
    let engine = engine(64)?;
    let dir = TempDir::new(TAG, name);
    let mut sources = Vec::new();
    let mut dests = Vec::new();
    for f in 0..FILES {
        let path = dir.0.join(format!("source-{f}"));
        let content: Vec<u8> = (0..SOURCE_LEN).map(|p| source_byte(f, p)).collect();
        std::fs::write(&path, content).unwrap();
        sources.push(File::open(&engine, &path, &OpenOptions::read()).unwrap());
        let path = dir.0.join(format!("dest-{f}"));
        dests.push(File::open(&engine, &path, &OpenOptions::create_rw()).unwrap());
    }
    let agent = Agent::singleton().expect("single-rank agent");
    Some(Setup {
        _dir: dir,
        sources,
        dests,
        agent,
    })
}

/// Starts one round: 1,000 file requests, and message, generalized and self-loop requests
/// shuffled among them; a thread completes the message and generalized requests.
fn start_round(s: &Setup, seed: u64) -> (Vec<Request>, Vec<Expect>, std::thread::JoinHandle<()>) {
    let mut rng = Rng(seed);
    let mut requests = Vec::new();
    let mut expects = Vec::new();
    let mut counters: Vec<(CarCounter, u64, u32)> = Vec::new();
    let mut handles: Vec<CompleteHandle> = Vec::new();
    // Write slots are distinct regions of the destination files: 4 KiB apart.
    let mut write_slot = 0u64;
    let mut others = 0;
    for i in 0..FILE_REQUESTS {
        let vectored = i % 10 == 0;
        if i % 2 == 0 {
            let file = rng.below(FILES as u64) as usize;
            let offset = rng.below(SOURCE_LEN);
            // Some reads run past the end of the file: they count what they read.
            let lens: Vec<usize> = if vectored {
                vec![1 + rng.below(3000) as usize, 1 + rng.below(3000) as usize]
            } else {
                vec![1 + rng.below(8192) as usize]
            };
            let bufs: Vec<IoBuffer> = lens
                .iter()
                .map(|&n| IoBuffer::from(vec![0xee; n]))
                .collect();
            let req = if vectored {
                s.sources[file].ireadv_at(bufs, offset)
            } else {
                s.sources[file].iread_at(bufs.into_iter().next().unwrap(), offset)
            };
            let (r, claim) = req.into_parts();
            requests.push(r);
            expects.push(Expect::Read {
                file,
                offset,
                lens,
                claim,
            });
        } else {
            let file = (write_slot % FILES as u64) as usize;
            let offset = (write_slot / FILES as u64) * 4096 + rng.below(64);
            write_slot += 1;
            let parts: Vec<Vec<u8>> = if vectored {
                vec![rng.bytes(1500), rng.bytes(1500)]
            } else {
                vec![rng.bytes(4000)]
            };
            let bufs: Vec<IoBuffer> = parts.iter().cloned().map(IoBuffer::from).collect();
            let req = if vectored {
                s.dests[file].iwritev_at(bufs, offset)
            } else {
                s.dests[file].iwrite_at(bufs.into_iter().next().unwrap(), offset)
            };
            let (r, claim) = req.into_parts();
            requests.push(r);
            expects.push(Expect::Write {
                file,
                offset,
                parts,
                claim,
            });
        }
        // After every 20 file requests, one of each other kind.
        if i % 20 == 19 && others < OTHERS {
            let n = others as u64;
            let (r, counter) = Request::message(1);
            let tag = 100 + others as u32;
            counters.push((counter, 10 + n, tag));
            requests.push(r);
            expects.push(Expect::Message { bytes: 10 + n, tag });

            let (r, handle) = Request::generalized(Counted(5000 + n));
            handles.push(handle);
            requests.push(r);
            expects.push(Expect::Grequest { count: 5000 + n });

            let tag = 1000 + others as u32;
            let data = rng.bytes(2000);
            // Half the receives are posted before their send, half after (unexpected).
            let recv_first = others % 2 == 0;
            let send = |requests: &mut Vec<Request>, expects: &mut Vec<Expect>| {
                requests.push(s.agent.isend(0, tag, &data).unwrap());
                expects.push(Expect::SelfSend {
                    len: data.len() as u64,
                });
            };
            if !recv_first {
                send(&mut requests, &mut expects);
            }
            let (r, buf) = s
                .agent
                .irecv(data.len(), Source::Rank(0), TagMatch::Tag(tag))
                .unwrap();
            requests.push(r);
            expects.push(Expect::SelfRecv {
                tag,
                data: data.clone(),
                buf,
            });
            if recv_first {
                send(&mut requests, &mut expects);
            }
            others += 1;
        }
    }
    assert_eq!(others, OTHERS);
    let completer = std::thread::spawn(move || {
        // Completed from another thread while the waits run, a few at a time.
        for (k, ((counter, bytes, tag), handle)) in counters.into_iter().zip(handles).enumerate() {
            if k % 10 == 0 {
                std::thread::sleep(Duration::from_millis(2));
            }
            counter.set_envelope(7, tag);
            assert!(counter.complete_car(bytes).unwrap());
            handle.complete().unwrap();
        }
    });
    (requests, expects, completer)
}

/// Checks the status and bytes of request `i`; returns which kind it was (file or not).
fn check(s: &Setup, expect: &Expect, status: &Status) -> bool {
    assert!(status.error().is_none(), "{:?}", status.error());
    assert!(!status.test_cancelled());
    match expect {
        Expect::Read {
            file,
            offset,
            lens,
            claim,
        } => {
            let total: usize = lens.iter().sum();
            let want = (total as u64).min(SOURCE_LEN - offset);
            assert_eq!(status.count(), want, "read count at {offset}");
            let got: Vec<u8> = claim
                .take()
                .expect("buffers back")
                .into_vec()
                .into_iter()
                .flat_map(IoBuffer::into_vec)
                .collect();
            assert_eq!(got.len(), total);
            for (k, &b) in got.iter().enumerate() {
                let pos = offset + k as u64;
                let want = if pos < SOURCE_LEN {
                    source_byte(*file, pos)
                } else {
                    0xee
                };
                assert_eq!(b, want, "file {file} byte {pos}");
            }
            true
        }
        Expect::Write {
            file,
            offset,
            parts,
            claim,
        } => {
            let data: Vec<u8> = parts.concat();
            assert_eq!(status.count(), data.len() as u64);
            let back: Vec<u8> = claim
                .take()
                .expect("buffers back")
                .into_vec()
                .into_iter()
                .flat_map(IoBuffer::into_vec)
                .collect();
            assert_eq!(back, data, "buffers come back unchanged");
            let mut on_disk = vec![0u8; data.len()];
            s.dests[*file]
                .std()
                .read_exact_at(&mut on_disk, *offset)
                .unwrap();
            assert_eq!(on_disk, data, "file {file} at {offset}");
            true
        }
        Expect::Message { bytes, tag } => {
            assert_eq!(
                (status.count(), status.source(), status.tag()),
                (*bytes, Some(7), Some(*tag))
            );
            false
        }
        Expect::Grequest { count } => {
            assert_eq!(status.count(), *count);
            false
        }
        Expect::SelfRecv { tag, data, buf } => {
            assert_eq!(
                (status.count(), status.source(), status.tag()),
                (data.len() as u64, Some(0), Some(*tag))
            );
            assert_eq!(buf.take(), *data);
            false
        }
        Expect::SelfSend { len } => {
            assert_eq!(status.count(), *len);
            false
        }
    }
}

fn check_all(s: &Setup, expects: &[Expect], done: &[(usize, Status)]) {
    let mut seen = vec![false; expects.len()];
    let mut files = 0;
    for (i, status) in done {
        assert!(!seen[*i], "request {i} reported twice");
        seen[*i] = true;
        files += usize::from(check(s, &expects[*i], status));
    }
    assert!(seen.iter().all(|&x| x), "every request reported");
    assert_eq!(files, FILE_REQUESTS);
    assert_eq!(expects.len(), FILE_REQUESTS + 4 * OTHERS);
}

#[test]
fn thousand_file_requests_mixed_in_wait_all() {
    let Some(s) = setup("all") else { return };
    within(LIMIT_S, move || {
        let (mut requests, expects, completer) = start_round(&s, 0x1234_5678);
        let mut statuses = Vec::new();
        wait_all(&mut requests, Some(&mut statuses)).unwrap();
        completer.join().unwrap();
        assert!(requests.iter().all(Request::is_null));
        let done: Vec<_> = statuses.into_iter().enumerate().collect();
        check_all(&s, &expects, &done);
    });
}

#[test]
fn thousand_file_requests_mixed_in_wait_any() {
    let Some(s) = setup("any") else { return };
    within(LIMIT_S, move || {
        let (mut requests, expects, completer) = start_round(&s, 0x9e37_79b9);
        let mut done = Vec::new();
        while let Some((i, result)) = wait_any(&mut requests).completed() {
            done.push((i, result.unwrap()));
        }
        completer.join().unwrap();
        check_all(&s, &expects, &done);
    });
}

#[test]
fn thousand_file_requests_mixed_in_wait_some() {
    let Some(s) = setup("some") else { return };
    within(LIMIT_S, move || {
        let (mut requests, expects, completer) = start_round(&s, 0xdead_beef);
        let mut done = Vec::new();
        let mut indices = Vec::new();
        let mut statuses = Vec::new();
        let mut calls = 0;
        loop {
            wait_some(&mut requests, &mut indices, Some(&mut statuses)).unwrap();
            if indices.is_empty() {
                break;
            }
            calls += 1;
            assert_eq!(indices.len(), statuses.len());
            done.extend(indices.iter().copied().zip(statuses.drain(..)));
        }
        completer.join().unwrap();
        assert!(calls >= 1);
        check_all(&s, &expects, &done);
    });
}

/// Counts runs of a handler and reports each with the count of the status it saw.
fn counting(
    runs: &Arc<AtomicUsize>,
    tx: &mpsc::Sender<(&'static str, u64)>,
    what: &'static str,
) -> HandlerFn {
    let (runs, tx) = (Arc::clone(runs), tx.clone());
    HandlerFn::new(move |_, status| {
        runs.fetch_add(1, Ordering::SeqCst);
        let _ = tx.send((what, status.count()));
    })
}

#[test]
fn handlers_on_a_file_request_run_once_with_the_byte_count() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let dir = TempDir::new(TAG, "handler");
        let path = dir.0.join("f");
        let file = File::open(&engine, &path, &OpenOptions::create_rw()).unwrap();
        let complete = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let data = vec![0x5a; 12_345];
        let mut req = file.iwrite_at(IoBuffer::from(data.clone()), 10);
        post_handler(
            &req.request,
            Condition::Complete,
            Some(counting(&complete, &tx, "complete")),
            Some(counting(&failed, &tx, "failed")),
            Deadline::Asap,
        )
        .unwrap();
        req.request
            .post_handler(
                Condition::Release,
                Some(counting(&release, &tx, "release")),
                Some(counting(&failed, &tx, "failed")),
                Deadline::After(Duration::from_secs(30)),
            )
            .unwrap();
        let status = req.request.wait().unwrap();
        assert_eq!(status.count(), 12_345);
        let mut got = Vec::new();
        for _ in 0..2 {
            got.push(
                rx.recv_timeout(Duration::from_secs(20))
                    .expect("handler ran"),
            );
        }
        got.sort_unstable();
        assert_eq!(got, [("complete", 12_345), ("release", 12_345)]);
        let back = req.buffers.take().unwrap().into_one().unwrap();
        assert_eq!(*back, data[..]);
        // A handler posted after completion runs too.
        let mut late = file.iread_at(IoBuffer::from(vec![0; 100]), 0);
        let st = late.request.wait().unwrap();
        assert_eq!(st.count(), 100);
        let late = file.iread_at(IoBuffer::from(vec![0; 50]), 10);
        let (mut r, _claim) = late.into_parts();
        loop {
            if r.get_status().unwrap().is_some() {
                break;
            }
            std::thread::yield_now();
        }
        r.post_handler(
            Condition::Complete,
            Some(counting(&complete, &tx, "late")),
            None,
            Deadline::Asap,
        )
        .unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(20)).unwrap(),
            ("late", 50)
        );
        r.wait().unwrap();
        // Nothing ran twice, no failure function ran.
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        assert_eq!(complete.load(Ordering::SeqCst), 2);
        assert_eq!(release.load(Ordering::SeqCst), 1);
        assert_eq!(failed.load(Ordering::SeqCst), 0);
        assert_eq!(engine.outstanding(), 0);
    });
}

#[test]
fn a_missed_deadline_on_a_file_request_runs_the_failure_function() {
    let Some(engine) = engine(64) else { return };
    let dir = TempDir::new(TAG, "deadline");
    let path = dir.0.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    if !made.is_ok_and(|s| s.success()) {
        println!("SKIPPED: mkfifo is not available");
        return;
    }
    within(LIMIT_S, move || {
        // A read of an empty FIFO (opened for reading and writing, so the open does not block)
        // cannot complete before the deadline.
        let options = OpenOptions {
            read: true,
            write: true,
            ..OpenOptions::default()
        };
        let fifo = File::open(&engine, &path, &options).unwrap();
        let handled = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        let req = fifo.iread_at(IoBuffer::from(vec![1; 8]), 0);
        let posted = Instant::now();
        let deadline = posted + Duration::from_millis(30);
        post_handler(
            &req.request,
            Condition::Complete,
            Some(counting(&handled, &tx, "handler")),
            Some(counting(&failed, &tx, "failure")),
            Deadline::At(deadline),
        )
        .unwrap();
        let (what, count) = rx.recv_timeout(Duration::from_secs(20)).expect("ran");
        assert_eq!((what, count), ("failure", 0));
        assert!(Instant::now() >= deadline);
        assert!(!req.request.is_complete());
        // The request itself is still alive: cancelling it completes it, and the handler whose
        // deadline was missed never runs.
        req.request.cancel().unwrap();
        let (status, bufs) = req.wait().unwrap();
        assert!(status.test_cancelled());
        assert_eq!(*bufs.into_one().unwrap(), [1; 8]);
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        assert_eq!(handled.load(Ordering::SeqCst), 0);
        assert_eq!(failed.load(Ordering::SeqCst), 1);
        // A deadline already past when posted fails at once, even on a request that can complete.
        let dfile = dir.0.join("plain");
        std::fs::write(&dfile, [4u8; 16]).unwrap();
        let plain = File::open(&engine, &dfile, &OpenOptions::read()).unwrap();
        let mut r = plain.iread_at(IoBuffer::from(vec![0; 16]), 0);
        post_handler(
            &r.request,
            Condition::Complete,
            Some(counting(&handled, &tx, "handler")),
            Some(counting(&failed, &tx, "failure")),
            Deadline::At(posted),
        )
        .unwrap();
        assert_eq!(r.request.wait().unwrap().count(), 16);
        let (what, _) = rx.recv_timeout(Duration::from_secs(20)).expect("ran");
        assert_eq!(what, "failure");
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        assert_eq!(handled.load(Ordering::SeqCst), 0);
        assert_eq!(failed.load(Ordering::SeqCst), 2);
    });
}
