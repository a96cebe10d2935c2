//! The `viaduct` command line: machine info, launcher, benchmarks.

#![deny(unsafe_code)]

mod bench;
mod demo;
mod info;
mod launch;
mod progress;
mod watch;

use clap::{Parser, Subcommand};

/// viaduct: communication over RDMA verbs, io_uring TCP and shared memory.
#[derive(Debug, Parser)]
#[command(name = "viaduct", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what this machine offers: RDMA devices (ports, state, MTU, GIDs), io_uring, kernel.
    Info(info::Args),
    /// Start N local ranks of a program, serving them the PMI-1 bootstrap protocol.
    Launch(launch::Args),
    /// The tour: 4 local ranks over every method here, collectives, file I/O, a handler.
    Demo(demo::Args),
    /// Run a benchmark.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The launcher's watcher (started by `viaduct launch` itself).
    #[command(name = "launch-watch", hide = true)]
    LaunchWatch(watch::Args),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Verbs ping-pong latency (RC SEND), like ib_send_lat.
    #[cfg(feature = "rdma")]
    VerbsLat(bench::verbs_lat::Args),
    /// Method latency/bandwidth over tcp or shm.
    Method(bench::method::Args),
    /// Tagged ping-pong latency through the agent between 2 launched ranks (`bench agent latency`).
    #[command(
        after_help = "Examples:\n  viaduct bench latency --transport shm --sizes 8,4096\n  \
        viaduct bench latency --transport tcp --json"
    )]
    Latency(bench::agent::Common),
    /// Streaming bandwidth through the agent between 2 launched ranks (`bench agent bandwidth`).
    #[command(
        after_help = "Examples:\n  viaduct bench bandwidth --transport shm --sizes 65536,4194304"
    )]
    Bandwidth(bench::agent::Common),
    /// Tagged ping-pong latency/bandwidth through the agent between launched ranks.
    Agent(bench::agent::Args),
    /// Collective call time (bcast, allreduce, reduce, allgather, alltoall) on launched ranks,
    /// like osu_bcast/osu_allreduce.
    Collective(bench::collective::Args),
    /// Generalized request start + complete + wait cost.
    Greq(bench::greq::Args),
    /// Nonblocking file I/O through io_uring.
    Io(bench::io::Args),
    /// Post time of one thread while another sleeps in blocking progress (2 launched ranks).
    Threads(bench::threads::Args),
}

fn main() {
    // Library diagnostics to stderr, filtered by VIADUCT_LOG (default: warnings).
    viaduct_agent::log::install_subscriber();
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Info(a) => info::run(a),
        Command::Launch(a) => match launch::run(a) {
            Ok(code) => std::process::exit(code),
            Err(e) => Err(e),
        },
        Command::Demo(a) => demo::run(a),
        Command::LaunchWatch(a) => watch::run(a),
        Command::Bench(b) => match b {
            #[cfg(feature = "rdma")]
            BenchCommand::VerbsLat(a) => bench::verbs_lat::run(a),
            BenchCommand::Method(a) => bench::method::run(a),
            BenchCommand::Latency(a) => bench::agent::run_test(bench::agent::Test::Latency, a),
            BenchCommand::Bandwidth(a) => bench::agent::run_test(bench::agent::Test::Bandwidth, a),
            BenchCommand::Agent(a) => bench::agent::run(a),
            BenchCommand::Collective(a) => bench::collective::run(a),
            BenchCommand::Greq(a) => bench::greq::run(a),
            BenchCommand::Io(a) => bench::io::run(a),
            BenchCommand::Threads(a) => bench::threads::run(a),
        },
    };
    if let Err(e) = result {
        // A reader that went away (`viaduct info | head`) is not an error of ours.
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::BrokenPipe
        {
            std::process::exit(0);
        }
        eprintln!("viaduct: error: {e}");
        std::process::exit(1);
    }
}
