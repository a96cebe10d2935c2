//! `viaduct info`: what this machine offers to viaduct (RDMA devices, io_uring, kernel).

use std::io::Write;

use serde_json::json;

/// Options of `viaduct info`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  viaduct info\n  viaduct info --json | jq .rdma\n  \
    scripts/rxe-vm -- target/release/viaduct info   (soft-RoCE rxe0 in a VM)"
)]
pub struct Args {
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Prints RDMA devices (ports, state, MTU, GIDs), io_uring availability and the kernel version.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut out = std::io::stdout().lock();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let uring = viaduct_fallback::uring::Features::probe();
    let devices = rdma_devices();

    if args.json {
        let doc = json!({
            "kernel": kernel,
            "io_uring": match &uring {
                Ok(f) => json!({"available": true, "features": f.to_string()}),
                Err(e) => json!({"available": false, "error": e.to_string()}),
            },
            "rdma": match &devices {
                Ok(list) => json!({"devices": list}),
                Err(e) => json!({"error": e}),
            },
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }

    writeln!(out, "kernel: {kernel}")?;
    writeln!(out)?;
    writeln!(out, "RDMA devices:")?;
    match &devices {
        Ok(list) if list.is_empty() => writeln!(out, "  no RDMA device{}", rdma_hint())?,
        Ok(list) => {
            for d in list {
                for line in d.lines() {
                    writeln!(out, "  {line}")?;
                }
            }
        }
        Err(e) => writeln!(out, "  cannot list RDMA devices: {e}")?,
    }
    writeln!(out)?;
    match &uring {
        Ok(f) => {
            writeln!(out, "io_uring: available")?;
            for line in f.to_string().lines() {
                writeln!(out, "  {line}")?;
            }
        }
        Err(e) => writeln!(out, "io_uring: NOT available: {e}")?,
    }
    Ok(())
}

/// Each device rendered as text (several lines), or why listing failed.
#[cfg(feature = "rdma")]
fn rdma_devices() -> Result<Vec<String>, String> {
    viaduct_verbs::device::list()
        .map(|list| list.iter().map(|d| d.to_string()).collect())
        .map_err(|e| e.to_string())
}

#[cfg(not(feature = "rdma"))]
fn rdma_devices() -> Result<Vec<String>, String> {
    Err("this viaduct was built without the `rdma` feature".to_string())
}

fn rdma_hint() -> &'static str {
    if std::path::Path::new("/sys/class/infiniband").exists() {
        ""
    } else {
        " (this kernel exposes no /sys/class/infiniband; try soft-RoCE: scripts/rxe-vm -- viaduct info)"
    }
}
