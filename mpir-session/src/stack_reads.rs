//! What stacks reads return and take: options, samples, the merged read, other nodes' parts
//! of it. Data only: the reads themselves are `stacks.rs`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use mpir_target::unwind::{SnapshotOptions, UnwindOptions};
use mpir_types::ranks::RankSet;
use mpir_types::stacks::{
    HelperFolding, MergeKey, PythonView, RankStacks, StackTree, TreeOptions, TreeView, Unreached,
    outside_mpi, unmoved,
};

use crate::known::Announced;
use crate::release::ReleaseReport;

/// How stacks are read and merged, built with `with_*` setters.
///
/// ```
/// use std::time::{Duration, SystemTime};
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
    pub(crate) samples: u32,
    pub(crate) interval: Duration,
    pub(crate) view: TreeView,
    pub(crate) fold_helpers: bool,
    pub(crate) key: MergeKey,
    pub(crate) max_stop: Option<Duration>,
    pub(crate) unwind: UnwindOptions,
    pub(crate) snapshot: SnapshotOptions,
    pub(crate) python: Option<PythonView>,
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

/// How far a [`Session::stacks_with`](crate::Session::stacks_with) read is.
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

/// What [`Session::stacks`](crate::Session::stacks) read.
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
    pub announced: Option<Announced>,
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

/// What [`Session::sample_stacks`](crate::Session::sample_stacks) did.
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

/// "Did not move" over two samples or more: each thread compared outside MPI (a rank blocked
/// in an MPI call whose progress engine polls — its innermost frames differ at every sample —
/// has not moved).
pub(crate) fn unmoved_of(samples: &[StackSample], options: &StackOptions) -> Option<RankSet> {
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

    #[test]
    fn folded_stacks_sum_counts_per_path() {
        let mut f = FoldedStacks::default();
        f.add_folded("a;b 2\na;c 1\n");
        f.add_folded("a;b 5\nodd line\n\n");
        let v: Vec<_> = f.iter().collect();
        assert_eq!(v, vec![("a;b", 7), ("a;c", 1), ("odd line", 1)]);
    }
}
