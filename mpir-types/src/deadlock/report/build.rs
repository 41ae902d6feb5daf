//! The report made from the analysis: each wait with its target and its rank's state, the
//! cycles with their chains (in report order), and the ranks blocked outside them.

use std::collections::BTreeSet;

use super::waits::{BlockedRank, CommRef, Cycle, RankState, Step, Wait, WaitOp, WaitTarget};
use super::{DeadlockReport, Verdict};
use crate::deadlock::activity::blocked_in;
use crate::deadlock::graph::{Analysis, Target};
use crate::deadlock::{JobSnapshot, MAX_LISTED_CANDIDATES};

/// Turns the analysis into the report.
pub(in crate::deadlock) fn build(
    job: &JobSnapshot,
    a: &Analysis,
    samples: usize,
) -> DeadlockReport {
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
