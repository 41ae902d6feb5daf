//! A set of ranks as users write them: `0-3,7,12-` (lists, closed ranges, and a last range open
//! to the end of the job).
//!
//! Kept as sorted, merged, inclusive ranges, so a selection of a million ranks is a few bytes
//! and `contains` is a binary search; nothing is expanded until iterated within a job's size.

use std::fmt;
use std::str::FromStr;

/// Why a rank list could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RankSetError {
    /// The list is empty.
    #[error("empty rank list")]
    Empty,
    /// One comma-separated piece is not a rank or a range.
    #[error("rank list {list:?}: {piece:?} {problem}")]
    BadPiece {
        /// The whole list.
        list: String,
        /// The piece at fault.
        piece: String,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// A set of ranks: sorted, merged inclusive ranges; the last may be open (`12-`: rank 12 and
/// every rank after it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RankSet {
    /// (first, last) inclusive; `last` = `u64::MAX` for an open range.
    ranges: Vec<(u64, u64)>,
}

impl RankSet {
    /// No rank.
    pub fn new() -> Self {
        RankSet::default()
    }

    /// Every rank (`0-`).
    pub fn all() -> Self {
        RankSet {
            ranges: vec![(0, u64::MAX)],
        }
    }

    /// These ranks.
    pub fn from_ranks(ranks: impl IntoIterator<Item = u64>) -> Self {
        let mut s = RankSet::new();
        for r in ranks {
            s.ranges.push((r, r));
        }
        s.normalise();
        s
    }

    /// With ranks `first..=last` added.
    pub fn with_range(mut self, first: u64, last: u64) -> Self {
        if first <= last {
            self.ranges.push((first, last));
            self.normalise();
        }
        self
    }

    fn normalise(&mut self) {
        self.ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.ranges.len());
        for &(a, b) in &self.ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.ranges = merged;
    }

    /// The ranks of both sets.
    pub fn union(&self, other: &RankSet) -> RankSet {
        let mut s = RankSet {
            ranges: self.ranges.iter().chain(&other.ranges).copied().collect(),
        };
        s.normalise();
        s
    }

    /// Whether `rank` is in the set.
    pub fn contains(&self, rank: u64) -> bool {
        let i = self.ranges.partition_point(|&(a, _)| a <= rank);
        i > 0 && self.ranges.get(i - 1).is_some_and(|&(_, b)| rank <= b)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The ranks of the set below `size` (a job's size), in order.
    pub fn iter_within(&self, size: u64) -> impl Iterator<Item = u64> + '_ {
        self.ranges
            .iter()
            .filter(move |&&(a, _)| a < size)
            .flat_map(move |&(a, b)| a..=b.min(size - 1))
    }

    /// How many ranks below `size` the set holds.
    pub fn count_within(&self, size: u64) -> u64 {
        self.ranges
            .iter()
            .filter(|&&(a, _)| a < size)
            .map(|&(a, b)| b.min(size - 1) - a + 1)
            .sum()
    }
}

impl From<Vec<u64>> for RankSet {
    fn from(v: Vec<u64>) -> Self {
        RankSet::from_ranks(v)
    }
}

impl FromStr for RankSet {
    type Err = RankSetError;

    /// Parses `0-3,7,12-`: ranks and inclusive ranges separated by commas (blanks around
    /// pieces allowed); `N-` is open to the end of the job.
    fn from_str(list: &str) -> Result<Self, Self::Err> {
        if list.trim().is_empty() {
            return Err(RankSetError::Empty);
        }
        let bad = |piece: &str, problem| RankSetError::BadPiece {
            list: list.to_string(),
            piece: piece.to_string(),
            problem,
        };
        let number = |piece: &str, s: &str| -> Result<u64, RankSetError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(
                    piece,
                    "is not a rank (a number ≥ 0) or a range (A-B, A-)",
                ));
            }
            s.parse().map_err(|_| bad(piece, "is too large"))
        };
        let mut set = RankSet::new();
        for piece in list.split(',') {
            let p = piece.trim();
            if p.is_empty() {
                return Err(bad(piece, "is empty"));
            }
            let (first, last) = match p.split_once('-') {
                None => {
                    let r = number(piece, p)?;
                    (r, r)
                }
                Some((a, b)) => {
                    let a = number(piece, a)?;
                    let b = if b.trim().is_empty() {
                        u64::MAX
                    } else {
                        number(piece, b)?
                    };
                    if b < a {
                        return Err(bad(piece, "is a range whose end is before its start"));
                    }
                    (a, b)
                }
            };
            set.ranges.push((first, last));
        }
        set.normalise();
        Ok(set)
    }
}

impl fmt::Display for RankSet {
    /// The compact form: `0-3,7,12-`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match (a, b) {
                (a, u64::MAX) => write!(f, "{a}-")?,
                (a, b) if a == b => write!(f, "{a}")?,
                (a, b) => write!(f, "{a}-{b}")?,
            }
        }
        Ok(())
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for RankSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for RankSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lists_ranges_and_open_ranges() {
        let s: RankSet = "0-3,7,12-".parse().unwrap();
        for r in [0, 1, 3, 7, 12, 13, 1_000_000, u64::MAX] {
            assert!(s.contains(r), "{r}");
        }
        for r in [4, 6, 8, 11] {
            assert!(!s.contains(r), "{r}");
        }
        assert_eq!(s.to_string(), "0-3,7,12-");
        assert_eq!(
            s.iter_within(14).collect::<Vec<_>>(),
            [0, 1, 2, 3, 7, 12, 13]
        );
        assert_eq!(s.count_within(14), 7);
        assert_eq!(s.count_within(2), 2);
        assert_eq!(s.iter_within(0).count(), 0);
        // Overlaps and neighbours merge; order and blanks do not matter.
        let m: RankSet = " 5 , 3-4,0-1,2 ,4-6".parse().unwrap();
        assert_eq!(m.to_string(), "0-6");
        assert_eq!(RankSet::all().to_string(), "0-");
        assert_eq!(RankSet::from(vec![3, 1, 2, 9]).to_string(), "1-3,9");
    }

    #[test]
    fn bad_lists_name_the_piece() {
        assert_eq!("".parse::<RankSet>(), Err(RankSetError::Empty));
        for (list, piece) in [
            ("1,,2", ""),
            ("1,a", "a"),
            ("3-1", "3-1"),
            ("-3", "-3"),
            ("1-2-3", "1-2-3"),
            ("99999999999999999999999", "99999999999999999999999"),
            ("+1", "+1"),
            ("1,", ""),
        ] {
            match list.parse::<RankSet>() {
                Err(RankSetError::BadPiece { piece: p, .. }) => assert_eq!(p, piece, "{list}"),
                other => panic!("{list}: {other:?}"),
            }
        }
        let e = "0,x".parse::<RankSet>().unwrap_err().to_string();
        assert!(e.contains("\"x\"") && e.contains("not a rank"), "{e}");
    }

    proptest! {
        #[test]
        #[cfg_attr(
            miri,
            ignore = "proptest's failure file needs the working directory, which Miri's isolation forbids"
        )]
        fn contains_agrees_with_a_plain_set(ranks in prop::collection::vec(0u64..200, 0..60)) {
            let s = RankSet::from_ranks(ranks.iter().copied());
            let plain: std::collections::BTreeSet<u64> = ranks.iter().copied().collect();
            for r in 0..210 {
                prop_assert_eq!(s.contains(r), plain.contains(&r));
            }
            prop_assert_eq!(s.iter_within(210).collect::<Vec<_>>(), plain.iter().copied().collect::<Vec<_>>());
            // The compact form parses back to the same set.
            if !s.is_empty() {
                prop_assert_eq!(s.to_string().parse::<RankSet>().unwrap(), s);
            }
        }
    }
}
