//! Collective hangs seen in the stacks: the collectives and their ranks, and where the other
//! ranks are.

use std::fmt;

use super::waits::CommRef;
use crate::ranks::RankSet;
use crate::stacks::CallSite;

/// Ranks in one collective call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CollectiveCall {
    /// The call's C name (without a large-count `_c`); `MPI_Finalize` for ranks finalizing.
    pub call: String,
    /// The ranks in it.
    pub ranks: RankSet,
    /// The communicator, when the queues show it: every one of these ranks has its pending
    /// collective traffic (negative tags, or an internal communicator) on this one
    /// communicator. `None`: unknown.
    pub communicator: Option<CommRef>,
    /// Where the ranks called it from (distinct, sorted, at most [`MAX_LISTED_CANDIDATES`](crate::deadlock::MAX_LISTED_CANDIDATES)).
    pub call_sites: Vec<CallSite>,
    /// Its number among the collectives on its communicator, when the wait-state export
    /// says it.
    #[cfg_attr(feature = "serde", serde(default))]
    pub sequence: Option<u32>,
    /// Its root, when the wait-state export says it (rooted collectives).
    #[cfg_attr(feature = "serde", serde(default))]
    pub root: Option<u64>,
}

/// Where ranks that are not in a collective are.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Elsewhere {
    /// In an MPI call that is not a collective (point-to-point, a wait, …).
    InMpi {
        /// The call's C name.
        call: String,
    },
    /// Not inside MPI.
    NotInMpi,
    /// Returned from `MPI_Finalize`.
    Finalized,
    /// The process is gone.
    Exited,
}

impl fmt::Display for Elsewhere {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elsewhere::InMpi { call } => write!(f, "in {call}"),
            Elsewhere::NotInMpi => f.write_str("not inside MPI"),
            Elsewhere::Finalized => f.write_str("finalized"),
            Elsewhere::Exited => f.write_str("exited"),
        }
    }
}

/// Ranks at one place outside every collective.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ElsewhereRanks {
    /// Where they are.
    pub what: Elsewhere,
    /// The ranks.
    pub ranks: RankSet,
}

/// A collective hang seen in the stacks: ranks in different collectives, or some in a
/// collective while others are elsewhere (see the [module documentation](crate::deadlock)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CollectiveHang {
    /// The collectives and their ranks, by call name.
    pub calls: Vec<CollectiveCall>,
    /// The other ranks whose activity is known, by place.
    pub elsewhere: Vec<ElsewhereRanks>,
    /// Ranks of the snapshot whose activity is unknown (not considered). Absent from JSON when
    /// empty (a rank list is never empty text).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub unknown: RankSet,
    /// Ranks of known activity outside every collective that are not members of the one
    /// communicator all the collectives are known to be on (their queues list communicators,
    /// none of them that one): not part of the hang. Absent from JSON when empty.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "RankSet::is_empty")
    )]
    pub not_members: RankSet,
}

impl fmt::Display for CollectiveHang {
    /// `ranks 0-2 in MPI_Barrier; rank 3 in MPI_Reduce; rank 4 not inside MPI`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranks = |s: &RankSet| {
            let t = s.to_string();
            if t.contains([',', '-']) {
                format!("ranks {t}")
            } else {
                format!("rank {t}")
            }
        };
        let mut parts = Vec::new();
        for c in &self.calls {
            let on = c
                .communicator
                .as_ref()
                .map_or_else(String::new, |m| format!(" on {m}"));
            let nth = c
                .sequence
                .map_or_else(String::new, |n| format!(" (its collective #{n})"));
            let root = c.root.map_or_else(String::new, |r| format!(", root {r}"));
            parts.push(format!("{} in {}{root}{on}{nth}", ranks(&c.ranks), c.call));
        }
        for e in &self.elsewhere {
            parts.push(format!("{} {}", ranks(&e.ranks), e.what));
        }
        f.write_str(&parts.join("; "))
    }
}
