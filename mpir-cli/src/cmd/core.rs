//! `core`: the same reports from core files. A starter's core gives the job (its process
//! table); ranks' cores give their message queues, numbered from the starter's table when its
//! core is given too (matched by pid), else from each rank's `MPI_COMM_WORLD`.

use anyhow::Context as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;

use mpir_target::Target;
use mpir_target::corefile::CoreTarget;
use mpir_target::proctable::{ProcTable, ReadOptions, read_proctable};

use crate::cmd::job::core_job;
use crate::render::job::print;
use mpir_target::debuginfo::DebugOptions;

use crate::cmd::queues::{self, RankProc, ReaderArgs};
use crate::{Common, chain};

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

/// A core file, opened, and what it holds.
struct Opened {
    path: PathBuf,
    target: Rc<CoreTarget>,
    /// The process table, when this is a starter's core (a table with entries).
    table: Option<ProcTable>,
    /// Why it is not a starter's core.
    not_starter: String,
}

fn open(path: &Path, args: &CoreArgs, debug: &DebugOptions) -> anyhow::Result<Opened> {
    let debug = debug.clone();
    let target = match &args.exe {
        Some(e) if !e.is_file() => {
            return Err(anyhow::anyhow!("--exe {}: no such file", e.display()));
        }
        Some(e) => CoreTarget::open_with_executable(path, e, debug),
        None => CoreTarget::open(path, debug),
    }
    .with_context(|| format!("core {}", path.display()))?;
    let truncation = target.memory().truncation();
    if let Some(t) = truncation {
        eprintln!("mpir: warning: core {} is {t}", path.display());
    }
    // Open MPI's ranks load the library that defines MPIR_proctable too: a starter is a core
    // whose table has entries.
    let (table, mut not_starter) = match read_proctable(&target, &ReadOptions::default()) {
        Ok(t) if !t.resolved.entries.is_empty() => (Some(t), String::new()),
        Ok(_) => (None, "its MPIR_proctable is empty".to_string()),
        Err(e) => (None, chain(&e)),
    };
    if args.exe.is_none()
        && let Some(exe) = target.memory().executable()
        && !exe.is_file()
    {
        not_starter.push_str(&format!(
            "; its executable {} is gone: give it with --exe",
            exe.display()
        ));
    }
    if let Some(t) = truncation {
        not_starter.push_str(&format!("; the core is {t}"));
    }
    Ok(Opened {
        path: path.to_path_buf(),
        target: Rc::new(target),
        table,
        not_starter,
    })
}

pub(crate) fn run(args: &CoreArgs) -> anyhow::Result<ExitCode> {
    let (debug, choice) = args.reader.prepare(&args.common)?;
    let opened: Vec<Opened> = args
        .cores
        .iter()
        .map(|p| open(p, args, &debug))
        .collect::<Result<_, _>>()?;
    let (starters, ranks): (Vec<&Opened>, Vec<&Opened>) =
        opened.iter().partition(|o| o.table.is_some());
    if starters.len() > 1 {
        let names: Vec<String> = starters
            .iter()
            .map(|o| o.path.display().to_string())
            .collect();
        return Err(anyhow::anyhow!(
            "several starter cores given ({}): one job at a time",
            names.join(", ")
        ));
    }
    let job = starters.first().and_then(|s| {
        s.table.as_ref().map(|t| {
            let flags = mpir_acquire::protocol::read_flags(&*s.target);
            (s, core_job(t, flags))
        })
    });
    if ranks.is_empty() {
        let (_, out) = job.context("no core given")?;
        print(&out, args.common.json)?;
        return Ok(ExitCode::SUCCESS);
    }

    // Rank numbers from the starter's table, by pid.
    let by_pid: BTreeMap<i64, u64> = starters
        .first()
        .and_then(|s| s.table.as_ref())
        .map(|t| t.resolved.ranks().map(|r| (r.pid, r.rank)).collect())
        .unwrap_or_default();
    let mut procs = Vec::new();
    let mut targets: BTreeMap<usize, Rc<dyn Target>> = BTreeMap::new();
    // Rank cores the selection leaves out (by the starter core's numbering).
    let ranks: Vec<&Opened> = ranks
        .into_iter()
        .filter(|o| {
            let pid = i64::from(o.target.memory().pid().unwrap_or(0));
            match (args.ranks.as_ref(), by_pid.get(&pid)) {
                (Some(sel), Some(&rank)) => sel.contains(rank),
                _ => true,
            }
        })
        .collect();
    if ranks.is_empty() {
        return Err(anyhow::anyhow!("--ranks leaves no rank core to read"));
    }
    for (i, o) in ranks.iter().enumerate() {
        let core = o.target.memory();
        let pid = core.pid().unwrap_or(0);
        let image = args
            .exe
            .clone()
            .or_else(|| core.executable().map(Path::to_path_buf))
            .unwrap_or_else(|| o.path.clone());
        targets.insert(i, Rc::clone(&o.target) as Rc<dyn Target>);
        procs.push(RankProc {
            rank: by_pid.get(&i64::from(pid)).copied(),
            pid,
            image,
            unreadable: None,
        });
    }
    // The opener hands out the cores by position (pids of cores need not be distinct).
    let index: BTreeMap<(u32, PathBuf), usize> = procs
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.pid, p.image.clone()), i))
        .collect();
    let opener = |r: &RankProc| {
        index
            .get(&(r.pid, r.image.clone()))
            .and_then(|i| targets.get(i))
            .cloned()
            .ok_or_else(|| format!("no core for pid {}", r.pid))
    };
    let read = queues::read_queues_raw(&choice, &procs, &opener).map_err(|e| {
        // Nothing could be read: say also why the cores are not a starter's.
        let why: Vec<String> = ranks
            .iter()
            .map(|o| format!("{}: {}", o.path.display(), o.not_starter))
            .collect();
        e.context(format!(
            "no starter's core ({}), and no rank's queues could be read",
            why.join("; ")
        ))
    })?;
    let mut doc = queues::queues_doc(read.engine.clone(), &procs, &read.reads);
    doc.notes.extend(read.notes());
    let reads = read.reads;
    // The wait-for analysis of this one snapshot (a core is one instant: potential only).
    let sample: Vec<_> = procs
        .iter()
        .zip(&reads)
        .filter_map(|(p, r)| {
            let (rank, q) = r.as_ref().ok()?;
            Some((rank.or(p.rank), p.pid, q.communicators.clone()))
        })
        .collect();
    // A verdict only from what was read: none when nothing was, and said to cover only the
    // cores read otherwise.
    let outcomes: Vec<Option<String>> = reads.iter().map(|r| r.as_ref().err().cloned()).collect();
    let coverage = crate::cmd::deadlock::Coverage::of(&procs, &outcomes);
    let mut report = None;
    if coverage.read == 0 {
        doc.notes.push(format!(
            "no wait-for verdict: {}",
            crate::cmd::deadlock::nothing_read(&coverage, None)
        ));
    } else {
        report = mpir_types::deadlock::analyze(&crate::cmd::deadlock::snapshot(&sample)).ok();
        doc.deadlock = report
            .as_ref()
            .map(crate::render::deadlock::ReportOut::from);
        if let Some(c) = coverage.caveat() {
            doc.notes.push(c);
        }
    }
    doc.coverage = Some(coverage);
    for (r, o) in doc.ranks.iter_mut().zip(&ranks) {
        r.source = Some(o.path.display().to_string());
    }
    if let Some((s, out)) = &job {
        doc.notes.push(format!(
            "ranks numbered from the starter core {}",
            s.path.display()
        ));
        doc.job = Some(serde_json::to_value(out)?);
    }
    doc.schema = crate::render::queues::CORE_SCHEMA;
    crate::render::queues::print_doc(&doc, args.common.json)?;
    if !args.common.json
        && let Some(report) = &report
    {
        outln!();
        out!("{report}");
    }
    Ok(queues::exit_code(&doc))
}
