//! `mpir` — the reference tool: find every process of an MPI job.
//!
//! ```text
//! mpir launch [--json] [--hold] [--ranks LIST] [--timeout S] [--debug-dir DIR] -- STARTER ARGS…
//! mpir attach [--json] [--timeout S] [--debug-dir DIR] PID
//! mpir core   [--json] [--exe PATH] [--debug-dir DIR] CORE
//! ```
//!
//! `launch` runs the starter (`mpiexec`, `orterun`, a wrapper that execs one…) under control,
//! prints the job once it is spawned, lets it run and exits with its status; `--hold` instead
//! hands the ranks over stopped (job-control stop) for another tool and exits at once. With
//! `--json` the job's own stdout goes to stderr, so that stdout carries the JSON only.
//! `attach` acquires the job of a running starter — or, through MPI2DD, of any rank, directory
//! or metadirectory — and leaves it running. `core` reads the table from a starter's core file.
//!
//! Built on the public API only. Errors: one line with the cause chain, exit status 1.

use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use clap::{Parser, Subcommand};
use mpir_acquire::live;
use mpir_acquire::{AcquireOptions, Interface, Job, RankControl, RankSelection};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::proctable::{ProcTable, ReadOptions, read_proctable};
use mpir_types::LayoutSource;
use mpir_types::mpir::MpirFlags;
use serde::Serialize;

#[derive(Parser)]
#[command(
    name = "mpir",
    version,
    about = "Find every process of an MPI job (MPIR, MPI2DD)."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Args, Clone)]
struct Common {
    /// Print JSON (stable schema) instead of a table.
    #[arg(long)]
    json: bool,
    /// Extra debug directory (build-id tree) for symbols of stripped starters.
    #[arg(long = "debug-dir")]
    debug_dirs: Vec<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a starter under control and print its job.
    Launch {
        #[command(flatten)]
        common: Common,
        /// Hand the ranks over stopped, for another tool, and exit at once.
        #[arg(long)]
        hold: bool,
        /// Ranks to attach (e.g. 0,3,7); all by default.
        #[arg(long, value_delimiter = ',')]
        ranks: Option<Vec<u64>>,
        /// Longest wait for any event, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// The starter command.
        #[arg(trailing_var_arg = true, required = true)]
        starter: Vec<String>,
    },
    /// Acquire the job of a running starter (or MPI2DD process) and leave it running.
    Attach {
        #[command(flatten)]
        common: Common,
        /// Longest wait for any event, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// The starter's pid.
        pid: u32,
    },
    /// Read the job from a starter's core file.
    Core {
        #[command(flatten)]
        common: Common,
        /// The starter's executable, when the core does not lead to it.
        #[arg(long)]
        exe: Option<PathBuf>,
        /// The core file.
        core: PathBuf,
    },
}

#[derive(Serialize)]
struct RankOut<'a> {
    rank: u64,
    host: Option<&'a str>,
    executable: Option<&'a str>,
    pid: i64,
    /// "attached", "not_attached", or "failed: …".
    control: String,
}

#[derive(Serialize)]
struct StarterOut<'a> {
    pid: Option<u32>,
    image: Option<&'a str>,
    launcher: Option<String>,
}

#[derive(Serialize)]
struct JobOut<'a> {
    starter: StarterOut<'a>,
    interface: &'static str,
    flags: Option<MpirFlags>,
    layout: &'static str,
    ranks: Vec<RankOut<'a>>,
    problems: Vec<String>,
    notes: Vec<String>,
}

fn layout_name(source: &LayoutSource) -> &'static str {
    match source {
        LayoutSource::DebugInfo { .. } => "debug_info",
        LayoutSource::Given => "given",
        _ => "abi",
    }
}

fn table_out<'a>(table: &'a ProcTable, control: impl Fn(u64) -> String) -> Vec<RankOut<'a>> {
    table
        .resolved
        .ranks()
        .map(|r| RankOut {
            rank: r.rank,
            host: r.host,
            executable: r.executable,
            pid: r.pid,
            control: control(r.rank),
        })
        .collect()
}

fn job_out<'a>(job: &'a Job, interface: &'static str) -> JobOut<'a> {
    JobOut {
        starter: StarterOut {
            pid: Some(job.starter.pid),
            image: job.starter.image.as_deref(),
            launcher: job.starter.launcher.map(|l| l.to_string()),
        },
        interface,
        flags: Some(job.starter.flags),
        layout: layout_name(&job.table.layout.source),
        ranks: table_out(&job.table, |r| match job.control(r) {
            RankControl::Attached { .. } => "attached".into(),
            RankControl::Failed { reason } => format!("failed: {reason}"),
            _ => "not_attached".into(),
        }),
        problems: job
            .table
            .resolved
            .problems
            .iter()
            .map(ToString::to_string)
            .collect(),
        notes: job.notes.clone(),
    }
}

fn print(out: &JobOut<'_>, json: bool) -> Result<(), String> {
    if json {
        let text = serde_json::to_string_pretty(out).map_err(|e| e.to_string())?;
        println!("{text}");
        return Ok(());
    }
    let starter = match (out.starter.pid, &out.starter.launcher) {
        (Some(p), Some(l)) => format!("starter pid {p} ({l})"),
        (Some(p), None) => format!("starter pid {p}"),
        _ => "starter (from a core file)".into(),
    };
    println!(
        "{starter}, {} ranks, interface {}, layout from {}",
        out.ranks.len(),
        out.interface,
        out.layout
    );
    println!(
        "{:>6}  {:<16}  {:>8}  {:<13}  executable",
        "rank", "host", "pid", "control"
    );
    for r in &out.ranks {
        println!(
            "{:>6}  {:<16}  {:>8}  {:<13}  {}",
            r.rank,
            r.host.unwrap_or("?"),
            r.pid,
            r.control,
            r.executable.unwrap_or("?")
        );
    }
    for p in &out.problems {
        println!("problem: {p}");
    }
    for n in &out.notes {
        println!("note: {n}");
    }
    Ok(())
}

fn debug_options(common: &Common) -> DebugOptions {
    let mut d = DebugOptions::default();
    d.debug_dirs.extend(common.debug_dirs.iter().cloned());
    d
}

/// The error and its causes on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cause = c.source();
    }
    s
}

fn launch(
    common: &Common,
    hold: bool,
    ranks: Option<Vec<u64>>,
    timeout: u64,
    starter: &[String],
) -> Result<ExitCode, String> {
    let (program, args) = starter.split_first().ok_or("no starter command given")?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    if common.json {
        // The job's stdout goes to our stderr: stdout carries the JSON only.
        let err = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| e.to_string())?;
        cmd.stdout(Stdio::from(err));
    }
    let mut options = AcquireOptions::default()
        .timeout(Duration::from_secs(timeout))
        .debug(debug_options(common))
        .hold(hold);
    if let Some(r) = ranks {
        options = options.ranks(RankSelection::Only(r));
    }
    let mut acquired = live::launch(cmd, options).map_err(|e| chain(&e))?;
    let mut child = acquired.take_child().ok_or("no starter process")?;
    if hold {
        let stopped = acquired.hand_over().map_err(|e| chain(&e))?;
        let mut out = job_out(acquired.job(), "mpir");
        out.notes.push(format!(
            "{} ranks left stopped for another tool (SIGCONT lets them run)",
            stopped.len()
        ));
        print(&out, common.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    print(&job_out(acquired.job(), "mpir"), common.json)?;
    drop(acquired);
    let status = child.wait().map_err(|e| e.to_string())?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

fn attach(common: &Common, timeout: u64, pid: u32) -> Result<ExitCode, String> {
    let options = AcquireOptions::default()
        .timeout(Duration::from_secs(timeout))
        .debug(debug_options(common));
    let any = live::attach_any(pid, options).map_err(|e| chain(&e))?;
    match (&any.mpir, &any.mpi2dd) {
        (Some(a), _) => {
            let mut out = job_out(
                a.job(),
                if any.interface == Interface::Both {
                    "mpir+mpi2dd"
                } else {
                    "mpir"
                },
            );
            out.notes.extend(
                any.mismatches
                    .iter()
                    .map(|m| format!("MPIR vs MPI2DD: {m}")),
            );
            print(&out, common.json)?;
        }
        (None, Some(t)) => {
            let ranks: Vec<RankOut<'_>> = t
                .job
                .ranks()
                .map(|(w, r)| RankOut {
                    rank: r.rank as u64,
                    host: Some(&*r.process.host),
                    executable: r.executable.as_deref(),
                    pid: i64::from(r.process.pid),
                    control: format!("world {}", w.id),
                })
                .collect();
            let out = JobOut {
                starter: StarterOut {
                    pid: t.job.metadirectory.as_ref().map(|m| m.pid as u32),
                    image: None,
                    launcher: None,
                },
                interface: "mpi2dd",
                flags: None,
                layout: "abi",
                ranks,
                problems: t.job.problems.iter().map(|p| format!("{p:?}")).collect(),
                notes: t
                    .job
                    .unreachable
                    .iter()
                    .map(|u| format!("unreachable: {u:?}"))
                    .collect(),
            };
            print(&out, common.json)?;
        }
        _ => return Err("nothing acquired".into()),
    }
    Ok(ExitCode::SUCCESS)
}

fn core(
    common: &Common,
    exe: Option<&PathBuf>,
    core: &std::path::Path,
) -> Result<ExitCode, String> {
    let mut debug = debug_options(common);
    if let Some(e) = exe {
        debug.symbol_files.push(e.clone());
    }
    let target = mpir_target::corefile::CoreTarget::open(core, debug).map_err(|e| chain(&e))?;
    let table = read_proctable(&target, &ReadOptions::default()).map_err(|e| chain(&e))?;
    let out = JobOut {
        starter: StarterOut {
            pid: None,
            image: None,
            launcher: None,
        },
        interface: "mpir",
        flags: None,
        layout: layout_name(&table.layout.source),
        ranks: table_out(&table, |_| "core".into()),
        problems: table
            .resolved
            .problems
            .iter()
            .map(ToString::to_string)
            .collect(),
        notes: Vec::new(),
    };
    print(&out, common.json)?;
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Told to stop (Ctrl-C, SIGTERM, a lost terminal): every process we hold is released
    // first — breakpoints out, threads running — then the signal takes its course.
    if let Err(e) = mpir_target::live::tracer::detach_on_signals() {
        eprintln!("mpir: warning: {}", chain(&e));
    }
    let result = match &cli.command {
        Cmd::Launch {
            common,
            hold,
            ranks,
            timeout,
            starter,
        } => launch(common, *hold, ranks.clone(), *timeout, starter),
        Cmd::Attach {
            common,
            timeout,
            pid,
        } => attach(common, *timeout, *pid),
        Cmd::Core {
            common,
            exe,
            core: c,
        } => core(common, exe.as_ref(), c),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mpir: error: {e}");
            ExitCode::FAILURE
        }
    }
}
