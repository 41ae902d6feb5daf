//! [`Session`]: a source of ranks (a starter, a launch, pids, core files) and what was learnt
//! of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::rc::Rc;

use mpir_acquire::live::{self, Acquired};
use mpir_acquire::{GateRelease, Job, RankSelection};
use mpir_target::corefile::{CoreTarget, Truncation};
use mpir_target::live::LiveTarget;
use mpir_target::proctable::{ProcTable, ReadOptions, read_proctable};
use mpir_types::mpir::MpirFlags;

use crate::error::{SessionError, Unreadable, chain};
use crate::known::{Announced, Known};
use crate::nodes::{NodeState, OtherNodes};
use crate::options::SessionOptions;

/// One MPI job (or a set of processes, or core files) and the way to read it: see the
/// [crate documentation](crate) for the flow.
///
/// A session is not `Send`: the targets it opens are `Rc`s, and the ranks it holds belong to a
/// tracer thread it owns. Dropping a session releases whatever it still holds.
pub struct Session {
    /// The job's ranks on other nodes, read through these ([`Session::reach_other_nodes`]).
    /// First, so that they are let go (their agents told goodbye) before anything else.
    pub(crate) others: Option<Box<dyn crate::nodes::OtherNodes>>,
    pub(crate) options: SessionOptions,
    pub(crate) source: Source,
    /// Ranks as the first hold found them: from then on each hold takes these again, by pid,
    /// only while each pid still names the process first held (its start time).
    pub(crate) known: Option<Vec<Known>>,
    /// Opened live targets by (pid, start time): images are parsed once for every hold (and
    /// every stack sample).
    pub(crate) targets: HashMap<(u32, u64), Rc<LiveTarget>>,
    /// ELF files opened once for every rank that maps them.
    pub(crate) files: std::sync::Arc<mpir_target::debuginfo::FileCache>,
    /// CFI, function symbols and DWARF lines once per build-id, for every rank's stacks.
    pub(crate) symbols: mpir_target::unwind::SymbolCache,
    /// Why the symbol store in the options is not used, if it is not.
    pub(crate) store_refused: Option<mpir_target::debuginfo::StoreError>,
    /// Ranks read through their cooperative channel, by pid (checked by start time on use).
    pub(crate) coop: HashMap<u32, crate::channel::CoopRank>,
    /// The job's table was built from its ranks' announcements: the starter, refused.
    pub(crate) announced: Option<Announced>,
    /// How a proof hold made outside a read let its ranks go, for the next read to report.
    pub(crate) proof_release: Option<crate::release::ReleaseReport>,
}

/// The kernel's refusal somewhere in `e`'s causes.
fn denial_in<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a mpir_types::access::AccessDenial> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(d) = c
            .downcast_ref::<mpir_target::TargetError>()
            .and_then(mpir_target::TargetError::denial)
        {
            return Some(d);
        }
        cause = c.source();
    }
    None
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("source", &self.source_kind())
            .field("options", &self.options)
            .field("other_nodes", &self.other_nodes())
            .finish_non_exhaustive()
    }
}

/// Where the ranks come from.
pub(crate) enum Source {
    /// A starter: attached (`child` is `None`) or launched.
    Starter {
        pid: u32,
        job: Box<Job>,
        /// An acquisition whose ranks are still held (`with_hold_from_acquisition`): the first
        /// hold takes it.
        held: Option<Box<Acquired>>,
        child: Option<Child>,
        /// Attached to a process that exports MPI2DD too: its traversal and where it
        /// disagrees with MPIR's table.
        mpi2dd: Option<Box<Mpi2ddJob>>,
    },
    /// A process that exports MPI2DD only: its traversal (there is no proven rank to hold).
    Mpi2dd(Box<Mpi2ddJob>),
    /// Processes named by pid.
    Pids(Vec<u32>),
    /// Core files.
    Cores(Box<Cores>),
}

/// A job as MPI2DD describes it (from any rank, directory or metadirectory process).
#[derive(Debug)]
#[non_exhaustive]
pub struct Mpi2ddJob {
    /// Every world, directory and spawn the traversal found.
    pub traversal: mpi2dd::traverse::Traversal,
    /// With MPIR too: where MPIR's table and MPI2DD's root world disagree, rank by rank
    /// (empty when they agree).
    pub mismatches: Vec<String>,
}

/// The core files of a session.
pub(crate) struct Cores {
    pub(crate) starter: Option<StarterCore>,
    pub(crate) ranks: Vec<RankCore>,
    pub(crate) info: Vec<CoreInfo>,
}

/// A rank's core file.
pub(crate) struct RankCore {
    pub(crate) path: PathBuf,
    pub(crate) target: Rc<CoreTarget>,
    pub(crate) pid: u32,
    pub(crate) image: PathBuf,
}

/// A starter's core file: the job's process table as it was when the core was dumped.
#[derive(Debug)]
#[non_exhaustive]
pub struct StarterCore {
    /// The core file.
    pub path: PathBuf,
    /// Its process table (with entries: that is what makes it a starter's).
    pub table: ProcTable,
    /// The MPIR flags its starter defines.
    pub flags: MpirFlags,
}

/// What a core file given to [`Session::cores`] is.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CoreInfo {
    /// The core file.
    pub path: PathBuf,
    /// Whether it is shorter than its segments say (memory in the cut part reads as
    /// unavailable).
    pub truncation: Option<Truncation>,
    /// Why it is not a starter's core (`None` for the starter's): its table is empty, or
    /// cannot be read (see also `executable_gone` and `truncation`, often the cause).
    pub not_starter: Option<String>,
    /// The executable the core names, when that file is gone and no executable was given
    /// ([`SessionOptions::with_exe`] names it): symbols cannot be read without it.
    pub executable_gone: Option<PathBuf>,
}

/// Threads [`Session::open_live_many`] opens processes on, at most.
const OPEN_THREADS: usize = 4;

impl Session {
    fn new(options: SessionOptions, source: Source) -> Session {
        let files = std::sync::Arc::new(mpir_target::debuginfo::FileCache::new());
        Session::with_files(options, source, files)
    }

    /// A session whose files are parsed into `files` (shared with its acquisition: a
    /// starter and its ranks map the same libraries, each parsed once).
    fn with_files(
        options: SessionOptions,
        source: Source,
        files: std::sync::Arc<mpir_target::debuginfo::FileCache>,
    ) -> Session {
        let options = options.with_store_opened();
        let symbols = match &options.acquire.debug.symbol_store {
            Some(store) => mpir_target::unwind::SymbolCache::with_store(store.clone()),
            None => mpir_target::unwind::SymbolCache::new(),
        };
        let store_refused = options.store_refused.clone();
        Session {
            others: None,
            options,
            source,
            known: None,
            targets: HashMap::new(),
            files,
            symbols,
            store_refused,
            coop: HashMap::new(),
            announced: None,
            proof_release: None,
        }
    }

    /// Writes what this session's lookups found since the last save to the symbol store (a
    /// no-op without one): after each read, once every rank runs again.
    pub(crate) fn save_answers(&self) {
        self.symbols.save();
        self.files.save_symbol_answers();
    }

    /// The symbol store in use ([`SessionOptions::with_symbol_store`]), if any: its
    /// [`problems`](mpir_target::debuginfo::SymbolStore::problems) also list files written as
    /// the session's files are let go, after the session is dropped.
    pub fn symbol_store(&self) -> Option<mpir_target::debuginfo::SymbolStore> {
        self.symbols.store().cloned()
    }

    /// Why the symbol store ([`SessionOptions::with_symbol_store`]) is not used, or some of
    /// its files were not read or written: the stacks are the same, only slower to read.
    pub fn symbol_store_problems(&self) -> Vec<mpir_target::debuginfo::StoreError> {
        let used = self
            .symbols
            .store()
            .map(|s| s.problems())
            .unwrap_or_default();
        self.store_refused.iter().cloned().chain(used).collect()
    }

    /// When the kernel refused this tool the starter and the job's table was built from its
    /// ranks' announcements on their cooperative channels: the starter and the refusal.
    pub fn announced(&self) -> Option<&Announced> {
        self.announced.as_ref()
    }

    /// The target opened earlier for the process `(pid, start time)`, while its images are
    /// current: a rank that loaded or unloaded libraries since (an MPI's components, opened
    /// in `MPI_Init` after a launch caught the rank early) is opened again, so that its
    /// symbols are looked up in what it maps now. The files stay parsed in the shared cache.
    pub(crate) fn current_target(&self, key: (u32, u64)) -> Option<Rc<LiveTarget>> {
        self.targets
            .get(&key)
            .filter(|t| !t.images().maps_changed())
            .map(Rc::clone)
    }

    /// Opens live process `pid` for reading, its images' files shared with every other rank
    /// of the session.
    pub(crate) fn open_live(
        files: &std::sync::Arc<mpir_target::debuginfo::FileCache>,
        pid: u32,
        debug: mpir_target::debuginfo::DebugOptions,
    ) -> Result<LiveTarget, mpir_target::TargetError> {
        LiveTarget::open_with_cache(pid, debug, std::sync::Arc::clone(files))
    }

    /// Opens every process of `pids` as [`open_live`](Session::open_live) does, on up to
    /// [`OPEN_THREADS`] threads: most of the cost is the kernel formatting each process's
    /// `/proc/PID/maps` and the `stat` of each mapped file, which run in parallel; the files'
    /// parsing is shared through `files` (each file parsed once, whichever thread comes first).
    /// Results come in the order of `pids`.
    pub(crate) fn open_live_many(
        files: &std::sync::Arc<mpir_target::debuginfo::FileCache>,
        pids: &[u32],
        debug: &mpir_target::debuginfo::DebugOptions,
    ) -> Vec<Result<LiveTarget, mpir_target::TargetError>> {
        let threads = std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .clamp(1, OPEN_THREADS)
            .min(pids.len());
        if threads <= 1 {
            return pids
                .iter()
                .map(|&pid| Session::open_live(files, pid, debug.clone()))
                .collect();
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut results: Vec<(usize, Result<LiveTarget, mpir_target::TargetError>)> =
            std::thread::scope(|scope| {
                let workers: Vec<_> = (0..threads)
                    .map(|_| {
                        scope.spawn(|| {
                            let mut mine = Vec::new();
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(&pid) = pids.get(i) else { break };
                                mine.push((i, Session::open_live(files, pid, debug.clone())));
                            }
                            mine
                        })
                    })
                    .collect();
                workers
                    .into_iter()
                    .flat_map(|w| match w.join() {
                        Ok(mine) => mine,
                        // A panic while opening is a bug; re-raise it on the caller's thread
                        // (the session's guards release what is held).
                        Err(panic) => std::panic::resume_unwind(panic),
                    })
                    .collect()
            });
        results.sort_unstable_by_key(|(i, _)| *i);
        results.into_iter().map(|(_, r)| r).collect()
    }

    /// Attach mode on a Slurm job step named by id (`J` or `J.S`, [`StepId`]): the `srun` of
    /// that step on this node ([`live::find_srun`]: the parent `srun`, never its shepherd),
    /// then [`Session::attach`].
    ///
    /// [`StepId`]: mpir_acquire::slurm::StepId
    ///
    /// # Errors
    /// [`SessionError::SlurmStep`] when the job does not exist, has no `srun` on this node
    /// (it runs elsewhere), or has several steps here and none was named; then as
    /// [`Session::attach`].
    pub fn attach_slurm(
        step: mpir_acquire::slurm::StepId,
        options: SessionOptions,
    ) -> Result<Session, SessionError> {
        let pid = live::find_srun(step, &options.acquire.debug, options.acquire.timeout).map_err(
            |source| SessionError::SlurmStep {
                step,
                source: Box::new(source),
            },
        )?;
        Session::attach(pid, options)
    }

    /// Attach mode: reads the job of the running process `pid` and lets it run: a starter
    /// (`mpiexec`, `orterun`…) through MPIR, or any rank, directory or metadirectory of a job
    /// through MPI2DD ([`Session::mpi2dd`]), or both, compared. No rank is touched (unless
    /// the job is spawned while we wait and its ranks wait at `MPIR_debug_gate`, which the
    /// spec says to open, or [`SessionOptions::with_hold_from_acquisition`] asks to hold the
    /// selected ranks now). Ranks are stopped only by [`hold`](Session::hold), each proven
    /// then to be the table's rank.
    ///
    /// # Errors
    /// [`SessionError::Acquire`] when `pid` exports neither interface, or acquisition fails.
    pub fn attach(pid: u32, options: SessionOptions) -> Result<Session, SessionError> {
        let options = options.with_store_opened();
        let files = std::sync::Arc::new(mpir_target::debuginfo::FileCache::new());
        let mut acquire = options
            .acquire
            .clone()
            .with_hold(options.hold_from_acquisition)
            .with_files(std::sync::Arc::clone(&files));
        if options.hold_from_acquisition {
            // Reading must not change the job: the gate is not ours to open.
            acquire = acquire.with_gate(GateRelease::Never);
            if let Some(r) = &options.ranks {
                acquire = acquire.with_ranks(RankSelection::Only(r.clone()));
            }
        }
        let any = match live::attach_any(pid, acquire) {
            Ok(any) => any,
            Err(source) => {
                // The kernel refuses this tool the starter for good: its ranks may announce
                // themselves on their cooperative channels (issue 32).
                let denied = denial_in(&source).filter(|d| !d.is_transient()).cloned();
                if let Some(denial) = denied
                    && let Ok(known) = crate::channel::announced_job(pid)
                {
                    let pids = known.iter().map(|k| k.pid).collect();
                    let mut session = Session::with_files(options, Source::Pids(pids), files);
                    session.announced = Some(Announced {
                        starter: pid,
                        denial,
                    });
                    // Each rank stopped as a proof, or refused with the kernel's reason (then
                    // read through its channel).
                    session.prove_announced(&known)?;
                    return Ok(session);
                }
                return Err(SessionError::Acquire { pid, source });
            }
        };
        let mpi2dd = any.mpi2dd.map(|traversal| {
            Box::new(Mpi2ddJob {
                traversal,
                mismatches: any.mismatches,
            })
        });
        let source = match (any.mpir, mpi2dd) {
            (Some(acquired), mpi2dd) => Source::Starter {
                pid,
                job: with_containers(acquired.job()),
                held: options.hold_from_acquisition.then(|| Box::new(acquired)),
                child: None,
                mpi2dd,
            },
            (None, Some(m)) => Source::Mpi2dd(m),
            (None, None) => {
                return Err(SessionError::Empty("the process exports no job"));
            }
        };
        Ok(Session::with_files(options, source, files))
    }

    /// Launch mode: runs `command` (the starter, or a wrapper that execs it) under control
    /// and acquires the job it spawns. The ranks run at once, unless
    /// [`SessionOptions::with_hold_from_acquisition`] keeps them stopped for the first
    /// [`hold`](Session::hold) (or for [`hand_over`](Session::hand_over)). Take the starter
    /// with [`take_child`](Session::take_child) to wait for it.
    ///
    /// # Errors
    /// [`SessionError::Acquire`] when the starter cannot be run or acquisition fails.
    pub fn launch(command: Command, options: SessionOptions) -> Result<Session, SessionError> {
        let options = options.with_store_opened();
        let files = std::sync::Arc::new(mpir_target::debuginfo::FileCache::new());
        let mut acquire = options
            .acquire
            .clone()
            .with_hold(options.hold_from_acquisition)
            .with_files(std::sync::Arc::clone(&files));
        if let Some(r) = &options.ranks {
            acquire = acquire.with_ranks(RankSelection::Only(r.clone()));
        }
        let mut acquired = live::launch(command, acquire)
            .map_err(|source| SessionError::Acquire { pid: 0, source })?;
        let child = acquired.take_child();
        let pid = acquired.job().starter.pid;
        let job = with_containers(acquired.job());
        let held = options.hold_from_acquisition.then(|| Box::new(acquired));
        Ok(Session::with_files(
            options,
            Source::Starter {
                pid,
                job,
                held,
                child,
                mpi2dd: None,
            },
            files,
        ))
    }

    /// Processes named by pid: no starter, no table, no proof of identity beyond the caller's
    /// word. Each is held only while it names the process first held (its start time).
    ///
    /// # Errors
    /// [`SessionError::Empty`] when no pid is given.
    pub fn pids(
        pids: impl IntoIterator<Item = u32>,
        options: SessionOptions,
    ) -> Result<Session, SessionError> {
        let mut pids: Vec<u32> = pids.into_iter().collect();
        // A pid named twice is one process, held once.
        let mut seen = std::collections::HashSet::new();
        pids.retain(|p| seen.insert(*p));
        if pids.is_empty() {
            return Err(SessionError::Empty("no pid given"));
        }
        Ok(Session::new(options, Source::Pids(pids)))
    }

    /// One node's ranks of a job whose starter is elsewhere, as `mpir agent` serves them
    /// (issue 21): each table entry whose host is this node is proven to be its rank from
    /// this node's `/proc` against what the front end knows of the job
    /// ([`mpir_acquire::live::prove_on_node`]: user, wall-clock start, executable, the
    /// launcher's rank variables). Entries of other nodes, and refused ones, stay in the
    /// session with their reason and are never touched; the proven ones are held by pid, each
    /// only while its start time is the proof's.
    ///
    /// # Errors
    /// [`SessionError::Empty`] when no entry is given.
    pub fn node_ranks(
        claims: &[mpir_acquire::live::RankClaim],
        expect: &mpir_acquire::live::NodeExpectations,
        options: SessionOptions,
    ) -> Result<Session, SessionError> {
        if claims.is_empty() {
            return Err(SessionError::Empty("no rank given"));
        }
        let this = live::node_facts(options.acquire_options());
        let proofs = mpir_acquire::live::prove_on_node(claims, expect, &this);
        let selection = options.ranks.clone();
        let mut pids = Vec::new();
        let known: Vec<Known> = claims
            .iter()
            .zip(proofs)
            .filter(|(c, _)| selection.as_ref().is_none_or(|s| s.contains(c.rank)))
            .map(|(c, proof)| match proof {
                Ok(p) => {
                    pids.push(p.pid);
                    Known {
                        rank: Some(c.rank),
                        pid: p.pid,
                        image: p.image,
                        state: Ok(p.start_time),
                    }
                }
                Err(refusal) => Known {
                    rank: Some(c.rank),
                    pid: u32::try_from(c.pid).unwrap_or(0),
                    image: c
                        .executable
                        .as_deref()
                        .map_or_else(|| PathBuf::from("?"), PathBuf::from),
                    state: Err(match refusal {
                        mpir_acquire::Refusal::Remote { host } => Unreadable::Remote { host },
                        other => Unreadable::Refused(other),
                    }),
                },
            })
            .collect();
        let mut session = Session::new(options, Source::Pids(pids));
        session.known = Some(known);
        Ok(session)
    }

    /// Core files: a starter's core gives the job (its process table), ranks' cores are read
    /// as the ranks (numbered from the starter core's table by pid when it is given, else from
    /// each rank's own `MPI_COMM_WORLD` once read). [`SessionOptions::with_exe`] names the
    /// executable when a core does not lead to it.
    ///
    /// # Errors
    /// A core that cannot be opened, a missing `--exe`, several starter cores, no core.
    pub fn cores(
        paths: impl IntoIterator<Item = impl AsRef<Path>>,
        options: SessionOptions,
    ) -> Result<Session, SessionError> {
        let options = options.with_store_opened();
        let cores = open_cores(paths, &options)?;
        Ok(Session::new(options, Source::Cores(Box::new(cores))))
    }

    /// The ranks as the session knows them, without stopping anything: each one's rank (when
    /// a table says), pid and why it is not read (`None`: it is held on the next hold). Empty
    /// until the first hold of a starter or pids session; from the start for
    /// [`Session::node_ranks`].
    pub fn known_ranks(&self) -> Vec<(Option<u64>, u32, Option<&Unreadable>)> {
        self.known
            .iter()
            .flatten()
            .map(|k| (k.rank, k.pid, k.state.as_ref().err()))
            .collect()
    }

    /// The job's selected ranks that run on another node than this one (by the job's
    /// locality; in table order): the ranks agents read, and the ones a hand-over cannot
    /// hold. Empty without a job.
    pub fn ranks_elsewhere(&self) -> Vec<mpir_types::mpir::Rank<'_>> {
        let Some(job) = self.job() else {
            return Vec::new();
        };
        let selection = self.options.ranks();
        job.ranks()
            .filter(|r| selection.is_none_or(|s| s.contains(r.rank)))
            .filter(|r| !job.locality(r.rank).is_local())
            .collect()
    }

    /// The options in force.
    pub fn options(&self) -> &SessionOptions {
        &self.options
    }

    /// The facts about this node the session decides locality by (the acquisition's: the
    /// given ones, else this machine's, plus the aliases), e.g. to say which of an MPI2DD-only
    /// job's processes are local.
    pub fn node_facts(&self) -> mpir_types::node::ThisNode {
        live::node_facts(self.options.acquire_options())
    }

    /// The job, for a session from a starter (attached or launched), as acquired when the
    /// session was made: nodes, ranks, how each rank was handled. `None` for pids and cores
    /// (see [`starter_core`](Session::starter_core)).
    pub fn job(&self) -> Option<&Job> {
        match &self.source {
            Source::Starter { job, .. } => Some(job),
            _ => None,
        }
    }

    /// The job as MPI2DD describes it, when the process attached to exports MPI2DD.
    pub fn mpi2dd(&self) -> Option<&Mpi2ddJob> {
        match &self.source {
            Source::Starter { mpi2dd, .. } => mpi2dd.as_deref(),
            Source::Mpi2dd(m) => Some(m),
            _ => None,
        }
    }

    /// The starter's pid, for a session from a starter.
    pub fn starter_pid(&self) -> Option<u32> {
        match &self.source {
            Source::Starter { pid, .. } => Some(*pid),
            _ => None,
        }
    }

    /// Core files: the starter's core, when one of the cores is a starter's.
    pub fn starter_core(&self) -> Option<&StarterCore> {
        match &self.source {
            Source::Cores(c) => c.starter.as_ref(),
            _ => None,
        }
    }

    /// Core files: what each core given is, in the order given.
    pub fn core_files(&self) -> &[CoreInfo] {
        match &self.source {
            Source::Cores(c) => &c.info,
            _ => &[],
        }
    }

    /// Launch mode: takes the starter process (to wait for it; wait only once the ranks are
    /// released).
    pub fn take_child(&mut self) -> Option<Child> {
        match &mut self.source {
            Source::Starter { child, .. } => child.take(),
            _ => None,
        }
    }

    /// With [`SessionOptions::with_hold_from_acquisition`], before any
    /// [`hold`](Session::hold): hands the held ranks over to another tool, left stopped (a job-control stop: `SIGCONT` lets them run), the starter
    /// detached and running. Returns the pids left stopped.
    ///
    /// # Errors
    /// [`SessionError::Unsupported`] when nothing is held from the launch;
    /// [`SessionError::Acquire`] when the hand-over fails.
    pub fn hand_over(&mut self) -> Result<Vec<u32>, SessionError> {
        let kind = self.source_kind();
        match &mut self.source {
            Source::Starter {
                pid,
                held: Some(acquired),
                ..
            } => {
                let pid = *pid;
                let stopped = acquired
                    .hand_over()
                    .map_err(|source| SessionError::Acquire { pid, source })?;
                if let Source::Starter { held, .. } = &mut self.source {
                    *held = None;
                }
                Ok(stopped)
            }
            _ => Err(SessionError::Unsupported {
                operation: "hand_over",
                source_kind: kind,
            }),
        }
    }

    /// What the source is, in words.
    pub(crate) fn source_kind(&self) -> &'static str {
        match &self.source {
            Source::Starter { child: Some(_), .. } => "a launched starter",
            Source::Starter { .. } => "a starter",
            Source::Mpi2dd(_) => "an MPI2DD process",
            Source::Pids(_) => "processes named by pid",
            Source::Cores(_) => "core files",
        }
    }
}

fn open_cores(
    paths: impl IntoIterator<Item = impl AsRef<Path>>,
    options: &SessionOptions,
) -> Result<Cores, SessionError> {
    if let Some(e) = options.exe.as_ref().filter(|e| !e.is_file()) {
        return Err(SessionError::NoSuchFile {
            what: "executable",
            path: e.clone(),
        });
    }
    let debug = options.debug_options();
    let mut starters = Vec::new();
    let mut ranks = Vec::new();
    let mut info = Vec::new();
    for path in paths {
        let path = path.as_ref().to_path_buf();
        let opened = match &options.exe {
            Some(e) => CoreTarget::open_with_executable(&path, e, debug.clone()),
            None => CoreTarget::open(&path, debug.clone()),
        }
        .map_err(|source| SessionError::Core {
            path: path.clone(),
            source,
        })?;
        let truncation = opened.core().truncation();
        // Open MPI's ranks load the library that defines MPIR_proctable too: a starter is a
        // core whose table has entries.
        let (table, not_starter) = match read_proctable(&opened, &ReadOptions::default()) {
            Ok(t) if !t.resolved.entries.is_empty() => (Some(t), String::new()),
            Ok(_) => (None, "its MPIR_proctable is empty".to_string()),
            Err(e) => (None, chain(&e)),
        };
        let executable_gone = opened
            .core()
            .executable()
            .filter(|exe| options.exe.is_none() && !exe.is_file())
            .map(Path::to_path_buf);
        match table {
            Some(table) => {
                let flags = mpir_acquire::protocol::read_flags(&opened);
                info.push(CoreInfo {
                    path: path.clone(),
                    truncation,
                    not_starter: None,
                    executable_gone,
                });
                starters.push(StarterCore { path, table, flags });
            }
            None => {
                let pid = opened.core().pid().unwrap_or(0);
                let image = options
                    .exe
                    .clone()
                    .or_else(|| opened.core().executable().map(Path::to_path_buf))
                    .unwrap_or_else(|| path.clone());
                info.push(CoreInfo {
                    path: path.clone(),
                    truncation,
                    not_starter: Some(not_starter),
                    executable_gone,
                });
                ranks.push(RankCore {
                    path,
                    target: Rc::new(opened),
                    pid,
                    image,
                });
            }
        }
    }
    if info.is_empty() {
        return Err(SessionError::Empty("no core given"));
    }
    if starters.len() > 1 {
        return Err(SessionError::SeveralStarterCores {
            paths: starters.into_iter().map(|s| s.path).collect(),
        });
    }
    Ok(Cores {
        starter: starters.pop(),
        ranks,
        info,
    })
}

/// A copy of `job` with the ranks of this node that run inside a container found
/// ([`live::find_containers`]: reads `/proc` only), so that what the session shows and reads
/// is the rank's process, not its container runtime's.
fn with_containers(job: &Job) -> Box<Job> {
    let mut job = Box::new(job.clone());
    live::find_containers(&mut job);
    job
}

impl Session {
    /// From now on, every read of the whole job ([`queues`](Session::queues),
    /// [`stacks`](Session::stacks), [`deadlock`](Session::deadlock)) also reads the job's
    /// ranks on other nodes through `nodes`. Replaces (and so lets go of) any earlier one.
    pub fn reach_other_nodes(&mut self, nodes: Box<dyn OtherNodes>) {
        self.others = Some(nodes);
    }

    /// Whether the job's ranks on other nodes are read ([`reach_other_nodes`](Session::reach_other_nodes)).
    pub fn reaches_other_nodes(&self) -> bool {
        self.others.is_some()
    }

    /// Where each other node stands; empty when no other node is reached.
    pub fn other_nodes(&self) -> Vec<NodeState> {
        self.others.as_ref().map(|o| o.nodes()).unwrap_or_default()
    }

    /// Stops reading other nodes and lets them go (their agents are told goodbye and awaited,
    /// bounded). Dropping the session does the same.
    pub fn leave_other_nodes(&mut self) {
        self.others = None;
    }

    /// Runs `read` with the other nodes taken out of the session (a hold borrows the session
    /// for its whole length), and puts them back afterwards.
    pub(crate) fn with_others<R>(
        &mut self,
        read: impl FnOnce(&mut Session, Option<&mut (dyn OtherNodes + 'static)>) -> R,
    ) -> R {
        let mut others = self.others.take();
        let result = read(self, others.as_deref_mut());
        if self.others.is_none() {
            self.others = others;
        }
        result
    }
}
