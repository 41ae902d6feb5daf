//! `queues`: the message queues of every rank. The session holds (stops) the ranks only while
//! they are read, then releases them running; what is read is one consistent snapshot per
//! rank.

use anyhow::Context as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use mpir_agent::Agents;
use mpir_mqd::HelperOptions;
use mpir_session::{QueueRead, RankError, ReaderOptions, Session, SessionOptions, chain};

use crate::cmd::agent::{RemoteArgs, local_error, read_settings};
use crate::render::queues::{print_doc, queues_doc};
use crate::{Common, HELPER_ARG, progress, session_options};

/// Exit status when some ranks could not be read (the others are in the output).
pub(crate) const PARTIAL: u8 = 4;

/// Which reader produces the queues.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    /// The native walker when the MPI's layouts are known (it sees more: unexpected messages,
    /// global ranks, groups), else the MPI's own DLL.
    Auto,
    /// The MPI's message-queue DLL (`MPIR_dll_name`, Open MPI's `mpimsgq_dll_locations`, or
    /// `--dll`).
    Dll,
    /// mpir's own walkers of MPICH (ch3, ≥ 4.1 debug queues) and Open MPI (ob1), from the
    /// MPI's debug info or a types sidecar.
    Native,
}

impl From<Engine> for mpir_session::Engine {
    fn from(e: Engine) -> Self {
        match e {
            Engine::Auto => mpir_session::Engine::Auto,
            Engine::Dll => mpir_session::Engine::Dll,
            Engine::Native => mpir_session::Engine::Native,
        }
    }
}

/// Which ranks to read: a starter's whole job, or processes named by pid.
#[derive(clap::Args)]
pub(crate) struct RankArgs {
    /// The starter's pid (mpiexec, orterun, srun…): every rank of its job.
    #[arg(
        long,
        required_unless_present_any = ["pids", "slurm_job"],
        conflicts_with_all = ["pids", "slurm_job"]
    )]
    pub(crate) starter: Option<u32>,
    /// A Slurm job (or job step, `J.S`) whose srun runs on this node: every rank of that step,
    /// as with --starter and that srun's pid.
    #[arg(long = "slurm-job", value_name = "J[.S]", conflicts_with = "pids")]
    pub(crate) slurm_job: Option<mpir_acquire::slurm::StepId>,
    /// Rank processes to read directly (repeat, or separate with commas).
    #[arg(long = "pid", value_delimiter = ',')]
    pub(crate) pids: Vec<u32>,
    /// With --starter: only these ranks (a list and ranges, e.g. `0-3,7,12-`) are held and
    /// read; the others are not part of the result.
    #[arg(
        long = "ranks",
        id = "rank_list",
        value_name = "LIST",
        conflicts_with = "pids"
    )]
    pub(crate) ranks: Option<mpir_types::ranks::RankSet>,
    /// Longest wait for the starter's acquisition, in seconds.
    #[arg(long, default_value_t = 60)]
    pub(crate) timeout: u64,
    /// Longest wait, in seconds, for another tracer (another mpir, a debugger) to let go of
    /// the starter or a rank before it is reported as refused (default 5; 0: at once).
    #[arg(long = "held-wait", value_name = "SECONDS")]
    pub(crate) held_wait: Option<u64>,
}

impl RankArgs {
    /// The session of the ranks named: the starter's job (its selected ranks held from the
    /// acquisition for the first read, not acquired twice), or the pids.
    pub(crate) fn open(&self, options: SessionOptions) -> anyhow::Result<Session> {
        let mut options = options.with_timeout(Duration::from_secs(self.timeout));
        if let Some(secs) = self.held_wait {
            options = options.with_held_wait(Duration::from_secs(secs));
        }
        let held = || {
            let mut options = options.clone().with_hold_from_acquisition(true);
            if let Some(r) = &self.ranks {
                options = options.with_ranks(r.clone());
            }
            options
        };
        match (self.starter, self.slurm_job) {
            (Some(pid), _) => {
                let spin = progress::spinner(&format!("acquiring the job of starter {pid}"));
                let session = Session::attach(pid, held())?;
                spin.finish_and_clear();
                tracing::info!(starter = pid, "job acquired and held");
                Ok(session)
            }
            (None, Some(step)) => {
                let spin = progress::spinner(&format!("acquiring Slurm job {step}"));
                let session = Session::attach_slurm(step, held())?;
                spin.finish_and_clear();
                tracing::info!(slurm_job = %step, "job acquired and held");
                Ok(session)
            }
            (None, None) => Ok(Session::pids(self.pids.iter().copied(), options)?),
        }
    }
}

/// How to read queues: the reader and what it needs.
#[derive(clap::Args)]
pub(crate) struct ReaderArgs {
    /// The message-queue DLL to use instead of the one the MPI names.
    #[arg(long)]
    pub(crate) dll: Option<PathBuf>,
    /// A types sidecar: an object file whose DWARF describes the MPI's internal types, for an
    /// MPI library without debug information that no shipped layout set fits (`mpir layouts`
    /// lists them; a stock Open MPI of a shipped release needs none).
    #[arg(long = "types")]
    pub(crate) types: Vec<PathBuf>,
    /// Which reader to use.
    #[arg(long, value_enum, default_value_t = Engine::Auto)]
    pub(crate) engine: Engine,
    /// Read a stock Open MPI only with the types given (--types) or its debug information:
    /// the layout sets shipped with mpir (`mpir layouts`) are not tried.
    #[arg(long)]
    pub(crate) no_shipped_layouts: bool,
    /// Load the DLL into this process (faster) instead of a helper process (safer: a DLL
    /// that crashes or hangs cannot take the tool, and the ranks it holds, down with it).
    #[arg(long)]
    pub(crate) in_process: bool,
}

impl ReaderArgs {
    /// Checks that the files named exist, and gives the session options: the common ones,
    /// the types sidecars and how to read queues (the out-of-process DLL host is this program
    /// run with [`HELPER_ARG`]).
    pub(crate) fn options(&self, common: &Common) -> anyhow::Result<SessionOptions> {
        if let Some(t) = self.types.iter().find(|t| !t.is_file()) {
            anyhow::bail!("types sidecar {}: no such file", t.display());
        }
        if let Some(d) = self.dll.as_ref().filter(|d| !d.is_file()) {
            anyhow::bail!("DLL {}: no such file", d.display());
        }
        let me = std::env::current_exe().context("cannot find mpir itself")?;
        let mut reader = ReaderOptions::default()
            .with_engine(self.engine.into())
            .with_helper(HelperOptions::default().with_program_args(me, [HELPER_ARG]));
        if let Some(d) = &self.dll {
            reader = reader.with_dll(d.clone());
        }
        if self.no_shipped_layouts {
            reader = reader.without_shipped_layouts();
        }
        if self.in_process {
            #[allow(unsafe_code)]
            // SAFETY: the DLL is the one the MPI library of the target names (or the user
            // gave); in-process hosting is the user's explicit choice (`--in-process`).
            let in_process = unsafe { reader.clone().with_dll_in_process() };
            reader = in_process;
        }
        Ok(self
            .types
            .iter()
            .fold(session_options(common), |o, t| {
                o.with_types_sidecar(t.clone())
            })
            .with_reader_options(reader))
    }

    /// Whether a types sidecar was given (else a missing type is worth a hint).
    pub(crate) fn types_given(&self) -> bool {
        !self.types.is_empty()
    }
}

#[derive(clap::Args)]
pub(crate) struct QueuesArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) ranks: RankArgs,
    #[command(flatten)]
    pub(crate) reader: ReaderArgs,
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

/// Reads the queues of the session's ranks (the other nodes' through `agents`), with a
/// progress bar.
pub(crate) fn read(
    session: &mut Session,
    agents: Option<&mut Agents>,
) -> anyhow::Result<QueueRead> {
    if let Some(agents) = agents {
        let spin = progress::spinner("reading queues on every node");
        let read = agents.queues(session);
        spin.finish_and_clear();
        return read.map_err(local_error);
    }
    let bar = progress::bar(0, "reading queues");
    let read = session.queues_with(|p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
    });
    bar.finish_and_clear();
    let read = read?;
    if let Some(why) = &read.fallback {
        tracing::info!(%why, "no native walker; the MPI's DLL reads the queues");
    }
    Ok(read)
}

/// The hint of the line for [`mpir_session::QueueRead::missing_types`].
pub(crate) const TYPES_HINT: &str = crate::errors::TYPES_HINT;

/// The error when nothing at all could be read because no engine could be set up, or no
/// rank could be stopped (a per-rank reading failure is a partial result instead).
pub(crate) fn nothing_readable(read: &QueueRead) -> anyhow::Result<()> {
    if read.ranks.iter().any(|r| r.queues.is_ok()) {
        return Ok(());
    }
    let errors = || read.ranks.iter().filter_map(|r| r.queues.as_ref().err());
    if let Some(e) = errors().find_map(|e| match e {
        RankError::NoReader(e) => Some(e),
        _ => None,
    }) {
        return Err(anyhow::Error::new(e.clone()));
    }
    if errors().all(|e| matches!(e, RankError::Unreadable(_))) {
        let why: Vec<String> = read
            .ranks
            .iter()
            .filter_map(|r| {
                Some(format!(
                    "pid {}: {}",
                    r.pid,
                    chain(r.queues.as_ref().err()?)
                ))
            })
            .collect();
        anyhow::bail!(
            "no rank could be stopped to read its queues ({})",
            why.join("; ")
        );
    }
    Ok(())
}

pub(crate) fn run(args: &QueuesArgs) -> anyhow::Result<ExitCode> {
    // The queues document shows no stacks: no rank stays stopped for them.
    let options = args.reader.options(&args.common)?.with_queue_stacks(false);
    let mut session = args.ranks.open(options)?;
    let mut settings = read_settings(
        Some(&args.reader),
        &args.common.debug_dirs,
        Duration::from_secs(args.ranks.timeout),
    );
    // As this node's session: the queues document shows no stacks.
    settings.queues_without_stacks = true;
    let mut agents = args.remote.start(&mut session, settings)?;
    let read = read(&mut session, agents.as_mut())?;
    drop(agents);
    if let Some(e) = read.not_exported() {
        // Not a failure to fix: the MPI keeps no queue to read. One line, every rank unread.
        if args.common.json {
            print_doc(&queues_doc(&read, args.reader.types_given()), true)?;
        }
        eprintln!("mpir: error: {e}; `mpir stacks` shows where its ranks wait");
        return Ok(ExitCode::from(PARTIAL));
    }
    if let Some(missing) = read.missing_types() {
        // Nothing the tool can read without the MPI's types: one line, every rank unread.
        if args.common.json {
            print_doc(&queues_doc(&read, args.reader.types_given()), true)?;
        }
        eprintln!(
            "mpir: error: no rank's message queues can be read: {missing} (hint: {TYPES_HINT})"
        );
        return Ok(ExitCode::from(PARTIAL));
    }
    nothing_readable(&read)?;
    let doc = queues_doc(&read, args.reader.types_given());
    print_doc(&doc, args.common.json)?;
    Ok(exit_code(&read))
}

/// 0 when every rank was read, [`PARTIAL`] otherwise.
pub(crate) fn exit_code(read: &QueueRead) -> ExitCode {
    if read.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(PARTIAL)
    }
}
