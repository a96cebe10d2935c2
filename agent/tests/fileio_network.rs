//! Network to file: received messages written to files without a copy by the program, over the
//! self loop and over shared memory between two ranks (threads), byte-exact.

mod agent_common;

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Duration;

use agent_common::{config, job};
use viaduct_agent::agent::Agent;
use viaduct_agent::config::MethodKind;
use viaduct_agent::fileio::{File, FileEngine, FileIoError, OpenOptions};
use viaduct_agent::matching::{Source, TagMatch};
use viaduct_agent::request::wait_all;

mod fileio_common;
use fileio_common::{TempPath, engine, within};

/// Names of this file's temporary files.
const TAG: &str = "fileio-net";
/// Limit on one test body, seconds.
const LIMIT_S: u64 = 60;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed ^ (i >> 10) as u8)
        .collect()
}

fn read_back(path: &PathBuf, offset: u64, len: usize) -> Vec<u8> {
    let f = std::fs::File::open(path).unwrap();
    let mut out = vec![0u8; len];
    f.read_exact_at(&mut out, offset).unwrap();
    out
}

#[test]
fn a_received_buffer_is_written_without_a_copy() {
    let Some(engine) = engine(32) else { return };
    within(LIMIT_S, move || {
        let agent = Agent::singleton().expect("single-rank agent");
        let path = TempPath::new(TAG, "self");
        let file = File::open(&engine, &path.0, &OpenOptions::create_rw()).unwrap();
        let data = pattern(100_000, 3);
        let (mut recv, buf) = agent
            .irecv(data.len(), Source::Rank(0), TagMatch::Tag(4))
            .unwrap();
        // Before the message is in, the buffer cannot be handed over.
        assert!(matches!(
            file.iwrite_received_at(&recv, &buf, 0),
            Err(FileIoError::ReceiveIncomplete)
        ));
        let mut send = agent.isend(0, 4, &data).unwrap();
        assert_eq!(recv.wait().unwrap().count(), data.len() as u64);
        send.wait().unwrap();
        let at = buf.with(|b| b.as_ptr() as usize);
        let req = file.iwrite_received_at(&recv, &buf, 4096).unwrap();
        assert!(buf.is_empty(), "the bytes moved into the request");
        let (status, bufs) = req.wait().unwrap();
        assert_eq!(status.count(), data.len() as u64);
        let back = bufs.into_one().unwrap();
        assert_eq!(
            back.addr(),
            at,
            "the file was written from the receive's own memory"
        );
        assert_eq!(
            back.into_vec(),
            data,
            "the buffer comes back with the bytes"
        );
        assert_eq!(read_back(&path.0, 4096, data.len()), data);
        assert_eq!(engine.outstanding(), 0);
        agent.finalize().unwrap();
    });
}

#[test]
fn stream_and_tagged_messages_over_shm_land_in_the_file() {
    let Some(probe) = engine(32) else { return };
    drop(probe);
    const SMALL: usize = 1000;
    const LARGE: usize = 200_000;
    const TAGGED: usize = 300_000;
    let path = TempPath::new(TAG, "shm");
    let target = path.0.clone();
    let results = job(2, config(MethodKind::Shm), move |agent| {
        if agent.rank() == 0 {
            let mut reqs = vec![
                agent.write(1, pattern(SMALL, 1)).unwrap(),
                agent.write(1, pattern(LARGE, 2)).unwrap(),
                agent.isend(1, 9, &pattern(TAGGED, 3)).unwrap(),
            ];
            wait_all(&mut reqs, None).unwrap();
            // Held until the receiver is done with the file.
            agent
                .recv(&mut [0u8; 1], Source::Rank(1), TagMatch::Tag(10))
                .unwrap();
            return None;
        }
        let engine = FileEngine::new(32).unwrap();
        let file = File::open(&engine, &target, &OpenOptions::create_rw()).unwrap();
        let limit = Duration::from_secs(30);
        // In place, synchronous: no copy.
        let n = file.write_next_at(&agent, 0, 0, limit).unwrap();
        assert_eq!(n, Some(SMALL));
        // In place, one copy into the request's buffer, nonblocking.
        let req = file
            .iwrite_next_at(&agent, 0, SMALL as u64, limit)
            .unwrap()
            .expect("a stream message");
        // Tagged, received, handed over without a copy.
        let (mut recv, buf) = agent
            .irecv(TAGGED, Source::Rank(0), TagMatch::Tag(9))
            .unwrap();
        recv.wait().unwrap();
        let tagged = file
            .iwrite_received_at(&recv, &buf, (SMALL + LARGE) as u64)
            .unwrap();
        let (st1, b1) = req.wait().unwrap();
        let (st2, b2) = tagged.wait().unwrap();
        assert_eq!(st1.count(), LARGE as u64);
        assert_eq!(st2.count(), TAGGED as u64);
        assert_eq!(b1.into_one().unwrap().into_vec(), pattern(LARGE, 2));
        assert_eq!(b2.into_one().unwrap().into_vec(), pattern(TAGGED, 3));
        // Nothing left in the stream.
        assert_eq!(
            file.write_next_at(&agent, 0, 0, Duration::ZERO).unwrap(),
            None
        );
        assert_eq!(engine.outstanding(), 0);
        agent.send(0, 10, &[1]).unwrap();
        Some(std::fs::metadata(&target).unwrap().len())
    });
    assert_eq!(results[1], Some((SMALL + LARGE + TAGGED) as u64));
    let mut want = pattern(SMALL, 1);
    want.extend(pattern(LARGE, 2));
    want.extend(pattern(TAGGED, 3));
    assert!(read_back(&path.0, 0, want.len()) == want, "file content");
}
