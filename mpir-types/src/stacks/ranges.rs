//! Sorted, disjoint, inclusive rank ranges with the set operations the trees need (union,
//! intersection, difference) in time linear in the number of ranges, never in ranks.
//!
//! [`RankSet`] keeps the same shape but exposes no ranges; the trees convert at their public
//! boundary (through the compact text form both share).

use crate::ranks::RankSet;
use std::fmt;

/// Sorted, disjoint, non-adjacent inclusive ranges; never open (every end is a real rank).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub(crate) struct Ranges(Vec<(u64, u64)>);

impl Ranges {
    pub(crate) fn one(rank: u64) -> Self {
        Ranges(vec![(rank, rank)])
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many ranks (saturating).
    pub(crate) fn count(&self) -> u64 {
        self.0
            .iter()
            .fold(0u64, |n, &(a, b)| n.saturating_add(b - a).saturating_add(1))
    }

    /// How many ranges.
    pub(crate) fn pieces(&self) -> usize {
        self.0.len()
    }

    /// The inclusive ranges, in order.
    pub(crate) fn ranges(&self) -> &[(u64, u64)] {
        &self.0
    }

    /// Adds `first..=last`, which must not start before the last range does (sweeps).
    pub(crate) fn push_ordered(&mut self, first: u64, last: u64) {
        push_merged(&mut self.0, (first, last));
    }

    pub(crate) fn first(&self) -> Option<u64> {
        self.0.first().map(|r| r.0)
    }

    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().flat_map(|&(a, b)| a..=b)
    }

    pub(crate) fn union(&self, other: &Ranges) -> Ranges {
        let mut all: Vec<(u64, u64)> = Vec::with_capacity(self.0.len() + other.0.len());
        let (mut i, mut j) = (self.0.iter().peekable(), other.0.iter().peekable());
        loop {
            let next = match (i.peek(), j.peek()) {
                (Some(&&x), Some(&&y)) => {
                    if x <= y {
                        i.next();
                        x
                    } else {
                        j.next();
                        y
                    }
                }
                (Some(&&x), None) => {
                    i.next();
                    x
                }
                (None, Some(&&y)) => {
                    j.next();
                    y
                }
                (None, None) => break,
            };
            push_merged(&mut all, next);
        }
        Ranges(all)
    }

    /// Adds `other` in place. Ranks arriving in order (the usual case: ranks are built and
    /// merged in rank order) append in constant time; one range elsewhere is one insertion;
    /// anything else is a [`union`](Self::union).
    pub(crate) fn add(&mut self, other: &Ranges) {
        let (Some(&(last_a, _)), Some(&(first, last))) = (self.0.last(), other.0.first()) else {
            if self.0.is_empty() {
                self.0.clone_from(&other.0);
            }
            return;
        };
        if first >= last_a {
            for &r in &other.0 {
                push_merged(&mut self.0, r);
            }
        } else if other.0.len() == 1 {
            // The ranges that touch or overlap first..=last collapse into one.
            let lo = self
                .0
                .partition_point(|&(_, b)| b.saturating_add(1) < first);
            let hi = self
                .0
                .partition_point(|&(a, _)| a <= last.saturating_add(1));
            let (mut a, mut b) = (first, last);
            if lo < hi
                && let (Some(&(x, _)), Some(&(_, y))) = (self.0.get(lo), self.0.get(hi - 1))
            {
                a = a.min(x);
                b = b.max(y);
            }
            self.0.splice(lo..hi.max(lo), [(a, b)]);
        } else {
            *self = self.union(other);
        }
    }

    pub(crate) fn intersection(&self, other: &Ranges) -> Ranges {
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while let (Some(&(a, b)), Some(&(c, d))) = (self.0.get(i), other.0.get(j)) {
            let (lo, hi) = (a.max(c), b.min(d));
            if lo <= hi {
                out.push((lo, hi));
            }
            if b < d {
                i += 1;
            } else {
                j += 1;
            }
        }
        Ranges(out)
    }

    pub(crate) fn difference(&self, other: &Ranges) -> Ranges {
        let mut out = Vec::new();
        let mut j = 0;
        for &(a, b) in &self.0 {
            let mut start = a;
            let mut done = false;
            while let Some(&(c, d)) = other.0.get(j) {
                if d < start {
                    j += 1;
                    continue;
                }
                if c > b {
                    break;
                }
                if c > start {
                    out.push((start, c - 1));
                }
                if d >= b {
                    done = true;
                    break;
                }
                start = d + 1;
                j += 1;
            }
            if !done {
                out.push((start, b));
            }
        }
        Ranges(out)
    }

    pub(crate) fn to_rank_set(&self) -> RankSet {
        if self.0.is_empty() {
            return RankSet::new();
        }
        // The text form is shared with RankSet and parses back exactly.
        self.to_string().parse().unwrap_or_default()
    }

    /// From a rank set; `None` if it has an open range (`N-`), which a tree never holds.
    pub(crate) fn from_rank_set(set: &RankSet) -> Option<Ranges> {
        let text = set.to_string();
        let mut out = Vec::new();
        for piece in text.split(',').filter(|p| !p.is_empty()) {
            let (a, b) = match piece.split_once('-') {
                None => {
                    let r = piece.parse().ok()?;
                    (r, r)
                }
                Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            };
            out.push((a, b));
        }
        Some(Ranges(out))
    }
}

fn push_merged(all: &mut Vec<(u64, u64)>, (a, b): (u64, u64)) {
    match all.last_mut() {
        Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
        _ => all.push((a, b)),
    }
}

impl FromIterator<u64> for Ranges {
    fn from_iter<I: IntoIterator<Item = u64>>(it: I) -> Self {
        let mut v: Vec<u64> = it.into_iter().collect();
        v.sort_unstable();
        let mut all = Vec::new();
        for r in v {
            push_merged(&mut all, (r, r));
        }
        Ranges(all)
    }
}

impl fmt::Display for Ranges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        #[cfg_attr(
            miri,
            ignore = "proptest's failure file needs the working directory, which Miri's isolation forbids"
        )]
        fn set_operations_agree_with_plain_sets(
            a in prop::collection::vec(0u64..100, 0..40),
            b in prop::collection::vec(0u64..100, 0..40),
        ) {
            let (ra, rb): (Ranges, Ranges) = (a.iter().copied().collect(), b.iter().copied().collect());
            let (sa, sb): (BTreeSet<u64>, BTreeSet<u64>) = (a.into_iter().collect(), b.iter().copied().collect());
            prop_assert_eq!(ra.union(&rb).iter().collect::<Vec<_>>(), sa.union(&sb).copied().collect::<Vec<_>>());
            prop_assert_eq!(ra.intersection(&rb).iter().collect::<Vec<_>>(), sa.intersection(&sb).copied().collect::<Vec<_>>());
            prop_assert_eq!(ra.difference(&rb).iter().collect::<Vec<_>>(), sa.difference(&sb).copied().collect::<Vec<_>>());
            prop_assert_eq!(ra.count(), sa.len() as u64);
            // In-place adding agrees with union, one range or many, in order or not.
            let mut added = ra.clone();
            added.add(&rb);
            prop_assert_eq!(&added, &ra.union(&rb));
            for &r in &b {
                let mut one = ra.clone();
                one.add(&Ranges::one(r));
                prop_assert_eq!(one, ra.union(&Ranges::one(r)));
            }
            let span: Ranges = (b.first().copied().unwrap_or(0)..b.first().copied().unwrap_or(0) + 7).collect();
            let mut spanned = ra.clone();
            spanned.add(&span);
            prop_assert_eq!(spanned, ra.union(&span));
            // Canonical: the same set has one representation, and RankSet agrees on the text.
            prop_assert_eq!(ra.union(&rb), rb.union(&ra));
            prop_assert_eq!(Ranges::from_rank_set(&ra.to_rank_set()).unwrap(), ra.clone());
            prop_assert_eq!(ra.to_rank_set().to_string(), ra.to_string());
        }
    }

    #[test]
    fn stays_compact_at_a_million_ranks() {
        // Whole chunks of 1000 ranks, as agents would send them (fewer under Miri).
        let chunks = if cfg!(miri) { 10 } else { 1000u64 };
        let mut r = Ranges::default();
        for chunk in 0..chunks {
            r.add(&Ranges(vec![(chunk * 1000, chunk * 1000 + 999)]));
        }
        assert_eq!(r.pieces(), 1);
        assert_eq!(r.count(), chunks * 1000);
        assert_eq!(
            r.to_rank_set().to_string(),
            format!("0-{}", chunks * 1000 - 1)
        );
        // Every other rank: one piece each, and counts stay exact.
        let odd: Ranges = (0..2000u64).filter(|r| r % 2 == 1).collect();
        assert_eq!((odd.pieces(), odd.count()), (1000, 1000));
    }
}
