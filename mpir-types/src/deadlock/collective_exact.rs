//! Collective mismatches from the wait-state export: each rank in a collective says on which
//! communicator (its id, the same on every member) and at which of its collectives
//! ([`CollectiveAt`](super::CollectiveAt)), so ranks are matched exactly. On a communicator `C`:
//!
//! * two members at the same number on `C` in different calls, or with different roots, can
//!   never match: a mismatch whatever the others do;
//! * when every member of `C` is in the snapshot and some are in a collective on `C` while
//!   others are not (elsewhere in MPI, in a collective on another communicator, outside MPI,
//!   finished), the ones in it wait for the others: a mismatch, confirmed like any collective
//!   hang over the samples;
//! * members at different numbers on `C` are not a mismatch (a rank may leave a collective
//!   before the others enter it: a broadcast's root), nor are two communicators each of whose
//!   members are in one same collective (sub-communicators in different collectives).

use std::collections::{BTreeMap, BTreeSet};

use super::collective::matched_name;
use super::report::{CollectiveCall, CollectiveHang, CommRef, Elsewhere, ElsewhereRanks};
use super::{JobSnapshot, MAX_LISTED_CANDIDATES, RankSnapshot, WaitSource};
use crate::ranks::RankSet;
use crate::stacks::RankActivity;

/// A collective call as the exact rules tell calls apart: name, number, root.
type CallKey = (String, u32, Option<u64>);

/// The hangs, one per communicator with a mismatch; `None` when the exact rules do not apply
/// (some rank of the snapshot has no wait-state export).
pub(super) fn find(job: &JobSnapshot) -> Option<Vec<CollectiveHang>> {
    if job.ranks.is_empty() || job.ranks.iter().any(|r| r.source != WaitSource::WaitStates) {
        return None;
    }
    // Members of each communicator in a collective: (rank index, its local rank).
    let mut on: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    for (i, r) in job.ranks.iter().enumerate() {
        if let Some(c) = &r.collective {
            on.entry(c.comm).or_default().push(i);
        }
    }
    let mut hangs = Vec::new();
    for (comm, in_it) in on {
        // The communicator as its members list it.
        let members: Vec<usize> = job
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, r)| r.communicators.iter().any(|c| c.context_id == Some(comm)))
            .map(|(i, _)| i)
            .collect();
        let Some(desc) = in_it
            .first()
            .and_then(|&i| job.ranks.get(i))
            .and_then(|r| r.communicators.iter().find(|c| c.context_id == Some(comm)))
        else {
            continue;
        };
        let at = |i: usize| job.ranks.get(i).and_then(|r| r.collective.as_ref());
        // Same number, different call or root: never matched.
        let mut by_seq: BTreeMap<u32, BTreeSet<(String, Option<u64>)>> = BTreeMap::new();
        for &i in &in_it {
            if let Some(c) = at(i) {
                by_seq
                    .entry(c.seq)
                    .or_default()
                    .insert((matched_name(&c.call).to_string(), c.root));
            }
        }
        let conflicting = by_seq.values().any(|calls| calls.len() > 1);
        let all_present = members.len() as u64 == desc.size;
        let outside: Vec<usize> = members
            .iter()
            .copied()
            .filter(|i| !in_it.contains(i))
            .collect();
        let others_elsewhere = all_present && !outside.is_empty();
        if !conflicting && !others_elsewhere {
            continue;
        }
        let comm_ref = CommRef::of(desc);
        let mut calls: BTreeMap<CallKey, (Vec<u64>, BTreeSet<_>)> = BTreeMap::new();
        for &i in &in_it {
            let (Some(c), Some(r)) = (at(i), job.ranks.get(i)) else {
                continue;
            };
            let e = calls
                .entry((matched_name(&c.call).to_string(), c.seq, c.root))
                .or_default();
            e.0.push(r.rank);
            if let Some(site) = r
                .activity
                .as_ref()
                .and_then(RankActivity::blocked_call)
                .and_then(|b| b.call_site.clone())
                && e.1.len() < MAX_LISTED_CANDIDATES
            {
                e.1.insert(site);
            }
        }
        let mut elsewhere: BTreeMap<Elsewhere, Vec<u64>> = BTreeMap::new();
        for &i in &outside {
            let Some(r) = job.ranks.get(i) else { continue };
            elsewhere.entry(place(r)).or_default().push(r.rank);
        }
        let in_comm: BTreeSet<usize> = members.iter().copied().collect();
        hangs.push(CollectiveHang {
            calls: calls
                .into_iter()
                .map(|((call, seq, root), (ranks, sites))| {
                    let mut c = CollectiveCall {
                        call,
                        ranks: RankSet::from_ranks(ranks),
                        communicator: Some(comm_ref.clone()),
                        call_sites: sites.into_iter().collect(),
                        sequence: Some(seq),
                        root,
                    };
                    c.call_sites.truncate(MAX_LISTED_CANDIDATES);
                    c
                })
                .collect(),
            elsewhere: elsewhere
                .into_iter()
                .map(|(what, ranks)| ElsewhereRanks {
                    what,
                    ranks: RankSet::from_ranks(ranks),
                })
                .collect(),
            unknown: RankSet::new(),
            not_members: RankSet::from_ranks(
                job.ranks
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !in_comm.contains(i))
                    .map(|(_, r)| r.rank),
            ),
        });
    }
    Some(hangs)
}

/// Where a member that is not in the communicator's collective is.
fn place(r: &RankSnapshot) -> Elsewhere {
    if let Some(c) = &r.collective {
        return Elsewhere::InMpi {
            call: c.call.clone(),
        };
    }
    match &r.activity {
        Some(RankActivity::InMpi(c) | RankActivity::Finalizing(c)) => Elsewhere::InMpi {
            call: c.call.clone(),
        },
        Some(RankActivity::Finalized) => Elsewhere::Finalized,
        Some(RankActivity::Exited) => Elsewhere::Exited,
        _ => Elsewhere::NotInMpi,
    }
}
