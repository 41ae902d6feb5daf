//! Traversal: from any process of a job (a rank, a directory or a metadirectory) to every
//! process of the job.
//!
//! 1. Read the entry process. Its `meta_host_name`/`meta_pid` name the metadirectory (a
//!    process flagged `I_AM_METADIR` is its own).
//! 2. Breadth-first from the metadirectory: read each process once, follow its
//!    `metadirectory_table` and `directory_table` entries, and collect every proctable entry.
//!    Processes are keys `(canonical host, pid)`; a key is followed once however many tables
//!    list it, so cycles between metadirectories end; an entry naming its own process is a
//!    [`Problem::ListsItself`] and is not followed.
//! 3. Ranks are deduplicated by `(comm_world_id, rank)`, grouped into worlds, and the spawn
//!    tree is built from the spawn descriptors ([`crate::job`]).
//!
//! Bounded: at most [`TraverseOptions::max_processes`] distinct directories and
//! metadirectories are followed and [`TraverseOptions::max_ranks`] ranks kept, each table is
//! bounded by [`ReadOptions`]; what a bound cut off is reported as [`Problem::LimitReached`].
//! A listed process that cannot be reached is an [`Unreached`] entry of the result, not an
//! error. Only a failure to read the entry process itself is an error.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use thiserror::Error;

use crate::connect::{ConnectError, Connector, ProcessKey};
use crate::error::Error;
use crate::flags::MpiFlags;
use crate::job::{
    Job, Problem, ProcessRecord, RankAcc, Role, Unreached, UnreachedReason, add_lister,
    build_worlds,
};
use crate::read::{ReadOptions, Snapshot, TableKind, read_snapshot};

/// Bounds of a traversal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraverseOptions {
    /// Bounds for reading each process.
    pub read: ReadOptions,
    /// Most distinct directories and metadirectories followed. Default: 4096.
    pub max_processes: usize,
    /// Most ranks kept. Default: 2^23.
    pub max_ranks: usize,
}

impl Default for TraverseOptions {
    fn default() -> Self {
        TraverseOptions {
            read: ReadOptions::default(),
            max_processes: 4096,
            max_ranks: 1 << 23,
        }
    }
}

impl TraverseOptions {
    /// Sets the bounds for reading each process.
    pub fn with_read(mut self, read: ReadOptions) -> Self {
        self.read = read;
        self
    }

    /// Sets the most directories and metadirectories followed.
    pub fn with_max_processes(mut self, max_processes: usize) -> Self {
        self.max_processes = max_processes;
        self
    }

    /// Sets the most ranks kept.
    pub fn with_max_ranks(mut self, max_ranks: usize) -> Self {
        self.max_ranks = max_ranks;
        self
    }
}

/// Why the entry process could not be read (anything after it is a partial result instead).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TraverseError {
    /// The entry process could not be opened.
    #[error("cannot open the entry process")]
    Connect(#[from] ConnectError),
    /// The entry process has no valid `MPI2DD_info`.
    #[error("entry process {process}: {error}")]
    Read {
        /// The entry process.
        process: ProcessKey,
        /// Why.
        error: Error,
    },
}

/// A traversal's result: where it started and the job it found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Traversal {
    /// The entry process.
    pub entry: ProcessKey,
    /// The entry's own snapshot.
    pub entry_snapshot: Snapshot,
    /// The job.
    pub job: Job,
}

/// Walks the job from `host`:`pid`. See the [module documentation](self).
pub fn traverse<C: Connector + ?Sized>(
    connector: &C,
    host: &str,
    pid: i32,
    options: &TraverseOptions,
) -> Result<Traversal, TraverseError> {
    let entry = ProcessKey::new(connector.canonical_host(host), pid);
    let entry_snapshot = {
        let target = connector.connect(&entry)?;
        read_snapshot(&target, &options.read).map_err(|error| TraverseError::Read {
            process: entry.clone(),
            error,
        })?
    };
    let mut w = Walker {
        connector,
        options,
        listings: BTreeMap::new(),
        queue: VecDeque::new(),
        records: BTreeMap::new(),
        ranks: BTreeMap::new(),
        unreachable: Vec::new(),
        problems: Vec::new(),
        dropped_processes: 0,
        dropped_ranks: 0,
    };
    let info = &entry_snapshot.info;
    let metadirectory = if info.mpi_flags.contains(MpiFlags::I_AM_METADIR) {
        Some(entry.clone())
    } else {
        match (&entry_snapshot.meta_host, info.meta_pid) {
            (Some(h), p) if p > 0 => Some(ProcessKey::new(connector.canonical_host(h), p)),
            _ => None,
        }
    };
    match &metadirectory {
        Some(m) => w.list(m, Role::Metadirectory, None, None),
        None => w.problems.push(Problem::NoMetadirectory {
            process: entry.clone(),
        }),
    }
    let mut cached = Some(entry_snapshot.clone());
    while let Some(key) = w.queue.pop_front() {
        let snap = if key == entry { cached.take() } else { None };
        w.visit(&key, snap);
    }
    // A directory entry that no metadirectory listed still contributes its proctable.
    let is_dir = info.mpi_flags.contains(MpiFlags::I_AM_DIR) || info.proctable != 0;
    if is_dir && !w.records.contains_key(&entry) && !w.is_unreached(&entry) {
        w.problems.push(Problem::NotListed {
            process: entry.clone(),
        });
        w.list(&entry, Role::Directory, None, None);
        if w.queue.pop_front().is_some() {
            w.visit(&entry, cached.take());
        }
    }
    Ok(Traversal {
        entry,
        entry_snapshot,
        job: w.finish(metadirectory),
    })
}

struct Listing {
    roles: BTreeSet<Role>,
    by: BTreeSet<ProcessKey>,
    /// The executable named by the smallest lister that names one (deterministic whatever
    /// the order of the walk).
    executable: Option<(ProcessKey, Arc<str>)>,
}

impl Listing {
    fn add(&mut self, role: Role, by: Option<&ProcessKey>, executable: Option<&Arc<str>>) {
        self.roles.insert(role);
        let Some(by) = by else { return };
        add_lister(&mut self.by, by);
        if let Some(exe) = executable
            && self.executable.as_ref().is_none_or(|(k, _)| by < k)
        {
            self.executable = Some((by.clone(), exe.clone()));
        }
    }
}

struct Walker<'c, C: ?Sized> {
    connector: &'c C,
    options: &'c TraverseOptions,
    /// Every process listed so far (bounded by `max_processes`), with how and by whom.
    listings: BTreeMap<ProcessKey, Listing>,
    queue: VecDeque<ProcessKey>,
    records: BTreeMap<ProcessKey, ProcessRecord>,
    ranks: BTreeMap<(Arc<str>, i32), RankAcc>,
    unreachable: Vec<(ProcessKey, UnreachedReason)>,
    problems: Vec<Problem>,
    dropped_processes: u64,
    dropped_ranks: u64,
}

impl<C: Connector + ?Sized> Walker<'_, C> {
    /// Records that `by` lists `key` as `role`; queues `key` the first time.
    fn list(
        &mut self,
        key: &ProcessKey,
        role: Role,
        by: Option<&ProcessKey>,
        executable: Option<&Arc<str>>,
    ) {
        if let Some(l) = self.listings.get_mut(key) {
            l.add(role, by, executable);
            return;
        }
        if self.listings.len() >= self.options.max_processes {
            self.dropped_processes += 1;
            return;
        }
        let mut l = Listing {
            roles: BTreeSet::new(),
            by: BTreeSet::new(),
            executable: None,
        };
        l.add(role, by, executable);
        self.listings.insert(key.clone(), l);
        self.queue.push_back(key.clone());
    }

    fn is_unreached(&self, key: &ProcessKey) -> bool {
        self.unreachable.iter().any(|(k, _)| k == key)
    }

    fn visit(&mut self, key: &ProcessKey, cached: Option<Snapshot>) {
        let snap = match cached {
            Some(s) => s,
            None => {
                let read = self
                    .connector
                    .connect(key)
                    .map_err(UnreachedReason::Connect)
                    .and_then(|t| {
                        read_snapshot(&t, &self.options.read).map_err(UnreachedReason::Read)
                    });
                match read {
                    Ok(s) => s,
                    Err(reason) => {
                        self.unreachable.push((key.clone(), reason));
                        return;
                    }
                }
            }
        };
        for p in &snap.problems {
            self.problems.push(Problem::Entry {
                process: key.clone(),
                problem: p.clone(),
            });
        }
        for (table, e) in &snap.table_errors {
            self.problems.push(Problem::Table {
                process: key.clone(),
                table: *table,
                error: e.to_string(),
            });
        }
        if snap.unstable {
            self.problems.push(Problem::Unstable {
                process: key.clone(),
            });
        }
        // A metadirectory names itself through meta_executable_name: its own word comes
        // first, then its listers'.
        let own_executable = (key.pid == snap.info.meta_pid
            && snap
                .meta_host
                .as_deref()
                .is_some_and(|h| self.connector.canonical_host(h) == key.host))
        .then(|| snap.meta_executable.clone())
        .flatten();
        for (table, role, entries) in [
            (
                TableKind::MetadirectoryTable,
                Role::Metadirectory,
                &snap.metadirectories,
            ),
            (
                TableKind::DirectoryTable,
                Role::Directory,
                &snap.directories,
            ),
        ] {
            let mut listed_self = false;
            for d in entries {
                let k = ProcessKey::new(self.connector.canonical_host(&d.host), d.pid);
                if k == *key {
                    listed_self = true;
                    continue;
                }
                self.list(&k, role, Some(key), d.executable.as_ref());
            }
            if listed_self {
                self.problems.push(Problem::ListsItself {
                    process: key.clone(),
                    table,
                });
            }
        }
        for p in &snap.proctable {
            let process = ProcessKey::new(self.connector.canonical_host(&p.host), p.pid);
            let full = self.ranks.len() >= self.options.max_ranks;
            match self.ranks.get_mut(&(p.comm_world_id.clone(), p.rank)) {
                Some(acc) if acc.process == process => add_lister(&mut acc.listed_by, key),
                Some(acc) => {
                    let (kept, other) = (acc.process.clone(), process);
                    self.problems.push(Problem::ConflictingRank {
                        world: p.comm_world_id.clone(),
                        rank: p.rank,
                        kept,
                        other,
                    });
                }
                None if full => self.dropped_ranks += 1,
                None => {
                    self.ranks.insert(
                        (p.comm_world_id.clone(), p.rank),
                        RankAcc {
                            process,
                            executable: p.executable.clone(),
                            spawn: p.spawn.clone(),
                            listed_by: BTreeSet::from([key.clone()]),
                        },
                    );
                }
            }
        }
        let listing = self.listings.get(key);
        self.records.insert(
            key.clone(),
            ProcessRecord {
                process: key.clone(),
                executable: own_executable,
                mpi_flags: snap.info.mpi_flags,
                listed_as: listing.map(|l| l.roles.clone()).unwrap_or_default(),
                listed_by: listing.map(|l| l.by.clone()).unwrap_or_default(),
                proctable_entries: snap.proctable.len(),
            },
        );
    }

    fn finish(mut self, metadirectory: Option<ProcessKey>) -> Job {
        if self.dropped_processes > 0 {
            self.problems.push(Problem::LimitReached {
                limit: "max_processes",
                value: self.options.max_processes,
                dropped: self.dropped_processes,
            });
        }
        if self.dropped_ranks > 0 {
            self.problems.push(Problem::LimitReached {
                limit: "max_ranks",
                value: self.options.max_ranks,
                dropped: self.dropped_ranks,
            });
        }
        let (worlds, spawns, roots) = build_worlds(self.ranks, &mut self.problems);
        let mut problems = self.problems;
        problems.sort();
        problems.dedup();
        let mut unreachable: Vec<Unreached> = self
            .unreachable
            .into_iter()
            .map(|(process, reason)| {
                let l = self.listings.get(&process);
                Unreached {
                    listed_as: l.map(|l| l.roles.clone()).unwrap_or_default(),
                    listed_by: l.map(|l| l.by.clone()).unwrap_or_default(),
                    process,
                    reason,
                }
            })
            .collect();
        unreachable.sort_by(|a, b| a.process.cmp(&b.process));
        // Listers are final only now: refresh them in the records.
        let mut processes: Vec<ProcessRecord> = self.records.into_values().collect();
        for p in &mut processes {
            if let Some(l) = self.listings.get(&p.process) {
                p.listed_as = l.roles.clone();
                p.listed_by = l.by.clone();
                if p.executable.is_none() {
                    p.executable = l.executable.as_ref().map(|(_, e)| e.clone());
                }
            }
        }
        Job {
            metadirectory,
            processes,
            worlds,
            spawns,
            roots,
            unreachable,
            problems,
        }
    }
}
