//! Read the job of a crashed or dumped starter from its core file.
//!
//! ```text
//! gcore -o starter $(pidof mpiexec)
//! cargo run -p mpir-examples --example core_proctable -- starter.4242 [EXECUTABLE]
//! ```
//!
//! The core gives the memory; the files it mapped give the symbols and DWARF (give the
//! executable's new path if it moved).

use std::path::Path;

use mpir_target::corefile::CoreTarget;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::proctable::{ReadOptions, read_proctable};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let core = Path::new(
        args.first()
            .ok_or("usage: core_proctable CORE [EXECUTABLE]")?,
    );
    let target = match args.get(1) {
        Some(exe) => {
            CoreTarget::open_with_executable(core, Path::new(exe), DebugOptions::default())?
        }
        None => CoreTarget::open(core, DebugOptions::default())?,
    };
    let table = read_proctable(&target, &ReadOptions::default())?;
    println!(
        "{} ranks (MPIR_PROCDESC layout from {})",
        table.resolved.entries.len(),
        table.layout.source
    );
    for rank in table.resolved.ranks() {
        println!(
            "rank {:>4}  pid {:>8}  {:<16}  {}",
            rank.rank,
            rank.pid,
            rank.host.unwrap_or("?"),
            rank.executable.unwrap_or("?")
        );
    }
    for problem in &table.resolved.problems {
        println!("unreadable: {problem}");
    }
    Ok(())
}
