//! Collective hangs found from stacks: ranks in different collectives, or some in a collective
//! while others are elsewhere (the rule is in the [module documentation](super)).

use std::collections::{BTreeMap, BTreeSet};

use super::report::{CollectiveCall, CollectiveHang, CommRef, Elsewhere, ElsewhereRanks};
use super::{JobSnapshot, MAX_LISTED_CANDIDATES};
use crate::mqd::OpClass;
use crate::ranks::RankSet;
use crate::stacks::{CallKind, CallSite, RankActivity};

/// The name collectives are matched by: the C name without a large-count `_c` suffix
/// (`MPI_Bcast_c` and `MPI_Bcast` are one operation).
pub(super) fn matched_name(call: &str) -> &str {
    call.strip_suffix("_c").unwrap_or(call)
}

#[derive(Default)]
struct Group {
    ranks: Vec<u64>,
    sites: BTreeSet<CallSite>,
    /// The communicators the members' collective traffic is on (none seen: empty).
    comms: BTreeSet<CommRef>,
    /// Members whose collective traffic was not seen.
    without_comm: usize,
}

/// The communicator a rank's collective traffic is on: its pending operations on internal
/// communicators or with negative tags (tags the MPI reserves for itself: user tags are
/// non-negative) — when they are all on one communicator.
fn traffic_comm(job: &JobSnapshot, ri: usize) -> Option<CommRef> {
    let mut seen: Option<CommRef> = None;
    for c in &job.ranks.get(ri)?.communicators {
        let internal_traffic = c.operations.iter().any(|op| {
            matches!(op.class, OpClass::Send | OpClass::Receive)
                && (c.internal || op.tag.is_some_and(|t| t < 0))
        });
        if !internal_traffic {
            continue;
        }
        let here = CommRef::of(c);
        match &seen {
            None => seen = Some(here),
            Some(s) if *s == here => {}
            Some(_) => return None,
        }
    }
    seen
}

/// The collective hangs the ranks show: exactly, by communicator and sequence number, when
/// every rank's wait-state export was read ([`super::collective_exact`]: one per communicator);
/// from call names otherwise (at most one).
pub(super) fn find_all(job: &JobSnapshot) -> Vec<CollectiveHang> {
    super::collective_exact::find(job).unwrap_or_else(|| find(job).into_iter().collect())
}

/// The collective hang the activities show, if any, from call names.
pub(super) fn find(job: &JobSnapshot) -> Option<CollectiveHang> {
    let mut calls: BTreeMap<String, Group> = BTreeMap::new();
    let mut others: Vec<(Elsewhere, usize)> = Vec::new();
    let mut unknown = Vec::new();
    for (ri, r) in job.ranks.iter().enumerate() {
        let place = match &r.activity {
            None | Some(RankActivity::Unknown(_)) => {
                unknown.push(r.rank);
                continue;
            }
            Some(RankActivity::InMpi(c)) if c.kind == CallKind::Collective => Ok(c),
            Some(RankActivity::Finalizing(c)) => Ok(c),
            Some(RankActivity::InMpi(c)) => Err(Elsewhere::InMpi {
                call: c.call.clone(),
            }),
            Some(RankActivity::NotInMpi { .. }) => Err(Elsewhere::NotInMpi),
            Some(RankActivity::Finalized) => Err(Elsewhere::Finalized),
            Some(RankActivity::Exited) => Err(Elsewhere::Exited),
        };
        match place {
            Ok(c) => {
                let g = calls.entry(matched_name(&c.call).to_string()).or_default();
                g.ranks.push(r.rank);
                if let Some(s) = &c.call_site
                    && g.sites.len() < MAX_LISTED_CANDIDATES
                {
                    g.sites.insert(s.clone());
                }
                match traffic_comm(job, ri) {
                    Some(comm) => {
                        g.comms.insert(comm);
                    }
                    None => g.without_comm += 1,
                }
            }
            Err(e) => others.push((e, ri)),
        }
    }
    if calls.is_empty() {
        return None;
    }
    let calls: Vec<CollectiveCall> = calls
        .into_iter()
        .map(|(call, g)| {
            // Known only when every member's traffic was seen, on one communicator.
            let communicator = match (g.without_comm, g.comms.len()) {
                (0, 1) => g.comms.into_iter().next(),
                _ => None,
            };
            CollectiveCall {
                call,
                ranks: RankSet::from_ranks(g.ranks),
                communicator,
                call_sites: g.sites.into_iter().collect(),
                sequence: None,
                root: None,
            }
        })
        .collect();
    // Every collective on one known communicator: a rank elsewhere whose queues list
    // communicators, none of them that one, is not a member and has no part in it.
    let shared = calls
        .first()
        .and_then(|c| c.communicator.as_ref())
        .filter(|k| calls.iter().all(|c| c.communicator.as_ref() == Some(*k)));
    let mut elsewhere: BTreeMap<Elsewhere, Vec<u64>> = BTreeMap::new();
    let mut not_members = Vec::new();
    for (e, ri) in others {
        let Some(r) = job.ranks.get(ri) else { continue };
        let outside = shared.is_some_and(|k| {
            !r.communicators.is_empty() && !r.communicators.iter().any(|c| same_comm(k, c))
        });
        if outside {
            not_members.push(r.rank);
        } else {
            elsewhere.entry(e).or_default().push(r.rank);
        }
    }
    if calls.len() == 1 && elsewhere.is_empty() {
        return None;
    }
    let elsewhere = elsewhere
        .into_iter()
        .map(|(what, ranks)| ElsewhereRanks {
            what,
            ranks: RankSet::from_ranks(ranks),
        })
        .collect();
    Some(CollectiveHang {
        calls,
        elsewhere,
        unknown: RankSet::from_ranks(unknown),
        not_members: RankSet::from_ranks(not_members),
    })
}

/// Whether `c` is the communicator `k` names (as the analysis matches communicators: by
/// context id when known, else by name and size).
fn same_comm(k: &CommRef, c: &super::CommQueues) -> bool {
    match k.context_id {
        Some(id) => c.context_id == Some(id),
        None => c.context_id.is_none() && c.name == k.name && c.size == k.size,
    }
}
