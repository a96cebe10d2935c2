//! The PMI-2 client over an inherited socket, against a peer answering exactly as Slurm's
//! `mpi/pmi2` plugin does (left-aligned length prefix, `rc=` first, `found=` flags).
//!
//! One test in this file: a process can take its inherited PMI socket only once.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::IntoRawFd;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::Duration;

use viaduct_pmi::BootstrapError;
use viaduct_pmi::fd::adopt_inherited_fd;
use viaduct_pmi::pmi2::Pmi2Client;
use viaduct_pmi::wire::Message;
use viaduct_pmi::wire2::read_record;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Answers like Slurm's plugin for one rank (rank 2 of 3); returns the commands it saw.
fn slurm_like_peer(stream: UnixStream) -> Vec<Message> {
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert_eq!(line, "cmd=init pmi_version=2 pmi_subversion=0\n");
    writer
        .write_all(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
        .unwrap();
    let mut kvs: Vec<(String, String)> = vec![("peer-key".into(), "peer-value".into())];
    let mut seen = Vec::new();
    while let Some(msg) = read_record(&mut reader).unwrap() {
        let body = match msg.cmd.as_str() {
            "fullinit" => "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=2;size=3;appnum=-1;debugged=FALSE;pmiverbose=FALSE;".to_owned(),
            "job-getid" => "cmd=job-getid-response;rc=0;jobid=12.0;".to_owned(),
            "info-getjobattr" => {
                assert_eq!(msg.get("key"), Some("PMI_process_mapping"));
                "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,2),(1,1,1));".to_owned()
            }
            "kvs-put" => {
                kvs.push((msg.get("key").unwrap().into(), msg.get("value").unwrap().into()));
                "cmd=kvs-put-response;rc=0;".to_owned()
            }
            "kvs-fence" => "cmd=kvs-fence-response;rc=0;".to_owned(),
            "kvs-get" => match kvs.iter().find(|(k, _)| Some(k.as_str()) == msg.get("key")) {
                Some((_, v)) => format!("cmd=kvs-get-response;rc=0;found=TRUE;value={v};"),
                None => "cmd=kvs-get-response;rc=0;found=FALSE;".to_owned(),
            },
            "finalize" => "cmd=finalize-response;rc=0;".to_owned(),
            other => panic!("unexpected command {other}"),
        };
        let done = msg.cmd == "finalize";
        seen.push(msg);
        writer
            .write_all(format!("{:<6}{body}", body.len()).as_bytes())
            .unwrap();
        if done {
            break;
        }
    }
    seen
}

#[test]
fn pmi2_over_an_inherited_socket_and_only_once() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let peer = thread::spawn(move || slurm_like_peer(theirs));
    // into_raw_fd gives up ownership, as a launcher's exec does: the client takes it over.
    let fd = ours.into_raw_fd();
    let mut client = Pmi2Client::from_fd(fd, Some(2), Some(3), Some("12.0"), TIMEOUT).unwrap();
    assert_eq!((client.rank(), client.size()), (2, 3));
    assert_eq!(client.jobid(), Some("12.0"));
    assert_eq!(
        client.job_attr("PMI_process_mapping").unwrap().as_deref(),
        Some("(vector,(0,1,2),(1,1,1))")
    );
    client.put("card-2", "tcp:10.0.0.3:4000").unwrap();
    client.fence().unwrap();
    assert_eq!(
        client.get("card-2").unwrap().as_deref(),
        Some("tcp:10.0.0.3:4000")
    );
    assert_eq!(
        client.get("peer-key").unwrap().as_deref(),
        Some("peer-value")
    );
    assert_eq!(client.get("nobody").unwrap(), None);
    assert!(matches!(
        client.put("card-2", "a;b"),
        Err(BootstrapError::Invalid { .. })
    ));
    client.finalize().unwrap();

    let seen = peer.join().unwrap();
    let fullinit = &seen[0];
    assert_eq!(fullinit.cmd, "fullinit");
    // Slurm refuses a fullinit without all three fields.
    assert_eq!(fullinit.get("pmijobid"), Some("12"));
    assert_eq!(fullinit.get("pmirank"), Some("2"));
    assert_eq!(fullinit.get("threaded"), Some("FALSE"));
    let get = seen.iter().find(|m| m.cmd == "kvs-get").unwrap();
    assert_eq!(get.get("jobid"), Some("12.0"));

    // The inherited socket can be taken once per process only.
    let (again, _other) = UnixStream::pair().unwrap();
    let err = adopt_inherited_fd(again.into_raw_fd()).unwrap_err();
    assert!(err.to_string().contains("already taken"), "{err}");
}
