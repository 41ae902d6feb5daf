//! `report`: one self-contained HTML file of the job's state — the verdict, the merged stacks,
//! the wait-for graph, the pending operations and the job — from a wait-for analysis and a
//! stacks read of the same session (each holding a rank only while it is read), or from JSON
//! documents saved earlier (`--from`). The page is drawn by `mpir_report`; `--html FILE` on
//! `stacks`, `deadlock` and `demo` writes the same page from what those commands read.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use mpir_session::{DeadlockRead, Session, StackOptions, StacksRead};
use mpir_types::stacks::PythonView;
use serde_json::Value;

use crate::args::{ReaderArgs, RemoteArgs};
use crate::cmd::HANG;
use crate::cmd::queues::PARTIAL;
use crate::render::deadlock::CoverageOut;
use crate::render::queues::printed_notes;
use crate::{Common, progress};

#[derive(clap::Args)]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// The starter's pid (mpiexec, orterun, srun…): every rank of its job.
    #[arg(long, conflicts_with_all = ["pids", "slurm_job", "cores", "from"])]
    pub(crate) starter: Option<u32>,
    /// A Slurm job (or job step, `J.S`) whose srun runs on this node.
    #[arg(long = "slurm-job", value_name = "J[.S]", conflicts_with_all = ["pids", "cores", "from"])]
    pub(crate) slurm_job: Option<mpir_acquire::slurm::StepId>,
    /// Rank processes to read directly (repeat, or separate with commas).
    #[arg(long = "pid", id = "pids", value_name = "PID", value_delimiter = ',', conflicts_with_all = ["cores", "from"])]
    pub(crate) pids: Vec<u32>,
    /// Core files: a starter's (it numbers the ranks) and the ranks'.
    #[arg(long = "core", id = "cores", value_name = "CORE", num_args = 1.., conflicts_with = "from")]
    pub(crate) cores: Vec<PathBuf>,
    /// With --core: the executable the cores were dumped from, when a core does not lead to it.
    #[arg(long, requires = "cores")]
    pub(crate) exe: Option<PathBuf>,
    /// JSON documents saved earlier (`mpir … --json > FILE`: job, stacks, deadlock, queues,
    /// a demo document, or a report's own data from `report --json`), instead of reading a job.
    #[arg(long = "from", id = "from", value_name = "FILE", num_args = 1..)]
    pub(crate) from: Vec<PathBuf>,
    /// With --starter: only these ranks (a list and ranges, e.g. `0-3,7,12-`).
    #[arg(long = "ranks", value_name = "LIST", conflicts_with = "pids")]
    pub(crate) ranks: Option<mpir_types::ranks::RankSet>,
    /// Longest wait for the starter's acquisition and for each process to stop, in seconds.
    #[arg(long, default_value_t = 60)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) reader: ReaderArgs,
    /// Snapshots of the queues to compare, and of the stacks (the ranks whose stacks did not
    /// move are marked).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) samples: u32,
    /// Time between snapshots, in milliseconds.
    #[arg(long = "interval", value_name = "MS", default_value_t = 150)]
    pub(crate) interval_ms: u64,
    /// One subtree per thread kind instead of every thread of a rank merged.
    #[arg(long)]
    pub(crate) threads: bool,
    /// Python ranks: keep the interpreter's native frames beside the Python frames.
    #[arg(long, conflicts_with = "no_python")]
    pub(crate) native: bool,
    /// Do not read Python frames.
    #[arg(long = "no-python")]
    pub(crate) no_python: bool,
    /// Where to write the report.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        default_value = "mpir-report.html"
    )]
    pub(crate) output: PathBuf,
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

/// The page of `documents` (each placed by its `schema`), made by this command line.
pub(crate) fn page(documents: Vec<Value>, notes: &[String]) -> anyhow::Result<mpir_report::Report> {
    let mut report = mpir_report::Report::new(std::env::args().collect())
        .with_version(env!("CARGO_PKG_VERSION"));
    for n in notes {
        report = report.with_note(n.clone());
    }
    for d in documents {
        report = report.with_document(d)?;
    }
    Ok(report)
}

/// Writes the page of `documents` to `path` and says so on stderr.
pub(crate) fn write(path: &Path, documents: Vec<Value>, notes: &[String]) -> anyhow::Result<()> {
    emit(&page(documents, notes)?, path, false)
}

/// Writes `report` to `path` (with `json`, its data on stdout too) and says so on stderr.
fn emit(report: &mpir_report::Report, path: &Path, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(&report.envelope())?);
    }
    let bytes = report.write(path)?;
    eprintln!(
        "mpir: report written to {} ({:.1} kB)",
        path.display(),
        bytes as f64 / 1e3
    );
    Ok(())
}

/// Runs the sampled analysis on `session`, with a progress bar.
pub(crate) fn sample(
    session: &mut Session,
    samples: u32,
    interval: Duration,
) -> anyhow::Result<DeadlockRead> {
    let bar = progress::bar(0, "reading queues");
    let progress = |p: mpir_session::Progress<'_>| {
        bar.set_length(u64::from(p.samples) * p.total as u64);
        bar.set_position(u64::from(p.sample - 1) * p.total as u64 + p.done as u64);
    };
    let read = session.deadlock_with(samples, interval, progress);
    bar.finish_and_clear();
    Ok(read?)
}

/// The stacks options of a report (and of a watch's full read).
pub(crate) fn stack_options(
    samples: u32,
    interval: Duration,
    threads: bool,
    python: Option<PythonView>,
) -> StackOptions {
    StackOptions::default()
        .with_samples(samples)
        .with_interval(interval)
        .with_per_thread(threads)
        .with_fold_helpers(true)
        .with_python(python)
}

/// The Python view from `--native` / `--no-python`.
pub(crate) fn python_view(native: bool, no_python: bool) -> Option<PythonView> {
    if no_python {
        None
    } else if native {
        Some(PythonView::WithNative)
    } else {
        Some(PythonView::Interleaved)
    }
}

/// What one full read of a session gives a report: its documents, the verdict's exit status.
pub(crate) struct FullRead {
    pub(crate) documents: Vec<Value>,
    pub(crate) hang: bool,
    pub(crate) complete: bool,
    pub(crate) stacks: Option<StacksRead>,
}

/// Reads `session` for a report: the wait-for analysis over `samples` snapshots, then the
/// stacks over as many (each rank held only while each snapshot is taken), on every node the
/// session reaches.
pub(crate) fn read_all(
    session: &mut Session,
    samples: u32,
    interval: Duration,
    stacks: &StackOptions,
    types_given: bool,
) -> anyhow::Result<FullRead> {
    let mut documents = Vec::new();
    if let Some(job) = mpir_json::job(session) {
        documents.push(job);
    }
    let read = sample(session, samples, interval)?;
    let coverage = CoverageOut::of(&read.coverage, types_given);
    let notes = printed_notes(read.engine.as_ref(), &read.printed);
    let mut doc = crate::render::deadlock::doc(&read, &coverage, &notes, samples, types_given);
    if read.report.is_none() {
        doc.error = Some(coverage.nothing_read(None));
    }
    documents.push(serde_json::to_value(&doc)?);
    let hang = read.report.as_ref().is_some_and(|r| r.has_hang());
    let mut complete =
        coverage.complete && !read.report.as_ref().is_some_and(|r| r.has_unknown_waits());
    let stacks_read = match read_stacks(session, stacks) {
        Ok(s) => {
            documents.push(mpir_json::stacks(&s, source_of(session), interval));
            complete &= s.last().unreached.is_empty();
            Some(s)
        }
        Err(e) => {
            eprintln!(
                "mpir: warning: the report has no stacks: {}",
                crate::errors::report(&e)
            );
            complete = false;
            None
        }
    };
    Ok(FullRead {
        documents,
        hang,
        complete,
        stacks: stacks_read,
    })
}

/// Every selected rank's stacks, on every node the session reaches, with a progress bar on a
/// terminal.
pub(crate) fn read_stacks(
    session: &mut Session,
    options: &StackOptions,
) -> anyhow::Result<StacksRead> {
    let (bar, tell) = progress::stacks_bar(session.reaches_other_nodes());
    let read = session.stacks_with(options, tell);
    bar.finish_and_clear();
    Ok(read?)
}

/// The stacks document's `source` for `session`.
pub(crate) fn source_of(session: &Session) -> &'static str {
    if !session.core_files().is_empty() {
        "cores"
    } else if session.job().is_some() {
        "starter"
    } else {
        "pids"
    }
}

/// Documents saved by `mpir … --json`: each file one document, a demo document giving its
/// job, queues and deadlock parts.
fn saved(files: &[PathBuf]) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read(f).with_context(|| format!("cannot read {}", f.display()))?;
        let v: Value = serde_json::from_slice(&text)
            .with_context(|| format!("{} is not a JSON document", f.display()))?;
        let schema = v.get("schema").and_then(Value::as_str).unwrap_or("");
        if schema.starts_with("mpir.report/") {
            // A report's own data (`mpir report --json`): its documents.
            if let Some(docs) = v.get("documents").and_then(Value::as_object) {
                out.extend(docs.values().cloned());
            }
        } else if schema.starts_with("mpir.demo/") {
            for part in ["job", "queues", "deadlock"] {
                if let Some(p) = v.get(part) {
                    out.push(p.clone());
                }
            }
        } else {
            out.push(v);
        }
    }
    Ok(out)
}

pub(crate) fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    if !args.from.is_empty() {
        let docs = saved(&args.from)?;
        emit(&page(docs, &[])?, &args.output, args.common.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut options = args
        .reader
        .options(&args.common)?
        .with_timeout(Duration::from_secs(args.timeout));
    if let Some(r) = &args.ranks {
        options = options.with_ranks(r.clone());
    }
    let mut session = if let Some(pid) = args.starter {
        let spin = progress::spinner(&format!("acquiring the job of starter {pid}"));
        let s = Session::attach(pid, options.with_hold_from_acquisition(true))?;
        spin.finish_and_clear();
        s
    } else if let Some(step) = args.slurm_job {
        let spin = progress::spinner(&format!("acquiring Slurm job {step}"));
        let s = Session::attach_slurm(step, options.with_hold_from_acquisition(true))?;
        spin.finish_and_clear();
        s
    } else if !args.cores.is_empty() {
        if let Some(e) = &args.exe {
            options = options.with_exe(e.clone());
        }
        Session::cores(&args.cores, options)?
    } else if !args.pids.is_empty() {
        Session::pids(args.pids.iter().copied(), options)?
    } else {
        anyhow::bail!(
            "name the job: --starter PID, --slurm-job J, --pid PID…, --core CORE… or --from FILE…"
        );
    };
    args.remote.reach(&mut session)?;
    let interval = Duration::from_millis(args.interval_ms);
    // A core is one instant: one sample.
    let samples = if args.cores.is_empty() {
        args.samples
    } else {
        1
    };
    let stacks = stack_options(
        samples,
        interval,
        args.threads,
        python_view(args.native, args.no_python),
    );
    let full = read_all(
        &mut session,
        samples,
        interval,
        &stacks,
        args.reader.types_given(),
    )?;
    crate::args::let_go(session);
    emit(&page(full.documents, &[])?, &args.output, args.common.json)?;
    Ok(if full.hang {
        ExitCode::from(HANG)
    } else if !full.complete {
        ExitCode::from(PARTIAL)
    } else {
        ExitCode::SUCCESS
    })
}
