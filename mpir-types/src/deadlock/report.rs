//! The public report: verdict, cycles, blocked ranks, every wait; its text form.

use std::collections::BTreeSet;
use std::fmt;

use super::activity::blocked_in;
use super::graph::{Analysis, Target};
use super::{CommQueues, JobSnapshot, MAX_LISTED_CANDIDATES, StackWaits};
use crate::mqd::{Length, OpClass, Operation, Peer};
use crate::ranks::RankSet;
use crate::stacks::{BlockedCall, CallSite, RankActivity};

/// The overall answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "no hang, or a point-to-point cycle, a collective mismatch, or ranks blocked in MPI, each potential or confirmed"
)]
pub enum Verdict {
    /// No rank waits in a cycle, and the stacks (when given) show no collective mismatch.
    NoCycle,
    /// Cycles of pending operations in one snapshot: the ranks *may* be deadlocked.
    PotentialDeadlock,
    /// Cycles whose operations stayed the same in every one of several snapshots.
    Deadlock,
    /// No cycle, but in one snapshot the stacks show ranks in different collectives, or some
    /// in a collective while others are elsewhere ([`DeadlockReport::collective`]).
    PotentialCollectiveMismatch,
    /// No cycle, and a collective mismatch whose ranks stayed at the same place in every one
    /// of several snapshots.
    CollectiveMismatch,
    /// No cycle, no collective mismatch, no rank waiting on finished ones; but in one snapshot
    /// every rank of the job is inside MPI (or finished) without a wait the queues show
    /// ([`DeadlockReport::stack_waits`]): the ranks *may* be hung, who waits for whom unknown.
    PotentialBlockedInMpi,
    /// As [`PotentialBlockedInMpi`](Self::PotentialBlockedInMpi), with no rank moving in any
    /// of several snapshots: a hang whose who-waits-for-whom is unknown (the queues were not
    /// read, or show nothing pending).
    BlockedInMpi,
}

/// A communicator as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CommRef {
    /// Its name (empty when unnamed).
    pub name: String,
    /// The identifier all members share, when known.
    pub context_id: Option<u64>,
    /// Number of members.
    pub size: u64,
    /// Whether the MPI library created it for itself.
    pub internal: bool,
}

impl CommRef {
    pub(super) fn of(c: &CommQueues) -> Self {
        CommRef {
            name: c.name.clone(),
            context_id: c.context_id,
            size: c.size,
            internal: c.internal,
        }
    }
}

impl fmt::Display for CommRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.name.is_empty(), self.context_id) {
            (false, _) => f.write_str(&self.name)?,
            (true, Some(id)) => write!(f, "communicator {id:#x}")?,
            (true, None) => write!(f, "an unnamed communicator of {}", self.size)?,
        }
        if self.internal {
            f.write_str(" (internal)")?;
        }
        Ok(())
    }
}

/// An operation that waits, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WaitOp {
    /// Pending send or pending receive.
    pub class: OpClass,
    /// Its communicator.
    pub comm: CommRef,
    /// The source's identifier of the communicator in the waiting process.
    pub comm_unique_id: u64,
    /// Peer (source of a receive, destination of a send) in the communicator.
    pub peer: Peer,
    /// Tag; `None` for `MPI_ANY_TAG`.
    pub tag: Option<i64>,
    /// Buffer address in the waiting process.
    pub buffer: u64,
    /// Length.
    pub length: Length,
}

impl WaitOp {
    /// Operation `op` of the communicator `comm` (`unique_id` in the waiting process).
    pub(super) fn of(comm: &CommRef, unique_id: u64, op: &Operation) -> Self {
        WaitOp {
            class: op.class,
            comm: comm.clone(),
            comm_unique_id: unique_id,
            peer: op.peer_local,
            tag: op.tag,
            buffer: op.buffer,
            length: op.length,
        }
    }
}

impl fmt::Display for WaitOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.class, self.peer) {
            (OpClass::Send, Peer::Rank(p)) => write!(f, "send to {p}")?,
            (OpClass::Send, _) => f.write_str("send")?,
            (_, Peer::Rank(p)) => write!(f, "receive from {p}")?,
            (_, Peer::Any) => f.write_str("receive from MPI_ANY_SOURCE")?,
            (_, Peer::Unknown(v)) => write!(f, "receive from ?{v}")?,
        }
        match self.tag {
            Some(t) => write!(f, " tag {t}")?,
            None => f.write_str(" tag MPI_ANY_TAG")?,
        }
        write!(f, " on {}", self.comm)
    }
}

/// Whom a wait needs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "an MPI peer is one rank or MPI_ANY_SOURCE"
)]
pub enum WaitTarget {
    /// One rank (a specific source, or a send's destination; possibly the waiting rank).
    Rank {
        /// Its job rank.
        rank: u64,
    },
    /// Any one of the communicator's other members (`MPI_ANY_SOURCE`).
    AnySource {
        /// Their job ranks, sorted, at most [`MAX_LISTED_CANDIDATES`].
        candidates: Vec<u64>,
        /// How many more there are.
        omitted: u64,
    },
}

/// Where the waiting rank stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "a rank progresses, is in a cycle, or waits on a deadlocked rank"
)]
pub enum RankState {
    /// It can progress: every one of its waits can be satisfied.
    Progressing,
    /// It is in cycle `cycle` (an index into [`DeadlockReport::cycles`]).
    InCycle {
        /// The cycle.
        cycle: usize,
    },
    /// It waits on a deadlocked rank without being in a cycle itself.
    BlockedByDeadlock,
}

/// A wait: a pending operation that no available message or posted receive satisfies.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Wait {
    /// The waiting rank.
    pub rank: u64,
    /// Its operation.
    pub op: WaitOp,
    /// Whom it needs.
    pub target: WaitTarget,
    /// Whether its target can progress (so the wait can end).
    pub can_complete: bool,
    /// The waiting rank's state.
    pub state: RankState,
    /// The MPI call the waiting rank is in and its call site, when its stacks were given.
    #[cfg_attr(feature = "serde", serde(default))]
    pub blocked_in: Option<BlockedCall>,
}

/// One link of a cycle's chain: `rank` waits, through `op`, for `waits_for`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Step {
    /// The waiting rank.
    pub rank: u64,
    /// The operation it waits in.
    pub op: WaitOp,
    /// The rank it waits for (for `MPI_ANY_SOURCE`: one of the candidates, all deadlocked).
    pub waits_for: u64,
    /// The MPI call the waiting rank is in and its call site, when its stacks were given.
    #[cfg_attr(feature = "serde", serde(default))]
    pub blocked_in: Option<BlockedCall>,
}

/// A set of deadlocked ranks that wait on one another: a cycle of waits, or for
/// `MPI_ANY_SOURCE` a knot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Cycle {
    /// Every rank of it, sorted.
    pub ranks: Vec<u64>,
    /// One closed chain of waits through it: the last step waits for the first step's rank.
    pub chain: Vec<Step>,
    /// The communicators its waits are on.
    pub communicators: Vec<CommRef>,
}

/// A deadlocked rank outside every cycle: it waits on a deadlocked rank.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct BlockedRank {
    /// The rank.
    pub rank: u64,
    /// Its waits that cannot end.
    pub waits: Vec<WaitOp>,
    /// Deadlocked ranks it waits for directly (sorted, at most [`MAX_LISTED_CANDIDATES`]).
    pub waits_for: Vec<u64>,
    /// The MPI call it is in and its call site, when its stacks were given.
    #[cfg_attr(feature = "serde", serde(default))]
    pub blocked_in: Option<BlockedCall>,
}

/// A rank whose stacks show it is not waiting inside MPI (outside MPI, finalized, exited) and
/// that has pending sends or receives: they are not waits, and are listed here instead.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct NotWaiting {
    /// The rank.
    pub rank: u64,
    /// Where it is.
    pub activity: RankActivity,
    /// Its pending sends and receives (at most [`MAX_LISTED_CANDIDATES`]).
    pub operations: Vec<WaitOp>,
    /// How many more there are.
    pub omitted: u64,
}

/// Ranks in one collective call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CollectiveCall {
    /// The call's C name (without a large-count `_c`); `MPI_Finalize` for ranks finalizing.
    pub call: String,
    /// The ranks in it.
    pub ranks: RankSet,
    /// The communicator, when the queues show it: every one of these ranks has its pending
    /// collective traffic (negative tags, or an internal communicator) on this one
    /// communicator. `None`: unknown.
    pub communicator: Option<CommRef>,
    /// Where the ranks called it from (distinct, sorted, at most [`MAX_LISTED_CANDIDATES`]).
    pub call_sites: Vec<CallSite>,
    /// Its number among the collectives on its communicator, when the wait-state export
    /// says it.
    #[cfg_attr(feature = "serde", serde(default))]
    pub sequence: Option<u32>,
    /// Its root, when the wait-state export says it (rooted collectives).
    #[cfg_attr(feature = "serde", serde(default))]
    pub root: Option<u64>,
}

/// Where ranks that are not in a collective are.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Elsewhere {
    /// In an MPI call that is not a collective (point-to-point, a wait, …).
    InMpi {
        /// The call's C name.
        call: String,
    },
    /// Not inside MPI.
    NotInMpi,
    /// Returned from `MPI_Finalize`.
    Finalized,
    /// The process is gone.
    Exited,
}

impl fmt::Display for Elsewhere {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elsewhere::InMpi { call } => write!(f, "in {call}"),
            Elsewhere::NotInMpi => f.write_str("not inside MPI"),
            Elsewhere::Finalized => f.write_str("finalized"),
            Elsewhere::Exited => f.write_str("exited"),
        }
    }
}

/// Ranks at one place outside every collective.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ElsewhereRanks {
    /// Where they are.
    pub what: Elsewhere,
    /// The ranks.
    pub ranks: RankSet,
}

/// A collective hang seen in the stacks: ranks in different collectives, or some in a
/// collective while others are elsewhere (see the [module documentation](super)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CollectiveHang {
    /// The collectives and their ranks, by call name.
    pub calls: Vec<CollectiveCall>,
    /// The other ranks whose activity is known, by place.
    pub elsewhere: Vec<ElsewhereRanks>,
    /// Ranks of the snapshot whose activity is unknown (not considered). Absent from JSON when
    /// empty (a rank list is never empty text).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub unknown: RankSet,
    /// Ranks of known activity outside every collective that are not members of the one
    /// communicator all the collectives are known to be on (their queues list communicators,
    /// none of them that one): not part of the hang. Absent from JSON when empty.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub not_members: RankSet,
}

impl fmt::Display for CollectiveHang {
    /// `ranks 0-2 in MPI_Barrier; rank 3 in MPI_Reduce; rank 4 not inside MPI`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranks = |s: &RankSet| {
            let t = s.to_string();
            if t.contains([',', '-']) {
                format!("ranks {t}")
            } else {
                format!("rank {t}")
            }
        };
        let mut parts = Vec::new();
        for c in &self.calls {
            let on = c
                .communicator
                .as_ref()
                .map_or_else(String::new, |m| format!(" on {m}"));
            let nth = c
                .sequence
                .map_or_else(String::new, |n| format!(" (its collective #{n})"));
            let root = c.root.map_or_else(String::new, |r| format!(", root {r}"));
            parts.push(format!("{} in {}{root}{on}{nth}", ranks(&c.ranks), c.call));
        }
        for e in &self.elsewhere {
            parts.push(format!("{} {}", ranks(&e.ranks), e.what));
        }
        f.write_str(&parts.join("; "))
    }
}

/// The result of [`analyze`](super::analyze) or [`confirm`](super::confirm).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct DeadlockReport {
    /// The answer: no cycle, a potential deadlock, or a confirmed one.
    pub verdict: Verdict,
    /// Snapshots it rests on.
    pub samples: usize,
    /// Ranks analysed.
    pub ranks: usize,
    /// The cycles, ordered by their lowest rank.
    pub cycles: Vec<Cycle>,
    /// Deadlocked ranks outside the cycles, by rank.
    pub blocked: Vec<BlockedRank>,
    /// Every wait of every rank, by rank.
    pub waits: Vec<Wait>,
    /// What could not be resolved (each such wait is assumed to progress).
    pub notes: Vec<String>,
    /// Notes not kept.
    pub notes_omitted: u64,
    /// Ranks whose stacks show they are not waiting inside MPI and that have pending sends or
    /// receives, with those operations (which therefore are not waits), by rank.
    #[cfg_attr(feature = "serde", serde(default))]
    pub not_waiting: Vec<NotWaiting>,
    /// Collective hangs seen in the stacks (at most one today: the communicators of the
    /// calls are mostly unknown, so all ranks are taken together).
    #[cfg_attr(feature = "serde", serde(default))]
    pub collective: Vec<CollectiveHang>,
    /// Ranks inside MPI whose waits no queue shows (their queues not read, or showing nothing
    /// pending), from their stacks, and where every other rank is; `None` when every rank
    /// inside MPI has its waits in the queues. [`StackWaits::hang`] says whether no rank can
    /// progress.
    #[cfg_attr(feature = "serde", serde(default))]
    pub stack_waits: Option<StackWaits>,
    /// Where each rank's waits came from: its wait-state export, its queues, or its stacks
    /// alone.
    #[cfg_attr(feature = "serde", serde(default))]
    pub sources: Vec<super::SourceRanks>,
}

impl DeadlockReport {
    /// Whether any cycle was found (the reference tool's exit status).
    pub fn has_cycle(&self) -> bool {
        !self.cycles.is_empty()
    }

    /// Whether any hang was found: a cycle, a collective mismatch, or ranks waiting on ranks
    /// that finalized or exited (listed as [`blocked`](Self::blocked) with no cycle).
    pub fn has_hang(&self) -> bool {
        self.has_cycle()
            || !self.collective.is_empty()
            || !self.blocked.is_empty()
            || self.stack_waits.as_ref().is_some_and(|s| s.hang)
    }

    /// Whether some rank is inside MPI waiting for something no queue shows, and the report
    /// cannot say it is a hang (other ranks may progress): the report then makes no claim
    /// about those ranks ("no hang" would be a claim about ranks whose waits are unknown).
    pub fn has_unknown_waits(&self) -> bool {
        self.stack_waits.as_ref().is_some_and(|s| !s.hang)
    }

    /// The verdict of what the report holds, resting on `samples` snapshots: a cycle before a
    /// collective mismatch, potential on one snapshot.
    pub(super) fn verdict_for(&self, samples: usize) -> Verdict {
        let blocked_in_mpi =
            self.blocked.is_empty() && self.stack_waits.as_ref().is_some_and(|s| s.hang);
        match (self.has_cycle(), !self.collective.is_empty(), samples > 1) {
            (true, _, false) => Verdict::PotentialDeadlock,
            (true, _, true) => Verdict::Deadlock,
            (false, true, false) => Verdict::PotentialCollectiveMismatch,
            (false, true, true) => Verdict::CollectiveMismatch,
            (false, false, false) if blocked_in_mpi => Verdict::PotentialBlockedInMpi,
            (false, false, true) if blocked_in_mpi => Verdict::BlockedInMpi,
            (false, false, _) => Verdict::NoCycle,
        }
    }

    /// The first line of the text form.
    pub fn summary(&self) -> String {
        let snaps = match self.samples {
            1 => "1 snapshot".to_string(),
            n => format!("{n} snapshots"),
        };
        let cycles = match self.cycles.len() {
            1 => "1 cycle".to_string(),
            n => format!("{n} cycles"),
        };
        match self.verdict {
            Verdict::NoCycle => {
                let mut s = format!(
                    "no cycle: {} ranks, {} waiting operations, none waits in a cycle ({snaps})",
                    self.ranks,
                    self.waits.len()
                );
                if let Some(w) = self.stack_waits.as_ref().filter(|w| !w.hang) {
                    s.push_str(&format!(
                        "; but {} inside MPI waiting for what no queue shows, so no verdict about them",
                        super::stuck::ranks_text(&w.blocked_ranks())
                    ));
                }
                if !self.blocked.is_empty() {
                    s.push_str(&format!(
                        "; {} ranks wait on ranks that finalized, are finalizing or exited",
                        self.blocked.len()
                    ));
                }
                s
            }
            Verdict::PotentialDeadlock => format!(
                "potential deadlock: {cycles} of pending operations ({snaps}; queues do not show whether a rank is blocked)"
            ),
            Verdict::Deadlock => {
                format!("deadlock: {cycles}, the same pending operations in all {snaps}")
            }
            Verdict::PotentialCollectiveMismatch => format!(
                "potential collective hang: {} ({snaps}; ranks may still be on their way)",
                self.collective_text()
            ),
            Verdict::CollectiveMismatch => format!(
                "collective hang: {}, the same in all {snaps}",
                self.collective_text()
            ),
            Verdict::PotentialBlockedInMpi => format!(
                "potential hang: every rank is inside MPI and none has a wait the queues show \
                 ({snaps}; who waits for whom is unknown, and ranks may still be moving)"
            ),
            Verdict::BlockedInMpi => format!(
                "hang: every rank is blocked inside MPI and none moved in all {snaps}; who \
                 waits for whom is unknown (no queue shows their waits)"
            ),
        }
    }
}

impl DeadlockReport {
    fn collective_text(&self) -> String {
        let parts: Vec<String> = self.collective.iter().map(|c| c.to_string()).collect();
        parts.join(" | ")
    }
}

/// ` in MPI_Recv at main (ring.c:12)`, or nothing.
fn in_call(c: Option<&BlockedCall>) -> String {
    c.map_or_else(String::new, |c| format!(" in {c}"))
}

impl fmt::Display for DeadlockReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.summary())?;
        if self.has_cycle() {
            for c in &self.collective {
                writeln!(f, "collective mismatch too: {c}")?;
            }
        }
        for c in &self.collective {
            for call in &c.calls {
                for s in &call.call_sites {
                    writeln!(f, "  {} called at {s}", call.call)?;
                }
            }
            if !c.unknown.is_empty() {
                writeln!(
                    f,
                    "  not considered (activity unknown): ranks {}",
                    c.unknown
                )?;
            }
            if !c.not_members.is_empty() {
                writeln!(
                    f,
                    "  not considered (not members of its communicator): ranks {}",
                    c.not_members
                )?;
            }
        }
        for (i, c) in self.cycles.iter().enumerate() {
            let ranks: Vec<String> = c.ranks.iter().map(u64::to_string).collect();
            writeln!(f, "cycle {}: ranks {}", i + 1, ranks.join(" "))?;
            for s in &c.chain {
                writeln!(
                    f,
                    "  rank {:<5} {}; waits for rank {}{}",
                    s.rank,
                    s.op,
                    s.waits_for,
                    in_call(s.blocked_in.as_ref())
                )?;
            }
        }
        if !self.blocked.is_empty() {
            if self.has_cycle() {
                writeln!(f, "blocked by the deadlock (not in a cycle):")?;
            } else {
                writeln!(
                    f,
                    "blocked, waiting on ranks that finalized, are finalizing or exited:"
                )?;
            }
            for b in &self.blocked {
                let ops: Vec<String> = b.waits.iter().map(WaitOp::to_string).collect();
                let on: Vec<String> = b.waits_for.iter().map(u64::to_string).collect();
                writeln!(
                    f,
                    "  rank {:<5} {}; waits for rank {}{}",
                    b.rank,
                    ops.join("; "),
                    on.join(", "),
                    in_call(b.blocked_in.as_ref())
                )?;
            }
        }
        if !self.not_waiting.is_empty() {
            writeln!(
                f,
                "not waiting: not inside MPI, finalized or exited (their pending operations are not waits):"
            )?;
            for n in &self.not_waiting {
                let mut ops: Vec<String> = n.operations.iter().map(WaitOp::to_string).collect();
                if n.omitted > 0 {
                    ops.push(format!("{} more", n.omitted));
                }
                let ops = if ops.is_empty() {
                    String::new()
                } else {
                    format!("; pending {}", ops.join("; "))
                };
                writeln!(f, "  rank {:<5} {}{ops}", n.rank, n.activity)?;
            }
        }
        if let Some(w) = &self.stack_waits {
            w.write_lines(f)?;
        }
        if self
            .sources
            .iter()
            .any(|s| s.source != super::WaitSource::Queues)
        {
            let parts: Vec<String> = self
                .sources
                .iter()
                .map(|s| {
                    let what = match s.source {
                        super::WaitSource::WaitStates => "wait-state export",
                        super::WaitSource::Queues => "message queues",
                        _ => "stacks alone",
                    };
                    format!("{what} for {}", super::stuck::ranks_text(&s.ranks))
                })
                .collect();
            writeln!(f, "waits read from: {}", parts.join("; "))?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        if self.notes_omitted > 0 {
            writeln!(f, "note: {} more notes omitted", self.notes_omitted)?;
        }
        Ok(())
    }
}

/// Turns the analysis into the report.
pub(super) fn build(job: &JobSnapshot, a: &Analysis, samples: usize) -> DeadlockReport {
    let job_rank = |ri: usize| job.ranks.get(ri).map_or(u64::MAX, |r| r.rank);
    let state = |ri: usize| match a.component_of.get(ri).copied().flatten() {
        Some(cycle) => RankState::InCycle { cycle },
        None if !a.released.get(ri).copied().unwrap_or(true) => RankState::BlockedByDeadlock,
        None => RankState::Progressing,
    };
    let op_of = |wi: usize| -> Option<WaitOp> {
        let w = a.waits.get(wi)?;
        let c = job.ranks.get(w.op.rank)?.communicators.get(w.op.comm)?;
        let op = c.operations.get(w.op.op)?;
        Some(WaitOp::of(&CommRef::of(c), c.unique_id, op))
    };
    // Members of each communicator as sorted job ranks, once (not once per waiting rank).
    let sorted_members: Vec<Vec<u64>> = a
        .members
        .iter()
        .map(|m| {
            let mut v: Vec<u64> = m.iter().map(|&r| job_rank(r)).collect();
            v.sort_unstable();
            v
        })
        .collect();
    let candidates = |g: usize, except: usize| -> (Vec<u64>, u64) {
        let all = sorted_members.get(g).map_or(&[][..], Vec::as_slice);
        let except = job_rank(except);
        let v: Vec<u64> = all
            .iter()
            .copied()
            .filter(|&m| m != except)
            .take(MAX_LISTED_CANDIDATES)
            .collect();
        let others = all.len() - usize::from(all.binary_search(&except).is_ok());
        (v, others.saturating_sub(MAX_LISTED_CANDIDATES) as u64)
    };

    let mut waits = Vec::with_capacity(a.waits.len());
    for (wi, w) in a.waits.iter().enumerate() {
        let Some(op) = op_of(wi) else { continue };
        let target = match w.target {
            Target::Rank(t) => WaitTarget::Rank { rank: job_rank(t) },
            Target::Group(g) => {
                let (candidates, omitted) = candidates(g, w.op.rank);
                WaitTarget::AnySource {
                    candidates,
                    omitted,
                }
            }
        };
        waits.push(Wait {
            rank: job_rank(w.op.rank),
            op,
            target,
            can_complete: w.satisfied,
            state: state(w.op.rank),
            blocked_in: blocked_in(job, w.op.rank),
        });
    }
    waits.sort_by_key(|w| w.rank);

    let mut cycles = Vec::with_capacity(a.components.len());
    for (ci, ranks) in a.components.iter().enumerate() {
        let chain: Vec<Step> = a
            .chains
            .get(ci)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|&(wi, next)| {
                let ri = a.waits.get(wi)?.op.rank;
                Some(Step {
                    rank: job_rank(ri),
                    op: op_of(wi)?,
                    waits_for: job_rank(next),
                    blocked_in: blocked_in(job, ri),
                })
            })
            .collect();
        let mut comms = BTreeSet::new();
        for &r in ranks {
            for &wi in a.waits_of.get(r).map_or(&[][..], Vec::as_slice) {
                if a.waits.get(wi).is_some_and(|w| !w.satisfied)
                    && let Some(op) = op_of(wi)
                {
                    comms.insert(op.comm);
                }
            }
        }
        cycles.push(Cycle {
            ranks: ranks.iter().map(|&r| job_rank(r)).collect(),
            chain,
            communicators: comms.into_iter().collect(),
        });
    }
    // Report order: by lowest rank (the analysis's order follows Tarjan's).
    let mut order: Vec<usize> = (0..cycles.len()).collect();
    order.sort_by_key(|&i| cycles.get(i).and_then(|c| c.ranks.first().copied()));
    let mut renumber = vec![0; cycles.len()];
    for (new, &old) in order.iter().enumerate() {
        if let Some(x) = renumber.get_mut(old) {
            *x = new;
        }
    }
    let mut sorted: Vec<Option<Cycle>> = cycles.into_iter().map(Some).collect();
    let cycles: Vec<Cycle> = order
        .iter()
        .filter_map(|&i| sorted.get_mut(i).and_then(Option::take))
        .collect();
    for w in &mut waits {
        if let RankState::InCycle { cycle } = &mut w.state {
            *cycle = renumber.get(*cycle).copied().unwrap_or(*cycle);
        }
    }

    let mut blocked = Vec::new();
    for (ri, ws) in a.waits_of.iter().enumerate() {
        if state(ri) != RankState::BlockedByDeadlock || a.finished.get(ri) == Some(&true) {
            continue;
        }
        let mut ops = Vec::new();
        let mut on = BTreeSet::new();
        for &wi in ws {
            let Some(w) = a.waits.get(wi).filter(|w| !w.satisfied) else {
                continue;
            };
            ops.extend(op_of(wi));
            match w.target {
                Target::Rank(t) => {
                    on.insert(job_rank(t));
                }
                Target::Group(g) => on.extend(candidates(g, ri).0),
            }
        }
        blocked.push(BlockedRank {
            rank: job_rank(ri),
            waits: ops,
            waits_for: on.into_iter().take(MAX_LISTED_CANDIDATES).collect(),
            blocked_in: blocked_in(job, ri),
        });
    }
    blocked.sort_by_key(|b| b.rank);

    DeadlockReport {
        verdict: if cycles.is_empty() {
            Verdict::NoCycle
        } else {
            Verdict::PotentialDeadlock
        },
        samples,
        ranks: job.ranks.len(),
        cycles,
        blocked,
        waits,
        notes: a.notes.clone(),
        notes_omitted: a.notes_omitted,
        not_waiting: Vec::new(),
        collective: Vec::new(),
        stack_waits: None,
        sources: Vec::new(),
    }
}
