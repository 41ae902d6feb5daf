//! `core`: the same reports from core files, through a session of cores. A starter's core
//! gives the job (its process table); ranks' cores give their message queues, numbered from
//! the starter's table when its core is given too (matched by pid), else from each rank's
//! `MPI_COMM_WORLD`.

use std::path::PathBuf;
use std::process::ExitCode;

use mpir_session::{CoreInfo, Session};

use crate::Common;
use crate::args::ReaderArgs;
use crate::cmd::queues;
use crate::render::deadlock::{CoverageOut, ReportOut};
use crate::render::job::{core_job, print};
use crate::render::queues::{CORE_SCHEMA, print_doc, queues_doc};

#[derive(clap::Args)]
pub(crate) struct CoreArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// The executable the cores were dumped from, when a core does not lead to it (its file was
    /// moved or rebuilt).
    #[arg(long)]
    pub(crate) exe: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) reader: ReaderArgs,
    /// Only these ranks' cores (a list and ranges, e.g. `0-3,7,12-`), by the rank the starter's
    /// core gives them; cores whose rank is not known are kept.
    #[arg(long, value_name = "LIST")]
    pub(crate) ranks: Option<mpir_types::ranks::RankSet>,
    /// Core files: a starter's (the job) and any ranks' (their queues).
    #[arg(required = true)]
    pub(crate) cores: Vec<PathBuf>,
}

/// Why a core is not a starter's, in the tool's words (its options named).
fn not_starter(info: &CoreInfo) -> String {
    let mut why = info.not_starter.clone().unwrap_or_default();
    if let Some(exe) = &info.executable_gone {
        why.push_str(&format!(
            "; its executable {} is gone: give it with --exe",
            exe.display()
        ));
    }
    if let Some(t) = &info.truncation {
        why.push_str(&format!("; the core is {t}"));
    }
    why
}

pub(crate) fn run(args: &CoreArgs) -> anyhow::Result<ExitCode> {
    if let Some(e) = args.exe.as_ref().filter(|e| !e.is_file()) {
        anyhow::bail!("--exe {}: no such file", e.display());
    }
    let mut options = args.reader.options(&args.common)?;
    if let Some(e) = &args.exe {
        options = options.with_exe(e.clone());
    }
    if let Some(r) = &args.ranks {
        options = options.with_ranks(r.clone());
    }
    let mut session = Session::cores(&args.cores, options)?;
    for info in session.core_files() {
        if let Some(t) = &info.truncation {
            eprintln!("mpir: warning: core {} is {t}", info.path.display());
        }
    }
    let job = session.starter_core().map(|s| {
        (
            s.path.clone(),
            serde_json::to_value(core_job(&s.table, s.flags)),
        )
    });
    let rank_cores = session.core_files().iter().any(|c| c.not_starter.is_some());
    if !rank_cores {
        let starter = session
            .starter_core()
            .ok_or_else(|| anyhow::anyhow!("no core given"))?;
        print(&core_job(&starter.table, starter.flags), args.common.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let why_no_starter = {
        let why: Vec<String> = session
            .core_files()
            .iter()
            .filter(|c| c.not_starter.is_some())
            .map(|c| format!("{}: {}", c.path.display(), not_starter(c)))
            .collect();
        format!(
            "no starter's core ({}), and no rank's queues could be read",
            why.join("; ")
        )
    };
    let read = queues::read(&mut session)?;
    // Nothing could be read: say also why the cores are not a starter's.
    // (Cores whose queues cannot be read but whose stacks can are still analysed, by their
    // stacks alone.)
    if read.coverage(None).read == 0 {
        queues::nothing_readable(&read).map_err(|e| e.context(why_no_starter))?;
    }
    let mut doc = queues_doc(&read, args.reader.types_given());
    // The wait-for analysis of this one snapshot (a core is one instant: potential only).
    // A verdict only from what was read: none when nothing was, and said to cover only the
    // cores read otherwise.
    let coverage = CoverageOut::of(&read.coverage(None), args.reader.types_given());
    let report = read.analyze()?;
    match &report {
        None => doc.notes.push(format!(
            "no wait-for verdict: {}",
            coverage.nothing_read(None)
        )),
        Some(r) => {
            doc.deadlock = Some(ReportOut::from(r));
            if let Some(c) = coverage.caveat() {
                doc.notes.push(c);
            }
        }
    }
    doc.coverage = Some(coverage);
    if let Some((path, out)) = job {
        doc.notes.push(format!(
            "ranks numbered from the starter core {}",
            path.display()
        ));
        doc.job = Some(out?);
    }
    doc.schema = CORE_SCHEMA;
    print_doc(&doc, args.common.json)?;
    if !args.common.json
        && let Some(report) = &report
    {
        outln!();
        out!("{report}");
    }
    // Every core read, by its queues or its wait-state export: 0; else 4.
    Ok(if read.waits_read_everywhere() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(queues::PARTIAL)
    })
}
