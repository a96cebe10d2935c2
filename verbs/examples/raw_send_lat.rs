//! Diagnostic companion of `viaduct bench verbs-lat`: the same 2-byte RC SEND ping-pong, with
//! queues set up by this crate but every data-path step a direct libibverbs call (one
//! pre-built work request, `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`). Comparing the two
//! separates what the set-up costs from what the safe data path costs.
//!
//! `raw_send_lat server [PORT]` in one process, `raw_send_lat client [PORT]` in another
//! (device `rxe0`, GID index 1, 1000 iterations; loopback TCP for the endpoints).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use rdma_sys as sys;
use viaduct_verbs::clock::{self, TickRate};
use viaduct_verbs::{Access, ConnectOptions, Context, Endpoint};

const ITERS: usize = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let server = match args.get(1).map(String::as_str) {
        Some("server") => true,
        Some("client") => false,
        _ => return Err("usage: raw_send_lat server|client [PORT]".into()),
    };
    let port: u16 = args.get(2).map_or(Ok(19_555), |p| p.parse())?;
    let mut stream = if server {
        TcpListener::bind(("127.0.0.1", port))?.accept()?.0
    } else {
        let mut tries = 0;
        loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(e) if tries > 200 => return Err(e.into()),
                Err(_) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    };
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let ctx = Context::open("rxe0")?;
    let pd = ctx.alloc_pd()?;
    let send_cq = ctx.create_cq(64)?;
    let recv_cq = ctx.create_cq(64)?;
    let prepared = pd
        .queue_pair(&send_cq, &recv_cq)
        .gid_index(1)
        .max_send_wr(16)
        .max_recv_wr(16)
        .build()?;
    // One region: receives land in its first half, sends leave from its second half. It is
    // never posted through the safe API, so it stays owned here for the whole run.
    let mr = pd.allocate(4096, Access::LOCAL_WRITE)?;
    stream.write_all(&prepared.endpoint().to_bytes())?;
    let mut peer = [0u8; Endpoint::ENCODED_LEN];
    stream.read_exact(&mut peer)?;
    let qp = prepared.connect(&Endpoint::from_bytes(&peer)?, &ConnectOptions::default())?;
    let q = qp.as_raw();

    let mut rsge = sys::ibv_sge {
        addr: mr.addr(),
        length: 2,
        lkey: mr.lkey(),
    };
    let mut ssge = sys::ibv_sge {
        addr: mr.addr() + 2048,
        length: 2,
        lkey: mr.lkey(),
    };
    let mut rwr = sys::ibv_recv_wr {
        wr_id: 1,
        next: std::ptr::null_mut(),
        sg_list: &mut rsge,
        num_sge: 1,
    };
    // SAFETY: ibv_send_wr is integers, pointers and unions of those; zero is valid.
    let mut swr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    swr.wr_id = 2;
    swr.sg_list = &mut ssge;
    swr.num_sge = 1;
    swr.opcode = sys::ibv_wr_opcode::IBV_WR_SEND;
    swr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
    let mut bad_r: *mut sys::ibv_recv_wr = std::ptr::null_mut();
    let mut bad_s: *mut sys::ibv_send_wr = std::ptr::null_mut();
    // SAFETY: ibv_wc is plain old data; zero is valid.
    let mut wc: sys::ibv_wc = unsafe { std::mem::zeroed() };
    let post_recv = |rwr: &mut sys::ibv_recv_wr, bad: &mut *mut sys::ibv_recv_wr| {
        // SAFETY: live QP; the work request names the first half of `mr`, which outlives
        // the QP's use of it (the QP is destroyed first, at the end of main).
        let rc = unsafe { sys::ibv_post_recv(q, rwr, bad) };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("ibv_post_recv: {rc}"))
        }
    };
    let poll = |cq: *mut sys::ibv_cq, wc: &mut sys::ibv_wc| -> Result<(), String> {
        loop {
            // SAFETY: live CQ; room for one completion.
            let n = unsafe { sys::ibv_poll_cq(cq, 1, wc) };
            if n < 0 {
                return Err(format!("ibv_poll_cq: {n}"));
            }
            if n > 0 {
                return if wc.status == 0 {
                    Ok(())
                } else {
                    Err(format!("status {}", wc.status))
                };
            }
        }
    };
    for _ in 0..8 {
        post_recv(&mut rwr, &mut bad_r)?;
    }
    if server {
        stream.write_all(&[1])?;
    } else {
        stream.read_exact(&mut [0u8; 1])?;
    }
    let probe = TickRate::start();
    let mut stamps = Vec::with_capacity(ITERS + 1);
    for _ in 0..ITERS {
        if server {
            poll(recv_cq.as_raw(), &mut wc)?;
            post_recv(&mut rwr, &mut bad_r)?;
        }
        stamps.push(clock::ticks());
        // SAFETY: live QP; the request names the second half of `mr` (alive, see above).
        let rc = unsafe { sys::ibv_post_send(q, &mut swr, &mut bad_s) };
        if rc != 0 {
            return Err(format!("ibv_post_send: {rc}").into());
        }
        poll(send_cq.as_raw(), &mut wc)?;
        if !server {
            poll(recv_cq.as_raw(), &mut wc)?;
            post_recv(&mut rwr, &mut bad_r)?;
        }
    }
    stamps.push(clock::ticks());
    let rate = probe.finish(Duration::from_millis(100));
    if !server {
        let mut v: Vec<f64> = stamps
            .windows(2)
            .map(|w| rate.to_us(w[1] - w[0]) / 2.0)
            .collect();
        v.sort_by(f64::total_cmp);
        println!(
            "raw_send_lat: median {:.2} us, min {:.2} us",
            v[v.len() / 2],
            v[0]
        );
    }
    stream.write_all(&[2])?;
    let _ = stream.read(&mut [0u8; 1]);
    // The QP goes before the region its requests named.
    drop(qp);
    drop(mr);
    Ok(())
}
