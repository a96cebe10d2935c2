//! `mpi-face-bench`: what the C layer of the MPI face costs on the point-to-point path.
//!
//! Two ranks (run it under `mpiexec -n 2` or `viaduct launch -n 2`) ping-pong the same
//! messages two ways in the same processes, alternating: through the face's exported
//! `MPI_Send`/`MPI_Recv` (handles, datatypes, status, error handler: what a C program pays),
//! and through the agent's `Comm::send`/`Comm::recv` on the communicator behind
//! `MPI_COMM_WORLD`. Rank 0 prints, per message size, the half round trip of each (the best
//! of the rounds) and their ratio, one figure a line: `<name> <bytes> <value> <unit>`.
//!
//! `BENCH_SCALE` (default 1) multiplies the repetitions.
//!
//! `mpi-face-bench --count PATH N`, on one rank, runs `N` iterations of one path in a function
//! of its own, for an instruction counter (`valgrind --tool=callgrind
//! --toggle-collect='mpi_face_bench::count_*'`): `face` (`MPI_Send` then `MPI_Recv` of 0 bytes
//! to itself on `MPI_COMM_WORLD`), `agent` (the same through `Comm::send`/`recv`) and `greq`
//! (`MPI_Grequest_start` + `MPI_Grequest_complete` + `MPI_Wait`, with the callbacks of
//! `mpi/bench/mpibench.c`).

use std::ffi::{c_char, c_int, c_void};
use std::time::Instant;

use viaduct_agent::matching::{Source, TagMatch};
use viaduct_mpi::abi::{self, Handle, MpiStatus};

// SAFETY: the face's own functions (this binary links viaduct-mpi), with the signatures of
// MPICH's `mpi.h` that they are defined with.
unsafe extern "C" {
    fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int;
    fn MPI_Finalize() -> c_int;
    fn MPI_Send(
        buf: *const c_void,
        count: c_int,
        datatype: Handle,
        dest: c_int,
        tag: c_int,
        comm: Handle,
    ) -> c_int;
    fn MPI_Recv(
        buf: *mut c_void,
        count: c_int,
        datatype: Handle,
        source: c_int,
        tag: c_int,
        comm: Handle,
        status: *mut MpiStatus,
    ) -> c_int;
    fn MPI_Grequest_start(
        query: QueryFn,
        free: FreeFn,
        cancel: CancelFn,
        extra: *mut c_void,
        request: *mut Handle,
    ) -> c_int;
    fn MPI_Grequest_complete(request: Handle) -> c_int;
    fn MPI_Wait(request: *mut Handle, status: *mut MpiStatus) -> c_int;
    fn MPI_Status_set_elements(status: *mut MpiStatus, datatype: Handle, count: c_int) -> c_int;
    fn MPI_Status_set_cancelled(status: *mut MpiStatus, flag: c_int) -> c_int;
}

type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// The query function of `mpi/bench/mpibench.c`'s generalized requests.
unsafe extern "C" fn greq_query(_: *mut c_void, s: *mut MpiStatus) -> c_int {
    // SAFETY: `s` is the status the library hands its query function.
    unsafe {
        MPI_Status_set_elements(s, abi::dt::BYTE, 0);
        MPI_Status_set_cancelled(s, 0);
        (*s).source = abi::UNDEFINED;
        (*s).tag = abi::UNDEFINED;
    }
    abi::SUCCESS
}

unsafe extern "C" fn greq_free(_: *mut c_void) -> c_int {
    abi::SUCCESS
}

unsafe extern "C" fn greq_cancel(_: *mut c_void, _: c_int) -> c_int {
    abi::SUCCESS
}

/// Tag of the face's messages (the agent's use another, so the two never match each other).
const FACE_TAG: c_int = 11;
const AGENT_TAG: u32 = 12;

/// Rounds of (face, agent) loops per size; the best loop of each counts.
const ROUNDS: usize = 7;

fn face_loop(rank: u32, buf: &mut [u8], n: usize) -> f64 {
    let len = buf.len() as c_int;
    let peer = 1 - rank as c_int;
    let p = buf.as_mut_ptr();
    let mut st = MpiStatus::empty();
    let t0 = Instant::now();
    // SAFETY: `p` is `len` bytes of the caller's buffer; `st` a status of this frame.
    let send = || unsafe {
        MPI_Send(
            p.cast(),
            len,
            abi::dt::BYTE,
            peer,
            FACE_TAG,
            abi::COMM_WORLD,
        )
    };
    let mut recv = || {
        // SAFETY: as above.
        unsafe {
            MPI_Recv(
                p.cast(),
                len,
                abi::dt::BYTE,
                peer,
                FACE_TAG,
                abi::COMM_WORLD,
                &mut st,
            )
        }
    };
    for _ in 0..n {
        let rc = if rank == 0 {
            let a = send();
            a | recv()
        } else {
            let a = recv();
            a | send()
        };
        assert_eq!(rc, abi::SUCCESS, "MPI_Send/MPI_Recv failed");
    }
    t0.elapsed().as_secs_f64() / n as f64 / 2.0 * 1e6
}

fn agent_loop(c: &viaduct_agent::comm::Comm, buf: &mut [u8], n: usize) -> f64 {
    let peer = 1 - c.rank();
    let t0 = Instant::now();
    for _ in 0..n {
        let r = if c.rank() == 0 {
            c.send(peer, AGENT_TAG, buf)
                .and_then(|()| c.recv(buf, Source::Rank(peer), TagMatch::Tag(AGENT_TAG)))
                .map(|_| ())
        } else {
            c.recv(buf, Source::Rank(peer), TagMatch::Tag(AGENT_TAG))
                .and_then(|_| c.send(peer, AGENT_TAG, buf))
        };
        if let Err(e) = r {
            panic!("the agent's ping-pong failed: {e}");
        }
    }
    t0.elapsed().as_secs_f64() / n as f64 / 2.0 * 1e6
}

/// `n` times `MPI_Send` then `MPI_Recv` of 0 bytes to this rank itself.
#[inline(never)]
fn count_face(rank: c_int, n: usize) {
    let mut st = MpiStatus::empty();
    for _ in 0..n {
        // SAFETY: 0 bytes of no buffer; `st` a status of this frame.
        let rc = unsafe {
            MPI_Send(
                std::ptr::null(),
                0,
                abi::dt::BYTE,
                rank,
                FACE_TAG,
                abi::COMM_WORLD,
            ) | MPI_Recv(
                std::ptr::null_mut(),
                0,
                abi::dt::BYTE,
                rank,
                FACE_TAG,
                abi::COMM_WORLD,
                &mut st,
            )
        };
        assert_eq!(rc, abi::SUCCESS, "MPI_Send/MPI_Recv failed");
    }
}

/// `n` times `Comm::send` then `Comm::recv` of 0 bytes to this rank itself.
#[inline(never)]
fn count_agent(c: &viaduct_agent::comm::Comm, n: usize) {
    let me = c.rank();
    for _ in 0..n {
        let r = c
            .send(me, AGENT_TAG, &[])
            .and_then(|()| c.recv(&mut [], Source::Rank(me), TagMatch::Tag(AGENT_TAG)));
        if let Err(e) = r {
            panic!("the agent's send/recv failed: {e}");
        }
    }
}

/// `n` times `MPI_Grequest_start` + `MPI_Grequest_complete` + `MPI_Wait`.
#[inline(never)]
fn count_greq(n: usize) {
    for _ in 0..n {
        let mut r: Handle = 0;
        // SAFETY: the callbacks above; `r` a handle of this frame; MPI_STATUS_IGNORE.
        let rc = unsafe {
            MPI_Grequest_start(
                greq_query,
                greq_free,
                greq_cancel,
                std::ptr::null_mut(),
                &mut r,
            ) | MPI_Grequest_complete(r)
                | MPI_Wait(&mut r, abi::STATUS_IGNORE as *mut MpiStatus)
        };
        assert_eq!(rc, abi::SUCCESS, "generalized request failed");
    }
}

/// `--count PATH N`: one path, `N` times, in a function of its own (for an instruction count).
fn count(c: &viaduct_agent::comm::Comm, path: &str, n: usize) {
    match path {
        "face" => count_face(c.rank() as c_int, n),
        "agent" => count_agent(c, n),
        "greq" => count_greq(n),
        _ => {
            eprintln!("mpi-face-bench: --count takes face, agent or greq, not {path}");
            std::process::exit(2);
        }
    }
}

fn main() {
    // SAFETY: MPI_Init with no arguments, as the standard allows.
    let rc = unsafe { MPI_Init(std::ptr::null_mut(), std::ptr::null_mut()) };
    assert_eq!(rc, abi::SUCCESS, "MPI_Init failed");
    let c = viaduct_mpi::world_comm().expect("MPI_COMM_WORLD after MPI_Init");
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "--count" {
        let Ok(n) = args[3].parse() else {
            eprintln!(
                "mpi-face-bench: --count PATH N takes a number, not {}",
                args[3]
            );
            std::process::exit(2);
        };
        count(&c, &args[2], n);
        // SAFETY: the matching MPI_Finalize.
        unsafe { MPI_Finalize() };
        return;
    }
    if c.size() != 2 {
        eprintln!("mpi-face-bench: needs 2 ranks, not {}", c.size());
        std::process::exit(2);
    }
    let scale: f64 = std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let reps = ((20000.0 * scale) as usize).max(100);
    let rank = c.rank();
    for bytes in [0usize, 8, 512] {
        let mut buf = vec![0u8; bytes];
        // Warm both paths up.
        face_loop(rank, &mut buf, reps / 10 + 1);
        agent_loop(&c, &mut buf, reps / 10 + 1);
        let (mut face, mut agent) = (f64::MAX, f64::MAX);
        for round in 0..ROUNDS {
            c.barrier().expect("barrier");
            // Alternate which goes first, so that neither always follows the other.
            if round % 2 == 0 {
                face = face.min(face_loop(rank, &mut buf, reps));
                agent = agent.min(agent_loop(&c, &mut buf, reps));
            } else {
                agent = agent.min(agent_loop(&c, &mut buf, reps));
                face = face.min(face_loop(rank, &mut buf, reps));
            }
        }
        if rank == 0 {
            println!("face-pingpong {bytes} {face:.3} us");
            println!("agent-pingpong {bytes} {agent:.3} us");
            println!("face/agent {bytes} {:.3} x", face / agent);
        }
    }
    // SAFETY: the matching MPI_Finalize.
    unsafe { MPI_Finalize() };
}
