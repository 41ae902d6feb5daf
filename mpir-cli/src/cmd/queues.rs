//! `queues`: the message queues of every rank. Ranks are held (stopped) only while they are
//! read, then released running; what is read is one consistent snapshot per rank.

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use mpir_acquire::live::{self, Acquired};
use mpir_acquire::{GateRelease, RankControl, RankSelection};
use mpir_mqd::native::{self, ProcessInfo, WalkOptions, Walker, WalkerKind};
use mpir_mqd::{CommunicatorQueues, HelperOptions, HostOptions, ProcessSpec};
use mpir_target::Target;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::Tracer;

use crate::render::queues::{QUEUES_SCHEMA, QueuesDoc, RankDoc, comm_doc, print_doc};
use crate::{Common, HELPER_ARG, chain, debug_options, progress};

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

/// Which ranks to read: a starter's whole job, or processes named by pid.
#[derive(clap::Args)]
pub(crate) struct RankArgs {
    /// The starter's pid (mpiexec, orterun…): every rank of its job.
    #[arg(long, required_unless_present = "pids", conflicts_with = "pids")]
    pub(crate) starter: Option<u32>,
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
}

/// How to read queues: the reader and what it needs.
#[derive(clap::Args)]
pub(crate) struct ReaderArgs {
    /// The message-queue DLL to use instead of the one the MPI names.
    #[arg(long)]
    pub(crate) dll: Option<PathBuf>,
    /// A types sidecar: an object file whose DWARF describes the MPI's internal types (for MPI
    /// libraries shipped without debug info, e.g. stock Open MPI:
    /// scripts/openmpi-types-sidecar.sh builds one).
    #[arg(long = "types")]
    pub(crate) types: Vec<PathBuf>,
    /// Which reader to use.
    #[arg(long, value_enum, default_value_t = Engine::Auto)]
    pub(crate) engine: Engine,
    /// Load the DLL into this process (faster) instead of a helper process (safer: a DLL
    /// that crashes or hangs cannot take the tool, and the ranks it holds, down with it).
    #[arg(long)]
    pub(crate) in_process: bool,
}

impl ReaderArgs {
    /// Checks that the files named exist, and gives the debug options for reading ranks (the
    /// common ones plus the types sidecars) and the reader choice.
    pub(crate) fn prepare(
        &self,
        common: &Common,
    ) -> anyhow::Result<(DebugOptions, EngineChoice<'_>)> {
        for t in &self.types {
            if !t.is_file() {
                return Err(anyhow::anyhow!(
                    "types sidecar {}: no such file",
                    t.display()
                ));
            }
        }
        if let Some(d) = self.dll.as_ref().filter(|d| !d.is_file()) {
            return Err(anyhow::anyhow!("DLL {}: no such file", d.display()));
        }
        let mut debug = debug_options(common);
        for t in &self.types {
            debug = debug.with_types_sidecar(t.clone());
        }
        let choice = EngineChoice {
            engine: self.engine,
            dll: self.dll.as_deref(),
            in_process: self.in_process,
            types_given: !self.types.is_empty(),
        };
        Ok((debug, choice))
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
}

/// One rank process to read.
#[derive(Debug, Clone)]
pub(crate) struct RankProc {
    /// Rank in `MPI_COMM_WORLD`, when the job says (`--starter`); `--pid` ranks learn it from
    /// their `MPI_COMM_WORLD` communicator.
    pub(crate) rank: Option<u64>,
    pub(crate) pid: u32,
    pub(crate) image: PathBuf,
    /// Why it cannot be read (not attached, on another host…).
    pub(crate) unreadable: Option<String>,
}

/// The ranks, held stopped until [`Held::release`] (or the drop) lets them run.
pub(crate) enum Held {
    Job(Box<Acquired>),
    Pids(Tracer, Vec<u32>),
}

impl Held {
    /// Releases everything held: ranks running, untraced. Problems as text.
    pub(crate) fn release(self) -> Vec<String> {
        match self {
            Held::Job(mut a) => match a.release() {
                Ok(problems) => problems.iter().map(ToString::to_string).collect(),
                Err(e) => vec![chain(&e)],
            },
            Held::Pids(tracer, pids) => match tracer.detach_many(&pids) {
                Ok(results) => results
                    .into_iter()
                    .zip(&pids)
                    .filter_map(|(r, pid)| r.err().map(|e| format!("pid {pid}: {}", chain(&e))))
                    .collect(),
                Err(e) => vec![chain(&e)],
            },
        }
    }
}

/// Which ranks to hold and how: the acquisition options (debug directories, this node's
/// aliases) and, with a starter, the ranks selected.
pub(crate) struct HoldOptions<'a> {
    pub(crate) base: mpir_acquire::AcquireOptions,
    pub(crate) selection: Option<&'a mpir_types::ranks::RankSet>,
    /// Each pid's start time when it was first held (`--pid` holds again, sample after
    /// sample): a pid whose start time changed names another process now, and is left alone.
    pub(crate) start_times: Option<&'a std::collections::HashMap<u32, u64>>,
}

/// Stops the ranks named by `--starter` (only the selected ones, each proven to be this
/// node's rank of the job by the library) or `--pid`, and lists them.
pub(crate) fn hold_ranks(
    starter: Option<u32>,
    pids: &[u32],
    how: &HoldOptions<'_>,
    timeout: Duration,
) -> anyhow::Result<(Held, Vec<RankProc>)> {
    if let Some(pid) = starter {
        let spin = progress::spinner(&format!("acquiring the job of starter {pid}"));
        let mut options = how
            .base
            .clone()
            .timeout(timeout)
            .hold(true)
            // Reading queues must not change the job: the gate is not ours to open here.
            .gate(GateRelease::Never);
        if let Some(sel) = how.selection {
            options = options.ranks(RankSelection::Only(sel.clone()));
        }
        let acquired = live::attach(pid, options)?;
        spin.finish_and_clear();
        let job = acquired.job();
        let local = live::normalize(job);
        let ranks = job
            .ranks()
            .zip(local)
            // Ranks not selected are not part of the result.
            .filter(|(r, _)| how.selection.is_none_or(|s| s.contains(r.rank)))
            .map(|(r, l)| {
                let unreadable = match job.control(r.rank) {
                    RankControl::Attached { .. } => None,
                    RankControl::Failed { error } => {
                        Some(format!("not attached: {}", chain(error)))
                    }
                    RankControl::Refused { reason } => Some(reason.to_string()),
                    _ if !l.local_host => Some(format!(
                        "remote: on host {} (not this node)",
                        r.host.unwrap_or("?")
                    )),
                    _ => Some("not attached".into()),
                };
                RankProc {
                    rank: Some(r.rank),
                    pid: u32::try_from(r.pid).unwrap_or(0),
                    image: l.executable.unwrap_or_else(|| PathBuf::from("?")),
                    unreadable,
                }
            })
            .collect();
        tracing::info!(starter = pid, "job acquired and held");
        return Ok((Held::Job(Box::new(acquired)), ranks));
    }
    // A pid held before is held again only while it names the same process.
    let same = |pid: u32| {
        how.start_times
            .and_then(|t| t.get(&pid))
            .is_none_or(|&t| mpir_target::live::procfs::start_time(pid).is_ok_and(|now| now == t))
    };
    let (to_hold, changed): (Vec<u32>, Vec<u32>) = pids.iter().partition(|&&p| same(p));
    let tracer = Tracer::new()?;
    let results = tracer.attach_many(&to_hold)?;
    let mut held = Vec::new();
    let mut outcome: std::collections::HashMap<u32, Option<String>> = to_hold
        .iter()
        .zip(results)
        .map(|(&pid, r)| {
            let unreadable = match r {
                Ok(_) => {
                    held.push(pid);
                    None
                }
                Err(e) => Some(chain(&e)),
            };
            (pid, unreadable)
        })
        .collect();
    for pid in changed {
        outcome.insert(
            pid,
            Some(format!(
                "pid {pid} exited (or names another process now); left alone"
            )),
        );
    }
    let ranks = pids
        .iter()
        .map(|&pid| RankProc {
            rank: None,
            pid,
            image: std::fs::read_link(format!("/proc/{pid}/exe"))
                .unwrap_or_else(|_| PathBuf::from("?")),
            unreadable: outcome.get(&pid).cloned().flatten(),
        })
        .collect();
    Ok((Held::Pids(tracer, held), ranks))
}

/// The start time of each held rank's process (read while held), to hold the same processes
/// again later.
pub(crate) fn start_times(ranks: &[RankProc]) -> std::collections::HashMap<u32, u64> {
    ranks
        .iter()
        .filter(|r| r.unreadable.is_none())
        .filter_map(|r| Some((r.pid, mpir_target::live::procfs::start_time(r.pid).ok()?)))
        .collect()
}

/// A source of queues for one rank at a time.
pub(crate) trait Reader {
    /// What the output calls it.
    fn name(&self) -> String;
    /// Every communicator of the rank with its queues, and what the reader could not see.
    fn read(&mut self, rank: &RankProc, target: Rc<dyn Target>) -> Result<RankQueues, String>;
    /// Ends the reader; what the MPI's DLL printed on its own during the whole read (the DLL's
    /// path and the lines, deduplicated and counted), if any.
    fn finish(&mut self) -> Option<(String, mpir_mqd::output::OutputLog)> {
        None
    }
}

/// One rank as a reader saw it.
pub(crate) struct RankQueues {
    pub(crate) communicators: Vec<CommunicatorQueues>,
    /// What is missing from an otherwise good result.
    pub(crate) notes: Vec<String>,
}

/// mpir's native walkers.
pub(crate) struct NativeReader {
    walker: Walker,
}

impl NativeReader {
    /// The walker for the MPI of `probe`.
    pub(crate) fn open(probe: &dyn Target) -> anyhow::Result<Self> {
        let walker = native::detect(probe, &WalkOptions::default())?;
        tracing::info!(kind = ?walker.kind(), "native walker");
        Ok(NativeReader { walker })
    }
}

impl Reader for NativeReader {
    fn name(&self) -> String {
        match self.walker.kind() {
            WalkerKind::MpichCh3 => "native MPICH ch3".into(),
            WalkerKind::MpichDebugq => "native MPICH debug queues".into(),
            WalkerKind::OpenMpiOb1 => "native Open MPI ob1".into(),
            other => format!("native {other:?}"),
        }
    }

    fn read(&mut self, rank: &RankProc, target: Rc<dyn Target>) -> Result<RankQueues, String> {
        let info = rank
            .rank
            .map_or_else(ProcessInfo::default, ProcessInfo::with_global_rank);
        let walk = self.walker.queues(&*target, &info).map_err(|e| chain(&e))?;
        tracing::debug!(hops = walk.hops, reads = walk.target_reads, elapsed = ?walk.elapsed, "walked");
        let mut notes: Vec<String> = walk
            .missing
            .iter()
            .map(|m| format!("not read: {m}"))
            .collect();
        if let Some(e) = &walk.communicators_error {
            notes.push(format!("communicator list cut short: {}", chain(e)));
        }
        Ok(RankQueues {
            communicators: walk.communicators,
            notes,
        })
    }
}

/// The MPI's message-queue DLL, hosted in or out of process.
pub(crate) struct DllReader {
    host: Box<dyn mpir_mqd::QueueHost>,
    types_given: bool,
}

impl DllReader {
    /// Finds the DLL through `probe` (or takes `given`) and hosts it.
    pub(crate) fn open(
        probe: &dyn Target,
        given: Option<&Path>,
        in_process: bool,
        types_given: bool,
    ) -> anyhow::Result<Self> {
        let (path, source) = mpir_mqd::discover_dll(probe, given)?;
        tracing::info!(dll = %path.display(), ?source, "message-queue DLL");
        let host = if in_process {
            // SAFETY: the DLL is the one the MPI library of the target names (or the user
            // gave); in-process hosting is the user's explicit choice (`--in-process`).
            #[allow(unsafe_code)]
            unsafe {
                mpir_mqd::open_in_process(&path, HostOptions::default())
            }
        } else {
            let me = std::env::current_exe().context("cannot find mpir itself")?;
            let helper = HelperOptions::default().with_program_args(me, [HELPER_ARG]);
            mpir_mqd::open_out_of_process(&path, HostOptions::default(), helper)
        }?;
        Ok(DllReader { host, types_given })
    }
}

impl Reader for DllReader {
    fn name(&self) -> String {
        format!("dll {}", self.host.path())
    }

    fn read(&mut self, rank: &RankProc, target: Rc<dyn Target>) -> Result<RankQueues, String> {
        let spec = ProcessSpec {
            image_name: rank.image.display().to_string(),
            target,
            global_rank: rank.rank,
        };
        let hint = |e: mpir_mqd::MqdError| {
            let text = chain(&e);
            if !self.types_given && !mpir_mqd::MqdError::missing_types_in(&e).is_empty() {
                format!(
                    "{text} (the MPI library may lack debug info: give a types sidecar with --types)"
                )
            } else {
                text
            }
        };
        let id = self.host.attach(spec).map_err(hint)?;
        let result = self.host.queues(id).map_err(hint);
        let detached = self.host.detach(id);
        let communicators = result?;
        detached.map_err(|e| chain(&e))?;
        Ok(RankQueues {
            communicators,
            notes: Vec::new(),
        })
    }

    fn finish(&mut self) -> Option<(String, mpir_mqd::output::OutputLog)> {
        let log = self.host.finish_printed();
        (!log.is_empty()).then(|| (self.host.path().to_string(), log))
    }
}

/// Opens a rank's memory, symbols and types (a live process, a core file).
pub(crate) type Opener<'a> = dyn Fn(&RankProc) -> Result<Rc<dyn Target>, String> + 'a;

/// The opener of live ranks.
pub(crate) fn live_opener(
    debug: &DebugOptions,
) -> impl Fn(&RankProc) -> Result<Rc<dyn Target>, String> + '_ {
    move |r| {
        LiveTarget::open(r.pid, debug.clone())
            .map(|t| Rc::new(t) as Rc<dyn Target>)
            .map_err(|e| chain(&e))
    }
}

/// What reading one rank gave: its `MPI_COMM_WORLD` rank (from the job, else from its own
/// `MPI_COMM_WORLD` communicator) and its communicators, or why it could not be read.
pub(crate) type RankRead = Result<(Option<u64>, RankQueues), String>;

/// Reads every readable rank with `reader`, with a progress bar.
fn read_all(reader: &mut dyn Reader, ranks: &[RankProc], open: &Opener<'_>) -> Vec<RankRead> {
    let bar = progress::bar(ranks.len() as u64, "reading queues");
    let mut out = Vec::with_capacity(ranks.len());
    for r in ranks {
        let result = match &r.unreadable {
            Some(why) => Err(why.clone()),
            None => {
                let _span = tracing::info_span!("rank", rank = ?r.rank, pid = r.pid).entered();
                open(r).and_then(|t| reader.read(r, t)).map(|q| {
                    // `--pid`, cores: the rank is this process's rank in MPI_COMM_WORLD.
                    let rank = r.rank.or_else(|| {
                        q.communicators
                            .iter()
                            .find(|c| c.communicator.name == "MPI_COMM_WORLD")
                            .and_then(|c| u64::try_from(c.communicator.local_rank).ok())
                    });
                    (rank, q)
                })
            }
        };
        bar.inc(1);
        out.push(result);
    }
    bar.finish_and_clear();
    out
}

/// How to read queues.
pub(crate) struct EngineChoice<'a> {
    pub(crate) engine: Engine,
    pub(crate) dll: Option<&'a Path>,
    pub(crate) in_process: bool,
    pub(crate) types_given: bool,
}

/// What [`read_queues_raw`] read: the engine's name, one result per rank in order, and what
/// the MPI's DLL printed on its own meanwhile.
pub(crate) struct Read {
    pub(crate) engine: String,
    pub(crate) reads: Vec<RankRead>,
    pub(crate) printed: Option<(String, mpir_mqd::output::OutputLog)>,
}

impl Read {
    /// What the DLL printed, as notes.
    pub(crate) fn notes(&self) -> Vec<String> {
        printed_notes(self.printed.as_ref())
    }
}

/// Notes for what a DLL printed: each distinct line once, with its count.
pub(crate) fn printed_notes(
    printed: Option<&(String, mpir_mqd::output::OutputLog)>,
) -> Vec<String> {
    printed.map_or_else(Vec::new, |(path, log)| {
        log.notes()
            .into_iter()
            .map(|l| format!("the DLL {path} printed: {l}"))
            .collect()
    })
}

/// Reads the queues of `ranks` (opened with `open`) with the engine `choice` names.
pub(crate) fn read_queues_raw(
    choice: &EngineChoice<'_>,
    ranks: &[RankProc],
    open: &Opener<'_>,
) -> anyhow::Result<Read> {
    let probe_rank = ranks
        .iter()
        .find(|r| r.unreadable.is_none())
        .ok_or_else(|| {
            let why: Vec<String> = ranks
                .iter()
                .map(|r| format!("pid {}: {}", r.pid, r.unreadable.as_deref().unwrap_or("?")))
                .collect();
            anyhow::anyhow!(
                "no rank could be stopped to read its queues ({})",
                why.join("; ")
            )
        })?;
    let probe = open(probe_rank).map_err(anyhow::Error::msg)?;
    let dll = || -> anyhow::Result<Box<dyn Reader>> {
        Ok(Box::new(DllReader::open(
            &*probe,
            choice.dll,
            choice.in_process,
            choice.types_given,
        )?))
    };
    let mut reader: Box<dyn Reader> = match choice.engine {
        Engine::Dll => dll()?,
        Engine::Native => Box::new(NativeReader::open(&*probe)?),
        // A DLL named with --dll is what the user wants.
        Engine::Auto if choice.dll.is_some() => dll()?,
        Engine::Auto => match NativeReader::open(&*probe) {
            Ok(native) => Box::new(native),
            Err(why) => {
                tracing::info!(%why, "no native walker; trying the DLL");
                dll().map_err(|e| {
                    e.context(format!(
                        "no native walker ({}), and the MPI's DLL cannot be used",
                        chain(why.as_ref())
                    ))
                })?
            }
        },
    };
    drop(probe);
    let reads = read_all(reader.as_mut(), ranks, open);
    Ok(Read {
        engine: reader.name(),
        reads,
        printed: reader.finish(),
    })
}

/// The queues document of what [`read_queues_raw`] read.
pub(crate) fn queues_doc(engine: String, ranks: &[RankProc], reads: &[RankRead]) -> QueuesDoc {
    let ranks = ranks
        .iter()
        .zip(reads)
        .map(|(r, read)| match read {
            Ok((rank, q)) => RankDoc {
                rank: *rank,
                pid: r.pid,
                source: None,
                error: None,
                notes: q.notes.clone(),
                communicators: q.communicators.iter().map(comm_doc).collect(),
            },
            Err(e) => RankDoc {
                rank: r.rank,
                pid: r.pid,
                source: None,
                error: Some(e.clone()),
                notes: Vec::new(),
                communicators: Vec::new(),
            },
        })
        .collect();
    QueuesDoc {
        schema: QUEUES_SCHEMA,
        engine,
        ranks,
        notes: Vec::new(),
        job: None,
        deadlock: None,
        coverage: None,
    }
}

/// Reads the queues of `ranks` into a document.
pub(crate) fn read_queues(
    choice: &EngineChoice<'_>,
    ranks: &[RankProc],
    open: &Opener<'_>,
) -> anyhow::Result<QueuesDoc> {
    let read = read_queues_raw(choice, ranks, open)?;
    let mut doc = queues_doc(read.engine.clone(), ranks, &read.reads);
    doc.notes.extend(read.notes());
    Ok(doc)
}

pub(crate) fn run(args: &QueuesArgs) -> anyhow::Result<ExitCode> {
    let (debug, choice) = args.reader.prepare(&args.common)?;
    let (held, ranks) = hold_ranks(
        args.ranks.starter,
        &args.ranks.pids,
        &HoldOptions {
            base: crate::acquire_options(&args.common).debug(debug.clone()),
            selection: args.ranks.ranks.as_ref(),
            start_times: None,
        },
        Duration::from_secs(args.ranks.timeout),
    )?;
    let result = read_queues(&choice, &ranks, &live_opener(&debug));
    let problems = held.release();
    let mut doc = result?;
    doc.notes.extend(
        problems
            .into_iter()
            .map(|p| format!("while releasing: {p}")),
    );
    print_doc(&doc, args.common.json)?;
    Ok(exit_code(&doc))
}

/// 0 when every rank was read, [`PARTIAL`] otherwise.
pub(crate) fn exit_code(doc: &QueuesDoc) -> ExitCode {
    if doc.ranks.iter().any(|r| r.error.is_some()) {
        ExitCode::from(PARTIAL)
    } else {
        ExitCode::SUCCESS
    }
}
