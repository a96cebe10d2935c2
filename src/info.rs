//! `viaduct info`: what this machine offers to viaduct (RDMA devices, io_uring, kernel).

use serde_json::json;

/// Options of `viaduct info`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Prints RDMA devices (ports, state, MTU, GIDs), io_uring availability and the kernel version.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
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
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }

    println!("kernel: {kernel}");
    println!();
    println!("RDMA devices:");
    match &devices {
        Ok(list) if list.is_empty() => println!("  no RDMA device{}", rdma_hint()),
        Ok(list) => {
            for d in list {
                for line in d.lines() {
                    println!("  {line}");
                }
            }
        }
        Err(e) => println!("  cannot list RDMA devices: {e}"),
    }
    println!();
    match &uring {
        Ok(f) => {
            println!("io_uring: available");
            for line in f.to_string().lines() {
                println!("  {line}");
            }
        }
        Err(e) => println!("io_uring: NOT available: {e}"),
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
