//! Questions asked of a tree: which ranks have identical stacks, and which moved between two
//! samples.

use super::ranges::Ranges;
use super::tree::{NodeId, NodeKey, StackTree};
use crate::ranks::RankSet;
use std::collections::{BTreeSet, HashMap};

/// Ranks with identical stacks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EquivalenceClass {
    /// The ranks.
    pub ranks: RankSet,
    /// Their stacks: one call path per distinct thread stack, outermost frame first, sorted.
    pub stacks: Vec<Vec<NodeKey>>,
}

/// What changed between two samples, per rank.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StackDiff {
    /// Ranks in both samples whose stacks differ.
    pub moved: RankSet,
    /// Ranks in both samples whose stacks are identical (did not move).
    pub stayed: RankSet,
    /// Ranks with stacks only in the later sample.
    pub appeared: RankSet,
    /// Ranks with stacks only in the earlier sample.
    pub vanished: RankSet,
}

impl StackTree {
    /// The ranks grouped by identical stacks (their threads end at the same nodes), in order
    /// of their lowest rank. Thread multiplicity is not compared: two
    /// ranks whose threads take the same paths, one of them with two threads on a path, are in
    /// one class.
    pub fn classes(&self) -> Vec<EquivalenceClass> {
        self.class_ranges()
            .into_iter()
            .map(|(ranks, stacks)| EquivalenceClass {
                ranks: ranks.to_rank_set(),
                stacks,
            })
            .collect()
    }

    /// The classes as ranges with their stacks. A rank's stacks are the nodes where its
    /// threads end, so one sweep over the boundaries of every node's `ends` ranges finds the
    /// runs of ranks that end at the same nodes: time in ranges and nodes, never in ranks.
    pub(crate) fn class_ranges(&self) -> Vec<(Ranges, Vec<Vec<NodeKey>>)> {
        // (position, 0 = a range ends before it / 1 = a range starts at it, node); u128 so
        // that a range ending at u64::MAX has a position after it.
        let mut events: Vec<(u128, u8, usize)> = Vec::new();
        for (id, node) in self.nodes() {
            for &(a, b) in node.ends.ranges() {
                events.push((u128::from(a), 1, id.index()));
                events.push((u128::from(b) + 1, 0, id.index()));
            }
        }
        events.sort_unstable();
        let mut by_ends: HashMap<Vec<usize>, Ranges> = HashMap::new();
        let mut active: BTreeSet<usize> = BTreeSet::new();
        let mut from = 0u128;
        let mut it = events.iter().peekable();
        while let Some(&&(pos, _, _)) = it.peek() {
            if !active.is_empty() && from < pos {
                let (a, b) = (u64::try_from(from), u64::try_from(pos - 1));
                if let (Ok(a), Ok(b)) = (a, b) {
                    let key: Vec<usize> = active.iter().copied().collect();
                    by_ends.entry(key).or_default().push_ordered(a, b);
                }
            }
            while let Some(&&(p, start, id)) = it.peek() {
                if p != pos {
                    break;
                }
                if start == 1 {
                    active.insert(id);
                } else {
                    active.remove(&id);
                }
                it.next();
            }
            from = pos;
        }
        // Ranks whose every thread was cut at the node limit end nowhere: one class.
        let mut ended = Ranges::default();
        for r in by_ends.values() {
            ended.add(r);
        }
        let nowhere = self.root().ranks.difference(&ended);
        let mut classes: Vec<(Ranges, Vec<Vec<NodeKey>>)> = by_ends
            .into_iter()
            .map(|(ids, ranks)| {
                let mut stacks: Vec<Vec<NodeKey>> = ids
                    .into_iter()
                    .map(|id| self.path(NodeId(id)).into_iter().cloned().collect())
                    .collect();
                stacks.sort();
                (ranks, stacks)
            })
            .collect();
        if !nowhere.is_empty() {
            classes.push((nowhere, Vec::new()));
        }
        classes.sort_by_key(|(r, _)| r.first());
        classes
    }

    /// The call paths (outermost frame first) where `rank`'s threads end, one per distinct
    /// path; empty if the rank has no stacks here.
    pub fn stacks_of(&self, rank: u64) -> Vec<Vec<&NodeKey>> {
        let one = Ranges::one(rank);
        self.nodes()
            .filter(|(_, n)| !n.ends.intersection(&one).is_empty())
            .map(|(id, _)| self.path(id))
            .collect()
    }

    /// Per rank, whether its stacks changed from this (earlier) sample to `later`.
    pub fn diff(&self, later: &StackTree) -> StackDiff {
        diff(self, later)
    }
}

/// Per rank, whether its stacks changed from `earlier` to `later` (for `--samples N`: the
/// ranks that stayed did not move across samples).
pub fn diff(earlier: &StackTree, later: &StackTree) -> StackDiff {
    let (e, l) = (&earlier.root().ranks, &later.root().ranks);
    let both = e.intersection(l);
    let stayed = stayed(earlier, later);
    StackDiff {
        moved: both.difference(&stayed).to_rank_set(),
        stayed: stayed.to_rank_set(),
        appeared: l.difference(e).to_rank_set(),
        vanished: e.difference(l).to_rank_set(),
    }
}

/// The ranks whose stacks are the same in every sample (in order): they did not move. With
/// fewer than two samples, every rank of the one sample (or none).
pub fn unmoved(samples: &[StackTree]) -> RankSet {
    let Some(first) = samples.first() else {
        return RankSet::new();
    };
    let mut still = first.root().ranks.clone();
    for pair in samples.windows(2) {
        if let [a, b] = pair {
            still = still.intersection(&stayed(a, b));
        }
    }
    still.to_rank_set()
}

/// Ranks in both trees with identical stacks.
fn stayed(earlier: &StackTree, later: &StackTree) -> Ranges {
    let mut by_stacks: HashMap<Vec<Vec<NodeKey>>, Ranges> = HashMap::new();
    for (ranks, stacks) in later.class_ranges() {
        // Classes are told apart by the nodes ranks pass through; after a node-limit cut two
        // of them can end on the same paths.
        by_stacks.entry(stacks).or_default().add(&ranks);
    }
    let mut stayed = Ranges::default();
    for (ranks, stacks) in earlier.class_ranges() {
        if let Some(same) = by_stacks.get(&stacks) {
            stayed.add(&ranks.intersection(same));
        }
    }
    stayed
}
