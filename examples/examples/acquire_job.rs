//! Acquire an MPI job the way a debugger does, then let it run.
//!
//! ```text
//! cargo run -p mpir-examples --example acquire_job -- launch mpiexec -n 4 ./app
//! cargo run -p mpir-examples --example acquire_job -- attach 4242
//! ```
//!
//! `launch` starts the starter under control, stops it at `MPIR_Breakpoint` once the ranks
//! exist, reads `MPIR_proctable`, attaches every rank and releases them; `attach` does the same
//! to a running starter. Either way the job keeps running unchanged afterwards.

use std::process::Command;
use std::time::Duration;

use mpir_acquire::live;
use mpir_acquire::{AcquireOptions, RankControl};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Hold: every rank stays stopped until `release` (without it, acquisition lets the job go
    // at once).
    let options = AcquireOptions::default()
        .with_timeout(Duration::from_secs(60))
        .with_hold(true);
    let mut acquired = match args.split_first() {
        Some((mode, rest)) if mode == "launch" && !rest.is_empty() => {
            let mut cmd = Command::new(&rest[0]);
            cmd.args(&rest[1..]);
            live::launch(cmd, options)?
        }
        Some((mode, [pid])) if mode == "attach" => live::attach(pid.parse()?, options)?,
        _ => return Err("usage: acquire_job launch STARTER ARGS… | attach PID".into()),
    };

    let job = acquired.job();
    println!("starter pid {}, {} ranks", job.starter.pid, job.len());
    for rank in job.ranks() {
        let control = match job.control(rank.rank) {
            RankControl::Attached { .. } => "attached (stopped)",
            _ => "not attached",
        };
        println!(
            "rank {:>4}  pid {:>8}  {:<16}  {}  {control}",
            rank.rank,
            rank.pid,
            rank.host.unwrap_or("?"),
            rank.executable.unwrap_or("?")
        );
    }
    // While held, a tool would read rank memory here (see rank_queues.rs).
    let child = acquired.take_child();
    let problems = acquired.release()?; // gate opened as the spec says, everything detached
    for p in problems {
        eprintln!("while releasing: {p}");
    }
    if let Some(mut child) = child {
        let status = child.wait()?;
        println!("job ended: {status}");
    }
    Ok(())
}
