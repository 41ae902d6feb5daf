//! Questions asked of a tree: which ranks have identical stacks, and which moved between two
//! samples.

use super::ranges::Ranges;
use super::tree::{NodeKey, StackTree};
use crate::ranks::RankSet;
use std::collections::HashMap;

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
    /// The ranks grouped by identical stacks (the same set of call paths, each ending at the
    /// same node), in order of their lowest rank. Thread multiplicity is not compared: two
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

    pub(crate) fn class_ranges(&self) -> Vec<(Ranges, Vec<Vec<NodeKey>>)> {
        let root = self.root();
        let mut parts: Vec<Ranges> = Vec::new();
        if !root.ranks.is_empty() {
            parts.push(root.ranks.clone());
        }
        for (_, node) in self.nodes() {
            for split in [&node.ranks, &node.ends] {
                let mut next = Vec::with_capacity(parts.len());
                for p in parts {
                    let inside = p.intersection(split);
                    if inside.is_empty() {
                        next.push(p);
                        continue;
                    }
                    let outside = p.difference(split);
                    next.push(inside);
                    if !outside.is_empty() {
                        next.push(outside);
                    }
                }
                parts = next;
            }
        }
        parts.sort_by_key(Ranges::first);
        parts
            .into_iter()
            .map(|p| {
                let rep = p.first().unwrap_or_default();
                let mut stacks: Vec<Vec<NodeKey>> = self
                    .nodes()
                    .filter(|(_, n)| n.ends.contains(rep))
                    .map(|(id, _)| self.path(id).into_iter().cloned().collect())
                    .collect();
                stacks.sort();
                (p, stacks)
            })
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
    let mut by_stacks: HashMap<Vec<Vec<NodeKey>>, Ranges> = HashMap::new();
    for (ranks, stacks) in later.class_ranges() {
        // Classes are told apart by the nodes ranks pass through; after a node-limit cut two
        // of them can end on the same paths.
        let entry = by_stacks.entry(stacks).or_default();
        *entry = entry.union(&ranks);
    }
    let mut stayed = Ranges::default();
    for (ranks, stacks) in earlier.class_ranges() {
        if let Some(same) = by_stacks.get(&stacks) {
            stayed = stayed.union(&ranks.intersection(same));
        }
    }
    StackDiff {
        moved: both.difference(&stayed).to_rank_set(),
        stayed: stayed.to_rank_set(),
        appeared: l.difference(e).to_rank_set(),
        vanished: e.difference(l).to_rank_set(),
    }
}
