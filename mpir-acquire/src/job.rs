//! What acquisition returns: the starter, its flags, the table and how each rank was handled.

use std::collections::BTreeMap;

use mpir_target::proctable::ProcTable;
use mpir_types::mpir::{MpirFlags, Rank};

use crate::quirks::Launcher;

/// The starter process as found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Starter {
    /// Its pid.
    pub pid: u32,
    /// Address of `MPIR_Breakpoint`.
    pub breakpoint: u64,
    /// The image that defines `MPIR_Breakpoint` (the starter's executable, or a library such
    /// as Open MPI's `libopen-rte.so`), when known.
    pub image: Option<String>,
    /// The presence-only flags (present + value: real starters define them with value 0).
    pub flags: MpirFlags,
    /// Which launcher this looks like, when one of the catalogued ones.
    pub launcher: Option<Launcher>,
    /// Whether this tool set `MPIR_being_debugged` (it is set back to 0 on detach).
    pub set_being_debugged: bool,
}

impl Starter {
    /// Whether the starter is a separate process from the ranks (`MPIR_i_am_starter` defined);
    /// otherwise the starter is rank 0 itself.
    pub fn is_separate(&self) -> bool {
        self.flags.i_am_starter.present
    }
}

/// How a rank was handled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum RankControl {
    /// Not attached (not selected, and the starter allows partial attach).
    NotAttached,
    /// Attached; these are its threads.
    Attached {
        /// Thread ids.
        threads: Vec<u32>,
    },
    /// Attaching failed (e.g. it exited meanwhile, or the pid is not local).
    Failed {
        /// Why.
        reason: String,
    },
}

/// An acquired MPI job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Job {
    /// The starter.
    pub starter: Starter,
    /// The process descriptor table as read (layout and its source, raw entries, resolved
    /// ranks and per-entry problems).
    pub table: ProcTable,
    /// How each rank that we tried to attach was handled; ranks not listed were not attached.
    pub control: BTreeMap<u64, RankControl>,
    /// Facts worth telling the user (quirks met, fallbacks taken, events ignored).
    pub notes: Vec<String>,
}

impl Job {
    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.table.resolved.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.table.resolved.is_empty()
    }

    /// Every rank, in order, with its names.
    pub fn ranks(&self) -> impl ExactSizeIterator<Item = Rank<'_>> + '_ {
        self.table.resolved.ranks()
    }

    /// How rank `rank` was handled.
    pub fn control(&self, rank: u64) -> &RankControl {
        self.control.get(&rank).unwrap_or(&RankControl::NotAttached)
    }

    /// The pids of the ranks we hold (attached).
    pub fn attached_pids(&self) -> Vec<u32> {
        self.control
            .iter()
            .filter(|(_, c)| matches!(c, RankControl::Attached { .. }))
            .filter_map(|(&r, _)| {
                let pid = self
                    .table
                    .resolved
                    .entries
                    .get(usize::try_from(r).ok()?)?
                    .pid;
                u32::try_from(pid).ok()
            })
            .collect()
    }
}
