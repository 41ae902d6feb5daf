//! `launch`, `attach` and `core`: the job (MPIR proctable or MPI2DD traversal).

use std::os::fd::AsFd;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use mpir_acquire::live;
use mpir_acquire::{AcquireOptions, Interface, Job, RankControl, RankSelection};
use mpir_target::proctable::ProcTable;
use mpir_types::LayoutSource;
use mpir_types::mpir::MpirFlags;
use serde::Serialize;

use crate::{Common, chain, debug_options};

/// `schema` of a job document (docs/cli-json.md).
pub(crate) const JOB_SCHEMA: &str = "mpir.job/1";

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
pub(crate) struct JobOut<'a> {
    /// Schema version of this document.
    schema: &'static str,
    starter: StarterOut<'a>,
    /// The interface the job was read through: "mpir" or "mpi2dd".
    interface: &'static str,
    /// Every interface the entry process exports (both when "mpir" and "mpi2dd" agree).
    interfaces: Vec<&'static str>,
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

pub(crate) fn job_out<'a>(job: &'a Job, interface: &'static str) -> JobOut<'a> {
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: Some(job.starter.pid),
            image: job.starter.image.as_deref(),
            launcher: job.starter.launcher.map(|l| l.to_string()),
        },
        interface,
        interfaces: vec![interface],
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

pub(crate) fn print(out: &JobOut<'_>, json: bool) -> Result<(), String> {
    if json {
        let text = serde_json::to_string_pretty(out).map_err(|e| e.to_string())?;
        outln!("{text}");
        return Ok(());
    }
    let starter = match (out.starter.pid, &out.starter.launcher) {
        (Some(p), Some(l)) => format!("starter pid {p} ({l})"),
        (Some(p), None) => format!("starter pid {p}"),
        _ => "starter (from a core file)".into(),
    };
    outln!(
        "{starter}, {} ranks, interface {}, layout from {}",
        out.ranks.len(),
        out.interface,
        out.layout
    );
    outln!(
        "{:>6}  {:<16}  {:>8}  {:<13}  executable",
        "rank",
        "host",
        "pid",
        "control"
    );
    for r in &out.ranks {
        outln!(
            "{:>6}  {:<16}  {:>8}  {:<13}  {}",
            r.rank,
            r.host.unwrap_or("?"),
            r.pid,
            r.control,
            r.executable.unwrap_or("?")
        );
    }
    for p in &out.problems {
        outln!("problem: {p}");
    }
    for n in &out.notes {
        outln!("note: {n}");
    }
    Ok(())
}

pub(crate) fn launch(
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

pub(crate) fn attach(common: &Common, timeout: u64, pid: u32) -> Result<ExitCode, String> {
    let options = AcquireOptions::default()
        .timeout(Duration::from_secs(timeout))
        .debug(debug_options(common));
    let any = live::attach_any(pid, options).map_err(|e| chain(&e))?;
    match (&any.mpir, &any.mpi2dd) {
        (Some(a), _) => {
            let mut out = job_out(a.job(), "mpir");
            if any.interface == Interface::Both {
                out.interfaces.push("mpi2dd");
            }
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
                schema: JOB_SCHEMA,
                starter: StarterOut {
                    pid: t.job.metadirectory.as_ref().map(|m| m.pid as u32),
                    image: None,
                    launcher: None,
                },
                interface: "mpi2dd",
                interfaces: vec!["mpi2dd"],
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

/// The job document of a starter's process table read from a core file.
pub(crate) fn core_job(table: &ProcTable) -> JobOut<'_> {
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: None,
            image: None,
            launcher: None,
        },
        interface: "mpir",
        interfaces: vec!["mpir"],
        flags: None,
        layout: layout_name(&table.layout.source),
        ranks: table_out(table, |_| "core".into()),
        problems: table
            .resolved
            .problems
            .iter()
            .map(ToString::to_string)
            .collect(),
        notes: Vec::new(),
    }
}
