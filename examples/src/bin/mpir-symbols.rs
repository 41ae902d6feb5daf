//! Where are a starter's MPIR symbols, and what does its `MPIR_PROCDESC` look like?
//!
//! ```text
//! cargo run -p mpir-examples --bin mpir-symbols -- --pid PID [--debug-dir DIR]...
//! cargo run -p mpir-examples --bin mpir-symbols -- FILE [--debug-dir DIR]...
//! ```
//!
//! Prints each MPIR symbol with its run-time address, size, image and the file whose symbol
//! table had it, then the `MPIR_PROCDESC` layout and where it came from (DWARF or the ABI).
//! Only reads: no process is stopped or traced.

use std::path::PathBuf;
use std::process::ExitCode;

use mpir_target::debuginfo::{DebugOptions, ProcessImages};
use mpir_target::{SymbolLookup, TargetError, TypeLookup, TypeQuery};
use mpir_types::mpir::{ProcDescLayout, symbols};

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut pid = None;
    let mut file = None;
    let mut options = DebugOptions::default();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--pid" => pid = Some(args.next().ok_or("--pid needs a value")?.parse::<u32>()?),
            "--debug-dir" => {
                options = options.with_debug_dir(args.next().ok_or("--debug-dir needs a value")?)
            }
            "-h" | "--help" => {
                println!("usage: mpir-symbols (--pid PID | FILE) [--debug-dir DIR]...");
                return Ok(true);
            }
            f => file = Some(PathBuf::from(f)),
        }
    }
    let images = match (pid, file) {
        (Some(pid), None) => ProcessImages::for_pid(pid, options)?,
        (None, Some(f)) => ProcessImages::from_files(&[(f, 0)], options)?,
        _ => return Err("give either --pid PID or one FILE".into()),
    };
    for image in images.images() {
        if let Some((path, how)) = image.debug_file() {
            println!(
                "debug file for {}: {} ({how:?})",
                image.path().display(),
                path.display()
            );
        }
        for note in image.notes() {
            println!("note: {note}");
        }
    }
    let mut found_breakpoint = false;
    for spec in symbols::ALL {
        match images.symbol(spec.name)? {
            Some(s) => {
                found_breakpoint |= spec.name == symbols::BREAKPOINT;
                println!(
                    "{:<26} {:#014x} {:>5} bytes  {:?}/{:?}  in {}  (from {})",
                    s.name,
                    s.address,
                    s.size,
                    s.kind,
                    s.binding,
                    s.image.as_deref().unwrap_or("?"),
                    s.found_in.as_deref().unwrap_or("?")
                );
            }
            None => println!("{:<26} absent", spec.name),
        }
    }
    let model = images.data_model();
    let layout = match images.type_layout(TypeQuery::PointeeOfVariable(symbols::PROCTABLE))? {
        Some(ty) => ProcDescLayout::from_type(&ty, &model).map_err(TargetError::from)?,
        None => ProcDescLayout::abi(&model),
    };
    println!(
        "MPIR_PROCDESC: {} bytes, host_name@{} executable_name@{} pid@{} ({} bytes); from {}",
        layout.size,
        layout.host_name.offset,
        layout.executable_name.offset,
        layout.pid.offset,
        layout.pid.size,
        layout.source
    );
    if !found_breakpoint {
        println!("MPIR_Breakpoint not found: not an MPIR starter (or its symbols are stripped)");
    }
    Ok(found_breakpoint)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(3),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
