//! The `viaduct bench verbs-lat` benchmark as a standalone program of this crate, for machines
//! where only the verbs layer is built: `cargo run -p viaduct-verbs --example verbs_lat -- -d rxe0`.

#[path = "../../src/bench/verbs_lat.rs"]
mod verbs_lat;

use clap::Parser;

/// RC SEND ping-pong latency over verbs, like ib_send_lat.
#[derive(Debug, Parser)]
#[command(name = "verbs_lat")]
struct Cli {
    #[command(flatten)]
    args: verbs_lat::Args,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = verbs_lat::run(&cli.args) {
        eprintln!("verbs_lat: error: {e}");
        std::process::exit(1);
    }
}
