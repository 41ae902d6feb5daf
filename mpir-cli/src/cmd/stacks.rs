//! `stacks`: every rank's stacks, merged into one call-prefix tree like STAT. A live rank is
//! stopped only for its own snapshot (registers and stack bytes copied, then let go) and
//! unwound offline; core files are read from their threads' registers. With `--samples N`
//! the ranks whose stacks did not move across the samples are marked. Python ranks show their
//! Python frames in place of the interpreter's (`--native` keeps both, `--no-python` neither).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mpir_session::{Session, StackOptions};
use mpir_types::stacks::PythonView;

use crate::args::RemoteArgs;
use crate::render::stacks::{StacksDoc, text};
use crate::{Common, progress, session_options};

/// Exit status when some ranks could not be read (the others are in the output).
const PARTIAL: u8 = crate::cmd::queues::PARTIAL;

#[derive(clap::Args)]
pub(crate) struct StacksArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// The starter's pid (mpiexec, orterun…): every rank of its job, each proven to be the
    /// table's rank before it is touched.
    #[arg(
        long,
        required_unless_present_any = ["pids", "cores", "slurm_job"],
        conflicts_with_all = ["pids", "cores", "slurm_job"]
    )]
    pub(crate) starter: Option<u32>,
    /// A Slurm job (or job step, `J.S`) whose srun runs on this node: as --starter with that
    /// srun's pid.
    #[arg(long = "slurm-job", value_name = "J[.S]", conflicts_with_all = ["pids", "cores"])]
    pub(crate) slurm_job: Option<mpir_acquire::slurm::StepId>,
    /// Rank processes to read directly (repeat, or separate with commas); numbered by their
    /// position.
    #[arg(
        long = "pid",
        id = "pids",
        value_name = "PID",
        value_delimiter = ',',
        conflicts_with = "cores"
    )]
    pub(crate) pids: Vec<u32>,
    /// Core files: a starter's (it numbers the ranks) and the ranks'.
    #[arg(long = "core", id = "cores", value_name = "CORE", num_args = 1..)]
    pub(crate) cores: Vec<PathBuf>,
    /// With --core: the executable the cores were dumped from, when a core does not lead to it.
    #[arg(long)]
    pub(crate) exe: Option<PathBuf>,
    /// Only these ranks (a list and ranges, e.g. `0-3,7,12-`).
    #[arg(long = "ranks", value_name = "LIST", conflicts_with = "pids")]
    pub(crate) ranks: Option<mpir_types::ranks::RankSet>,
    /// One subtree per thread kind (main thread, named threads) instead of every thread of a
    /// rank merged.
    #[arg(long)]
    pub(crate) threads: bool,
    /// Show runtime helper threads (progress threads of libevent, PMIx, UCX…) in full instead
    /// of one folded node per kind.
    #[arg(long)]
    pub(crate) helpers: bool,
    /// Python ranks: keep the interpreter's own native frames beside the Python frames they
    /// run (by default each `_PyEval_EvalFrameDefault` becomes its Python frames and the
    /// interpreter's call machinery between them is left out).
    #[arg(long, conflicts_with = "no_python")]
    pub(crate) native: bool,
    /// Do not read Python frames: native frames only (the interpreter's memory is not read).
    #[arg(long = "no-python")]
    pub(crate) no_python: bool,
    /// Samples to compare: ranks whose stacks are the same in every sample are marked.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) samples: u32,
    /// Time between samples, in milliseconds.
    #[arg(long = "interval", value_name = "MS", default_value_t = 150)]
    pub(crate) interval_ms: u64,
    /// Print the tree in Graphviz DOT, STAT's 2D layout (`| dot -Tsvg > stacks.svg`).
    #[arg(long, conflicts_with_all = ["json", "folded"])]
    pub(crate) dot: bool,
    /// Print folded stacks for flamegraph tools (`| flamegraph.pl > stacks.svg`).
    #[arg(long, conflicts_with = "json")]
    pub(crate) folded: bool,
    /// Also write the stacks as a self-contained HTML report (the collapsible merged tree,
    /// searchable by function or rank) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
    /// Longest wait for the starter's acquisition and for each process to stop, in seconds.
    #[arg(long, default_value_t = 60)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

pub(crate) fn run(args: &StacksArgs) -> anyhow::Result<ExitCode> {
    let mut options = session_options(&args.common).with_timeout(Duration::from_secs(args.timeout));
    if let Some(r) = &args.ranks {
        options = options.with_ranks(r.clone());
    }
    let (mut session, source) = if let Some(pid) = args.starter {
        let spin = progress::spinner(&format!("acquiring the job of starter {pid}"));
        // The acquisition holds the selected ranks (proven), and the first read takes them.
        let session = Session::attach(pid, options.with_hold_from_acquisition(true))?;
        spin.finish_and_clear();
        (session, "starter")
    } else if let Some(step) = args.slurm_job {
        let spin = progress::spinner(&format!("acquiring Slurm job {step}"));
        let session = Session::attach_slurm(step, options.with_hold_from_acquisition(true))?;
        spin.finish_and_clear();
        (session, "starter")
    } else if !args.cores.is_empty() {
        if let Some(e) = &args.exe {
            options = options.with_exe(e.clone());
        }
        (Session::cores(&args.cores, options)?, "cores")
    } else {
        (Session::pids(args.pids.iter().copied(), options)?, "pids")
    };
    let interval = Duration::from_millis(args.interval_ms);
    let stack_options = StackOptions::default()
        .with_samples(args.samples)
        .with_interval(interval)
        .with_per_thread(args.threads)
        .with_fold_helpers(!args.helpers)
        .with_python(if args.no_python {
            None
        } else if args.native {
            Some(PythonView::WithNative)
        } else {
            Some(PythonView::Interleaved)
        });
    args.remote.reach(&mut session)?;
    let read = crate::cmd::report::read_stacks(&mut session, &stack_options)?;
    let job = mpir_json::job(&session);
    crate::args::let_go(session);
    if let Some(release) = &read.proof_release {
        for p in &release.problems {
            eprintln!(
                "mpir: warning: while letting the ranks go: {}",
                mpir_session::chain(p)
            );
        }
    }
    if let Some(path) = &args.html {
        let doc = mpir_json::stacks(&read, source, interval);
        crate::cmd::report::write(path, job.into_iter().chain([doc]).collect(), &[])?;
    }
    let tree = read.tree();
    if args.dot {
        out!("{}", tree.to_dot());
    } else if args.folded {
        out!("{}", tree.to_folded());
    } else if args.common.json {
        let doc = StacksDoc::of(&read, source, interval);
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        out!("{}", text(&read, source));
    }
    Ok(if read.last().unreached.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(PARTIAL)
    })
}
