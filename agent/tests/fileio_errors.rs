//! Errors of file requests from the real kernel: the request ends with the error in its status,
//! and the message of the whole chain names the errno and its meaning (`ENOSPC ... no space
//! left`, `EIO ... I/O error`); requests beside a failed one complete normally.

use std::error::Error;

use viaduct_agent::AgentError;
use viaduct_agent::fileio::{File, FileWaitError, IoBuffer, OpenOptions};
use viaduct_agent::request::{RequestError, wait_all};

mod fileio_common;
use fileio_common::{TempPath, engine, within};

/// Names of this file's temporary files.
const TAG: &str = "fioerr";
/// Limit on one test body, seconds.
const LIMIT_S: u64 = 30;

#[test]
fn enospc_ends_the_request_with_the_error_named_in_its_status() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let options = OpenOptions {
            write: true,
            ..OpenOptions::default()
        };
        let full = match File::open(&engine, "/dev/full", &options) {
            Ok(f) => f,
            Err(e) => {
                println!("SKIPPED: /dev/full cannot be opened for writing: {e}");
                return;
            }
        };
        // Alone: the wait reports the error, the buffer comes back.
        let (err, bufs) = full
            .iwrite_at(IoBuffer::from(vec![7; 4096]), 0)
            .wait()
            .unwrap_err()
            .into_parts();
        assert_eq!(err.errno(), Some(libc::ENOSPC));
        let text = err.to_string();
        assert!(
            text.starts_with(
                "operation of the request failed: write at offset 0 failed with ENOSPC after 0 \
                 bytes: no space left on the device: No space left on device"
            ),
            "{text}"
        );
        assert_eq!(*bufs.unwrap().into_one().unwrap(), [7; 4096]);

        // In an array: the failed request's own status holds the error, the others succeed.
        let path = TempPath::new(TAG, "ok");
        let good = File::open(&engine, &path.0, &OpenOptions::create_rw()).unwrap();
        let (r0, c0) = good.iwrite_at(IoBuffer::from(vec![1; 100]), 0).into_parts();
        let (r1, c1) = full
            .iwritev_at(vec![IoBuffer::from(vec![2; 10])], 8)
            .into_parts();
        let (r2, c2) = good.isync().into_parts();
        let mut requests = vec![r0, r1, r2];
        let mut statuses = Vec::new();
        let result = wait_all(&mut requests, Some(&mut statuses));
        assert!(
            matches!(result, Err(RequestError::InStatus { failed: 1 })),
            "{result:?}"
        );
        assert!(statuses[0].error().is_none());
        assert_eq!(statuses[0].count(), 100);
        assert!(statuses[2].error().is_none());
        let err = statuses[1].error().expect("the failed request's error");
        assert_eq!(err.errno(), Some(libc::ENOSPC));
        let text = err.to_string();
        assert!(
            text.contains("writev at offset 8 failed with ENOSPC")
                && text.contains("no space left"),
            "{text}"
        );
        assert!(c0.take().is_some() && c1.take().is_some() && c2.take().is_some());
        assert_eq!(engine.outstanding(), 0);
        // Errors are not retried: nothing was resubmitted.
        assert_eq!(engine.retries().eagain + engine.retries().eintr, 0);
    });
}

#[test]
fn eio_ends_the_request_with_the_error_named_in_its_status() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let mem = match File::open(&engine, "/proc/self/mem", &OpenOptions::read()) {
            Ok(f) => f,
            Err(e) => {
                println!("SKIPPED: /proc/self/mem cannot be opened: {e}");
                return;
            }
        };
        // Address 0 of the process is never mapped: the kernel answers the read with EIO.
        let (err, bufs) = mem
            .iread_at(IoBuffer::from(vec![0xab; 256]), 0)
            .wait()
            .unwrap_err()
            .into_parts();
        assert_eq!(err.errno(), Some(libc::EIO));
        let text = err.to_string();
        assert!(
            text.starts_with(
                "operation of the request failed: read at offset 0 failed with EIO after 0 bytes: \
                 the device or filesystem reported an I/O error"
            ),
            "{text}"
        );
        assert_eq!(*bufs.unwrap().into_one().unwrap(), [0xab; 256]);
    });
}

/// A write to `file` with `?` in a function returning a boxed error, as user code writes it.
fn write_with_question_mark(file: &File) -> Result<u64, Box<dyn Error + Send + Sync>> {
    let (status, _) = file.iwrite_at(IoBuffer::from(vec![3; 512]), 0).wait()?;
    Ok(status.count())
}

/// The same into the agent's error type.
fn write_into_agent_error(file: &File) -> Result<u64, AgentError> {
    let (status, _) = file.iwrite_at(IoBuffer::from(vec![4; 64]), 0).wait()?;
    Ok(status.count())
}

/// The same into the request error type.
fn write_into_request_error(file: &File) -> Result<u64, RequestError> {
    let (status, _) = file.iwrite_at(IoBuffer::from(vec![5; 64]), 0).wait()?;
    Ok(status.count())
}

#[test]
fn a_failed_file_wait_goes_through_question_mark_and_keeps_its_buffers() {
    let Some(engine) = engine(64) else { return };
    within(LIMIT_S, move || {
        let options = OpenOptions {
            write: true,
            ..OpenOptions::default()
        };
        let full = match File::open(&engine, "/dev/full", &options) {
            Ok(f) => f,
            Err(e) => {
                println!("SKIPPED: /dev/full cannot be opened for writing: {e}");
                return;
            }
        };
        // `?` boxes it; the box holds the FileWaitError with the buffer, and its source is the
        // request's error.
        let boxed = write_with_question_mark(&full).unwrap_err();
        let text = boxed.to_string();
        assert!(
            text.starts_with("file operation failed: operation of the request failed: write at")
                && text.contains("ENOSPC"),
            "{text}"
        );
        let source = boxed.source().expect("the request error is the source");
        assert!(
            source.downcast_ref::<RequestError>().is_some(),
            "{source:?}"
        );
        let mut wait_error = boxed
            .downcast::<FileWaitError>()
            .expect("the boxed error is the file wait error");
        assert_eq!(wait_error.error().errno(), Some(libc::ENOSPC));
        assert!(wait_error.buffers().is_some());
        let buffer = wait_error
            .take_buffers()
            .and_then(|b| b.into_one())
            .expect("the write's buffer came back");
        assert_eq!(*buffer, [3; 512]);
        assert!(wait_error.take_buffers().is_none(), "taken once");
        let (error, rest) = wait_error.into_parts();
        assert!(rest.is_none());
        assert_eq!(error.errno(), Some(libc::ENOSPC));

        // Into AgentError and RequestError with `?` too (the buffers are dropped then).
        let agent_error = write_into_agent_error(&full).unwrap_err();
        assert!(
            matches!(agent_error, AgentError::Request(RequestError::Operation(_))),
            "{agent_error:?}"
        );
        assert_eq!(agent_error.errno(), Some(libc::ENOSPC));
        let request_error = write_into_request_error(&full).unwrap_err();
        assert_eq!(request_error.errno(), Some(libc::ENOSPC));

        // A write that succeeds gives its count through the same functions.
        let path = TempPath::new(TAG, "qm");
        let good = File::open(&engine, &path.0, &OpenOptions::create_rw()).unwrap();
        assert_eq!(write_with_question_mark(&good).unwrap(), 512);
        assert_eq!(write_into_agent_error(&good).unwrap(), 64);
        assert_eq!(write_into_request_error(&good).unwrap(), 64);
        assert_eq!(engine.outstanding(), 0);
    });
}
