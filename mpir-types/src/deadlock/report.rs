//! The public report: verdict, cycles, blocked ranks, every wait; its text form.
//!
//! `waits` holds the parts that name waits (communicators, operations, waits, cycles, blocked
//! ranks), `collective_hang` the collective hangs seen in the stacks, `text` the text form and
//! `build` the report made from the analysis.

mod build;
mod collective_hang;
mod text;
mod waits;

pub(super) use build::build;
pub use collective_hang::{CollectiveCall, CollectiveHang, Elsewhere, ElsewhereRanks};
pub use waits::{
    BlockedRank, CommRef, Cycle, NotWaiting, RankState, Step, Wait, WaitOp, WaitTarget,
};

use super::StackWaits;

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
}
