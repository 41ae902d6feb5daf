//! Demo: lay out an MPIR starter in a mock target, in any data model, and read its process
//! descriptor table back the way a tool would — through the public API only.
//!
//! ```text
//! cargo run -p mpir-examples --bin mock-proctable -- [--model NAME] [-n RANKS] [--hosts H]
//!                                                    [--dwarf] [--duplicate-strings] [--json]
//! ```
//!
//! No MPI and no processes are involved: this is the bundled demo until the reference tool
//! `mpir` (with a real demo job) replaces it.

use std::process::ExitCode;

use mpir_target::mock::{MockStarter, MockTarget};
use mpir_target::proctable::{ReadOptions, read_proctable};
use mpir_types::mpir::ProcDescLayout;
use mpir_types::{DataModel, LayoutSource, TypeLayout};

struct Args {
    model: DataModel,
    ranks: usize,
    hosts: usize,
    dwarf: bool,
    duplicate: bool,
    json: bool,
}

const USAGE: &str = "usage: mock-proctable [--model lp64|ilp32|llp64|lp64-be|ilp32-be] [-n RANKS] \
[--hosts H] [--dwarf] [--duplicate-strings] [--json]";

fn parse() -> Result<Args, String> {
    let mut a = Args {
        model: DataModel::ILP32_BE,
        ranks: 8,
        hosts: 2,
        dwarf: false,
        duplicate: false,
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--model" => {
                let v = value("--model")?;
                a.model = DataModel::from_name(&v).ok_or(format!("unknown model {v:?}"))?;
            }
            "-n" => a.ranks = value("-n")?.parse().map_err(|e| format!("-n: {e}"))?,
            "--hosts" => {
                a.hosts = value("--hosts")?
                    .parse()
                    .map_err(|e| format!("--hosts: {e}"))?
            }
            "--dwarf" => a.dwarf = true,
            "--duplicate-strings" => a.duplicate = true,
            "--json" => a.json = true,
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if a.ranks > 1_000_000 {
        return Err("-n: at most 1000000 ranks in the demo".into());
    }
    Ok(a)
}

/// A layout a different compiler could give: pid first and 8 bytes wide, then the two names.
fn unusual_layout(model: &DataModel) -> ProcDescLayout {
    let p = model.pointer_size();
    let size = (8 + 2 * p).next_multiple_of(8);
    let ty = TypeLayout::new("MPIR_PROCDESC", size, LayoutSource::Given)
        .with_member("pid", 0, 8)
        .with_member("host_name", 8, p)
        .with_member("executable_name", 8 + p, p);
    ProcDescLayout::from_type(&ty, model).expect("the demo layout is valid")
}

fn run(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut starter = MockStarter::uniform(a.ranks, a.hosts, "/opt/demo/bin/ring", 4242);
    starter.share_strings = !a.duplicate;
    if a.dwarf {
        starter.layout = Some(unusual_layout(&a.model));
    }
    let mut builder = MockTarget::builder(a.model);
    starter.place(&mut builder);
    let target = builder.build();

    let table = read_proctable(&target, &ReadOptions::default())?;
    if a.json {
        let out = serde_json::json!({
            "demo": "mock MPIR starter (no processes)",
            "data_model": a.model,
            "layout": table.layout,
            "table_address": table.table_address,
            "ranks": table.resolved.ranks().collect::<Vec<_>>(),
            "problems": table.resolved.problems,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let l = &table.layout;
    println!("mpir-rs demo: a mock MPIR starter, no processes involved");
    println!("data model:     {}", a.model);
    println!(
        "MPIR_PROCDESC:  {} bytes; host_name@{} executable_name@{} pid@{} ({}-byte pid); from {}",
        l.size, l.host_name.offset, l.executable_name.offset, l.pid.offset, l.pid.size, l.source
    );
    println!(
        "MPIR_proctable: {} entries at {:#x}; {} target reads in all",
        table.raw.len(),
        table.table_address,
        target.read_calls()
    );
    println!();
    println!("{:>6}  {:<8}  {:>8}  executable", "rank", "host", "pid");
    for e in table.resolved.ranks() {
        println!(
            "{:>6}  {:<8}  {:>8}  {}",
            e.rank,
            e.host.unwrap_or("?"),
            e.pid,
            e.executable.unwrap_or("?")
        );
    }
    for p in &table.resolved.problems {
        println!("problem: {p}");
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
