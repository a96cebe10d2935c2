//! Benchmark `greq` (not built yet).

/// Options of this benchmark.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object per result line instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs the benchmark and prints its results.
pub fn run(_args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    Err("this benchmark is not built yet".into())
}
