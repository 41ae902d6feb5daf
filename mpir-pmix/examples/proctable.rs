//! Prints the proc table of every job of a running PMIx launcher (Open MPI 5's `mpirun`).
//!
//! ```text
//! cargo run -p mpir-pmix --example proctable -- <launcher-pid> [--release]
//! ```
//! With `--release`, releases the jobs' ranks held in `PMIx_Init` (`--stop-in-init`) afterwards.

use mpir_pmix::{Library, LoadOptions, Server, Tool};
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let pid: u32 = args
        .next()
        .ok_or("usage: proctable <launcher-pid> [--release]")?
        .parse()?;
    let release = args.next().as_deref() == Some("--release");
    let t0 = Instant::now();
    let lib = Library::load(&LoadOptions::default().with_launcher_pid(pid))?;
    let tool = Tool::connect(&lib, &Server::Pid(pid), Duration::from_secs(10))?;
    let (me, _) = tool.me();
    for ns in tool.namespaces()? {
        if ns == me {
            continue;
        }
        // Tools' namespaces (ours and earlier tools') have no processes: skip what has no table.
        let Ok(table) = tool.proc_table(&ns) else {
            continue;
        };
        if table.is_empty() {
            continue;
        }
        println!("{ns}: {} processes", table.len());
        for p in &table {
            println!(
                "  rank {:>4}  pid {:>8}  {:<12}  {}  ({})",
                p.rank,
                p.pid,
                p.host,
                p.executable,
                p.state_name()
            );
        }
        if release {
            tool.release(&ns, None)?;
            println!("  released");
        }
    }
    eprintln!(
        "{} via {} in {:?}",
        lib.version(),
        lib.path().display(),
        t0.elapsed()
    );
    Ok(())
}
