//! Confirmation over several snapshots: a cycle counts only if its waiting operations, and the
//! places its ranks' stacks show, are the same in every one of them; a collective mismatch only
//! if every rank of known activity stayed at the same place.

use std::collections::{HashMap, HashSet};

use super::activity::same_place;
use super::report::{DeadlockReport, RankState, Wait};
use super::{AnalysisError, JobSnapshot, MAX_NOTES, analyze};
use crate::mqd::{OpClass, Peer};
use crate::stacks::{CallSite, RankActivity};

/// Where a waiting rank's stack is: call, frame name, thread, call site (`None`: not known).
type Place = Option<(String, String, u32, Option<CallSite>)>;

/// What identifies a waiting operation across snapshots: rank, communicator, queue, peer, tag,
/// buffer, and the place its rank's stacks show.
type OpKey = (u64, u64, OpClass, (u8, u64), Option<i64>, u64, Place);

fn key(w: &Wait) -> OpKey {
    let peer = match w.op.peer {
        Peer::Any => (0, 0),
        Peer::Rank(p) => (1, p),
        Peer::Unknown(v) => (2, v as u64),
    };
    (
        w.rank,
        w.op.comm_unique_id,
        w.op.class,
        peer,
        w.op.tag,
        w.op.buffer,
        w.blocked_in
            .as_ref()
            .map(|c| (c.call.clone(), c.symbol.clone(), c.tid, c.call_site.clone())),
    )
}

/// Whether every rank of known activity in `first` is at the same place in every other
/// snapshot.
fn activities_stay(first: &JobSnapshot, rest: &[JobSnapshot]) -> bool {
    fn known(r: &super::RankSnapshot) -> Option<&RankActivity> {
        r.activity
            .as_ref()
            .filter(|a| !matches!(a, RankActivity::Unknown(_)))
    }
    let later = super::activity::by_rank(rest);
    first.ranks.iter().all(|r| {
        known(r).is_none_or(|a| {
            later
                .iter()
                .all(|m| m.get(&r.rank).is_some_and(|b| same_place(a, b)))
        })
    })
}

/// Per cycle: the sorted keys of its waits that cannot end.
fn cycle_signatures(r: &DeadlockReport) -> Vec<Vec<OpKey>> {
    let mut sigs = vec![Vec::new(); r.cycles.len()];
    for w in r.waits.iter().filter(|w| !w.can_complete) {
        if let RankState::InCycle { cycle } = w.state
            && let Some(s) = sigs.get_mut(cycle)
        {
            s.push(key(w));
        }
    }
    for s in &mut sigs {
        s.sort_unstable();
    }
    sigs
}

/// Per blocked rank: the sorted keys of its waits that cannot end.
fn blocked_signatures(r: &DeadlockReport) -> HashMap<u64, Vec<OpKey>> {
    let mut sigs: HashMap<u64, Vec<OpKey>> = HashMap::new();
    for w in r.waits.iter().filter(|w| !w.can_complete) {
        if w.state == RankState::BlockedByDeadlock {
            sigs.entry(w.rank).or_default().push(key(w));
        }
    }
    for s in sigs.values_mut() {
        s.sort_unstable();
    }
    sigs
}

/// Analyses every snapshot and keeps the cycles of the first that every other snapshot shows
/// with the same waiting operations (rank, communicator, queue, peer, tag and buffer) and,
/// for ranks whose stacks are given, the same place (the same MPI call entered by the same
/// thread from the same call site): a ring that progresses between snapshots is never
/// reported. Blocked ranks are kept likewise, and only while a cycle is. The collective
/// mismatch of the first snapshot is kept when every rank of known activity is at the same
/// place in every snapshot (see the [module documentation](super)). With two snapshots or
/// more, what remains is confirmed: [`Verdict::Deadlock`](super::Verdict::Deadlock) or
/// [`Verdict::CollectiveMismatch`](super::Verdict::CollectiveMismatch); ranks of dropped
/// cycles are reported as [`RankState::Progressing`].
///
/// # Errors
/// [`AnalysisError::NoSamples`] for an empty slice; any error of [`analyze`].
pub fn confirm(samples: &[JobSnapshot]) -> Result<DeadlockReport, AnalysisError> {
    let (first, rest) = samples.split_first().ok_or(AnalysisError::NoSamples)?;
    let mut report = analyze(first)?;
    let others: Vec<DeadlockReport> = rest.iter().map(analyze).collect::<Result<_, _>>()?;
    let other_cycles: Vec<HashSet<Vec<OpKey>>> = others
        .iter()
        .map(|r| cycle_signatures(r).into_iter().collect())
        .collect();
    let other_blocked: Vec<HashMap<u64, Vec<OpKey>>> =
        others.iter().map(blocked_signatures).collect();

    let sigs = cycle_signatures(&report);
    let mut renumber: Vec<Option<usize>> = vec![None; report.cycles.len()];
    let mut kept = 0;
    for (i, s) in sigs.iter().enumerate() {
        if other_cycles.iter().all(|set| set.contains(s))
            && let Some(x) = renumber.get_mut(i)
        {
            *x = Some(kept);
            kept += 1;
        }
    }
    let dropped = report.cycles.len() - kept;
    let cycles = std::mem::take(&mut report.cycles);
    report.cycles = cycles
        .into_iter()
        .zip(&renumber)
        .filter_map(|(c, n)| n.map(|_| c))
        .collect();

    let blocked_sigs = blocked_signatures(&report);
    // Blocked ranks rest on a kept cycle, or on ranks that finalized or exited (which stay so).
    let finished = first.ranks.iter().any(|r| {
        r.activity
            .as_ref()
            .is_some_and(RankActivity::starts_nothing_more)
    });
    let keep_blocked = |rank: u64| {
        (kept > 0 || finished)
            && blocked_sigs.get(&rank).is_some_and(|s| {
                other_blocked
                    .iter()
                    .all(|m| m.get(&rank).is_some_and(|o| o == s))
            })
    };
    report.blocked.retain(|b| keep_blocked(b.rank));
    for w in &mut report.waits {
        w.state = match w.state {
            RankState::InCycle { cycle } => match renumber.get(cycle).copied().flatten() {
                Some(c) => RankState::InCycle { cycle: c },
                None => RankState::Progressing,
            },
            RankState::BlockedByDeadlock if keep_blocked(w.rank) => RankState::BlockedByDeadlock,
            _ => RankState::Progressing,
        };
    }
    let mut texts = Vec::new();
    if !report.collective.is_empty() && !activities_stay(first, rest) {
        report.collective.clear();
        texts.push(
            "the collective mismatch of the first snapshot changed in a later one (a rank moved) and was dropped"
                .to_string(),
        );
    }
    // The stacks-only account, with "unmoved" judged over every sample.
    report.stack_waits = super::stuck::find(first, rest, &report, &super::on_unknown(first)?);
    report.samples = samples.len();
    report.verdict = report.verdict_for(samples.len());
    if dropped > 0 {
        texts.insert(0, format!(
            "{dropped} cycle(s) of the first snapshot changed in a later one (the job progressed) and were dropped"
        ));
    }
    for (i, text) in texts.into_iter().enumerate() {
        if report.notes.len() < MAX_NOTES {
            report.notes.insert(i, text);
        } else {
            report.notes_omitted += 1;
        }
    }
    Ok(report)
}
