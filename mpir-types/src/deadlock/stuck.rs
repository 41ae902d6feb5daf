//! Ranks blocked inside MPI whose waits no queue shows, from their stacks alone: the
//! stacks-only verdict (the rule is in the [module documentation](super)).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::activity::same_place;
use super::graph::is_pending;
use super::report::{DeadlockReport, RankState};
use super::{JobSnapshot, WaitSource};
use crate::mqd::OpClass;
use crate::ranks::RankSet;
use crate::stacks::{CallSite, RankActivity};

/// Ranks inside MPI whose waits the queues do not show, and where every other rank is: the
/// stacks' account of a job that the queues could not explain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct StackWaits {
    /// Whether it is a hang: every rank of the job is blocked inside MPI without a wait the
    /// queues explain (or in a deadlock the queues show), or has finished; none can progress,
    /// none is unknown; with several snapshots, none moved.
    pub hang: bool,
    /// The ranks inside MPI whose waits are unknown, by call and call site.
    pub blocked: Vec<BlockedCalls>,
    /// Of [`blocked`](Self::blocked), the ranks whose queues were not read (the others' queues
    /// were read and show no pending operation: stacks and queues disagree, and the stacks win).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub queues_not_read: RankSet,
    /// Of [`blocked`](Self::blocked), the ranks whose queues were read and show no pending
    /// operation although their stacks are inside MPI (the stacks win: a rank blocked in MPI
    /// is never "not waiting").
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub queues_empty: RankSet,
    /// Of [`blocked`](Self::blocked), the ranks whose waits the queues (or wait-states) do
    /// show, on ranks that are themselves blocked for something unknown: their waits can end
    /// only if those get free.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub waits_on_blocked: RankSet,
    /// Ranks that can still progress, by why.
    pub progressing: Vec<ProgressingRanks>,
    /// Ranks that finalized or exited.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub finished: RankSet,
    /// Ranks of the snapshot whose activity is unknown (no stacks).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub unknown: RankSet,
    /// Ranks of the job not in the snapshot at all (nothing read: [`JobSnapshot::unread`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub unread: u64,
}

/// Ranks blocked in one MPI call from one call site.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct BlockedCalls {
    /// The call's C name (`MPI_Finalize` for ranks finalizing).
    pub call: String,
    /// Where the ranks called it from, when read.
    pub call_site: Option<CallSite>,
    /// The ranks.
    pub ranks: RankSet,
}

/// Why ranks can still progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum WhyProgressing {
    /// No thread is inside MPI.
    NotInMpi,
    /// Its place changed between snapshots.
    Moved,
    /// Its queues show waits that can all complete.
    WaitsCanComplete,
    /// It is in a collective every member of whose communicator is in too, at the same number
    /// (wait-state exports): that collective has all it needs.
    CollectiveComplete,
}

impl std::fmt::Display for WhyProgressing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WhyProgressing::NotInMpi => "not inside MPI",
            WhyProgressing::Moved => "moved between snapshots",
            WhyProgressing::WaitsCanComplete => "its queued waits can complete",
            WhyProgressing::CollectiveComplete => {
                "every member of its collective's communicator is in it"
            }
        })
    }
}

/// Ranks that can progress, for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ProgressingRanks {
    /// Why.
    pub why: WhyProgressing,
    /// The ranks.
    pub ranks: RankSet,
}

/// Where one rank stands for the stacks-only rule.
enum Class {
    /// In MPI, unmoved, with no wait the queues show: its wait is unknown.
    Blocked(String, Option<CallSite>),
    /// In a deadlock the queues show (cycle or blocked by it).
    Deadlocked,
    /// In MPI, unmoved, its queued waits on ranks blocked for something unknown.
    OnUnknown(String, Option<CallSite>),
    Progressing(WhyProgressing),
    Finished,
    Unknown,
}

/// The stacks' account of `first` (confirmed over `rest`, the later snapshots, when given)
/// next to `report`, the queues' analysis of `first`; `None` when no rank is inside MPI with
/// a wait the queues do not show.
pub(super) fn find(
    first: &JobSnapshot,
    rest: &[JobSnapshot],
    report: &DeadlockReport,
    on_unknown: &HashSet<u64>,
) -> Option<StackWaits> {
    let later = super::activity::by_rank(rest);
    // Ranks with waits in the queues' analysis, and those of them that cannot progress. (A
    // rank whose pending operations are all matched has none, but its queues still explain
    // it: see `queued` below.)
    let mut with_waits: HashSet<u64> = HashSet::new();
    let mut deadlocked: HashSet<u64> = HashSet::new();
    for w in &report.waits {
        with_waits.insert(w.rank);
        if w.state != RankState::Progressing {
            deadlocked.insert(w.rank);
        }
    }
    deadlocked.extend(report.blocked.iter().map(|b| b.rank));

    let complete = complete_collectives(first);
    let later_collectives: Vec<HashMap<u64, Option<&super::CollectiveAt>>> = rest
        .iter()
        .map(|s| {
            s.ranks
                .iter()
                .map(|r| (r.rank, r.collective.as_ref()))
                .collect()
        })
        .collect();
    let classify = |r: &super::RankSnapshot| -> Class {
        let Some(a) = r.activity.as_ref() else {
            return Class::Unknown;
        };
        let call = match a {
            RankActivity::Unknown(_) => return Class::Unknown,
            RankActivity::Finalized | RankActivity::Exited => return Class::Finished,
            RankActivity::NotInMpi { .. } => {
                return Class::Progressing(WhyProgressing::NotInMpi);
            }
            RankActivity::InMpi(c) | RankActivity::Finalizing(c) => c,
        };
        // Moved: another place in a later sample, or (wait-states) another collective there
        // — a loop of barriers stays at one call site while its collective number moves.
        let moved = later
            .iter()
            .any(|m| m.get(&r.rank).is_none_or(|b| !same_place(a, b)))
            || later_collectives
                .iter()
                .any(|m| m.get(&r.rank).copied() != Some(r.collective.as_ref()));
        if moved {
            return Class::Progressing(WhyProgressing::Moved);
        }
        if deadlocked.contains(&r.rank) {
            return Class::Deadlocked;
        }
        if r.collective
            .as_ref()
            .is_some_and(|c| complete.contains(&c.comm))
        {
            return Class::Progressing(WhyProgressing::CollectiveComplete);
        }
        let queued = r.source != WaitSource::Stacks
            && (with_waits.contains(&r.rank)
                || r.communicators.iter().any(|c| {
                    c.operations.iter().any(|op| {
                        matches!(op.class, OpClass::Send | OpClass::Receive) && is_pending(op)
                    })
                }));
        if queued && on_unknown.contains(&r.rank) {
            return Class::OnUnknown(call.call.clone(), call.call_site.clone());
        }
        if queued {
            return Class::Progressing(WhyProgressing::WaitsCanComplete);
        }
        Class::Blocked(call.call.clone(), call.call_site.clone())
    };

    let mut blocked: BTreeMap<(String, Option<CallSite>), Vec<u64>> = BTreeMap::new();
    let mut progressing: BTreeMap<WhyProgressing, Vec<u64>> = BTreeMap::new();
    let (mut finished, mut unknown) = (Vec::new(), Vec::new());
    let (mut queues_not_read, mut queues_empty) = (Vec::new(), Vec::new());
    let mut waits_on_blocked = Vec::new();
    for r in &first.ranks {
        match classify(r) {
            Class::Blocked(call, site) => {
                blocked.entry((call, site)).or_default().push(r.rank);
                if r.source != WaitSource::Stacks {
                    queues_empty.push(r.rank);
                } else {
                    queues_not_read.push(r.rank);
                }
            }
            Class::Deadlocked => {}
            Class::OnUnknown(call, site) => {
                blocked.entry((call, site)).or_default().push(r.rank);
                waits_on_blocked.push(r.rank);
            }
            Class::Progressing(why) => progressing.entry(why).or_default().push(r.rank),
            Class::Finished => finished.push(r.rank),
            Class::Unknown => unknown.push(r.rank),
        }
    }
    if blocked.is_empty() {
        return None;
    }
    let hang = progressing.is_empty() && unknown.is_empty() && first.unread == 0;
    Some(StackWaits {
        hang,
        blocked: blocked
            .into_iter()
            .map(|((call, call_site), ranks)| BlockedCalls {
                call,
                call_site,
                ranks: RankSet::from_ranks(ranks),
            })
            .collect(),
        queues_not_read: RankSet::from_ranks(queues_not_read),
        queues_empty: RankSet::from_ranks(queues_empty),
        waits_on_blocked: RankSet::from_ranks(waits_on_blocked),
        progressing: progressing
            .into_iter()
            .map(|(why, ranks)| ProgressingRanks {
                why,
                ranks: RankSet::from_ranks(ranks),
            })
            .collect(),
        finished: RankSet::from_ranks(finished),
        unknown: RankSet::from_ranks(unknown),
        unread: first.unread,
    })
}

impl StackWaits {
    /// Every rank of [`blocked`](Self::blocked).
    pub fn blocked_ranks(&self) -> RankSet {
        let mut all = RankSet::new();
        for b in &self.blocked {
            all = all.union(&b.ranks);
        }
        all
    }

    /// The report's lines about these ranks (after its summary).
    pub(super) fn write_lines(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.hang {
            writeln!(f, "blocked inside MPI:")?;
        } else {
            writeln!(
                f,
                "inside MPI, waiting for what no queue shows (not a hang: other ranks may still \
                 progress):"
            )?;
        }
        for b in &self.blocked {
            writeln!(f, "  {b}")?;
        }
        if !self.queues_not_read.is_empty() {
            writeln!(
                f,
                "  their waits come from their stacks: queues not read for {}",
                ranks_text(&self.queues_not_read)
            )?;
        }
        if !self.queues_empty.is_empty() {
            writeln!(
                f,
                "  the queues of {} show no pending operation, but their stacks are in MPI",
                ranks_text(&self.queues_empty)
            )?;
        }
        if !self.waits_on_blocked.is_empty() {
            writeln!(
                f,
                "  {} wait, by their queues, on ranks blocked for something unknown",
                ranks_text(&self.waits_on_blocked)
            )?;
        }
        if !self.finished.is_empty() {
            writeln!(f, "  {} finalized or exited", ranks_text(&self.finished))?;
        }
        for p in &self.progressing {
            writeln!(f, "  {}: {}", ranks_text(&p.ranks), p.why)?;
        }
        if !self.unknown.is_empty() {
            writeln!(f, "  {}: unknown (no stacks)", ranks_text(&self.unknown))?;
        }
        if self.unread > 0 {
            writeln!(f, "  {} more ranks not read at all", self.unread)?;
        }
        Ok(())
    }
}

/// The communicators (context ids) whose every member is in the snapshot, in one same
/// collective (call, number and root) on it, by the wait-state exports.
fn complete_collectives(job: &JobSnapshot) -> HashSet<u64> {
    let mut at: BTreeMap<u64, (Vec<&super::CollectiveAt>, u64)> = BTreeMap::new();
    for r in &job.ranks {
        if let Some(c) = &r.collective {
            let size = r
                .communicators
                .iter()
                .find(|q| q.context_id == Some(c.comm))
                .map_or(0, |q| q.size);
            let e = at.entry(c.comm).or_insert((Vec::new(), size));
            e.0.push(c);
        }
    }
    at.into_iter()
        .filter(|(_, (calls, size))| {
            calls.len() as u64 == *size
                && calls.windows(2).all(|w| match w {
                    [a, b] => a.seq == b.seq && a.call == b.call && a.root == b.root,
                    _ => true,
                })
        })
        .map(|(comm, _)| comm)
        .collect()
}

/// `ranks 0-2` or `rank 3`.
pub(super) fn ranks_text(s: &RankSet) -> String {
    let t = s.to_string();
    if t.contains([',', '-']) {
        format!("ranks {t}")
    } else {
        format!("rank {t}")
    }
}

impl std::fmt::Display for BlockedCalls {
    /// `ranks 0-2 in MPI_Recv at main (ring.c:20)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in {}", ranks_text(&self.ranks), self.call)?;
        match &self.call_site {
            Some(s) => write!(f, " at {s}"),
            None => f.write_str(" (caller not read)"),
        }
    }
}
