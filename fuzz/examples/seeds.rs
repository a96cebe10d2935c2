//! Writes the seed corpora under `fuzz/corpus/TARGET/`: a few valid inputs per target, made
//! with the crates' own encoders. Run from the repository root:
//! `cargo run --manifest-path fuzz/Cargo.toml --example seeds`.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use viaduct_agent::fuzzing::{self, KINDS};
use viaduct_fallback::frame::{FLAG_FIRST, Header, Kind};
use viaduct_pmi::JobKey;
use viaduct_pmi::auth::{accept_with_log, connect};
use viaduct_pmi::wire::Message;
use viaduct_pmi::{wire1, wire2};
use viaduct_verbs::msg::Card;
use viaduct_verbs::{Gid, Mtu, RemoteRegion};

fn save(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("fuzz/corpus").join(target);
    fs::create_dir_all(&dir).expect("create the corpus folder");
    fs::write(dir.join(name), bytes).expect("write a seed");
}

fn frame(kind: Kind, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut h = Header::new(kind, payload.len() as u32);
    h.seq = seq;
    h.tag = 0x1234;
    if kind == Kind::Fragment {
        h.flags = FLAG_FIRST;
        h.offset = 1000;
    }
    let mut b = h.encode().to_vec();
    b.extend_from_slice(payload);
    b
}

fn frames() {
    let mut s = vec![16, 7];
    s.extend(frame(Kind::Send, 0, b"hello"));
    s.extend(frame(Kind::Credit, 1, b""));
    s.extend(frame(Kind::Write, 2, &[9; 40]));
    s.extend(frame(Kind::Read, 3, &8u64.to_le_bytes()));
    save("frame", "messages", &s);
    let mut s = vec![255, 1];
    s.extend(frame(Kind::Fragment, 0, &[1; 100]));
    s.extend(frame(Kind::Close, 1, b""));
    save("frame", "fragment-close", &s);
}

fn ring() {
    // 8 lines: records of 10 and 60 payload bytes at lines 0 and 1 (2 lines), then 5 empty.
    let lines = 8;
    let mut area = vec![0u8; lines * 64];
    area[8..40].copy_from_slice(&Header::new(Kind::Send, 10).encode());
    area[64 + 8..64 + 40].copy_from_slice(&Header::new(Kind::Send, 60).encode());
    let mut s = vec![(lines - 2) as u8, 1, 1, 0, 0, 0, 0, 0, 0];
    s.extend_from_slice(&area);
    save("shm_ring", "two-records", &s);
    // A record, then padding to the end of the area.
    let mut s = vec![(lines - 2) as u8, 1, 2, 0, 0, 0, 0, 0, 0];
    s.extend_from_slice(&area);
    save("shm_ring", "record-padding", &s);
}

/// Agent operations, in the layout `fuzz_targets/agent_inbound.rs` reads.
struct Ops(Vec<u8>);

impl Ops {
    fn recv(&mut self, context: u8, source: u8, tag: u8, capacity: u16) -> &mut Self {
        self.0.extend([0, context, source, tag]);
        self.0.extend(capacity.to_be_bytes());
        self
    }
    fn rndv_send(&mut self, peer: u8, len: u16, chunk: u8) -> &mut Self {
        self.0.push(peer << 6 | 1);
        self.0.extend(len.to_be_bytes());
        self.0.push(chunk);
        self
    }
    fn msg(&mut self, peer: u8, kind: u8, id: u64, payload: &[u8]) -> &mut Self {
        let index = KINDS.iter().position(|&k| k == kind).unwrap() as u8;
        self.0.push(peer << 6 | 2);
        if id < 256 {
            self.0.extend([index, id as u8]);
        } else {
            self.0.push(20 + index);
            self.0.extend(id.to_be_bytes());
        }
        self.0.extend((payload.len() as u16).to_be_bytes());
        self.0.extend_from_slice(payload);
        self
    }
}

fn agent() {
    const EAGER: u8 = 1;
    const RTS: u8 = 2;
    const CTS: u8 = 3;
    const DATA: u8 = 4;
    const STREAM: u8 = 5;
    const XFER: u8 = 6;
    const RTS_READ: u8 = 7;
    const FIN: u8 = 8;
    const EAGER_PACKED: u8 = 9;
    let mut o = Ops(Vec::new());
    o.recv(1, 0xff, 5, 100)
        .msg(1, EAGER, 0, &fuzzing::eager(1, 5, b"hello"));
    save("agent_inbound", "eager-expected", &o.0);
    let mut o = Ops(Vec::new());
    let packed = fuzzing::eager_packed_tag(2, 9).unwrap() & ((1 << 56) - 1);
    o.msg(2, EAGER_PACKED, packed, b"packed")
        .msg(3, EAGER, 0, &fuzzing::eager(2, 9, b"unexpected"))
        .recv(2, 2, 9, 3)
        .recv(2, 0xff, 0xff, 64);
    save("agent_inbound", "eager-unexpected", &o.0);
    // An RTS, the receive matching it (its descriptor id is 1), then the data.
    let mut o = Ops(Vec::new());
    o.msg(1, RTS, 7, &fuzzing::rts(0, 3, 300))
        .recv(0, 1, 3, 400)
        .msg(1, DATA, 1, &[5; 200])
        .msg(1, DATA, 1, &[6; 100]);
    save("agent_inbound", "rendezvous-recv", &o.0);
    // A rendezvous send (sender id 1) and the peer's go-ahead.
    let mut o = Ops(Vec::new());
    o.rndv_send(1, 1000, 6)
        .msg(1, CTS, 1, &42u64.to_le_bytes())
        .msg(1, FIN, 1, b"");
    save("agent_inbound", "rendezvous-send", &o.0);
    // RTS_READ naming a region, its receive, and xfer and stream traffic.
    let mut region = Vec::new();
    region.extend(0x1000u64.to_le_bytes());
    region.extend(64u64.to_le_bytes());
    region.extend(7u32.to_le_bytes());
    let mut rts_read = fuzzing::rts(3, 4, 64);
    rts_read.extend(region);
    let mut o = Ops(Vec::new());
    o.msg(2, RTS_READ, 9, &rts_read)
        .recv(3, 2, 4, 64)
        .msg(1, XFER, 0, &fuzzing::xfer_piece(1, 2, 0, 10, b"abcde"))
        .msg(1, XFER, 0, &fuzzing::xfer_piece(1, 2, 0, 10, b"fghij"))
        .msg(1, STREAM, 0, b"stream bytes")
        .msg(1, 0xff, 0, b"");
    save("agent_inbound", "read-xfer-stream", &o.0);
}

fn pmi() {
    let card = "tcp:127.0.0.1:5000,shm:abc";
    let lines: Vec<Message> = vec![
        Message::new("init")
            .with("pmi_version", 1)
            .with("pmi_subversion", 1),
        Message::new("response_to_init")
            .with("pmi_version", 1)
            .with("pmi_subversion", 1)
            .with("rc", 0),
        Message::new("set").with("size", 4),
        Message::new("put")
            .with("kvsname", "kvs_1")
            .with("key", "card-0")
            .with("value", card),
        Message::new("get_result")
            .with("rc", 0)
            .with("msg", "success")
            .with("value", card),
        Message::new("barrier_out"),
    ];
    let mut stream = vec![15];
    for m in &lines {
        stream.extend(wire1::encode_line(m).unwrap());
    }
    save("pmi1", "hydra-session", &stream);
    save("pmi1", "one-line", &wire1::encode_line(&lines[3]).unwrap());

    let records: Vec<Message> = vec![
        Message::new("fullinit-response")
            .with("pmi-version", 2)
            .with("pmi-subversion", 0)
            .with("rank", 1)
            .with("size", 4)
            .with("appnum", 0)
            .with("rc", 0),
        Message::new("kvs-put-response").with("rc", 0),
        Message::new("kvs-fence-response").with("rc", 0),
        Message::new("kvs-get-response")
            .with("rc", 0)
            .with("found", "TRUE")
            .with("value", card),
        Message::new("job-getid-response")
            .with("jobid", "job 7")
            .with("rc", 0),
    ];
    let mut stream = Vec::new();
    for m in &records {
        stream.extend(wire2::encode_record(m).unwrap());
    }
    save("pmi2", "slurm-session", &stream);
    save(
        "pmi2",
        "one-record",
        &wire2::encode_record(&records[3]).unwrap(),
    );

    let session: Vec<Message> = vec![
        Message::new("init")
            .with("pmi_version", 1)
            .with("pmi_subversion", 1),
        Message::new("get_maxes"),
        Message::new("get_my_kvsname"),
        Message::new("get_universe_size"),
        Message::new("get_appnum"),
        Message::new("put")
            .with("kvsname", "kvs_0")
            .with("key", "card-0")
            .with("value", card),
        Message::new("barrier_in"),
        Message::new("get")
            .with("kvsname", "kvs_0")
            .with("key", "card-0"),
        Message::new("unknown_command"),
        Message::new("finalize"),
    ];
    let mut stream = vec![1];
    for m in &session {
        stream.extend(wire1::encode_line(m).unwrap());
    }
    save("pmi1_server", "rank-session", &stream);
    let mut stream = vec![1];
    for m in [
        Message::new("put").with("key", "k").with("value", "v"),
        Message::new("barrier_in"),
        Message::new("get").with("key", "k"),
    ] {
        stream.extend(wire1::encode_line(&m).unwrap());
    }
    save("pmi1_server", "put-barrier-get", &stream);
    let mut stream = vec![0];
    stream.extend(wire1::encode_line(&Message::new("initack").with("pmiid", 0)).unwrap());
    stream.extend(
        wire1::encode_line(
            &Message::new("abort")
                .with("exitcode", 3)
                .with("message", "bye"),
        )
        .unwrap(),
    );
    save("pmi1_server", "initack-abort", &stream);
}

/// A connection that serves `input` and records what is written.
struct Peer {
    input: Vec<u8>,
    sent: Vec<u8>,
}

impl Read for Peer {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = out.len().min(self.input.len());
        out[..n].copy_from_slice(&self.input[..n]);
        self.input.drain(..n);
        Ok(n)
    }
}

impl Write for Peer {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.sent.extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn auth() {
    let key = JobKey::from_bytes([0x5a; 32]);
    // What an acceptor sends first (its challenge), from a run against a silent peer.
    let mut acceptor = Peer {
        input: Vec::new(),
        sent: Vec::new(),
    };
    let _ = accept_with_log(&mut acceptor, &key, "seed", &mut |_| {});
    let hello = acceptor.sent;
    // What a connector answers to it.
    let mut connector = Peer {
        input: hello.clone(),
        sent: Vec::new(),
    };
    let _ = connect(&mut connector, &key, 3);
    // viaduct as the acceptor (bit 0 clear), reading up to 100 bytes at a time.
    let mut s = vec![100 << 1];
    s.extend(&connector.sent);
    save("auth", "connector-reply", &s);
    // viaduct as the connector (bit 0 set), reading up to 5 bytes at a time.
    let mut s = vec![1 | 5 << 1];
    s.extend(&hello);
    s.extend([0u8; 32]);
    save("auth", "acceptor-hello", &s);
    let mut s = vec![0];
    s.extend(JobKey::from_bytes([0xa7; 32]).to_hex().bytes());
    save("auth", "job-key-hex", &s);
}

fn card() {
    let c = Card {
        qp: viaduct_verbs::Endpoint {
            qp_num: 0x11,
            psn: 0x12_3456,
            lid: 3,
            gid: Gid([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0xff, 0xfe, 0, 0, 1]),
            port: 1,
            mtu: Mtu::Mtu1024,
        },
        recv_buffers: 32,
        buffer_bytes: 65536,
        keepalive: RemoteRegion {
            addr: 0x7f00_dead_b000,
            len: 8,
            rkey: 0x1234,
        },
    };
    save("verbs_card", "hex", c.to_hex().as_bytes());
    save("verbs_card", "bytes", &c.to_bytes());
}

fn main() {
    frames();
    ring();
    agent();
    pmi();
    auth();
    card();
}
