//! `queues`: the message queues of every rank. Ranks are held (stopped) only while they are
//! read, then released running; what is read is one consistent snapshot per rank.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use mpir_acquire::live::{self, Acquired};
use mpir_acquire::{GateRelease, RankControl, RankSelection};
use mpir_mqd::native::{self, ProcessInfo, WalkOptions, Walker, WalkerKind};
use mpir_mqd::{
    CommOrigin, CommunicatorQueues, HelperOptions, HostOptions, Hosting, ProcessSpec, Queue,
};
use mpir_target::Target;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::Tracer;
use mpir_types::mqd::{OpClass, OpStatus, Operation, Peer};
use serde::Serialize;

use crate::{Common, HELPER_ARG, chain, debug_options, progress};

/// `schema` of a queues document (docs/cli-json.md).
pub(crate) const QUEUES_SCHEMA: &str = "mpir.queues/1";

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
    ) -> Result<(DebugOptions, EngineChoice<'_>), String> {
        for t in &self.types {
            if !t.is_file() {
                return Err(format!("types sidecar {}: no such file", t.display()));
            }
        }
        if let Some(d) = self.dll.as_ref().filter(|d| !d.is_file()) {
            return Err(format!("DLL {}: no such file", d.display()));
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
                Ok(problems) => problems,
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
) -> Result<(Held, Vec<RankProc>), String> {
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
        let acquired = live::attach(pid, options).map_err(|e| chain(&e))?;
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
                    RankControl::Failed { reason } => Some(format!("not attached: {reason}")),
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
    let tracer = Tracer::new().map_err(|e| chain(&e))?;
    let results = tracer.attach_many(&to_hold).map_err(|e| chain(&e))?;
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
    pub(crate) fn open(probe: &dyn Target) -> Result<Self, String> {
        let walker = native::detect(probe, &WalkOptions::default()).map_err(|e| chain(&e))?;
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
    ) -> Result<Self, String> {
        let (path, source) = mpir_mqd::discover_dll(probe, given).map_err(|e| chain(&e))?;
        tracing::info!(dll = %path.display(), ?source, "message-queue DLL");
        let hosting = if in_process {
            Hosting::InProcess
        } else {
            let me =
                std::env::current_exe().map_err(|e| format!("cannot find mpir itself: {e}"))?;
            Hosting::OutOfProcess(HelperOptions::default().with_program_args(me, [HELPER_ARG]))
        };
        // SAFETY: the DLL is the one the MPI library of the target names (or the user gave);
        // in-process hosting is the user's explicit choice (`--in-process`).
        #[allow(unsafe_code)]
        let host = unsafe { mpir_mqd::open_host(&path, hosting, HostOptions::default()) }
            .map_err(|e| chain(&e))?;
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
            global_rank: rank.rank.and_then(|r| i32::try_from(r).ok()).unwrap_or(-1),
        };
        let hint = |e: mpir_mqd::MqdError| {
            let text = chain(&e);
            if !self.types_given && text.contains("type") {
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

// ---------------------------------------------------------------------------------------------
// Output.

#[derive(Serialize)]
pub(crate) struct QueuesDoc {
    pub(crate) schema: &'static str,
    pub(crate) engine: String,
    pub(crate) ranks: Vec<RankDoc>,
    pub(crate) notes: Vec<String>,
    /// `core` with a starter's core: the job document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) job: Option<serde_json::Value>,
    /// `core`: the wait-for analysis of this one snapshot (absent when no core was read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) deadlock: Option<mpir_types::deadlock::DeadlockReport>,
    /// `core`: which ranks the analysis covers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) coverage: Option<crate::cmd::deadlock::Coverage>,
}

#[derive(Serialize, Clone)]
pub(crate) struct RankDoc {
    pub(crate) rank: Option<u64>,
    pub(crate) pid: u32,
    /// `core`: the core file read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<String>,
    pub(crate) error: Option<String>,
    /// What the reader could not see in an otherwise good result.
    pub(crate) notes: Vec<String>,
    pub(crate) communicators: Vec<CommDoc>,
}

#[derive(Serialize, Clone)]
pub(crate) struct CommDoc {
    pub(crate) name: String,
    pub(crate) id: u64,
    /// An id every member shares (MPICH's context id, Open MPI's cid), when known.
    pub(crate) context_id: Option<u64>,
    /// "predefined", "user", "internal" (made by the MPI for itself) or "unknown".
    pub(crate) origin: &'static str,
    pub(crate) size: i64,
    pub(crate) local_rank: i64,
    /// World rank of each member, by local rank, when known.
    pub(crate) group: Option<Vec<i64>>,
    /// Queues the reader could not give (no information, or failed part way).
    pub(crate) missing: Vec<String>,
    pub(crate) operations: Vec<OpDoc>,
}

#[derive(Serialize, Clone)]
pub(crate) struct OpDoc {
    pub(crate) class: OpClass,
    pub(crate) status: OpStatus,
    pub(crate) peer_local: Option<u64>,
    pub(crate) any_source: bool,
    pub(crate) peer_global: Option<u64>,
    pub(crate) tag: Option<i64>,
    pub(crate) any_tag: bool,
    pub(crate) length_bytes: Option<u64>,
    pub(crate) length_elements: Option<u64>,
    pub(crate) buffer: String,
    pub(crate) system_buffer: bool,
    pub(crate) actual: Option<ActualDoc>,
    pub(crate) extra_text: Vec<String>,
}

#[derive(Serialize, Clone)]
pub(crate) struct ActualDoc {
    pub(crate) peer_local: Option<u64>,
    pub(crate) peer_global: Option<u64>,
    pub(crate) tag: i64,
    pub(crate) length_bytes: Option<u64>,
}

fn op_doc(op: &Operation) -> OpDoc {
    let (peer_local, any_source) = match op.peer_local {
        Peer::Any => (None, true),
        Peer::Rank(r) => (Some(r), false),
        _ => (None, false),
    };
    OpDoc {
        class: op.class,
        status: op.status,
        peer_local,
        any_source,
        peer_global: op.peer_global,
        tag: op.tag,
        any_tag: op.tag.is_none() && op.class == OpClass::Receive,
        length_bytes: op.length.bytes,
        length_elements: op.length.elements,
        buffer: format!("{:#x}", op.buffer),
        system_buffer: op.system_buffer,
        actual: op.actual.map(|a| ActualDoc {
            peer_local: a.local_rank,
            peer_global: a.global_rank,
            tag: a.tag,
            length_bytes: a.length.bytes,
        }),
        extra_text: op.extra_text.clone(),
    }
}

pub(crate) fn comm_doc(c: &CommunicatorQueues) -> CommDoc {
    let mut operations = Vec::new();
    let mut missing = Vec::new();
    for class in OpClass::ALL {
        let label = match class {
            OpClass::Send => "send",
            OpClass::Receive => "receive",
            OpClass::Unexpected => "unexpected",
        };
        match c.queue(class) {
            Queue::NoInformation => missing.push(format!("{label}: no information")),
            Queue::Failed { error, .. } => missing.push(format!("{label}: {}", chain(error))),
            _ => {}
        }
        operations.extend(c.queue(class).operations().iter().map(op_doc));
    }
    CommDoc {
        name: c.communicator.name.clone(),
        id: c.communicator.unique_id,
        context_id: c.context_id,
        origin: match c.origin {
            CommOrigin::Predefined => "predefined",
            CommOrigin::User => "user",
            CommOrigin::Internal => "internal",
            _ => "unknown",
        },
        size: c.communicator.size,
        local_rank: c.communicator.local_rank,
        group: c.group.clone(),
        missing,
        operations,
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

fn print_table(doc: &QueuesDoc) {
    outln!("message queues ({}), {} ranks", doc.engine, doc.ranks.len());
    // Notes every read rank shares are said once, at the end.
    let read: Vec<&RankDoc> = doc.ranks.iter().filter(|r| r.error.is_none()).collect();
    let common: Vec<&String> = read.first().map_or(Vec::new(), |first| {
        first
            .notes
            .iter()
            .filter(|n| read.iter().all(|r| r.notes.contains(n)))
            .collect()
    });
    for r in &doc.ranks {
        let rank = r.rank.map_or("?".to_string(), |r| r.to_string());
        let from = r
            .source
            .as_deref()
            .map_or(String::new(), |s| format!(", core {s}"));
        match &r.error {
            Some(e) => outln!("rank {rank} (pid {}{from}): not read: {e}", r.pid),
            None => outln!("rank {rank} (pid {}{from}):", r.pid),
        }
        for n in r.notes.iter().filter(|n| !common.contains(n)) {
            outln!("  ({n})");
        }
        for c in &r.communicators {
            let name = if c.name.is_empty() {
                "(unnamed)"
            } else {
                &c.name
            };
            let origin = if c.origin == "internal" {
                ", internal"
            } else {
                ""
            };
            outln!(
                "  {name} (size {}, local rank {}{origin}): {} operations",
                c.size,
                c.local_rank,
                c.operations.len()
            );
            for m in &c.missing {
                outln!("    ({m})");
            }
            for o in &c.operations {
                let peer = match (o.any_source, o.peer_local, o.peer_global) {
                    (true, _, _) => "any".to_string(),
                    (false, Some(l), Some(g)) if l != g => format!("{l} (world {g})"),
                    (false, Some(l), _) => l.to_string(),
                    _ => "?".to_string(),
                };
                let tag = o.tag.map_or("any".to_string(), |t| t.to_string());
                let len = match (o.length_bytes, o.length_elements) {
                    (Some(b), _) => format!("{b} bytes"),
                    (None, Some(e)) => format!("{e} elements"),
                    _ => "? bytes".into(),
                };
                let class = match o.class {
                    OpClass::Send => "send      to  ",
                    OpClass::Receive => "receive   from",
                    OpClass::Unexpected => "unexpected from",
                };
                let status = match o.status {
                    OpStatus::Pending => "pending".to_string(),
                    OpStatus::Matched => "matched".to_string(),
                    OpStatus::Complete => "complete".to_string(),
                    OpStatus::Unknown(v) => format!("status {v}"),
                };
                outln!("    {class} {peer:<12} tag {tag:<8} {len:<16} {status}");
            }
        }
    }
    for n in common {
        outln!("note (every rank): {n}");
    }
    for n in &doc.notes {
        outln!("note: {n}");
    }
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
) -> Result<Read, String> {
    let probe_rank = ranks
        .iter()
        .find(|r| r.unreadable.is_none())
        .ok_or_else(|| {
            let why: Vec<String> = ranks
                .iter()
                .map(|r| format!("pid {}: {}", r.pid, r.unreadable.as_deref().unwrap_or("?")))
                .collect();
            format!(
                "no rank could be stopped to read its queues ({})",
                why.join("; ")
            )
        })?;
    let probe = open(probe_rank)?;
    let dll = || -> Result<Box<dyn Reader>, String> {
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
                dll().map_err(|e| format!("{e} (and no native walker: {why})"))?
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
) -> Result<QueuesDoc, String> {
    let read = read_queues_raw(choice, ranks, open)?;
    let mut doc = queues_doc(read.engine.clone(), ranks, &read.reads);
    doc.notes.extend(read.notes());
    Ok(doc)
}

pub(crate) fn run(args: &QueuesArgs) -> Result<ExitCode, String> {
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

/// Prints `doc` as JSON or as the table.
pub(crate) fn print_doc(doc: &QueuesDoc, json: bool) -> Result<(), String> {
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?
        );
    } else {
        print_table(doc);
    }
    Ok(())
}

/// 0 when every rank was read, [`PARTIAL`] otherwise.
pub(crate) fn exit_code(doc: &QueuesDoc) -> ExitCode {
    if doc.ranks.iter().any(|r| r.error.is_some()) {
        ExitCode::from(PARTIAL)
    } else {
        ExitCode::SUCCESS
    }
}
