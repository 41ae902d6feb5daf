//! What the ranks' stacks change in the wait-for analysis: a rank known not to be inside MPI
//! does not wait, and a rank that finalized or exited never communicates again.

use std::collections::HashMap;

use super::graph::is_pending;
use super::report::{CommRef, NotWaiting, WaitOp};
use super::{JobSnapshot, MAX_LISTED_CANDIDATES};
use crate::mqd::OpClass;
use crate::stacks::{BlockedCall, RankActivity};

/// The snapshot as the analysis sees it once activities are applied.
pub(super) struct Applied {
    /// The snapshot without the pending sends and receives of ranks not waiting; `None` when
    /// nothing changed.
    pub(super) job: Option<JobSnapshot>,
    /// Those ranks and their operations, by rank.
    pub(super) not_waiting: Vec<NotWaiting>,
    /// By rank index: finalized or exited.
    pub(super) finished: Vec<bool>,
}

/// Removes the pending sends and receives of every rank whose activity says it is not waiting
/// (outside MPI, finalized, exited), listing them instead (a rank with none is not listed: a
/// million computing ranks are no million entries); marks the finished ranks.
pub(super) fn apply(job: &JobSnapshot) -> Applied {
    let finished: Vec<bool> = job
        .ranks
        .iter()
        .map(|r| {
            r.activity
                .as_ref()
                .is_some_and(RankActivity::starts_nothing_more)
        })
        .collect();
    if !job.ranks.iter().any(|r| {
        r.activity
            .as_ref()
            .is_some_and(RankActivity::is_not_waiting)
    }) {
        return Applied {
            job: None,
            not_waiting: Vec::new(),
            finished,
        };
    }
    let mut out = job.clone();
    let mut not_waiting = Vec::new();
    for r in &mut out.ranks {
        let Some(activity) = r.activity.clone().filter(RankActivity::is_not_waiting) else {
            continue;
        };
        let mut ops = Vec::new();
        let mut omitted = 0u64;
        for c in &mut r.communicators {
            let (comm, uid) = (CommRef::of(c), c.unique_id);
            c.operations.retain(|op| {
                let wait = matches!(op.class, OpClass::Send | OpClass::Receive) && is_pending(op);
                if wait {
                    if ops.len() < MAX_LISTED_CANDIDATES {
                        ops.push(WaitOp::of(&comm, uid, op));
                    } else {
                        omitted += 1;
                    }
                }
                !wait
            });
        }
        if ops.is_empty() && omitted == 0 {
            continue;
        }
        not_waiting.push(NotWaiting {
            rank: r.rank,
            activity,
            operations: ops,
            omitted,
        });
    }
    not_waiting.sort_by_key(|n| n.rank);
    Applied {
        job: Some(out),
        not_waiting,
        finished,
    }
}

/// The blocked call of the rank at index `ri`, when its activity says it is in MPI.
pub(super) fn blocked_in(job: &JobSnapshot, ri: usize) -> Option<BlockedCall> {
    job.ranks
        .get(ri)?
        .activity
        .as_ref()?
        .blocked_call()
        .cloned()
}

/// Whether two activities of one rank, in two samples, are the same place: the same MPI
/// call entered from the same call site by the same thread (the number of threads in MPI
/// aside), outside MPI at the same innermost frame, or finalized / exited in both. Unknown is
/// never the same as anything.
pub(super) fn same_place(a: &RankActivity, b: &RankActivity) -> bool {
    let call = |x: &BlockedCall, y: &BlockedCall| {
        x.call == y.call && x.symbol == y.symbol && x.tid == y.tid && x.call_site == y.call_site
    };
    match (a, b) {
        (RankActivity::InMpi(x), RankActivity::InMpi(y))
        | (RankActivity::Finalizing(x), RankActivity::Finalizing(y)) => call(x, y),
        (RankActivity::NotInMpi { at: x }, RankActivity::NotInMpi { at: y }) => x == y,
        (RankActivity::Finalized, RankActivity::Finalized)
        | (RankActivity::Exited, RankActivity::Exited) => true,
        _ => false,
    }
}

/// Each later snapshot's activities, by rank: what [`same_place`] compares a rank's first
/// activity with.
pub(super) fn by_rank(snapshots: &[JobSnapshot]) -> Vec<HashMap<u64, &RankActivity>> {
    snapshots
        .iter()
        .map(|s| {
            s.ranks
                .iter()
                .filter_map(|r| Some((r.rank, r.activity.as_ref()?)))
                .collect()
        })
        .collect()
}
