//! What acquisition returns: the starter, its flags, the table and how each rank was handled.

use std::collections::BTreeMap;

use mpir_target::proctable::ProcTable;
use mpir_types::mpir::{DebugState, MpirFlags, Rank};
use mpir_types::node::{Locality, ThisNode};

use mpir_target::TargetError;

use crate::identity::{Proven, Refusal};
use crate::note::Note;
use crate::quirks::Launcher;

/// The starter process as found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Starter {
    /// Its pid.
    pub pid: u32,
    /// Address of `MPIR_Breakpoint` (0 for a starter without MPIR symbols, whose table was
    /// discovered: [`Job::discovered`]).
    pub breakpoint: u64,
    /// The image that defines `MPIR_Breakpoint` (the starter's executable, or a library such
    /// as Open MPI's `libopen-rte.so`), when known.
    pub image: Option<String>,
    /// The presence-only flags (present + value: real starters define them with value 0).
    pub flags: MpirFlags,
    /// Which launcher this looks like, when one of the catalogued ones.
    pub launcher: Option<Launcher>,
    /// Whether this tool set `MPIR_being_debugged` (it is set back to 0 on detach, unless
    /// [`Starter::keeps_being_debugged`]).
    pub set_being_debugged: bool,
    /// Whether the starter waits, after the spawn event, for `MPIR_being_debugged` to be
    /// non-zero (Intel MPI's hydra under `-tv`: [`crate::quirks::INTEL_WAIT_FOR_DEBUGGER`]), so
    /// that a release leaves the flag set instead of making it wait for ever.
    pub keeps_being_debugged: bool,
    /// `MPIR_debug_state` as read when the table was read (raw: a starter may hold a value
    /// the spec does not define), when it could be read.
    pub debug_state: Option<i64>,
    /// The launcher's id of the job, read from [`LAUNCHER_JOB_ID`] when the table was read
    /// (Slurm's `srun`: the Slurm job id), when the starter defines and fills it.
    pub job_id: Option<u64>,
    /// The launcher's id of the job step, read from [`LAUNCHER_STEP_ID`] (Slurm's `srun`: the
    /// step id within [`Starter::job_id`]).
    pub step_id: Option<u64>,
}

/// The starter variable naming its job: a `char *` to a decimal number (TotalView's name,
/// defined by Slurm's `srun`).
pub const LAUNCHER_JOB_ID: &str = "totalview_jobid";
/// The starter variable naming its job step, like [`LAUNCHER_JOB_ID`].
pub const LAUNCHER_STEP_ID: &str = "totalview_stepid";

/// A launcher id as the starter holds it: ASCII decimal digits (surrounding blanks allowed),
/// at most 20 of them, fitting a `u64`. Anything else is refused with the reason.
pub(crate) fn parse_launcher_id(bytes: &[u8]) -> Result<u64, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| format!("not text ({} bytes)", bytes.len()))?
        .trim();
    if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "not a decimal number: {:?}",
            text.escape_debug().to_string()
        ));
    }
    text.parse::<u64>().map_err(|e| format!("{text}: {e}"))
}

impl Starter {
    /// [`Starter::debug_state`] as the spec names it.
    pub fn debug_state_name(&self) -> Option<DebugState> {
        self.debug_state.map(DebugState::from_raw)
    }

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
    /// Not attached: not needed (attach mode reads the table without touching ranks unless
    /// asked to hold them), or not selected (and the starter allows partial attach).
    NotAttached,
    /// On another node (or on no usable host): nothing on this machine was done to its pid.
    Remote,
    /// Attached (proven to be the rank first); these are its threads.
    Attached {
        /// Thread ids.
        threads: Vec<u32>,
        /// How it was proven: in its program, or caught between its fork and its exec.
        proven: Proven,
    },
    /// Not touched: it could not be shown to be the rank the table names.
    Refused {
        /// Why.
        reason: Refusal,
    },
    /// Proven, but attaching failed (e.g. it exited meanwhile).
    Failed {
        /// Why (serialized as its text).
        #[cfg_attr(
            feature = "serde",
            serde(serialize_with = "crate::note::serialize_error")
        )]
        error: TargetError,
    },
}

/// One node of a job: a distinct host string and its ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Node<'a> {
    /// The host as reported, verbatim (`None`: ranks whose host could not be read).
    pub host: Option<&'a str>,
    /// Whether it is this node.
    pub locality: Locality,
    /// How many ranks it has.
    pub ranks: usize,
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
    /// The ranks found inside a container ([`crate::container`]): the table names the
    /// runtime's process, and the rank (the process held and read) is this one. Ranks not
    /// listed are the table's pids themselves.
    pub containers: BTreeMap<u64, crate::container::Contained>,
    /// Facts worth telling the user (quirks met, fallbacks taken, events ignored).
    pub notes: Vec<Note>,
    /// The facts that said which hosts are this node.
    pub this_node: ThisNode,
    /// When the starter has no MPIR symbols: the table was found by a validated search of its
    /// memory ([`mpir_types::mpir::discover`]), with this evidence; nothing was written into
    /// the starter. `None` when the starter's symbols named the table.
    pub discovered: Option<mpir_types::mpir::discover::Discovered>,
    /// When the job was read through the PMIx tool interface (a launcher without MPIR, such as
    /// Open MPI 5's `prterun`): its namespace, server and library. The starter is then the
    /// launcher ([`Starter::breakpoint`] 0, nothing written into it) and the table is its
    /// `PMIX_QUERY_PROC_TABLE` answer ([`crate::pmix::table`]).
    pub pmix: Option<crate::pmix::PmixJob>,
    /// The locality of each host name, by the name's index in the table's names (`None` for
    /// names that are no rank's host).
    pub(crate) host_locality: Vec<Option<Locality>>,
}

/// The locality of every distinct host name of `table` (by name index).
pub(crate) fn classify_hosts(table: &ProcTable, node: &ThisNode) -> Vec<Option<Locality>> {
    let mut out = vec![None; table.resolved.names.len()];
    for e in &table.resolved.entries {
        if let Some(id) = e.host
            && let Some(slot) = out.get_mut(id.index())
            && slot.is_none()
        {
            *slot = Some(node.classify(Some(table.resolved.name(id))));
        }
    }
    out
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
        match self.control.get(&rank) {
            Some(c) => c,
            None if !self.locality(rank).is_local() => &RankControl::Remote,
            None => &RankControl::NotAttached,
        }
    }

    /// Where rank `rank` lives: this node, another, or unknown (no usable host name, or no
    /// such rank).
    pub fn locality(&self, rank: u64) -> Locality {
        let entry = usize::try_from(rank)
            .ok()
            .and_then(|r| self.table.resolved.entries.get(r));
        match entry.and_then(|e| e.host) {
            Some(id) => self
                .host_locality
                .get(id.index())
                .cloned()
                .flatten()
                .unwrap_or(Locality::Unknown),
            None => Locality::Unknown,
        }
    }

    /// The job's nodes: each distinct host string with its locality and number of ranks, in
    /// order of first appearance; ranks with no readable host are one node with host `None`.
    pub fn nodes(&self) -> Vec<Node<'_>> {
        let mut counts: Vec<usize> = vec![0; self.table.resolved.names.len()];
        let mut order = Vec::new();
        let mut unknown = 0;
        for e in &self.table.resolved.entries {
            match e
                .host
                .and_then(|id| counts.get_mut(id.index()).map(|c| (id, c)))
            {
                Some((id, c)) => {
                    if *c == 0 {
                        order.push(id);
                    }
                    *c += 1;
                }
                None => unknown += 1,
            }
        }
        let mut nodes: Vec<Node<'_>> = order
            .into_iter()
            .map(|id| Node {
                host: Some(self.table.resolved.name(id)),
                locality: self
                    .host_locality
                    .get(id.index())
                    .cloned()
                    .flatten()
                    .unwrap_or(Locality::Unknown),
                ranks: counts.get(id.index()).copied().unwrap_or(0),
            })
            .collect();
        if unknown > 0 {
            nodes.push(Node {
                host: None,
                locality: Locality::Unknown,
                ranks: unknown,
            });
        }
        nodes
    }

    /// The pid of rank `rank`'s process: the one found inside its container
    /// ([`Job::containers`]), else the table's (`None` for no such rank or an invalid pid).
    pub fn pid(&self, rank: u64) -> Option<u32> {
        if let Some(c) = self.containers.get(&rank) {
            return Some(c.pid);
        }
        let pid = self
            .table
            .resolved
            .entries
            .get(usize::try_from(rank).ok()?)?
            .pid;
        u32::try_from(pid).ok().filter(|&p| p > 0)
    }

    /// The ranks we hold (attached): rank, pid (inside a container, the rank's, not the
    /// table's: [`Job::pid`]) and how each was proven.
    pub fn attached(&self) -> Vec<(u64, u32, Proven)> {
        self.control
            .iter()
            .filter_map(|(&r, c)| match c {
                RankControl::Attached { proven, .. } => Some((r, self.pid(r)?, *proven)),
                _ => None,
            })
            .collect()
    }

    /// The pids of the ranks we hold (attached).
    pub fn attached_pids(&self) -> Vec<u32> {
        self.attached().into_iter().map(|(_, pid, _)| pid).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::parse_launcher_id;

    #[test]
    fn launcher_ids_are_decimal_numbers_only() {
        assert_eq!(parse_launcher_id(b"17"), Ok(17));
        assert_eq!(parse_launcher_id(b" 0 "), Ok(0));
        for bad in [
            &b""[..],
            b"-1",
            b"3+0",
            b"0x10",
            b"99999999999999999999999",
            b"\xff\xfe",
        ] {
            assert!(parse_launcher_id(bad).is_err(), "{bad:?}");
        }
    }
}
