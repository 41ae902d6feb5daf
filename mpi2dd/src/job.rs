//! The result of a traversal: a job's directories and metadirectories, its ranks grouped by
//! `MPI_COMM_WORLD`, the spawn tree, and what could not be reached or made sense of.
//!
//! Everything is sorted (processes by host and pid, worlds by id, ranks by rank, problems by
//! their derived order), so two traversals of one unchanged job compare equal whichever process
//! they started from.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::connect::{ConnectError, ProcessKey};
use crate::error::Error;
use crate::flags::MpiFlags;
use crate::read::{EntryProblem, SpawnDesc, TableKind};

/// How a process was listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Role {
    /// Named by `meta_host_name`/`meta_pid`, or in a `metadirectory_table`.
    Metadirectory,
    /// In a `directory_table`.
    Directory,
}

/// A directory or metadirectory process that was read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ProcessRecord {
    /// The process.
    pub process: ProcessKey,
    /// Its executable as a table gave it (`None` when only `meta_*` named it and
    /// `meta_executable_name` was unreadable).
    pub executable: Option<Arc<str>>,
    /// Its `mpi_flags`.
    pub mpi_flags: MpiFlags,
    /// How it was listed.
    pub listed_as: BTreeSet<Role>,
    /// Which processes list it in a table (at most [`MAX_LISTERS`], the smallest keys).
    pub listed_by: BTreeSet<ProcessKey>,
    /// Usable entries of its proctable.
    pub proctable_entries: usize,
}

/// The most listers kept per process or rank: bounds memory when hostile tables all list the
/// same processes.
pub const MAX_LISTERS: usize = 64;

/// One rank of a world.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Rank {
    /// Rank in the world.
    pub rank: i32,
    /// Where it runs.
    pub process: ProcessKey,
    /// Its executable, when readable.
    pub executable: Option<Arc<str>>,
    /// The directories whose proctable lists it (at most [`MAX_LISTERS`]).
    pub listed_by: BTreeSet<ProcessKey>,
}

/// One `MPI_COMM_WORLD` of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct World {
    /// Its `comm_world_id`.
    pub id: Arc<str>,
    /// Its ranks, by rank.
    pub ranks: Vec<Rank>,
    /// Where it was spawned from; `None` for a world a starter created.
    pub spawned_by: Option<SpawnDesc>,
}

/// An edge of the spawn tree: `parent_rank` of `parent_world` spawned `child_world` as its
/// `sequence`-th spawn.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct SpawnEdge {
    /// The parent world.
    pub parent_world: Arc<str>,
    /// The parent rank in it.
    pub parent_rank: i32,
    /// The spawn's sequence number at that rank.
    pub sequence: i32,
    /// The spawned world.
    pub child_world: Arc<str>,
}

/// Why a listed process could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnreachedReason {
    /// The connector could not open it (remote host, gone, not permitted).
    Connect(ConnectError),
    /// It was opened, but its `MPI2DD_info` is missing or invalid.
    Read(Error),
}

/// The error and every source under it, joined with `: ` (a reason is not an error: it
/// prints the whole chain).
impl std::fmt::Display for UnreachedReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut e: Option<&(dyn std::error::Error + 'static)> = Some(match self {
            UnreachedReason::Connect(e) => e,
            UnreachedReason::Read(e) => e,
        });
        let mut first = true;
        while let Some(err) = e {
            if !first {
                f.write_str(": ")?;
            }
            first = false;
            write!(f, "{err}")?;
            e = err.source();
        }
        Ok(())
    }
}

/// A listed directory or metadirectory that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unreached {
    /// The process.
    pub process: ProcessKey,
    /// How it was listed.
    pub listed_as: BTreeSet<Role>,
    /// Who listed it (empty: named by an entry's `meta_*` members).
    pub listed_by: BTreeSet<ProcessKey>,
    /// Why it could not be read.
    pub reason: UnreachedReason,
}

/// Something wrong in what the job exposes; the rest of the result stands.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Problem {
    /// A process lists itself in its directory or metadirectory table (the draft forbids it);
    /// the entry is ignored.
    ListsItself {
        /// The process.
        process: ProcessKey,
        /// The table.
        table: TableKind,
    },
    /// One entry of a table was left out.
    Entry {
        /// The process whose table it is.
        process: ProcessKey,
        /// The entry and why.
        problem: EntryProblem,
    },
    /// A whole table could not be read (bad size, unmapped...).
    Table {
        /// The process.
        process: ProcessKey,
        /// The table.
        table: TableKind,
        /// Why, as the reader's [`Error`] renders it (with the address and
        /// what was expected). Text, so that problems stay ordered and comparable;
        /// [`read_snapshot`](crate::read::read_snapshot) of that process gives the typed
        /// error.
        error: String,
    },
    /// The process's tables kept changing while they were read.
    Unstable {
        /// The process.
        process: ProcessKey,
    },
    /// The entry process names no metadirectory (`meta_host_name` NULL or unreadable, or
    /// `meta_pid` not positive).
    NoMetadirectory {
        /// The entry process.
        process: ProcessKey,
    },
    /// A directory (the entry process) that no metadirectory lists.
    NotListed {
        /// The process.
        process: ProcessKey,
    },
    /// Two proctable entries give one rank of one world different processes; the first seen
    /// (smallest lister) is kept.
    ConflictingRank {
        /// The world.
        world: Arc<str>,
        /// The rank.
        rank: i32,
        /// The process kept.
        kept: ProcessKey,
        /// The other one.
        other: ProcessKey,
    },
    /// Ranks of one world give different spawn descriptors; the lowest rank's is kept.
    InconsistentSpawn {
        /// The world.
        world: Arc<str>,
        /// The first rank that disagrees with the lowest one.
        rank: i32,
    },
    /// A spawned world's parent world is not among the worlds found (it may belong to a
    /// process that could not be reached); the world is a root of the spawn tree.
    UnknownParentWorld {
        /// The spawned world.
        world: Arc<str>,
        /// The parent named by its spawn descriptor.
        parent: Arc<str>,
    },
    /// Following parents from this world comes back to it; it is made a root.
    SpawnCycle {
        /// A world on the cycle.
        world: Arc<str>,
    },
    /// A bound was reached; `dropped` processes or ranks were not followed.
    LimitReached {
        /// Which bound (`max_processes`, `max_ranks`).
        limit: &'static str,
        /// Its value.
        value: usize,
        /// How many were left out.
        dropped: u64,
    },
}

/// A job as seen through MPI2DD.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Job {
    /// The metadirectory the entry process named (or the entry itself).
    pub metadirectory: Option<ProcessKey>,
    /// Every directory and metadirectory read, by key.
    pub processes: Vec<ProcessRecord>,
    /// Every world, by id.
    pub worlds: Vec<World>,
    /// The spawn tree's edges, sorted by parent world, parent rank, sequence.
    pub spawns: Vec<SpawnEdge>,
    /// Worlds with no (known) parent: the roots of the spawn tree.
    pub roots: Vec<Arc<str>>,
    /// Listed processes that could not be read.
    pub unreachable: Vec<Unreached>,
    /// What was wrong, sorted.
    pub problems: Vec<Problem>,
}

impl Job {
    /// The world called `id`.
    pub fn world(&self, id: &str) -> Option<&World> {
        self.worlds
            .binary_search_by(|w| (*w.id).cmp(id))
            .ok()
            .and_then(|i| self.worlds.get(i))
    }

    /// The worlds `parent_world` spawned, in (parent rank, sequence) order.
    pub fn children(&self, parent_world: &str) -> impl Iterator<Item = &SpawnEdge> {
        self.spawns
            .iter()
            .filter(move |e| *e.parent_world == *parent_world)
    }

    /// Every rank of every world.
    pub fn ranks(&self) -> impl Iterator<Item = (&World, &Rank)> {
        self.worlds
            .iter()
            .flat_map(|w| w.ranks.iter().map(move |r| (w, r)))
    }

    /// What changed from `self` to `newer`: the processes a tool must attach to or forget
    /// after an event.
    pub fn delta(&self, newer: &Job) -> JobDelta {
        let index = |j: &Job| -> BTreeMap<(Arc<str>, i32), ProcessKey> {
            j.ranks()
                .map(|(w, r)| ((w.id.clone(), r.rank), r.process.clone()))
                .collect()
        };
        let (old, new) = (index(self), index(newer));
        let procs = |j: &Job| -> BTreeSet<ProcessKey> {
            j.processes.iter().map(|p| p.process.clone()).collect()
        };
        let (old_p, new_p) = (procs(self), procs(newer));
        type Index = BTreeMap<(Arc<str>, i32), ProcessKey>;
        let moved = |a: &Index, b: &Index| {
            a.iter()
                .filter(|(k, p)| b.get(*k) != Some(*p))
                .map(|((w, r), p)| (w.clone(), *r, p.clone()))
                .collect()
        };
        JobDelta {
            new_ranks: moved(&new, &old),
            gone_ranks: moved(&old, &new),
            new_processes: new_p.difference(&old_p).cloned().collect(),
            gone_processes: old_p.difference(&new_p).cloned().collect(),
        }
    }
}

/// The difference between two [`Job`]s ([`Job::delta`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct JobDelta {
    /// Ranks (world, rank, process) that are new or now run in another process.
    pub new_ranks: Vec<(Arc<str>, i32, ProcessKey)>,
    /// Ranks that are gone or moved away from the process listed here.
    pub gone_ranks: Vec<(Arc<str>, i32, ProcessKey)>,
    /// Directories and metadirectories that appeared.
    pub new_processes: Vec<ProcessKey>,
    /// Directories and metadirectories that are no longer listed.
    pub gone_processes: Vec<ProcessKey>,
}

impl JobDelta {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.new_ranks.is_empty()
            && self.gone_ranks.is_empty()
            && self.new_processes.is_empty()
            && self.gone_processes.is_empty()
    }
}

/// One rank while the traversal collects them.
#[derive(Debug)]
pub(crate) struct RankAcc {
    pub(crate) process: ProcessKey,
    pub(crate) executable: Option<Arc<str>>,
    pub(crate) spawn: Option<SpawnDesc>,
    pub(crate) listed_by: BTreeSet<ProcessKey>,
}

/// Inserts `key` into a bounded lister set, keeping the smallest [`MAX_LISTERS`].
pub(crate) fn add_lister(set: &mut BTreeSet<ProcessKey>, key: &ProcessKey) {
    set.insert(key.clone());
    if set.len() > MAX_LISTERS {
        set.pop_last();
    }
}

/// Groups collected ranks into worlds and builds the spawn tree.
pub(crate) fn build_worlds(
    ranks: BTreeMap<(Arc<str>, i32), RankAcc>,
    problems: &mut Vec<Problem>,
) -> (Vec<World>, Vec<SpawnEdge>, Vec<Arc<str>>) {
    let mut worlds: Vec<World> = Vec::new();
    for ((world, rank), acc) in ranks {
        // Ranks arrive sorted by (world, rank): a new world starts when the id changes.
        if worlds.last().is_none_or(|w| w.id != world) {
            worlds.push(World {
                id: world.clone(),
                ranks: Vec::new(),
                spawned_by: acc.spawn.clone(),
            });
        }
        let Some(w) = worlds.last_mut() else { continue };
        if w.spawned_by != acc.spawn
            && !problems
                .iter()
                .any(|p| matches!(p, Problem::InconsistentSpawn { world: pw, .. } if *pw == world))
        {
            problems.push(Problem::InconsistentSpawn {
                world: world.clone(),
                rank,
            });
        }
        w.ranks.push(Rank {
            rank,
            process: acc.process,
            executable: acc.executable,
            listed_by: acc.listed_by,
        });
    }

    let known: BTreeSet<Arc<str>> = worlds.iter().map(|w| w.id.clone()).collect();
    let parent_of: BTreeMap<Arc<str>, Arc<str>> = worlds
        .iter()
        .filter_map(|w| {
            let s = w.spawned_by.as_ref()?;
            Some((w.id.clone(), s.parent_comm_world_id.clone()))
        })
        .collect();
    let mut spawns = Vec::new();
    let mut roots = Vec::new();
    for w in &worlds {
        let Some(s) = &w.spawned_by else {
            roots.push(w.id.clone());
            continue;
        };
        if !known.contains(&s.parent_comm_world_id) {
            problems.push(Problem::UnknownParentWorld {
                world: w.id.clone(),
                parent: s.parent_comm_world_id.clone(),
            });
            roots.push(w.id.clone());
            continue;
        }
        // Follow parents, at most one step per world: coming back to `w` is a cycle.
        let mut at = s.parent_comm_world_id.clone();
        let mut cyclic = false;
        for _ in 0..=worlds.len() {
            if at == w.id {
                cyclic = true;
                break;
            }
            match parent_of.get(&at) {
                Some(p) => at = p.clone(),
                None => break,
            }
        }
        if cyclic {
            problems.push(Problem::SpawnCycle {
                world: w.id.clone(),
            });
            roots.push(w.id.clone());
            continue;
        }
        spawns.push(SpawnEdge {
            parent_world: s.parent_comm_world_id.clone(),
            parent_rank: s.parent_rank,
            sequence: s.sequence,
            child_world: w.id.clone(),
        });
    }
    spawns.sort();
    (worlds, spawns, roots)
}
