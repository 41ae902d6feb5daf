//! Stack traces of every selected rank, merged like STAT: [`Session::stacks`] (one read, or a
//! few samples compared) and [`Session::sample_stacks`] (a profiler's periodic samples).
//!
//! A live rank is stopped only for its own snapshot ([`snapshot_live`]: every thread frozen,
//! registers and the live part of each stack copied in one batched read, let go), then unwound
//! offline; the time each process was stopped is measured and reported. Before its first
//! snapshot each rank is proven to be the table's rank by the session's first
//! [`hold`](Session::hold) (the acquisition's proof), and every snapshot is taken only while
//! the pid still names that process (its start time, read before and after the snapshot; a
//! snapshot of a pid that changed meanwhile is thrown away). Core files are unwound from the
//! threads' `NT_PRSTATUS` registers and the core's memory.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use mpir_target::corefile::CoreTarget;
use mpir_target::live::procfs;
use mpir_target::live::tracer::Tracer;
use mpir_target::live::{LiveMemory, LiveTarget};
use mpir_target::unwind::{
    ProcessSnapshot, SnapshotOptions, ThreadSnapshot, UnwindOptions, Unwinder, snapshot_live_while,
};
use mpir_target::{ControlCause, Memory};
use mpir_types::ranks::RankSet;
use mpir_types::stacks::{
    HelperFolding, MergeKey, NotRead, PythonView, RankStacks, ReasonCode, StackTree, TreeOptions,
    TreeView, Unreached, outside_mpi, unmoved,
};

use crate::error::{SessionError, Unreadable};
use crate::held_stacks::{core_stacks, core_unwinder, live_unwinder};
use crate::hold::ReleaseReport;
use crate::python;
use crate::session::{Known, Session, Source};

/// How stacks are read and merged, built with `with_*` setters.
///
/// ```
/// use std::time::Duration;
/// use mpir_session::StackOptions;
///
/// let options = StackOptions::default()
///     .with_samples(3)
///     .with_interval(Duration::from_millis(100))
///     .with_per_thread(true)
///     .with_max_stop(Some(Duration::from_millis(5)));
/// assert_eq!(options.samples(), 3);
/// ```
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct StackOptions {
    samples: u32,
    interval: Duration,
    view: TreeView,
    fold_helpers: bool,
    key: MergeKey,
    max_stop: Option<Duration>,
    unwind: UnwindOptions,
    snapshot: SnapshotOptions,
    python: Option<PythonView>,
}

impl Default for StackOptions {
    /// One sample, 150 ms apart when more are asked, per-process view, helper threads folded,
    /// frames merged by function, no stop bound, the unwinder's and snapshot's default limits.
    fn default() -> Self {
        StackOptions {
            samples: 1,
            interval: Duration::from_millis(150),
            view: TreeView::Process,
            fold_helpers: true,
            key: MergeKey::Function,
            max_stop: None,
            unwind: UnwindOptions::default(),
            snapshot: SnapshotOptions::default(),
            python: Some(PythonView::Interleaved),
        }
    }
}

impl StackOptions {
    /// With `samples` samples (at least 1; core files are one instant: always 1).
    pub fn with_samples(mut self, samples: u32) -> Self {
        self.samples = samples.max(1);
        self
    }

    /// With `interval` between the starts of two samples.
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// One node per thread kind under the root (`true`), or every thread of a rank merged
    /// into one tree (`false`, the default).
    pub fn with_per_thread(mut self, per_thread: bool) -> Self {
        self.view = if per_thread {
            TreeView::Thread
        } else {
            TreeView::Process
        };
        self
    }

    /// Runtime helper threads (progress threads of libevent, PMIx, UCX…) folded into one
    /// labelled node per kind (`true`, the default), or shown in full.
    pub fn with_fold_helpers(mut self, fold: bool) -> Self {
        self.fold_helpers = fold;
        self
    }

    /// What makes two frames one node (the function by default; with source lines, call
    /// sites apart).
    pub fn with_merge_key(mut self, key: MergeKey) -> Self {
        self.key = key;
        self
    }

    /// A bound on each process's stop: a snapshot that stopped its process for longer is
    /// reported in [`StackSample::overran`] (its stacks are kept: the process was let go
    /// anyway, the bound says which samples disturbed the job more than asked).
    pub fn with_max_stop(mut self, max_stop: Option<Duration>) -> Self {
        self.max_stop = max_stop;
        self
    }

    /// With these unwinder limits (frames, scan).
    pub fn with_unwind_options(mut self, unwind: UnwindOptions) -> Self {
        self.unwind = unwind;
        self
    }

    /// With these limits on the bytes copied per thread and per process.
    pub fn with_snapshot_options(mut self, snapshot: SnapshotOptions) -> Self {
        self.snapshot = snapshot;
        self
    }

    /// How Python frames are shown: in place of the interpreter's frames
    /// ([`PythonView::Interleaved`], the default), beside every native frame
    /// ([`PythonView::WithNative`]), or not read at all (`None`: the interpreter's memory is
    /// not read, only native frames are shown).
    pub fn with_python(mut self, python: Option<PythonView>) -> Self {
        self.python = python;
        self
    }

    /// How Python frames are shown (`None`: not read).
    pub fn python(&self) -> Option<PythonView> {
        self.python
    }

    /// Samples asked.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Time between samples.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The stop bound, if any.
    pub fn max_stop(&self) -> Option<Duration> {
        self.max_stop
    }

    /// The options the merged trees are built with.
    pub fn tree_options(&self) -> TreeOptions {
        TreeOptions::default()
            .with_key(self.key)
            .with_view(self.view)
            .with_helpers(if self.fold_helpers {
                HelperFolding::BuiltIn
            } else {
                HelperFolding::Off
            })
    }
}

/// How long one process was stopped for its snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StopTime {
    /// The rank.
    pub rank: u64,
    /// Its process.
    pub pid: u32,
    /// From the request to stop it until it was let go.
    pub stopped_for: Duration,
}

/// How far a [`Session::stacks_with`] read is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StackProgress {
    /// The sample (1-based).
    pub sample: u32,
    /// Samples in all.
    pub samples: u32,
    /// This node's live ranks of this sample read so far.
    pub done: usize,
    /// This node's live ranks in a sample.
    pub total: usize,
}

/// One sample of every selected rank's stacks.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StackSample {
    /// The sample's number (1-based).
    pub index: u32,
    /// When it started (wall clock).
    pub taken_at: SystemTime,
    /// How long the whole sample took (every snapshot and its unwinding).
    pub elapsed: Duration,
    /// The stacks of every rank read, in the job's order.
    pub ranks: Vec<RankStacks>,
    /// The ranks not read, with the reason (never silently dropped).
    pub unreached: Vec<Unreached>,
    /// Live processes: how long each was stopped (empty for core files).
    pub stops: Vec<StopTime>,
    /// The ranks whose stop exceeded [`StackOptions::with_max_stop`].
    pub overran: Vec<u64>,
    /// The merged tree of this sample.
    pub tree: StackTree,
}

impl StackSample {
    /// The longest stop of this sample, if any process was stopped.
    pub fn max_stop(&self) -> Option<Duration> {
        self.stops.iter().map(|s| s.stopped_for).max()
    }
}

/// What [`Session::stacks`] read.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StacksRead {
    /// Every sample, in order (one unless more were asked).
    pub samples: Vec<StackSample>,
    /// With two samples or more: the ranks whose stacks were the same in every sample
    /// ([`mpir_types::stacks::unmoved`]) outside MPI — a thread blocked in an MPI call is
    /// compared from that call outward ([`mpir_types::stacks::outside_mpi`]), since the MPI
    /// library's progress engine polls below it; `None` with one sample.
    pub unmoved: Option<RankSet>,
    /// How the session's first hold (the proof of each rank's identity, before its first
    /// snapshot) let the ranks go, when this read made it.
    pub proof_release: Option<ReleaseReport>,
    /// Processes named by pid, and cores without a starter core, have no rank: they are
    /// numbered by their position, and this says which pid got which number.
    pub numbered: Vec<(u64, u32)>,
    /// Ranks read through their cooperative channel, because the kernel refused this tool
    /// the process (not stopped: each thread copied its own registers and stack).
    pub cooperative: Vec<(u64, mpir_types::access::AccessDenial)>,
    /// The job's table was built from its ranks' announcements (the starter refused).
    pub announced: Option<crate::session::Announced>,
}

impl StacksRead {
    /// The last sample (there is always one).
    pub fn last(&self) -> &StackSample {
        self.samples.last().expect("a read has at least one sample")
    }

    /// The merged tree of the last sample.
    pub fn tree(&self) -> &StackTree {
        &self.last().tree
    }
}

/// What [`Session::sample_stacks`] did.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SamplingSummary {
    /// Samples taken.
    pub samples: u32,
    /// Samples in which some process's stop exceeded the bound.
    pub overran: u32,
    /// The longest stop of any process in any sample.
    pub max_stop: Duration,
    /// How the session's first hold (the identity proof) let the ranks go, when sampling
    /// made it.
    pub proof_release: Option<ReleaseReport>,
}

/// Folded stacks summed over samples, for flamegraph tools: `outer;…;inner N` lines.
///
/// ```
/// use mpir_session::FoldedStacks;
/// let mut folded = FoldedStacks::default();
/// folded.add_folded("_start;main;MPI_Recv 2\n");
/// folded.add_folded("_start;main;MPI_Recv 1\n_start;main 1\n");
/// assert_eq!(folded.to_string(), "_start;main 1\n_start;main;MPI_Recv 3\n");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoldedStacks {
    counts: BTreeMap<String, u64>,
}

impl FoldedStacks {
    /// Adds a tree's threads (its [`StackTree::to_folded`] lines).
    pub fn add(&mut self, tree: &StackTree) {
        self.add_folded(&tree.to_folded());
    }

    /// Adds folded lines (`path N`); a line without a count counts once.
    pub fn add_folded(&mut self, text: &str) {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (path, n) = match line.rsplit_once(' ') {
                Some((p, n)) => match n.parse::<u64>() {
                    Ok(n) => (p, n),
                    Err(_) => (line, 1),
                },
                None => (line, 1),
            };
            *self.counts.entry(path.to_string()).or_default() += n;
        }
    }

    /// The call paths and their counts, sorted by path.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.counts.iter().map(|(p, n)| (p.as_str(), *n))
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

impl std::fmt::Display for FoldedStacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (path, n) in &self.counts {
            writeln!(f, "{path} {n}")?;
        }
        Ok(())
    }
}

/// Why a rank is unreached, from why the session could not read it.
fn unreached_reason(why: &Unreadable) -> NotRead {
    why.not_read()
}

/// A thread's name (`comm`), when it can be read.
fn thread_name(pid: u32, tid: u32) -> Option<String> {
    let name = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    Some(name.trim_end().to_string()).filter(|n| !n.is_empty())
}

/// Ranks without a table numbered by position: (number, pid).
type Numbered = Vec<(u64, u32)>;

/// One live process to sample.
struct LiveRank {
    rank: u64,
    pid: u32,
    start: u64,
    target: Rc<LiveTarget>,
    /// Read through its cooperative channel (the kernel refuses this tool the process).
    coop: Option<crate::coop::CoopRank>,
}

/// What a run samples: live processes (with their unwinders made once) or cores.
enum Ranks {
    Live(Vec<LiveRank>),
    Cores(Vec<(u64, Rc<CoreTarget>)>),
}

impl Session {
    /// The stacks of every selected rank, merged: one sample, or
    /// [`StackOptions::with_samples`] samples [`interval`](StackOptions::with_interval) apart,
    /// with the ranks whose stacks did not move across them. Live ranks are each stopped only
    /// for their own snapshot, each proven first to be the rank (the session's first hold) and
    /// read only while its pid names that process; core files are read from their
    /// threads' registers and memory.
    ///
    /// # Errors
    /// As [`hold`](Session::hold) for the first read of a live job (the proof of identity);
    /// [`SessionError::Control`] when no tracer can be started; [`SessionError::Unsupported`]
    /// for an MPI2DD-only session. Per-rank trouble is in [`StackSample::unreached`].
    pub fn stacks(&mut self, options: &StackOptions) -> Result<StacksRead, SessionError> {
        self.stacks_among(options, None, &mut |_| {})
    }

    /// [`stacks`](Session::stacks), telling `progress` before each live rank's snapshot and
    /// once each sample is taken (a progress bar's ranks read / total).
    ///
    /// # Errors
    /// As [`stacks`](Session::stacks).
    pub fn stacks_with(
        &mut self,
        options: &StackOptions,
        mut progress: impl FnMut(StackProgress),
    ) -> Result<StacksRead, SessionError> {
        self.stacks_among(options, None, &mut progress)
    }

    /// [`stacks`](Session::stacks) of the ranks in `only` alone: the others are neither
    /// stopped nor reported (a watch's cheap round reads a few ranks this way). Only this
    /// node's ranks are read: the other nodes ([`Session::reach_other_nodes`]) are not asked.
    ///
    /// # Errors
    /// As [`stacks`](Session::stacks).
    pub fn stacks_of(
        &mut self,
        options: &StackOptions,
        only: &RankSet,
    ) -> Result<StacksRead, SessionError> {
        self.stacks_among(options, Some(only), &mut |_| {})
    }

    fn stacks_among(
        &mut self,
        options: &StackOptions,
        only: Option<&RankSet>,
        progress: &mut dyn FnMut(StackProgress),
    ) -> Result<StacksRead, SessionError> {
        if only.is_some() {
            return self.stacks_here(options, only, progress);
        }
        self.with_others(|session, others| {
            let Some(o) = others else {
                return session.stacks_here(options, None, progress);
            };
            o.start_stacks(options);
            let read = session.stacks_here(options, None, progress);
            let samples = read.as_ref().map_or(0, |r| r.samples.len());
            // Every other node's answer is awaited, even when this node's part failed.
            let parts = o.finish_stacks(options, samples);
            let mut read = read?;
            read.merge_remote(&parts, options);
            Ok(read)
        })
    }

    /// This node's part of a stacks read.
    fn stacks_here(
        &mut self,
        options: &StackOptions,
        only: Option<&RankSet>,
        progress: &mut dyn FnMut(StackProgress),
    ) -> Result<StacksRead, SessionError> {
        let mut samples = Vec::new();
        let (proof_release, numbered) =
            self.run_samples(options, options.samples, only, progress, |s| {
                samples.push(s);
                ControlFlow::Continue(())
            })?;
        let unmoved = unmoved_of(&samples, options);
        let cooperative = self
            .known
            .iter()
            .flatten()
            .filter_map(|k| {
                let c = self.coop.get(&k.pid)?;
                let rank = k.rank?;
                samples
                    .last()?
                    .ranks
                    .iter()
                    .any(|r| r.rank == rank)
                    .then(|| (rank, c.denial.clone()))
            })
            .collect();
        Ok(StacksRead {
            samples,
            unmoved,
            proof_release,
            numbered,
            cooperative,
            announced: self.announced.clone(),
        })
    }

    /// A profiler's sampling: up to `max_samples` samples of every selected rank's stacks,
    /// [`StackOptions::with_interval`] apart (its `samples` is ignored), each handed to
    /// `on_sample` as soon as it is taken; `on_sample` returns [`ControlFlow::Break`] to stop
    /// early. Each process is stopped only for its own snapshot, one after the other; a stop
    /// longer than [`StackOptions::with_max_stop`] is reported in the sample. The unwinders
    /// (CFI and symbols of each image, read once) are kept for the whole run.
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use std::time::Duration;
    /// use mpir_session::{FoldedStacks, Session, SessionOptions, StackOptions};
    ///
    /// let mut session = Session::attach(4242, SessionOptions::default())?;
    /// let options = StackOptions::default()
    ///     .with_interval(Duration::from_millis(20))
    ///     .with_max_stop(Some(Duration::from_millis(2)));
    /// let mut folded = FoldedStacks::default();
    /// let summary = session.sample_stacks(&options, 50, |sample| {
    ///     folded.add(&sample.tree);
    ///     ControlFlow::Continue(())
    /// })?;
    /// print!("{folded}");
    /// eprintln!("{} samples, longest stop {:?}", summary.samples, summary.max_stop);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`stacks`](Session::stacks).
    pub fn sample_stacks(
        &mut self,
        options: &StackOptions,
        max_samples: u32,
        mut on_sample: impl FnMut(StackSample) -> ControlFlow<()>,
    ) -> Result<SamplingSummary, SessionError> {
        let mut summary = SamplingSummary::default();
        let (proof, _) = self.run_samples(options, max_samples, None, &mut |_| {}, |s| {
            summary.samples += 1;
            if !s.overran.is_empty() {
                summary.overran += 1;
            }
            summary.max_stop = summary.max_stop.max(s.max_stop().unwrap_or_default());
            on_sample(s)
        })?;
        summary.proof_release = proof;
        Ok(summary)
    }

    /// Takes up to `count` samples; returns the proof's release and the numbering of ranks
    /// without a table.
    fn run_samples(
        &mut self,
        options: &StackOptions,
        count: u32,
        only: Option<&RankSet>,
        progress: &mut dyn FnMut(StackProgress),
        mut on_sample: impl FnMut(StackSample) -> ControlFlow<()>,
    ) -> Result<(Option<ReleaseReport>, Numbered), SessionError> {
        let (ranks, unreached, proof, numbered) = self.stack_ranks(only)?;
        let symbols = &self.symbols;
        let count = if matches!(ranks, Ranks::Cores(_)) {
            1
        } else {
            count.max(1)
        };
        let tree_options = options.tree_options();
        match &ranks {
            Ranks::Cores(cores) => {
                let unwinders: Vec<Unwinder<'_>> = cores
                    .iter()
                    .map(|(_, t)| core_unwinder(t, options.unwind, symbols))
                    .collect();
                let started = Instant::now();
                let taken_at = SystemTime::now();
                let stacks: Vec<RankStacks> = cores
                    .iter()
                    .zip(&unwinders)
                    .map(|((rank, t), u)| {
                        let pid = t.core().pid().unwrap_or(0);
                        let threads = core_stacks(t, u, options.python);
                        python::rank_stacks(*rank, pid, threads.0, threads.1)
                    })
                    .collect();
                let tree = StackTree::build(&stacks, &unreached, &tree_options);
                let _ = on_sample(StackSample {
                    index: 1,
                    taken_at,
                    elapsed: started.elapsed(),
                    ranks: stacks,
                    unreached,
                    stops: Vec::new(),
                    overran: Vec::new(),
                    tree,
                });
            }
            Ranks::Live(live) => {
                let tracer = self.new_tracer()?;
                let unwinders: Vec<Unwinder<'_>> = live
                    .iter()
                    .map(|l| live_unwinder(&l.target, l.pid, options.unwind, symbols))
                    .collect();
                // Each rank's interpreter, found once from its symbols (not while stopped).
                let pythons: Vec<python::Found<'_>> = live
                    .iter()
                    .map(|l| options.python.and_then(|_| python::find(&l.target)))
                    .collect();
                let mut next = Instant::now();
                for index in 1..=count {
                    if index > 1 {
                        next += options.interval;
                        if let Some(wait) = next.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    }
                    let mut tell = |done: usize| {
                        progress(StackProgress {
                            sample: index,
                            samples: count,
                            done,
                            total: live.len(),
                        })
                    };
                    let sample = live_sample(
                        &tracer,
                        live,
                        &unwinders,
                        &pythons,
                        &unreached,
                        options,
                        &tree_options,
                        index,
                        &mut tell,
                    );
                    tell(live.len());
                    if on_sample(sample).is_break() {
                        break;
                    }
                }
            }
        }
        Ok((proof, numbered))
    }

    /// The ranks to read: live ones proven (the first hold, if none was made yet) with their
    /// targets, or the rank cores; the others unreached; the proof's release; the numbering of
    /// ranks without a table.
    #[allow(clippy::type_complexity)]
    fn stack_ranks(
        &mut self,
        only: Option<&RankSet>,
    ) -> Result<
        (
            Ranks,
            Vec<Unreached>,
            Option<ReleaseReport>,
            Vec<(u64, u32)>,
        ),
        SessionError,
    > {
        let mut numbered = Vec::new();
        let mut unreached = Vec::new();
        if let Source::Cores(_) = &self.source {
            let held = self.core_ranks()?;
            let mut cores = Vec::new();
            let Source::Cores(all) = &self.source else {
                unreachable!("checked above")
            };
            for (i, r) in held.iter().enumerate() {
                let rank = r.rank.unwrap_or_else(|| {
                    numbered.push((i as u64, r.pid));
                    i as u64
                });
                if only.is_some_and(|o| !o.contains(rank)) {
                    continue;
                }
                match all.ranks.iter().find(|c| Some(&c.path) == r.core.as_ref()) {
                    Some(c) => cores.push((rank, Rc::clone(&c.target))),
                    None => unreached.push(Unreached::new(
                        rank,
                        NotRead::new(ReasonCode::NoCore, "no core file"),
                    )),
                }
            }
            return Ok((Ranks::Cores(cores), unreached, None, numbered));
        }
        if let Source::Mpi2dd(_) = &self.source {
            return Err(SessionError::Unsupported {
                operation: "stacks",
                source_kind: "an MPI2DD process (no rank proven to read)",
            });
        }
        // The proof of identity: the session's first hold (each rank proven to be the
        // table's, its start time recorded), let go at once.
        let proof = match self.known {
            Some(_) => self.proof_release.take(),
            None => Some(self.hold()?.release()),
        };
        let known: Vec<Known> = self.known.clone().unwrap_or_default();
        let debug = self.options.acquire.debug.clone();
        let mut live = Vec::new();
        for (i, k) in known.iter().enumerate() {
            let rank = k.rank.unwrap_or_else(|| {
                numbered.push((i as u64, k.pid));
                i as u64
            });
            if only.is_some_and(|o| !o.contains(rank)) {
                continue;
            }
            let opened = match &k.state {
                Ok(start) => match self.targets.get(&(k.pid, *start)) {
                    Some(t) => Ok((*start, Rc::clone(t))),
                    None => match Session::open_live(&self.files, k.pid, debug.clone()) {
                        Ok(t) => {
                            let t = Rc::new(t);
                            self.targets.insert((k.pid, *start), Rc::clone(&t));
                            Ok((*start, t))
                        }
                        Err(e) => Err(Unreadable::Open(e)),
                    },
                },
                Err(why) => Err(why.clone()),
            };
            match opened {
                Ok((start, target)) => live.push(LiveRank {
                    rank,
                    pid: k.pid,
                    start,
                    target,
                    coop: None,
                }),
                Err(why) => {
                    // Refused by the kernel for good: the rank may answer for itself.
                    let coop = crate::coop::permanent_denial(&why)
                        .cloned()
                        .and_then(|d| self.cooperate(k.pid, k.rank, &d));
                    match coop {
                        Some(c) => live.push(LiveRank {
                            rank,
                            pid: k.pid,
                            start: c.start,
                            target: Rc::clone(&c.target),
                            coop: Some(c),
                        }),
                        None => unreached.push(Unreached::new(rank, unreached_reason(&why))),
                    }
                }
            }
        }
        Ok((Ranks::Live(live), unreached, proof, numbered))
    }
}

/// One sample of live processes: each snapshot taken only while its pid names the process
/// proven (start time before and after), unwound offline with that process's unwinder.
#[allow(clippy::too_many_arguments)]
fn live_sample(
    tracer: &Tracer,
    live: &[LiveRank],
    unwinders: &[Unwinder<'_>],
    pythons: &[python::Found<'_>],
    unreached_before: &[Unreached],
    options: &StackOptions,
    tree_options: &TreeOptions,
    index: u32,
    progress: &mut dyn FnMut(usize),
) -> StackSample {
    let taken_at = SystemTime::now();
    let started = Instant::now();
    let mut unreached = unreached_before.to_vec();
    let mut stops = Vec::with_capacity(live.len());
    let mut overran = Vec::new();
    // The tracer copies each process in turn (this thread asks it); a second thread unwinds
    // and symbolises each copy as soon as it is taken, so that loading an image's line tables
    // (tens of milliseconds for a C library's DWARF, once per session) overlaps the next
    // processes' snapshots instead of following them. The worker never touches a process.
    let ranks = std::thread::scope(|scope| {
        let (to_worker, jobs) = std::sync::mpsc::channel::<Copied>();
        let view = options.python.unwrap_or_default();
        let worker = scope.spawn(move || {
            jobs.into_iter()
                .map(|(i, rank, pid, snap, py)| {
                    let threads = unwinders[i]
                        .thread_stacks(&snap)
                        .into_iter()
                        .map(|t| {
                            let tid = t.tid;
                            match thread_name(pid, tid) {
                                Some(n) => t.with_name(n),
                                None => t,
                            }
                        })
                        .collect();
                    let found = pythons.get(i).copied().flatten();
                    let (threads, read) = python::merge(threads, found, py, view);
                    python::rank_stacks(rank, pid, threads, read)
                })
                .collect::<Vec<RankStacks>>()
        });
        for (i, l) in live.iter().enumerate() {
            progress(i);
            let same = || procfs::start_time(l.pid).is_ok_and(|t| t == l.start);
            if !same() {
                unreached.push(Unreached::new(
                    l.rank,
                    Unreadable::Changed { pid: l.pid }.not_read(),
                ));
                continue;
            }
            // The stacks' mappings as read with the images (re-read only for a new stack).
            let mappings = l.target.images().writable_mappings();
            let model = l.target.data_model();
            let found = pythons.get(i).copied().flatten();
            let read_python = |memory: &LiveMemory, threads: &[ThreadSnapshot]| {
                let ids =
                    python::thread_ids(threads.iter().map(|t| (t.tid, t.registers.as_ref().ok())));
                python::read(found, memory, &ids)
            };
            let taken = match &l.coop {
                // Not stopped: each thread copies its own registers and stack when asked.
                Some(c) => c
                    .memory
                    .with_client(|client| client.threads())
                    .map(|snap| {
                        let py = read_python(l.target.memory(), &snap.threads);
                        (snap, py)
                    })
                    .map_err(|e| mpir_target::TargetError::Control {
                        pid: l.pid,
                        operation: "THREADS over the cooperative channel".into(),
                        reason: e.to_string(),
                        cause: ControlCause::Other,
                    }),
                None => snapshot_live_while(
                    tracer,
                    l.pid,
                    model,
                    &options.snapshot,
                    mappings,
                    read_python,
                ),
            };
            let (snap, py) = match taken {
                Ok(s) => s,
                Err(e) => {
                    unreached.push(Unreached::new(l.rank, Unreadable::Stop(e).not_read()));
                    continue;
                }
            };
            // A pid reused between the check and the stop: what was copied is another
            // process's.
            if !same() {
                unreached.push(Unreached::new(
                    l.rank,
                    Unreadable::Changed { pid: l.pid }.not_read(),
                ));
                continue;
            }
            // A rank read through its channel was not stopped: its threads copied themselves.
            if l.coop.is_none() {
                stops.push(StopTime {
                    rank: l.rank,
                    pid: l.pid,
                    stopped_for: snap.stopped_for,
                });
                if options.max_stop.is_some_and(|m| snap.stopped_for > m) {
                    overran.push(l.rank);
                }
            }
            if to_worker.send((i, l.rank, l.pid, snap, py)).is_err() {
                // The worker is gone (it panicked): its join below says why.
                break;
            }
        }
        drop(to_worker);
        match worker.join() {
            Ok(ranks) => ranks,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    let tree = StackTree::build(&ranks, &unreached, tree_options);
    StackSample {
        index,
        taken_at,
        elapsed: started.elapsed(),
        ranks,
        unreached,
        stops,
        overran,
        tree,
    }
}

/// A snapshot on its way to the unwinding thread: the rank's index, rank, pid, the copy, and
/// its Python frames when it runs Python.
type Copied = (usize, u64, u32, ProcessSnapshot, python::Read);

/// "Did not move" over two samples or more: each thread compared outside MPI (a rank blocked
/// in an MPI call whose progress engine polls — its innermost frames differ at every sample —
/// has not moved).
fn unmoved_of(samples: &[StackSample], options: &StackOptions) -> Option<RankSet> {
    let tree_options = options.tree_options();
    (samples.len() > 1).then(|| {
        let trees: Vec<StackTree> = samples
            .iter()
            .map(|s| {
                let trimmed: Vec<RankStacks> = s.ranks.iter().map(outside_its_mpi_call).collect();
                StackTree::build(&trimmed, &s.unreached, &tree_options)
            })
            .collect();
        unmoved(&trees)
    })
}

/// A rank's stacks as "did it move" compares them: each thread from its MPI call outward (the
/// frames inside a blocking call change while it polls).
fn outside_its_mpi_call(r: &RankStacks) -> RankStacks {
    RankStacks::new(r.rank, r.pid, r.threads.iter().map(outside_mpi).collect())
}

/// Where one rank was at one read, compared as [`StacksRead::unmoved`] compares the samples of
/// one read (each thread from its MPI call outward, merged with the read's options): for a
/// tool that compares reads taken apart, such as a watch reading a few ranks per round.
#[derive(Debug, Clone)]
pub struct Position(StackTree);

impl Position {
    /// The position of each rank of `read`'s last sample, under `options` (the read's).
    pub fn of(read: &StacksRead, options: &StackOptions) -> Vec<(u64, Position)> {
        let tree_options = options.tree_options();
        read.last()
            .ranks
            .iter()
            .map(|r| {
                let tree = StackTree::build(&[outside_its_mpi_call(r)], &[], &tree_options);
                (r.rank, Position(tree))
            })
            .collect()
    }

    /// Whether the rank is where it was at `earlier` (same rank, same stacks).
    pub fn same_as(&self, earlier: &Position) -> bool {
        !unmoved(&[earlier.0.clone(), self.0.clone()]).is_empty()
    }
}

/// Another node's part of a stacks read — an agent's answer for the ranks on its node — to
/// merge into this node's read with [`StacksRead::merge_remote`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RemoteSample {
    /// The stacks of every rank read there.
    pub ranks: Vec<RankStacks>,
    /// The ranks not read there, with the reason.
    pub unreached: Vec<Unreached>,
    /// How long each process was stopped there.
    pub stops: Vec<StopTime>,
    /// Ranks whose stop exceeded the maximum there.
    pub overran: Vec<u64>,
}

impl RemoteSample {
    /// A part with these ranks read and these not.
    pub fn new(ranks: Vec<RankStacks>, unreached: Vec<Unreached>) -> Self {
        RemoteSample {
            ranks,
            unreached,
            stops: Vec::new(),
            overran: Vec::new(),
        }
    }

    /// With these stops.
    pub fn with_stops(mut self, stops: Vec<StopTime>, overran: Vec<u64>) -> Self {
        self.stops = stops;
        self.overran = overran;
        self
    }
}

impl StopTime {
    /// Process `pid` (rank `rank`) was stopped for `stopped_for`.
    pub fn new(rank: u64, pid: u32, stopped_for: Duration) -> Self {
        StopTime {
            rank,
            pid,
            stopped_for,
        }
    }
}

impl StacksRead {
    /// Merges other nodes' parts of the same samples (each part: one node's samples, in
    /// order). A rank a part answers for — read or unreached, with the part's reason —
    /// replaces what this read said of it (here, another node's rank is unreached as
    /// remote); a part with fewer samples leaves the later ones as they were. Each sample's
    /// tree is rebuilt from all its ranks with `options`, and `unmoved` is computed again.
    pub fn merge_remote(&mut self, parts: &[Vec<RemoteSample>], options: &StackOptions) {
        let tree_options = options.tree_options();
        for (i, sample) in self.samples.iter_mut().enumerate() {
            let here: Vec<&RemoteSample> = parts.iter().filter_map(|p| p.get(i)).collect();
            if here.is_empty() {
                continue;
            }
            let covered: std::collections::BTreeSet<u64> = here
                .iter()
                .flat_map(|p| {
                    p.ranks
                        .iter()
                        .map(|r| r.rank)
                        .chain(p.unreached.iter().map(|u| u.rank))
                })
                .collect();
            sample.ranks.retain(|r| !covered.contains(&r.rank));
            sample.unreached.retain(|u| !covered.contains(&u.rank));
            for p in here {
                sample.ranks.extend(p.ranks.iter().cloned());
                sample.unreached.extend(p.unreached.iter().cloned());
                sample.stops.extend(p.stops.iter().copied());
                sample.overran.extend(p.overran.iter().copied());
            }
            sample.ranks.sort_by_key(|r| r.rank);
            sample.unreached.sort_by_key(|u| u.rank);
            sample.overran.sort_unstable();
            sample.overran.dedup();
            sample.tree = StackTree::build(&sample.ranks, &sample.unreached, &tree_options);
        }
        self.unmoved = unmoved_of(&self.samples, options);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_target::TargetError;

    #[test]
    fn folded_stacks_sum_counts_per_path() {
        let mut f = FoldedStacks::default();
        f.add_folded("a;b 2\na;c 1\n");
        f.add_folded("a;b 5\nodd line\n\n");
        let v: Vec<_> = f.iter().collect();
        assert_eq!(v, vec![("a;b", 7), ("a;c", 1), ("odd line", 1)]);
    }

    #[test]
    fn unreadable_ranks_get_typed_reasons() {
        let code = |u: &Unreadable| unreached_reason(u).code;
        assert_eq!(code(&Unreadable::Changed { pid: 5 }), ReasonCode::Exited);
        let denied = TargetError::Control {
            pid: 5,
            operation: "PTRACE_SEIZE".into(),
            reason: "Operation not permitted".into(),
            cause: mpir_target::ControlCause::PermissionDenied,
        };
        // Not diagnosed: not stopped, with the error's text.
        let r = unreached_reason(&Unreadable::Stop(denied));
        assert_eq!(r.code, ReasonCode::NotStopped);
        assert!(r.text.contains("Operation not permitted"), "{r}");
        let gdb = mpir_types::access::AccessDenial::TracedBy {
            pid: 9,
            name: "gdb".into(),
        };
        let diagnosed = TargetError::Denied {
            pid: 5,
            operation: "attach".into(),
            denial: gdb.clone(),
        };
        let read = TargetError::Unreadable {
            address: 0x1000,
            len: 8,
            fault: mpir_target::Fault::Denied(gdb.clone()),
        };
        // The same refusal met attaching or reading: the same reason, word for word.
        let attach = unreached_reason(&Unreadable::AttachFailed(diagnosed));
        let open = unreached_reason(&Unreadable::Open(read));
        assert_eq!(attach, NotRead::denied(gdb.clone()));
        assert_eq!(open, attach);
        // The kind decides, not the text: a stop timeout and a vanished process.
        let control = |cause| TargetError::Control {
            pid: 5,
            operation: "stop".into(),
            reason: "anything".into(),
            cause,
        };
        assert_eq!(
            code(&Unreadable::Stop(control(ControlCause::NotStopped))),
            ReasonCode::NotStopped
        );
        assert_eq!(
            code(&Unreadable::Stop(control(ControlCause::Gone))),
            ReasonCode::Exited
        );
        let remote = unreached_reason(&Unreadable::Remote { host: "n2".into() });
        assert_eq!(remote.code, ReasonCode::Remote);
        assert_eq!(remote.host.as_deref(), Some("n2"));
    }
}
