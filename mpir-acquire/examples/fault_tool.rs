//! A minimal MPIR tool for fault-injection tests (`tests/fault_injection.rs`): it acquires a
//! job, holds it, and then goes away in the way it is told to — the situations in which a
//! tool must still leave the job as it found it.
//!
//! ```text
//! fault_tool [--safety signals,panic,exit] [--gate auto|always|never] [--timeout S]
//!            [--debug-dir DIR] --then ACTION (-- STARTER ARGS… | --attach PID)
//! ```
//!
//! `--safety` installs the library's safety nets: `signals`
//! ([`detach_on_signals`](mpir_target::live::tracer::detach_on_signals)), `panic`
//! ([`detach_on_panic`](mpir_target::live::tracer::detach_on_panic)), `exit`
//! ([`detach_at_exit`](mpir_target::live::tracer::detach_at_exit)). Once the job is held it
//! prints `fault_tool: held starter=PID ranks=PID,PID,…` on stderr, then does ACTION:
//!
//! - `sleep`: waits (for a signal) with the job held;
//! - `release`: releases the job and exits 0;
//! - `panic-main`: panics on the main thread, which owns the job (unwinding drops it);
//! - `panic-thread`: a worker thread panics; the main thread sees the failed `join` and ends
//!   the tool with `std::process::exit(101)`, which runs no destructor;
//! - `exit`: `std::process::exit(3)` with the job still held.
//!
//! The starter inherits the tool's stdin and stdout (the job's output is the tool's stdout).
//! Errors print `fault_tool: error: …` and exit 2.

use std::process::{Command, ExitCode};
use std::time::Duration;

use mpir_acquire::live::{self, Acquired};
use mpir_acquire::{AcquireOptions, GateRelease};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::tracer;

struct Args {
    safety: Vec<String>,
    gate: GateRelease,
    timeout: u64,
    debug_dirs: Vec<String>,
    then: String,
    attach: Option<u32>,
    starter: Vec<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        safety: Vec::new(),
        gate: GateRelease::Auto,
        timeout: 60,
        debug_dirs: Vec::new(),
        then: "sleep".into(),
        attach: None,
        starter: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--safety" => a.safety = value()?.split(',').map(String::from).collect(),
            "--gate" => {
                a.gate = match value()?.as_str() {
                    "auto" => GateRelease::Auto,
                    "always" => GateRelease::Always,
                    "never" => GateRelease::Never,
                    other => return Err(format!("--gate {other}?")),
                }
            }
            "--timeout" => a.timeout = value()?.parse().map_err(|e| format!("{e}"))?,
            "--debug-dir" => a.debug_dirs.push(value()?),
            "--then" => a.then = value()?,
            "--attach" => a.attach = Some(value()?.parse().map_err(|e| format!("{e}"))?),
            "--" => {
                a.starter = it.by_ref().collect();
                break;
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.attach.is_none() && a.starter.is_empty() {
        return Err("give -- STARTER ARGS… or --attach PID".into());
    }
    Ok(a)
}

fn acquire(a: &Args) -> Result<Acquired, String> {
    let mut debug = DebugOptions::default();
    debug.debug_dirs.extend(a.debug_dirs.iter().map(Into::into));
    let options = AcquireOptions::default()
        .with_timeout(Duration::from_secs(a.timeout))
        .with_gate(a.gate)
        .with_debug(debug)
        .with_hold(true);
    match a.attach {
        Some(pid) => live::attach(pid, options),
        None => {
            let (program, args) = a.starter.split_first().ok_or("no starter")?;
            let mut cmd = Command::new(program);
            cmd.args(args);
            live::launch(cmd, options)
        }
    }
    .map_err(|e| e.to_string())
}

fn run() -> Result<(), String> {
    let a = parse()?;
    for s in &a.safety {
        match s.as_str() {
            "signals" => tracer::detach_on_signals().map_err(|e| e.to_string())?,
            "panic" => tracer::detach_on_panic(),
            "exit" => tracer::detach_at_exit().map_err(|e| e.to_string())?,
            "" => {}
            other => return Err(format!("--safety {other}?")),
        }
    }
    let mut acquired = acquire(&a)?;
    let ranks: Vec<String> = acquired
        .job()
        .attached_pids()
        .iter()
        .map(u32::to_string)
        .collect();
    eprintln!(
        "fault_tool: held starter={} ranks={}",
        acquired.job().starter.pid,
        ranks.join(",")
    );
    match a.then.as_str() {
        "sleep" => loop {
            std::thread::sleep(Duration::from_secs(1));
        },
        "release" => {
            let problems = acquired.release().map_err(|e| e.to_string())?;
            for p in problems {
                eprintln!("fault_tool: release: {p}");
            }
            if let Some(mut child) = acquired.take_child() {
                let _ = child.wait();
            }
            Ok(())
        }
        "panic-main" => panic!("fault_tool: injected panic on the main thread"),
        "panic-thread" => {
            let worker = std::thread::spawn(|| panic!("fault_tool: injected panic in a worker"));
            if worker.join().is_err() {
                // A tool that treats a failed worker as fatal; no destructor runs.
                std::process::exit(101);
            }
            Ok(())
        }
        "exit" => std::process::exit(3),
        other => Err(format!("--then {other}?")),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fault_tool: error: {e}");
            ExitCode::from(2)
        }
    }
}
